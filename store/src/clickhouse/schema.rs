//! Creating the tables ([`rm_schemas::tables`]), adding the columns an older table
//! lacks, and creating anew the compaction's sums of an earlier sort.

use clickhouse::sql::Identifier;
use clickhouse::Client;

use super::error::ch;
use super::rows::ColumnCh;
use super::{bounded, CONNECT_TIMEOUT};
use crate::StoreError;

/// Adds the columns of [`rm_schemas::tables::ADDED_COLUMNS`] a table lacks (a table
/// created before them). ClickHouse 18.16 has no `ADD COLUMN IF NOT EXISTS`: the
/// columns are read from `system.columns` first, and a concurrent start that added
/// the column first is fine (checked again after a failed `ALTER`).
pub(crate) async fn add_columns(client: &Client) -> Result<(), StoreError> {
    let fail = ch("add columns");
    for (table, column, ty) in rm_schemas::tables::ADDED_COLUMNS {
        let has = || async {
            let cols: Vec<ColumnCh> = client
                .query("SELECT name FROM system.columns WHERE database = currentDatabase() AND table = ?")
                .bind(table)
                .fetch_all()
                .await
                .map_err(&fail)?;
            Ok::<bool, StoreError>(cols.iter().any(|c| c.name == column))
        };
        if has().await? {
            continue;
        }
        let alter = format!("ALTER TABLE {table} ADD COLUMN {column} {ty}");
        if let Err(e) = client.query_raw(&alter).execute().await {
            if !has().await? {
                return Err(fail(e));
            }
        }
        tracing::info!(table, column, "added a column to a report table");
    }
    Ok(())
}

/// Creates the database and the tables when missing (idempotent), adds the columns an
/// older table lacks, and returns the client of that database.
pub(crate) async fn create(server: &Client, database: &str) -> Result<Client, StoreError> {
    let create = server
        .query("CREATE DATABASE IF NOT EXISTS ?")
        .bind(Identifier(database));
    bounded("create database", CONNECT_TIMEOUT, async {
        create.execute().await.map_err(ch("create database"))
    })
    .await?;
    let client = server.clone().with_database(database.to_owned());
    bounded(
        "re-create the closed sums",
        CONNECT_TIMEOUT,
        drop_unslotted(&client),
    )
    .await?;
    for ddl in rm_schemas::tables::ALL {
        bounded("create table", CONNECT_TIMEOUT, async {
            client
                .query_raw(ddl)
                .execute()
                .await
                .map_err(ch("create table"))
        })
        .await?;
    }
    bounded("add columns", CONNECT_TIMEOUT, add_columns(&client)).await?;
    Ok(client)
}

#[derive(clickhouse::Row, serde::Deserialize)]
struct TableCh {
    engine: String,
    sorting_key: String,
}

/// Drops a `rollups_closed` sorted without `slot` (an earlier version's), so that the
/// tables' creation makes it anew in the current order
/// ([`rm_schemas::tables::ROLLUPS_CLOSED`]). It is a cache of `rollups`' sums: until
/// the aggregator's next compaction fills it, reads sum the partitions of every day,
/// exactly, as before a store's first compaction. Two processes starting at once may
/// both drop it; either way it is created once, empty. A table of another engine (a
/// cluster's `Distributed` table) is left alone: a cluster re-creates its tables from
/// `deploy/clickhouse/cluster.sql` by hand (README), and reads it as before until then
/// ([`closed_slots`]).
async fn drop_unslotted(client: &Client) -> Result<(), StoreError> {
    let fail = ch("re-create the closed sums");
    let found: Vec<TableCh> = client
        .query(
            "SELECT engine, sorting_key FROM system.tables \
             WHERE database = currentDatabase() AND name = 'rollups_closed'",
        )
        .fetch_all()
        .await
        .map_err(&fail)?;
    let Some(table) = found.first() else {
        return Ok(());
    };
    if table.engine != "ReplacingMergeTree" || has_slot(&table.sorting_key) {
        return Ok(());
    }
    client
        .query("DROP TABLE IF EXISTS rollups_closed")
        .execute()
        .await
        .map_err(&fail)?;
    tracing::info!(
        "dropped the compaction's sums of an earlier sort (rollups_closed); the next \
         compaction fills them anew"
    );
    Ok(())
}

/// Whether a `rollups_closed` sorting key (as `system.tables` shows it) has `slot`.
fn has_slot(sorting_key: &str) -> bool {
    sorting_key.split(',').any(|k| k.trim() == "slot")
}

/// Whether the store's `rollups_closed` has `slot` (a read may then name the slots
/// of its buckets; a cluster's table of an earlier version does not).
pub(crate) async fn closed_slots(client: &Client) -> Result<bool, StoreError> {
    let n: u64 = client
        .query(
            "SELECT count() FROM system.columns WHERE database = currentDatabase() \
             AND table = 'rollups_closed' AND name = 'slot'",
        )
        .fetch_one()
        .await
        .map_err(ch("read the closed sums' columns"))?;
    Ok(n > 0)
}

#[cfg(test)]
mod tests {
    use super::has_slot;

    #[test]
    fn a_sorting_key_with_the_slot_is_told_from_an_earlier_one() {
        assert!(has_slot(
            "scope, grain, slot, bucket, campaign_id, creative, catalog_id, product_code, metric"
        ));
        assert!(!has_slot(
            "scope, grain, bucket, campaign_id, creative, catalog_id, product_code, metric"
        ));
        assert!(!has_slot("scope, grain, slots"));
    }
}
