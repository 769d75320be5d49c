//! The embedded store's identifier ageing ([`crate::model::ageing`]): one pass is one
//! write transaction (a read sees the store before or after it, never between) that
//! replaces the ids of the rows older than the pass's time, table by table:
//!
//! | table | old when | what changes |
//! |---|---|---|
//! | `views_v2` (+ `view_slots`) | the view's day `< before_day` | the tracking id, so the key (same slot); none if the aged key is taken |
//! | `carts_v2` (+ `cart_slots`) | the line's newest event `< before_ms` | the tracking id of every row of the line, so the key; it joins the line of a taken aged key |
//! | `product_facts_v2`, `ad_facts_v2` | received in `[watermark, before_ms)` | `shopper` (64-bit hash; not in the key) |
//! | `touches_v2` + `touches_by_shopper` | the touch's time `< before_ms` | the shopper, so both keys |
//! | `order_shoppers` | the order's time `< before_ms` | the shopper, so the key |
//! | `orders_v2` | the line's time `< before_ms` | customer and session ids (key: order id, kept) |
//! | `order_credits` | the line's time `< before_ms` | its lines' ids and their credits' touches |
//!
//! **Idempotence.** An id already aged (or erased, or anonymous) is kept
//! ([`kept`]), so a second pass finds nothing to change in every table but the
//! facts: a fact's aged hash looks like any other, so the facts are aged once per
//! receive time, below a watermark kept in the `ageing` table (`facts_before_ms`,
//! moved in the pass's transaction; absent: none aged yet). No fact is written later
//! with a receive time below it (the receive time is the edge's, at the pass it is
//! past), so a pass ages `[watermark, before_ms)` and none twice.
//!
//! **Not touched.** Served ads' states: the aggregator forgets a served ad
//! `RM_AGGREGATOR_SERVED_RETENTION_HOURS` after its expiry, long before any
//! retention, so none is old. The erasures' audit log (it keeps no id once settled).
//!
//! **Cost.** A scan of the views, carts, facts, orders, order states and the orders'
//! index (touches: only the old ones, their keys start with the time), about a second
//! per million rows; a daily background job. The rows are read in chunks of
//! [`CHUNK`] changes, each written before the next is read, so memory holds one
//! chunk, plus the old and new key of every view and cart moved, kept until the
//! commit to move the memory part of their slot index. The first pass over a store
//! of more than the retention rewrites most of it, in that one transaction.

use std::ops::Bound;

use redb::{Database, ReadableTable, TableDefinition, WriteTransaction};

use super::codec::{corrupt, fact_val, key, parse, parse_ad_fact, parse_product_fact};
use super::codec::{parse_view_row, time_prefix, view_val};
use super::entities::{self, Join, Merged, Move, Rekeyed, CARTS, VIEWS};
use super::{err, sales, val, EmbeddedStore, Table, AD_FACTS, ORDERS, PRODUCT_FACTS, TOUCHES};
use crate::model::ageing::{kept, Ageing};
use crate::model::attribution::{OrderLine, Touch};
use crate::model::carts::CartEventRow;
use crate::model::erasure::Erased;
use crate::model::funnel::ViewFact;
use crate::model::tallies::sales::{OrderCredits, ShopperOrder};
use crate::StoreError;

/// The pass's marks: [`FACTS_BEFORE`].
pub(super) const MARKS: TableDefinition<&str, i64> = TableDefinition::new("ageing");

/// Facts received before this (ms) are aged.
const FACTS_BEFORE: &str = "facts_before_ms";

/// Changed rows read before they are written (one in unit tests, so that every
/// change starts a new reading).
const CHUNK: usize = if cfg!(test) { 1 } else { 4096 };

/// The table, created at open.
pub(super) fn create(w: &WriteTransaction) -> Result<(), StoreError> {
    w.open_table(MARKS).map_err(err)?;
    Ok(())
}

/// Runs pass `a` over the store: what it replaced.
pub(super) fn run(db: &Database, store: &EmbeddedStore, a: &Ageing) -> Result<Erased, StoreError> {
    let w = db.begin_write().map_err(err)?;
    let mut n = Erased::default();
    let mut moved = Moved::default();
    views(&w, store, a, &mut n, &mut moved)?;
    carts(&w, store, a, &mut n, &mut moved)?;
    facts(&w, a, &mut n)?;
    touches(&w, a, &mut n)?;
    order_shoppers(&w, a, &mut n)?;
    order_lines(&w, a, &mut n)?;
    order_states(&w, a, &mut n)?;
    w.commit().map_err(err)?;
    moved.apply(store)?;
    Ok(n)
}

/// Reads the rows of `table` below `to` (all without it) in key order, `f` telling
/// what changes; every [`CHUNK`] changes, and at the end, `apply` writes them, with
/// the table closed. A row `apply` moves ahead of the reading is read again: `f`
/// finds it aged and skips it.
fn chunked<T>(
    w: &WriteTransaction,
    table: Table,
    to: Option<&[u8]>,
    mut f: impl FnMut(&[u8], &[u8]) -> Result<Option<T>, StoreError>,
    mut apply: impl FnMut(Vec<T>) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    let mut after: Option<Vec<u8>> = None;
    loop {
        let mut chunk = Vec::new();
        let mut next = None;
        {
            let t = w.open_table(table).map_err(err)?;
            let lower = after.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
            let upper = to.map_or(Bound::Unbounded, Bound::Excluded);
            for row in t.range::<&[u8]>((lower, upper)).map_err(err)? {
                let (k, v) = row.map_err(err)?;
                if let Some(c) = f(k.value(), v.value())? {
                    chunk.push(c);
                    if chunk.len() >= CHUNK {
                        next = Some(k.value().to_vec());
                        break;
                    }
                }
            }
        }
        if !chunk.is_empty() {
            apply(chunk)?;
        }
        match next {
            Some(k) => after = Some(k),
            None => return Ok(()),
        }
    }
}

/// Writes rows over their keys.
fn overwrite(
    w: &WriteTransaction,
    table: Table,
    rows: &[(Vec<u8>, Vec<u8>)],
) -> Result<(), StoreError> {
    let mut t = w.open_table(table).map_err(err)?;
    for (k, v) in rows {
        t.insert(k.as_slice(), v.as_slice()).map_err(err)?;
    }
    Ok(())
}

/// A slot (a row's key in an entity table).
fn slot(k: &[u8]) -> Result<u64, StoreError> {
    let b: [u8; 8] = k
        .try_into()
        .map_err(|_| corrupt(format!("a slot of {} bytes", k.len())))?;
    Ok(u64::from_be_bytes(b))
}

/// The slot index's changes of a pass, applied once it has committed.
#[derive(Default)]
struct Moved {
    rekeyed: Vec<Rekeyed>,
    merged: Vec<Merged>,
}

impl Moved {
    fn apply(self, store: &EmbeddedStore) -> Result<(), StoreError> {
        for r in self.rekeyed {
            r.apply(&store.index)?;
        }
        for m in self.merged {
            m.apply(&store.index)?;
        }
        Ok(())
    }
}

/// Views of days before the pass's move to their pseudonym's key. One whose aged key
/// names another view already (the same ad id and video, viewed again under the raw
/// id after the first view was aged) is left as it is: two views' derived rows do not
/// add up to one, and a view's row is derived by the aggregator, not here.
fn views(
    w: &WriteTransaction,
    store: &EmbeddedStore,
    a: &Ageing,
    n: &mut Erased,
    moved: &mut Moved,
) -> Result<(), StoreError> {
    let before = a.before_day();
    let mut left = 0u64;
    chunked(
        w,
        VIEWS.rows,
        None,
        |k, v| {
            let (row, rest) = parse_view_row(v)?;
            if row.day >= before || kept(&row.key.tracking_id) {
                return Ok(None);
            }
            let facts: Vec<ViewFact> = postcard::from_bytes(rest).map_err(corrupt)?;
            let mut aged = row.clone();
            aged.key.tracking_id = a.pseudonym(&row.key.tracking_id);
            let value = view_val(&aged, &facts);
            Ok(Some((
                (key(&row.key), key(&aged.key), slot(k)?, value),
                facts.len(),
            )))
        },
        |chunk| {
            let mut moves: Vec<Move> = Vec::with_capacity(chunk.len());
            for (m, facts) in chunk {
                if entities::slot_in(w, &store.index, VIEWS, &m.1)?.is_some() {
                    left += 1;
                    continue;
                }
                n.views += 1;
                n.view_facts += facts as u64;
                moves.push(m);
            }
            moved
                .rekeyed
                .push(entities::rekey(w, &store.index, VIEWS, moves)?);
            Ok(())
        },
    )?;
    if left > 0 {
        tracing::warn!(
            views = left,
            "views whose aged key names another view keep their ids"
        );
    }
    Ok(())
}

/// Cart lines whose newest event is before the pass's move, whole, to their
/// pseudonym's key; a line with a newer event keeps its id. A line whose aged key
/// names a line already (the shopper came back to the product under the raw id
/// after the first line was aged) joins it: the joint line holds the events of both
/// in time order, each with its derived row as it was (so every count stays, and the
/// state is the newest event's), as ClickHouse's copy of the rows under the
/// pseudonym leaves them.
fn carts(
    w: &WriteTransaction,
    store: &EmbeddedStore,
    a: &Ageing,
    n: &mut Erased,
    moved: &mut Moved,
) -> Result<(), StoreError> {
    chunked(
        w,
        CARTS.rows,
        None,
        |k, v| {
            let mut rows: Vec<CartEventRow> = parse(v)?;
            let Some(first) = rows.first() else {
                return Ok(None);
            };
            let newest = rows
                .iter()
                .map(|r| r.fact.time_ms)
                .max()
                .unwrap_or(i64::MAX);
            if newest >= a.before_ms || kept(&first.key.tracking_id) {
                return Ok(None);
            }
            let mut aged = first.key.clone();
            aged.tracking_id = a.pseudonym(&first.key.tracking_id);
            let (old, new) = (key(&first.key), key(&aged));
            for r in &mut rows {
                r.key.tracking_id.clone_from(&aged.tracking_id);
            }
            Ok(Some((old, new, slot(k)?, rows)))
        },
        |chunk| {
            let (mut moves, mut joins): (Vec<Move>, Vec<Join>) = Default::default();
            for (old, new, at, rows) in chunk {
                n.cart_events += rows.len() as u64;
                let Some(other) = entities::slot_in(w, &store.index, CARTS, &new)? else {
                    moves.push((old, new, at, val(&rows)));
                    continue;
                };
                let stored = {
                    let t = w.open_table(CARTS.rows).map_err(err)?;
                    let v = t.get(other.to_be_bytes().as_slice()).map_err(err)?;
                    v.map(|v| v.value().to_vec())
                };
                let stored =
                    stored.ok_or_else(|| corrupt(format!("carts slot {other} without its row")))?;
                let mut joint: Vec<CartEventRow> = parse(&stored)?;
                joint.extend(rows);
                joint.sort_by_key(|r| r.fact.time_ms);
                joins.push((old, at, new, other, val(&joint)));
            }
            moved
                .rekeyed
                .push(entities::rekey(w, &store.index, CARTS, moves)?);
            moved.merged.push(entities::merge(w, CARTS, joins)?);
            Ok(())
        },
    )
}

/// Product and ad facts received in `[watermark, before_ms)`: their shopper's hash
/// is aged, and the watermark moves to `before_ms`.
fn facts(w: &WriteTransaction, a: &Ageing, n: &mut Erased) -> Result<(), StoreError> {
    let from = {
        let mut marks = w.open_table(MARKS).map_err(err)?;
        let from = marks
            .get(FACTS_BEFORE)
            .map_err(err)?
            .map_or(i64::MIN, |v| v.value());
        if a.before_ms <= from {
            return Ok(());
        }
        marks.insert(FACTS_BEFORE, a.before_ms).map_err(err)?;
        from
    };
    let old =
        |shopper: u64, received_ms: i64| shopper != 0 && (from..a.before_ms).contains(&received_ms);
    chunked(
        w,
        PRODUCT_FACTS,
        None,
        |k, v| {
            let mut p = parse_product_fact(v)?;
            if !old(p.shopper, p.received_ms) {
                return Ok(None);
            }
            p.shopper = a.hash(p.shopper);
            Ok(Some((k.to_vec(), fact_val(&p))))
        },
        |rows| {
            n.product_facts += rows.len() as u64;
            overwrite(w, PRODUCT_FACTS, &rows)
        },
    )?;
    // The shopper is not part of either key (`codec::product_key`, `ad_key`): each
    // fact stays under its own.
    chunked(
        w,
        AD_FACTS,
        None,
        |k, v| {
            let mut f = parse_ad_fact(v)?;
            if !old(f.shopper, f.received_ms) {
                return Ok(None);
            }
            f.shopper = a.hash(f.shopper);
            Ok(Some((k.to_vec(), fact_val(&f))))
        },
        |rows| {
            n.ad_facts += rows.len() as u64;
            overwrite(w, AD_FACTS, &rows)
        },
    )
}

/// Touches before the pass's: the shopper is aged in the touch and its index entry,
/// both re-keyed.
fn touches(w: &WriteTransaction, a: &Ageing, n: &mut Erased) -> Result<(), StoreError> {
    let to = time_prefix(a.before_ms);
    chunked(
        w,
        TOUCHES,
        Some(to.as_slice()),
        |k, v| {
            let old: Touch = parse(v)?;
            let mut new = old.clone();
            if old.time_ms >= a.before_ms || !a.age_touch(&mut new) {
                return Ok(None);
            }
            Ok(Some((k.to_vec(), old, new)))
        },
        |chunk| {
            let mut touches = w.open_table(TOUCHES).map_err(err)?;
            let mut index = w.open_table(sales::TOUCH_SHOPPERS).map_err(err)?;
            for (k, old, new) in chunk {
                let value = val(&new);
                touches.remove(k.as_slice()).map_err(err)?;
                touches
                    .insert(super::touch_key(&new).as_slice(), value.as_slice())
                    .map_err(err)?;
                index
                    .remove(sales::touch_key(&old).as_slice())
                    .map_err(err)?;
                index
                    .insert(sales::touch_key(&new).as_slice(), value.as_slice())
                    .map_err(err)?;
                n.touches += 1;
            }
            Ok(())
        },
    )
}

/// The orders' index by shopper: entries of orders before the pass's are re-keyed
/// under the aged shopper.
fn order_shoppers(w: &WriteTransaction, a: &Ageing, n: &mut Erased) -> Result<(), StoreError> {
    chunked(
        w,
        sales::ORDER_SHOPPERS,
        None,
        |k, v| {
            let mut o: ShopperOrder = parse(v)?;
            if o.time_ms >= a.before_ms || !a.age_shopper(&mut o.shopper) {
                return Ok(None);
            }
            Ok(Some((k.to_vec(), o)))
        },
        |chunk| {
            let mut index = w.open_table(sales::ORDER_SHOPPERS).map_err(err)?;
            for (k, o) in chunk {
                index.remove(k.as_slice()).map_err(err)?;
                index
                    .insert(sales::order_key(&o).as_slice(), val(&o).as_slice())
                    .map_err(err)?;
                n.order_shoppers += 1;
            }
            Ok(())
        },
    )
}

/// Orders' lines before the pass's: their customer and session ids are aged (the
/// order keeps its key, its id).
fn order_lines(w: &WriteTransaction, a: &Ageing, n: &mut Erased) -> Result<(), StoreError> {
    let mut after: Option<String> = None;
    loop {
        let mut chunk = Vec::new();
        let mut next = None;
        {
            let t = w.open_table(ORDERS).map_err(err)?;
            let lower = after.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
            for row in t.range::<&str>((lower, Bound::Unbounded)).map_err(err)? {
                let (k, v) = row.map_err(err)?;
                let mut lines: Vec<OrderLine> = parse(v.value())?;
                let mut changed = 0;
                for l in lines.iter_mut().filter(|l| l.time_ms < a.before_ms) {
                    changed += u64::from(a.age_line(l));
                }
                if changed == 0 {
                    continue;
                }
                chunk.push((k.value().to_owned(), val(&lines), changed));
                if chunk.len() >= CHUNK {
                    next = Some(k.value().to_owned());
                    break;
                }
            }
        }
        let mut t = w.open_table(ORDERS).map_err(err)?;
        for (id, lines, changed) in chunk {
            t.insert(id.as_str(), lines.as_slice()).map_err(err)?;
            n.order_lines += changed;
        }
        match next {
            Some(id) => after = Some(id),
            None => return Ok(()),
        }
    }
}

/// Orders' states: the lines before the pass's, and their credits' touches, aged as
/// in [`Ageing::age_order`] (an order's lines share its date, so an old order's
/// state is aged whole).
fn order_states(w: &WriteTransaction, a: &Ageing, n: &mut Erased) -> Result<(), StoreError> {
    chunked(
        w,
        sales::ORDER_CREDITS,
        None,
        |k, v| {
            let mut s = OrderCredits::from_bytes(v)
                .map_err(|e| corrupt(format!("order state {}: {e}", String::from_utf8_lossy(k))))?;
            let mut changed = false;
            for l in s.lines.iter_mut().filter(|l| l.line.time_ms < a.before_ms) {
                changed |= a.age_line(&mut l.line);
                if let Some((t, _)) = &mut l.credit {
                    changed |= a.age_touch(t);
                }
            }
            Ok(changed.then(|| (k.to_vec(), s.to_bytes())))
        },
        |rows| {
            n.order_states += rows.len() as u64;
            overwrite(w, sales::ORDER_CREDITS, &rows)
        },
    )
}

#[cfg(test)]
mod tests;
