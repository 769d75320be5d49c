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
//! and turned into rows by the same constructors ([`FunnelReportRow::new`] +
//! [`FunnelReportRow::finish`], [`ProductReportRow::new`]); the cart reports read the
//! newest derived cart rows (narrowed by the filter on the server) and roll them up
//! with the same pure functions ([`carts::states`], [`carts::campaign_rollup`]); the
//! sales report reads the order lines of the filter's days and catalog and the
//! touches of their shoppers in the span the windows allow, and attributes them with
//! [`crate::sales_rows`], as the embedded store does. The ad report resolves the
//! copies of each ad fact on the server (one fact per dedup key: `argMin(day,
//! time_ms)`, `min(ad_id_status)`), then counts facts per campaign, ad, day, action
//! and status, and [`ads::rows`] makes the rows, as the embedded store's
//! [`ads::report`] does from the same counts.
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

use std::collections::HashSet;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use clickhouse::query::Query;
use clickhouse::sql::Identifier;
use clickhouse::{Client, Row, RowWrite};
use futures_util::future::try_join_all;
use rm_schemas::{DedupKey, InteractionType};
use serde::{Deserialize, Serialize};

use crate::model::ads::{self, AdAction, AdCounts, AdGroup, AdReportRow};
use crate::model::attribution::{self, OrderLine, SalesReportRow, Touch, TouchKind, Windows};
use crate::model::campaigns::{CampaignSalesRow, CartAddsRow};
use crate::model::carts::{
    self, CartCampaignRow, CartEventRow, CartFact, CartKey, CartStateRow, Transition,
};
use crate::model::funnel::{self, FunnelReportRow, ViewFact, ViewKey};
use crate::model::products::{ProductAction, ProductGroup, ProductReportRow};
use crate::model::status::AdIdStatus;
use crate::model::DAY_MS;
use crate::read::{campaign_sales_rows, sales_rows, ReportStore};
use crate::write::WriteStore;
use crate::write::{BatchWrite, EntitySets, FastSet};
use crate::{Backend, ReportFilter, StoreError};

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
        default_value = ""
    )]
    pub password: String,
}

/// Longest a store operation (a load, a write, a report) may take.
pub const OP_TIMEOUT: Duration = Duration::from_secs(60);
/// Longest each statement of [`ClickHouseStore::connect`] may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// How often an idle store checks that the server answers.
pub const PING_INTERVAL: Duration = Duration::from_secs(5);
/// Most entity keys in one `IN` list.
pub const KEYS_PER_QUERY: usize = 1000;
/// Most bytes of key text in one `IN` list (escaping and quotes not counted).
pub const KEY_BYTES_PER_QUERY: usize = 128 * 1024;

/// Server error codes a retry cannot fix: the request, the schema or the credentials
/// are wrong. Any other server error is taken as passing.
pub const REFUSED_CODES: &[u32] = &[
    6,   // CANNOT_PARSE_TEXT
    16,  // NO_SUCH_COLUMN_IN_TABLE
    20,  // NUMBER_OF_COLUMNS_DOESNT_MATCH
    26,  // CANNOT_PARSE_QUOTED_STRING
    27,  // CANNOT_PARSE_INPUT_ASSERTION_FAILED
    32,  // ATTEMPT_TO_READ_AFTER_EOF (a RowBinary row of the wrong shape)
    33,  // CANNOT_READ_ALL_DATA
    36,  // BAD_ARGUMENTS
    38,  // CANNOT_PARSE_DATE
    41,  // CANNOT_PARSE_DATETIME
    42,  // NUMBER_OF_ARGUMENTS_DOESNT_MATCH
    43,  // ILLEGAL_TYPE_OF_ARGUMENT
    44,  // ILLEGAL_COLUMN
    46,  // UNKNOWN_FUNCTION
    47,  // UNKNOWN_IDENTIFIER
    48,  // NOT_IMPLEMENTED
    50,  // UNKNOWN_TYPE
    53,  // TYPE_MISMATCH
    60,  // UNKNOWN_TABLE
    62,  // SYNTAX_ERROR
    69,  // ARGUMENT_OUT_OF_BOUND
    70,  // CANNOT_CONVERT_TYPE
    72,  // CANNOT_PARSE_NUMBER
    73,  // UNKNOWN_FORMAT
    80,  // INCORRECT_QUERY
    81,  // UNKNOWN_DATABASE
    115, // UNKNOWN_SETTING
    117, // INCORRECT_DATA
    131, // TOO_LARGE_STRING_SIZE
    164, // READONLY
    181, // ILLEGAL_FINAL
    184, // ILLEGAL_AGGREGATION
    192, // UNKNOWN_USER
    193, // WRONG_PASSWORD
    194, // REQUIRED_PASSWORD
    195, // IP_ADDRESS_NOT_ALLOWED
    215, // NOT_AN_AGGREGATE
    386, // NO_COMMON_TYPE
    497, // ACCESS_DENIED
    516, // AUTHENTICATION_FAILED
];

const IMPRESSION: &str = "impression";
const CLICK: &str = "click";

/// The ClickHouse store. Cheap to clone.
#[derive(Clone)]
pub struct ClickHouseStore {
    inner: Arc<Inner>,
}

struct Inner {
    client: Client,
    health: Mutex<Health>,
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

/// Maps a client error of operation `what`.
fn ch(what: &'static str) -> impl Fn(clickhouse::error::Error) -> StoreError {
    move |e| classify(what, e)
}

fn classify(what: &str, e: clickhouse::error::Error) -> StoreError {
    use clickhouse::error::Error as E;
    let msg = format!("ClickHouse {what}: {e}");
    match &e {
        E::Network(_) | E::TimedOut | E::Compression(_) | E::Decompression(_) | E::Other(_) => {
            StoreError::Unavailable(msg)
        }
        E::BadResponse(text) => match exception_code(text) {
            Some(code) if REFUSED_CODES.contains(&code) => StoreError::Refused(msg),
            _ => StoreError::Unavailable(msg),
        },
        // Bad parameters, rows that do not decode, schema mismatches: a retry sends
        // or reads the same thing again.
        _ => StoreError::Refused(msg),
    }
}

/// The server's error code in a response: `Code: 60, e.displayText() = ...` (18.x),
/// `Code: 60. DB::Exception: ...` (later), or just `Code: 60` from the header.
fn exception_code(text: &str) -> Option<u32> {
    let rest = &text[text.find("Code: ")? + "Code: ".len()..];
    let end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

fn corrupt(what: &str, value: &str) -> StoreError {
    StoreError::Refused(format!("corrupt store row: bad {what} {value:?}"))
}

fn dedup_hex(k: u128) -> String {
    format!("{k:032x}")
}

fn parse_dedup(s: &str) -> Result<u128, StoreError> {
    DedupKey::from_hex(s)
        .map(|k| k.0)
        .ok_or_else(|| corrupt("dedup key", s))
}

fn parse_kind(s: &str) -> Result<InteractionType, StoreError> {
    InteractionType::from_wire(s).ok_or_else(|| corrupt("interaction type", s))
}

fn parse_transition(s: &str) -> Result<Transition, StoreError> {
    [
        Transition::Add,
        Transition::Increment,
        Transition::Decrement,
        Transition::Removal,
        Transition::Unchanged,
    ]
    .into_iter()
    .find(|t| t.as_str() == s)
    .ok_or_else(|| corrupt("transition", s))
}

fn action_str(a: ProductAction) -> &'static str {
    match a {
        ProductAction::Impression => IMPRESSION,
        ProductAction::Click => CLICK,
    }
}

/// First millisecond of `day`.
fn day_start_ms(day: i32) -> i64 {
    i64::from(day) * DAY_MS
}

/// A stored ad id status rank.
fn parse_status(rank: u8) -> Result<AdIdStatus, StoreError> {
    AdIdStatus::from_rank(rank).ok_or_else(|| corrupt("ad id status", &rank.to_string()))
}

/// A row of `view_facts`.
#[derive(Row, Serialize, Deserialize)]
struct ViewFactCh<'a> {
    ad_id: &'a str,
    video_id: &'a str,
    tracking_id: &'a str,
    dedup_key: String,
    kind: &'a str,
    time_ms: i64,
    ad_id_status: u8,
}

/// A row of `ad_facts` (one copy of an ad event).
#[derive(Row, Serialize)]
struct AdFactCh<'a> {
    campaign_id: &'a str,
    ad_id: &'a str,
    action: &'a str,
    dedup_key: String,
    time_ms: i64,
    day: i32,
    ad_id_status: u8,
}

/// Resolved ad facts counted per campaign, ad, day, action and status.
#[derive(Row, Deserialize)]
struct AdAgg {
    campaign_id: String,
    ad_id: String,
    day: i32,
    action: String,
    status: u8,
    facts: u64,
}

/// A column name of a table.
#[derive(Row, Deserialize)]
struct ColumnCh {
    name: String,
}

/// A row of `views`.
#[derive(Row, Serialize)]
struct ViewCh<'a> {
    ad_id: &'a str,
    video_id: &'a str,
    tracking_id: &'a str,
    campaign_id: &'a str,
    day: i32,
    version: u32,
    creative_view: u8,
    play: u8,
    first_quartile: u8,
    midpoint: u8,
    third_quartile: u8,
    complete: u8,
    skips: u32,
    pauses: u32,
    resumes: u32,
    mutes: u32,
    unmutes: u32,
    funnel_gaps: u32,
    repeated_milestones: u32,
    ad_id_status: u8,
}

/// A row of `product_facts`.
#[derive(Row, Serialize)]
struct ProductFactCh<'a> {
    campaign_id: &'a str,
    ad_id: &'a str,
    catalog_id: &'a str,
    product_code: &'a str,
    day: i32,
    action: &'a str,
    dedup_key: String,
    ad_id_status: u8,
}

/// A row of `cart_events`.
#[derive(Row, Serialize, Deserialize)]
struct CartEventCh<'a> {
    tracking_id: &'a str,
    catalog_id: &'a str,
    product_code: &'a str,
    dedup_key: String,
    time_ms: i64,
    units: u64,
    value: Option<f64>,
    campaign_id: &'a str,
    ad_id: &'a str,
    prev_units: u64,
    transition: &'a str,
    version: u32,
    ad_id_status: u8,
}

impl CartEventCh<'_> {
    fn to_row(&self) -> Result<CartEventRow, StoreError> {
        Ok(CartEventRow {
            key: CartKey {
                tracking_id: self.tracking_id.to_owned(),
                catalog_id: self.catalog_id.to_owned(),
                product_code: self.product_code.to_owned(),
            },
            fact: CartFact {
                dedup_key: parse_dedup(&self.dedup_key)?,
                time_ms: self.time_ms,
                units: self.units,
                value: self.value,
                campaign_id: self.campaign_id.to_owned(),
                ad_id: self.ad_id.to_owned(),
                status: parse_status(self.ad_id_status)?,
            },
            prev_units: self.prev_units,
            transition: parse_transition(self.transition)?,
            version: self.version,
        })
    }
}

/// A row of `order_lines`.
#[derive(Row, Serialize, Deserialize)]
struct OrderLineCh {
    order_id: String,
    line: u32,
    customer_id: String,
    session_id: String,
    time_ms: i64,
    catalog_id: String,
    product_code: String,
    quantity: u64,
    revenue: f64,
    ad_id: String,
    order_ad_ids: Vec<String>,
}

impl From<&OrderLine> for OrderLineCh {
    fn from(l: &OrderLine) -> Self {
        Self {
            order_id: l.order_id.clone(),
            line: l.line,
            customer_id: l.customer_id.clone(),
            session_id: l.session_id.clone(),
            time_ms: l.time_ms,
            catalog_id: l.catalog_id.clone(),
            product_code: l.product_code.clone(),
            quantity: l.quantity,
            revenue: l.revenue,
            ad_id: l.ad_id.clone(),
            order_ad_ids: l.order_ad_ids.clone(),
        }
    }
}

impl From<OrderLineCh> for OrderLine {
    fn from(l: OrderLineCh) -> Self {
        Self {
            order_id: l.order_id,
            line: l.line,
            customer_id: l.customer_id,
            session_id: l.session_id,
            time_ms: l.time_ms,
            catalog_id: l.catalog_id,
            product_code: l.product_code,
            quantity: l.quantity,
            revenue: l.revenue,
            ad_id: l.ad_id,
            order_ad_ids: l.order_ad_ids,
        }
    }
}

/// A row of `attribution_touches`.
#[derive(Row, Serialize, Deserialize)]
struct TouchCh {
    shopper: String,
    time_ms: i64,
    dedup_key: String,
    kind: String,
    ad_id: String,
    campaign_id: String,
    catalog_id: String,
    product_code: String,
}

impl TouchCh {
    fn into_touch(self) -> Result<Touch, StoreError> {
        Ok(Touch {
            dedup_key: parse_dedup(&self.dedup_key)?,
            kind: TouchKind::parse(&self.kind).ok_or_else(|| corrupt("touch kind", &self.kind))?,
            shopper: self.shopper,
            ad_id: self.ad_id,
            campaign_id: self.campaign_id,
            catalog_id: self.catalog_id,
            product_code: self.product_code,
            time_ms: self.time_ms,
        })
    }
}

/// An order id.
#[derive(Row, Deserialize)]
struct OrderIdCh {
    order_id: String,
}

/// A group of the funnel report, as the server sums it.
#[derive(Row, Deserialize)]
struct FunnelAgg {
    campaign_id: String,
    ad_id: String,
    video_id: String,
    day: i32,
    views: u64,
    creative_views: u64,
    plays: u64,
    first_quartiles: u64,
    midpoints: u64,
    third_quartiles: u64,
    completes: u64,
    skips: u64,
    pauses: u64,
    resumes: u64,
    mutes: u64,
    unmutes: u64,
    funnel_gaps: u64,
    repeated_milestones: u64,
    ad_id_status: u8,
}

/// A group of the product report, as the server counts it.
#[derive(Row, Deserialize)]
struct ProductAgg {
    campaign_id: String,
    ad_id: String,
    catalog_id: String,
    product_code: String,
    day: i32,
    impressions: u64,
    clicks: u64,
    ad_id_status: u8,
}

/// A bound value.
enum Arg {
    Str(String),
    Int(i64),
}

/// `WHERE` conditions with their `?` values, in text order.
#[derive(Default)]
struct Conds {
    sql: Vec<String>,
    args: Vec<Arg>,
}

impl Conds {
    fn str(&mut self, cond: &str, v: &Option<String>) {
        if let Some(v) = v {
            self.sql.push(cond.to_owned());
            self.args.push(Arg::Str(v.clone()));
        }
    }

    fn int(&mut self, cond: &str, v: Option<i64>) {
        if let Some(v) = v {
            self.sql.push(cond.to_owned());
            self.args.push(Arg::Int(v));
        }
    }

    /// Event times within the filter's days (`day_of(t)` in range, exactly).
    fn event_days(&mut self, f: &ReportFilter) {
        self.int("time_ms >= ?", f.from_day.map(day_start_ms));
        self.int("time_ms < ?", f.to_day.map(|d| day_start_ms(d) + DAY_MS));
    }

    /// Only carts with at least one event matching `sub` (an event of the carts'
    /// table matching the conditions).
    fn carts_having(&mut self, sub: Conds) {
        if sub.sql.is_empty() {
            return;
        }
        self.sql.push(format!(
            "(tracking_id, catalog_id, product_code) IN \
             (SELECT tracking_id, catalog_id, product_code FROM cart_events{})",
            sub.clause()
        ));
        self.args.extend(sub.args);
    }

    fn clause(&self) -> String {
        if self.sql.is_empty() {
            String::new()
        } else {
            format!(" WHERE {}", self.sql.join(" AND "))
        }
    }

    fn bind(self, mut q: Query) -> Query {
        for a in self.args {
            q = match a {
                Arg::Str(s) => q.bind(s),
                Arg::Int(i) => q.bind(i),
            };
        }
        q
    }
}

/// Splits keys into `IN` lists of bounded size.
fn chunks<'a, K: Ord + 'a>(
    keys: impl IntoIterator<Item = &'a K>,
    size: impl Fn(&K) -> usize,
) -> Vec<Vec<&'a K>> {
    let mut sorted: Vec<&K> = keys.into_iter().collect();
    sorted.sort();
    let mut out: Vec<Vec<&K>> = Vec::new();
    let mut bytes = 0;
    for k in sorted {
        let n = size(k) + 16;
        match out.last_mut() {
            Some(c) if c.len() < KEYS_PER_QUERY && bytes + n <= KEY_BYTES_PER_QUERY => {
                bytes += n;
                c.push(k);
            }
            _ => {
                bytes = n;
                out.push(vec![k]);
            }
        }
    }
    out
}

/// `?,?,...` for `n` values.
fn placeholders(n: usize) -> String {
    vec!["?"; n].join(",")
}

/// Adds the columns of [`rm_schemas::tables::ADDED_COLUMNS`] a table lacks (a table
/// created before them). ClickHouse 18.16 has no `ADD COLUMN IF NOT EXISTS`: the
/// columns are read from `system.columns` first, and a concurrent start that added
/// the column first is fine (checked again after a failed `ALTER`).
async fn add_columns(client: &Client) -> Result<(), StoreError> {
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

/// Inserts `rows` into `table` with one `INSERT`.
async fn insert_rows<R: Row + RowWrite>(
    client: &Client,
    table: &'static str,
    rows: &[R::Value<'_>],
) -> Result<(), StoreError> {
    if rows.is_empty() {
        return Ok(());
    }
    let fail = ch(table);
    let mut insert = client.insert::<R>(table).await.map_err(&fail)?;
    for r in rows {
        insert.write(r).await.map_err(&fail)?;
    }
    insert.end().await.map_err(&fail)
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
        let create = server
            .query("CREATE DATABASE IF NOT EXISTS ?")
            .bind(Identifier(&config.database));
        bounded("create database", CONNECT_TIMEOUT, async {
            create.execute().await.map_err(ch("create database"))
        })
        .await?;
        let client = server.with_database(config.database.clone());
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
        bounded("ping", CONNECT_TIMEOUT, ping(&client)).await?;
        let inner = Arc::new(Inner {
            client,
            health: Mutex::new(Health {
                at: Instant::now(),
                problem: None,
            }),
        });
        tokio::spawn(keep_checking(Arc::downgrade(&inner)));
        Ok(Self { inner })
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

    /// The fact sets of `keys`, one `IN` query per chunk, the chunks concurrently.
    /// No `FINAL`: a fact never changes once written, and copies of it (a replayed
    /// batch, an unmerged part) are dropped by [`funnel::insert_fact`].
    async fn load_views(&self, keys: &FastSet<ViewKey>) -> Result<EntitySets, StoreError> {
        let fail = ch("load views");
        let queries = chunks(keys, |k| {
            k.ad_id.len() + k.video_id.len() + k.tracking_id.len()
        })
        .into_iter()
        .map(|chunk| {
            let sql = format!(
                "SELECT ?fields FROM view_facts WHERE (ad_id, video_id, tracking_id) IN ({})",
                placeholders(chunk.len())
            );
            let mut q = self.client().query(&sql);
            for k in chunk {
                q = q.bind((&k.ad_id, &k.video_id, &k.tracking_id));
            }
            let fail = &fail;
            async move {
                let mut facts = Vec::new();
                let mut cursor = q.fetch::<ViewFactCh<'_>>().map_err(fail)?;
                while let Some(r) = cursor.next().await.map_err(fail)? {
                    let key = ViewKey {
                        ad_id: r.ad_id.to_owned(),
                        video_id: r.video_id.to_owned(),
                        tracking_id: r.tracking_id.to_owned(),
                    };
                    let fact = ViewFact {
                        dedup_key: parse_dedup(&r.dedup_key)?,
                        kind: parse_kind(r.kind)?,
                        time_ms: r.time_ms,
                        status: parse_status(r.ad_id_status)?,
                    };
                    facts.push((key, fact));
                }
                Ok::<_, StoreError>(facts)
            }
        });
        let mut sets = EntitySets::default();
        for (key, fact) in try_join_all(queries).await?.into_iter().flatten() {
            // Keeps the set's order (event time, dedup key) and drops copies.
            funnel::insert_fact(sets.views.entry(key).or_default(), fact);
        }
        Ok(sets)
    }

    /// As [`Self::load_views`], for carts: a fact is the same in every version of its
    /// cart and the newest version holds every fact, so the union of the rows (no
    /// `FINAL`) is the cart's current set.
    async fn load_carts(&self, keys: &FastSet<CartKey>) -> Result<EntitySets, StoreError> {
        let fail = ch("load carts");
        let queries = chunks(keys, |k| {
            k.tracking_id.len() + k.catalog_id.len() + k.product_code.len()
        })
        .into_iter()
        .map(|chunk| {
            let sql = format!(
                "SELECT ?fields FROM cart_events WHERE (tracking_id, catalog_id, product_code) IN ({})",
                placeholders(chunk.len())
            );
            let mut q = self.client().query(&sql);
            for k in chunk {
                q = q.bind((&k.tracking_id, &k.catalog_id, &k.product_code));
            }
            let fail = &fail;
            async move {
                let mut rows = Vec::new();
                let mut cursor = q.fetch::<CartEventCh<'_>>().map_err(fail)?;
                while let Some(r) = cursor.next().await.map_err(fail)? {
                    rows.push(r.to_row()?);
                }
                Ok::<_, StoreError>(rows)
            }
        });
        let mut sets = EntitySets::default();
        for row in try_join_all(queries).await?.into_iter().flatten() {
            carts::insert_fact(sets.carts.entry(row.key).or_default(), row.fact);
        }
        Ok(sets)
    }

    async fn write_batch(&self, b: &BatchWrite) -> Result<(), StoreError> {
        let client = self.client();
        // The seven INSERTs run concurrently. If some fail or a crash cuts the batch
        // short, the batch is not committed and is written again whole: the facts it
        // did store are loaded and equal the ones it re-folds, and every derived row
        // is rewritten, so a partial write changes no count once the retry lands.
        let view_facts: Vec<ViewFactCh<'_>> = b
            .view_facts
            .iter()
            .flat_map(|(k, facts)| {
                facts.iter().map(move |f| ViewFactCh {
                    ad_id: &k.ad_id,
                    video_id: &k.video_id,
                    tracking_id: &k.tracking_id,
                    dedup_key: dedup_hex(f.dedup_key),
                    kind: f.kind.as_str(),
                    time_ms: f.time_ms,
                    ad_id_status: f.status.rank(),
                })
            })
            .collect();
        let products: Vec<ProductFactCh<'_>> = b
            .product_facts
            .iter()
            .map(|p| ProductFactCh {
                campaign_id: &p.group.campaign_id,
                ad_id: &p.group.ad_id,
                catalog_id: &p.group.catalog_id,
                product_code: &p.group.product_code,
                day: p.group.day,
                action: action_str(p.action),
                dedup_key: dedup_hex(p.dedup_key),
                ad_id_status: p.status.rank(),
            })
            .collect();
        let ad_facts: Vec<AdFactCh<'_>> = b
            .ad_facts
            .iter()
            .map(|a| AdFactCh {
                campaign_id: &a.campaign_id,
                ad_id: &a.ad_id,
                action: a.action.as_str(),
                dedup_key: dedup_hex(a.dedup_key),
                time_ms: a.time_ms,
                day: crate::model::day_of(a.time_ms),
                ad_id_status: a.status.rank(),
            })
            .collect();
        let views: Vec<ViewCh<'_>> = b
            .views
            .iter()
            .map(|v| {
                let [creative_view, play, first_quartile, midpoint, third_quartile, complete] =
                    v.milestones;
                let [skips, pauses, resumes, mutes, unmutes] = v.controls;
                ViewCh {
                    ad_id: &v.key.ad_id,
                    video_id: &v.key.video_id,
                    tracking_id: &v.key.tracking_id,
                    campaign_id: &v.campaign_id,
                    day: v.day,
                    version: v.version,
                    creative_view,
                    play,
                    first_quartile,
                    midpoint,
                    third_quartile,
                    complete,
                    skips,
                    pauses,
                    resumes,
                    mutes,
                    unmutes,
                    funnel_gaps: v.funnel_gaps,
                    repeated_milestones: v.repeated_milestones,
                    ad_id_status: v.ad_id_status.rank(),
                }
            })
            .collect();
        let cart_rows: Vec<CartEventCh<'_>> = b
            .cart_rows
            .iter()
            .map(|r| CartEventCh {
                tracking_id: &r.key.tracking_id,
                catalog_id: &r.key.catalog_id,
                product_code: &r.key.product_code,
                dedup_key: dedup_hex(r.fact.dedup_key),
                time_ms: r.fact.time_ms,
                units: r.fact.units,
                value: r.fact.value,
                campaign_id: &r.fact.campaign_id,
                ad_id: &r.fact.ad_id,
                prev_units: r.prev_units,
                transition: r.transition.as_str(),
                version: r.version,
                ad_id_status: r.fact.status.rank(),
            })
            .collect();
        let touches: Vec<TouchCh> = b
            .touches
            .iter()
            .map(|t| TouchCh {
                shopper: t.shopper.clone(),
                time_ms: t.time_ms,
                dedup_key: dedup_hex(t.dedup_key),
                kind: t.kind.as_str().to_owned(),
                ad_id: t.ad_id.clone(),
                campaign_id: t.campaign_id.clone(),
                catalog_id: t.catalog_id.clone(),
                product_code: t.product_code.clone(),
            })
            .collect();
        // An order's lines are in one INSERT: an order is either wholly stored (and
        // skipped when the batch is replayed) or not at all.
        let lines: Vec<OrderLineCh> = b.order_lines.iter().map(OrderLineCh::from).collect();
        tokio::try_join!(
            insert_rows::<ViewFactCh<'_>>(client, "view_facts", &view_facts),
            insert_rows::<ProductFactCh<'_>>(client, "product_facts", &products),
            insert_rows::<AdFactCh<'_>>(client, "ad_facts", &ad_facts),
            insert_rows::<ViewCh<'_>>(client, "views", &views),
            insert_rows::<CartEventCh<'_>>(client, "cart_events", &cart_rows),
            insert_rows::<TouchCh>(client, "attribution_touches", &touches),
            insert_rows::<OrderLineCh>(client, "order_lines", &lines),
        )?;
        Ok(())
    }

    async fn known_order_ids(&self, ids: &HashSet<String>) -> Result<HashSet<String>, StoreError> {
        let fail = ch("load orders");
        let mut known = HashSet::new();
        for chunk in chunks(ids, String::len) {
            let sql = format!(
                "SELECT DISTINCT order_id FROM order_lines WHERE order_id IN ({})",
                placeholders(chunk.len())
            );
            let mut q = self.client().query(&sql);
            for id in chunk {
                q = q.bind(id);
            }
            let rows: Vec<OrderIdCh> = q.fetch_all().await.map_err(&fail)?;
            known.extend(rows.into_iter().map(|r| r.order_id));
        }
        Ok(known)
    }

    async fn sales_report(
        &self,
        f: &ReportFilter,
        w: &Windows,
    ) -> Result<Vec<SalesReportRow>, StoreError> {
        let (lines, touches) = self.sales_inputs(f, w).await?;
        // Copies of lines and touches (not merged yet) are dropped by the rollup.
        Ok(sales_rows(&lines, &touches, f, w))
    }

    async fn campaign_sales_report(
        &self,
        f: &ReportFilter,
        w: &Windows,
    ) -> Result<Vec<CampaignSalesRow>, StoreError> {
        let (lines, touches) = self.sales_inputs(f, w).await?;
        Ok(campaign_sales_rows(&lines, &touches, f, w))
    }

    /// The order lines of the filter's days and catalog and the touches of their
    /// shoppers in the span the windows allow.
    async fn sales_inputs(
        &self,
        f: &ReportFilter,
        w: &Windows,
    ) -> Result<(Vec<OrderLine>, Vec<Touch>), StoreError> {
        let fail = ch("sales report");
        let mut c = Conds::default();
        c.str("catalog_id = ?", &f.catalog_id);
        c.event_days(f);
        let sql = format!("SELECT ?fields FROM order_lines{}", c.clause());
        let rows: Vec<OrderLineCh> = c
            .bind(self.client().query(&sql))
            .fetch_all()
            .await
            .map_err(&fail)?;
        let lines: Vec<OrderLine> = rows.into_iter().map(OrderLine::from).collect();
        let Some((from, to)) = attribution::touch_range(&lines, w) else {
            return Ok((Vec::new(), Vec::new()));
        };
        let shoppers: HashSet<String> = lines.iter().flat_map(OrderLine::shoppers).collect();
        let mut touches = Vec::new();
        for chunk in chunks(&shoppers, String::len) {
            let sql = format!(
                "SELECT ?fields FROM attribution_touches \
                 WHERE shopper IN ({}) AND time_ms >= ? AND time_ms <= ?",
                placeholders(chunk.len())
            );
            let mut q = self.client().query(&sql);
            for s in chunk {
                q = q.bind(s);
            }
            let rows: Vec<TouchCh> = q.bind(from).bind(to).fetch_all().await.map_err(&fail)?;
            for r in rows {
                touches.push(r.into_touch()?);
            }
        }
        Ok((lines, touches))
    }

    async fn ad_report(&self, f: &ReportFilter) -> Result<Vec<AdReportRow>, StoreError> {
        // Campaign and ad are the same in every copy of a fact: filter the copies.
        let mut inner = Conds::default();
        inner.str("campaign_id = ?", &f.campaign_id);
        inner.str("ad_id = ?", &f.ad_id);
        // The day is the fact's (its earliest copy's): filter after resolving.
        let mut outer = Conds::default();
        outer.int("first_day >= ?", f.from_day.map(i64::from));
        outer.int("first_day <= ?", f.to_day.map(i64::from));
        let sql = format!(
            "SELECT campaign_id, ad_id, first_day, action, best_status, count() FROM \
             (SELECT campaign_id, ad_id, action, dedup_key, \
              argMin(day, time_ms) AS first_day, min(ad_id_status) AS best_status \
              FROM ad_facts{} GROUP BY campaign_id, ad_id, action, dedup_key){} \
             GROUP BY campaign_id, ad_id, first_day, action, best_status",
            inner.clause(),
            outer.clause()
        );
        inner.args.extend(outer.args);
        let counts: Vec<AdAgg> = inner
            .bind(self.client().query(&sql))
            .fetch_all()
            .await
            .map_err(ch("ad report"))?;
        let mut groups: std::collections::BTreeMap<AdGroup, AdCounts> = Default::default();
        for c in counts {
            let action =
                AdAction::parse(&c.action).ok_or_else(|| corrupt("ad action", &c.action))?;
            let status = parse_status(c.status)?;
            let group = AdGroup {
                campaign_id: c.campaign_id,
                ad_id: c.ad_id,
                day: c.day,
            };
            groups
                .entry(group)
                .or_default()
                .add(action, status, c.facts);
        }
        Ok(ads::rows(groups))
    }

    async fn cart_adds_report(&self, f: &ReportFilter) -> Result<Vec<CartAddsRow>, StoreError> {
        // The add rows of the filter's campaign, catalog and days (each row carries the
        // transition derived from its whole cart, so no other row is needed).
        let mut w = Conds::default();
        w.str("catalog_id = ?", &f.catalog_id);
        w.str("campaign_id = ?", &f.campaign_id);
        w.event_days(f);
        w.sql.push("transition = 'add'".into());
        let rows = self.cart_rows(w).await?;
        Ok(carts::campaign_day_adds(&rows))
    }

    async fn funnel_report(&self, f: &ReportFilter) -> Result<Vec<FunnelReportRow>, StoreError> {
        let mut w = Conds::default();
        w.str("campaign_id = ?", &f.campaign_id);
        w.str("ad_id = ?", &f.ad_id);
        w.int("day >= ?", f.from_day.map(i64::from));
        w.int("day <= ?", f.to_day.map(i64::from));
        // FINAL keeps each view's newest row before the filter: a view's day moves
        // when an earlier event arrives late.
        let sql = format!(
            "SELECT campaign_id, ad_id, video_id, day, \
             countIf(creative_view + play + first_quartile + midpoint + third_quartile + complete > 0), \
             sum(creative_view), sum(play), sum(first_quartile), sum(midpoint), sum(third_quartile), sum(complete), \
             sum(skips), sum(pauses), sum(resumes), sum(mutes), sum(unmutes), \
             sum(funnel_gaps), sum(repeated_milestones), max(ad_id_status) \
             FROM views FINAL{} \
             GROUP BY campaign_id, ad_id, video_id, day \
             ORDER BY campaign_id, ad_id, video_id, day",
            w.clause()
        );
        let mut groups: Vec<FunnelAgg> = w
            .bind(self.client().query(&sql))
            .fetch_all()
            .await
            .map_err(ch("funnel report"))?;
        groups.sort_by(|a, b| {
            (&a.campaign_id, &a.ad_id, &a.video_id, a.day).cmp(&(
                &b.campaign_id,
                &b.ad_id,
                &b.video_id,
                b.day,
            ))
        });
        let rows = groups
            .into_iter()
            .map(|g| {
                let mut r = FunnelReportRow::new(g.campaign_id, g.ad_id, g.video_id, g.day);
                r.ad_id_status = parse_status(g.ad_id_status)?;
                r.views = g.views;
                r.creative_views = g.creative_views;
                r.plays = g.plays;
                r.first_quartiles = g.first_quartiles;
                r.midpoints = g.midpoints;
                r.third_quartiles = g.third_quartiles;
                r.completes = g.completes;
                r.skips = g.skips;
                r.pauses = g.pauses;
                r.resumes = g.resumes;
                r.mutes = g.mutes;
                r.unmutes = g.unmutes;
                r.funnel_gap_violations = g.funnel_gaps;
                r.repeated_milestone_violations = g.repeated_milestones;
                Ok(r.finish())
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        let ads = self.ad_report(f).await?;
        Ok(funnel::with_impressions(rows, &ads))
    }

    async fn product_report(&self, f: &ReportFilter) -> Result<Vec<ProductReportRow>, StoreError> {
        let mut w = Conds::default();
        w.str("campaign_id = ?", &f.campaign_id);
        w.str("ad_id = ?", &f.ad_id);
        w.str("catalog_id = ?", &f.catalog_id);
        w.int("day >= ?", f.from_day.map(i64::from));
        w.int("day <= ?", f.to_day.map(i64::from));
        // One fact per dedup key and action (exact whether or not copies were merged
        // away), with the best status of its copies; the row's status is the worst.
        let sql = format!(
            "SELECT campaign_id, ad_id, catalog_id, product_code, day, \
             countIf(action = '{IMPRESSION}'), countIf(action = '{CLICK}'), max(best_status) \
             FROM (SELECT campaign_id, ad_id, catalog_id, product_code, day, action, dedup_key, \
                   min(ad_id_status) AS best_status FROM product_facts{} \
                   GROUP BY campaign_id, ad_id, catalog_id, product_code, day, action, dedup_key) \
             GROUP BY campaign_id, ad_id, catalog_id, product_code, day \
             ORDER BY campaign_id, ad_id, catalog_id, product_code, day",
            w.clause()
        );
        let groups: Vec<ProductAgg> = w
            .bind(self.client().query(&sql))
            .fetch_all()
            .await
            .map_err(ch("product report"))?;
        let mut rows: Vec<(ProductGroup, u64, u64, AdIdStatus)> = groups
            .into_iter()
            .map(|g| {
                let group = ProductGroup {
                    campaign_id: g.campaign_id,
                    ad_id: g.ad_id,
                    catalog_id: g.catalog_id,
                    product_code: g.product_code,
                    day: g.day,
                };
                Ok((
                    group,
                    g.impressions,
                    g.clicks,
                    parse_status(g.ad_id_status)?,
                ))
            })
            .collect::<Result<_, StoreError>>()?;
        rows.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(rows
            .iter()
            .map(|(g, i, c, st)| ProductReportRow::new(g, *i, *c, *st))
            .collect())
    }

    /// The newest derived rows of the carts matching `w`.
    async fn cart_rows(&self, w: Conds) -> Result<Vec<CartEventRow>, StoreError> {
        let fail = ch("cart report");
        let sql = format!("SELECT ?fields FROM cart_events FINAL{}", w.clause());
        let mut cursor = w
            .bind(self.client().query(&sql))
            .fetch::<CartEventCh<'_>>()
            .map_err(&fail)?;
        let mut rows = Vec::new();
        while let Some(r) = cursor.next().await.map_err(&fail)? {
            rows.push(r.to_row()?);
        }
        Ok(rows)
    }

    async fn cart_report(&self, f: &ReportFilter) -> Result<Vec<CartStateRow>, StoreError> {
        let mut w = Conds::default();
        w.str("catalog_id = ?", &f.catalog_id);
        // A cart passes when its latest event matches the campaign, the ad and the
        // days: the server keeps only carts with some event that does (a superset),
        // the exact test runs below on the cart's state.
        let mut sub = Conds::default();
        sub.str("campaign_id = ?", &f.campaign_id);
        sub.str("ad_id = ?", &f.ad_id);
        sub.event_days(f);
        if !sub.sql.is_empty() {
            sub.str("catalog_id = ?", &f.catalog_id);
        }
        w.carts_having(sub);
        let rows = self.cart_rows(w).await?;
        Ok(carts::states(&rows)
            .into_iter()
            .filter(|s| {
                let day = crate::model::parse_day(&s.last_day).unwrap_or(0);
                f.matches(&s.campaign_id, Some(&s.ad_id), Some(&s.catalog_id), day)
            })
            .collect())
    }

    async fn cart_campaign_report(
        &self,
        f: &ReportFilter,
    ) -> Result<Vec<CartCampaignRow>, StoreError> {
        // Events of the filter's days (by their own time), of carts of the catalog.
        let mut w = Conds::default();
        w.str("catalog_id = ?", &f.catalog_id);
        w.event_days(f);
        // A campaign's rows come only from carts with an event of that campaign in
        // those days; the ad filter does not apply to this report.
        if f.campaign_id.is_some() {
            let mut sub = Conds::default();
            sub.str("campaign_id = ?", &f.campaign_id);
            sub.event_days(f);
            sub.str("catalog_id = ?", &f.catalog_id);
            w.carts_having(sub);
        }
        let rows = self.cart_rows(w).await?;
        Ok(carts::campaign_rollup(&rows)
            .into_iter()
            .filter(|r| f.campaign_id.as_deref().is_none_or(|c| c == r.campaign_id))
            .collect())
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

impl WriteStore for ClickHouseStore {
    async fn load(
        &self,
        views: &FastSet<ViewKey>,
        carts: &FastSet<CartKey>,
    ) -> Result<EntitySets, StoreError> {
        self.op("load", async {
            let (v, c) = tokio::try_join!(self.load_views(views), self.load_carts(carts))?;
            Ok(EntitySets {
                views: v.views,
                carts: c.carts,
            })
        })
        .await
    }

    async fn write(&self, batch: &BatchWrite) -> Result<(), StoreError> {
        self.op("write", self.write_batch(batch)).await
    }

    async fn known_orders(&self, ids: &HashSet<String>) -> Result<HashSet<String>, StoreError> {
        self.op("load orders", self.known_order_ids(ids)).await
    }
}

impl ReportStore for ClickHouseStore {
    async fn funnel(&self, f: &ReportFilter) -> Result<Vec<FunnelReportRow>, StoreError> {
        self.op("funnel report", self.funnel_report(f)).await
    }

    async fn products(&self, f: &ReportFilter) -> Result<Vec<ProductReportRow>, StoreError> {
        self.op("product report", self.product_report(f)).await
    }

    async fn carts(&self, f: &ReportFilter) -> Result<Vec<CartStateRow>, StoreError> {
        self.op("cart report", self.cart_report(f)).await
    }

    async fn cart_campaigns(&self, f: &ReportFilter) -> Result<Vec<CartCampaignRow>, StoreError> {
        self.op("cart campaign report", self.cart_campaign_report(f))
            .await
    }

    async fn ads(&self, f: &ReportFilter) -> Result<Vec<AdReportRow>, StoreError> {
        self.op("ad report", self.ad_report(f)).await
    }

    async fn cart_adds(&self, f: &ReportFilter) -> Result<Vec<CartAddsRow>, StoreError> {
        self.op("cart adds report", self.cart_adds_report(f)).await
    }

    async fn campaign_sales(
        &self,
        f: &ReportFilter,
        w: &Windows,
    ) -> Result<Vec<CampaignSalesRow>, StoreError> {
        self.op("campaign sales report", self.campaign_sales_report(f, w))
            .await
    }

    async fn sales(
        &self,
        f: &ReportFilter,
        w: &Windows,
    ) -> Result<Vec<SalesReportRow>, StoreError> {
        self.op("sales report", self.sales_report(f, w)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_error_codes_are_read_from_both_formats() {
        let old = "Code: 60, e.displayText() = DB::Exception: Table x.y doesn't exist., e.what() = DB::Exception";
        let new =
            "Code: 241. DB::Exception: Memory limit (total) exceeded. (MEMORY_LIMIT_EXCEEDED)";
        assert_eq!(exception_code(old), Some(60));
        assert_eq!(exception_code(new), Some(241));
        assert_eq!(exception_code("Code: 159"), Some(159));
        assert_eq!(exception_code("502 Bad Gateway"), None);
    }

    #[test]
    fn refused_only_when_a_retry_cannot_help() {
        let e = |s: &str| classify("t", clickhouse::error::Error::BadResponse(s.into()));
        assert!(
            !e("Code: 60, e.displayText() = DB::Exception: Table doesn't exist").is_retryable()
        );
        assert!(!e("Code: 53. DB::Exception: Type mismatch").is_retryable());
        assert!(e("Code: 241. DB::Exception: Memory limit exceeded").is_retryable());
        assert!(e("Code: 252. DB::Exception: Too many parts").is_retryable());
        assert!(e("503 Service Unavailable").is_retryable());
        assert!(classify("t", clickhouse::error::Error::TimedOut).is_retryable());
        assert!(!classify("t", clickhouse::error::Error::NotEnoughData).is_retryable());
    }

    #[test]
    fn dedup_keys_round_trip_as_fixed_width_hex() {
        for k in [0u128, 1, u128::MAX, 0xabc << 64] {
            let s = dedup_hex(k);
            assert_eq!(s.len(), 32);
            assert_eq!(parse_dedup(&s).expect("hex"), k);
        }
        assert!(
            dedup_hex(2) < dedup_hex(10),
            "string order is numeric order"
        );
        assert!(parse_dedup("xyz").is_err());
    }

    #[test]
    fn transitions_round_trip() {
        for t in [
            Transition::Add,
            Transition::Increment,
            Transition::Decrement,
            Transition::Removal,
            Transition::Unchanged,
        ] {
            assert_eq!(parse_transition(t.as_str()).expect("known"), t);
        }
    }

    #[test]
    fn readiness_follows_the_last_outcome_that_concerns_the_server() {
        let store = ClickHouseStore {
            inner: Arc::new(Inner {
                client: Client::default(),
                health: Mutex::new(Health {
                    at: Instant::now(),
                    problem: None,
                }),
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

    #[test]
    fn key_lists_are_bounded() {
        let keys: HashSet<String> = (0..2500).map(|i| format!("k{i:05}")).collect();
        let c = chunks(&keys, String::len);
        assert_eq!(
            c.iter().map(Vec::len).collect::<Vec<_>>(),
            vec![1000, 1000, 500]
        );
        let big: HashSet<String> = (0..10)
            .map(|i| format!("{i}{}", "x".repeat(40_000)))
            .collect();
        let c = chunks(&big, String::len);
        assert!(c
            .iter()
            .all(|c| c.iter().map(|k| k.len() + 16).sum::<usize>() <= KEY_BYTES_PER_QUERY));
        assert_eq!(c.iter().map(Vec::len).sum::<usize>(), 10);
        assert!(chunks(&HashSet::<String>::new(), String::len).is_empty());
    }
}
