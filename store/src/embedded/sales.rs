//! The embedded store's side of attribution as orders arrive
//! ([`crate::model::tallies::sales`]): the orders' states (`order_credits`, by scoped
//! order id), and two indexes by shopper, so either side of an (order, touch) pair
//! finds the other with one key range per shopper: `order_shoppers` (shopper, order
//! time, order id) and `touches_by_shopper` (shopper, touch time, dedup key; the
//! value is the touch). Keys are order-preserving: the shopper length-prefixed, the
//! time big-endian with its sign bit flipped.
//!
//! **Stores of the previous version** (orders and touches, no indexes, no states)
//! are converted when opened: the indexes are filled from the stored orders and
//! touches ([`index_if_missing`]); the aggregator's first start then attributes every
//! stored order without a state ([`backfill`]) and counts it, under the backfill's
//! partition, with the sales' marker.

use std::collections::BTreeSet;

use redb::{Database, ReadableDatabase, ReadableTable, WriteTransaction};

use super::{err, parse, val, Table, ORDERS, TOUCHES};
use crate::model::attribution::{OrderLine, Touch, Windows};
use crate::model::retention::recounted;
use crate::model::tallies::sales::{self, OrderCredits, ShopperOrder};
use crate::model::tallies::{Tally, TallyKey, BACKFILL_PARTITION};
use crate::write::{FastMap, FastSet};
use crate::StoreError;

/// Orders' states, by scoped order id.
pub(super) const ORDER_CREDITS: Table = redb::TableDefinition::new("order_credits");
/// Stored orders by shopper.
pub(super) const ORDER_SHOPPERS: Table = redb::TableDefinition::new("order_shoppers");
/// Stored touches by shopper.
pub(super) const TOUCH_SHOPPERS: Table = redb::TableDefinition::new("touches_by_shopper");

pub(super) fn shopper_prefix(shopper: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(shopper.len() + 24);
    k.extend(
        u32::try_from(shopper.len())
            .unwrap_or(u32::MAX)
            .to_be_bytes(),
    );
    k.extend(shopper.as_bytes());
    k
}

fn timed(shopper: &str, ms: i64) -> Vec<u8> {
    let mut k = shopper_prefix(shopper);
    k.extend(((ms as u64) ^ (1 << 63)).to_be_bytes());
    k
}

/// An order's index key.
pub(super) fn order_key(o: &ShopperOrder) -> Vec<u8> {
    let mut k = timed(&o.shopper, o.time_ms);
    k.extend(o.order_id.as_bytes());
    k
}

/// A touch's index key.
pub(super) fn touch_key(t: &Touch) -> Vec<u8> {
    let mut k = timed(&t.shopper, t.time_ms);
    k.extend(t.dedup_key.to_be_bytes());
    k
}

/// The rows of `shoppers` in `table` dated `from..=to`, read by `f`.
fn range<T>(
    db: &Database,
    table: Table,
    shoppers: &BTreeSet<String>,
    from: i64,
    to: i64,
    f: impl Fn(&[u8], &[u8]) -> Result<T, StoreError>,
) -> Result<Vec<T>, StoreError> {
    let r = db.begin_read().map_err(err)?;
    let t = r.open_table(table).map_err(err)?;
    let mut out = Vec::new();
    for s in shoppers {
        let lo = timed(s, from);
        let mut hi = timed(s, to);
        hi.push(0xFF);
        hi.extend([0xFF; 32]);
        for row in t.range(lo.as_slice()..hi.as_slice()).map_err(err)? {
            let (k, v) = row.map_err(err)?;
            out.push(f(k.value(), v.value())?);
        }
    }
    Ok(out)
}

/// The stored touches of `shoppers` dated `from..=to`.
pub(super) fn touches_of(
    db: &Database,
    shoppers: &BTreeSet<String>,
    from: i64,
    to: i64,
) -> Result<Vec<Touch>, StoreError> {
    range(db, TOUCH_SHOPPERS, shoppers, from, to, |_, v| parse(v))
}

/// The stored orders of `shoppers` dated `from..=to`.
pub(super) fn orders_of(
    db: &Database,
    shoppers: &BTreeSet<String>,
    from: i64,
    to: i64,
) -> Result<Vec<ShopperOrder>, StoreError> {
    range(db, ORDER_SHOPPERS, shoppers, from, to, |_, v| parse(v))
}

/// The states of `ids` (absent ones left out).
pub(super) fn load(
    db: &Database,
    ids: &FastSet<String>,
) -> Result<FastMap<String, OrderCredits>, StoreError> {
    let r = db.begin_read().map_err(err)?;
    let t = r.open_table(ORDER_CREDITS).map_err(err)?;
    let mut out = FastMap::default();
    for id in ids {
        if let Some(v) = t.get(id.as_bytes()).map_err(err)? {
            let state = OrderCredits::from_bytes(v.value())
                .map_err(|e| super::codec::corrupt(format!("order state {id}: {e}")))?;
            out.insert(id.clone(), state);
        }
    }
    Ok(out)
}

/// The rows a batch adds: order states, orders' and touches' index entries.
pub(super) fn rows(
    states: &[OrderCredits],
    lines: &[OrderLine],
    touches: &[Touch],
) -> [(Table, super::Rows); 3] {
    let states = states
        .iter()
        .map(|s| (s.order_id().as_bytes().to_vec(), s.to_bytes()))
        .collect();
    let orders = sales::shopper_orders(lines)
        .iter()
        .map(|o| (order_key(o), val(o)))
        .collect();
    let touches = touches.iter().map(|t| (touch_key(t), val(t))).collect();
    [
        (ORDER_CREDITS, states),
        (ORDER_SHOPPERS, orders),
        (TOUCH_SHOPPERS, touches),
    ]
}

/// Fills the indexes of a store written before them, in the transaction that opens
/// it (each index only while it is empty and its source is not).
pub(super) fn index_if_missing(w: &WriteTransaction) -> Result<(), StoreError> {
    let empty = |table: Table| -> Result<bool, StoreError> {
        Ok(w.open_table(table)
            .map_err(err)?
            .first()
            .map_err(err)?
            .is_none())
    };
    if empty(ORDER_SHOPPERS)? {
        let mut rows = Vec::new();
        for row in w.open_table(ORDERS).map_err(err)?.iter().map_err(err)? {
            let (_, v) = row.map_err(err)?;
            let lines: Vec<OrderLine> = parse(v.value())?;
            rows.extend(sales::shopper_orders(&lines));
        }
        if !rows.is_empty() {
            let mut t = w.open_table(ORDER_SHOPPERS).map_err(err)?;
            for o in &rows {
                t.insert(order_key(o).as_slice(), val(o).as_slice())
                    .map_err(err)?;
            }
            tracing::info!(rows = rows.len(), "indexed the stored orders by shopper");
        }
    }
    if empty(TOUCH_SHOPPERS)? {
        let mut n = 0;
        let touches: Vec<Vec<u8>> = {
            let t = w.open_table(TOUCHES).map_err(err)?;
            let mut out = Vec::new();
            for row in t.iter().map_err(err)? {
                out.push(row.map_err(err)?.1.value().to_vec());
            }
            out
        };
        let mut t = w.open_table(TOUCH_SHOPPERS).map_err(err)?;
        for v in touches {
            let touch: Touch = parse(&v)?;
            t.insert(touch_key(&touch).as_slice(), v.as_slice())
                .map_err(err)?;
            n += 1;
        }
        if n > 0 {
            tracing::info!(rows = n, "indexed the stored touches by shopper");
        }
    }
    Ok(())
}

/// Attributes every stored order without a state with windows `w` (from the stored
/// touches of its shoppers), writes the states and counts them under the backfill's
/// partition, with the sales' marker, in one transaction; `None` when the marker was
/// there.
pub(super) fn backfill(db: &Database, w: &Windows) -> Result<Option<usize>, StoreError> {
    let marker = super::tallies::tally_key(&TallyKey::sales_marker());
    let tx = db.begin_write().map_err(err)?;
    if tx
        .open_table(super::tallies::ROLLUPS)
        .map_err(err)?
        .get(marker.as_slice())
        .map_err(err)?
        .is_some()
    {
        return Ok(None);
    }
    // Orders before the recount floor keep their states and counts (`clear`).
    let floor = super::retention::floor(&tx)?;
    let mut states = Vec::new();
    {
        let orders = tx.open_table(ORDERS).map_err(err)?;
        let known = tx.open_table(ORDER_CREDITS).map_err(err)?;
        let touches = tx.open_table(TOUCH_SHOPPERS).map_err(err)?;
        for row in orders.iter().map_err(err)? {
            let (id, v) = row.map_err(err)?;
            if known.get(id.value().as_bytes()).map_err(err)?.is_some() {
                continue;
            }
            let lines: Vec<OrderLine> = parse(v.value())?;
            if floor.is_some_and(|f| before_floor(&lines, f)) {
                continue;
            }
            let mut state = OrderCredits::new(&lines);
            for l in &lines {
                let (from, to) = sales::touch_span(l.time_ms, w);
                for s in l.shoppers() {
                    let lo = timed(&s, from);
                    let mut hi = timed(&s, to);
                    hi.push(0xFF);
                    hi.extend([0xFF; 32]);
                    for t in touches.range(lo.as_slice()..hi.as_slice()).map_err(err)? {
                        let touch: Touch = parse(t.map_err(err)?.1.value())?;
                        state.offer(&touch, w);
                    }
                }
            }
            states.push(state);
        }
    }
    let mut counts: std::collections::BTreeMap<TallyKey, i64> = Default::default();
    for s in &states {
        for (k, d) in sales::moves(&Default::default(), &s.counts(), BACKFILL_PARTITION) {
            // The zoned quarter hours and the hours are the later backfills'.
            if !crate::model::tallies::hours::counted_by_a_later_backfill(&k.place)
                && recounted(&k, floor)
            {
                *counts.entry(k).or_default() += d;
            }
        }
    }
    let n = counts.len();
    {
        let mut t = tx.open_table(ORDER_CREDITS).map_err(err)?;
        for s in &states {
            t.insert(s.order_id().as_bytes(), s.to_bytes().as_slice())
                .map_err(err)?;
        }
        let mut r = tx.open_table(super::tallies::ROLLUPS).map_err(err)?;
        let marker_row = (TallyKey::sales_marker(), Tally::MARKED);
        let rows = counts
            .into_iter()
            .map(|(k, value)| (k, Tally { value, stamp: 0 }))
            .chain([marker_row]);
        for (k, v) in rows {
            r.insert(super::tallies::tally_key(&k).as_slice(), val(&v).as_slice())
                .map_err(err)?;
        }
    }
    tx.commit().map_err(err)?;
    Ok(Some(n))
}

/// Marks a store that holds no orders as attributed (nothing to backfill), in the
/// transaction that opens it.
pub(super) fn mark_if_new(w: &WriteTransaction) -> Result<(), StoreError> {
    if w.open_table(ORDERS)
        .map_err(err)?
        .first()
        .map_err(err)?
        .is_some()
    {
        return Ok(());
    }
    let mut t = w.open_table(super::tallies::ROLLUPS).map_err(err)?;
    let k = super::tallies::tally_key(&TallyKey::sales_marker());
    if t.get(k.as_slice()).map_err(err)?.is_none() {
        t.insert(k.as_slice(), val(&Tally::MARKED).as_slice())
            .map_err(err)?;
    }
    Ok(())
}

/// Whether an order's lines are all dated before `floor` (an order's lines share
/// its date).
fn before_floor<'a>(lines: impl IntoIterator<Item = &'a OrderLine>, floor: i64) -> bool {
    lines.into_iter().all(|l| l.time_ms < floor)
}

/// Deletes every order state (`retail-media rebuild` attributes every order again)
/// but, in a store that lost facts to their retention, those of the orders before
/// its recount floor: their touches may be gone, so they keep the credits they had.
pub(super) fn clear(db: &Database) -> Result<(), StoreError> {
    let w = db.begin_write().map_err(err)?;
    match super::retention::floor(&w)? {
        None => {
            w.delete_table(ORDER_CREDITS).map_err(err)?;
            w.open_table(ORDER_CREDITS).map_err(err)?;
        }
        Some(f) => {
            let mut t = w.open_table(ORDER_CREDITS).map_err(err)?;
            t.retain(|_, v| {
                OrderCredits::from_bytes(v)
                    .is_ok_and(|s| before_floor(s.lines.iter().map(|l| &l.line), f))
            })
            .map_err(err)?;
        }
    }
    w.commit().map_err(err)
}
