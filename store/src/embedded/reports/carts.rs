//! The cart reports (states, per campaign, adds per day), from the carts' derived
//! event rows.

use redb::Database;

use super::scan;
use crate::embedded::entities::CARTS;
use crate::model::campaigns::CartAddsRow;
use crate::model::carts::{self, CartCampaignRow, CartEventRow};
use crate::read::cart_campaign_rows;
use crate::{ReportFilter, StoreError};

/// The event rows of every cart of the filter's catalog.
pub(super) fn rows(db: &Database, f: &ReportFilter) -> Result<Vec<CartEventRow>, StoreError> {
    let carts: Vec<Vec<CartEventRow>> = scan(db, CARTS.rows)?;
    Ok(carts
        .into_iter()
        .filter(|rows| {
            rows.first()
                .is_none_or(|r| f.selects_cart_catalog(&r.key.catalog_id))
        })
        .flatten()
        .collect())
}

/// Carts per campaign and product, from the events of the filter's days.
pub(super) fn campaigns(
    db: &Database,
    f: &ReportFilter,
) -> Result<Vec<CartCampaignRow>, StoreError> {
    let kept: Vec<CartEventRow> = rows(db, f)?
        .into_iter()
        .filter(|r| {
            let day = crate::model::day_of(r.fact.time_ms);
            f.from_day.is_none_or(|d| day >= d) && f.to_day.is_none_or(|d| day <= d)
        })
        .collect();
    Ok(cart_campaign_rows(&kept, f))
}

/// Cart adds per campaign and day.
pub(super) fn adds(db: &Database, f: &ReportFilter) -> Result<Vec<CartAddsRow>, StoreError> {
    Ok(carts::campaign_day_adds(&rows(db, f)?)
        .into_iter()
        .filter(|r| {
            let day = crate::model::parse_day(&r.day).unwrap_or(0);
            f.matches(&r.campaign_id, None, None, day)
        })
        .collect())
}
