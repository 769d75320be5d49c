//! Rebuilding a table an earlier version created with a layout reads no longer want
//! (its sorting key or its index granularity), at the aggregator's start, before it
//! writes (run by the writer only: the api reads either layout). Two tables so far
//! ([`REBUILT`]):
//!
//! - `rollups`, sorted by campaign first before: a report's read of one scope and
//!   grain over a few days narrowed the table only to its campaigns, so it read every
//!   scope, grain and day those campaigns ever had and grew with the table's history.
//!   Sorted by scope, grain and bucket first ([`rm_schemas::tables::ROLLUPS`]), it
//!   reads the granules of its range.
//! - `cart_lines`, with ClickHouse's default 8,192 rows a granule before: a carts
//!   page reads `FINAL` a day or two of one campaign, a few hundred lines in each of
//!   the table's parts, so it read a whole granule of every part (at ten million
//!   records, 42,768 rows and 29-34 ms for a page of 1,000 lines). With 1,024
//!   ([`rm_schemas::tables::CART_LINES`]) the same read is 8,192 rows and 9-11 ms.
//!
//! **Nothing is lost, whatever stops a conversion.** A copy of a row is harmless in
//! both tables: rows of one key and stamp (`rollups`, read with `argMax(value,
//! stamp)`) or of one key and version (`cart_lines`, read `FINAL`) are equal. So each
//! step copies rather than moves, and a table is dropped only after its rows were
//! copied whole. The steps: create the new table; copy the old one into it; rename
//! the old one away and the new one in, in one statement; copy the old one into the
//! new again (the rows a writer of the earlier version added during the first copy);
//! drop it. A start first copies any table an interrupted conversion left back and
//! drops it, then converts what is still of the earlier layout; two starting at once
//! may make one's step fail, which its start retries. Reads in between see every row
//! but a writer's rows of the first copy's moment, until the second copy. A table
//! that is not a `ReplacingMergeTree` (a cluster's `Distributed` table) is left
//! alone: a cluster is converted by hand (README).

use clickhouse::{Client, Row};
use serde::Deserialize;

use super::error::ch;
use crate::StoreError;

/// A table rebuilt when an earlier version's layout is found.
struct Rebuilt {
    /// Its name.
    table: &'static str,
    /// Its current DDL (`CREATE TABLE IF NOT EXISTS <table> (`...).
    ddl: &'static str,
    /// The new table while it is filled.
    fresh: &'static str,
    /// The earlier table once renamed away.
    old: &'static str,
    /// Every column, in both layouts.
    columns: &'static str,
    /// Whether a table (as `system.tables` shows it) has the current layout.
    current: fn(&TableCh) -> bool,
    /// What the rebuild changes, for the log.
    what: &'static str,
}

/// The tables rebuilt, in order.
const REBUILT: [Rebuilt; 2] = [
    Rebuilt {
        table: "rollups",
        ddl: rm_schemas::tables::ROLLUPS,
        fresh: "rollups_sorted",
        old: "rollups_presort",
        columns: "campaign_id, scope, grain, bucket, creative, catalog_id, product_code, \
                  log_partition, metric, value, stamp",
        current: |t| is_sorted(&t.sorting_key),
        what: "sorted by scope, grain and bucket",
    },
    Rebuilt {
        table: "cart_lines",
        ddl: rm_schemas::tables::CART_LINES,
        fresh: "cart_lines_rebuilt",
        old: "cart_lines_previous",
        columns: "campaign_id, day, tracking_id, catalog_id, product_code, version, gone, \
                  last_ms, units, last_value, adds, increments, decrements, removals, \
                  ad_id, ad_id_status",
        current: |t| has_small_granules(&t.engine_full),
        what: "1,024 rows a granule",
    },
];

#[derive(Row, Deserialize)]
struct TableCh {
    name: String,
    engine: String,
    engine_full: String,
    sorting_key: String,
}

/// Whether `sorting_key` (as `system.tables` shows it) is the current order of
/// `rollups`.
fn is_sorted(sorting_key: &str) -> bool {
    sorting_key
        .replace(' ', "")
        .starts_with("scope,grain,bucket")
}

/// Whether `engine_full` (as `system.tables` shows it) has the current granules of
/// `cart_lines`.
fn has_small_granules(engine_full: &str) -> bool {
    engine_full
        .replace(' ', "")
        .contains("index_granularity=1024")
}

async fn tables(client: &Client, r: &Rebuilt) -> Result<Vec<TableCh>, StoreError> {
    client
        .query(
            "SELECT name, engine, engine_full, sorting_key FROM system.tables \
             WHERE database = currentDatabase() AND name IN (?, ?, ?)",
        )
        .bind(r.table)
        .bind(r.fresh)
        .bind(r.old)
        .fetch_all()
        .await
        .map_err(ch("rebuild a table: list tables"))
}

async fn run(client: &Client, sql: &str) -> Result<(), StoreError> {
    client
        .query_raw(sql)
        .execute()
        .await
        .map_err(ch("rebuild a table"))
}

async fn copy_and_drop(client: &Client, r: &Rebuilt, from: &str) -> Result<(), StoreError> {
    let (table, columns) = (r.table, r.columns);
    run(
        client,
        &format!("INSERT INTO {table} ({columns}) SELECT {columns} FROM {from}"),
    )
    .await?;
    run(client, &format!("DROP TABLE IF EXISTS {from}")).await
}

/// Converts every table of [`REBUILT`] of an earlier layout (see the module header);
/// `true` when it did anything.
pub(crate) async fn rebuild_tables(client: &Client) -> Result<bool, StoreError> {
    let mut changed = false;
    for r in &REBUILT {
        changed |= rebuild(client, r).await?;
    }
    Ok(changed)
}

async fn rebuild(client: &Client, r: &Rebuilt) -> Result<bool, StoreError> {
    let found = tables(client, r).await?;
    let Some(table) = found.iter().find(|t| t.name == r.table) else {
        return Ok(false);
    };
    if table.engine != "ReplacingMergeTree" {
        if !(r.current)(table) {
            tracing::warn!(
                table = r.table,
                engine = table.engine,
                "the table is not a ReplacingMergeTree (a cluster's): left as it is; \
                 convert its local tables by hand (README)"
            );
        }
        return Ok(false);
    }
    let mut changed = false;
    for left in found.iter().filter(|t| t.name != r.table) {
        tracing::warn!(
            table = left.name,
            "an interrupted rebuild left a table: copying its rows back"
        );
        copy_and_drop(client, r, &left.name).await?;
        changed = true;
    }
    if (r.current)(table) {
        return Ok(changed);
    }
    tracing::info!(
        table = r.table,
        engine = table.engine_full,
        "rebuilding the table: {} (once)",
        r.what
    );
    let (name, fresh, old, columns) = (r.table, r.fresh, r.old, r.columns);
    let ddl = r.ddl.replacen(
        &format!("CREATE TABLE IF NOT EXISTS {name} ("),
        &format!("CREATE TABLE IF NOT EXISTS {fresh} ("),
        1,
    );
    debug_assert!(ddl.contains(fresh));
    run(client, &ddl).await?;
    run(
        client,
        &format!("INSERT INTO {fresh} ({columns}) SELECT {columns} FROM {name}"),
    )
    .await?;
    run(
        client,
        &format!("RENAME TABLE {name} TO {old}, {fresh} TO {name}"),
    )
    .await?;
    copy_and_drop(client, r, old).await?;
    tracing::info!(table = r.table, "rebuilt the table: {}", r.what);
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_current_order_is_told_from_the_earlier_one() {
        assert!(is_sorted(
            "scope, grain, bucket, campaign_id, creative, catalog_id, product_code, log_partition, metric"
        ));
        assert!(!is_sorted(
            "campaign_id, scope, grain, bucket, creative, catalog_id, product_code, log_partition, metric"
        ));
    }

    #[test]
    fn the_current_granules_are_told_from_the_default() {
        assert!(has_small_granules(
            "ReplacingMergeTree(version) ORDER BY (campaign_id, day) SETTINGS index_granularity = 1024"
        ));
        assert!(!has_small_granules(
            "ReplacingMergeTree(version) ORDER BY (campaign_id, day) SETTINGS index_granularity = 8192"
        ));
    }

    #[test]
    fn every_rebuilt_table_is_created_by_its_ddl_under_its_new_name() {
        for r in &REBUILT {
            assert!(
                r.ddl
                    .starts_with(&format!("CREATE TABLE IF NOT EXISTS {} (", r.table)),
                "{}",
                r.table
            );
            let mut wanted: Vec<&str> = r.columns.split(',').map(str::trim).collect();
            wanted.sort_unstable();
            let body =
                &r.ddl[r.ddl.find('(').unwrap_or(0) + 1..r.ddl.find(") ENGINE").unwrap_or(0)];
            let mut declared: Vec<&str> = body
                .lines()
                .filter_map(|l| l.split_whitespace().next())
                .collect();
            declared.sort_unstable();
            assert_eq!(declared, wanted, "{}: every column is copied", r.table);
        }
    }
}
