//! The embedded report store: redb tables in `<data-dir>/store/store.redb`.
//!
//! Why redb: the same well-kept, crash-safe embedded B-tree store the embedded log
//! uses, with ACID write transactions, so a batch is all-or-nothing without any code
//! of ours. Keys are binary: postcard of the identifying fields (length-prefixed
//! strings, so unambiguous whatever the ids hold, and exact: no hashing), after an
//! 8-byte event time for facts, or an 8-byte slot for views and carts; values are
//! postcard behind a one-byte tag (postcard writes enum variants by position, so a
//! test pins the bytes). Tables:
//!
//! | table | key | value |
//! |---|---|---|
//! | `views_v2` | slot | the derived `ViewRow`, then the view's fact set |
//! | `view_slots` | view key | slot |
//! | `product_facts_v2` | event time, dedup key, action, ad id status, group | the `ProductFact` |
//! | `ad_facts_v2` | event time, campaign, ad, action, dedup key, ad id status | the `AdFact` (one copy) |
//! | `carts_v2` | slot | the cart's derived event rows (complete) |
//! | `cart_slots` | cart key | slot |
//! | `orders` | order id (raw) | the order's lines (`OrderLine`s) |
//! | `touches_v2` | event time, shopper, dedup key | the `Touch` |
//!
//! The three fact tables only ever grow, and their keys start with the event time
//! (8 bytes, big-endian, sign bit flipped, so byte order is time order): a batch's new
//! facts land at the end of each B-tree, on a few pages, instead of on a page of every
//! group. Keyed by group (the first layout), every batch rewrote nearly every page of
//! those tables, and the write slowed as the store grew (aggbench, 1M records,
//! sequential session ids: 0.43-0.53x of the consume-only rate before, 0.54-0.74x
//! after, same session). Every fact keeps all of its identity in its key, so a
//! rewritten batch replaces its own rows.
//!
//! Views and carts are updated in place; their rows are stored by slot, in the order
//! they were first written, and found through a slot index by entity key
//! (`entities.rs`), because their natural keys start with random tracking ids.
//!
//! One row per view holds both what the funnel report reads (the `ViewRow`, decoded
//! alone with `postcard::take_from_bytes`) and what the next batch folds into (the
//! facts), so a touched view is one insert. Stores written by earlier versions (JSON
//! keys, views and their facts in two tables) are converted once at open, in one
//! transaction (`migrate.rs`).
//!
//! The sales report reads the orders of the filter (a scan), then the touches in the
//! time range the attribution windows allow before them (one key range), keeps those
//! of the orders' shoppers and attributes them with the pure
//! [`crate::aggregate::attribution`].
//!
//! The ad report scans `ad_facts_v2` (narrowed by campaign and ad, which every copy of
//! a fact shares), resolves the copies ([`ads::resolve`]) and then applies the days.
//!
//! Reports scan the tables and roll up with the same pure functions as the tests.
//!
//! A batch is encoded ([`Encoded`], rows sorted by key so neighbouring inserts share
//! B-tree pages) by [`Store::prepare`] on the pipeline's fold stage; the write itself
//! only inserts and commits.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::{PreparedWrite, ReportFilter, Store, StoreError};
use crate::aggregate::ads::{self, AdFact, AdReportRow};
use crate::aggregate::attribution::{self, OrderLine, SalesReportRow, Touch, Windows};
use crate::aggregate::campaigns::{CampaignSalesRow, CartAddsRow};
use crate::aggregate::carts::{self, CartCampaignRow, CartEventRow, CartKey, CartStateRow};
use crate::aggregate::funnel::{self, FunnelReportRow, ViewFact, ViewKey, ViewRow};
use crate::aggregate::products::{self, ProductFact, ProductReportRow};
use crate::batch::{BatchWrite, EntitySets, FastSet};

mod entities;
mod migrate;

use entities::{Entities, Index, CARTS, VIEWS};

/// A table keyed by postcard bytes.
type Table = TableDefinition<'static, &'static [u8], &'static [u8]>;

const PRODUCT_FACTS: Table = TableDefinition::new("product_facts_v2");
const TOUCHES: Table = TableDefinition::new("touches_v2");
const AD_FACTS: Table = TableDefinition::new("ad_facts_v2");
const ORDERS: TableDefinition<&str, &[u8]> = TableDefinition::new("orders");

/// Encoded rows of one table: key and value.
type Rows = Vec<(Vec<u8>, Vec<u8>)>;

/// The embedded store. Cheap to clone.
#[derive(Clone)]
pub struct EmbeddedStore {
    db: Arc<Database>,
    /// The newest part of the views' and carts' slot index.
    index: Arc<Index>,
}

fn err(e: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(e.to_string())
}

/// An entity's key (a view's, a cart's): postcard of its fields (strings
/// length-prefixed, so two keys are equal only when every field is).
fn key<T: Serialize + ?Sized>(k: &T) -> Vec<u8> {
    postcard::to_allocvec(k).unwrap_or_default()
}

/// First byte of a value in postcard; a JSON value (the first format, still read)
/// starts with `[` or `{`.
const POSTCARD: u8 = 1;

fn val<T: Serialize>(v: &T) -> Vec<u8> {
    postcard::to_extend(v, vec![POSTCARD]).unwrap_or_default()
}

fn corrupt(e: impl std::fmt::Display) -> StoreError {
    StoreError::Refused(format!("corrupt store row: {e}"))
}

fn parse<T: DeserializeOwned>(b: &[u8]) -> Result<T, StoreError> {
    match b.split_first() {
        Some((&POSTCARD, rest)) => postcard::from_bytes(rest).map_err(corrupt),
        _ => serde_json::from_slice(b).map_err(corrupt),
    }
}

/// The first 8 bytes of a fact's key: byte order is time order.
fn time_prefix(ms: i64) -> [u8; 8] {
    ((ms as u64) ^ (1 << 63)).to_be_bytes()
}

/// A fact's key: its event time, then postcard of the rest of its identity.
fn timed_key<T: Serialize>(ms: i64, rest: &T) -> Vec<u8> {
    postcard::to_extend(rest, time_prefix(ms).to_vec()).unwrap_or_default()
}

/// A product fact's key.
fn product_key(p: &ProductFact) -> Vec<u8> {
    timed_key(p.time_ms, &(p.dedup_key, p.action, p.status, &p.group))
}

/// An ad fact's key.
fn ad_key(a: &AdFact) -> Vec<u8> {
    timed_key(
        a.time_ms,
        &(&a.campaign_id, &a.ad_id, a.action, a.dedup_key, a.status),
    )
}

/// A touch's key.
fn touch_key(t: &Touch) -> Vec<u8> {
    timed_key(t.time_ms, &(t.shopper.as_str(), t.dedup_key))
}

/// A view's row: the derived `ViewRow`, then its facts.
fn view_val(row: &ViewRow, facts: &[ViewFact]) -> Vec<u8> {
    val(&(row, facts))
}

/// The `ViewRow` of a view's row, without decoding its facts.
fn parse_view_row(b: &[u8]) -> Result<(ViewRow, &[u8]), StoreError> {
    match b.split_first() {
        Some((&POSTCARD, rest)) => postcard::take_from_bytes(rest).map_err(corrupt),
        _ => Err(corrupt("a view row is not postcard")),
    }
}

/// The facts of a view's row.
fn parse_view_facts(b: &[u8]) -> Result<Vec<ViewFact>, StoreError> {
    let (_, rest) = parse_view_row(b)?;
    postcard::from_bytes(rest).map_err(corrupt)
}

impl EmbeddedStore {
    /// Where the store lives under a data directory.
    pub fn path(data_dir: &Path) -> PathBuf {
        data_dir.join("store").join("store.redb")
    }

    /// Opens (or creates) the store at `path`.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| err(format!("{}: {e}", dir.display())))?;
        }
        let db = Database::create(path).map_err(|e| err(format!("{}: {e}", path.display())))?;
        let w = db.begin_write().map_err(err)?;
        migrate::from_json_keys(&w)?;
        entities::create(&w)?;
        for t in [PRODUCT_FACTS, TOUCHES, AD_FACTS] {
            w.open_table(t).map_err(err)?;
        }
        w.open_table(ORDERS).map_err(err)?;
        w.commit().map_err(err)?;
        let index = Index::recover(&db)?;
        Ok(Self {
            db: Arc::new(db),
            index: Arc::new(index),
        })
    }

    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Database) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let db = Arc::clone(&self.db);
        tokio::task::spawn_blocking(move || f(&db))
            .await
            .map_err(err)?
    }

    /// Every row's value of `table`, parsed.
    fn scan<K: redb::Key + 'static, T: DeserializeOwned>(
        db: &Database,
        table: TableDefinition<K, &[u8]>,
    ) -> Result<Vec<T>, StoreError> {
        Self::scan_with(db, table, parse)
    }

    /// Every row's value of `table`, read by `f`.
    fn scan_with<K: redb::Key + 'static, T>(
        db: &Database,
        table: TableDefinition<K, &[u8]>,
        f: impl Fn(&[u8]) -> Result<T, StoreError>,
    ) -> Result<Vec<T>, StoreError> {
        let r = db.begin_read().map_err(err)?;
        let t = r.open_table(table).map_err(err)?;
        let mut out = Vec::new();
        for row in t.iter().map_err(err)? {
            let (_, v) = row.map_err(err)?;
            out.push(f(v.value())?);
        }
        Ok(out)
    }

    fn cart_rows(db: &Database, f: &ReportFilter) -> Result<Vec<CartEventRow>, StoreError> {
        let carts: Vec<Vec<CartEventRow>> = Self::scan(db, CARTS.rows)?;
        Ok(carts
            .into_iter()
            .filter(|rows| {
                rows.first().is_none_or(|r| {
                    f.catalog_id
                        .as_deref()
                        .is_none_or(|c| c == r.key.catalog_id)
                })
            })
            .flatten()
            .collect())
    }
    /// The order lines of the filter's days and catalog and the touches of their
    /// shoppers in the span the windows allow.
    fn sales_inputs(
        db: &Database,
        f: &ReportFilter,
        w: &Windows,
    ) -> Result<(Vec<OrderLine>, Vec<Touch>), StoreError> {
        let orders: Vec<Vec<OrderLine>> = Self::scan(db, ORDERS)?;
        let lines: Vec<OrderLine> = orders
            .into_iter()
            .flatten()
            .filter(|l| super::selects_line(f, l))
            .collect();
        let Some((from, to)) = attribution::touch_range(&lines, w) else {
            return Ok((Vec::new(), Vec::new()));
        };
        let shoppers: HashSet<String> = lines.iter().flat_map(OrderLine::shoppers).collect();
        let r = db.begin_read().map_err(err)?;
        let t = r.open_table(TOUCHES).map_err(err)?;
        let (lo, hi) = (time_prefix(from), time_prefix(to.saturating_add(1)));
        let mut touches = Vec::new();
        for row in t.range(lo.as_slice()..hi.as_slice()).map_err(err)? {
            let (_, v) = row.map_err(err)?;
            let touch: Touch = parse(v.value())?;
            if shoppers.contains(&touch.shopper) {
                touches.push(touch);
            }
        }
        Ok((lines, touches))
    }

    /// The ad report: copies of the filter's campaign and ad, resolved, then days.
    fn ad_rows(db: &Database, f: &ReportFilter) -> Result<Vec<AdReportRow>, StoreError> {
        let copies: Vec<AdFact> = Self::scan(db, AD_FACTS)?;
        let kept = copies.iter().filter(|c| {
            f.campaign_id.as_deref().is_none_or(|x| x == c.campaign_id)
                && f.ad_id.as_deref().is_none_or(|x| x == c.ad_id)
        });
        Ok(ads::report(ads::resolve(kept), |g| {
            f.matches(&g.campaign_id, Some(&g.ad_id), None, g.day)
        }))
    }
}

/// A batch encoded into the rows of each table, sorted by key (neighbouring inserts
/// share B-tree pages). Built on the pipeline's fold stage ([`Store::prepare`]), so
/// the write stage only inserts and commits.
pub struct Encoded {
    /// Views and carts, by entity key.
    entities: Vec<(Entities, Rows)>,
    /// Facts, by key.
    tables: Vec<(Table, Rows)>,
    orders: Vec<(String, Vec<u8>)>,
}

impl std::fmt::Debug for Encoded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let rows: usize = self.tables.iter().map(|(_, r)| r.len()).sum::<usize>()
            + self.entities.iter().map(|(_, r)| r.len()).sum::<usize>()
            + self.orders.len();
        f.debug_struct("Encoded").field("rows", &rows).finish()
    }
}

impl Encoded {
    /// Encodes `batch`.
    pub fn of(batch: &BatchWrite) -> Self {
        let views: Rows = batch
            .views
            .iter()
            .zip(&batch.view_facts)
            .map(|(v, (k, facts))| {
                // `fold` derives each view's row beside its facts, in one order.
                debug_assert_eq!(&v.key, k);
                (key(&v.key), view_val(v, facts))
            })
            .collect();
        let product_facts: Rows = batch
            .product_facts
            .iter()
            .map(|p| (product_key(p), val(p)))
            .collect();
        let ad_facts: Rows = batch.ad_facts.iter().map(|a| (ad_key(a), val(a))).collect();
        let mut by_cart: std::collections::BTreeMap<&CartKey, Vec<&CartEventRow>> =
            Default::default();
        for r in &batch.cart_rows {
            by_cart.entry(&r.key).or_default().push(r);
        }
        let carts: Rows = by_cart
            .into_iter()
            .map(|(k, rows)| (key(k), val(&rows)))
            .collect();
        let mut by_order: std::collections::BTreeMap<&str, Vec<&OrderLine>> = Default::default();
        for l in &batch.order_lines {
            by_order.entry(&l.order_id).or_default().push(l);
        }
        let orders: Vec<(String, Vec<u8>)> = by_order
            .into_iter()
            .map(|(id, lines)| (id.to_owned(), val(&lines)))
            .collect();
        let touches: Rows = batch
            .touches
            .iter()
            .map(|t| (touch_key(t), val(t)))
            .collect();
        let mut tables = vec![
            (PRODUCT_FACTS, product_facts),
            (TOUCHES, touches),
            (AD_FACTS, ad_facts),
        ];
        let mut entities = vec![(VIEWS, views), (CARTS, carts)];
        let all = tables.iter_mut().map(|(_, r)| r);
        for rows in all.chain(entities.iter_mut().map(|(_, r)| r)) {
            rows.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        }
        Self {
            entities,
            tables,
            orders,
        }
    }
}

impl EmbeddedStore {
    /// Inserts an encoded batch in one write transaction (all or nothing).
    async fn write_encoded(&self, encoded: Arc<Encoded>) -> Result<(), StoreError> {
        let index = Arc::clone(&self.index);
        self.blocking(move |db| {
            let w = db.begin_write().map_err(err)?;
            let mut upserted = Vec::new();
            for (kind, rows) in &encoded.entities {
                upserted.push(entities::upsert(&w, &index, *kind, rows, false)?);
            }
            for (table, rows) in &encoded.tables {
                let mut t = w.open_table(*table).map_err(err)?;
                for (k, v) in rows {
                    t.insert(k.as_slice(), v.as_slice()).map_err(err)?;
                }
            }
            if !encoded.orders.is_empty() {
                let mut t = w.open_table(ORDERS).map_err(err)?;
                for (k, v) in &encoded.orders {
                    t.insert(k.as_str(), v.as_slice()).map_err(err)?;
                }
            }
            w.commit().map_err(err)?;
            for u in upserted {
                u.apply(&index)?;
            }
            Ok(())
        })
        .await
    }
}

impl Store for EmbeddedStore {
    async fn load(
        &self,
        views: &FastSet<ViewKey>,
        carts: &FastSet<CartKey>,
    ) -> Result<EntitySets, StoreError> {
        let views: Vec<ViewKey> = views.iter().cloned().collect();
        let carts: Vec<CartKey> = carts.iter().cloned().collect();
        let index = Arc::clone(&self.index);
        self.blocking(move |db| {
            let mut sets = EntitySets::default();
            let keys: Vec<Vec<u8>> = views.iter().map(key).collect();
            for (i, facts) in entities::read(db, &index, VIEWS, &keys, |i, row| {
                Ok((i, parse_view_facts(row)?))
            })? {
                sets.views.insert(views[i].clone(), facts);
            }
            let keys: Vec<Vec<u8>> = carts.iter().map(key).collect();
            for (i, rows) in entities::read(db, &index, CARTS, &keys, |i, row| {
                Ok((i, parse::<Vec<CartEventRow>>(row)?))
            })? {
                let facts = rows.into_iter().map(|r| r.fact).collect();
                sets.carts.insert(carts[i].clone(), facts);
            }
            Ok(sets)
        })
        .await
    }

    async fn write(&self, batch: &BatchWrite) -> Result<(), StoreError> {
        self.write_encoded(Arc::new(Encoded::of(batch))).await
    }

    fn prepare(&self, batch: BatchWrite) -> PreparedWrite {
        let encoded = Arc::new(Encoded::of(&batch));
        PreparedWrite {
            batch,
            embedded: Some(encoded),
        }
    }

    async fn write_prepared(&self, w: &PreparedWrite) -> Result<(), StoreError> {
        match &w.embedded {
            Some(e) => self.write_encoded(Arc::clone(e)).await,
            None => self.write(&w.batch).await,
        }
    }

    async fn funnel(&self, f: &ReportFilter) -> Result<Vec<FunnelReportRow>, StoreError> {
        let f = f.clone();
        self.blocking(move |db| {
            // The `ViewRow`s alone; the facts after them stay undecoded.
            let views = Self::scan_with(db, VIEWS.rows, |v| Ok(parse_view_row(v)?.0))?;
            let kept: Vec<&ViewRow> = views
                .iter()
                .filter(|v| f.matches(&v.campaign_id, Some(&v.key.ad_id), None, v.day))
                .collect();
            let ads = Self::ad_rows(db, &f)?;
            Ok(funnel::with_impressions(funnel::report(kept), &ads))
        })
        .await
    }

    async fn ads(&self, f: &ReportFilter) -> Result<Vec<AdReportRow>, StoreError> {
        let f = f.clone();
        self.blocking(move |db| Self::ad_rows(db, &f)).await
    }

    async fn cart_adds(&self, f: &ReportFilter) -> Result<Vec<CartAddsRow>, StoreError> {
        let f = f.clone();
        self.blocking(move |db| {
            let rows = Self::cart_rows(db, &f)?;
            Ok(carts::campaign_day_adds(&rows)
                .into_iter()
                .filter(|r| {
                    let day = crate::aggregate::parse_day(&r.day).unwrap_or(0);
                    f.matches(&r.campaign_id, None, None, day)
                })
                .collect())
        })
        .await
    }

    async fn campaign_sales(
        &self,
        f: &ReportFilter,
        w: &Windows,
    ) -> Result<Vec<CampaignSalesRow>, StoreError> {
        let (f, w) = (f.clone(), *w);
        self.blocking(move |db| {
            let (lines, touches) = Self::sales_inputs(db, &f, &w)?;
            Ok(super::campaign_sales_rows(&lines, &touches, &f, &w))
        })
        .await
    }

    async fn products(&self, f: &ReportFilter) -> Result<Vec<ProductReportRow>, StoreError> {
        let f = f.clone();
        self.blocking(move |db| {
            let facts: Vec<ProductFact> = Self::scan(db, PRODUCT_FACTS)?;
            let kept = facts.iter().filter(|p| {
                let g = &p.group;
                f.matches(&g.campaign_id, Some(&g.ad_id), Some(&g.catalog_id), g.day)
            });
            Ok(products::report(kept))
        })
        .await
    }

    async fn carts(&self, f: &ReportFilter) -> Result<Vec<CartStateRow>, StoreError> {
        let f = f.clone();
        self.blocking(move |db| {
            let rows = Self::cart_rows(db, &f)?;
            Ok(carts::states(&rows)
                .into_iter()
                .filter(|s| {
                    let day = crate::aggregate::parse_day(&s.last_day).unwrap_or(0);
                    f.matches(&s.campaign_id, Some(&s.ad_id), Some(&s.catalog_id), day)
                })
                .collect())
        })
        .await
    }

    async fn cart_campaigns(&self, f: &ReportFilter) -> Result<Vec<CartCampaignRow>, StoreError> {
        let f = f.clone();
        self.blocking(move |db| {
            let rows = Self::cart_rows(db, &f)?;
            let kept: Vec<CartEventRow> = rows
                .into_iter()
                .filter(|r| {
                    let day = crate::aggregate::day_of(r.fact.time_ms);
                    f.from_day.is_none_or(|d| day >= d) && f.to_day.is_none_or(|d| day <= d)
                })
                .collect();
            Ok(carts::campaign_rollup(&kept)
                .into_iter()
                .filter(|r| f.campaign_id.as_deref().is_none_or(|c| c == r.campaign_id))
                .collect())
        })
        .await
    }

    async fn known_orders(&self, ids: &HashSet<String>) -> Result<HashSet<String>, StoreError> {
        let ids = ids.clone();
        self.blocking(move |db| {
            let r = db.begin_read().map_err(err)?;
            let t = r.open_table(ORDERS).map_err(err)?;
            let mut known = HashSet::new();
            for id in ids {
                if t.get(id.as_str()).map_err(err)?.is_some() {
                    known.insert(id);
                }
            }
            Ok(known)
        })
        .await
    }

    async fn sales(
        &self,
        f: &ReportFilter,
        w: &Windows,
    ) -> Result<Vec<SalesReportRow>, StoreError> {
        let (f, w) = (f.clone(), *w);
        self.blocking(move |db| {
            let (lines, touches) = Self::sales_inputs(db, &f, &w)?;
            Ok(super::sales_rows(&lines, &touches, &f, &w))
        })
        .await
    }

    fn readiness(&self) -> Result<(), String> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregate::status::AdIdStatus;
    use rm_schemas::InteractionType;

    fn facts() -> Vec<ViewFact> {
        vec![
            ViewFact {
                dedup_key: 0x0123_4567_89ab_cdef_0123_4567_89ab_cdef,
                kind: InteractionType::VideoPlay,
                time_ms: 1_795_000_000_000,
                status: AdIdStatus::Verified,
            },
            ViewFact {
                dedup_key: 7,
                kind: InteractionType::VideoComplete,
                time_ms: 1_795_000_030_000,
                status: AdIdStatus::Verified,
            },
        ]
    }

    /// Rows written as JSON (the first format) still read; new rows are postcard,
    /// much smaller.
    #[test]
    fn values_read_in_both_formats() {
        let json = serde_json::to_vec(&facts()).expect("json");
        assert_eq!(parse::<Vec<ViewFact>>(&json).expect("json row"), facts());
        let bin = val(&facts());
        assert_eq!(bin[0], POSTCARD);
        assert!(
            bin.len() * 3 < json.len(),
            "{} vs {}",
            bin.len(),
            json.len()
        );
        assert_eq!(parse::<Vec<ViewFact>>(&bin).expect("postcard row"), facts());
        assert!(matches!(
            parse::<Vec<ViewFact>>(&[POSTCARD, 0xff]),
            Err(StoreError::Refused(_))
        ));
    }

    /// postcard writes enum variants by position: reordering `InteractionType` or
    /// `AdIdStatus` would misread stored rows, so the bytes are pinned.
    #[test]
    fn the_postcard_encoding_is_pinned() {
        let hex: String = val(&facts()[1..].to_vec())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(hex, PINNED);
    }

    /// Tag, one fact: dedup key 7, `videoComplete` (variant 5), the time (zigzag
    /// varint), `Verified` (variant 0).
    const PINNED: &str = "01010705e0ccb6e5bd6800";
}
