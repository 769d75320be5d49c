//! Re-sorting a `rollups` table of an earlier version (sorted by campaign first) by
//! scope, grain and bucket first ([`rm_schemas::tables::ROLLUPS`]), at the
//! aggregator's start, before it writes a tally (run by the writer only: the api
//! reads either order).
//!
//! Sorted by campaign first, a report's read of one scope and grain over a few days
//! narrowed the table only to its campaigns: it read every scope, grain and day those
//! campaigns ever had, and so grew with the table's history. Sorted by scope, grain
//! and bucket first, it reads the granules of its range.
//!
//! **Nothing is lost, whatever stops a conversion.** A copy of a tally row is
//! harmless: rows of one key and stamp are equal, and every read takes `argMax(value,
//! stamp)`. So each step copies rather than moves, and a table is dropped only after
//! its rows were copied whole. The steps: create [`SORTED`]; copy `rollups` into it;
//! rename `rollups` to [`PRESORT`] and [`SORTED`] to `rollups` in one statement; copy
//! [`PRESORT`] into `rollups` again (the rows a writer of the earlier version added
//! during the first copy); drop it. A start first copies any table an interrupted
//! conversion left into `rollups` and drops it, then converts what is still unsorted;
//! two starting at once may make one's step fail, which its start retries. Reads in
//! between see every tally but a writer's rows of the first copy's moment, until the
//! second copy. A `rollups` that is not a `ReplacingMergeTree` (a cluster's
//! `Distributed` table) is left alone: a cluster is re-sorted by hand (README).

use clickhouse::{Client, Row};
use serde::Deserialize;

use super::error::ch;
use crate::StoreError;

/// The new table while it is filled.
pub(crate) const SORTED: &str = "rollups_sorted";
/// The earlier table once renamed away.
pub(crate) const PRESORT: &str = "rollups_presort";
/// Every column of `rollups`, in both orders' tables.
const COLUMNS: &str = "campaign_id, scope, grain, bucket, creative, catalog_id, \
                       product_code, log_partition, metric, value, stamp";

#[derive(Row, Deserialize)]
struct TableCh {
    name: String,
    engine: String,
    sorting_key: String,
}

/// Whether `sorting_key` (as `system.tables` shows it) is the current order's.
fn is_sorted(sorting_key: &str) -> bool {
    sorting_key
        .replace(' ', "")
        .starts_with("scope,grain,bucket")
}

async fn tables(client: &Client) -> Result<Vec<TableCh>, StoreError> {
    client
        .query(
            "SELECT name, engine, sorting_key FROM system.tables \
             WHERE database = currentDatabase() AND name IN (?, ?, ?)",
        )
        .bind("rollups")
        .bind(SORTED)
        .bind(PRESORT)
        .fetch_all()
        .await
        .map_err(ch("re-sort rollups: list tables"))
}

async fn run(client: &Client, sql: &str) -> Result<(), StoreError> {
    client
        .query_raw(sql)
        .execute()
        .await
        .map_err(ch("re-sort rollups"))
}

async fn copy_and_drop(client: &Client, from: &str) -> Result<(), StoreError> {
    run(
        client,
        &format!("INSERT INTO rollups ({COLUMNS}) SELECT {COLUMNS} FROM {from}"),
    )
    .await?;
    run(client, &format!("DROP TABLE IF EXISTS {from}")).await
}

/// Converts the store's `rollups` to the current order when it is of an earlier one
/// (see the module header); `true` when it did anything.
pub(crate) async fn sort_rollups(client: &Client) -> Result<bool, StoreError> {
    let found = tables(client).await?;
    let Some(rollups) = found.iter().find(|t| t.name == "rollups") else {
        return Ok(false);
    };
    if rollups.engine != "ReplacingMergeTree" {
        if !is_sorted(&rollups.sorting_key) {
            tracing::warn!(
                engine = rollups.engine,
                "the rollups table is not a ReplacingMergeTree (a cluster's): left as it \
                 is; re-sort its local tables by hand (README)"
            );
        }
        return Ok(false);
    }
    let mut changed = false;
    for left in found.iter().filter(|t| t.name != "rollups") {
        tracing::warn!(
            table = left.name,
            "an interrupted re-sort of the rollups left a table: copying its rows back"
        );
        copy_and_drop(client, &left.name).await?;
        changed = true;
    }
    if is_sorted(&rollups.sorting_key) {
        return Ok(changed);
    }
    tracing::info!(
        sorting_key = rollups.sorting_key,
        "re-sorting the rollups by scope, grain and bucket (once)"
    );
    let ddl = rm_schemas::tables::ROLLUPS.replacen(
        "CREATE TABLE IF NOT EXISTS rollups (",
        &format!("CREATE TABLE IF NOT EXISTS {SORTED} ("),
        1,
    );
    debug_assert!(ddl.contains(SORTED));
    run(client, &ddl).await?;
    run(
        client,
        &format!("INSERT INTO {SORTED} ({COLUMNS}) SELECT {COLUMNS} FROM rollups"),
    )
    .await?;
    run(
        client,
        &format!("RENAME TABLE rollups TO {PRESORT}, {SORTED} TO rollups"),
    )
    .await?;
    copy_and_drop(client, PRESORT).await?;
    tracing::info!("re-sorted the rollups");
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::is_sorted;

    #[test]
    fn the_current_order_is_told_from_the_earlier_one() {
        assert!(is_sorted(
            "scope, grain, bucket, campaign_id, creative, catalog_id, product_code, log_partition, metric"
        ));
        assert!(!is_sorted(
            "campaign_id, scope, grain, bucket, creative, catalog_id, product_code, log_partition, metric"
        ));
    }
}
