//! The report store (step 7): where the aggregator writes and where reports are read.
//!
//! Two implementations pass one shared test suite: [`embedded::EmbeddedStore`] (redb,
//! the default) and [`clickhouse::ClickHouseStore`] (production). A write carries
//! complete fact sets and rows derived from them (see [`crate::batch`]), so every
//! write is idempotent: writing a batch again after a crash or a retry changes nothing.
//! Reports are read from the store only, never from the log.

pub mod clickhouse;
pub mod embedded;

use std::collections::HashSet;
use std::future::Future;

use serde::Deserialize;

use crate::aggregate::ads::AdReportRow;
use crate::aggregate::attribution::{self, OrderLine, SalesReportRow, Touch, Windows};
use crate::aggregate::campaigns::{
    self, CampaignParts, CampaignReportRow, CampaignSalesRow, CartAddsRow,
};
use crate::aggregate::carts::{CartCampaignRow, CartKey, CartStateRow};
use crate::aggregate::funnel::{FunnelReportRow, ViewKey};
use crate::aggregate::products::ProductReportRow;
use crate::batch::{BatchWrite, EntitySets, FastSet};

/// Errors of a store.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// The store is unreachable or failed; the write may be retried.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// The store refused the request for good (bad schema, bad data).
    #[error("store refused the request: {0}")]
    Refused(String),
}

impl StoreError {
    /// True when a retry may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Unavailable(_))
    }
}

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
}

/// A report store.
pub trait Store: Send + Sync + 'static {
    /// The current fact sets of these entities (absent ones are left out).
    fn load(
        &self,
        views: &FastSet<ViewKey>,
        carts: &FastSet<CartKey>,
    ) -> impl Future<Output = Result<EntitySets, StoreError>> + Send;

    /// Writes a batch durably (idempotent).
    fn write(&self, batch: &BatchWrite) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// The part of a write that needs no earlier write to have finished (encoding),
    /// done by the pipeline on its fold stage while the previous batch is written.
    fn prepare(&self, batch: BatchWrite) -> PreparedWrite {
        PreparedWrite {
            batch,
            embedded: None,
        }
    }

    /// Writes a prepared batch durably (idempotent; may be retried).
    fn write_prepared(
        &self,
        w: &PreparedWrite,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        self.write(&w.batch)
    }

    /// Video funnel report.
    fn funnel(
        &self,
        f: &ReportFilter,
    ) -> impl Future<Output = Result<Vec<FunnelReportRow>, StoreError>> + Send;

    /// Product performance report.
    fn products(
        &self,
        f: &ReportFilter,
    ) -> impl Future<Output = Result<Vec<ProductReportRow>, StoreError>> + Send;

    /// Cart states (filtered by the campaign, ad and day of each cart's latest event).
    fn carts(
        &self,
        f: &ReportFilter,
    ) -> impl Future<Output = Result<Vec<CartStateRow>, StoreError>> + Send;

    /// Carts per campaign and product.
    fn cart_campaigns(
        &self,
        f: &ReportFilter,
    ) -> impl Future<Output = Result<Vec<CartCampaignRow>, StoreError>> + Send;

    /// Ad-level impressions and clicks per campaign, ad and day (filter: campaign,
    /// ad, days; the day of a fact is that of its earliest copy).
    fn ads(
        &self,
        f: &ReportFilter,
    ) -> impl Future<Output = Result<Vec<AdReportRow>, StoreError>> + Send;

    /// Cart adds per campaign and day of the add (filter: campaign, catalog, days).
    fn cart_adds(
        &self,
        f: &ReportFilter,
    ) -> impl Future<Output = Result<Vec<CartAddsRow>, StoreError>> + Send;

    /// Attributed sales per credited campaign and order day (filter: campaign,
    /// catalog, days; see [`campaign_sales_rows`]).
    fn campaign_sales(
        &self,
        f: &ReportFilter,
        w: &Windows,
    ) -> impl Future<Output = Result<Vec<CampaignSalesRow>, StoreError>> + Send;

    /// Which of these order ids the store holds.
    fn known_orders(
        &self,
        ids: &HashSet<String>,
    ) -> impl Future<Output = Result<HashSet<String>, StoreError>> + Send;

    /// Sales per credited campaign, catalog, product and order day, attributed with
    /// windows `w` (see [`sales_rows`] for the filter).
    fn sales(
        &self,
        f: &ReportFilter,
        w: &Windows,
    ) -> impl Future<Output = Result<Vec<SalesReportRow>, StoreError>> + Send;

    /// `Ok` when the store can take writes, else why not.
    fn readiness(&self) -> Result<(), String>;
}

/// True when the filter's catalog and days select this order line (by the order's
/// day).
pub fn selects_line(f: &ReportFilter, l: &OrderLine) -> bool {
    let day = l.day();
    f.catalog_id.as_deref().is_none_or(|c| c == l.catalog_id)
        && f.from_day.is_none_or(|d| day >= d)
        && f.to_day.is_none_or(|d| day <= d)
}

/// The order lines the filter selects ([`selects_line`]).
fn lines_in(lines: &[OrderLine], f: &ReportFilter) -> Vec<OrderLine> {
    lines
        .iter()
        .filter(|l| selects_line(f, l))
        .cloned()
        .collect()
}

/// The sales report from stored order lines and touches (both stores call this).
/// The filter's days and catalog select order lines (by the order's day and
/// catalog); its campaign and ad select the credited campaign and ad, "" for
/// unattributed lines, which are reported under the empty campaign id. `lines` and
/// `touches` may hold more than needed: lines outside the filter are left out here.
pub fn sales_rows(
    lines: &[OrderLine],
    touches: &[Touch],
    f: &ReportFilter,
    w: &Windows,
) -> Vec<SalesReportRow> {
    let kept = lines_in(lines, f);
    attribution::sales_report(&kept, touches, w, |campaign, ad| {
        f.campaign_id.as_deref().is_none_or(|c| c == campaign)
            && f.ad_id.as_deref().is_none_or(|a| a == ad)
    })
}

/// Attributed sales per campaign and day from stored order lines and touches (both
/// stores call this): lines selected by the filter's days and catalog, credited
/// campaigns by its campaign; unattributed lines are left out.
pub fn campaign_sales_rows(
    lines: &[OrderLine],
    touches: &[Touch],
    f: &ReportFilter,
    w: &Windows,
) -> Vec<CampaignSalesRow> {
    let kept = lines_in(lines, f);
    attribution::campaign_sales(&kept, touches, w, |campaign| {
        f.campaign_id.as_deref().is_none_or(|c| c == campaign)
    })
}

/// The campaign summary (`GET /v1/reports/campaigns`) from any store: its parts are
/// the store's reports for the filter's campaign and days (ad and catalog are not
/// filters of this report and are ignored), `max_bid` gives each campaign's bid per
/// click for spend (see [`campaigns::report`]).
pub async fn campaign_report<S: Store + ?Sized>(
    store: &S,
    f: &ReportFilter,
    w: &Windows,
    max_bid: impl Fn(&str) -> Option<f64>,
) -> Result<Vec<CampaignReportRow>, StoreError> {
    let f = ReportFilter {
        ad_id: None,
        catalog_id: None,
        ..f.clone()
    };
    let parts = CampaignParts {
        ads: store.ads(&f).await?,
        funnel: store.funnel(&f).await?,
        products: store.products(&f).await?,
        cart_adds: store.cart_adds(&f).await?,
        sales: store.campaign_sales(&f, w).await?,
    };
    Ok(campaigns::report(&parts, max_bid))
}

/// A batch ready for [`Store::write_prepared`]: the batch and what the store made of
/// it ahead of time.
#[derive(Debug)]
pub struct PreparedWrite {
    /// The batch.
    pub batch: BatchWrite,
    /// The embedded store's encoded rows.
    pub embedded: Option<std::sync::Arc<embedded::Encoded>>,
}

/// The store a deployment uses, chosen by configuration.
pub enum AnyStore {
    /// ClickHouse.
    ClickHouse(clickhouse::ClickHouseStore),
    /// The embedded store.
    Embedded(embedded::EmbeddedStore),
}

macro_rules! dispatch {
    ($self:ident, $s:ident => $e:expr) => {
        match $self {
            AnyStore::ClickHouse($s) => $e,
            AnyStore::Embedded($s) => $e,
        }
    };
}

impl Store for AnyStore {
    async fn load(
        &self,
        views: &FastSet<ViewKey>,
        carts: &FastSet<CartKey>,
    ) -> Result<EntitySets, StoreError> {
        dispatch!(self, s => s.load(views, carts).await)
    }
    async fn write(&self, batch: &BatchWrite) -> Result<(), StoreError> {
        dispatch!(self, s => s.write(batch).await)
    }
    fn prepare(&self, batch: BatchWrite) -> PreparedWrite {
        dispatch!(self, s => s.prepare(batch))
    }
    async fn write_prepared(&self, w: &PreparedWrite) -> Result<(), StoreError> {
        dispatch!(self, s => s.write_prepared(w).await)
    }
    async fn funnel(&self, f: &ReportFilter) -> Result<Vec<FunnelReportRow>, StoreError> {
        dispatch!(self, s => s.funnel(f).await)
    }
    async fn products(&self, f: &ReportFilter) -> Result<Vec<ProductReportRow>, StoreError> {
        dispatch!(self, s => s.products(f).await)
    }
    async fn carts(&self, f: &ReportFilter) -> Result<Vec<CartStateRow>, StoreError> {
        dispatch!(self, s => s.carts(f).await)
    }
    async fn cart_campaigns(&self, f: &ReportFilter) -> Result<Vec<CartCampaignRow>, StoreError> {
        dispatch!(self, s => s.cart_campaigns(f).await)
    }
    async fn ads(&self, f: &ReportFilter) -> Result<Vec<AdReportRow>, StoreError> {
        dispatch!(self, s => s.ads(f).await)
    }
    async fn cart_adds(&self, f: &ReportFilter) -> Result<Vec<CartAddsRow>, StoreError> {
        dispatch!(self, s => s.cart_adds(f).await)
    }
    async fn campaign_sales(
        &self,
        f: &ReportFilter,
        w: &Windows,
    ) -> Result<Vec<CampaignSalesRow>, StoreError> {
        dispatch!(self, s => s.campaign_sales(f, w).await)
    }
    async fn known_orders(&self, ids: &HashSet<String>) -> Result<HashSet<String>, StoreError> {
        dispatch!(self, s => s.known_orders(ids).await)
    }
    async fn sales(
        &self,
        f: &ReportFilter,
        w: &Windows,
    ) -> Result<Vec<SalesReportRow>, StoreError> {
        dispatch!(self, s => s.sales(f, w).await)
    }
    fn readiness(&self) -> Result<(), String> {
        dispatch!(self, s => s.readiness())
    }
}

impl AnyStore {
    /// Short backend name.
    pub fn backend(&self) -> &'static str {
        match self {
            Self::ClickHouse(_) => "clickhouse",
            Self::Embedded(_) => "embedded",
        }
    }
}
