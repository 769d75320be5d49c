//! Campaign reports for analysts (step 8), answered from the report store only.
//!
//! | route | rows |
//! |---|---|
//! | `GET /v1/reports/video-funnel` | per campaign, ad, creative (videoId) and day: views, the ad's billable impressions, milestones, rates over plays, debounced controls, rule violations, adIdStatus |
//! | `GET /v1/reports/products` | per campaign, creative, catalog, product and period (`adId`: the drill-down, per served ad and UTC day): impressions, clicks, CTR (zero-click rows included), adIdStatus |
//! | `GET /v1/reports/ads` | per campaign, creative and period (`adId`: the drill-down): billable impressions, clicks, CTR; notBillableImpressions, notBillableClicks; adIdStatus |
//! | `GET /v1/reports/campaigns` | per campaign and period (UTC): impressions, clicks, CTR, video plays, completion rate, product impressions and clicks, carts added, attributed orders, revenue, spend, ROAS |
//! | `GET /v1/reports/carts` | per cart line (tracking id, catalog, product): units now, last value, adds, increments, decrements, removals, adIdStatus |
//! | `GET /v1/reports/carts/campaigns` | per campaign and product: carts added, units added, value |
//! | `GET /v1/reports/sales` | per credited campaign, catalog, product and order day: orders, units, revenue, click and view attributions, ROAS |
//!
//! **Tenancy.** A report is read for one namespace (`rm_store::Tenant`): the
//! caller's, or for an operator the one `namespaceId` names (every namespace
//! without it). Only that namespace's campaigns' rows, and its orders attributed to
//! its campaigns, are in the answer; a `campaignId` of another namespace is a 404,
//! as if it did not exist.
//!
//! **Sums.** The products, ads and video funnel reports and the campaign summary's
//! ad, product, video and cart columns read the rollups (`rm_store::sums`): their
//! cost is the rows they return times the buckets of their range, whatever the
//! events behind them; `timeZone` and `granularity` cut their periods ([`query`]).
//!
//! Each route is a [`ReportKind`]; its query string is decoded once ([`query::parse`]).
//! Query parameters (all optional; [`query`]): `campaignId`, `adId`, `catalogId`,
//! `from` and `to` (inclusive UTC days, `YYYY-MM-DD`, at most 400 days, the last 400
//! by default), `namespaceId` (operators), `pageSize` and `pageToken` ([`page`]:
//! JSON answers 1,000 rows a page by default and adds `nextPageToken` when there are
//! more), `format` (`json`, the default, or `csv`; `Accept: text/csv` works too).
//! JSON answers `{"rows": [...]}` with camelCase fields; CSV has a header row with
//! the same names, is streamed in chunks, and a string cell that a spreadsheet would
//! read as a formula is prefixed with `'` ([`to_csv`]). The query is decoded
//! leniently, as `serde_urlencoded` would (`rm_schemas::percent`,
//! `Rules::LENIENT_FORM`). A bad
//! parameter is a 400 naming it, a store failure a 503 (`ApiError`).
//!
//! **Sales** are attributed when the report is read (last click within the click
//! window, else last impression within the view window; see
//! `rm_store::model::attribution`). `from`/`to` and `catalogId` select orders
//! by their day and catalog; `campaignId` and `adId` select the campaign and ad the
//! line is credited to. Lines no ad earned are reported too, under the empty
//! `campaignId` (so the report accounts for every sale; `campaignId=` alone selects
//! them). Columns: `campaignId`, `catalogId`, `productCode`, `day`, `orders`
//! (distinct orders with a line in the row), `units`, `revenue` (sum of
//! `totalOrderItemPriceAfterDiscounts`, exact, a decimal string like `"59.97"`),
//! `currency` (the orders' ISO 4217 code: rows group by currency too, so amounts of
//! two currencies never add), `clickAttributions` and `viewAttributions` (lines
//! credited to a click / an impression), and `roas`: the row's revenue over the
//! campaign's cost where [`CampaignCosts`] knows a positive cost in the row's
//! currency, to 6 decimals, else `null` (empty in CSV; a row in another currency
//! than the campaign's cost has no ROAS, since no rate converts them). The cost is
//! the campaign's whole cost, so the `roas` of a campaign's rows add up to the
//! campaign's ROAS over the days reported.
//!
//! **Money** in every report is exact (`rm_schemas::money`): amounts are decimal
//! strings with at least their currency's minor units (`"1.00"`, never
//! `0.9999999999999999`), each row that holds money has its `currency`, and ratios
//! (`roas`) are JSON numbers whose text is the exact decimal rounded to 6 places.
//!
//! **Ads** are the impressions and clicks of the edge's impression and click
//! endpoints. An impression counts once per realised ad id and shopper, however often
//! it is re-fired, on the day it was first fired; events whose ad id did not verify
//! (expired, bad signature, foreign) are not billable and are counted apart
//! (`notBillableImpressions`, `notBillableClicks`), never in `impressions`, `clicks`
//! or `ctr`. Filters as the others (`catalogId` does not apply).
//!
//! **`adIdStatus`** (funnel, products, ads, carts): `verified`, or the worst verdict
//! among the row's events, in the order `expired` < `bad_signature` < `foreign`
//! (`rm_store::model::status`).
//!
//! **Campaigns** (filters `campaignId`, `from`, `to` only; `adId` or `catalogId` is a
//! 400): one row per campaign and day; `impressions`, `clicks`, `ctr` are the ads
//! report's billable counts, `videoPlays` and `completionRate` (completes / plays)
//! the funnel's, `productImpressions` and `productClicks` the product report's,
//! `cartsAdded` the cart adds caused by the campaign's ads that day,
//! `attributedOrders` and `revenue` the orders (by the order's day) with lines
//! credited to the campaign and those lines' revenue; `spend` is billable clicks x
//! the campaign's `maxBid` ([`CampaignCosts::max_bid`]; `null` when the bid is
//! unknown), exact, in the row's `currency` (the campaign's), and `roas` is revenue /
//! spend (`null` when spend is `null` or 0). Credited sales in another currency are
//! a row of their own (same campaign and day, counts 0, spend and roas `null`;
//! `rm_store::model::campaigns`).

use http::{header, HeaderMap, HeaderValue, StatusCode};
use rm_schemas::money::{self, Decimal, Money};
use rm_service::{response, Response};
use rm_store::model::attribution::{SalesReportRow, Windows};
use rm_store::model::carts::lines::LinePlace;
use rm_store::{sums, ReportFilter, ReportStore, Tenant};
use serde::Serialize;

use crate::error::ApiError;

pub mod admission;
mod csv;
mod kind;
pub mod page;
pub mod query;
pub use csv::{to_csv, FORMULA_STARTS};
pub use kind::ReportKind;
use query::{Format, ReportQuery};

/// What each campaign cost, for ROAS. Implemented from the campaign data.
pub trait CampaignCosts: Send + Sync {
    /// The campaign's cost, exact, in its currency, when known.
    fn cost(&self, campaign_id: &str) -> Option<Money>;

    /// The campaign's bid per click (`strategy.auction.maxBid`), when known: the
    /// campaign summary's spend is billable clicks x this.
    fn max_bid(&self, _campaign_id: &str) -> Option<Money> {
        None
    }
}

/// Costs and bids from maps (campaign id -> amount); absent ids are unknown.
#[derive(Debug, Clone, Default)]
pub struct KnownCosts {
    /// Each campaign's whole cost (sales ROAS).
    pub cost: std::collections::HashMap<String, Money>,
    /// Each campaign's bid per click (campaign spend).
    pub max_bid: std::collections::HashMap<String, Money>,
}

impl CampaignCosts for KnownCosts {
    fn cost(&self, campaign_id: &str) -> Option<Money> {
        self.cost.get(campaign_id).copied()
    }

    fn max_bid(&self, campaign_id: &str) -> Option<Money> {
        self.max_bid.get(campaign_id).copied()
    }
}

/// No cost is known: every `roas` is `null`.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoCosts;

impl CampaignCosts for NoCosts {
    fn cost(&self, _campaign_id: &str) -> Option<Money> {
        None
    }
}

impl<F: Fn(&str) -> Option<Money> + Send + Sync> CampaignCosts for F {
    fn cost(&self, campaign_id: &str) -> Option<Money> {
        self(campaign_id)
    }
}

/// One row of the sales report: the store's row and its ROAS (the store's fields, then
/// `roas`, in JSON and CSV alike).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SalesRow {
    /// The store's row.
    #[serde(flatten)]
    pub row: SalesReportRow,
    /// revenue / the campaign's cost to 6 decimals (a JSON number), when the cost is
    /// known, positive and in the row's currency.
    #[serde(with = "money::ratio_number")]
    pub roas: Option<Decimal>,
}

impl SalesRow {
    /// A store row with its ROAS.
    pub fn new<C: CampaignCosts + ?Sized>(row: SalesReportRow, costs: &C) -> Self {
        let roas = if row.campaign_id.is_empty() {
            None
        } else {
            costs
                .cost(&row.campaign_id)
                .and_then(|c| money::roas(Money::new(row.revenue, row.currency), c))
        };
        Self { row, roas }
    }
}

/// Bytes of CSV per streamed chunk, and chunks waiting for a slow reader.
const CSV_CHUNK_BYTES: usize = 64 * 1024;
const CSV_CHUNKS_WAITING: usize = 4;

/// Renders a page by offset of a report's rows.
fn render<T: Serialize + Send + 'static>(
    rows: Vec<T>,
    q: &ReportQuery,
) -> Result<Response, ApiError> {
    let (rows, next) = q.page.apply(rows)?;
    Ok(render_rows(rows, next, q))
}

/// Renders a page by key of a report.
fn render_page<T: Serialize + Send + 'static>(page: sums::Page<T>, q: &ReportQuery) -> Response {
    let next = page.next.as_ref().map(|c| q.page.token_at(c));
    render_rows(page.rows, next, q)
}

fn render_rows<T: Serialize + Send + 'static>(
    rows: Vec<T>,
    next: Option<String>,
    q: &ReportQuery,
) -> Response {
    match q.format {
        Format::Json => {
            let mut v = serde_json::json!({ "rows": rows });
            if let Some(t) = next {
                v["nextPageToken"] = t.into();
            }
            let body = serde_json::to_vec(&v).unwrap_or_default();
            response::json(StatusCode::OK, body)
        }
        Format::Csv => {
            // Written as it is produced: the text of a large download is never held
            // whole.
            let (tx, body) = rm_service::Body::channel(CSV_CHUNKS_WAITING);
            tokio::spawn(async move {
                for chunk in csv::CsvChunks::new(rows.into_iter(), CSV_CHUNK_BYTES) {
                    if tx.send(chunk.into()).await.is_err() {
                        break; // the client went away
                    }
                }
            });
            csv_response(body, next)
        }
    }
}

/// A CSV answer of `body`, with the next page's token when there is one.
fn csv_response(body: rm_service::Body, next: Option<String>) -> Response {
    let mut r = http::Response::new(body);
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/csv; charset=utf-8"),
    );
    r.headers_mut().insert(
        header::CONTENT_DISPOSITION,
        HeaderValue::from_static("attachment"),
    );
    if let Some(t) = next.and_then(|t| HeaderValue::from_str(&t).ok()) {
        r.headers_mut().insert("x-next-page-token", t);
    }
    r
}

/// Lines a carts download reads from the store at a time.
pub const CART_LINES_PER_READ: usize = 10_000;

/// The carts report as a CSV download without a page size: read from the store and
/// written a page of [`CART_LINES_PER_READ`] lines at a time, so the api holds one
/// page whatever the range holds (the download was the api's peak at 10M records). The
/// first page is read before answering, so a store that fails at once gets an error
/// answer; one that fails later cuts the download ([`rm_service::body::BodySender::fail`]),
/// never ending it as if it were whole. The report's admission `place` is held until
/// the download ends: it reads the store all along.
async fn cart_download<S: ReportStore + Clone>(
    store: &S,
    f: ReportFilter,
    from: Option<LinePlace>,
    place: Option<admission::Ticket>,
) -> Result<Response, ApiError> {
    let (first, mut next) =
        sums::cart_page(store, &f, from.as_ref(), Some(CART_LINES_PER_READ)).await?;
    let store = store.clone();
    let (tx, body) = rm_service::Body::channel(CSV_CHUNKS_WAITING);
    tokio::spawn(async move {
        let _place = place;
        let mut chunks = csv::CsvChunks::new(first.into_iter(), CSV_CHUNK_BYTES);
        loop {
            for chunk in chunks.by_ref() {
                if tx.send(chunk.into()).await.is_err() {
                    return; // the client went away
                }
            }
            let Some(at) = next.take() else { return };
            match sums::cart_page(&store, &f, Some(&at), Some(CART_LINES_PER_READ)).await {
                Ok((rows, after)) => {
                    chunks.refill(rows.into_iter());
                    next = after;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "a carts download failed halfway");
                    tx.fail(e.to_string()).await;
                    return;
                }
            }
        }
    });
    Ok(csv_response(body, None))
}

/// Answers a report without campaign costs and with the default attribution windows;
/// [`answer_with`] is the full entry point.
pub async fn answer<S: ReportStore + Clone>(
    store: &S,
    kind: ReportKind,
    query: &str,
    headers: &HeaderMap,
) -> Response {
    answer_with(store, &NoCosts, &Windows::default(), kind, query, headers).await
}

/// Answers a report over every namespace: `costs` gives the sales report's ROAS,
/// `windows` its attribution windows (`rm_store::StoreConfig::attribution`).
pub async fn answer_with<S: ReportStore + Clone, C: CampaignCosts + ?Sized>(
    store: &S,
    costs: &C,
    windows: &Windows,
    kind: ReportKind,
    query: &str,
    headers: &HeaderMap,
) -> Response {
    let today = rm_store::model::day_of(chrono::Utc::now().timestamp_millis());
    let answer = match query::parse(kind, query, headers, today) {
        Ok(q) => rows(store, costs, windows, (None, None), kind, q).await,
        Err(e) => Err(e),
    };
    answer.unwrap_or_else(|e| e.response())
}

/// The rows of report `kind` for `tenant` (`None`: every namespace), as the query
/// `q` (decoded once, by the caller) asks, rendered. `place` is the report's
/// admission ([`admission::Ticket`]), when it has one: given back once the rows are
/// built, or, for a download read from the store as it streams (the carts report's),
/// once the download ends.
pub async fn rows<S: ReportStore + Clone, C: CampaignCosts + ?Sized>(
    store: &S,
    costs: &C,
    windows: &Windows,
    (tenant, place): (Option<Tenant>, Option<admission::Ticket>),
    kind: ReportKind,
    mut q: ReportQuery,
) -> Result<Response, ApiError> {
    if let (Some(t), Some(c)) = (&tenant, &q.filter.campaign_id) {
        if !t.campaigns.contains(c) {
            return Err(ApiError::NotFound(format!(
                "no banner X campaign has id '{c}'"
            )));
        }
    }
    q.filter.tenant = tenant;
    q.filter.click_window = windows.billable_clicks;
    let f = q.filter.clone();
    if kind == ReportKind::Campaigns {
        for (field, set) in [
            ("adId", f.ad_id.is_some()),
            ("catalogId", f.catalog_id.is_some()),
        ] {
            if set {
                let why =
                    "not a filter of the campaign summary; expected campaignId, from, to, format";
                return Err(ApiError::invalid(field, why));
            }
        }
    }
    // The rollups' reports (products, ads, funnel, sales) and the carts report page by
    // key; a drill-down (its range bounded) and the others by offset.
    let by_key = f.ad_id.is_none();
    match kind {
        ReportKind::Ads if by_key => Ok(render_page(
            sums::ad_page(store, &f, &q.periods, q.page.at()?).await?,
            &q,
        )),
        ReportKind::VideoFunnel if by_key => Ok(render_page(
            sums::funnel_page(store, &f, &q.periods, q.page.at()?).await?,
            &q,
        )),
        ReportKind::Sales if by_key => {
            let page = sums::sales_page(store, &f, q.page.at()?).await?;
            let rows = page.rows.into_iter().map(|r| SalesRow::new(r, costs));
            Ok(render_page(
                sums::Page {
                    rows: rows.collect(),
                    next: page.next,
                },
                &q,
            ))
        }
        ReportKind::Products if by_key => Ok(render_page(
            sums::product_page(store, &f, &q.periods, q.page.at()?).await?,
            &q,
        )),
        ReportKind::Ads => render(sums::ad_report(store, &f, &q.periods).await?, &q),
        ReportKind::VideoFunnel => render(sums::funnel_report(store, &f, &q.periods).await?, &q),
        ReportKind::Products => render(sums::product_report(store, &f, &q.periods).await?, &q),
        ReportKind::Campaigns => render(
            sums::campaign_summary(store, &f, &q.periods, |c| costs.max_bid(c)).await?,
            &q,
        ),
        ReportKind::Carts => {
            let (from, size) = q.page.line_at()?;
            if size.is_none() && q.format == Format::Csv {
                return cart_download(store, f, from.cloned(), place).await;
            }
            let (rows, next) = sums::cart_page(store, &f, from, size).await?;
            let next = next.map(|p| q.page.line_token(&p));
            Ok(render_rows(rows, next, &q))
        }
        ReportKind::Sales => {
            let rows: Vec<SalesRow> = (sums::sales_report(store, &f, windows).await?)
                .into_iter()
                .map(|r| SalesRow::new(r, costs))
                .collect();
            render(rows, &q)
        }
        ReportKind::CartCampaigns => render(sums::cart_campaign_report(store, &f).await?, &q),
    }
}

#[cfg(test)]
mod tests;
