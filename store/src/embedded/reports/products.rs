//! The product report: impressions, clicks and CTR per product and day, zero-click
//! rows included.

use redb::Database;

use super::scan_with;
use crate::embedded::codec::parse_product_fact;
use crate::embedded::PRODUCT_FACTS;
use crate::model::products::{self, ProductFact, ProductReportRow};
use crate::{ReportFilter, StoreError};

/// The product report.
pub(super) fn report(db: &Database, f: &ReportFilter) -> Result<Vec<ProductReportRow>, StoreError> {
    let facts: Vec<ProductFact> = scan_with(db, PRODUCT_FACTS, parse_product_fact)?;
    let kept = facts.iter().filter(|p| {
        let g = &p.group;
        f.matches(&g.campaign_id, Some(&g.ad_id), Some(&g.catalog_id), g.day)
    });
    Ok(products::report(kept, f.click_window))
}
