//! Which rows a report covers: the one filter every report takes, and how it selects
//! order lines for the sales reports.

use serde::Deserialize;

use crate::model::attribution::OrderLine;

/// Which rows a report covers. Days are inclusive, UTC, days since the epoch.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ReportFilter {
    /// Only this campaign.
    pub campaign_id: Option<String>,
    /// Only this realised ad id.
    pub ad_id: Option<String>,
    /// Only this catalog (products and carts).
    pub catalog_id: Option<String>,
    /// First day.
    pub from_day: Option<i32>,
    /// Last day.
    pub to_day: Option<i32>,
}

impl ReportFilter {
    /// True when a row with these values passes the filter (`None` = not applicable).
    pub fn matches(
        &self,
        campaign: &str,
        ad: Option<&str>,
        catalog: Option<&str>,
        day: i32,
    ) -> bool {
        self.campaign_id.as_deref().is_none_or(|c| c == campaign)
            && self
                .ad_id
                .as_deref()
                .is_none_or(|a| ad.is_none_or(|x| x == a))
            && self
                .catalog_id
                .as_deref()
                .is_none_or(|c| catalog.is_none_or(|x| x == c))
            && self.from_day.is_none_or(|d| day >= d)
            && self.to_day.is_none_or(|d| day <= d)
    }

    /// True when the filter's catalog and days select this order line (by the order's
    /// day).
    pub fn selects_line(&self, l: &OrderLine) -> bool {
        let day = l.day();
        self.catalog_id.as_deref().is_none_or(|c| c == l.catalog_id)
            && self.from_day.is_none_or(|d| day >= d)
            && self.to_day.is_none_or(|d| day <= d)
    }

    /// The order lines the filter selects ([`Self::selects_line`]).
    pub fn lines_in(&self, lines: &[OrderLine]) -> Vec<OrderLine> {
        lines
            .iter()
            .filter(|l| self.selects_line(l))
            .cloned()
            .collect()
    }
}
