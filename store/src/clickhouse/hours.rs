//! The hours' backfill on ClickHouse ([`crate::model::tallies::hours`]): the UTC
//! hours of the scopes kept by hour that a store an earlier version wrote lacks,
//! summed once from its stored quarter hours (each place's newest row per log
//! partition, summed per hour by the server), a campaign at a time, then their
//! marker. A crash in between sums them again at the next start: equal rows of
//! equal stamps, or a backfill's (the smaller count winning, as for every backfill,
//! `super::rows::TallyCh::of`). Aggregators started together each sum what they
//! read; a batch one of them wrote since is at a higher stamp than any sum that
//! misses it, so its row wins. A store with nothing in it is marked at connect
//! (`mark_zones_if_new`).

use super::error::ch;
use super::rows::TallyCh;
use super::ClickHouseStore;
use crate::model::tallies::{Grain, Metric, Scope, Tally, TallyKey};
use crate::StoreError;

/// The scopes kept by hour, as stored codes for an `IN (...)`.
fn hourly_scopes() -> String {
    Scope::ALL
        .into_iter()
        .filter(|s| s.by_hour())
        .map(|s| (s as u8).to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

impl ClickHouseStore {
    /// The hours' backfill, once (see [`crate::WriteStore::backfill_zones`]): true
    /// when it ran now.
    pub(crate) async fn backfill_hours_once(&self) -> Result<bool, StoreError> {
        let marker = TallyKey::hours_marker();
        if self.has(&marker).await? {
            return Ok(false);
        }
        let fail = ch("backfill hours");
        let floor = self.recount_floor().await?;
        let scopes = hourly_scopes();
        let campaigns: Vec<String> = self
            .client()
            .query(&format!(
                "SELECT DISTINCT campaign_id FROM rollups WHERE grain = ? AND scope IN ({scopes})"
            ))
            .bind(Grain::Quarter as u8)
            .fetch_all()
            .await
            .map_err(&fail)?;
        let mut written = 0;
        for campaign in campaigns {
            let rows = self.hours_of(&campaign, &scopes).await?;
            written += rows.len();
            self.insert_backfilled(&rows, floor).await?;
        }
        self.insert_tallies(&[(marker, Tally::MARKED)]).await?;
        tracing::info!(
            tallies = written,
            "summed the store's quarter hours of campaigns, videos and campaigns' sales \
             into their hours"
        );
        Ok(true)
    }

    /// A campaign's hours, each the sum of its quarters' newest rows, stamped with
    /// their highest stamp (read as `rollups` rows: [`TallyCh::tally`]).
    async fn hours_of(
        &self,
        campaign: &str,
        scopes: &str,
    ) -> Result<Vec<(TallyKey, Tally)>, StoreError> {
        let rows: Vec<TallyCh> = self
            .client()
            .query(&format!(
                "SELECT campaign_id, scope, toUInt8(?) AS grain, hour AS bucket, creative, \
                 catalog_id, product_code, log_partition, metric, sum(v) AS value, \
                 max(s) AS stamp \
                 FROM (SELECT campaign_id, scope, toInt32(floor(bucket / 4)) AS hour, \
                 creative, catalog_id, product_code, log_partition, metric, \
                 argMax(value, stamp) AS v, max(stamp) AS s \
                 FROM rollups WHERE campaign_id = ? AND grain = ? AND scope IN ({scopes}) \
                 AND metric < ? GROUP BY campaign_id, scope, bucket, creative, catalog_id, \
                 product_code, log_partition, metric) \
                 GROUP BY campaign_id, scope, hour, creative, catalog_id, product_code, \
                 log_partition, metric HAVING value != 0"
            ))
            .bind(Grain::Hour as u8)
            .bind(campaign)
            .bind(Grain::Quarter as u8)
            .bind(Metric::FIRST_NOT_COUNT)
            .fetch_all()
            .await
            .map_err(ch("backfill hours"))?;
        rows.into_iter().map(TallyCh::tally).collect()
    }
}
