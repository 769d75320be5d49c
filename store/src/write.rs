//! The write side (the aggregator's step 7): what one batch writes, and the trait a
//! backend implements to load the fact sets a batch folds into and to write the batch.
//!
//! A write carries complete fact sets and rows derived from them (the aggregator's
//! `batch` fold builds it), so every write is idempotent: writing a batch again after
//! a crash or a retry changes nothing.

use std::collections::HashSet;
use std::future::Future;
use std::sync::Arc;

use crate::model::ads::AdFact;
use crate::model::attribution::{OrderLine, Touch, Windows};
use crate::model::carts::lines::LinePlace;
use crate::model::carts::{CartEventRow, CartFact, CartKey};
use crate::model::funnel::{ViewFact, ViewKey, ViewRow};
use crate::model::products::ProductFact;
use crate::model::served::ServedAd;
use crate::model::tallies::sales::{OrderCredits, ShopperOrder};
use crate::model::tallies::{Place, PlaceTallies, Tally, TallyKey};
use crate::{Backend, StoreError};

pub use crate::model::{FastMap, FastSet};

/// What one batch writes to the store.
#[derive(Debug, Default, Clone)]
pub struct BatchWrite {
    /// Complete fact sets of touched views.
    pub view_facts: Vec<(ViewKey, Vec<ViewFact>)>,
    /// Derived rows of touched views.
    pub views: Vec<ViewRow>,
    /// New product facts (idempotent by dedup key).
    pub product_facts: Vec<ProductFact>,
    /// New copies of ad impressions and clicks (idempotent: a copy is its whole row).
    pub ad_facts: Vec<AdFact>,
    /// Derived event rows of touched carts (complete per cart).
    pub cart_rows: Vec<CartEventRow>,
    /// The carts report's places the touched lines left (where a line was before the
    /// batch, when its latest event's campaign or day changed), each with the line's
    /// new version: ClickHouse marks its entry there gone (the embedded store's index
    /// follows the rows themselves, `embedded/cart_lines.rs`).
    pub cart_lines_left: Vec<(LinePlace, u32)>,
    /// New attribution touches (idempotent by shopper and dedup key).
    pub touches: Vec<Touch>,
    /// Lines of orders the store does not hold yet (idempotent by order id and line),
    /// indexed by shopper with them.
    pub order_lines: Vec<OrderLine>,
    /// The state of every order the batch decided on (its lines' credits, see
    /// [`crate::model::tallies::sales`]): written after `tallies`.
    pub order_states: Vec<OrderCredits>,
    /// The state of every served ad (realised ad id) the batch decided on.
    pub served: Vec<(String, ServedAd)>,
    /// The tallies the batch moved, absolute and stamped (see
    /// [`crate::model::tallies`]): written before `served`.
    pub tallies: Vec<(TallyKey, Tally)>,
    /// Served ads whose ad id expired before these Unix seconds are forgotten with
    /// the batch (their events can no longer be billable, see
    /// [`crate::model::served`]); `None`: none this time.
    pub forget_served_before: Option<i64>,
    /// Newest event time aggregated, ms.
    pub newest_event_ms: Option<i64>,
}

/// Fact sets of entities, as loaded from the store or kept in the cache.
#[derive(Debug, Default)]
pub struct EntitySets {
    /// Views.
    pub views: FastMap<ViewKey, Vec<ViewFact>>,
    /// Carts.
    pub carts: FastMap<CartKey, Vec<CartFact>>,
    /// Served ads, by realised ad id.
    pub served: FastMap<String, ServedAd>,
    /// Tallies by place (an absent place, or metric, is empty: [`Tally::EMPTY`]).
    pub tallies: FastMap<Place, PlaceTallies>,
}

/// A batch ready for [`WriteStore::write_prepared`]: the batch and what the store made
/// of it ahead of time.
#[derive(Debug)]
pub struct PreparedWrite {
    /// The batch.
    pub batch: BatchWrite,
    /// What the backend made of the batch ahead of time (the embedded store's encoded
    /// rows), opaque to everyone else: the backend that made it reads it back, so this
    /// module names no backend.
    pub ahead: Option<Arc<dyn std::any::Any + Send + Sync>>,
}

/// The write side of a report store: what the aggregator calls.
pub trait WriteStore: Backend {
    /// The current fact sets of these entities and the states of these served ads
    /// (absent ones are left out).
    fn load(
        &self,
        views: &FastSet<ViewKey>,
        carts: &FastSet<CartKey>,
        served: &FastSet<String>,
    ) -> impl Future<Output = Result<EntitySets, StoreError>> + Send;

    /// Every stored tally of these places (absent places are left out).
    fn load_tallies(
        &self,
        places: &FastSet<Place>,
    ) -> impl Future<Output = Result<FastMap<Place, PlaceTallies>, StoreError>> + Send;

    /// Counts the facts of a store written before tallies into them, once (see
    /// [`crate::model::tallies`]): called by the aggregator before its first write;
    /// true when it did it now, false when the store had it done.
    fn backfill_tallies(&self) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// Which of these order ids the store holds.
    fn known_orders(
        &self,
        ids: &HashSet<String>,
    ) -> impl Future<Output = Result<HashSet<String>, StoreError>> + Send;

    /// The states of these orders (scoped ids; absent ones are left out).
    fn load_orders(
        &self,
        ids: &FastSet<String>,
    ) -> impl Future<Output = Result<FastMap<String, OrderCredits>, StoreError>> + Send;

    /// The stored touches of these shoppers dated from `from` to `to` ms (inclusive).
    fn touches_of(
        &self,
        shoppers: &std::collections::BTreeSet<String>,
        from: i64,
        to: i64,
    ) -> impl Future<Output = Result<Vec<Touch>, StoreError>> + Send;

    /// The stored orders of these shoppers dated from `from` to `to` ms (inclusive).
    fn orders_of(
        &self,
        shoppers: &std::collections::BTreeSet<String>,
        from: i64,
        to: i64,
    ) -> impl Future<Output = Result<Vec<ShopperOrder>, StoreError>> + Send;

    /// Attributes the orders of a store written before attribution as orders arrive,
    /// once, with windows `w` (see [`crate::model::tallies::sales`]): called by the
    /// aggregator before its first write; true when it did it now.
    fn backfill_sales(&self, w: &Windows) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// Counts what a store written before the campaigns', videos' and campaigns'
    /// sales' quarter hours holds into them, once (see
    /// [`crate::model::tallies::zones`]), then sums those quarters into their UTC
    /// hours, once ([`crate::model::tallies::hours`]): called by the aggregator after
    /// the other backfills and before its first write; true when either ran now.
    fn backfill_zones(&self) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// Sums the closed hours' tallies over the log partitions, where the backend keeps
    /// them apart (ClickHouse: `rollups_closed`; see its `compact` module), so reads
    /// cost their answer's rows; `margin_ms` covers a writer's time between a late
    /// bucket's flag and its tallies, and clock skew. The first day still open, or
    /// `None` where there is nothing to compact (the embedded store).
    fn compact_tallies(
        &self,
        margin_ms: i64,
    ) -> impl Future<Output = Result<Option<i32>, StoreError>> + Send {
        self.compact_tallies_at(chrono::Utc::now().timestamp_millis(), margin_ms)
    }

    /// [`Self::compact_tallies`] as of `now_ms` on the compactor's clock (ms since
    /// the epoch): the hours that ended two hours before it close. A clock set back
    /// closes fewer hours and reads every later write as dirty (the tests step it
    /// through a stream's hours).
    fn compact_tallies_at(
        &self,
        now_ms: i64,
        margin_ms: i64,
    ) -> impl Future<Output = Result<Option<i32>, StoreError>> + Send {
        let _ = (now_ms, margin_ms);
        std::future::ready(Ok(None))
    }

    /// Writes a batch durably (idempotent).
    fn write(&self, batch: &BatchWrite) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// The part of a write that needs no earlier write to have finished (encoding),
    /// done once per batch by the pipeline's write stage (folding is the busier
    /// stage), before the first try: a retry writes the same encoding.
    fn prepare(&self, batch: BatchWrite) -> PreparedWrite {
        PreparedWrite { batch, ahead: None }
    }

    /// Writes a prepared batch durably (idempotent; may be retried).
    fn write_prepared(
        &self,
        w: &PreparedWrite,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        self.write(&w.batch)
    }
}
