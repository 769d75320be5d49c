//! The ClickHouse store's erasures ([`crate::erase`]): the audit log (`erasures`)
//! and the run, as mutations that work on 18.16 and on current releases.
//!
//! - Columns outside a table's sorting key are changed in place with `ALTER TABLE
//!   ... UPDATE`: the facts' `shopper` hash, order lines' customer and session ids,
//!   and the served ads' and orders' states (decoded, changed and written back as
//!   `multiIf(state = old, new, ...)`).
//! - A sorting-key column cannot be updated (views, their facts, cart events,
//!   touches, orders by shopper: their keys start with the tracking id or the
//!   shopper). Those rows are copied under the replacement (`INSERT ... SELECT`),
//!   then the originals deleted (`ALTER TABLE ... DELETE`), both narrowed to the
//!   identities read first, so a row another writer adds in between is neither
//!   copied nor deleted (a second run replaces it). A read between the copy and the
//!   delete may see a view or a cart line under both ids for that moment; the
//!   reports, which read tallies, do not move.
//!
//! Mutations run in the background: the run waits until `system.mutations` shows
//! its tables' done, at most [`MUTATION_TIMEOUT`].
//! After a mutation the old parts are removed by the server once unused (8 minutes by
//! default, `old_parts_lifetime`): that bounds how long the id stays on disk.

use std::collections::BTreeSet;
use std::time::Duration;

use clickhouse::Row;
use serde::{Deserialize, Serialize};

use super::error::ch;
use super::query::{chunks, placeholders};
use super::rows::ServedCh;
use super::sales::OrderCreditCh;
use super::ClickHouseStore;
use crate::erase::EraseStore;
use crate::model::erasure::{Erased, Erasure};
use crate::StoreError;

/// Longest a run waits for its mutations.
pub const MUTATION_TIMEOUT: Duration = Duration::from_secs(600);

/// A row of `erasures`.
#[derive(Row, Serialize, Deserialize)]
struct ErasureCh {
    request_id: String,
    namespace: String,
    tracking_id: String,
    digest: String,
    hash: u64,
    replacement: String,
    client_id: String,
    requested_ms: i64,
    done_ms: i64,
    erased: String,
    version: u64,
}

const COLUMNS: &str = "request_id, namespace, tracking_id, digest, hash, replacement, \
                       client_id, requested_ms, done_ms, erased, version";

impl ErasureCh {
    fn of(e: &Erasure) -> Self {
        Self {
            request_id: e.request_id.clone(),
            namespace: e.namespace.clone().unwrap_or_default(),
            tracking_id: e.tracking_id.clone(),
            digest: e.digest.clone(),
            hash: e.hash,
            replacement: e.replacement.clone(),
            client_id: e.client_id.clone(),
            requested_ms: e.requested_ms,
            done_ms: e.done_ms,
            erased: serde_json::to_string(&e.erased).unwrap_or_default(),
            version: u64::from(e.done_ms != 0),
        }
    }

    fn erasure(self) -> Result<Erasure, StoreError> {
        Ok(Erasure {
            request_id: self.request_id,
            namespace: (!self.namespace.is_empty()).then_some(self.namespace),
            tracking_id: self.tracking_id,
            digest: self.digest,
            hash: self.hash,
            replacement: self.replacement,
            client_id: self.client_id,
            requested_ms: self.requested_ms,
            done_ms: self.done_ms,
            erased: serde_json::from_str(&self.erased)
                .map_err(|_| super::rows::corrupt("erasure result", &self.erased))?,
        })
    }
}

#[derive(Row, Deserialize)]
struct KeyCh {
    k: String,
}

#[derive(Row, Deserialize)]
struct CountCh {
    n: u64,
}

#[derive(Row, Deserialize)]
struct AdIdCh {
    ad_id: String,
}

#[derive(Row, Deserialize)]
struct OrderIdCh {
    order_id: String,
}

/// How a table's rows are told to be within an erasure's scope.
#[derive(Clone, Copy)]
enum Scope {
    /// By the namespace of the realised ad id in this column.
    Ad(&'static str),
    /// By the namespace of the scoped id in this column (orders, cart catalogs).
    Scoped(&'static str),
}

impl Scope {
    /// The condition and its bound value ("1" and none for an operator's erasure).
    fn cond(self, e: &Erasure) -> (String, Option<String>) {
        let Some(ns) = &e.namespace else {
            return ("1".into(), None);
        };
        match self {
            Self::Ad(col) => (
                format!("startsWith({col}, ?)"),
                Some(rm_schemas::ad_id::namespace_prefix(ns)),
            ),
            Self::Scoped(col) if ns == rm_schemas::namespace::DEFAULT => (
                format!("position({col}, ?) = 0"),
                Some(rm_schemas::namespace::SEPARATOR.to_string()),
            ),
            Self::Scoped(col) => (
                format!("startsWith({col}, ?)"),
                Some(format!("{ns}{}", rm_schemas::namespace::SEPARATOR)),
            ),
        }
    }
}

/// A table whose sorting key holds the id: its rows move to the replacement.
pub(super) struct Moved {
    pub(super) table: &'static str,
    /// Every column, in order.
    pub(super) columns: &'static str,
    /// The id column (`tracking_id` or `shopper`).
    pub(super) id: &'static str,
    /// The columns that identify a row beside the id.
    identity: &'static str,
    scope: Scope,
}

pub(super) const MOVED: [Moved; 6] = [
    Moved {
        table: "view_facts",
        columns: "ad_id, video_id, tracking_id, dedup_key, kind, time_ms, ad_id_status",
        id: "tracking_id",
        identity: "ad_id, video_id, dedup_key",
        scope: Scope::Ad("ad_id"),
    },
    Moved {
        table: "views",
        columns: "ad_id, video_id, tracking_id, campaign_id, day, version, creative_view, \
                  play, first_quartile, midpoint, third_quartile, complete, skips, pauses, \
                  resumes, mutes, unmutes, funnel_gaps, repeated_milestones, ad_id_status, \
                  served_repeat",
        id: "tracking_id",
        identity: "ad_id, video_id, version",
        scope: Scope::Ad("ad_id"),
    },
    Moved {
        table: "cart_events",
        columns: "tracking_id, catalog_id, product_code, dedup_key, time_ms, units, value, \
                  campaign_id, ad_id, prev_units, transition, version, ad_id_status",
        id: "tracking_id",
        identity: "catalog_id, product_code, dedup_key, version",
        scope: Scope::Scoped("catalog_id"),
    },
    Moved {
        table: "cart_lines",
        columns: "campaign_id, day, tracking_id, catalog_id, product_code, version, gone, \
                  last_ms, units, last_value, adds, increments, decrements, removals, ad_id, \
                  ad_id_status",
        id: "tracking_id",
        identity: "campaign_id, day, catalog_id, product_code, version, gone",
        scope: Scope::Scoped("catalog_id"),
    },
    Moved {
        table: "attribution_touches",
        columns: "shopper, time_ms, dedup_key, kind, ad_id, campaign_id, catalog_id, \
                  product_code",
        id: "shopper",
        identity: "time_ms, dedup_key",
        scope: Scope::Ad("ad_id"),
    },
    Moved {
        table: "order_shoppers",
        columns: "shopper, time_ms, order_id",
        id: "shopper",
        identity: "time_ms, order_id",
        scope: Scope::Scoped("order_id"),
    },
];

/// The id's stored forms in a table's id column, and what replaces each.
fn forms(id_column: &str, e: &Erasure) -> Vec<(String, String)> {
    if id_column == "tracking_id" {
        return vec![(e.tracking_id.clone(), e.replacement.clone())];
    }
    use crate::model::attribution::{shopper, ShopperId};
    [ShopperId::Customer, ShopperId::Session]
        .into_iter()
        .map(|k| (shopper(k, &e.tracking_id), shopper(k, &e.replacement)))
        .collect()
}

/// `concat(toString(a), '|', toString(b), ...)` of the identity columns.
fn identity_expr(identity: &str) -> String {
    let parts: Vec<String> = identity
        .split(", ")
        .map(|c| format!("toString({c})"))
        .collect();
    format!("concat({})", parts.join(", '|', "))
}

/// Every column, the id column's value replaced by a bound value (under another
/// name: ClickHouse lets `WHERE` see the select list's aliases, so `AS tracking_id`
/// would turn the condition on the stored id into one on the bound value).
fn replaced_columns(m: &Moved) -> String {
    m.columns
        .split(", ")
        .map(|c| {
            if c == m.id {
                "? AS erased_replacement".to_owned()
            } else {
                c.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

impl ClickHouseStore {
    async fn moved(&self, m: &Moved, e: &Erasure) -> Result<u64, StoreError> {
        let fail = ch("erase");
        let (scope, scope_value) = m.scope.cond(e);
        let ident = identity_expr(m.identity);
        let mut n = 0;
        for (old, new) in forms(m.id, e) {
            let sql = format!(
                "SELECT DISTINCT {ident} AS k FROM {} WHERE {} = ? AND {scope}",
                m.table, m.id
            );
            let mut q = self.client().query(&sql).bind(&old);
            if let Some(v) = &scope_value {
                q = q.bind(v);
            }
            let keys: Vec<String> = q
                .fetch_all::<KeyCh>()
                .await
                .map_err(&fail)?
                .into_iter()
                .map(|r| r.k)
                .collect();
            n += keys.len() as u64;
            for chunk in chunks(&keys, String::len) {
                let cond = format!(
                    "{} = ? AND {scope} AND {ident} IN ({})",
                    m.id,
                    placeholders(chunk.len())
                );
                let bind_cond = |mut q: clickhouse::query::Query| {
                    q = q.bind(&old);
                    if let Some(v) = &scope_value {
                        q = q.bind(v);
                    }
                    for k in &chunk {
                        q = q.bind(k.as_str());
                    }
                    q
                };
                let copy = format!(
                    "INSERT INTO {table} ({columns}) SELECT {replaced} FROM {table} WHERE {cond}",
                    table = m.table,
                    columns = m.columns,
                    replaced = replaced_columns(m),
                );
                bind_cond(self.client().query(&copy).bind(&new))
                    .execute()
                    .await
                    .map_err(&fail)?;
                let delete = format!("ALTER TABLE {} DELETE WHERE {cond}", m.table);
                bind_cond(self.client().query(&delete))
                    .execute()
                    .await
                    .map_err(&fail)?;
            }
        }
        Ok(n)
    }

    /// Facts' `shopper`: the id's hash becomes the replacement's.
    async fn hashed(&self, table: &str, e: &Erasure) -> Result<u64, StoreError> {
        let fail = ch("erase");
        let (scope, scope_value) = Scope::Ad("ad_id").cond(e);
        let count = format!("SELECT count() AS n FROM {table} WHERE shopper = ? AND {scope}");
        let mut q = self.client().query(&count).bind(e.hash);
        if let Some(v) = &scope_value {
            q = q.bind(v);
        }
        let n = q.fetch_one::<CountCh>().await.map_err(&fail)?.n;
        if n > 0 {
            let update =
                format!("ALTER TABLE {table} UPDATE shopper = ? WHERE shopper = ? AND {scope}");
            let mut q = self.client().query(&update).bind(e.new_hash()).bind(e.hash);
            if let Some(v) = &scope_value {
                q = q.bind(v);
            }
            q.execute().await.map_err(&fail)?;
        }
        Ok(n)
    }

    /// Order lines' customer and session ids.
    async fn order_lines(&self, e: &Erasure) -> Result<u64, StoreError> {
        let fail = ch("erase");
        let (scope, scope_value) = Scope::Scoped("order_id").cond(e);
        let named = format!("(customer_id = ? OR session_id = ?) AND {scope}");
        let bind = |mut q: clickhouse::query::Query| {
            q = q.bind(&e.tracking_id).bind(&e.tracking_id);
            if let Some(v) = &scope_value {
                q = q.bind(v);
            }
            q
        };
        let count = format!(
            "SELECT toUInt64(countIf(customer_id = ?) + countIf(session_id = ?)) AS n \
             FROM order_lines WHERE {named}"
        );
        let n = bind(
            self.client()
                .query(&count)
                .bind(&e.tracking_id)
                .bind(&e.tracking_id),
        )
        .fetch_one::<CountCh>()
        .await
        .map_err(&fail)?
        .n;
        if n > 0 {
            let update = format!(
                "ALTER TABLE order_lines UPDATE \
                 customer_id = if(customer_id = ?, ?, customer_id), \
                 session_id = if(session_id = ?, ?, session_id) WHERE {named}"
            );
            let q = self
                .client()
                .query(&update)
                .bind(&e.tracking_id)
                .bind(&e.replacement)
                .bind(&e.tracking_id)
                .bind(&e.replacement);
            bind(q).execute().await.map_err(&fail)?;
        }
        Ok(n)
    }

    /// The ads whose served states may keep the id's hash: those of its facts and
    /// views, under the id or already under the replacement.
    async fn candidate_ads(&self, e: &Erasure) -> Result<BTreeSet<String>, StoreError> {
        let fail = ch("erase");
        let (scope, scope_value) = Scope::Ad("ad_id").cond(e);
        let mut ads = BTreeSet::new();
        for (table, col) in [
            ("product_facts", "shopper IN (?, ?)"),
            ("ad_facts", "shopper IN (?, ?)"),
            ("views", "tracking_id IN (?, ?)"),
        ] {
            let sql = format!("SELECT DISTINCT ad_id FROM {table} WHERE {col} AND {scope}");
            let mut q = self.client().query(&sql);
            q = if table == "views" {
                q.bind(&e.tracking_id).bind(&e.replacement)
            } else {
                q.bind(e.hash).bind(e.new_hash())
            };
            if let Some(v) = &scope_value {
                q = q.bind(v);
            }
            let rows: Vec<AdIdCh> = q.fetch_all().await.map_err(&fail)?;
            ads.extend(rows.into_iter().map(|r| r.ad_id));
        }
        Ok(ads)
    }

    /// The orders whose states may keep the id.
    async fn candidate_orders(&self, e: &Erasure) -> Result<BTreeSet<String>, StoreError> {
        let (scope, scope_value) = Scope::Scoped("order_id").cond(e);
        let sql = format!(
            "SELECT DISTINCT order_id FROM order_lines \
             WHERE (customer_id IN (?, ?) OR session_id IN (?, ?)) AND {scope}"
        );
        let mut q = self
            .client()
            .query(&sql)
            .bind(&e.tracking_id)
            .bind(&e.replacement)
            .bind(&e.tracking_id)
            .bind(&e.replacement);
        if let Some(v) = &scope_value {
            q = q.bind(v);
        }
        let rows: Vec<OrderIdCh> = q.fetch_all().await.map_err(ch("erase"))?;
        Ok(rows.into_iter().map(|r| r.order_id).collect())
    }

    /// Rewrites states: `changes` are (key, old state text, new state text).
    async fn states(
        &self,
        table: &str,
        key: &str,
        changes: &[(String, String, String)],
    ) -> Result<(), StoreError> {
        // At most ~100 KB of state text per statement (the server parses 256 KiB).
        let mut at = 0;
        while at < changes.len() {
            let mut end = at;
            let mut bytes = 0;
            while end < changes.len() && (end == at || bytes < 100_000) {
                bytes += changes[end].0.len() + changes[end].1.len() + changes[end].2.len();
                end += 1;
            }
            let part = &changes[at..end];
            let arms = vec!["state = ?, ?"; part.len()].join(", ");
            let keys: BTreeSet<&str> = part.iter().map(|c| c.0.as_str()).collect();
            let sql = format!(
                "ALTER TABLE {table} UPDATE state = multiIf({arms}, state) WHERE {key} IN ({})",
                placeholders(keys.len())
            );
            let mut q = self.client().query(&sql);
            for (_, old, new) in part {
                q = q.bind(old.as_str()).bind(new.as_str());
            }
            for k in keys {
                q = q.bind(k);
            }
            q.execute().await.map_err(ch("erase"))?;
            at = end;
        }
        Ok(())
    }

    async fn served(&self, e: &Erasure, ads: &BTreeSet<String>) -> Result<u64, StoreError> {
        let mut changes = Vec::new();
        let mut changed = BTreeSet::new();
        for chunk in chunks(ads, String::len) {
            let sql = format!(
                "SELECT ad_id, state, version, expires_at FROM served_ads PREWHERE ad_id IN ({})",
                placeholders(chunk.len())
            );
            let mut q = self.client().query(&sql);
            for a in chunk {
                q = q.bind(a.as_str());
            }
            let rows: Vec<ServedCh> = q.fetch_all().await.map_err(ch("erase"))?;
            for row in rows {
                let mut state = row.state()?;
                if e.swap_served(&row.ad_id, &mut state) {
                    let new = ServedCh::of(&row.ad_id, &state).state;
                    changed.insert(row.ad_id.clone());
                    changes.push((row.ad_id, row.state, new));
                }
            }
        }
        self.states("served_ads", "ad_id", &changes).await?;
        Ok(changed.len() as u64)
    }

    async fn order_states(
        &self,
        e: &Erasure,
        orders: &BTreeSet<String>,
    ) -> Result<u64, StoreError> {
        let mut changes = Vec::new();
        let mut changed = BTreeSet::new();
        for chunk in chunks(orders, String::len) {
            let sql = format!(
                "SELECT order_id, state, version FROM order_credits PREWHERE order_id IN ({})",
                placeholders(chunk.len())
            );
            let mut q = self.client().query(&sql);
            for o in chunk {
                q = q.bind(o.as_str());
            }
            let rows: Vec<OrderCreditCh> = q.fetch_all().await.map_err(ch("erase"))?;
            for row in rows {
                let mut state = row.state()?;
                if e.swap_order(&mut state) {
                    let new = OrderCreditCh::of(&state).state;
                    changed.insert(row.order_id.clone());
                    changes.push((row.order_id, row.state, new));
                }
            }
        }
        self.states("order_credits", "order_id", &changes).await?;
        Ok(changed.len() as u64)
    }

    /// Waits until no mutation of these tables is pending (18.16 does not say why
    /// one fails: it retries it, and the wait ends in an error at its bound).
    pub(super) async fn mutations_done(&self, tables: &[&str]) -> Result<(), StoreError> {
        #[derive(Row, Deserialize)]
        struct PendingCh {
            table: String,
        }
        let started = std::time::Instant::now();
        loop {
            let sql = format!(
                "SELECT table FROM system.mutations \
                 WHERE database = currentDatabase() AND is_done = 0 AND table IN ({})",
                placeholders(tables.len())
            );
            let mut q = self.client().query(&sql);
            for t in tables {
                q = q.bind(*t);
            }
            let pending: Vec<PendingCh> = q.fetch_all().await.map_err(ch("erase: mutations"))?;
            let Some(first) = pending.first() else {
                return Ok(());
            };
            if started.elapsed() > MUTATION_TIMEOUT {
                return Err(StoreError::Unavailable(format!(
                    "erase: mutations of {} still running after {:?}",
                    first.table, MUTATION_TIMEOUT
                )));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn read_erasures(&self, cond: &str, bind: &str) -> Result<Vec<Erasure>, StoreError> {
        let sql = format!(
            "SELECT {COLUMNS} FROM erasures FINAL WHERE {cond} ORDER BY requested_ms, request_id"
        );
        let rows: Vec<ErasureCh> = self
            .client()
            .query(&sql)
            .bind(bind)
            .fetch_all()
            .await
            .map_err(ch("erasures"))?;
        rows.into_iter().map(ErasureCh::erasure).collect()
    }
}

impl EraseStore for ClickHouseStore {
    async fn request_erasure(&self, e: &Erasure) -> Result<(), StoreError> {
        let row = ErasureCh::of(e);
        self.op(
            "record an erasure",
            super::rows::insert_rows::<ErasureCh>(self.client(), "erasures", &[row]),
        )
        .await
    }

    async fn erasure(&self, request_id: &str) -> Result<Option<Erasure>, StoreError> {
        let found = self
            .op(
                "read an erasure",
                self.read_erasures("request_id = ?", request_id),
            )
            .await?;
        Ok(found.into_iter().next())
    }

    async fn erasures_since(&self, since_ms: i64) -> Result<Vec<Erasure>, StoreError> {
        self.op(
            "read erasures",
            self.read_erasures("requested_ms >= toInt64(?)", &since_ms.to_string()),
        )
        .await
    }

    async fn erase(&self, e: &Erasure) -> Result<Erased, StoreError> {
        crate::erase::runnable(e)?;
        let run = async {
            let ads = self.candidate_ads(e).await?;
            let orders = self.candidate_orders(e).await?;
            let mut erased = Erased {
                product_facts: self.hashed("product_facts", e).await?,
                ad_facts: self.hashed("ad_facts", e).await?,
                order_lines: self.order_lines(e).await?,
                ..Erased::default()
            };
            for m in &MOVED {
                let n = self.moved(m, e).await?;
                match m.table {
                    "view_facts" => erased.view_facts = n,
                    "views" => erased.views = n,
                    "cart_events" => erased.cart_events = n,
                    // The carts report's entries of the lines just counted.
                    "cart_lines" => {}
                    "attribution_touches" => erased.touches = n,
                    _ => erased.order_shoppers = n,
                }
            }
            erased.served_ads = self.served(e, &ads).await?;
            erased.order_states = self.order_states(e, &orders).await?;
            let mut tables: Vec<&str> = MOVED.iter().map(|m| m.table).collect();
            tables.extend([
                "product_facts",
                "ad_facts",
                "order_lines",
                "served_ads",
                "order_credits",
            ]);
            self.mutations_done(&tables).await?;
            Ok(erased)
        };
        let r = super::bounded("erase", MUTATION_TIMEOUT + Duration::from_secs(60), run).await;
        self.inner.note(&r);
        r
    }

    async fn finish_erasure(
        &self,
        e: &Erasure,
        done_ms: i64,
        erased: Erased,
    ) -> Result<(), StoreError> {
        let Some(mut stored) = self.erasure(&e.request_id).await? else {
            return Ok(());
        };
        if stored.done_ms != 0 {
            return Ok(());
        }
        stored.done_ms = done_ms;
        stored.erased = erased;
        let row = ErasureCh::of(&stored);
        self.op(
            "finish an erasure",
            super::rows::insert_rows::<ErasureCh>(self.client(), "erasures", &[row]),
        )
        .await
    }

    async fn age(&self, a: &crate::model::ageing::Ageing) -> Result<Erased, StoreError> {
        self.age_pass(a).await
    }

    async fn retire(
        &self,
        r: &crate::model::retention::Retirement,
    ) -> Result<crate::model::retention::Retired, StoreError> {
        self.retire_pass(r).await
    }

    async fn settle_erasures(&self, before_ms: i64) -> Result<usize, StoreError> {
        let fail = ch("settle erasures");
        let n = self
            .client()
            .query(
                "SELECT toUInt64(uniqExact(request_id)) AS n FROM erasures \
                 WHERE tracking_id != '' AND requested_ms < toInt64(?)",
            )
            .bind(before_ms.to_string())
            .fetch_one::<CountCh>()
            .await
            .map_err(&fail)?
            .n;
        if n > 0 {
            self.client()
                .query(
                    "ALTER TABLE erasures UPDATE tracking_id = '' \
                     WHERE tracking_id != '' AND requested_ms < toInt64(?)",
                )
                .bind(before_ms.to_string())
                .execute()
                .await
                .map_err(&fail)?;
            self.mutations_done(&["erasures"]).await?;
        }
        Ok(usize::try_from(n).unwrap_or(usize::MAX))
    }
}
