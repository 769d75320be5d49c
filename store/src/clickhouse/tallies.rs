//! ClickHouse's tallies ([`crate::model::tallies`]): the `tallies` table
//! ([`rm_schemas::tables::TALLIES`], `ReplacingMergeTree(stamp)`). A key's value is
//! its row with the highest stamp (`argMax`), so the answer is exact before any
//! merge; a batch inserts its tallies before its served ads' states (`write.rs`).

use std::collections::HashSet;

use super::error::ch;
use super::query::{chunks, placeholders};
use super::rows::{insert_rows, DayTallyCh, TallyCh};
use super::ClickHouseStore;
use crate::model::tallies::{self, DayTally, Metric, Tally, TallyKey};
use crate::model::traffic::ClickWindow;
use crate::write::{FastMap, FastSet};
use crate::{ReportFilter, ReportStore, StoreError};

impl ClickHouseStore {
    /// The newest row of each of `keys` (absent ones left out).
    pub(crate) async fn load_tally_rows(
        &self,
        keys: &FastSet<TallyKey>,
    ) -> Result<FastMap<TallyKey, Tally>, StoreError> {
        let fail = ch("load tallies");
        let mut out = FastMap::default();
        for chunk in chunks(keys, |k| k.campaign_id.len() + 24) {
            let sql = format!(
                "SELECT campaign_id, metric, day, log_partition, argMax(value, stamp) AS v, \
                 max(stamp) AS s FROM tallies \
                 WHERE (campaign_id, metric, day, log_partition) IN ({}) \
                 GROUP BY campaign_id, metric, day, log_partition",
                vec!["(?, ?, ?, ?)"; chunk.len()].join(",")
            );
            let mut q = self.client().query(&sql);
            for k in chunk {
                q = q
                    .bind(k.campaign_id.as_str())
                    .bind(k.metric.as_str())
                    .bind(k.day)
                    .bind(k.partition);
            }
            let rows: Vec<TallyCh> = q.fetch_all().await.map_err(&fail)?;
            for r in rows {
                let (k, t) = r.tally()?;
                out.insert(k, t);
            }
        }
        Ok(out)
    }

    /// Inserts a batch's tallies (one `INSERT`).
    pub(crate) async fn insert_tallies(
        &self,
        rows: &[(TallyKey, Tally)],
    ) -> Result<(), StoreError> {
        let rows: Vec<TallyCh> = rows.iter().map(|(k, t)| TallyCh::of(k, *t)).collect();
        insert_rows::<TallyCh>(self.client(), "tallies", &rows).await
    }

    async fn has_marker(&self) -> Result<bool, StoreError> {
        let m = TallyKey::marker();
        let n: u64 = self
            .client()
            .query("SELECT count() FROM tallies WHERE campaign_id = ? AND metric = ?")
            .bind(m.campaign_id.as_str())
            .bind(m.metric.as_str())
            .fetch_one()
            .await
            .map_err(ch("read tallies"))?;
        Ok(n > 0)
    }

    /// `metric` per campaign and day, summed over partitions on the server; the
    /// backfill's marker is read by the same query (one round trip).
    pub(crate) async fn read_tallies(
        &self,
        metric: Metric,
        campaigns: Option<&HashSet<String>>,
    ) -> Result<Option<Vec<DayTally>>, StoreError> {
        let fail = ch("read tallies");
        let marker = TallyKey::marker();
        let sql = |filter: &str| {
            format!(
                "SELECT campaign_id, metric, day, toInt64(sum(v)) AS value FROM (\
                 SELECT campaign_id, metric, day, log_partition, argMax(value, stamp) AS v \
                 FROM tallies WHERE (metric = ?{filter}) OR (campaign_id = ? AND metric = ?) \
                 GROUP BY campaign_id, metric, day, log_partition) \
                 GROUP BY campaign_id, metric, day"
            )
        };
        let lists: Vec<Vec<&String>> = match campaigns {
            None => vec![Vec::new()],
            Some(c) if c.is_empty() => vec![Vec::new()],
            Some(c) => chunks(c, String::len),
        };
        let mut rows: Vec<DayTallyCh> = Vec::new();
        for list in &lists {
            let filter = match (campaigns, list.is_empty()) {
                (None, _) => String::new(),
                // No campaign asked for: only the marker is read.
                (Some(_), true) => " AND 0".to_owned(),
                (Some(_), false) => format!(" AND campaign_id IN ({})", placeholders(list.len())),
            };
            let mut q = self.client().query(&sql(&filter)).bind(metric.as_str());
            for c in list {
                q = q.bind(c.as_str());
            }
            q = q
                .bind(marker.campaign_id.as_str())
                .bind(marker.metric.as_str());
            rows.extend(q.fetch_all::<DayTallyCh>().await.map_err(&fail)?);
        }
        let (marks, counts): (Vec<_>, Vec<_>) = rows.into_iter().partition(|r| {
            r.campaign_id == marker.campaign_id && r.metric == marker.metric.as_str()
        });
        if marks.is_empty() {
            return Ok(None);
        }
        let mut out: Vec<DayTally> = counts
            .into_iter()
            .map(|r| DayTally {
                campaign_id: r.campaign_id,
                day: r.day,
                value: r.value,
            })
            .collect();
        out.sort();
        Ok(Some(out))
    }

    /// The backfill, once (see [`crate::WriteStore::backfill_tallies`]): the counts
    /// first, the marker after them, so a crash in between writes the same counts
    /// again at the next start.
    pub(crate) async fn backfill(&self, window: ClickWindow) -> Result<bool, StoreError> {
        if self.has_marker().await? {
            return Ok(false);
        }
        // A campaign at a time (every copy of an ad fact names its campaign), so the
        // ads rows held at once are one campaign's, not the whole store's.
        let campaigns: Vec<String> = self
            .client()
            .query("SELECT DISTINCT campaign_id FROM ad_facts")
            .fetch_all()
            .await
            .map_err(ch("backfill tallies"))?;
        let mut counts = Vec::new();
        for campaign in campaigns {
            let f = ReportFilter {
                campaign_id: Some(campaign),
                click_window: window,
                ..ReportFilter::default()
            };
            counts.extend(tallies::backfill(&ReportStore::ads(self, &f).await?));
        }
        self.insert_tallies(&counts).await?;
        self.insert_tallies(&[tallies::marker_row()]).await?;
        tracing::info!(
            campaign_days = counts.len(),
            "counted the store's earlier billable clicks into tallies"
        );
        Ok(true)
    }

    /// Deletes every tally and counts the stored facts into them again (`retail-media
    /// rebuild`; stop the aggregators first: nothing checks that on ClickHouse).
    pub async fn rebuild_tallies(&self, window: ClickWindow) -> Result<(), StoreError> {
        let client = self.client();
        client
            .query("DROP TABLE IF EXISTS tallies")
            .execute()
            .await
            .map_err(ch("drop tallies"))?;
        client
            .query_raw(rm_schemas::tables::TALLIES)
            .execute()
            .await
            .map_err(ch("create tallies"))?;
        self.backfill(window).await.map(|_| ())
    }
}
