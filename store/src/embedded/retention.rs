//! The embedded store's fact retention ([`crate::model::retention`]): one pass is one
//! write transaction (a read sees the store before or after it, never between) that
//! first records the pass's cut and recount floor in the `ageing` table
//! ([`CUT`], [`FLOOR`], each kept at the highest written), then removes, table by
//! table, the rows dated before the cut:
//!
//! | table | removed when | how |
//! |---|---|---|
//! | `product_facts_v2`, `ad_facts_v2` | the event time `< before_ms` | one key range (keys start with the time) |
//! | `touches_v2` + `touches_by_shopper` | the touch's time `< before_ms` | one key range, and each one's index entry |
//! | `views_v2` (+ `view_slots`) | the view's day `< before_day` | a scan; the slot index follows |
//! | `carts_v2` (+ `cart_slots`, `cart_lines`) | the line's newest event `< before_ms` | a scan; the index and the carts report's entries follow |
//! | `orders_v2`, `order_credits` | the order's newest line `< before_ms` | a scan |
//! | `order_shoppers` | the order's time `< before_ms` | a scan |
//!
//! The newest row of the views and of the carts stays whatever its age (its slot
//! is the table's last, and slots are never given twice: `entities::remove_where`);
//! a later pass removes it once a newer one exists. The rollups are not touched:
//! every report over the removed days still reads the same counts.
//!
//! **Idempotent.** A second pass over the same cut finds nothing dated before it.
//! **Cost.** Two key ranges and a scan of the views, carts and orders, in one
//! transaction: a daily background job, like identifier ageing.

use redb::{Database, ReadableTable, WriteTransaction};

use super::ageing::MARKS;
use super::codec::{parse, parse_view_row, time_prefix};
use super::entities::{self, CARTS, VIEWS};
use super::{err, sales, EmbeddedStore, Table, AD_FACTS, ORDERS, PRODUCT_FACTS, TOUCHES};
use crate::model::attribution::{OrderLine, Touch};
use crate::model::carts::CartEventRow;
use crate::model::retention::{Retired, Retirement};
use crate::model::tallies::sales::ShopperOrder;
use crate::StoreError;

/// Rows dated before this (ms) were removed.
const CUT: &str = "facts_retired_before_ms";
/// Buckets before this (ms) keep their counts through a rebuild.
const FLOOR: &str = "recount_from_ms";

/// Runs pass `r` over the store: what it removed.
pub(super) fn run(
    db: &Database,
    store: &EmbeddedStore,
    r: &Retirement,
) -> Result<Retired, StoreError> {
    let w = db.begin_write().map_err(err)?;
    {
        let mut marks = w.open_table(MARKS).map_err(err)?;
        for (name, ms) in [(CUT, r.before_ms), (FLOOR, r.recount_from_ms)] {
            let had = marks.get(name).map_err(err)?.map(|v| v.value());
            if had.is_none_or(|h| h < ms) {
                marks.insert(name, ms).map_err(err)?;
            }
        }
    }
    let mut n = Retired::default();
    let to = time_prefix(r.before_ms);
    n.product_facts = drain_before(&w, PRODUCT_FACTS, &to)?;
    n.ad_facts = drain_before(&w, AD_FACTS, &to)?;
    n.touches = touches(&w, &to)?;
    let day = r.before_day();
    let mut view_facts = 0u64;
    let views = entities::remove_where(&w, VIEWS, |v| {
        let (row, rest) = parse_view_row(v)?;
        if row.day >= day {
            return Ok(false);
        }
        let facts: Vec<crate::model::funnel::ViewFact> =
            postcard::from_bytes(rest).map_err(super::corrupt)?;
        view_facts += facts.len() as u64;
        Ok(true)
    })?;
    let mut cart_events = 0u64;
    let carts = entities::remove_where(&w, CARTS, |v| {
        let rows: Vec<CartEventRow> = parse(v)?;
        let newest = rows.iter().map(|r| r.fact.time_ms).max();
        let gone = newest.is_some_and(|t| t < r.before_ms);
        if gone {
            cart_events += rows.len() as u64;
        }
        Ok(gone)
    })?;
    n.view_facts = view_facts;
    n.cart_events = cart_events;
    orders(&w, r.before_ms, &mut n)?;
    w.commit().map_err(err)?;
    n.views = views.apply(&store.index)? as u64;
    carts.apply(&store.index)?;
    Ok(n)
}

/// The store's recount floor (ms), `None` when no pass ever ran.
pub(super) fn floor(w: &WriteTransaction) -> Result<Option<i64>, StoreError> {
    let marks = w.open_table(MARKS).map_err(err)?;
    let v = marks.get(FLOOR).map_err(err)?;
    Ok(v.map(|v| v.value()))
}

/// Removes the rows of a table keyed by time first that sort before `to`: how many.
fn drain_before(w: &WriteTransaction, table: Table, to: &[u8]) -> Result<u64, StoreError> {
    let mut t = w.open_table(table).map_err(err)?;
    let mut n = 0u64;
    for row in t
        .extract_from_if::<&[u8], _>(..to, |_, _| true)
        .map_err(err)?
    {
        row.map_err(err)?;
        n += 1;
    }
    Ok(n)
}

/// Touches before the cut, and their entries in the index by shopper.
fn touches(w: &WriteTransaction, to: &[u8]) -> Result<u64, StoreError> {
    let mut gone: Vec<Touch> = Vec::new();
    {
        let mut t = w.open_table(TOUCHES).map_err(err)?;
        for row in t
            .extract_from_if::<&[u8], _>(..to, |_, _| true)
            .map_err(err)?
        {
            let (_, v) = row.map_err(err)?;
            gone.push(parse(v.value())?);
        }
    }
    let mut index = w.open_table(sales::TOUCH_SHOPPERS).map_err(err)?;
    for t in &gone {
        index.remove(sales::touch_key(t).as_slice()).map_err(err)?;
    }
    Ok(gone.len() as u64)
}

/// Orders whose lines are all before the cut (an order's lines share its date):
/// their lines, their states and their entries in the index by shopper.
fn orders(w: &WriteTransaction, before_ms: i64, n: &mut Retired) -> Result<(), StoreError> {
    let mut ids: Vec<String> = Vec::new();
    {
        let t = w.open_table(ORDERS).map_err(err)?;
        for row in t.iter().map_err(err)? {
            let (k, v) = row.map_err(err)?;
            let lines: Vec<OrderLine> = parse(v.value())?;
            if lines.iter().all(|l| l.time_ms < before_ms) {
                n.order_lines += lines.len() as u64;
                ids.push(k.value().to_owned());
            }
        }
    }
    {
        let mut t = w.open_table(ORDERS).map_err(err)?;
        let mut states = w.open_table(sales::ORDER_CREDITS).map_err(err)?;
        for id in &ids {
            t.remove(id.as_str()).map_err(err)?;
            if states.remove(id.as_bytes()).map_err(err)?.is_some() {
                n.order_states += 1;
            }
        }
    }
    let mut old: Vec<Vec<u8>> = Vec::new();
    {
        let index = w.open_table(sales::ORDER_SHOPPERS).map_err(err)?;
        for row in index.iter().map_err(err)? {
            let (k, v) = row.map_err(err)?;
            let o: ShopperOrder = parse(v.value())?;
            if o.time_ms < before_ms {
                old.push(k.value().to_vec());
            }
        }
    }
    let mut index = w.open_table(sales::ORDER_SHOPPERS).map_err(err)?;
    for k in &old {
        index.remove(k.as_slice()).map_err(err)?;
    }
    n.order_shoppers = old.len() as u64;
    Ok(())
}
