//! The read side: one file per report family.

mod ads;
mod cart_pages;

pub(crate) use cart_pages::SLICED_DAY_ROWS;
mod carts;
mod funnel;
mod products;
mod sales;

use super::ClickHouseStore;
use crate::model::ads::AdReportRow;
use crate::model::attribution::{SalesReportRow, Windows};
use crate::model::campaigns::{CampaignSalesRow, CartAddsRow};
use crate::model::carts::lines::{CartLine, LinePlace};
use crate::model::carts::CartCampaignRow;
use crate::model::funnel::FunnelReportRow;
use crate::model::products::ProductReportRow;
use crate::model::tallies::{SummedTally, TallyQuery};
use crate::read::ReportStore;
use crate::{ReportFilter, StoreError};

impl ReportStore for ClickHouseStore {
    async fn funnel(&self, f: &ReportFilter) -> Result<Vec<FunnelReportRow>, StoreError> {
        self.op("funnel report", self.funnel_report(f)).await
    }

    async fn products(&self, f: &ReportFilter) -> Result<Vec<ProductReportRow>, StoreError> {
        self.op("product report", self.product_report(f)).await
    }

    async fn cart_lines(
        &self,
        f: &ReportFilter,
        from: Option<&LinePlace>,
        limit: usize,
    ) -> Result<Vec<CartLine>, StoreError> {
        self.op("cart report", self.cart_lines_page(f, from, limit))
            .await
    }

    async fn cart_campaigns(&self, f: &ReportFilter) -> Result<Vec<CartCampaignRow>, StoreError> {
        self.op("cart campaign report", self.cart_campaign_report(f))
            .await
    }

    async fn ads(&self, f: &ReportFilter) -> Result<Vec<AdReportRow>, StoreError> {
        self.op("ad report", self.ad_report(f)).await
    }

    async fn cart_adds(&self, f: &ReportFilter) -> Result<Vec<CartAddsRow>, StoreError> {
        self.op("cart adds report", self.cart_adds_report(f)).await
    }

    async fn campaign_sales(
        &self,
        f: &ReportFilter,
        w: &Windows,
    ) -> Result<Vec<CampaignSalesRow>, StoreError> {
        self.op("campaign sales report", self.campaign_sales_report(f, w))
            .await
    }

    async fn sales(
        &self,
        f: &ReportFilter,
        w: &Windows,
    ) -> Result<Vec<SalesReportRow>, StoreError> {
        self.op("sales report", self.sales_report(f, w)).await
    }

    async fn tallies(&self, q: &TallyQuery) -> Result<Option<Vec<SummedTally>>, StoreError> {
        self.op("tallies", self.read_tallies(q)).await
    }

    async fn quarters_by_day(&self) -> Result<bool, StoreError> {
        let snapshot = self.op("tallies", self.snapshot()).await?;
        Ok(snapshot.is_some_and(|s| s.days))
    }
}
