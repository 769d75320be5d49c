//! The api's side of the ads (`rm_ads`): what the ads index is rebuilt from, read
//! from the api's state (campaigns, catalogs) and the report store (billable clicks:
//! the tallies the aggregator keeps per campaign and day, or the ads report while a
//! store written before tallies is not yet counted into them), and the decoding of the
//! `POST /v1/ads/generate` body. Decisioning itself, the campaign and catalog model
//! and the served answer are `rm_ads`'s; this module adds no rule of its own.

use std::sync::Arc;

use rm_ads::model::campaign::BannerXCampaign;
use rm_ads::model::catalog::Product;
use rm_ads::DayClicks;
use rm_store::model::format_day;
use rm_store::model::traffic::ClickWindow;
use rm_store::{AnyStore, ReportFilter, ReportStore, StoreError};

use crate::state::{State, StateError};

/// The index's inputs as this api reads them.
pub struct ApiInputs<'a> {
    /// Campaigns and catalogs.
    pub state: &'a State,
    /// The ads report, for spend.
    pub store: &'a AnyStore,
    /// The click window spend is counted with (the reports').
    pub click_window: ClickWindow,
}

/// Why an input could not be read.
#[derive(Debug, thiserror::Error)]
pub enum InputsError {
    /// The api's state failed.
    #[error(transparent)]
    State(#[from] StateError),
    /// The report store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl rm_ads::Inputs for ApiInputs<'_> {
    type Error = InputsError;

    async fn products(&self) -> Result<Vec<Product>, InputsError> {
        Ok(self.state.products().await?)
    }

    async fn campaigns_if_changed(
        &self,
        known: Option<u64>,
    ) -> Result<(u64, Option<Vec<BannerXCampaign>>), InputsError> {
        Ok(self.state.campaigns_if_changed(known).await?)
    }

    async fn billable_clicks(
        &self,
        campaign_ids: Vec<String>,
    ) -> Result<Vec<DayClicks>, InputsError> {
        // The tallies: one sum per campaign and day, decided as the clicks arrived.
        let wanted: std::collections::BTreeSet<String> = campaign_ids.iter().cloned().collect();
        if let Some(tallies) = rm_store::billable_clicks(self.store, Some(wanted)).await? {
            return Ok(tallies
                .into_iter()
                .map(|t| DayClicks {
                    campaign_id: t.campaign_id,
                    day: format_day(t.day),
                    clicks: u64::try_from(t.value).unwrap_or(0),
                })
                .collect());
        }
        // A store whose earlier clicks are not counted yet (the aggregator's first
        // start on it): the ads report of those campaigns.
        let narrow = ReportFilter {
            tenant: Some(rm_store::Tenant {
                namespace: String::new(),
                campaigns: Arc::new(campaign_ids.into_iter().collect()),
            }),
            click_window: self.click_window,
            ..ReportFilter::default()
        };
        let rows = self.store.ads(&narrow).await?;
        Ok(rows
            .into_iter()
            .map(|r| DayClicks {
                campaign_id: r.campaign_id,
                day: r.day,
                clicks: r.clicks,
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use crate::error::{parse_json, ApiError};
    use rm_ads::request::{Decided, FilterMode};
    use rm_ads::AdsRequest;

    fn req(v: serde_json::Value) -> Result<Decided, ApiError> {
        Ok(parse_json::<AdsRequest>(&serde_json::to_vec(&v).unwrap())?.validate()?)
    }

    #[test]
    fn validation_names_the_member() {
        let ok = serde_json::json!({"sessionId": "s", "placement": "category", "catalogId": "c"});
        let d = req(ok.clone()).unwrap();
        assert_eq!(
            (d.tracking_param, d.max_ads, d.mode),
            ("sessionId", 10, FilterMode::OrAnd)
        );
        let field = |v: serde_json::Value| match req(v) {
            Err(ApiError::InvalidArgument { field, .. }) => field,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            field(serde_json::json!({"placement": "category", "catalogId": "c"})),
            "customerId"
        );
        assert_eq!(
            field(serde_json::json!({"sessionId": "s", "catalogId": "c"})),
            "placement"
        );
        assert_eq!(
            field(serde_json::json!({"sessionId": "s", "placement": "p"})),
            "catalogId"
        );
        let mut bad = ok.clone();
        bad["productFilters"] = serde_json::json!([["brand:x"]]);
        assert_eq!(field(bad), "productFilters[0][0]");
        let mut bad = ok.clone();
        bad["maxNumberOfAds"] = serde_json::json!(0);
        assert_eq!(field(bad), "maxNumberOfAds");
        let mut bad = ok.clone();
        bad["options"] = serde_json::json!({"filterMode": "XorNot"});
        assert_eq!(field(bad), "options.filterMode");
        let mut bad = ok;
        bad["maxNumberOfAds"] = serde_json::json!("five");
        assert_eq!(field(bad), "maxNumberOfAds");
    }
}
