//! The ad report: the copies of the filter's campaign and ad, resolved (one fact per
//! dedup key), then the filter's days.

use redb::Database;

use super::scan_with;
use crate::embedded::codec::parse_ad_fact;
use crate::embedded::AD_FACTS;
use crate::model::ads::{self, AdFact, AdReportRow};
use crate::{ReportFilter, StoreError};

/// The ad report.
pub(super) fn report(db: &Database, f: &ReportFilter) -> Result<Vec<AdReportRow>, StoreError> {
    let copies: Vec<AdFact> = scan_with(db, AD_FACTS, parse_ad_fact)?;
    let kept = copies.iter().filter(|c| {
        f.allows_campaign(&c.campaign_id)
            && f.campaign_id.as_deref().is_none_or(|x| x == c.campaign_id)
            && f.ad_id.as_deref().is_none_or(|x| x == c.ad_id)
    });
    Ok(ads::report(
        ads::resolve(kept),
        |g| f.matches(&g.campaign_id, Some(&g.ad_id), None, g.day),
        f.click_window,
    ))
}
