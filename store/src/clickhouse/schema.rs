//! Creating the tables ([`rm_schemas::tables`]) and adding the columns an older table
//! lacks.

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
