//! The read side (the api's step 8): one trait with a method per stored report, and
//! the reports every backend derives the same way from what it read (sales,
//! campaign sales, the campaign summary).

use std::future::Future;

use crate::model::ads::AdReportRow;
use crate::model::attribution::{self, OrderLine, SalesReportRow, Touch, Windows};
use crate::model::campaigns::{
    self, CampaignParts, CampaignReportRow, CampaignSalesRow, CartAddsRow,
};
use crate::model::carts::lines::{CartLine, LinePlace};
use crate::model::carts::{self, CartCampaignRow, CartEventRow, CartStateRow};
use crate::model::funnel::FunnelReportRow;
use crate::model::products::ProductReportRow;
use crate::model::tallies::{SummedTally, TallyQuery};
use crate::{Backend, ReportFilter, StoreError};

/// The read side of a report store: what the api calls.
pub trait ReportStore: Backend {
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

    /// The carts report's lines (filtered by the campaign, ad, catalog and day of
    /// each line's latest event, [`crate::model::carts::lines::selects`]) in place order, from place
    /// `from` on (inclusive), at most `limit` of them ([`crate::model::carts::lines::page`]): a page by key
    /// costs its lines.
    fn cart_lines(
        &self,
        f: &ReportFilter,
        from: Option<&LinePlace>,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<CartLine>, StoreError>> + Send;

    /// Cart states, every line of the report ([`Self::cart_lines`] whole).
    fn carts(
        &self,
        f: &ReportFilter,
    ) -> impl Future<Output = Result<Vec<CartStateRow>, StoreError>> + Send {
        async move {
            let lines = self.cart_lines(f, None, usize::MAX).await?;
            Ok(lines.iter().map(CartLine::state).collect())
        }
    }

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

    /// The tallies `q` wants, summed over partitions, in place and metric order (a
    /// tally that sums to 0 may be left out: a reader takes a missing one as 0);
    /// `None` while the store's earlier facts are not counted yet (the aggregator's
    /// first start on it has not finished the backfill: read the facts instead).
    fn tallies(
        &self,
        q: &TallyQuery,
    ) -> impl Future<Output = Result<Option<Vec<SummedTally>>, StoreError>> + Send;

    /// Sales per credited campaign, catalog, product and order day, attributed with
    /// windows `w` (see [`sales_rows`] for the filter).
    fn sales(
        &self,
        f: &ReportFilter,
        w: &Windows,
    ) -> impl Future<Output = Result<Vec<SalesReportRow>, StoreError>> + Send;

    /// Whether a tally query over a whole range of quarter hours, grouped by period,
    /// reads a row per place and closed day rather than one per quarter (ClickHouse,
    /// once its closed quarters are kept by day): a report in a zone then reads its
    /// quarters at once instead of whole days, hours and quarters apart
    /// ([`crate::sums`]).
    fn quarters_by_day(&self) -> impl Future<Output = Result<bool, StoreError>> + Send {
        async { Ok(false) }
    }
}

/// Billable ad clicks per campaign and UTC day of `campaigns` (every campaign when
/// `None`), read from the tallies (what spend reads); `None` before the store's
/// earlier facts are counted.
pub async fn billable_clicks<S: ReportStore + ?Sized>(
    store: &S,
    campaigns: Option<std::collections::BTreeSet<String>>,
) -> Result<Option<Vec<crate::model::tallies::DayTally>>, StoreError> {
    Ok(store
        .tallies(&TallyQuery::spend(campaigns))
        .await?
        .map(|s| crate::model::tallies::billable_clicks(&s)))
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
    let kept = f.lines_in(lines);
    let touches = tenant_touches(touches, f);
    attribution::sales_report(&kept, &touches, w, |campaign, ad| {
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
    let kept = f.lines_in(lines);
    let touches = tenant_touches(touches, f);
    attribution::campaign_sales(&kept, &touches, w, |campaign| {
        f.campaign_id.as_deref().is_none_or(|c| c == campaign)
    })
}

/// The touches that may credit the filter's tenant's lines: those of its campaigns
/// (all touches without a tenant). Filtered before attribution, so a tenant's order
/// goes to its own last touch, never to nobody because another's touch came later.
fn tenant_touches<'a>(touches: &'a [Touch], f: &ReportFilter) -> std::borrow::Cow<'a, [Touch]> {
    if f.tenant.is_none() {
        return std::borrow::Cow::Borrowed(touches);
    }
    std::borrow::Cow::Owned(
        touches
            .iter()
            .filter(|t| f.allows_campaign(&t.campaign_id))
            .cloned()
            .collect(),
    )
}

/// Carts per campaign and product from cart event rows (both stores call this), kept
/// by the filter's campaign; the rows are already narrowed to its catalog and days.
pub fn cart_campaign_rows(rows: &[CartEventRow], f: &ReportFilter) -> Vec<CartCampaignRow> {
    carts::campaign_rollup(rows)
        .into_iter()
        .filter(|r| {
            f.allows_campaign(&r.campaign_id)
                && f.campaign_id.as_deref().is_none_or(|c| c == r.campaign_id)
        })
        .collect()
}

/// The campaign summary (`GET /v1/reports/campaigns`) from any store: its parts are
/// the store's reports for the filter's campaign and days (ad and catalog are not
/// filters of this report and are ignored), `max_bid` gives each campaign's bid per
/// click for spend (see [`campaigns::report`]).
pub async fn campaign_report<S: ReportStore + ?Sized>(
    store: &S,
    f: &ReportFilter,
    w: &Windows,
    max_bid: impl Fn(&str) -> Option<rm_schemas::money::Money>,
) -> Result<Vec<CampaignReportRow>, StoreError> {
    let f = f.campaign_wide();
    let parts = CampaignParts {
        ads: store.ads(&f).await?,
        funnel: store.funnel(&f).await?,
        products: store.products(&f).await?,
        cart_adds: store.cart_adds(&f).await?,
        sales: store.campaign_sales(&f, w).await?,
    };
    Ok(campaigns::report(&parts, max_bid))
}
