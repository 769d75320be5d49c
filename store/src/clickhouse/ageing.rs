//! The ClickHouse store's ageing pass ([`crate::model::ageing`]): the shopper ids of
//! rows past the identifier retention replaced by keyed hashes computed in SQL, as
//! statements that run on 18.16 and on current releases. A pass costs a few
//! statements per table whatever the number of shoppers: every condition is a time
//! range and a pattern, never a list of ids.
//!
//! - **Facts** (`product_facts`, `ad_facts`): `ALTER TABLE ... UPDATE shopper = <keyed
//!   hash>, aged = 1 WHERE aged = 0 AND received_ms < before` (the `aged` column
//!   makes it idempotent: the hash has no mark of its own).
//! - **Order lines**: `customer_id` and `session_id` updated in place, each unless
//!   already [`kept`](crate::model::ageing::kept).
//! - **Orders' states** (`order_credits`, opaque encodings): read for the orders of
//!   the lines aged, aged in Rust, written as the next version, then one `ALTER ...
//!   DELETE` of the old orders' superseded versions.
//! - **Tables keyed by the id** (views, their facts, cart events, touches, orders by
//!   shopper): the rows are copied under the pseudonym (`INSERT ... SELECT`), then
//!   the originals deleted, both with the same condition (old, id not kept). A crash
//!   between the two leaves copies of rows a second pass copies again: the copies
//!   are equal rows of one key, which the tables' `FINAL` and distinct reads count
//!   once. A cart line moves only when its newest event is old.
//!
//! The aggregator runs a pass between two of its writes (nothing else writes these
//! tables), then waits until `system.mutations` shows them done, at most
//! [`MUTATION_TIMEOUT`]. Each mutation rewrites the parts of its table, so a pass
//! costs about a rewrite of the store: one a day (`RM_AGGREGATOR_AGEING_SECS`).
//! The key is written into the statements (64 hex digits, checked), so it is in the
//! server's query log and `system.mutations`: who reads those can link a known id to
//! its aged rows, as the aggregator can.

use std::time::Duration;

use clickhouse::Row;
use serde::Deserialize;

use super::erase::MUTATION_TIMEOUT;
use super::error::ch;
use super::sales::OrderCreditCh;
use super::ClickHouseStore;
use crate::model::ageing::{Ageing, KEPT_PATTERN};
use crate::model::erasure::Erased;
use crate::write::FastSet;
use crate::StoreError;

#[derive(Row, Deserialize)]
struct CountCh {
    n: u64,
}

#[derive(Row, Deserialize)]
struct OrderIdCh {
    order_id: String,
}

/// The SQL of one pass: its key and times as literals (the key is hex digits only).
struct Sql {
    key: String,
    before_ms: i64,
    before_day: i32,
}

impl Sql {
    fn of(a: &Ageing) -> Result<Self, StoreError> {
        let key = a.key_text();
        if key.len() != 64 || !key.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(StoreError::Refused("ageing: a key of 64 hex digits".into()));
        }
        Ok(Self {
            key: key.to_owned(),
            before_ms: a.before_ms,
            before_day: a.before_day(),
        })
    }

    /// Whether the id in `col` is kept as it is.
    fn kept(col: &str) -> String {
        format!("({col} = '' OR match({col}, '{KEPT_PATTERN}'))")
    }

    /// The pseudonym of the id in `col`.
    fn pseudonym(&self, col: &str) -> String {
        format!(
            "concat('aged-', lower(hex(substring(SHA256(concat('{}', '|', {col})), 1, 16))))",
            self.key
        )
    }

    /// The aged form of a 64-bit hash in `col`.
    fn hash(&self, col: &str) -> String {
        format!(
            "reinterpretAsUInt64(substring(SHA256(concat('{}', '#', toString({col}))), 1, 8))",
            self.key
        )
    }

    /// The id inside a shopper (`customer:<id>`).
    fn shopper_id(col: &str) -> String {
        format!("substring({col}, position({col}, ':') + 1)")
    }

    /// Whether the shopper in `col` is kept as it is.
    fn shopper_kept(col: &str) -> String {
        format!(
            "(position({col}, ':') = 0 OR {})",
            Self::kept(&Self::shopper_id(col))
        )
    }

    /// The aged form of the shopper in `col`.
    fn aged_shopper(&self, col: &str) -> String {
        format!(
            "concat(substring({col}, 1, position({col}, ':')), {})",
            self.pseudonym(&Self::shopper_id(col))
        )
    }
}

/// A table whose sorting key holds the id (the erasure's list of them,
/// [`super::erase::MOVED`]): its old rows move to the pseudonym.
struct Moved<'a>(&'a super::erase::Moved);

impl Moved<'_> {
    /// Whether the id is a shopper (`customer:<id>`) rather than a tracking id.
    fn shopper(&self) -> bool {
        self.0.id == "shopper"
    }

    /// Which rows move.
    fn cond(&self, s: &Sql) -> String {
        let fresh = if self.shopper() {
            format!("NOT {}", Sql::shopper_kept(self.0.id))
        } else {
            format!("NOT {}", Sql::kept(self.0.id))
        };
        match self.0.table {
            "views" => format!("day < {} AND {fresh}", s.before_day),
            // A line moves whole, once its newest event is old; so do the carts
            // report's entries of those lines (their rows at every place).
            "cart_events" => format!(
                "{fresh} AND {}",
                old_lines("cart_events", "time_ms", s.before_ms)
            ),
            "cart_lines" => format!(
                "{fresh} AND {}",
                old_lines("cart_lines", "last_ms", s.before_ms)
            ),
            _ => format!("time_ms < {} AND {fresh}", s.before_ms),
        }
    }

    /// Every column, the id replaced by its aged form (under another name: `WHERE`
    /// sees the select list's aliases).
    fn aged_columns(&self, s: &Sql) -> String {
        self.0
            .columns
            .split(", ")
            .map(|c| {
                if c != self.0.id {
                    c.to_owned()
                } else if self.shopper() {
                    format!("{} AS aged_id", s.aged_shopper(c))
                } else {
                    format!("{} AS aged_id", s.pseudonym(c))
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The rows of `table`'s cart lines whose newest event (`time`, the column holding
/// each row's) is before `before_ms` (also the fact retention's condition,
/// `retention.rs`).
pub(super) fn old_lines(table: &str, time: &str, before_ms: i64) -> String {
    format!(
        "(tracking_id, catalog_id, product_code) IN (SELECT tracking_id, catalog_id, \
         product_code FROM {table} GROUP BY tracking_id, catalog_id, product_code \
         HAVING max({time}) < {before_ms})"
    )
}

/// Every table a pass changes.
const TABLES: [&str; 10] = [
    "view_facts",
    "views",
    "cart_events",
    "cart_lines",
    "attribution_touches",
    "order_shoppers",
    "product_facts",
    "ad_facts",
    "order_lines",
    "order_credits",
];

impl ClickHouseStore {
    /// The rows of `table` that meet `cond` (for the statement `what`'s errors).
    pub(super) async fn count(
        &self,
        what: &'static str,
        table: &str,
        cond: &str,
    ) -> Result<u64, StoreError> {
        let sql = format!("SELECT count() AS n FROM {table} WHERE {cond}");
        let r = self.client().query(&sql).fetch_one::<CountCh>().await;
        Ok(r.map_err(ch(what))?.n)
    }

    async fn execute(&self, sql: &str) -> Result<(), StoreError> {
        self.client().query(sql).execute().await.map_err(ch("age"))
    }

    async fn age_moved(&self, m: &Moved<'_>, s: &Sql) -> Result<u64, StoreError> {
        let cond = m.cond(s);
        let n = self.count("age", m.0.table, &cond).await?;
        if n == 0 {
            return Ok(0);
        }
        let copy = format!(
            "INSERT INTO {table} ({columns}) SELECT {aged} FROM {table} WHERE {cond}",
            table = m.0.table,
            columns = m.0.columns,
            aged = m.aged_columns(s),
        );
        self.execute(&copy).await?;
        self.execute(&format!("ALTER TABLE {} DELETE WHERE {cond}", m.0.table))
            .await?;
        Ok(n)
    }

    async fn age_facts(&self, table: &str, s: &Sql) -> Result<u64, StoreError> {
        let cond = format!(
            "aged = 0 AND shopper != 0 AND received_ms < {}",
            s.before_ms
        );
        let n = self.count("age", table, &cond).await?;
        if n > 0 {
            let update = format!(
                "ALTER TABLE {table} UPDATE shopper = {}, aged = 1 WHERE {cond}",
                s.hash("shopper")
            );
            self.execute(&update).await?;
        }
        Ok(n)
    }

    /// Order lines and their orders' states: (lines, states) aged.
    async fn age_orders(&self, a: &Ageing, s: &Sql) -> Result<(u64, u64), StoreError> {
        let cond = format!(
            "time_ms < {} AND NOT ({} AND {})",
            s.before_ms,
            Sql::kept("customer_id"),
            Sql::kept("session_id")
        );
        let sql = format!("SELECT DISTINCT order_id FROM order_lines WHERE {cond}");
        let orders: FastSet<String> = self
            .client()
            .query(&sql)
            .fetch_all::<OrderIdCh>()
            .await
            .map_err(ch("age"))?
            .into_iter()
            .map(|r| r.order_id)
            .collect();
        if orders.is_empty() {
            return Ok((0, 0));
        }
        let lines = self.count("age", "order_lines", &cond).await?;
        let update = format!(
            "ALTER TABLE order_lines UPDATE customer_id = if({kc}, customer_id, {pc}), \
             session_id = if({ks}, session_id, {ps}) WHERE {cond}",
            kc = Sql::kept("customer_id"),
            pc = s.pseudonym("customer_id"),
            ks = Sql::kept("session_id"),
            ps = s.pseudonym("session_id"),
        );
        self.execute(&update).await?;
        let mut states = Vec::new();
        for (_, mut state) in self.load_order_states(&orders).await? {
            if a.age_order(&mut state) {
                // The next version, so that it replaces the stored one.
                state.version += 1;
                states.push(OrderCreditCh::of(&state));
            }
        }
        if !states.is_empty() {
            super::rows::insert_rows::<OrderCreditCh>(self.client(), "order_credits", &states)
                .await?;
            // The superseded versions of the old orders (they hold the ids).
            let delete = format!(
                "ALTER TABLE order_credits DELETE WHERE order_id IN (SELECT order_id FROM \
                 order_lines WHERE time_ms < {}) AND (order_id, version) NOT IN (SELECT \
                 order_id, max(version) FROM order_credits GROUP BY order_id)",
                s.before_ms
            );
            self.execute(&delete).await?;
        }
        Ok((lines, states.len() as u64))
    }

    /// One pass ([`crate::erase::EraseStore::age`]).
    pub(super) async fn age_pass(&self, a: &Ageing) -> Result<Erased, StoreError> {
        let s = Sql::of(a)?;
        let run = async {
            let (order_lines, order_states) = self.age_orders(a, &s).await?;
            let mut aged = Erased {
                product_facts: self.age_facts("product_facts", &s).await?,
                ad_facts: self.age_facts("ad_facts", &s).await?,
                order_lines,
                order_states,
                ..Erased::default()
            };
            for m in &super::erase::MOVED {
                let n = self.age_moved(&Moved(m), &s).await?;
                match m.table {
                    "view_facts" => aged.view_facts = n,
                    "views" => aged.views = n,
                    "cart_events" => aged.cart_events = n,
                    "cart_lines" => {}
                    "attribution_touches" => aged.touches = n,
                    _ => aged.order_shoppers = n,
                }
            }
            self.mutations_done(&TABLES).await?;
            Ok(aged)
        };
        let r = super::bounded("age", MUTATION_TIMEOUT + Duration::from_secs(60), run).await;
        self.inner.note(&r);
        r
    }
}
