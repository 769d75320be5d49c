//! The zones' backfill on ClickHouse ([`crate::model::tallies::zones`]): the quarter
//! hours of campaigns, videos and campaigns' sales that a store an earlier version
//! wrote lacks, counted once from its rollups and entities, then their marker (a
//! crash in between counts them again at the next start: equal rows of equal
//! stamps, or a backfill's, the smaller count winning as for every backfill). A
//! store with nothing in it is marked at connect.

use std::collections::{BTreeMap, HashMap};

use serde::Deserialize;

use super::error::ch;
use super::ClickHouseStore;
use crate::model::funnel::ViewRow;
use crate::model::tallies::views::Counted;
use crate::model::tallies::{zones, Grain, Metric, Place, Scope, Tally, TallyKey};
use crate::StoreError;

/// A creative's or product's quarter-hour tally of events, summed per campaign,
/// bucket, log partition and metric (each key's newest row first).
#[derive(clickhouse::Row, Deserialize)]
struct EventsCh {
    campaign_id: String,
    bucket: i32,
    log_partition: i32,
    metric: u16,
    value: i64,
    stamp: u64,
}

/// A log partition's progress.
#[derive(clickhouse::Row, Deserialize)]
struct ProgressCh {
    log_partition: i32,
    value: i64,
}

/// A view's earliest event.
#[derive(clickhouse::Row, Deserialize)]
struct FirstCh {
    ad_id: String,
    video_id: String,
    tracking_id: String,
    first: i64,
}

impl ClickHouseStore {
    /// The zones' backfill, once (see [`crate::WriteStore::backfill_zones`]).
    pub(crate) async fn backfill_zones_once(&self) -> Result<bool, StoreError> {
        let marker = TallyKey::zones_marker();
        if self.has(&marker).await? {
            return Ok(false);
        }
        let floor = self.recount_floor().await?;
        let mut written = 0;
        let events = self.campaign_event_quarters().await?;
        written += events.len();
        self.insert_backfilled(&events, floor).await?;
        // A campaign's views at a time, as the first backfill reads them.
        let campaigns: Vec<String> = self
            .client()
            .query("SELECT DISTINCT campaign_id FROM views")
            .fetch_all()
            .await
            .map_err(ch("backfill zones"))?;
        for campaign in campaigns {
            let views = self.views_with_first(&campaign).await?;
            let rows = zones::views(views.iter().map(|(row, first_ms)| Counted {
                row,
                first_ms: *first_ms,
            }));
            written += rows.len();
            self.insert_backfilled(&rows, floor).await?;
        }
        let lines = self.cart_rows(super::query::Conds::default()).await?;
        let rows = crate::model::tallies::carts::backfill_rows_of(&lines, zones::is_zoned);
        written += rows.len();
        self.insert_backfilled(&rows, floor).await?;
        let states = self.all_order_states().await?;
        let rows = zones::sales(&states);
        written += rows.len();
        self.insert_backfilled(&rows, floor).await?;
        self.insert_tallies(&[(marker, Tally::MARKED)]).await?;
        tracing::info!(
            tallies = written,
            "counted the store's earlier events, views, cart adds and sales into their \
             campaigns' quarter hours"
        );
        Ok(true)
    }

    /// The campaigns' quarter hours of events, summed from their creatives' and
    /// products' ([`zones::campaign_events`]).
    async fn campaign_event_quarters(&self) -> Result<Vec<(TallyKey, Tally)>, StoreError> {
        let fail = ch("backfill zones");
        let sums: Vec<EventsCh> = self
            .client()
            .query(
                "SELECT campaign_id, bucket, log_partition, metric, sum(v) AS value, \
                 max(s) AS stamp FROM (SELECT campaign_id, bucket, log_partition, metric, \
                 argMax(value, stamp) AS v, max(stamp) AS s FROM rollups \
                 WHERE scope IN (?, ?) AND grain = ? AND metric < 128 \
                 GROUP BY scope, bucket, campaign_id, creative, catalog_id, product_code, \
                 log_partition, metric) \
                 GROUP BY campaign_id, bucket, log_partition, metric",
            )
            .bind(Scope::Creative as u8)
            .bind(Scope::Product as u8)
            .bind(Grain::Quarter as u8)
            .fetch_all()
            .await
            .map_err(&fail)?;
        let progress: Vec<ProgressCh> = self
            .client()
            .query(
                "SELECT log_partition, argMax(value, stamp) AS value FROM rollups \
                 WHERE scope = ? AND grain = ? AND bucket = 0 AND campaign_id = '' \
                 AND metric = ? GROUP BY log_partition",
            )
            .bind(Scope::Campaign as u8)
            .bind(Grain::Day as u8)
            .bind(Metric::Progress.code())
            .fetch_all()
            .await
            .map_err(&fail)?;
        let progress: BTreeMap<i32, i64> = progress
            .into_iter()
            .map(|p| (p.log_partition, p.value))
            .collect();
        let mut tallies = Vec::with_capacity(sums.len());
        for s in sums {
            let metric = Metric::from_code(s.metric)
                .ok_or_else(|| super::rows::corrupt("metric", &s.metric.to_string()))?;
            let key = TallyKey {
                place: Place {
                    campaign_id: s.campaign_id.into(),
                    scope: Scope::Creative,
                    grain: Grain::Quarter,
                    bucket: s.bucket,
                    creative: Default::default(),
                    catalog_id: Default::default(),
                    product_code: Default::default(),
                    partition: s.log_partition,
                },
                metric,
            };
            // Stored stamps are offsets plus one.
            let stamp = i64::try_from(s.stamp).unwrap_or(i64::MAX) - 1;
            tallies.push((
                key,
                Tally {
                    value: s.value,
                    stamp,
                },
            ));
        }
        Ok(zones::campaign_events(tallies, &progress))
    }

    /// A campaign's views' rows, each with its earliest fact's time (its day's start
    /// when its facts are gone).
    async fn views_with_first(&self, campaign: &str) -> Result<Vec<(ViewRow, i64)>, StoreError> {
        let rows = self.campaign_views(campaign).await?;
        let firsts: Vec<FirstCh> = self
            .client()
            .query(
                "SELECT ad_id, video_id, tracking_id, min(time_ms) AS first FROM view_facts \
                 WHERE ad_id IN (SELECT ad_id FROM views WHERE campaign_id = ?) \
                 GROUP BY ad_id, video_id, tracking_id",
            )
            .bind(campaign)
            .fetch_all()
            .await
            .map_err(ch("backfill zones"))?;
        let firsts: HashMap<(String, String, String), i64> = firsts
            .into_iter()
            .map(|f| ((f.ad_id, f.video_id, f.tracking_id), f.first))
            .collect();
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            let k = &row.key;
            let first = firsts
                .get(&(k.ad_id.clone(), k.video_id.clone(), k.tracking_id.clone()))
                .copied()
                .unwrap_or_else(|| Grain::Day.start_ms(row.day));
            out.push((row, first));
        }
        Ok(out)
    }

    /// Marks a store without facts or orders as counted by the zones' and the
    /// hours' backfills (nothing to backfill), at connect.
    pub(crate) async fn mark_zones_if_new(&self) -> Result<(), StoreError> {
        let any: u64 = self
            .client()
            .query(
                "SELECT count() FROM (SELECT 1 FROM ad_facts LIMIT 1 \
                 UNION ALL SELECT 1 FROM product_facts LIMIT 1 \
                 UNION ALL SELECT 1 FROM views LIMIT 1 \
                 UNION ALL SELECT 1 FROM cart_events LIMIT 1 \
                 UNION ALL SELECT 1 FROM order_lines LIMIT 1)",
            )
            .fetch_one()
            .await
            .map_err(ch("read facts"))?;
        if any > 0 {
            return Ok(());
        }
        for marker in [TallyKey::zones_marker(), TallyKey::hours_marker()] {
            if !self.has(&marker).await? {
                self.insert_tallies(&[(marker, Tally::MARKED)]).await?;
            }
        }
        Ok(())
    }
}
