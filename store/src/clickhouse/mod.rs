//! The ClickHouse report store (production).
//!
//! Tables and engines are in [`rm_schemas::tables`] (DDL, with why each table is a
//! `ReplacingMergeTree` keyed by what it stores). In short: a write inserts, per
//! touched entity, its complete fact set and the rows derived from it, so writing a
//! batch again inserts equal rows; reads use `FINAL` (replacement at read time, the
//! highest `version` wins) or count distinct dedup keys, so every answer is exact as
//! soon as the `INSERT` returned, whether or not the server merged anything since.
//!
//! Reports return exactly what [`crate::embedded::EmbeddedStore`] returns for the same
//! writes: the funnel and product reports are aggregated by the server (`GROUP BY`)
//! and turned into rows by the same constructors ([`FunnelReportRow::new`](crate::model::funnel::FunnelReportRow::new) +
//! [`FunnelReportRow::finish`](crate::model::funnel::FunnelReportRow::finish), [`ProductReportRow::new`](crate::model::products::ProductReportRow::new)); the cart reports read the
//! newest derived cart rows (narrowed by the filter on the server) and roll them up
//! with the same pure functions ([`crate::model::carts::lines`], [`crate::cart_campaign_rows`]); the
//! sales report reads the order lines of the filter's days and catalog and the
//! touches of their shoppers in the span the windows allow, and attributes them with
//! [`crate::sales_rows`], as the embedded store does. The ad report resolves the
//! copies of each ad fact on the server (one fact per dedup key: `argMin(day,
//! time_ms)`, `min(ad_id_status)`), then counts facts per campaign, ad, day, action
//! and status, and [`ads::rows`](crate::model::ads::rows) makes the rows, as the embedded store's
//! [`ads::report`](crate::model::ads::report) does from the same counts.
//!
//! At start the store creates missing tables and adds the columns of
//! [`rm_schemas::tables::ADDED_COLUMNS`] that an older table lacks.
//! Rows are sorted by their group key in Rust too, so the order is the embedded
//! store's `BTreeMap` order whatever the server's collation.
//!
//! It is written for ClickHouse 18.16 as well as current releases, through the
//! `clickhouse` crate with validation off (`RowBinary`): no server-side query
//! parameters (values go through the crate's client-side `?` binding, which escapes
//! them), no `Bool`/`DateTime64`/`Map`. Entity keys are looked up with `IN` lists of
//! tuples, at most [`KEYS_PER_QUERY`] keys and [`KEY_BYTES_PER_QUERY`] bytes of key
//! text per query (the server's default `max_query_size` is 256 KiB).
//!
//! Errors: a network failure, a timeout or a server error that may pass (memory,
//! too many parts, a restart) is [`StoreError::Unavailable`]; an error a retry cannot
//! fix (unknown table or column, type mismatch, syntax, bad credentials: see
//! [`REFUSED_CODES`]) or a row the client cannot decode is [`StoreError::Refused`].
//! [`Backend::readiness`] reads a flag set by the last operation and, when the store is
//! idle, by a background `SELECT 1` every [`PING_INTERVAL`]: it never waits.

//!
//! Files by concern: this one connects and keeps the store's health, `schema.rs`
//! creates and migrates the tables, `write.rs` loads fact sets and inserts batches,
//! `reports/` answers the reports (one file per report family), `tallies.rs` loads,
//! writes and sums the tallies, `rows.rs` holds the row types and the one `INSERT`
//! helper (so `write.rs` and `tallies.rs` depend on it, never on each other's
//! helpers), `query.rs` the `WHERE` and `IN` builders and `error.rs` how a failure
//! is classified.

mod ageing;
mod compact;
mod erase;
mod error;
mod hours;
mod line_days;
mod page;
mod place_sets;
mod quarter_days;
mod query;
mod reports;
mod resort;
mod retention;
mod rows;
mod sales;
mod schema;
mod tallies;
mod write;
mod zones;

pub use error::REFUSED_CODES;
pub use query::{KEYS_PER_QUERY, KEY_BYTES_PER_QUERY};

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use clickhouse::Client;

use crate::{Backend, StoreError};

use error::ch;

/// ClickHouse connection settings.
#[derive(Debug, Clone, clap::Args)]
pub struct ClickHouseConfig {
    /// ClickHouse HTTP URL; when set, ClickHouse is the report store.
    #[arg(long = "clickhouse-url", env = "RM_CLICKHOUSE_URL")]
    pub url: Option<String>,
    /// Database holding the report tables (created at start).
    #[arg(
        long = "clickhouse-database",
        env = "RM_CLICKHOUSE_DATABASE",
        default_value = "retail_media"
    )]
    pub database: String,
    /// User.
    #[arg(
        long = "clickhouse-user",
        env = "RM_CLICKHOUSE_USER",
        default_value = "default"
    )]
    pub user: String,
    /// Password.
    #[arg(
        long = "clickhouse-password",
        env = "RM_CLICKHOUSE_PASSWORD",
        default_value = "",
        hide_env_values = true,
        hide_default_value = true
    )]
    pub password: String,
}

/// Longest a store operation (a load, a write, a report) may take.
pub const OP_TIMEOUT: Duration = Duration::from_secs(60);
/// Longest each statement of [`ClickHouseStore::connect`] may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// How often an idle store checks that the server answers.
pub const PING_INTERVAL: Duration = Duration::from_secs(5);
/// The ClickHouse store. Cheap to clone.
#[derive(Clone)]
pub struct ClickHouseStore {
    inner: Arc<Inner>,
}

struct Inner {
    client: Client,
    health: Mutex<Health>,
    /// The carts report's index is built (its marker was seen; it stays).
    lines_indexed: std::sync::atomic::AtomicBool,
    /// The campaign days of the carts report's lines are listed (`line_days.rs`;
    /// its marker was seen; it stays).
    line_days_listed: std::sync::atomic::AtomicBool,
    /// Fewest rows of a campaign's day a carts page reads in slices
    /// (`reports/cart_pages.rs`).
    sliced_day_rows: std::sync::atomic::AtomicU64,
    /// The compaction's snapshot as last read, shared by the reads of the next
    /// moments (`compact::SNAPSHOT_KEPT`).
    snapshot: compact::SnapshotCache,
}

/// Outcome of the last operation that says something about the server.
struct Health {
    at: Instant,
    problem: Option<String>,
}

impl Inner {
    /// Records an outcome: success makes the store ready, an unavailable server not;
    /// a refused request says nothing about the server.
    fn note<T>(&self, r: &Result<T, StoreError>) {
        let problem = match r {
            Ok(_) => None,
            Err(StoreError::Unavailable(m)) => Some(m.clone()),
            Err(StoreError::Refused(_)) => return,
        };
        *self.health.lock().unwrap_or_else(PoisonError::into_inner) = Health {
            at: Instant::now(),
            problem,
        };
    }

    fn idle_for(&self) -> Duration {
        self.health
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .at
            .elapsed()
    }
}

/// Pings the server while the store exists and is idle.
async fn keep_checking(inner: Weak<Inner>) {
    loop {
        tokio::time::sleep(PING_INTERVAL).await;
        let Some(inner) = inner.upgrade() else { return };
        if inner.idle_for() >= PING_INTERVAL {
            let r = bounded("ping", PING_INTERVAL, ping(&inner.client)).await;
            inner.note(&r);
        }
    }
}

async fn ping(client: &Client) -> Result<(), StoreError> {
    client.query("SELECT 1").execute().await.map_err(ch("ping"))
}

/// Runs `fut` for at most `limit`.
async fn bounded<T>(
    what: &str,
    limit: Duration,
    fut: impl Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    tokio::time::timeout(limit, fut).await.unwrap_or_else(|_| {
        Err(StoreError::Unavailable(format!(
            "{what}: ClickHouse did not answer within {limit:?}"
        )))
    })
}

impl ClickHouseStore {
    /// Connects, creates the database and the tables when missing (idempotent), and
    /// checks that the server answers.
    pub async fn connect(config: &ClickHouseConfig) -> Result<Self, StoreError> {
        let url = config
            .url
            .as_deref()
            .filter(|u| !u.is_empty())
            .ok_or_else(|| {
                StoreError::Refused(
                    "no ClickHouse URL (--clickhouse-url / RM_CLICKHOUSE_URL)".into(),
                )
            })?;
        let server = Client::default()
            .with_url(url)
            .with_user(config.user.clone())
            .with_password(config.password.clone())
            .with_validation(false);
        let client = schema::create(&server, &config.database).await?;
        bounded("ping", CONNECT_TIMEOUT, ping(&client)).await?;
        let inner = Arc::new(Inner {
            client,
            health: Mutex::new(Health {
                at: Instant::now(),
                problem: None,
            }),
            lines_indexed: Default::default(),
            line_days_listed: Default::default(),
            sliced_day_rows: reports::SLICED_DAY_ROWS.into(),
            snapshot: Default::default(),
        });
        tokio::spawn(keep_checking(Arc::downgrade(&inner)));
        let store = Self { inner };
        // Not fatal: the aggregator's backfill marks the store at its start anyway.
        if let Err(e) = bounded("mark a new store", CONNECT_TIMEOUT, async {
            store.mark_if_new().await?;
            store.mark_zones_if_new().await
        })
        .await
        {
            tracing::warn!(error = %e, "could not tell whether the report store is new");
        }
        Ok(store)
    }

    fn client(&self) -> &Client {
        &self.inner.client
    }

    /// Runs one store operation: bounded in time, its outcome noted for readiness.
    async fn op<T>(
        &self,
        what: &str,
        fut: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        let r = bounded(what, OP_TIMEOUT, fut).await;
        self.inner.note(&r);
        r
    }
}

impl Backend for ClickHouseStore {
    fn backend(&self) -> &'static str {
        "clickhouse"
    }

    fn readiness(&self) -> Result<(), String> {
        match &self
            .inner
            .health
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .problem
        {
            None => Ok(()),
            Some(p) => Err(p.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readiness_follows_the_last_outcome_that_concerns_the_server() {
        let store = ClickHouseStore {
            inner: Arc::new(Inner {
                client: Client::default(),
                health: Mutex::new(Health {
                    at: Instant::now(),
                    problem: None,
                }),
                lines_indexed: Default::default(),
                line_days_listed: Default::default(),
                sliced_day_rows: reports::SLICED_DAY_ROWS.into(),
                snapshot: Default::default(),
            }),
        };
        assert_eq!(store.readiness(), Ok(()));
        store
            .inner
            .note::<()>(&Err(StoreError::Unavailable("connection refused".into())));
        assert_eq!(store.readiness(), Err("connection refused".into()));
        store
            .inner
            .note::<()>(&Err(StoreError::Refused("unknown table".into())));
        assert_eq!(store.readiness(), Err("connection refused".into()));
        store.inner.note(&Ok(()));
        assert_eq!(store.readiness(), Ok(()));
        assert!(store.inner.idle_for() < PING_INTERVAL);
    }
}
