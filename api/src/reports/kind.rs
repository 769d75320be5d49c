//! The report kinds: one value per report route, so every place that picks a report
//! (the route rows in `crate::endpoints::reports`, the dispatch to the store in
//! [`super::rows`], the filters each accepts, the costs each needs) matches on the
//! kind exhaustively instead of comparing path strings: a new report that one of them
//! forgets does not compile.

/// A report route.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReportKind {
    /// `GET /v1/reports/video-funnel`.
    VideoFunnel,
    /// `GET /v1/reports/products`.
    Products,
    /// `GET /v1/reports/ads`.
    Ads,
    /// `GET /v1/reports/campaigns`: the campaign summary.
    Campaigns,
    /// `GET /v1/reports/carts`.
    Carts,
    /// `GET /v1/reports/carts/campaigns`.
    CartCampaigns,
    /// `GET /v1/reports/sales`.
    Sales,
}

impl ReportKind {
    /// Every kind, in the order of the route table.
    pub const ALL: [ReportKind; 7] = [
        Self::VideoFunnel,
        Self::Products,
        Self::Ads,
        Self::Campaigns,
        Self::Carts,
        Self::CartCampaigns,
        Self::Sales,
    ];

    /// The route's path.
    pub const fn path(self) -> &'static str {
        match self {
            Self::VideoFunnel => "/v1/reports/video-funnel",
            Self::Products => "/v1/reports/products",
            Self::Ads => "/v1/reports/ads",
            Self::Campaigns => "/v1/reports/campaigns",
            Self::Carts => "/v1/reports/carts",
            Self::CartCampaigns => "/v1/reports/carts/campaigns",
            Self::Sales => "/v1/reports/sales",
        }
    }

    /// Whether an `adId` filter drills down to the stored facts of one served ad (the
    /// other rows are per creative, or for sales per campaign, from the rollups).
    pub const fn drills_down(self) -> bool {
        matches!(
            self,
            Self::Products | Self::Ads | Self::VideoFunnel | Self::Sales
        )
    }

    /// Whether the report needs the campaigns' costs or bids (ROAS, spend).
    pub const fn needs_costs(self) -> bool {
        match self {
            Self::Sales | Self::Campaigns => true,
            Self::VideoFunnel | Self::Products | Self::Ads | Self::Carts | Self::CartCampaigns => {
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ReportKind;

    #[test]
    fn paths_are_distinct_reports_paths() {
        let mut paths: Vec<&str> = ReportKind::ALL.iter().map(|k| k.path()).collect();
        assert!(paths.iter().all(|p| p.starts_with("/v1/reports/")));
        paths.sort_unstable();
        paths.dedup();
        assert_eq!(paths.len(), ReportKind::ALL.len());
    }
}
