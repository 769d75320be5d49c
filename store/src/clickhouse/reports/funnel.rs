//! The video funnel report, summed by the server per group (views of verified ad ids
//! in the counts, the others beside them).

use crate::clickhouse::error::ch;
use crate::clickhouse::query::Conds;
use crate::clickhouse::rows::{parse_status, FunnelAgg};
use crate::clickhouse::ClickHouseStore;
use crate::model::funnel::{self, FunnelReportRow};
use crate::{ReportFilter, StoreError};

/// A view the funnel counts: its ad id verified and it is no repeat of its served ad's
/// view by another viewer (`model::funnel`).
const COUNTED: &str = "(ad_id_status = 0 AND served_repeat = 0)";

impl ClickHouseStore {
    pub(crate) async fn funnel_report(
        &self,
        f: &ReportFilter,
    ) -> Result<Vec<FunnelReportRow>, StoreError> {
        let mut w = Conds::default();
        w.campaign(f);
        w.str("ad_id = ?", &f.ad_id);
        w.int("day >= ?", f.from_day.map(i64::from));
        w.int("day <= ?", f.to_day.map(i64::from));
        // FINAL keeps each view's newest row before the filter: a view's day moves
        // when an earlier event arrives late.
        let sql = format!(
            "SELECT campaign_id, ad_id, video_id, day, \
             countIf(creative_view + play + first_quartile + midpoint + third_quartile + complete > 0 \
             AND {COUNTED}), \
             sumIf(creative_view, {COUNTED}), sumIf(play, {COUNTED}), \
             sumIf(first_quartile, {COUNTED}), sumIf(midpoint, {COUNTED}), \
             sumIf(third_quartile, {COUNTED}), sumIf(complete, {COUNTED}), \
             sumIf(skips, {COUNTED}), sumIf(pauses, {COUNTED}), \
             sumIf(resumes, {COUNTED}), sumIf(mutes, {COUNTED}), \
             sumIf(unmutes, {COUNTED}), \
             sum(funnel_gaps), sum(repeated_milestones), max(ad_id_status), \
             countIf(creative_view + play + first_quartile + midpoint + third_quartile + complete > 0 \
             AND NOT {COUNTED}), sumIf(play, NOT {COUNTED}) \
             FROM views FINAL{} \
             GROUP BY campaign_id, ad_id, video_id, day \
             ORDER BY campaign_id, ad_id, video_id, day",
            w.clause()
        );
        let mut groups: Vec<FunnelAgg> = w
            .bind(self.client().query(&sql))
            .fetch_all()
            .await
            .map_err(ch("funnel report"))?;
        groups.sort_by(|a, b| {
            (&a.campaign_id, &a.ad_id, &a.video_id, a.day).cmp(&(
                &b.campaign_id,
                &b.ad_id,
                &b.video_id,
                b.day,
            ))
        });
        let rows = groups
            .into_iter()
            .map(|g| {
                let mut r = FunnelReportRow::new(g.campaign_id, g.ad_id, g.video_id, g.day);
                r.ad_id_status = parse_status(g.ad_id_status)?;
                r.views = g.views;
                r.creative_views = g.creative_views;
                r.plays = g.plays;
                r.first_quartiles = g.first_quartiles;
                r.midpoints = g.midpoints;
                r.third_quartiles = g.third_quartiles;
                r.completes = g.completes;
                r.skips = g.skips;
                r.pauses = g.pauses;
                r.resumes = g.resumes;
                r.mutes = g.mutes;
                r.unmutes = g.unmutes;
                r.funnel_gap_violations = g.funnel_gaps;
                r.repeated_milestone_violations = g.repeated_milestones;
                r.invalid_views = g.invalid_views;
                r.invalid_plays = g.invalid_plays;
                Ok(r.finish())
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        let ads = self.ad_report(f).await?;
        Ok(funnel::with_impressions(rows, &ads))
    }
}
