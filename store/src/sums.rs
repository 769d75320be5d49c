//! The reports that read sums (issue 26): products, ads, the video funnel, sales,
//! carts per campaign and the campaign summary from the tallies
//! ([`crate::model::tallies`]), for any backend, in any IANA time zone and granularity
//! ([`Periods`]). A drill-down by served ad id reads the
//! stored facts (the caller bounds its range). Before a store's earlier facts are
//! counted (the aggregator's first start on a store of an earlier version) these
//! reports are unavailable (a 503 to retry), never answered from half the counts.

use std::collections::{BTreeSet, HashMap};

use crate::model::attribution::{SalesReportRow, Windows};
use crate::model::campaigns::{self, CampaignParts, CampaignReportRow};
use crate::model::carts::CartCampaignRow;
use crate::model::funnel::FunnelReportRow;
use crate::model::periods::Periods;
use crate::model::rollup::{self, AdRow, ProductRow};
use crate::model::tallies::{Kind, Scope, SummedTally, TallyQuery};
use crate::{ReportFilter, ReportStore, StoreError};

/// The campaigns a filter reads (`None`: every campaign).
fn campaigns(f: &ReportFilter) -> Option<BTreeSet<String>> {
    match (&f.campaign_id, &f.tenant) {
        (Some(c), _) if f.allows_campaign(c) => Some([c.clone()].into_iter().collect()),
        (Some(_), _) => Some(BTreeSet::new()),
        (None, Some(t)) => Some(t.campaigns.iter().cloned().collect()),
        (None, None) => None,
    }
}

/// The sales report: rows per credited campaign ("" unattributed), catalog, product,
/// UTC day of the order and currency, from the sales tallies (attributed as orders
/// arrived, with the aggregator's windows); or, with the filter's `adId`, attributed
/// from the stored orders and touches of the filter's days with windows `w`.
pub async fn sales_report<S: ReportStore + ?Sized>(
    store: &S,
    f: &ReportFilter,
    w: &Windows,
) -> Result<Vec<SalesReportRow>, StoreError> {
    if f.ad_id.is_some() {
        return store.sales(f, w).await;
    }
    // Unattributed sales are kept under the campaign "", per namespace (the place's
    // catalog is scoped by the order's namespace).
    let campaigns = match f.campaign_id.as_deref() {
        Some("") => Some([String::new()].into_iter().collect()),
        Some(_) => campaigns(f),
        None => campaigns(f).map(|mut c| {
            c.insert(String::new());
            c
        }),
    };
    let summed = read_days(
        store,
        f,
        campaigns,
        Scope::Sales,
        "orders are being attributed",
    )
    .await?;
    Ok(crate::model::tallies::sales::report_rows(&summed, |p| {
        let (ns, catalog) = rm_schemas::namespace::split(&p.catalog_id);
        f.catalog_id.as_deref().is_none_or(|c| c == catalog)
            && f.tenant.as_ref().is_none_or(|t| t.namespace == ns)
    }))
}

/// Carts per campaign, catalog and product over the filter's UTC days, from the cart
/// lines' tallies ([`crate::model::tallies::carts`]; the filter's ad does not apply
/// to this report).
pub async fn cart_campaign_report<S: ReportStore + ?Sized>(
    store: &S,
    f: &ReportFilter,
) -> Result<Vec<CartCampaignRow>, StoreError> {
    let lines = "cart lines are being counted";
    let summed = read_days(store, f, campaigns(f), Scope::CartProduct, lines).await?;
    Ok(crate::model::tallies::carts::campaign_rows(&summed, |p| {
        f.selects_cart_catalog(&p.catalog_id) && f.allows_campaign(&p.campaign_id)
    }))
}

/// Every tally of `scope` of `campaigns` on the filter's UTC days; unavailable (what
/// is `being` done) before the store's backfill of them.
async fn read_days<S: ReportStore + ?Sized>(
    store: &S,
    f: &ReportFilter,
    campaigns: Option<BTreeSet<String>>,
    scope: Scope,
    being: &str,
) -> Result<Vec<SummedTally>, StoreError> {
    let q = TallyQuery {
        campaigns,
        scope,
        grain: crate::model::tallies::Grain::Day,
        from: f.from_day.unwrap_or(i32::MIN),
        to: f.to_day.unwrap_or(i32::MAX),
        kinds: Vec::new(),
        catalog_id: None,
    };
    store.tallies(&q).await?.ok_or_else(|| {
        StoreError::Unavailable(format!(
            "the report store's earlier {being} into its rollups (the aggregator's first \
             start on a store of an earlier version); try again shortly"
        ))
    })
}

/// The tallies of `scope` and `kinds` a report of `f` over `periods` reads.
async fn read<S: ReportStore + ?Sized>(
    store: &S,
    f: &ReportFilter,
    periods: &Periods,
    scope: Scope,
    kinds: &[Kind],
) -> Result<Vec<SummedTally>, StoreError> {
    let (grain, from, to) = periods.plan();
    let q = TallyQuery {
        campaigns: campaigns(f),
        scope,
        grain,
        from,
        to,
        kinds: kinds.to_vec(),
        catalog_id: f.catalog_id.clone().filter(|_| scope == Scope::Product),
    };
    store.tallies(&q).await?.ok_or_else(|| {
        StoreError::Unavailable(
            "the report store's earlier events are being counted into its rollups \
             (the aggregator's first start on a store of an earlier version); try again shortly"
                .into(),
        )
    })
}

/// The products report: rows per campaign, creative, catalog, product and period; or,
/// with the filter's `adId`, the stored facts' rows of that served ad per UTC day.
pub async fn product_report<S: ReportStore + ?Sized>(
    store: &S,
    f: &ReportFilter,
    periods: &Periods,
) -> Result<Vec<ProductRow>, StoreError> {
    if f.ad_id.is_some() {
        let rows = store.products(f).await?;
        return Ok(rows.into_iter().map(ProductRow::served).collect());
    }
    let kinds = [Kind::ProductImpression, Kind::ProductClick];
    let summed = read(store, f, periods, Scope::Product, &kinds).await?;
    Ok(rollup::product_rows(&summed, periods))
}

/// The ads report: rows per campaign, creative and period; or, with the filter's
/// `adId`, the stored facts' rows of that served ad per UTC day.
pub async fn ad_report<S: ReportStore + ?Sized>(
    store: &S,
    f: &ReportFilter,
    periods: &Periods,
) -> Result<Vec<AdRow>, StoreError> {
    if f.ad_id.is_some() {
        let rows = store.ads(f).await?;
        return Ok(rows.into_iter().map(AdRow::served).collect());
    }
    let kinds = [Kind::AdImpression, Kind::AdClick];
    let summed = read(store, f, periods, Scope::Creative, &kinds).await?;
    Ok(rollup::ad_rows(&summed, periods))
}

/// The video funnel: rows per campaign, creative (the video id) and period (UTC days,
/// weeks, months or the whole range: views are kept per UTC day), each with its
/// creative's billable ad impressions; or, with the filter's `adId`, the stored
/// views' rows of that served ad per UTC day.
pub async fn funnel_report<S: ReportStore + ?Sized>(
    store: &S,
    f: &ReportFilter,
    periods: &Periods,
) -> Result<Vec<FunnelReportRow>, StoreError> {
    if f.ad_id.is_some() {
        return store.funnel(f).await;
    }
    let views = read(store, f, periods, Scope::Video, &[]).await?;
    let mut rows = rollup::funnel_rows(&views, periods);
    let ads = read(store, f, periods, Scope::Creative, &[Kind::AdImpression]).await?;
    let impressions: HashMap<(String, String, String), u64> = rollup::ad_rows(&ads, periods)
        .into_iter()
        .map(|r| ((r.campaign_id, r.creative_id, r.day), r.impressions))
        .collect();
    for r in &mut rows {
        let k = (r.campaign_id.clone(), r.video_id.clone(), r.day.clone());
        r.impressions = impressions.get(&k).copied().unwrap_or(0);
    }
    Ok(rows)
}

/// The campaign summary per campaign and period (UTC: its sales are kept per UTC
/// day of the order, then put in their periods).
/// `max_bid` gives each campaign's bid per click for spend ([`campaigns::report`]).
pub async fn campaign_summary<S: ReportStore + ?Sized>(
    store: &S,
    f: &ReportFilter,
    periods: &Periods,
    max_bid: impl Fn(&str) -> Option<rm_schemas::money::Money>,
) -> Result<Vec<CampaignReportRow>, StoreError> {
    let f = f.campaign_wide();
    let summed = read(store, &f, periods, Scope::Campaign, &[]).await?;
    let (ads, products) = rollup::campaign_parts(&summed, periods);
    // A UTC day's label in its period.
    let relabel = |day: &mut String| {
        if let Some(d) = crate::model::parse_day(day) {
            let start = crate::model::tallies::Grain::Day.start_ms(d);
            if let Some(p) = periods.period_of(start) {
                *day = periods.label(p).day;
            }
        }
    };
    let sales = read(store, &f, periods, Scope::CampaignSales, &[]).await?;
    let mut parts = CampaignParts {
        ads,
        products,
        funnel: rollup::funnel_rows(&summed, periods),
        cart_adds: rollup::cart_adds_rows(&summed, periods),
        sales: crate::model::tallies::sales::campaign_rows(&sales),
    };
    parts.sales.iter_mut().for_each(|r| relabel(&mut r.day));
    Ok(campaigns::report(&parts, max_bid))
}
