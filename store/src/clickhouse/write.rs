//! Writing: the fact sets a batch folds into (`IN` lookups, chunked and concurrent),
//! and a batch's inserts.

use std::collections::{BTreeSet, HashSet};

use futures_util::future::try_join_all;

use super::error::ch;
use super::query::{chunks, placeholders};
use super::rows::{
    action_str, dedup_hex, insert_rows, parse_dedup, parse_kind, parse_status, AdFactCh,
    CartEventCh, CartLineCh, OrderIdCh, OrderLineCh, ProductFactCh, ServedCh, TouchCh, ViewCh,
    ViewFactCh,
};
use super::ClickHouseStore;
use crate::model::attribution::{Touch, Windows};
use crate::model::carts::{self, CartKey};
use crate::model::funnel::{self, ViewFact, ViewKey};
use crate::model::served::ServedAd;
use crate::model::tallies::sales::{OrderCredits, ShopperOrder};
use crate::model::tallies::{Place, PlaceTallies};
use crate::write::{BatchWrite, EntitySets, FastMap, FastSet, WriteStore};
use crate::StoreError;

impl ClickHouseStore {
    /// The fact sets of `keys`, one `IN` query per chunk, the chunks concurrently.
    /// No `FINAL`: a fact never changes once written, and copies of it (a replayed
    /// batch, an unmerged part) are dropped by [`funnel::insert_fact`].
    pub(crate) async fn load_views(
        &self,
        keys: &FastSet<ViewKey>,
    ) -> Result<EntitySets, StoreError> {
        let fail = ch("load views");
        // The ad ids twice: in the tuples and in the `PREWHERE` list.
        let queries = chunks(keys, |k| {
            2 * k.ad_id.len() + k.video_id.len() + k.tracking_id.len()
        })
        .into_iter()
        .map(|chunk| {
            // The ads alone first (`super::query`): the tuples only where one matched.
            let ads: BTreeSet<&str> = chunk.iter().map(|k| k.ad_id.as_str()).collect();
            let sql = format!(
                "SELECT ?fields FROM view_facts PREWHERE ad_id IN ({}) \
                 WHERE (ad_id, video_id, tracking_id) IN ({})",
                placeholders(ads.len()),
                placeholders(chunk.len())
            );
            let mut q = self.client().query(&sql);
            for a in ads {
                q = q.bind(a);
            }
            for k in chunk {
                q = q.bind((&k.ad_id, &k.video_id, &k.tracking_id));
            }
            let fail = &fail;
            async move {
                let mut facts = Vec::new();
                let mut cursor = q.fetch::<ViewFactCh<'_>>().map_err(fail)?;
                while let Some(r) = cursor.next().await.map_err(fail)? {
                    let key = ViewKey {
                        ad_id: r.ad_id.to_owned(),
                        video_id: r.video_id.to_owned(),
                        tracking_id: r.tracking_id.to_owned(),
                    };
                    let fact = ViewFact {
                        dedup_key: parse_dedup(&r.dedup_key)?,
                        kind: parse_kind(r.kind)?,
                        time_ms: r.time_ms,
                        status: parse_status(r.ad_id_status)?,
                    };
                    facts.push((key, fact));
                }
                Ok::<_, StoreError>(facts)
            }
        });
        let mut sets = EntitySets::default();
        for (key, fact) in try_join_all(queries).await?.into_iter().flatten() {
            // Keeps the set's order (event time, dedup key) and drops copies.
            funnel::insert_fact(sets.views.entry(key).or_default(), fact);
        }
        Ok(sets)
    }

    /// As [`Self::load_views`], for carts: a fact is the same in every version of its
    /// cart and the newest version holds every fact, so the union of the rows (no
    /// `FINAL`) is the cart's current set.
    pub(crate) async fn load_carts(
        &self,
        keys: &FastSet<CartKey>,
    ) -> Result<EntitySets, StoreError> {
        let fail = ch("load carts");
        // The shoppers twice: in the tuples and in the `PREWHERE` list.
        let queries = chunks(keys, |k| {
            2 * k.tracking_id.len() + k.catalog_id.len() + k.product_code.len()
        })
        .into_iter()
        .map(|chunk| {
            // The shoppers alone first (`super::query`): the tuples only where one matched.
            let shoppers: BTreeSet<&str> = chunk.iter().map(|k| k.tracking_id.as_str()).collect();
            let sql = format!(
                "SELECT ?fields FROM cart_events PREWHERE tracking_id IN ({}) \
                 WHERE (tracking_id, catalog_id, product_code) IN ({})",
                placeholders(shoppers.len()),
                placeholders(chunk.len())
            );
            let mut q = self.client().query(&sql);
            for s in shoppers {
                q = q.bind(s);
            }
            for k in chunk {
                q = q.bind((&k.tracking_id, &k.catalog_id, &k.product_code));
            }
            let fail = &fail;
            async move {
                let mut rows = Vec::new();
                let mut cursor = q.fetch::<CartEventCh<'_>>().map_err(fail)?;
                while let Some(r) = cursor.next().await.map_err(fail)? {
                    rows.push(r.to_row()?);
                }
                Ok::<_, StoreError>(rows)
            }
        });
        let mut sets = EntitySets::default();
        for row in try_join_all(queries).await?.into_iter().flatten() {
            carts::insert_fact(sets.carts.entry(row.key).or_default(), row.fact);
        }
        Ok(sets)
    }

    /// The states of these served ads: the newest row of each (`argMax` by version;
    /// no `FINAL`, the state only grows).
    pub(crate) async fn load_served(
        &self,
        keys: &FastSet<String>,
    ) -> Result<FastMap<String, ServedAd>, StoreError> {
        let fail = ch("load served ads");
        let queries = chunks(keys, String::len).into_iter().map(|chunk| {
            let sql = format!(
                "SELECT ad_id, argMax(state, version) AS s, max(version) AS v, \
                 max(expires_at) AS e FROM served_ads PREWHERE ad_id IN ({}) GROUP BY ad_id",
                placeholders(chunk.len())
            );
            let mut q = self.client().query(&sql);
            for k in chunk {
                q = q.bind(k);
            }
            let fail = &fail;
            async move {
                let rows: Vec<ServedCh> = q.fetch_all().await.map_err(fail)?;
                rows.into_iter()
                    .map(|r| Ok((r.state()?, r.ad_id)))
                    .collect::<Result<Vec<_>, StoreError>>()
            }
        });
        Ok(try_join_all(queries)
            .await?
            .into_iter()
            .flatten()
            .map(|(state, ad_id)| (ad_id, state))
            .collect())
    }

    pub(crate) async fn write_batch(&self, b: &BatchWrite) -> Result<(), StoreError> {
        let client = self.client();
        // The eight INSERTs run concurrently. If some fail or a crash cuts the batch
        // short, the batch is not committed and is written again whole: the facts it
        // did store are loaded and equal the ones it re-folds, and every derived row
        // is rewritten, so a partial write changes no count once the retry lands.
        let view_facts: Vec<ViewFactCh<'_>> = b
            .view_facts
            .iter()
            .flat_map(|(k, facts)| {
                facts.iter().map(move |f| ViewFactCh {
                    ad_id: &k.ad_id,
                    video_id: &k.video_id,
                    tracking_id: &k.tracking_id,
                    dedup_key: dedup_hex(f.dedup_key),
                    kind: f.kind.as_str(),
                    time_ms: f.time_ms,
                    ad_id_status: f.status.rank(),
                })
            })
            .collect();
        let products: Vec<ProductFactCh<'_>> = b
            .product_facts
            .iter()
            .map(|p| ProductFactCh {
                campaign_id: &p.group.campaign_id,
                ad_id: &p.group.ad_id,
                catalog_id: &p.group.catalog_id,
                product_code: &p.group.product_code,
                day: p.group.day,
                action: action_str(p.action),
                dedup_key: dedup_hex(p.dedup_key),
                ad_id_status: p.status.rank(),
                traffic: p.traffic.code(),
                shopper: p.shopper,
                received_ms: p.received_ms,
                time_ms: p.time_ms,
            })
            .collect();
        let ad_facts: Vec<AdFactCh<'_>> = b
            .ad_facts
            .iter()
            .map(|a| AdFactCh {
                campaign_id: &a.campaign_id,
                ad_id: &a.ad_id,
                action: a.action.as_str(),
                dedup_key: dedup_hex(a.dedup_key),
                time_ms: a.time_ms,
                day: crate::model::day_of(a.time_ms),
                ad_id_status: a.status.rank(),
                traffic: a.traffic.code(),
                shopper: a.shopper,
                received_ms: a.received_ms,
            })
            .collect();
        let views: Vec<ViewCh<'_>> = b
            .views
            .iter()
            .map(|v| {
                let [creative_view, play, first_quartile, midpoint, third_quartile, complete] =
                    v.milestones;
                let [skips, pauses, resumes, mutes, unmutes] = v.controls;
                ViewCh {
                    ad_id: &v.key.ad_id,
                    video_id: &v.key.video_id,
                    tracking_id: &v.key.tracking_id,
                    campaign_id: &v.campaign_id,
                    day: v.day,
                    version: v.version,
                    creative_view,
                    play,
                    first_quartile,
                    midpoint,
                    third_quartile,
                    complete,
                    skips,
                    pauses,
                    resumes,
                    mutes,
                    unmutes,
                    funnel_gaps: v.funnel_gaps,
                    repeated_milestones: v.repeated_milestones,
                    ad_id_status: v.ad_id_status.rank(),
                    served_repeat: u8::from(v.served_repeat),
                }
            })
            .collect();
        let cart_rows: Vec<CartEventCh<'_>> = b
            .cart_rows
            .iter()
            .map(|r| CartEventCh {
                tracking_id: &r.key.tracking_id,
                catalog_id: &r.key.catalog_id,
                product_code: &r.key.product_code,
                dedup_key: dedup_hex(r.fact.dedup_key),
                time_ms: r.fact.time_ms,
                units: r.fact.units,
                value: r.fact.value,
                campaign_id: &r.fact.campaign_id,
                ad_id: &r.fact.ad_id,
                prev_units: r.prev_units,
                transition: r.transition.as_str(),
                version: r.version,
                ad_id_status: r.fact.status.rank(),
            })
            .collect();
        let touches: Vec<TouchCh> = b
            .touches
            .iter()
            .map(|t| TouchCh {
                shopper: t.shopper.clone(),
                time_ms: t.time_ms,
                dedup_key: dedup_hex(t.dedup_key),
                kind: t.kind.as_str().to_owned(),
                ad_id: t.ad_id.clone(),
                campaign_id: t.campaign_id.clone(),
                catalog_id: t.catalog_id.clone(),
                product_code: t.product_code.clone(),
            })
            .collect();
        // An order's lines are in one INSERT: an order is either wholly stored (and
        // skipped when the batch is replayed) or not at all.
        let lines: Vec<OrderLineCh> = b.order_lines.iter().map(OrderLineCh::from).collect();
        let served: Vec<ServedCh> = b
            .served
            .iter()
            .map(|(ad_id, state)| ServedCh::of(ad_id, state))
            .collect();
        // The carts report's entries of the touched lines, and the gone rows of the
        // places they left: before the lines' `cart_events` rows, which the next load
        // reads the old place from (a replay after a crash in between computes the
        // same rows again).
        let cart_lines: Vec<CartLineCh> = carts::lines::lines(&b.cart_rows)
            .iter()
            .map(CartLineCh::of)
            .chain(
                b.cart_lines_left
                    .iter()
                    .map(|(place, version)| CartLineCh::gone(place, *version)),
            )
            .collect();
        // Tallies first: a served ad's state must never be stored without the tallies
        // it moved (see `crate::model::tallies`), or a replay would skip the move.
        let tallies = async {
            if b.tallies.is_empty() {
                Ok(())
            } else {
                self.insert_tallies(&b.tallies).await
            }
        };
        // With the lines, their campaign days (the pages' list of them, `line_days.rs`).
        tokio::try_join!(
            tallies,
            insert_rows::<CartLineCh>(client, "cart_lines", &cart_lines),
            self.insert_line_days(&cart_lines),
        )?;
        tokio::try_join!(
            insert_rows::<ServedCh>(client, "served_ads", &served),
            insert_rows::<ViewFactCh<'_>>(client, "view_facts", &view_facts),
            insert_rows::<ProductFactCh<'_>>(client, "product_facts", &products),
            insert_rows::<AdFactCh<'_>>(client, "ad_facts", &ad_facts),
            insert_rows::<ViewCh<'_>>(client, "views", &views),
            insert_rows::<CartEventCh<'_>>(client, "cart_events", &cart_rows),
            insert_rows::<TouchCh>(client, "attribution_touches", &touches),
            insert_rows::<OrderLineCh>(client, "order_lines", &lines),
            self.insert_order_rows(&b.order_states, &b.order_lines),
        )?;
        if let Some(before) = b.forget_served_before {
            // A mutation, applied in the background; idempotent when the batch is
            // written again.
            client
                .query("ALTER TABLE served_ads DELETE WHERE expires_at < ?")
                .bind(before)
                .execute()
                .await
                .map_err(ch("forget served ads"))?;
        }
        Ok(())
    }

    pub(crate) async fn known_order_ids(
        &self,
        ids: &HashSet<String>,
    ) -> Result<HashSet<String>, StoreError> {
        let fail = ch("load orders");
        let mut known = HashSet::new();
        for chunk in chunks(ids, String::len) {
            let sql = format!(
                "SELECT DISTINCT order_id FROM order_lines PREWHERE order_id IN ({})",
                placeholders(chunk.len())
            );
            let mut q = self.client().query(&sql);
            for id in chunk {
                q = q.bind(id);
            }
            let rows: Vec<OrderIdCh> = q.fetch_all().await.map_err(&fail)?;
            known.extend(rows.into_iter().map(|r| r.order_id));
        }
        Ok(known)
    }
}

impl ClickHouseStore {
    /// Deletes every tally and counts the stored facts into them again (`retail-media
    /// rebuild`; stop the aggregators first: nothing checks that on ClickHouse),
    /// attributes every stored order again with windows `w`, then counts the zoned
    /// quarter hours and sums them into hours.
    pub async fn rebuild_tallies(
        &self,
        window: crate::model::traffic::ClickWindow,
        w: &Windows,
    ) -> Result<(), StoreError> {
        self.rebuild_rollups(window, w).await?;
        self.backfill_zoned().await.map(|_| ())
    }

    /// The zones' backfill, then the hours' (each once): true when either ran now.
    async fn backfill_zoned(&self) -> Result<bool, StoreError> {
        let zones = self.backfill_zones_once().await?;
        let hours = self.backfill_hours_once().await?;
        Ok(zones || hours)
    }
}

impl WriteStore for ClickHouseStore {
    async fn load(
        &self,
        views: &FastSet<ViewKey>,
        carts: &FastSet<CartKey>,
        served: &FastSet<String>,
    ) -> Result<EntitySets, StoreError> {
        self.op("load", async {
            let (v, c, s) = tokio::try_join!(
                self.load_views(views),
                self.load_carts(carts),
                self.load_served(served)
            )?;
            Ok(EntitySets {
                views: v.views,
                carts: c.carts,
                served: s,
                tallies: FastMap::default(),
            })
        })
        .await
    }

    async fn write(&self, batch: &BatchWrite) -> Result<(), StoreError> {
        self.op("write", self.write_batch(batch)).await
    }

    async fn load_tallies(
        &self,
        places: &FastSet<Place>,
    ) -> Result<FastMap<Place, PlaceTallies>, StoreError> {
        self.op("load tallies", self.load_tally_rows(places)).await
    }

    async fn backfill_tallies(&self) -> Result<bool, StoreError> {
        // Not bounded by the operation timeout: it reads the whole facts history once.
        let r = self
            .backfill(crate::model::traffic::ClickWindow::default())
            .await;
        self.inner.note(&r);
        r
    }

    async fn known_orders(&self, ids: &HashSet<String>) -> Result<HashSet<String>, StoreError> {
        self.op("load orders", self.known_order_ids(ids)).await
    }

    async fn load_orders(
        &self,
        ids: &FastSet<String>,
    ) -> Result<FastMap<String, OrderCredits>, StoreError> {
        self.op("load order states", self.load_order_states(ids))
            .await
    }

    async fn touches_of(
        &self,
        shoppers: &std::collections::BTreeSet<String>,
        from: i64,
        to: i64,
    ) -> Result<Vec<Touch>, StoreError> {
        self.op("load touches", self.shoppers_touches(shoppers, from, to))
            .await
    }

    async fn orders_of(
        &self,
        shoppers: &std::collections::BTreeSet<String>,
        from: i64,
        to: i64,
    ) -> Result<Vec<ShopperOrder>, StoreError> {
        self.op(
            "load orders by shopper",
            self.shoppers_orders(shoppers, from, to),
        )
        .await
    }

    async fn backfill_sales(&self, w: &Windows) -> Result<bool, StoreError> {
        // Not bounded by the operation timeout: it reads every stored order once.
        let r = self.backfill_order_sales(w).await;
        self.inner.note(&r);
        r
    }

    async fn backfill_zones(&self) -> Result<bool, StoreError> {
        // Not bounded by the operation timeout: it reads every stored view once.
        let r = self.backfill_zoned().await;
        self.inner.note(&r);
        r
    }

    async fn compact_tallies_at(
        &self,
        now_ms: i64,
        margin_ms: i64,
    ) -> Result<Option<i32>, StoreError> {
        // Not bounded by the operation timeout: the first one sums every closed day.
        let r = self.compact(now_ms, margin_ms).await;
        self.inner.note(&r);
        r.map(Some)
    }
}
