//! The reports that read sums (issue 26): products, ads, the video funnel, sales,
//! carts per campaign and the campaign summary from the tallies
//! ([`crate::model::tallies`]), for any backend, in any IANA time zone and granularity
//! ([`Periods`]). A drill-down by served ad id reads the
//! stored facts (the caller bounds its range). Before a store's earlier facts are
//! counted (the aggregator's first start on a store of an earlier version) these
//! reports are unavailable (a 503 to retry), never answered from half the counts.
//!
//! The products, ads and video funnel reports are read whole or a page at a time
//! ([`PageAt`]): a page reads the tallies of its places only
//! ([`crate::model::tallies::page`]) and says where the next starts ([`Page`]).
//! A report that reads two scopes reads them at once.

use std::collections::{BTreeSet, HashMap};

use crate::model::attribution::{SalesReportRow, Windows};
use crate::model::campaigns::{self, CampaignParts, CampaignReportRow};
use crate::model::carts::lines::{CartLine, LinePlace};
use crate::model::carts::{CartCampaignRow, CartStateRow};
use crate::model::funnel::FunnelReportRow;
use crate::model::periods::{Mixed, Periods};
use crate::model::rollup::{self, AdRow, ProductRow};
use crate::model::tallies::page::{self, PageCursor, PageRead, PlaceKey, PlacePage};
use crate::model::tallies::{Grain, Group, Kind, Scope, SummedTally, TallyQuery};
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

/// The sales report: rows per credited campaign ("" unattributed), currency,
/// catalog, product and UTC day of the order, from the sales tallies (attributed as
/// orders arrived, with the aggregator's windows); or, with the filter's `adId`,
/// attributed from the stored orders and touches of the filter's days with windows
/// `w`.
pub async fn sales_report<S: ReportStore + ?Sized>(
    store: &S,
    f: &ReportFilter,
    w: &Windows,
) -> Result<Vec<SalesReportRow>, StoreError> {
    if f.ad_id.is_some() {
        return store.sales(f, w).await;
    }
    Ok(sales_page(store, f, None).await?.rows)
}

/// The sales report from the sales tallies, whole (`at`: `None`) or a page by key:
/// rows in place order (campaign, currency, the order's scoped catalog, product),
/// then day.
pub async fn sales_page<S: ReportStore + ?Sized>(
    store: &S,
    f: &ReportFilter,
    at: Option<PageAt<'_>>,
) -> Result<Page<SalesReportRow>, StoreError> {
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
    let keyed = |summed: &[SummedTally]| {
        crate::model::tallies::sales::keyed_rows(summed, |p| {
            let (ns, catalog) = rm_schemas::namespace::split(&p.catalog_id);
            f.catalog_id.as_deref().is_none_or(|c| c == catalog)
                && f.tenant.as_ref().is_none_or(|t| t.namespace == ns)
        })
    };
    let being = "orders are being attributed";
    let Some(at) = at else {
        let q = days_query(f, campaigns, Scope::Sales);
        let summed = fetch_being(store, &q, being).await?;
        return Ok(Page {
            rows: keyed(&summed).into_iter().map(|(_, r)| r).collect(),
            next: None,
        });
    };
    // A place's rows: one a day of the range (in each currency).
    let days = match (f.from_day, f.to_day) {
        (Some(a), Some(b)) => usize::try_from(i64::from(b) - i64::from(a) + 1).unwrap_or(1),
        _ => 1,
    };
    let round = |places: PlacePage| {
        let q = TallyQuery {
            page: Some(places),
            ..days_query(f, campaigns.clone(), Scope::Sales)
        };
        async move {
            let summed = fetch_being(store, &q, being).await?;
            let rows = keyed(&summed);
            Ok((summed, rows))
        }
    };
    let page = at.read(days, round, |(k, _)| k.clone()).await?;
    Ok(Page {
        rows: page.rows.into_iter().map(|(_, r)| r).collect(),
        next: page.next,
    })
}

/// Carts per campaign, catalog and product over the filter's UTC days, from the cart
/// lines' tallies ([`crate::model::tallies::carts`]; the filter's ad does not apply
/// to this report).
pub async fn cart_campaign_report<S: ReportStore + ?Sized>(
    store: &S,
    f: &ReportFilter,
) -> Result<Vec<CartCampaignRow>, StoreError> {
    let lines = "cart lines are being counted";
    let q = TallyQuery {
        group: Group::Whole,
        ..days_query(f, campaigns(f), Scope::CartProduct)
    };
    let summed = fetch_being(store, &q, lines).await?;
    Ok(crate::model::tallies::carts::campaign_rows(&summed, |p| {
        f.selects_cart_catalog(&p.catalog_id) && f.allows_campaign(&p.campaign_id)
    }))
}

/// A page of the carts report read by key (`cart_lines`, [`crate::model::carts::lines`]):
/// `size` lines from place `from` on (the first without it; every line of the range
/// without `size`), and the place the next page starts at.
pub async fn cart_page<S: ReportStore + ?Sized>(
    store: &S,
    f: &ReportFilter,
    from: Option<&LinePlace>,
    size: Option<usize>,
) -> Result<(Vec<CartStateRow>, Option<LinePlace>), StoreError> {
    let size = size.map(|n| n.max(1));
    // One line more than the page: the next page's first.
    let mut lines = store
        .cart_lines(f, from, size.map_or(usize::MAX, |n| n + 1))
        .await?;
    let next = match size {
        Some(n) if lines.len() > n => lines.pop().map(|l| l.place),
        _ => None,
    };
    Ok((lines.iter().map(CartLine::state).collect(), next))
}

/// The query of every tally of `scope` of `campaigns` on the filter's UTC days.
fn days_query(f: &ReportFilter, campaigns: Option<BTreeSet<String>>, scope: Scope) -> TallyQuery {
    TallyQuery {
        campaigns,
        scope,
        grain: crate::model::tallies::Grain::Day,
        from: f.from_day.unwrap_or(i32::MIN),
        to: f.to_day.unwrap_or(i32::MAX),
        kinds: Vec::new(),
        catalog_id: None,
        page: None,
        only: Vec::new(),
        group: Group::Each,
    }
}

/// The query of the tallies of `scope` and `kinds` a report of `f` over `periods`
/// reads (of the places of `page` only, when given).
fn query_of(
    f: &ReportFilter,
    periods: &Periods,
    scope: Scope,
    kinds: &[Kind],
    page: Option<&PlacePage>,
) -> TallyQuery {
    let (grain, from, to) = periods.plan();
    TallyQuery {
        campaigns: campaigns(f),
        scope,
        grain,
        from,
        to,
        kinds: kinds.to_vec(),
        catalog_id: f.catalog_id.clone().filter(|_| scope == Scope::Product),
        page: page.cloned(),
        only: Vec::new(),
        // The buckets of one period together (a zone's mixed plan, which nets buckets
        // out of the range against others, reads them apart).
        group: periods.group(),
    }
}

/// The tallies `q` reads; unavailable before the store's backfill of them.
async fn fetch<S: ReportStore + ?Sized>(
    store: &S,
    q: &TallyQuery,
) -> Result<Vec<SummedTally>, StoreError> {
    fetch_being(store, q, "events are being counted").await
}

/// The tallies `q` reads; unavailable (what is `being` done) before the store's
/// backfill of them.
async fn fetch_being<S: ReportStore + ?Sized>(
    store: &S,
    q: &TallyQuery,
    being: &str,
) -> Result<Vec<SummedTally>, StoreError> {
    store.tallies(q).await?.ok_or_else(|| unavailable(being))
}

/// A report unavailable while the store's earlier `being` into its rollups.
fn unavailable(being: &str) -> StoreError {
    StoreError::Unavailable(format!(
        "the report store's earlier {being} into its rollups (the aggregator's first \
         start on a store of an earlier version); try again shortly"
    ))
}

/// The tallies of `scope` and `kinds` a report of `f` over `periods` reads (of the
/// places of `page` only, when given). A whole report in a zone other than UTC (or
/// by hour), of a scope kept by quarter hour (all but sales and carts), reads whole
/// UTC days, the UTC hours that leave them (a scope kept by hour, once the store's
/// hours are summed) and the quarters that leave those ([`Periods::mixed`]), all at
/// once, netted into tallies per period. Before the hours' backfill (the
/// aggregator's first start on a store of an earlier version) it reads as without
/// hours.
async fn read<S: ReportStore + ?Sized>(
    store: &S,
    f: &ReportFilter,
    periods: &Periods,
    scope: Scope,
    kinds: &[Kind],
    page: Option<&PlacePage>,
) -> Result<Vec<SummedTally>, StoreError> {
    let q = query_of(f, periods, scope, kinds, page);
    if !scope.by_quarter() || page.is_some() {
        return fetch(store, &q).await;
    }
    let hours = scope.by_hour();
    let Some(mixed) = periods.mixed(hours) else {
        return fetch(store, &q).await;
    };
    // Quarters kept by day on the server: a report by day, week or summary reads
    // the whole range at once, a row per closed place-day, fewer than the plan's
    // days, hours and quarters (measured: BENCHMARKS.md). By hour, a plan that pays
    // reads UTC hours (fewer rows than a day's 25 slices); where none pays, `fetch`
    // above reads the arrays (`Group::spans_hours`).
    if q.grain == Grain::Quarter && q.group.spans_days() && store.quarters_by_day().await? {
        return fetch(store, &q).await;
    }
    // Boxed: three reads at once, twice, would make every report's future (held on
    // its task's stack while polled) several times larger.
    if let Some(read) = Box::pin(read_mixed(store, periods, &q, &mixed)).await? {
        return Ok(read);
    }
    if !hours {
        return Err(unavailable("events are being counted"));
    }
    // The hours not summed yet: the plan without them.
    match periods.mixed(false) {
        Some(mixed) => Box::pin(read_mixed(store, periods, &q, &mixed))
            .await?
            .ok_or_else(|| unavailable("events are being counted")),
        None => fetch(store, &q).await,
    }
}

/// The reads of a mixed plan (`q` with the plan's grains and buckets), netted;
/// `None` when one of them is not counted yet (the store has not backfilled it).
async fn read_mixed<S: ReportStore + ?Sized>(
    store: &S,
    periods: &Periods,
    q: &TallyQuery,
    mixed: &Mixed,
) -> Result<Option<Vec<SummedTally>>, StoreError> {
    let of = |grain: Grain, only: Vec<(i32, i32)>| -> Option<TallyQuery> {
        let from = only.iter().map(|r| r.0).min()?;
        let to = only.iter().map(|r| r.1).max()?;
        // Ranges out of the report's own (a day's quarters after its end, read to be
        // taken from it) are read too.
        Some(TallyQuery {
            grain,
            from,
            to,
            only,
            group: Group::Each,
            ..q.clone()
        })
    };
    let queries = [
        mixed
            .day_span()
            .and_then(|(a, b)| of(Grain::Day, vec![(a, b)])),
        of(Grain::Hour, mixed.hour_ranges()),
        of(Grain::Quarter, mixed.quarters.clone()),
    ];
    let read = |q: Option<TallyQuery>| async move {
        match q {
            Some(q) => store.tallies(&q).await,
            None => Ok(Some(Vec::new())),
        }
    };
    let [d, h, qq] = queries;
    let (days, hours, quarters) =
        futures_util::future::try_join3(read(d), read(h), read(qq)).await?;
    let (Some(days), Some(hours), Some(quarters)) = (days, hours, quarters) else {
        return Ok(None);
    };
    Ok(Some(periods.net(mixed, &days, &hours, &quarters)))
}

/// A page of a report read by key ([`crate::model::tallies::page`]): its rows and
/// where the next page starts (`None` on the last).
#[derive(Debug, Clone, PartialEq)]
pub struct Page<R> {
    /// At most the page size's rows.
    pub rows: Vec<R>,
    /// The next page's start.
    pub next: Option<PageCursor>,
}

/// Which page: `None` is the whole report.
#[derive(Debug, Clone, Copy)]
pub struct PageAt<'a> {
    /// Where the page starts.
    pub cursor: &'a PageCursor,
    /// Most rows (at least 1).
    pub size: usize,
}

impl PageAt<'_> {
    /// Reads the page in rounds: `read` gives the tallies of some places and the
    /// rows they make. The first round asks for as many places as the page needs
    /// when each holds `per_place` rows (the report's periods), and asks again for
    /// more while the rows found fall short ([`page::first_places`],
    /// [`page::more_places`]), at most one place more than the page has rows (so a
    /// page whose places have no row still moves on). A page of a report by day
    /// reads about as many rows as it gives, not a row per period of every one of
    /// `size` places.
    async fn read<R, Fut>(
        &self,
        per_place: usize,
        read: impl Fn(PlacePage) -> Fut,
        key: impl Fn(&R) -> PlaceKey,
    ) -> Result<Page<R>, StoreError>
    where
        Fut: std::future::Future<Output = Result<(Vec<SummedTally>, Vec<R>), StoreError>>,
    {
        let (size, skip) = (self.size.max(1), self.cursor.skip);
        let mut places = PlacePage {
            from: self.cursor.place.clone(),
            places: page::first_places(size, skip, per_place),
        };
        loop {
            let (summed, rows) = read(places.clone()).await?;
            let found = page::places_in(&summed);
            match page::more_places(size, skip, places.places, found, rows.len()) {
                Some(more) => places.places = more,
                None => {
                    let read = PageRead::of(&summed, &places);
                    let (rows, next) = page::cut(rows, key, self.cursor, size, &read);
                    return Ok(Page { rows, next });
                }
            }
        }
    }
}

fn key(campaign: &str, creative: &str, catalog: &str, product: &str) -> PlaceKey {
    PlaceKey {
        campaign_id: campaign.to_owned(),
        creative: creative.to_owned(),
        catalog_id: catalog.to_owned(),
        product_code: product.to_owned(),
    }
}

/// A report of one scope's tallies (`kinds` of `scope`) of `f` over `periods`, made
/// into rows by `rows` (each keyed by its place: `key`), whole (`at`: `None`) or one
/// page of it.
async fn read_page<S: ReportStore + ?Sized, R>(
    store: &S,
    (f, periods, at): (&ReportFilter, &Periods, Option<PageAt<'_>>),
    (scope, kinds): (Scope, &[Kind]),
    rows: impl Fn(&[SummedTally], &Periods) -> Vec<R>,
    key: impl Fn(&R) -> PlaceKey,
) -> Result<Page<R>, StoreError> {
    let Some(at) = at else {
        let summed = read(store, f, periods, scope, kinds, None).await?;
        return Ok(Page {
            rows: rows(&summed, periods),
            next: None,
        });
    };
    let rows = &rows;
    let round = |places: PlacePage| async move {
        let summed = read(store, f, periods, scope, kinds, Some(&places)).await?;
        let made = rows(&summed, periods);
        Ok((summed, made))
    };
    at.read(periods.most(), round, key).await
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
    Ok(product_page(store, f, periods, None).await?.rows)
}

/// The products report from the rollups, whole (`at`: `None`) or a page of it.
pub async fn product_page<S: ReportStore + ?Sized>(
    store: &S,
    f: &ReportFilter,
    periods: &Periods,
    at: Option<PageAt<'_>>,
) -> Result<Page<ProductRow>, StoreError> {
    let kinds = [Kind::ProductImpression, Kind::ProductClick];
    read_page(
        store,
        (f, periods, at),
        (Scope::Product, &kinds),
        rollup::product_rows,
        |r| {
            key(
                &r.campaign_id,
                &r.creative_id,
                &r.catalog_id,
                &r.product_code,
            )
        },
    )
    .await
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
    Ok(ad_page(store, f, periods, None).await?.rows)
}

/// The ads report from the rollups, whole (`at`: `None`) or a page of it.
pub async fn ad_page<S: ReportStore + ?Sized>(
    store: &S,
    f: &ReportFilter,
    periods: &Periods,
    at: Option<PageAt<'_>>,
) -> Result<Page<AdRow>, StoreError> {
    let kinds = [Kind::AdImpression, Kind::AdClick];
    read_page(
        store,
        (f, periods, at),
        (Scope::Creative, &kinds),
        rollup::ad_rows,
        |r| key(&r.campaign_id, &r.creative_id, "", ""),
    )
    .await
}

/// The video funnel: rows per campaign, creative (the video id) and period (in any
/// zone: views are kept per UTC day and quarter hour), each with its
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
    Ok(funnel_page(store, f, periods, None).await?.rows)
}

/// The video funnel from the rollups, whole (`at`: `None`) or a page of it (its
/// impressions read for the page's campaigns only).
pub async fn funnel_page<S: ReportStore + ?Sized>(
    store: &S,
    f: &ReportFilter,
    periods: &Periods,
    at: Option<PageAt<'_>>,
) -> Result<Page<FunnelReportRow>, StoreError> {
    let mut ads_query = query_of(f, periods, Scope::Creative, &[Kind::AdImpression], None);
    let (mut page, ads) = match at {
        // The whole report: both reads at once.
        None => {
            let (views, ads) = futures_util::future::try_join(
                read(store, f, periods, Scope::Video, &[], None),
                read(
                    store,
                    f,
                    periods,
                    Scope::Creative,
                    &[Kind::AdImpression],
                    None,
                ),
            )
            .await?;
            let rows = rollup::funnel_rows(&views, periods);
            (Page { rows, next: None }, ads)
        }
        // A page: the impressions of its campaigns only (each one the filter allows:
        // its rows are).
        Some(at) => {
            let round = |places: PlacePage| {
                let q = query_of(f, periods, Scope::Video, &[], Some(&places));
                async move {
                    let views = fetch(store, &q).await?;
                    let rows = rollup::funnel_rows(&views, periods);
                    Ok((views, rows))
                }
            };
            let video = |r: &FunnelReportRow| key(&r.campaign_id, &r.video_id, "", "");
            let page = at.read(periods.most(), round, video).await?;
            ads_query.campaigns = Some(page.rows.iter().map(|r| r.campaign_id.clone()).collect());
            (page, fetch(store, &ads_query).await?)
        }
    };
    let impressions: HashMap<(String, String, String), u64> = rollup::ad_rows(&ads, periods)
        .into_iter()
        .map(|r| ((r.campaign_id, r.creative_id, r.day), r.impressions))
        .collect();
    for r in &mut page.rows {
        let k = (r.campaign_id.clone(), r.video_id.clone(), r.day.clone());
        r.impressions = impressions.get(&k).copied().unwrap_or(0);
    }
    Ok(page)
}

/// The campaign summary per campaign and period, in any zone (every column is kept
/// per UTC day and quarter hour).
/// `max_bid` gives each campaign's bid per click for spend ([`campaigns::report`]).
pub async fn campaign_summary<S: ReportStore + ?Sized>(
    store: &S,
    f: &ReportFilter,
    periods: &Periods,
    max_bid: impl Fn(&str) -> Option<rm_schemas::money::Money>,
) -> Result<Vec<CampaignReportRow>, StoreError> {
    let f = f.campaign_wide();
    // Both reads at once (each a round trip to a server).
    let (summed, sales) = futures_util::future::try_join(
        read(store, &f, periods, Scope::Campaign, &[], None),
        read(store, &f, periods, Scope::CampaignSales, &[], None),
    )
    .await?;
    // Every part's `day` is its period's start: the summary groups by it (hours
    // apart), then each row takes its label back.
    let start = rollup::Label::Start;
    let (ads, products) = rollup::campaign_parts(&summed, periods);
    let mut funnel = rollup::funnel_rows(&summed, periods);
    for r in &mut funnel {
        r.day = r.period_start.clone();
    }
    let parts = CampaignParts {
        ads,
        products,
        funnel,
        cart_adds: rollup::cart_adds_labelled(&summed, periods, start),
        sales: crate::model::tallies::sales::campaign_rows_labelled(&sales, periods, start),
    };
    let mut rows = campaigns::report(&parts, max_bid);
    for r in &mut rows {
        r.period_start = std::mem::take(&mut r.day);
        r.day = r.period_start.get(..10).unwrap_or_default().to_owned();
    }
    Ok(rows)
}
