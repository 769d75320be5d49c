//! The video funnel report: the views' derived rows (decoded without their facts),
//! with the ad report's impressions beside them.

use redb::Database;

use super::scan_with;
use crate::embedded::codec::parse_view_row;
use crate::embedded::entities::VIEWS;
use crate::model::funnel::{self, FunnelReportRow, ViewRow};
use crate::{ReportFilter, StoreError};

/// The video funnel report.
pub(super) fn report(db: &Database, f: &ReportFilter) -> Result<Vec<FunnelReportRow>, StoreError> {
    // The `ViewRow`s alone; the facts after them stay undecoded.
    let views = scan_with(db, VIEWS.rows, |v| Ok(parse_view_row(v)?.0))?;
    let kept: Vec<&ViewRow> = views
        .iter()
        .filter(|v| f.matches(&v.campaign_id, Some(&v.key.ad_id), None, v.day))
        .collect();
    let ads = super::ads::report(db, f)?;
    Ok(funnel::with_impressions(funnel::report(kept), &ads))
}
