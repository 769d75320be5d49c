//! Writing the embedded store: a batch encoded into each table's rows ([`Encoded`],
//! on the pipeline's fold stage), inserted in one write transaction; loading the fact
//! sets a batch folds into.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

use redb::ReadableDatabase;

use super::codec::fact_val;
use super::codec::parse_view_facts;
use super::entities::{self, Entities, CARTS, SERVED, VIEWS};
use super::{ad_key, err, key, parse, product_key, touch_key, val, view_val};
use super::{EmbeddedStore, Rows, Table, AD_FACTS, ORDERS, PRODUCT_FACTS, TOUCHES};
use crate::model::attribution::{OrderLine, Touch, Windows};
use crate::model::carts::{CartEventRow, CartKey};
use crate::model::funnel::ViewKey;
use crate::model::tallies::sales::{OrderCredits, ShopperOrder};
use crate::model::tallies::{Place, PlaceTallies};
use crate::model::traffic::ClickWindow;
use crate::write::{BatchWrite, EntitySets, FastMap, FastSet, PreparedWrite, WriteStore};
use crate::StoreError;

/// A batch encoded into the rows of each table, sorted by key (neighbouring inserts
/// share B-tree pages). Built on the pipeline's fold stage ([`crate::WriteStore::prepare`]), so
/// the write stage only inserts and commits.
pub struct Encoded {
    /// Views, carts and served ads, by entity key.
    entities: Vec<(Entities, Rows)>,
    /// Facts, by key.
    tables: Vec<(Table, Rows)>,
    orders: Vec<(String, Vec<u8>)>,
    /// Served ads expired before these Unix seconds are removed.
    forget_served_before: Option<i64>,
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
            .map(|p| (product_key(p), fact_val(p)))
            .collect();
        let ad_facts: Rows = batch
            .ad_facts
            .iter()
            .map(|a| (ad_key(a), fact_val(a)))
            .collect();
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
            // In the batch's transaction with the served ads' states that decided them.
            (
                super::tallies::ROLLUPS,
                super::tallies::rows(&batch.tallies),
            ),
        ];
        tables.extend(super::sales::rows(
            &batch.order_states,
            &batch.order_lines,
            &batch.touches,
        ));
        let served: Rows = batch
            .served
            .iter()
            .map(|(ad_id, state)| (key(ad_id), super::codec::served_val(ad_id, state)))
            .collect();
        let mut entities = vec![(VIEWS, views), (CARTS, carts), (SERVED, served)];
        let all = tables.iter_mut().map(|(_, r)| r);
        for rows in all.chain(entities.iter_mut().map(|(_, r)| r)) {
            rows.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        }
        Self {
            entities,
            tables,
            orders,
            forget_served_before: batch.forget_served_before,
        }
    }
}

/// Most served-ad states one write forgets (the rest go with the next ones).
const FORGET_PER_WRITE: usize = 200_000;

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
            // A table the batch has no rows for is not opened (most batches move no
            // tally and hold no ad click).
            for (table, rows) in encoded.tables.iter().filter(|(_, r)| !r.is_empty()) {
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
            let removed = match encoded.forget_served_before {
                Some(before) => Some(entities::remove_oldest(
                    &w,
                    SERVED,
                    FORGET_PER_WRITE,
                    |row| {
                        let (ad_id, _) = super::codec::parse_served(row)?;
                        Ok(crate::model::served::expired_before(&ad_id, before))
                    },
                )?),
                None => None,
            };
            w.commit().map_err(err)?;
            for u in upserted {
                u.apply(&index)?;
            }
            if let Some(r) = removed {
                let n = r.apply(&index)?;
                if n > 0 {
                    tracing::info!(served_ads = n, "forgot the states of expired served ads");
                }
            }
            Ok(())
        })
        .await
    }
}

impl EmbeddedStore {
    /// The backfill (see [`WriteStore::backfill_tallies`]), counting clicks with
    /// `window`.
    async fn backfill_with(&self, window: ClickWindow) -> Result<bool, StoreError> {
        let carts = self.backfill_carts().await?;
        if !self.blocking(super::tallies::needs_backfill).await? {
            return Ok(carts);
        }
        // The whole history once; the aggregator calls this before its first write,
        // so no fact arrives while it is read.
        let done = self
            .blocking(move |db| {
                let ads = super::reports::ad_facts(db)?;
                let products = super::reports::product_facts(db)?;
                let views = super::reports::view_rows(db)?;
                let carts = super::reports::cart_adds(db)?;
                super::tallies::backfill(db, &ads, &products, &views, &carts, window)
            })
            .await?;
        if let Some(n) = done {
            tracing::info!(
                tallies = n,
                "counted the store's earlier facts into tallies"
            );
        }
        Ok(done.is_some())
    }

    /// The zones' backfill (the quarter hours of campaigns, videos and campaigns'
    /// sales of a store an earlier version wrote, with their marker, in one
    /// transaction), once; then the hours' (their quarters summed into UTC hours),
    /// once. True when either ran now.
    async fn backfill_zones_once(&self) -> Result<bool, StoreError> {
        let zones = self.blocking(super::zones::backfill).await?;
        if let Some(n) = zones {
            tracing::info!(
                tallies = n,
                "counted the store's earlier events, views, cart adds and sales into \
                 their campaigns' quarter hours"
            );
        }
        let hours = self.blocking(super::hours::backfill).await?;
        if let Some(n) = hours {
            tracing::info!(
                tallies = n,
                "summed the store's quarter hours of campaigns, videos and campaigns' \
                 sales into their hours"
            );
        }
        Ok(zones.is_some() || hours.is_some())
    }

    /// The cart products' backfill (their places' counts of every stored line, with
    /// their marker, in one transaction), once.
    async fn backfill_carts(&self) -> Result<bool, StoreError> {
        if !self.blocking(super::tallies::needs_carts_backfill).await? {
            return Ok(false);
        }
        let done = self
            .blocking(|db| {
                let rows = super::reports::cart_rows(db)?;
                let counts = crate::model::tallies::carts::backfill_rows(&rows);
                super::tallies::backfill_carts(db, counts)
            })
            .await?;
        if let Some(n) = done {
            tracing::info!(
                tallies = n,
                "counted the store's earlier cart lines into their products' tallies"
            );
        }
        Ok(done.is_some())
    }

    /// Deletes every tally and counts the stored facts into them again (`retail-media
    /// rebuild`; the aggregator must be stopped, which the store's lock ensures), and
    /// attributes every stored order again with windows `w`.
    pub async fn rebuild_tallies(
        &self,
        window: ClickWindow,
        w: &Windows,
    ) -> Result<(), StoreError> {
        self.blocking(super::tallies::clear).await?;
        self.blocking(super::sales::clear).await?;
        self.backfill_with(window).await?;
        self.backfill_sales(w).await?;
        self.backfill_zones_once().await.map(|_| ())
    }
}

impl WriteStore for EmbeddedStore {
    async fn load(
        &self,
        views: &FastSet<ViewKey>,
        carts: &FastSet<CartKey>,
        served: &FastSet<String>,
    ) -> Result<EntitySets, StoreError> {
        let views: Vec<ViewKey> = views.iter().cloned().collect();
        let carts: Vec<CartKey> = carts.iter().cloned().collect();
        let served: Vec<String> = served.iter().cloned().collect();
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
            let keys: Vec<Vec<u8>> = served.iter().map(key).collect();
            for (ad_id, state) in entities::read(db, &index, SERVED, &keys, |_, row| {
                super::codec::parse_served(row)
            })? {
                sets.served.insert(ad_id, state);
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
            ahead: Some(encoded),
        }
    }

    async fn write_prepared(&self, w: &PreparedWrite) -> Result<(), StoreError> {
        let encoded = w
            .ahead
            .as_ref()
            .and_then(|a| Arc::clone(a).downcast::<Encoded>().ok());
        match encoded {
            Some(e) => self.write_encoded(e).await,
            None => self.write(&w.batch).await,
        }
    }

    async fn load_tallies(
        &self,
        places: &FastSet<Place>,
    ) -> Result<FastMap<Place, PlaceTallies>, StoreError> {
        let places: Vec<Place> = places.iter().cloned().collect();
        self.blocking(move |db| super::tallies::load(db, &places))
            .await
    }

    async fn backfill_tallies(&self) -> Result<bool, StoreError> {
        self.backfill_with(ClickWindow::default()).await
    }

    async fn load_orders(
        &self,
        ids: &FastSet<String>,
    ) -> Result<FastMap<String, OrderCredits>, StoreError> {
        let ids = ids.clone();
        self.blocking(move |db| super::sales::load(db, &ids)).await
    }

    async fn touches_of(
        &self,
        shoppers: &BTreeSet<String>,
        from: i64,
        to: i64,
    ) -> Result<Vec<Touch>, StoreError> {
        let shoppers = shoppers.clone();
        self.blocking(move |db| super::sales::touches_of(db, &shoppers, from, to))
            .await
    }

    async fn orders_of(
        &self,
        shoppers: &BTreeSet<String>,
        from: i64,
        to: i64,
    ) -> Result<Vec<ShopperOrder>, StoreError> {
        let shoppers = shoppers.clone();
        self.blocking(move |db| super::sales::orders_of(db, &shoppers, from, to))
            .await
    }

    async fn backfill_sales(&self, w: &Windows) -> Result<bool, StoreError> {
        let w = *w;
        let done = self
            .blocking(move |db| super::sales::backfill(db, &w))
            .await?;
        if let Some(n) = done {
            tracing::info!(
                tallies = n,
                "attributed the store's earlier orders into sales tallies"
            );
        }
        Ok(done.is_some())
    }

    async fn backfill_zones(&self) -> Result<bool, StoreError> {
        self.backfill_zones_once().await
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
}
