//! ClickHouse's tallies ([`crate::model::tallies`]): the `rollups` table
//! ([`rm_schemas::tables::ROLLUPS`], `ReplacingMergeTree(stamp)`). A key's value is
//! its row with the highest stamp (`argMax`), so the answer is exact before any
//! merge; a batch inserts its tallies before its served ads' states (`write.rs`).
//! Reads sum the partitions on the server, or read a closed day's sums
//! (`compact.rs`), and read the backfill's marker in the same query.

use serde::Deserialize;

use super::compact::{self, PartTallyCh, Snapshot};
use super::error::ch;
use super::page;
use super::place_sets;
use super::quarter_days;
use super::query::{
    bind_days_places, bind_tally_places, chunks, days_places, placeholders, tally_places,
};
use super::rows::{
    corrupt, insert_rows, parse_dedup, parse_status, parse_traffic, CartLineCh, TallyCh, CLICK,
    IMPRESSION,
};
use super::ClickHouseStore;
use crate::model::ads::{AdAction, AdFact};
use crate::model::carts;
use crate::model::funnel::{ViewKey, ViewRow};
use crate::model::products::{ProductAction, ProductFact, ProductGroup};
use crate::model::tallies::backfill::Counts;
use crate::model::tallies::{
    self, Group, Place, PlaceTallies, SummedTally, Tally, TallyKey, TallyQuery,
};
use crate::model::traffic::ClickWindow;
use crate::write::{FastMap, FastSet};
use crate::StoreError;

/// The columns that name a place.
pub(super) const PLACE: &str =
    "campaign_id, scope, grain, bucket, creative, catalog_id, product_code, log_partition";
/// The columns of a summed place (no partition).
pub(super) const SUMMED: &str =
    "campaign_id, scope, grain, bucket, creative, catalog_id, product_code";

/// A read (`sql`, rows of [`PartTallyCh`] whose parts hold distinct buckets) as `q`
/// groups its buckets ([`Group`]): each place's tallies of a group summed on the
/// server, under the group's first bucket (a report over 30 days moves a row per place
/// and metric, not one a day; a report by hour in Asia/Kolkata a row per local hour,
/// not four quarters).
pub(super) fn grouped(q: &TallyQuery, sql: String) -> String {
    const KEPT: &str = "campaign_id, scope, grain, creative, catalog_id, product_code, metric";
    let by = match q.group {
        Group::Each => return sql,
        Group::Whole => String::new(),
        Group::Every { width, shift } => format!(", intDiv(bucket + {shift}, {width})"),
    };
    // Named apart inside (18.16 reads an alias `bucket` in the `GROUP BY` as the
    // aggregate it names).
    format!(
        "SELECT 0 AS part, campaign_id, scope, grain, first AS bucket, creative, \
         catalog_id, product_code, metric, total AS value FROM (\
         SELECT {KEPT}, min(bucket) AS first, toInt64(sum(value)) AS total FROM ({sql}) \
         GROUP BY {KEPT}{by})"
    )
}

impl ClickHouseStore {
    /// Every stored tally of `places` (absent places left out).
    pub(crate) async fn load_tally_rows(
        &self,
        places: &FastSet<Place>,
    ) -> Result<FastMap<Place, PlaceTallies>, StoreError> {
        let fail = ch("load tallies");
        let mut out: FastMap<Place, PlaceTallies> = FastMap::default();
        // Every combination of the places' values is read (`place_sets`): the rows
        // of places not asked for are left out.
        for cond in place_sets::conditions(places) {
            let sql = format!(
                "SELECT {PLACE}, metric, argMax(value, stamp) AS v, max(stamp) AS s \
                 FROM rollups{} GROUP BY {PLACE}, metric",
                cond.clause()
            );
            let q = cond.bind(self.client().query(&sql));
            let rows: Vec<TallyCh> = q.fetch_all().await.map_err(&fail)?;
            for r in rows {
                let (k, t) = r.tally()?;
                if places.contains(&k.place) {
                    out.entry(k.place).or_default().0.push((k.metric, t));
                }
            }
        }
        Ok(out)
    }

    /// Inserts a batch's tallies (one `INSERT`).
    pub(crate) async fn insert_tallies(
        &self,
        rows: &[(TallyKey, Tally)],
    ) -> Result<(), StoreError> {
        // The flags of places of days a compaction may have closed, first.
        self.flag_late(rows).await?;
        let rows: Vec<TallyCh> = rows.iter().map(|(k, t)| TallyCh::of(k, *t)).collect();
        insert_rows::<TallyCh>(self.client(), "rollups", &rows).await
    }

    /// Inserts a backfill's tallies: those the store's recount floor (`floor`, read
    /// once per backfill: [`Self::recount_floor`]) lets it count again
    /// ([`crate::model::retention::recounted`]: every row, where no fact was ever
    /// removed).
    pub(crate) async fn insert_backfilled(
        &self,
        rows: &[(TallyKey, Tally)],
        floor: Option<i64>,
    ) -> Result<(), StoreError> {
        let rows: Vec<(TallyKey, Tally)> = rows
            .iter()
            .filter(|(k, _)| crate::model::retention::recounted(k, floor))
            .cloned()
            .collect();
        self.insert_tallies(&rows).await
    }

    /// Marks a store that holds no facts as counted (nothing to backfill), at
    /// connect; a store with facts and no marker waits for the aggregator's backfill.
    pub(crate) async fn mark_if_new(&self) -> Result<(), StoreError> {
        let facts: Vec<u64> = self
            .client()
            .query(
                "SELECT count() FROM (SELECT 1 FROM ad_facts LIMIT 1 \
                 UNION ALL SELECT 1 FROM product_facts LIMIT 1 \
                 UNION ALL SELECT 1 FROM views LIMIT 1 \
                 UNION ALL SELECT 1 FROM cart_events LIMIT 1)",
            )
            .fetch_all()
            .await
            .map_err(ch("read facts"))?;
        if facts == [0] && !self.has_marker().await? {
            self.insert_tallies(&[tallies::marker_row()]).await?;
        }
        let lines: Vec<u64> = self
            .client()
            .query("SELECT count() FROM (SELECT 1 FROM cart_events LIMIT 1)")
            .fetch_all()
            .await
            .map_err(ch("read facts"))?;
        for marker in [TallyKey::carts_marker(), TallyKey::lines_marker()] {
            if lines == [0] && !self.has(&marker).await? {
                self.insert_tallies(&[(marker, Tally::MARKED)]).await?;
            }
        }
        if lines == [0] && !self.line_days_listed().await? {
            self.mark_line_days().await?;
        }
        self.mark_sales_if_new().await
    }

    async fn has_marker(&self) -> Result<bool, StoreError> {
        self.has(&TallyKey::marker()).await
    }

    /// Whether the marker `m` is stored.
    pub(crate) async fn has(&self, m: &TallyKey) -> Result<bool, StoreError> {
        let n: u64 = self
            .client()
            .query(
                "SELECT count() FROM rollups WHERE scope = ? AND grain = 0 AND bucket = 0 \
                 AND campaign_id = ? AND metric = ?",
            )
            .bind(m.place.scope as u8)
            .bind(m.place.campaign_id.as_str())
            .bind(m.metric.code())
            .fetch_one()
            .await
            .map_err(ch("read tallies"))?;
        Ok(n > 0)
    }

    /// The tallies `q` wants, summed over partitions on the server (or read summed,
    /// for the closed days of a compacted store: `compact.rs`); `None` before the
    /// backfill (its marker is read by the same query).
    pub(crate) async fn read_tallies(
        &self,
        q: &TallyQuery,
    ) -> Result<Option<Vec<SummedTally>>, StoreError> {
        let snapshot = self.snapshot().await?;
        let read = self.read_tallies_at(q, snapshot).await?;
        match snapshot {
            // Read without the dirty part: again with it if a flag landed meanwhile.
            Some(s) if !s.flagged && self.flagged_since(s).await? => {
                let s = Snapshot { flagged: true, ..s };
                self.read_tallies_at(q, Some(s)).await
            }
            _ => Ok(read),
        }
    }

    /// [`Self::read_tallies`] with the snapshot it read.
    async fn read_tallies_at(
        &self,
        q: &TallyQuery,
        snapshot: Option<Snapshot>,
    ) -> Result<Option<Vec<SummedTally>>, StoreError> {
        let fail = ch("read tallies");
        let marker = q.marker();
        let codes = q.metric_codes();
        let lists: Vec<Vec<&String>> = match &q.campaigns {
            None => vec![Vec::new()],
            Some(c) if c.is_empty() => vec![Vec::new()],
            Some(c) => chunks(c, String::len),
        };
        // A page: its last place first, then the places from its first to its last.
        let range = match &q.page {
            None => None,
            Some(page) => {
                let mut keys = Vec::new();
                for list in &lists {
                    keys.extend(
                        page::first_places(self.client(), q, list, &codes, page, snapshot).await?,
                    );
                }
                Some(page.last(keys).unwrap_or_else(|| page.from.clone()))
            }
        };
        let mut found_marker = false;
        let mut out = Vec::new();
        for list in &lists {
            let within = if range.is_some() {
                format!(" AND {} AND {}", page::AT_LEAST, page::AT_MOST)
            } else {
                String::new()
            };
            let places = format!("{}{within}", tally_places(q, list));
            let cond = format!("{places} AND metric IN ({})", placeholders(codes.len()));
            // The marker on its own branch, read by its whole key (an `OR` beside the
            // range would keep the server from narrowing the range by the sorting key).
            let marker_sql = format!(
                "SELECT 0 AS part, {SUMMED}, metric, toInt64(any(value)) AS value FROM rollups \
                 WHERE campaign_id = ? AND scope = ? AND grain = 0 AND bucket = 0 \
                 AND creative = '' AND catalog_id = '' AND product_code = '' AND metric = ? \
                 GROUP BY {SUMMED}, metric"
            );
            let bind_places = |query: clickhouse::query::Query| {
                let mut query = bind_tally_places(query, q, list);
                if let (Some(page), Some(last)) = (&q.page, &range) {
                    query = page::bind_between(query, &page.from, last);
                }
                query
            };
            let bind_cond = |query: clickhouse::query::Query| {
                let mut query = bind_places(query);
                for c in &codes {
                    query = query.bind(*c);
                }
                query
            };
            let bind_marker = |query: clickhouse::query::Query| {
                query
                    .bind(marker.place.campaign_id.as_str())
                    .bind(marker.place.scope as u8)
                    .bind(marker.metric.code())
            };
            // Closed quarters by slices of their days' arrays, where they apply.
            let by_days = snapshot.and_then(|snap| {
                let days = days_places(q, list, &codes);
                quarter_days::read_sql(q, &cond, &places, &days, snap)
            });
            let rows = match (snapshot, by_days) {
                (None, _) => {
                    let read = format!(
                        "SELECT 0 AS part, {SUMMED}, metric, toInt64(sum(v)) AS value FROM (\
                         SELECT {PLACE}, metric, argMax(value, stamp) AS v FROM rollups \
                         WHERE {cond} GROUP BY {PLACE}, metric) GROUP BY {SUMMED}, metric"
                    );
                    let sql = format!("{} UNION ALL {marker_sql}", grouped(q, read));
                    let query = bind_marker(bind_cond(self.client().query(&sql)));
                    query.fetch_all::<PartTallyCh>().await.map_err(&fail)?
                }
                (_, Some(read)) => {
                    // The quarters from the partitions (a flagged place-day or
                    // quarter read from them instead of its array, by the query
                    // itself) and the day arrays' slices, at once.
                    let bind_all = |mut query: clickhouse::query::Query, binds: &[_]| {
                        for bind in binds {
                            query = match bind {
                                quarter_days::Bind::Cond => bind_cond(query),
                                quarter_days::Bind::Places => bind_places(query),
                                quarter_days::Bind::Days => bind_days_places(query, q, list),
                            };
                        }
                        query
                    };
                    let (sql, binds) = &read.quarters;
                    let sql = format!("{sql} UNION ALL {marker_sql}");
                    let quarters = bind_marker(bind_all(self.client().query(&sql), binds));
                    let (sql, binds) = &read.slices;
                    let slices = bind_all(self.client().query(sql), binds);
                    let (rows, slices) = futures_util::future::try_join(
                        quarters.fetch_all::<PartTallyCh>(),
                        slices.fetch_all::<quarter_days::DaySlicesCh>(),
                    )
                    .await
                    .map_err(&fail)?;
                    out.extend(read.slicing.tallies(&slices)?);
                    rows
                }
                (Some(snap), None) => {
                    let read = compact::read_sql(&cond, &places, q.grain, snap);
                    // A dirty part's rows replace closed sums bucket by bucket
                    // (`compact::merge`): those reads keep their buckets.
                    let read = if snap.flagged { read } else { grouped(q, read) };
                    let sql = format!("{read} UNION ALL {marker_sql}");
                    // Bound in the order `read_sql` names them, then the marker.
                    let mut query = bind_cond(bind_cond(self.client().query(&sql)));
                    if snap.flagged {
                        query = bind_places(bind_cond(query));
                    }
                    let query = bind_marker(query);
                    query.fetch_all::<PartTallyCh>().await.map_err(&fail)?
                }
            };
            for row in compact::merge(rows) {
                match row.summed()? {
                    Some(s) => out.push(s),
                    None => found_marker = true,
                }
            }
        }
        if !found_marker {
            return Ok(None);
        }
        let out = crate::model::tallies::sort_summed(out);
        Ok(Some(match &q.page {
            // Exactly the page's places already; the rule applied again is a no-op.
            Some(page) => page.select(out),
            None => out,
        }))
    }

    /// The stored facts of one campaign, every copy.
    async fn campaign_facts(
        &self,
        campaign: &str,
    ) -> Result<(Vec<AdFact>, Vec<ProductFact>), StoreError> {
        let fail = ch("backfill tallies");
        let ads: Vec<AdFactRead> = self
            .client()
            .query(
                "SELECT campaign_id, ad_id, action, dedup_key, time_ms, ad_id_status, traffic, \
                 shopper, received_ms FROM ad_facts WHERE campaign_id = ?",
            )
            .bind(campaign)
            .fetch_all()
            .await
            .map_err(&fail)?;
        let products: Vec<ProductFactRead> = self
            .client()
            .query(
                "SELECT campaign_id, ad_id, catalog_id, product_code, day, action, dedup_key, \
                 ad_id_status, traffic, shopper, received_ms, time_ms FROM product_facts \
                 WHERE campaign_id = ?",
            )
            .bind(campaign)
            .fetch_all()
            .await
            .map_err(&fail)?;
        Ok((
            ads.into_iter()
                .map(AdFactRead::fact)
                .collect::<Result<_, _>>()?,
            products
                .into_iter()
                .map(ProductFactRead::fact)
                .collect::<Result<_, _>>()?,
        ))
    }

    /// The stored views' rows of one campaign (each view's newest).
    pub(super) async fn campaign_views(&self, campaign: &str) -> Result<Vec<ViewRow>, StoreError> {
        let rows: Vec<ViewRowRead> = self
            .client()
            .query(
                "SELECT ad_id, video_id, tracking_id, campaign_id, day, version, creative_view, \
                 play, first_quartile, midpoint, third_quartile, complete, skips, pauses, \
                 resumes, mutes, unmutes, funnel_gaps, repeated_milestones, ad_id_status, \
                 served_repeat FROM views FINAL WHERE campaign_id = ?",
            )
            .bind(campaign)
            .fetch_all()
            .await
            .map_err(ch("backfill tallies"))?;
        rows.into_iter().map(ViewRowRead::row).collect()
    }

    /// The backfill, once (see [`crate::WriteStore::backfill_tallies`]): the counts
    /// first, the marker after them, so a crash in between writes the same counts
    /// again at the next start.
    pub(crate) async fn backfill(&self, window: ClickWindow) -> Result<bool, StoreError> {
        // An earlier version's tables laid out as reads want them, before anything
        // is written to them.
        super::resort::rebuild_tables(self.client()).await?;
        let carts = self.backfill_carts().await?;
        let lines = self.backfill_lines().await?;
        // After the index: its lines' days.
        let days = self.list_line_days().await?;
        if self.has_marker().await? {
            return Ok(carts || lines || days);
        }
        let floor = self.recount_floor().await?;
        // A campaign at a time (every copy of a fact names its campaign), so the facts
        // held at once are one campaign's, not the whole store's.
        let campaigns: Vec<String> = self
            .client()
            .query(
                "SELECT DISTINCT campaign_id FROM (SELECT campaign_id FROM ad_facts \
                 UNION ALL SELECT campaign_id FROM product_facts \
                 UNION ALL SELECT campaign_id FROM views)",
            )
            .fetch_all()
            .await
            .map_err(ch("backfill tallies"))?;
        let mut written = 0;
        for campaign in campaigns {
            let (ads, products) = self.campaign_facts(&campaign).await?;
            let views = self.campaign_views(&campaign).await?;
            let mut counts = Counts::default();
            counts.ads(&ads, window);
            counts.products(&products, window);
            counts.views(&views);
            let rows = counts.rows();
            written += rows.len();
            self.insert_backfilled(&rows, floor).await?;
        }
        // Cart adds per campaign and day, as the campaign summary's fact report counts
        // them (small: one row per campaign and day).
        let mut counts = Counts::default();
        counts.cart_adds(
            &self
                .cart_adds_report(&crate::ReportFilter::default())
                .await?,
        );
        let rows = counts.rows();
        written += rows.len();
        self.insert_backfilled(&rows, floor).await?;
        self.insert_tallies(&[tallies::marker_row()]).await?;
        tracing::info!(
            tallies = written,
            "counted the store's earlier facts into tallies"
        );
        Ok(true)
    }

    /// The cart products' backfill, once: every stored line's counts at its
    /// products' places (`tallies::carts::backfill_rows`), then their marker (a crash
    /// in between writes the same counts again, equal rows of equal stamps). Reads
    /// every cart line's newest rows at once (a store's first start on this version).
    async fn backfill_carts(&self) -> Result<bool, StoreError> {
        let marker = TallyKey::carts_marker();
        if self.has(&marker).await? {
            return Ok(false);
        }
        let lines = self.cart_rows(super::query::Conds::default()).await?;
        let counts = tallies::carts::backfill_rows(&lines);
        let floor = self.recount_floor().await?;
        self.insert_backfilled(&counts, floor).await?;
        self.insert_tallies(&[(marker, Tally::MARKED)]).await?;
        tracing::info!(
            tallies = counts.len(),
            "counted the store's earlier cart lines into their products' tallies"
        );
        Ok(true)
    }

    /// The carts report's index, once: every stored line's entry in `cart_lines` at
    /// its place, then the index's marker (a crash in between writes the same rows
    /// again; a batch written meanwhile wrote its lines' newer versions, which win).
    /// Reads every cart line's newest rows at once (a store's first start on this
    /// version), as the cart products' backfill does.
    pub(crate) async fn backfill_lines(&self) -> Result<bool, StoreError> {
        let marker = TallyKey::lines_marker();
        if self.has(&marker).await? {
            return Ok(false);
        }
        let rows = self.cart_rows(super::query::Conds::default()).await?;
        let lines: Vec<CartLineCh> = carts::lines::lines(&rows)
            .iter()
            .map(CartLineCh::of)
            .collect();
        insert_rows::<CartLineCh>(self.client(), "cart_lines", &lines).await?;
        self.insert_tallies(&[(marker, Tally::MARKED)]).await?;
        tracing::info!(
            lines = lines.len(),
            "indexed the store's earlier cart lines for the carts report"
        );
        Ok(true)
    }

    /// Whether the carts report's index is built (its marker is stored; once seen,
    /// remembered).
    pub(crate) async fn lines_indexed(&self) -> Result<bool, StoreError> {
        use std::sync::atomic::Ordering;
        if self.inner.lines_indexed.load(Ordering::Relaxed) {
            return Ok(true);
        }
        let built = self.has(&TallyKey::lines_marker()).await?;
        if built {
            self.inner.lines_indexed.store(true, Ordering::Relaxed);
        }
        Ok(built)
    }

    /// Deletes every tally and counts the stored facts into them again, and
    /// attributes every stored order again with windows `w` (the zones' backfill
    /// follows: `write.rs`, `rebuild_tallies`).
    pub(crate) async fn rebuild_rollups(
        &self,
        window: ClickWindow,
        w: &crate::model::attribution::Windows,
    ) -> Result<(), StoreError> {
        let client = self.client();
        match self.recount_floor().await? {
            None => {
                client
                    .query("DROP TABLE IF EXISTS rollups")
                    .execute()
                    .await
                    .map_err(ch("drop tallies"))?;
                client
                    .query("DROP TABLE IF EXISTS order_credits")
                    .execute()
                    .await
                    .map_err(ch("drop order states"))?;
            }
            // Facts were removed: the counts of the buckets before the floor stay,
            // and the states of the orders before it (`crate::model::retention`).
            Some(f) => self.clear_from_floor(f).await?,
        }
        client
            .query_raw(rm_schemas::tables::ORDER_CREDITS)
            .execute()
            .await
            .map_err(ch("create order states"))?;
        client
            .query_raw(rm_schemas::tables::ROLLUPS)
            .execute()
            .await
            .map_err(ch("create tallies"))?;
        self.clear_compaction().await?;
        self.backfill(window).await?;
        // Every order attributed again, with the windows given.
        self.backfill_order_sales(w).await.map(|_| ())
    }
}

/// A view's row as stored.
#[derive(clickhouse::Row, Deserialize)]
struct ViewRowRead {
    ad_id: String,
    video_id: String,
    tracking_id: String,
    campaign_id: String,
    day: i32,
    version: u32,
    creative_view: u8,
    play: u8,
    first_quartile: u8,
    midpoint: u8,
    third_quartile: u8,
    complete: u8,
    skips: u32,
    pauses: u32,
    resumes: u32,
    mutes: u32,
    unmutes: u32,
    funnel_gaps: u32,
    repeated_milestones: u32,
    ad_id_status: u8,
    served_repeat: u8,
}

impl ViewRowRead {
    fn row(self) -> Result<ViewRow, StoreError> {
        Ok(ViewRow {
            key: ViewKey {
                ad_id: self.ad_id,
                video_id: self.video_id,
                tracking_id: self.tracking_id,
            },
            campaign_id: self.campaign_id,
            day: self.day,
            version: self.version,
            milestones: [
                self.creative_view,
                self.play,
                self.first_quartile,
                self.midpoint,
                self.third_quartile,
                self.complete,
            ],
            controls: [
                self.skips,
                self.pauses,
                self.resumes,
                self.mutes,
                self.unmutes,
            ],
            funnel_gaps: self.funnel_gaps,
            repeated_milestones: self.repeated_milestones,
            ad_id_status: parse_status(self.ad_id_status)?,
            served_repeat: self.served_repeat != 0,
        })
    }
}

/// A copy of an ad fact as stored.
#[derive(clickhouse::Row, Deserialize)]
struct AdFactRead {
    campaign_id: String,
    ad_id: String,
    action: String,
    dedup_key: String,
    time_ms: i64,
    ad_id_status: u8,
    traffic: u8,
    shopper: u64,
    received_ms: i64,
}

impl AdFactRead {
    fn fact(self) -> Result<AdFact, StoreError> {
        Ok(AdFact {
            action: AdAction::parse(&self.action).ok_or_else(|| corrupt("action", &self.action))?,
            dedup_key: parse_dedup(&self.dedup_key)?,
            status: parse_status(self.ad_id_status)?,
            traffic: parse_traffic(self.traffic)?,
            campaign_id: self.campaign_id,
            ad_id: self.ad_id,
            time_ms: self.time_ms,
            shopper: self.shopper,
            received_ms: self.received_ms,
        })
    }
}

/// A copy of a product fact as stored (`time_ms` 0: stored before it was kept, read
/// as the start of its day).
#[derive(clickhouse::Row, Deserialize)]
struct ProductFactRead {
    campaign_id: String,
    ad_id: String,
    catalog_id: String,
    product_code: String,
    day: i32,
    action: String,
    dedup_key: String,
    ad_id_status: u8,
    traffic: u8,
    shopper: u64,
    received_ms: i64,
    time_ms: i64,
}

impl ProductFactRead {
    fn fact(self) -> Result<ProductFact, StoreError> {
        let action = match self.action.as_str() {
            IMPRESSION => ProductAction::Impression,
            CLICK => ProductAction::Click,
            other => return Err(corrupt("action", other)),
        };
        let time_ms = if self.time_ms == 0 {
            tallies::Grain::Day.start_ms(self.day)
        } else {
            self.time_ms
        };
        Ok(ProductFact {
            group: ProductGroup {
                campaign_id: self.campaign_id,
                ad_id: self.ad_id,
                catalog_id: self.catalog_id,
                product_code: self.product_code,
                day: self.day,
            },
            action,
            dedup_key: parse_dedup(&self.dedup_key)?,
            status: parse_status(self.ad_id_status)?,
            time_ms,
            traffic: parse_traffic(self.traffic)?,
            shopper: self.shopper,
            received_ms: self.received_ms,
        })
    }
}
