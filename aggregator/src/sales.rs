//! The orders topic folded: orders and the touches offered to them, into each order's
//! state (its lines' credits) and the sales tallies (the rule and the argument:
//! [`rm_store::model::tallies::sales`]).
//!
//! **Pure fold, one writer per order.** Records of one order id share a partition
//! (orders and offers are keyed by the order's id), so one consumer owns each order's
//! state, and [`fold`] decides from that state and the record alone: an order record
//! whose id has a state is a copy (a re-sent or replayed order changes nothing); an
//! offer moves a line's credit when its touch beats the line's. Every move is stamped
//! with the record's offset like any tally, and the state is written after the
//! tallies, so the crash argument of `rm_store::model::tallies` holds as is.
//!
//! **The lookups after the write** ([`Lookups`]): the offers for the batch's orders
//! (their shoppers' stored touches) and for its touches (their shoppers' stored
//! orders), appended to the orders topic before the batch's offsets are committed
//! (the pipeline's write stage). A replayed batch looks again: copies of orders and
//! touches are looked up too, so a crash between the write and the append loses no
//! offer.

use std::collections::BTreeSet;

use rm_schemas::order::{self, OrderRecord};
use rm_store::model::attribution::{self, OrderLine, Touch, Windows};
use rm_store::model::tallies::sales::{self as sales_t, Counts, Offer, OrderCredits};
use rm_store::model::tallies::{moves, Metric, Place, PlaceTallies, Tally, TallyKey};
use rm_store::write::{FastMap, FastSet};

use crate::batch::Position;

/// A record of the orders topic.
#[derive(Debug, Clone)]
pub enum OrderMsg {
    /// An order, as the api wrote it.
    Order(OrderRecord),
    /// A touch offered to a stored order (written by an aggregator).
    Offer(Offer),
}

impl OrderMsg {
    /// Reads a record of the orders topic.
    pub fn decode(bytes: &[u8]) -> Result<Self, String> {
        if bytes.starts_with(sales_t::OFFER_PREFIX) {
            return Offer::parse(bytes)
                .map(Self::Offer)
                .ok_or_else(|| "an offer record that does not decode".to_owned());
        }
        order::parse_record(bytes)
            .map(Self::Order)
            .map_err(|e| e.to_string())
    }

    /// The scoped id of the order it is about.
    pub fn order_id(&self) -> String {
        match self {
            Self::Order(r) => rm_schemas::namespace::scoped(&r.namespace_id, &r.order.id),
            Self::Offer(o) => o.order_id.clone(),
        }
    }
}

/// A record of the orders topic and where it is.
#[derive(Debug, Clone)]
pub struct OrderIn {
    /// The record.
    pub msg: OrderMsg,
    /// Its partition and offset in the orders topic.
    pub at: Position,
}

/// What [`fold`] did, for metrics.
#[derive(Debug, Default, Clone, Copy)]
pub struct OrderStats {
    /// Orders stored for the first time.
    pub new: u64,
    /// Orders already stored (or earlier in the batch): a re-sent or replayed order.
    pub duplicates: u64,
    /// Offers that moved a line's credit.
    pub credited: u64,
    /// Offers that changed nothing (a touch no better than the credit, or a repeat).
    pub offers_kept: u64,
    /// Offers for an order without a state (none is expected).
    pub orphans: u64,
}

/// What folding a batch's orders writes.
#[derive(Debug, Default)]
pub struct SalesFold {
    /// Lines of the new orders.
    pub lines: Vec<OrderLine>,
    /// States of the orders the batch holds a record of, new or copies: their
    /// shoppers' touches are looked up once the batch is written (a copy too: it may
    /// be the replay of a batch whose lookup a crash cut short).
    pub orders: Vec<OrderCredits>,
    /// Every state the batch changed.
    pub states: Vec<OrderCredits>,
    /// The moved tallies, absolute and stamped.
    pub tallies: Vec<(TallyKey, Tally)>,
    /// Counts.
    pub stats: OrderStats,
}

/// The scoped ids of the orders `orders` name.
pub fn order_ids(orders: &[OrderIn]) -> FastSet<String> {
    orders.iter().map(|o| o.msg.order_id()).collect()
}

/// The progress places of the orders topic's partitions in `orders`.
pub fn progress_places(orders: &[OrderIn]) -> Vec<Place> {
    let mut out: Vec<Place> = Vec::new();
    for o in orders {
        let p = Place::order_progress(o.at.0);
        if !out.contains(&p) {
            out.push(p);
        }
    }
    out
}

/// The tallies' places a fold of `orders` can move, from the states it starts from
/// (a dry run on copies).
pub fn places(
    orders: &[OrderIn],
    states: &FastMap<String, OrderCredits>,
    w: &Windows,
) -> FastSet<Place> {
    let mut states = states.clone();
    let mut tallies = FastMap::default();
    fold(orders, &mut states, &mut tallies, w);
    tallies.into_keys().collect()
}

/// Folds `orders` in order into `states` (every stored state of the orders they name;
/// new orders are added) and `tallies` (loaded for [`places`]).
pub fn fold(
    orders: &[OrderIn],
    states: &mut FastMap<String, OrderCredits>,
    tallies: &mut FastMap<Place, PlaceTallies>,
    w: &Windows,
) -> SalesFold {
    let mut out = SalesFold::default();
    let mut changed: BTreeSet<String> = BTreeSet::new();
    let mut seen: BTreeSet<String> = BTreeSet::new();
    for o in orders {
        let (partition, offset) = o.at;
        let id = o.msg.order_id();
        match &o.msg {
            OrderMsg::Order(r) => {
                seen.insert(id.clone());
                if states.contains_key(&id) {
                    out.stats.duplicates += 1;
                } else {
                    // Order ids are unique within a namespace: stored scoped by it.
                    let lines: Vec<OrderLine> = attribution::lines_of(&r.order)
                        .into_iter()
                        .map(|l| OrderLine {
                            order_id: id.clone(),
                            ..l
                        })
                        .collect();
                    let state = OrderCredits::new(&lines);
                    let m = sales_t::moves(&Counts::new(), &state.counts(), partition);
                    moves::apply(m, offset, tallies);
                    out.lines.extend(lines);
                    states.insert(id.clone(), state);
                    changed.insert(id);
                    out.stats.new += 1;
                }
            }
            OrderMsg::Offer(offer) => match states.get_mut(&id) {
                None => out.stats.orphans += 1,
                Some(state) => {
                    let before = state.counts();
                    if state.offer(&offer.touch, w) {
                        let m = sales_t::moves(&before, &state.counts(), partition);
                        moves::apply(m, offset, tallies);
                        changed.insert(id);
                        out.stats.credited += 1;
                    } else {
                        out.stats.offers_kept += 1;
                    }
                }
            },
        }
        let p = tallies.entry(Place::order_progress(partition)).or_default();
        if p.get_mut(Metric::Progress).advance(offset) {
            p.mark(Metric::Progress);
        }
    }
    out.states = changed
        .iter()
        .filter_map(|id| states.get(id).cloned())
        .collect();
    out.orders = seen
        .iter()
        .filter_map(|id| states.get(id).cloned())
        .collect();
    out.tallies = moves::dirty_rows(tallies);
    out
}

/// What a written batch looks up to offer touches to orders: its orders and its
/// touches.
#[derive(Debug, Default, Clone)]
pub struct Lookups {
    /// The orders the batch holds a record of ([`SalesFold::orders`]).
    pub orders: Vec<OrderCredits>,
    /// The batch's touches.
    pub touches: Vec<Touch>,
}

impl Lookups {
    /// The offers the lookups make, read from `store`: the stored touches of the
    /// orders' shoppers offered to the orders, and each touch offered to the stored
    /// orders of its shoppers (both reads idempotent: retry the whole on failure).
    pub async fn offers<T: rm_store::WriteStore>(
        &self,
        store: &T,
        w: &Windows,
    ) -> Result<Vec<Offer>, rm_store::StoreError> {
        let mut out = Vec::new();
        if let Some((shoppers, from, to)) = self.for_orders(w) {
            let touches = store.touches_of(&shoppers, from, to).await?;
            out.extend(sales_t::offers_for_orders(&self.orders, &touches, w));
        }
        if let Some((shoppers, from, to)) = self.for_touches(w) {
            let orders = store.orders_of(&shoppers, from, to).await?;
            out.extend(sales_t::offers_for_touches(&self.touches, &orders, w));
        }
        Ok(out)
    }
}

/// A lookup: shoppers and a span of times, ms, inclusive.
pub type Lookup = (BTreeSet<String>, i64, i64);

impl Lookups {
    /// The orders' shoppers and the span of touch times that can credit them.
    pub fn for_orders(&self, w: &Windows) -> Option<Lookup> {
        let span = w.click_ms.max(w.view_ms);
        let mut shoppers = BTreeSet::new();
        let (mut from, mut to) = (i64::MAX, i64::MIN);
        for l in self.orders.iter().flat_map(|o| &o.lines) {
            shoppers.extend(l.line.shoppers());
            from = from.min(l.line.time_ms.saturating_sub(span));
            to = to.max(l.line.time_ms);
        }
        (!shoppers.is_empty()).then_some((shoppers, from, to))
    }

    /// The touches' shoppers and the span of order times they can credit.
    pub fn for_touches(&self, w: &Windows) -> Option<Lookup> {
        let span = w.click_ms.max(w.view_ms);
        let shoppers: BTreeSet<String> = self.touches.iter().map(|t| t.shopper.clone()).collect();
        let from = self.touches.iter().map(|t| t.time_ms).min()?;
        let to = self
            .touches
            .iter()
            .map(|t| t.time_ms.saturating_add(span))
            .max()?;
        Some((shoppers, from, to))
    }
}

#[cfg(test)]
mod tests;
