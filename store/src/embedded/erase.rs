//! The embedded store's erasures ([`crate::erase`]): the audit log (`erasures`, by
//! request id, and `erasures_by_time`, by request time) and the run, one write
//! transaction that replaces the id in every table (so a read sees the store before
//! or after it, never between).
//!
//! Where the id is found: views and carts by a scan of their rows (their keys start
//! with the tracking id, but their rows are stored by slot); product and ad facts by
//! a scan for the id's hash; touches and orders through their indexes by shopper (one
//! key range each); orders' states and served ads' states through those (the orders
//! and ads of the rows found, and of rows already under the replacement, so a second
//! run finds a state a writer rewrote in between). A run therefore costs a scan of
//! the views, carts and facts: about a second per million facts on this machine.

use std::collections::BTreeSet;

use redb::{ReadableTable, TableDefinition, WriteTransaction};

use super::codec::{ad_key, fact_val, key, parse, parse_served, served_val, touch_key, val};
use super::entities::{self, Rekeyed, CARTS, SERVED, VIEWS};
use super::{err, sales, EmbeddedStore, AD_FACTS, ORDERS, PRODUCT_FACTS, TOUCHES};
use crate::erase::EraseStore;
use crate::model::attribution::{OrderLine, ShopperId, Touch};
use crate::model::carts::CartEventRow;
use crate::model::erasure::{Erased, Erasure};
use crate::model::tallies::sales::{OrderCredits, ShopperOrder};
use crate::StoreError;

/// Erasures by request id (JSON of [`Erasure`]).
pub(super) const ERASURES: TableDefinition<&str, &[u8]> = TableDefinition::new("erasures");
/// Request ids by request time: the time big-endian (sign bit flipped), then the id.
pub(super) const BY_TIME: TableDefinition<&[u8], ()> = TableDefinition::new("erasures_by_time");

fn time_key(ms: i64, request_id: &str) -> Vec<u8> {
    let mut k = super::codec::time_prefix(ms).to_vec();
    k.extend(request_id.as_bytes());
    k
}

fn parse_erasure(b: &[u8]) -> Result<Erasure, StoreError> {
    serde_json::from_slice(b).map_err(super::codec::corrupt)
}

fn put(w: &WriteTransaction, e: &Erasure) -> Result<(), StoreError> {
    let json = serde_json::to_vec(e).map_err(err)?;
    w.open_table(ERASURES)
        .map_err(err)?
        .insert(e.request_id.as_str(), json.as_slice())
        .map_err(err)?;
    w.open_table(BY_TIME)
        .map_err(err)?
        .insert(time_key(e.requested_ms, &e.request_id).as_slice(), ())
        .map_err(err)?;
    Ok(())
}

/// The tables, created at open.
pub(super) fn create(w: &WriteTransaction) -> Result<(), StoreError> {
    w.open_table(ERASURES).map_err(err)?;
    w.open_table(BY_TIME).map_err(err)?;
    Ok(())
}

/// The shoppers (touch and order index ids) an id is stored as.
fn shoppers(id: &str) -> [String; 2] {
    [ShopperId::Customer, ShopperId::Session].map(|k| crate::model::attribution::shopper(k, id))
}

/// The index rows of `shoppers` in `table`, key and value.
fn index_rows(
    w: &WriteTransaction,
    table: super::Table,
    shoppers: &[String],
) -> Result<super::Rows, StoreError> {
    let t = w.open_table(table).map_err(err)?;
    let mut out = Vec::new();
    for s in shoppers {
        let lo = sales::shopper_prefix(s);
        for row in t.range(lo.as_slice()..).map_err(err)? {
            let (k, v) = row.map_err(err)?;
            if !k.value().starts_with(&lo) {
                break;
            }
            out.push((k.value().to_vec(), v.value().to_vec()));
        }
    }
    Ok(out)
}

/// Views and carts: rows whose key names the id move to the replacement's key.
fn entities(
    w: &WriteTransaction,
    store: &EmbeddedStore,
    e: &Erasure,
    erased: &mut Erased,
    ads: &mut BTreeSet<String>,
) -> Result<Vec<Rekeyed>, StoreError> {
    let views = entities::scan(w, VIEWS, |v| {
        let (row, _) = super::codec::parse_view_row(v)?;
        if row.key.tracking_id == e.replacement && e.covers_ad(&row.key.ad_id) {
            return Ok(Some((row.key.ad_id, None)));
        }
        if row.key.tracking_id != e.tracking_id || !e.covers_ad(&row.key.ad_id) {
            return Ok(None);
        }
        let facts = super::codec::parse_view_facts(v)?;
        let mut moved = row.clone();
        moved.key.tracking_id.clone_from(&e.replacement);
        let value = super::codec::view_val(&moved, &facts);
        Ok(Some((
            row.key.ad_id.clone(),
            Some((key(&row.key), key(&moved.key), value, facts.len())),
        )))
    })?;
    let mut moves = Vec::new();
    for (slot, (ad_id, moved)) in views {
        ads.insert(ad_id);
        if let Some((old, new, value, facts)) = moved {
            erased.views += 1;
            erased.view_facts += facts as u64;
            moves.push((old, new, slot, value));
        }
    }
    let mut done = vec![entities::rekey(w, &store.index, VIEWS, moves)?];
    let carts = entities::scan(w, CARTS, |v| {
        let mut rows: Vec<CartEventRow> = parse(v)?;
        let Some(first) = rows.first() else {
            return Ok(None);
        };
        if first.key.tracking_id != e.tracking_id || !e.covers_scoped(&first.key.catalog_id) {
            return Ok(None);
        }
        let old = key(&first.key);
        for r in &mut rows {
            r.key.tracking_id.clone_from(&e.replacement);
        }
        Ok(Some((old, key(&rows[0].key), val(&rows), rows.len())))
    })?;
    let mut moves = Vec::new();
    for (slot, (old, new, value, n)) in carts {
        erased.cart_events += n as u64;
        moves.push((old, new, slot, value));
    }
    done.push(entities::rekey(w, &store.index, CARTS, moves)?);
    Ok(done)
}

/// Product and ad facts: the id's hash becomes the replacement's.
fn facts(
    w: &WriteTransaction,
    e: &Erasure,
    erased: &mut Erased,
    ads: &mut BTreeSet<String>,
) -> Result<(), StoreError> {
    let (old, new) = (e.hash, e.new_hash());
    let mut rows = Vec::new();
    {
        let t = w.open_table(PRODUCT_FACTS).map_err(err)?;
        for row in t.iter().map_err(err)? {
            let (k, v) = row.map_err(err)?;
            let mut p = super::codec::parse_product_fact(v.value())?;
            if (p.shopper == old || p.shopper == new) && e.covers_ad(&p.group.ad_id) {
                ads.insert(p.group.ad_id.clone());
                if p.shopper == old {
                    p.shopper = new;
                    rows.push((k.value().to_vec(), fact_val(&p)));
                }
            }
        }
    }
    erased.product_facts += rows.len() as u64;
    let mut t = w.open_table(PRODUCT_FACTS).map_err(err)?;
    for (k, v) in rows {
        t.insert(k.as_slice(), v.as_slice()).map_err(err)?;
    }
    drop(t);
    let mut rows = Vec::new();
    {
        let t = w.open_table(AD_FACTS).map_err(err)?;
        for row in t.iter().map_err(err)? {
            let (_, v) = row.map_err(err)?;
            let mut a = super::codec::parse_ad_fact(v.value())?;
            if (a.shopper == old || a.shopper == new) && e.covers_ad(&a.ad_id) {
                ads.insert(a.ad_id.clone());
                if a.shopper == old {
                    a.shopper = new;
                    rows.push((ad_key(&a), fact_val(&a)));
                }
            }
        }
    }
    erased.ad_facts += rows.len() as u64;
    let mut t = w.open_table(AD_FACTS).map_err(err)?;
    for (k, v) in rows {
        t.insert(k.as_slice(), v.as_slice()).map_err(err)?;
    }
    Ok(())
}

/// Touches (their table and index) and orders (lines, index, states).
fn shoppers_rows(w: &WriteTransaction, e: &Erasure, erased: &mut Erased) -> Result<(), StoreError> {
    let old = shoppers(&e.tracking_id);
    for (k, v) in index_rows(w, sales::TOUCH_SHOPPERS, &old)? {
        let mut t: Touch = parse(&v)?;
        let before = touch_key(&t);
        if !e.swap_touch(&mut t) {
            continue;
        }
        let mut index = w.open_table(sales::TOUCH_SHOPPERS).map_err(err)?;
        index.remove(k.as_slice()).map_err(err)?;
        index
            .insert(sales::touch_key(&t).as_slice(), val(&t).as_slice())
            .map_err(err)?;
        let mut touches = w.open_table(TOUCHES).map_err(err)?;
        touches.remove(before.as_slice()).map_err(err)?;
        touches
            .insert(touch_key(&t).as_slice(), val(&t).as_slice())
            .map_err(err)?;
        erased.touches += 1;
    }
    let mut orders = BTreeSet::new();
    for (k, v) in index_rows(w, sales::ORDER_SHOPPERS, &old)? {
        let mut o: ShopperOrder = parse(&v)?;
        if !e.covers_scoped(&o.order_id) || !e.swap_shopper(&mut o.shopper) {
            continue;
        }
        let mut index = w.open_table(sales::ORDER_SHOPPERS).map_err(err)?;
        index.remove(k.as_slice()).map_err(err)?;
        index
            .insert(sales::order_key(&o).as_slice(), val(&o).as_slice())
            .map_err(err)?;
        erased.order_shoppers += 1;
        orders.insert(o.order_id);
    }
    // Orders already under the replacement: a state rewritten since a first run.
    for (_, v) in index_rows(w, sales::ORDER_SHOPPERS, &shoppers(&e.replacement))? {
        let o: ShopperOrder = parse(&v)?;
        orders.insert(o.order_id);
    }
    for id in &orders {
        let mut lines_t = w.open_table(ORDERS).map_err(err)?;
        let stored = lines_t
            .get(id.as_str())
            .map_err(err)?
            .map(|v| v.value().to_vec());
        if let Some(stored) = stored {
            let mut lines: Vec<OrderLine> = parse(&stored)?;
            let mut n = 0;
            for l in &mut lines {
                n += u64::from(e.swap_line(l));
            }
            if n > 0 {
                lines_t
                    .insert(id.as_str(), val(&lines).as_slice())
                    .map_err(err)?;
                erased.order_lines += n;
            }
        }
        let mut states = w.open_table(sales::ORDER_CREDITS).map_err(err)?;
        let stored = states
            .get(id.as_bytes())
            .map_err(err)?
            .map(|v| v.value().to_vec());
        if let Some(stored) = stored {
            let mut s = OrderCredits::from_bytes(&stored)
                .map_err(|x| super::codec::corrupt(format!("order state {id}: {x}")))?;
            if e.swap_order(&mut s) {
                states
                    .insert(id.as_bytes(), s.to_bytes().as_slice())
                    .map_err(err)?;
                erased.order_states += 1;
            }
        }
    }
    Ok(())
}

/// Served ads' states of these ads.
fn served(
    w: &WriteTransaction,
    store: &EmbeddedStore,
    e: &Erasure,
    ads: &BTreeSet<String>,
    erased: &mut Erased,
) -> Result<(), StoreError> {
    let mut rows = Vec::new();
    for ad_id in ads {
        let Some(slot) = entities::slot_in(w, &store.index, SERVED, &key(ad_id))? else {
            continue;
        };
        let stored = {
            let t = w.open_table(SERVED.rows).map_err(err)?;
            let v = t.get(slot.to_be_bytes().as_slice()).map_err(err)?;
            v.map(|v| v.value().to_vec())
        };
        let Some(stored) = stored else { continue };
        let (id, mut state) = parse_served(&stored)?;
        if e.swap_served(&id, &mut state) {
            rows.push((slot, served_val(&id, &state)));
        }
    }
    erased.served_ads += rows.len() as u64;
    entities::rewrite(w, SERVED, &rows)
}

/// Every table of the store file at `path` (closed: no process has it open), each as
/// its name and its keys and values one after the other: what an audit searches to
/// show that an erased id is nowhere. A table of a layout this version does not know
/// is an error, so none is skipped.
pub fn tables_content(path: &std::path::Path) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
    use redb::{ReadableDatabase as _, TableHandle as _};
    let db = redb::Database::open(path).map_err(err)?;
    let r = db.begin_read().map_err(err)?;
    let mut out = Vec::new();
    for table in r.list_tables().map_err(err)? {
        let name = table.name().to_owned();
        let mut bytes = Vec::new();
        let mut rows = |k: &[u8], v: &[u8]| {
            bytes.extend(k);
            bytes.extend(v);
        };
        if let Ok(t) = r.open_table(TableDefinition::<&[u8], &[u8]>::new(&name)) {
            for row in t.iter().map_err(err)? {
                let (k, v) = row.map_err(err)?;
                rows(k.value(), v.value());
            }
        } else if let Ok(t) = r.open_table(TableDefinition::<&str, &[u8]>::new(&name)) {
            for row in t.iter().map_err(err)? {
                let (k, v) = row.map_err(err)?;
                rows(k.value().as_bytes(), v.value());
            }
        } else if let Ok(t) = r.open_table(TableDefinition::<&str, u64>::new(&name)) {
            for row in t.iter().map_err(err)? {
                let (k, v) = row.map_err(err)?;
                rows(k.value().as_bytes(), &v.value().to_le_bytes());
            }
        } else if let Ok(t) = r.open_table(TableDefinition::<&str, i64>::new(&name)) {
            for row in t.iter().map_err(err)? {
                let (k, v) = row.map_err(err)?;
                rows(k.value().as_bytes(), &v.value().to_le_bytes());
            }
        } else if let Ok(t) = r.open_table(TableDefinition::<&[u8], ()>::new(&name)) {
            for row in t.iter().map_err(err)? {
                rows(row.map_err(err)?.0.value(), &[]);
            }
        } else {
            return Err(StoreError::Refused(format!(
                "table {name}: a layout the audit does not read"
            )));
        }
        out.push((name, bytes));
    }
    Ok(out)
}

impl EraseStore for EmbeddedStore {
    async fn request_erasure(&self, e: &Erasure) -> Result<(), StoreError> {
        let e = e.clone();
        self.blocking(move |db| {
            let w = db.begin_write().map_err(err)?;
            put(&w, &e)?;
            w.commit().map_err(err)
        })
        .await
    }

    async fn erasure(&self, request_id: &str) -> Result<Option<Erasure>, StoreError> {
        let id = request_id.to_owned();
        self.blocking(move |db| {
            use redb::ReadableDatabase as _;
            let r = db.begin_read().map_err(err)?;
            let t = r.open_table(ERASURES).map_err(err)?;
            let v = t.get(id.as_str()).map_err(err)?;
            v.map(|v| parse_erasure(v.value())).transpose()
        })
        .await
    }

    async fn erasures_since(&self, since_ms: i64) -> Result<Vec<Erasure>, StoreError> {
        self.blocking(move |db| {
            use redb::ReadableDatabase as _;
            let r = db.begin_read().map_err(err)?;
            let by_time = r.open_table(BY_TIME).map_err(err)?;
            let all = r.open_table(ERASURES).map_err(err)?;
            let mut out = Vec::new();
            let from = super::codec::time_prefix(since_ms);
            for row in by_time.range(from.as_slice()..).map_err(err)? {
                let (k, _) = row.map_err(err)?;
                let id = std::str::from_utf8(&k.value()[8..]).map_err(super::codec::corrupt)?;
                if let Some(v) = all.get(id).map_err(err)? {
                    out.push(parse_erasure(v.value())?);
                }
            }
            Ok(out)
        })
        .await
    }

    async fn erase(&self, e: &Erasure) -> Result<Erased, StoreError> {
        crate::erase::runnable(e)?;
        let (e, store) = (e.clone(), self.clone());
        self.blocking(move |db| {
            let w = db.begin_write().map_err(err)?;
            let mut erased = Erased::default();
            let mut ads = BTreeSet::new();
            let rekeyed = entities(&w, &store, &e, &mut erased, &mut ads)?;
            facts(&w, &e, &mut erased, &mut ads)?;
            shoppers_rows(&w, &e, &mut erased)?;
            served(&w, &store, &e, &ads, &mut erased)?;
            w.commit().map_err(err)?;
            for r in rekeyed {
                r.apply(&store.index)?;
            }
            Ok(erased)
        })
        .await
    }

    async fn finish_erasure(
        &self,
        e: &Erasure,
        done_ms: i64,
        erased: Erased,
    ) -> Result<(), StoreError> {
        let id = e.request_id.clone();
        self.blocking(move |db| {
            let w = db.begin_write().map_err(err)?;
            let stored = {
                let t = w.open_table(ERASURES).map_err(err)?;
                let v = t.get(id.as_str()).map_err(err)?;
                v.map(|v| parse_erasure(v.value())).transpose()?
            };
            if let Some(mut s) = stored.filter(|s| s.done_ms == 0) {
                s.done_ms = done_ms;
                s.erased = erased;
                put(&w, &s)?;
            }
            w.commit().map_err(err)
        })
        .await
    }

    async fn age(&self, a: &crate::model::ageing::Ageing) -> Result<Erased, StoreError> {
        let (a, store) = (a.clone(), self.clone());
        self.blocking(move |db| super::ageing::run(db, &store, &a))
            .await
    }

    async fn retire(
        &self,
        r: &crate::model::retention::Retirement,
    ) -> Result<crate::model::retention::Retired, StoreError> {
        let (r, store) = (*r, self.clone());
        self.blocking(move |db| super::retention::run(db, &store, &r))
            .await
    }

    async fn settle_erasures(&self, before_ms: i64) -> Result<usize, StoreError> {
        self.blocking(move |db| {
            let w = db.begin_write().map_err(err)?;
            let mut settled = Vec::new();
            {
                let by_time = w.open_table(BY_TIME).map_err(err)?;
                let all = w.open_table(ERASURES).map_err(err)?;
                // Newest first, stopping at the first one settled already: every
                // settling settles all before its time, and that time only grows, so
                // the settled ones are the oldest (a pass costs the new ones only).
                let to = super::codec::time_prefix(before_ms);
                for row in by_time.range(..to.as_slice()).map_err(err)?.rev() {
                    let (k, _) = row.map_err(err)?;
                    let id = std::str::from_utf8(&k.value()[8..]).map_err(super::codec::corrupt)?;
                    if let Some(v) = all.get(id).map_err(err)? {
                        let mut s = parse_erasure(v.value())?;
                        if !s.holds_id() {
                            break;
                        }
                        s.tracking_id.clear();
                        settled.push(s);
                    }
                }
            }
            for s in &settled {
                put(&w, s)?;
            }
            w.commit().map_err(err)?;
            Ok(settled.len())
        })
        .await
    }
}
