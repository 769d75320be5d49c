//! ClickHouse's side of attribution as orders arrive
//! ([`crate::model::tallies::sales`]): the orders' states (`order_credits`,
//! `ReplacingMergeTree(version)`, read with `argMax`: a state only changes forward),
//! the orders by shopper (`order_shoppers`, sorted by shopper and time: the touches'
//! side's lookup), and the touches by shopper (`attribution_touches` is sorted so
//! already).
//!
//! **Stores of the previous version** are converted by the aggregator's first start
//! ([`ClickHouseStore::backfill_order_sales`]): the orders are indexed by shopper
//! (`INSERT ... SELECT` from `order_lines`, idempotent), every order without a state
//! is attributed from the stored touches, and the counts are inserted first, the
//! states after them, the sales' marker last; a crash in between computes the same
//! counts again (same keys, same values) for the orders still without a state.

use std::collections::{BTreeMap, BTreeSet};

use clickhouse::Row;
use serde::{Deserialize, Serialize};

use super::error::ch;
use super::query::{chunks, placeholders};
use super::rows::{corrupt, hex, insert_rows, unhex, OrderLineCh, TouchCh};
use super::ClickHouseStore;
use crate::model::attribution::{OrderLine, ShopperId, Touch, Windows};
use crate::model::tallies::sales::{self, OrderCredits, ShopperOrder};
use crate::model::tallies::{Tally, TallyKey, BACKFILL_PARTITION};
use crate::write::{FastMap, FastSet};
use crate::StoreError;

/// A row of `order_credits` (the state as hex of its bytes).
#[derive(Row, Serialize, Deserialize)]
pub(crate) struct OrderCreditCh {
    pub(crate) order_id: String,
    pub(crate) state: String,
    pub(crate) version: u64,
}

impl OrderCreditCh {
    pub(crate) fn of(s: &OrderCredits) -> Self {
        Self {
            order_id: s.order_id().to_owned(),
            state: hex(&s.to_bytes()),
            version: s.version,
        }
    }

    pub(crate) fn state(&self) -> Result<OrderCredits, StoreError> {
        let bad = || corrupt("order state", &self.order_id);
        let bytes = unhex(self.state.as_bytes()).ok_or_else(bad)?;
        OrderCredits::from_bytes(&bytes).map_err(|_| bad())
    }
}

/// A row of `order_shoppers`.
#[derive(Row, Serialize, Deserialize)]
pub(crate) struct ShopperOrderCh {
    pub(crate) shopper: String,
    pub(crate) time_ms: i64,
    pub(crate) order_id: String,
}

impl ClickHouseStore {
    /// The states of `ids` (absent ones left out).
    pub(crate) async fn load_order_states(
        &self,
        ids: &FastSet<String>,
    ) -> Result<FastMap<String, OrderCredits>, StoreError> {
        let fail = ch("load order states");
        let mut out = FastMap::default();
        for chunk in chunks(ids, String::len) {
            let sql = format!(
                "SELECT order_id, argMax(state, version) AS s, max(version) AS v \
                 FROM order_credits PREWHERE order_id IN ({}) GROUP BY order_id",
                placeholders(chunk.len())
            );
            let mut q = self.client().query(&sql);
            for id in chunk {
                q = q.bind(id);
            }
            for r in q.fetch_all::<OrderCreditCh>().await.map_err(&fail)? {
                out.insert(r.order_id.clone(), r.state()?);
            }
        }
        Ok(out)
    }

    /// Every stored order's state (the zones' backfill: a store's first start on
    /// this version).
    pub(crate) async fn all_order_states(&self) -> Result<Vec<OrderCredits>, StoreError> {
        let rows: Vec<OrderCreditCh> = self
            .client()
            .query(
                "SELECT order_id, argMax(state, version) AS s, max(version) AS v \
                 FROM order_credits GROUP BY order_id",
            )
            .fetch_all()
            .await
            .map_err(ch("load order states"))?;
        rows.iter().map(OrderCreditCh::state).collect()
    }

    /// The stored touches of `shoppers` dated `from..=to`.
    pub(crate) async fn shoppers_touches(
        &self,
        shoppers: &BTreeSet<String>,
        from: i64,
        to: i64,
    ) -> Result<Vec<Touch>, StoreError> {
        let fail = ch("load touches");
        let mut out = Vec::new();
        for chunk in chunks(shoppers, String::len) {
            let sql = format!(
                "SELECT ?fields FROM attribution_touches \
                 PREWHERE shopper IN ({}) WHERE time_ms >= ? AND time_ms <= ?",
                placeholders(chunk.len())
            );
            let mut q = self.client().query(&sql);
            for s in chunk {
                q = q.bind(s);
            }
            let rows: Vec<TouchCh> = q.bind(from).bind(to).fetch_all().await.map_err(&fail)?;
            for r in rows {
                out.push(r.into_touch()?);
            }
        }
        Ok(out)
    }

    /// The stored orders of `shoppers` dated `from..=to`.
    pub(crate) async fn shoppers_orders(
        &self,
        shoppers: &BTreeSet<String>,
        from: i64,
        to: i64,
    ) -> Result<Vec<ShopperOrder>, StoreError> {
        let fail = ch("load orders by shopper");
        let mut out = Vec::new();
        for chunk in chunks(shoppers, String::len) {
            let sql = format!(
                "SELECT ?fields FROM order_shoppers \
                 PREWHERE shopper IN ({}) WHERE time_ms >= ? AND time_ms <= ?",
                placeholders(chunk.len())
            );
            let mut q = self.client().query(&sql);
            for s in chunk {
                q = q.bind(s);
            }
            let rows: Vec<ShopperOrderCh> =
                q.bind(from).bind(to).fetch_all().await.map_err(&fail)?;
            out.extend(rows.into_iter().map(|r| ShopperOrder {
                shopper: r.shopper,
                time_ms: r.time_ms,
                order_id: r.order_id,
            }));
        }
        out.sort();
        out.dedup();
        Ok(out)
    }

    /// Inserts a batch's order states and its new orders' index rows (after its
    /// tallies: see `write.rs`).
    pub(crate) async fn insert_order_rows(
        &self,
        states: &[OrderCredits],
        lines: &[OrderLine],
    ) -> Result<(), StoreError> {
        let states: Vec<OrderCreditCh> = states.iter().map(OrderCreditCh::of).collect();
        let index: Vec<ShopperOrderCh> = sales::shopper_orders(lines)
            .into_iter()
            .map(|o| ShopperOrderCh {
                shopper: o.shopper,
                time_ms: o.time_ms,
                order_id: o.order_id,
            })
            .collect();
        tokio::try_join!(
            insert_rows::<OrderCreditCh>(self.client(), "order_credits", &states),
            insert_rows::<ShopperOrderCh>(self.client(), "order_shoppers", &index),
        )?;
        Ok(())
    }

    pub(crate) async fn has_sales_marker(&self) -> Result<bool, StoreError> {
        self.has(&TallyKey::sales_marker()).await
    }

    /// Marks a store without orders as attributed (nothing to backfill), at connect.
    pub(crate) async fn mark_sales_if_new(&self) -> Result<(), StoreError> {
        let orders: u64 = self
            .client()
            .query("SELECT count() FROM (SELECT 1 FROM order_lines LIMIT 1)")
            .fetch_one()
            .await
            .map_err(ch("read orders"))?;
        if orders == 0 && !self.has_sales_marker().await? {
            let row = (TallyKey::sales_marker(), Tally::MARKED);
            self.insert_tallies(&[row]).await?;
        }
        Ok(())
    }

    /// The sales' backfill, once (see [`crate::WriteStore::backfill_sales`]).
    pub(crate) async fn backfill_order_sales(&self, w: &Windows) -> Result<bool, StoreError> {
        if self.has_sales_marker().await? {
            return Ok(false);
        }
        let fail = ch("backfill sales");
        for (kind, column) in [
            (ShopperId::Customer, "customer_id"),
            (ShopperId::Session, "session_id"),
        ] {
            let sql = format!(
                "INSERT INTO order_shoppers (shopper, time_ms, order_id) \
                 SELECT concat('{}', {column}), time_ms, order_id FROM order_lines \
                 WHERE {column} != ''",
                kind.prefix()
            );
            self.client().query(&sql).execute().await.map_err(&fail)?;
        }
        let rows: Vec<OrderLineCh> = self
            .client()
            .query(
                "SELECT ?fields FROM order_lines \
                 WHERE order_id NOT IN (SELECT order_id FROM order_credits)",
            )
            .fetch_all()
            .await
            .map_err(&fail)?;
        let mut by_order: BTreeMap<String, Vec<OrderLine>> = BTreeMap::new();
        for r in rows {
            let l = OrderLine::try_from(r)?;
            by_order.entry(l.order_id.clone()).or_default().push(l);
        }
        let mut states = Vec::with_capacity(by_order.len());
        let mut counts: BTreeMap<TallyKey, i64> = BTreeMap::new();
        // A thousand orders at a time: their shoppers' touches in one read.
        let orders: Vec<Vec<OrderLine>> = by_order.into_values().collect();
        for group in orders.chunks(1000) {
            let shoppers: BTreeSet<String> = group
                .iter()
                .flatten()
                .flat_map(OrderLine::shoppers)
                .collect();
            let from = group
                .iter()
                .flatten()
                .map(|l| sales::touch_span(l.time_ms, w).0)
                .min();
            let to = group.iter().flatten().map(|l| l.time_ms).max();
            let touches = match (from, to) {
                (Some(from), Some(to)) if !shoppers.is_empty() => {
                    self.shoppers_touches(&shoppers, from, to).await?
                }
                _ => Vec::new(),
            };
            for lines in group {
                let mut state = OrderCredits::new(lines);
                for t in &touches {
                    state.offer(t, w);
                }
                for (k, d) in sales::moves(&Default::default(), &state.counts(), BACKFILL_PARTITION)
                {
                    // The zoned quarter hours and the hours are the later backfills'.
                    if !crate::model::tallies::hours::counted_by_a_later_backfill(&k.place) {
                        *counts.entry(k).or_default() += d;
                    }
                }
                states.push(state);
            }
        }
        let n = counts.len();
        let tallies: Vec<(TallyKey, Tally)> = counts
            .into_iter()
            .map(|(k, value)| (k, Tally { value, stamp: 0 }))
            .collect();
        let floor = self.recount_floor().await?;
        self.insert_backfilled(&tallies, floor).await?;
        for chunk in states.chunks(10_000) {
            self.insert_order_rows(chunk, &[]).await?;
        }
        let marker = (TallyKey::sales_marker(), Tally::MARKED);
        self.insert_tallies(&[marker]).await?;
        tracing::info!(
            orders = states.len(),
            tallies = n,
            "attributed the store's earlier orders into sales tallies"
        );
        Ok(true)
    }
}
