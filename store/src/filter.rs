//! Which rows a report covers: the one filter every report takes, and how it selects
//! order lines for the sales reports.
//!
//! A report read for a tenant carries a [`Tenant`]: its namespace and the campaigns
//! of that namespace. Report rows are keyed by campaign, so a row is the tenant's
//! when its campaign is (rows of no campaign, such as carts no ad caused, are no
//! tenant's); order lines are the tenant's when their scoped order id names its
//! namespace; and attribution only credits the tenant's campaigns. Every backend
//! applies it through [`ReportFilter::matches`], [`ReportFilter::selects_line`] and
//! [`ReportFilter::allows_campaign`] (ClickHouse also narrows its queries with it).

use std::collections::BTreeSet;
use std::sync::Arc;

use serde::Deserialize;

use crate::model::attribution::OrderLine;
use crate::model::traffic::ClickWindow;

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
    /// The tenant the report is read for; `None` reads every namespace (operators'
    /// tools and the api's own spend query).
    #[serde(skip)]
    pub tenant: Option<Tenant>,
    /// The click window the report applies (the edge's `RM_CLICK_WINDOW_SECS`).
    #[serde(skip)]
    pub click_window: ClickWindow,
}

/// The namespace a report is read for, and its campaigns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tenant {
    /// The namespace.
    pub namespace: String,
    /// Its campaigns' ids.
    pub campaigns: Arc<BTreeSet<String>>,
}

impl ReportFilter {
    /// The filter of the campaign summary: ad and catalog are not its filters (the
    /// api refuses them; a caller that set them gets them ignored).
    pub fn campaign_wide(&self) -> ReportFilter {
        ReportFilter {
            ad_id: None,
            catalog_id: None,
            ..self.clone()
        }
    }

    /// True when a row with these values passes the filter (`None` = not applicable).
    pub fn matches(
        &self,
        campaign: &str,
        ad: Option<&str>,
        catalog: Option<&str>,
        day: i32,
    ) -> bool {
        self.allows_campaign(campaign)
            && self.campaign_id.as_deref().is_none_or(|c| c == campaign)
            && self
                .ad_id
                .as_deref()
                .is_none_or(|a| ad.is_none_or(|x| x == a))
            && self
                .catalog_id
                .as_deref()
                .is_none_or(|c| catalog.is_none_or(|x| rm_schemas::namespace::bare(x) == c))
            && self.from_day.is_none_or(|d| day >= d)
            && self.to_day.is_none_or(|d| day <= d)
    }

    /// True when the filter's catalog, if any, is that of a stored cart line (whose
    /// catalog is scoped by the namespace of its ad id).
    pub fn selects_cart_catalog(&self, stored: &str) -> bool {
        self.catalog_id
            .as_deref()
            .is_none_or(|c| rm_schemas::namespace::bare(stored) == c)
    }

    /// True when the tenant, if any, owns `campaign` (never the empty campaign).
    pub fn allows_campaign(&self, campaign: &str) -> bool {
        self.tenant
            .as_ref()
            .is_none_or(|t| t.campaigns.contains(campaign))
    }

    /// True when the filter's tenant, catalog and days select this order line (by the
    /// order's day).
    pub fn selects_line(&self, l: &OrderLine) -> bool {
        let day = l.day();
        self.tenant
            .as_ref()
            .is_none_or(|t| l.namespace() == t.namespace)
            && self.catalog_id.as_deref().is_none_or(|c| c == l.catalog_id)
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
