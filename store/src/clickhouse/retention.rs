//! The ClickHouse store's fact retention ([`crate::model::retention`]): a pass first
//! inserts its cut and recount floor into `retention` (a name's mark is its highest
//! value), then deletes the raw rows dated before the cut, a statement per table,
//! each a time range (never a list of ids), on 18.16 as on current releases:
//!
//! | table | deleted when |
//! |---|---|
//! | `product_facts`, `ad_facts`, `views` | `day < before_day` (the event's or view's UTC day; `product_facts` stored before it kept its time held their day only) |
//! | `view_facts`, `attribution_touches`, `order_shoppers` | `time_ms < before_ms` |
//! | `cart_events`, `cart_lines` | the line's newest event is before the cut (a line in use stays whole) |
//! | `order_credits` | the order's lines are all before the cut (`order_lines` read in the statement, so it runs and ends first) |
//! | `order_lines` | the order's lines are all before the cut |
//!
//! The rollups are not touched. The aggregator runs a pass between two of its
//! writes, after its identifier ageing, and waits until `system.mutations` shows the
//! deletions done, at most [`MUTATION_TIMEOUT`]. A crash leaves rows the next pass
//! deletes (every statement is idempotent); the marks are written first, so a
//! rebuild never recounts a bucket whose facts a deletion may have reached.

use std::time::Duration;

use clickhouse::Row;
use serde::{Deserialize, Serialize};

use super::ageing::old_lines;
use super::erase::MUTATION_TIMEOUT;
use super::error::ch;
use super::ClickHouseStore;
use crate::model::retention::{Retired, Retirement};
use crate::model::tallies::{Grain, Metric};
use crate::StoreError;

/// Rows dated before this (ms) were removed.
const CUT: &str = "facts_retired_before_ms";
/// Buckets before this (ms) keep their counts through a rebuild.
const FLOOR: &str = "recount_from_ms";

#[derive(Row, Serialize, Deserialize)]
struct MarkCh {
    name: String,
    value: i64,
}

#[derive(Row, Deserialize)]
struct FloorCh {
    n: u64,
    value: i64,
}

/// Orders whose lines are all before `before_ms`.
fn old_orders(before_ms: i64) -> String {
    format!(
        "order_id IN (SELECT order_id FROM order_lines GROUP BY order_id \
         HAVING max(time_ms) < {before_ms})"
    )
}

impl ClickHouseStore {
    /// The store's recount floor (ms), `None` when no pass ever ran.
    pub(super) async fn recount_floor(&self) -> Result<Option<i64>, StoreError> {
        let r: FloorCh = self
            .client()
            .query("SELECT count() AS n, max(value) AS value FROM retention WHERE name = ?")
            .bind(FLOOR)
            .fetch_one()
            .await
            .map_err(ch("read the recount floor"))?;
        Ok((r.n > 0).then_some(r.value))
    }

    /// Deletes every tally but the counts of the buckets before `floor`, and every
    /// order state but those of the orders before it (a rebuild of a store that lost
    /// facts), and waits for both.
    pub(super) async fn clear_from_floor(&self, floor: i64) -> Result<(), StoreError> {
        let fail = ch("clear tallies from the recount floor");
        let before: Vec<String> = Grain::ALL
            .into_iter()
            .map(|g| format!("(grain = {} AND bucket < {})", g as u8, g.bucket(floor)))
            .collect();
        let kept = format!(
            "metric < {} AND ({})",
            Metric::FIRST_NOT_COUNT,
            before.join(" OR ")
        );
        for sql in [
            format!("ALTER TABLE rollups DELETE WHERE NOT ({kept})"),
            format!(
                "ALTER TABLE order_credits DELETE WHERE order_id NOT IN (SELECT order_id \
                 FROM order_lines GROUP BY order_id HAVING max(time_ms) < {floor})"
            ),
        ] {
            self.client().query(&sql).execute().await.map_err(&fail)?;
        }
        self.mutations_done(&["rollups", "order_credits"]).await
    }

    async fn deleting(&self, table: &str, cond: &str) -> Result<u64, StoreError> {
        let n = self.count("retire facts", table, cond).await?;
        if n > 0 {
            self.client()
                .query(&format!("ALTER TABLE {table} DELETE WHERE {cond}"))
                .execute()
                .await
                .map_err(ch("retire facts"))?;
        }
        Ok(n)
    }

    /// One pass ([`crate::erase::EraseStore::retire`]).
    pub(super) async fn retire_pass(&self, r: &Retirement) -> Result<Retired, StoreError> {
        let run = async {
            let marks = [
                MarkCh {
                    name: CUT.into(),
                    value: r.before_ms,
                },
                MarkCh {
                    name: FLOOR.into(),
                    value: r.recount_from_ms,
                },
            ];
            super::rows::insert_rows::<MarkCh>(self.client(), "retention", &marks).await?;
            let (day, ms) = (r.before_day(), r.before_ms);
            let mut n = Retired {
                product_facts: self
                    .deleting("product_facts", &format!("day < {day}"))
                    .await?,
                ad_facts: self.deleting("ad_facts", &format!("day < {day}")).await?,
                views: self.deleting("views", &format!("day < {day}")).await?,
                view_facts: self
                    .deleting("view_facts", &format!("time_ms < {ms}"))
                    .await?,
                touches: self
                    .deleting("attribution_touches", &format!("time_ms < {ms}"))
                    .await?,
                order_shoppers: self
                    .deleting("order_shoppers", &format!("time_ms < {ms}"))
                    .await?,
                cart_events: self
                    .deleting("cart_events", &old_lines("cart_events", "time_ms", ms))
                    .await?,
                ..Retired::default()
            };
            self.deleting("cart_lines", &old_lines("cart_lines", "last_ms", ms))
                .await?;
            // The states first, and done, while their lines still say which orders
            // are old.
            n.order_states = self.deleting("order_credits", &old_orders(ms)).await?;
            self.mutations_done(&["order_credits"]).await?;
            n.order_lines = self.deleting("order_lines", &old_orders(ms)).await?;
            self.mutations_done(&[
                "product_facts",
                "ad_facts",
                "views",
                "view_facts",
                "attribution_touches",
                "order_shoppers",
                "cart_events",
                "cart_lines",
                "order_lines",
            ])
            .await?;
            Ok(n)
        };
        let r = super::bounded("retire", MUTATION_TIMEOUT + Duration::from_secs(60), run).await;
        self.inner.note(&r);
        r
    }
}
