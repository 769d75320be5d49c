//! One test suite for every report store: the embedded store (redb) and ClickHouse.
//!
//! [`suite`] folds synthetic log records into batches exactly as the aggregator does
//! after a restart (the touched entities' fact sets are loaded from the store, never
//! kept in memory), writes every batch twice, and checks each report, with and without
//! each filter, against values written out here. It returns a transcript of the
//! reports over a sweep of filters; the ClickHouse test runs the suite on both
//! backends and requires equal transcripts.
//!
//! The sales report (order lines and attribution touches) has its own part,
//! [`sales::suite`], and so do the ad report, unverified ad ids and the campaign
//! summary, [`ads::suite`]; both run the same way on both backends.
//!
//! The ClickHouse tests run it all on two servers: `clickhouse` on ClickHouse 18.16
//! (`RM_CLICKHOUSE_URL`), `clickhouse_newest` on ClickHouse 26.9, chDB behind the HTTP
//! shim `deploy/local/chdb/shim.py` (`RM_CLICKHOUSE_NEWEST_URL`); `deploy/local/up.sh`
//! starts both and prints the variables. Each works in a fresh database
//! `rm_test_<what>_<pid>_<nanos>` and drops it at the end. Without its variable a test is
//! skipped, unless `RM_REQUIRE_SERVICES=1`, where it fails.

use chrono::{DateTime, FixedOffset, Utc};
use rm_aggregator::batch::{fold, touched, FoldStats, Policy};
use rm_schemas::{EventRecord, InteractionEvent, InteractionType as T};
use rm_store::clickhouse::{ClickHouseConfig, ClickHouseStore};
use rm_store::embedded::EmbeddedStore;
use rm_store::model::attribution::Windows;
use rm_store::model::carts::{CartCampaignRow, CartKey, CartStateRow};
use rm_store::model::funnel::{FunnelReportRow, ViewKey};
use rm_store::model::products::ProductReportRow;
use rm_store::model::status::AdIdStatus;
use rm_store::model::traffic::InvalidCounts;
use rm_store::model::{format_day, DAY_MS};
use rm_store::{Backend, EntitySets, ReportFilter, ReportStore, WriteStore};

/// A store the suite writes (as the aggregator does) and reads (as the api does).
trait Store: WriteStore + ReportStore {}
impl<T: WriteStore + ReportStore> Store for T {}

#[path = "store_suite/ads.rs"]
mod ads;
#[path = "store_suite/ageing.rs"]
mod ageing;
#[path = "store_suite/cart_layouts.rs"]
mod cart_layouts;
#[path = "store_suite/cart_lines.rs"]
mod cart_lines;
#[path = "store_suite/erasure.rs"]
mod erasure;
#[path = "store_suite/hours.rs"]
mod hours;
#[path = "store_suite/migration.rs"]
mod migration;
#[path = "store_suite/offers.rs"]
mod offers;
#[path = "store_suite/pages.rs"]
mod pages;
#[path = "store_suite/quarter_days.rs"]
mod quarter_days;
#[path = "store_suite/retention.rs"]
mod retention;
#[path = "store_suite/rollups.rs"]
mod rollups;
#[path = "store_suite/sales.rs"]
mod sales;
#[path = "store_suite/tallies.rs"]
mod tallies;

/// 2026-11-18 and the day after, as day numbers.
const D0: i32 = 20_775;
const D1: i32 = D0 + 1;
const DAY0: &str = "2026-11-18";
const DAY1: &str = "2026-11-19";

const AD1: &str = "rm1.c1.x";
const AD2: &str = "rm1.c2.x";
/// Tracking ids with a quote, a backslash and a question mark: the store must escape
/// them when it looks the entity up again.
const S1: &str = "s'1\\";
const SHOPPER1: &str = "shopper-1'\\?";

/// Milliseconds at `ms` into `day`.
fn t(day: i32, ms: i64) -> i64 {
    i64::from(day) * DAY_MS + ms
}

/// 10:00 UTC.
const TEN: i64 = 10 * 3_600_000;

fn at(ms: i64) -> DateTime<FixedOffset> {
    DateTime::from_timestamp_millis(ms)
        .expect("time in range")
        .fixed_offset()
}

fn event(kind: T, ad: &str, ms: i64) -> InteractionEvent {
    InteractionEvent::new(ad, kind, at(ms))
}

fn video(kind: T, ad: &str, video: &str, session: &str, ms: i64) -> InteractionEvent {
    InteractionEvent {
        session_id: Some(session.into()),
        video_id: Some(video.into()),
        ..event(kind, ad, ms)
    }
}

fn product(kind: T, ad: &str, catalog: &str, code: &str, ms: i64) -> InteractionEvent {
    InteractionEvent {
        session_id: Some("s-shop".into()),
        catalog_id: Some(catalog.into()),
        product_code: Some(code.into()),
        ..event(kind, ad, ms)
    }
}

fn cart(
    ad: &str,
    shopper: &str,
    catalog: &str,
    code: &str,
    units: u64,
    value: Option<f64>,
    ms: i64,
) -> InteractionEvent {
    InteractionEvent {
        customer_id: Some(shopper.into()),
        catalog_id: Some(catalog.into()),
        product_code: Some(code.into()),
        units: Some(units),
        conversion_value: value,
        ..event(T::Cart, ad, ms)
    }
}

/// The same instant written with another offset: the same event (same dedup key).
fn refired(e: InteractionEvent) -> InteractionEvent {
    let east2 = FixedOffset::east_opt(2 * 3600).expect("offset");
    InteractionEvent {
        timestamp: e.timestamp.with_timezone(&east2),
        ..e
    }
}

/// Log records as the edge writes them: a fresh event id, received 2 s later.
fn records(events: Vec<InteractionEvent>) -> Vec<EventRecord> {
    events
        .into_iter()
        .map(|e| {
            let received = e.timestamp.with_timezone(&Utc) + chrono::Duration::seconds(2);
            EventRecord::new(e, uuid::Uuid::now_v7(), received)
        })
        .collect()
}

/// First batch.
fn batch1() -> Vec<EventRecord> {
    records(vec![
        // V1: the first half of a full watch (the rest comes in batch 2).
        video(T::VideoCreativeView, AD1, "vid-1", S1, t(D0, TEN)),
        video(T::VideoPlay, AD1, "vid-1", S1, t(D0, TEN + 100)),
        video(T::VideoFirstQuartile, AD1, "vid-1", S1, t(D0, TEN + 1_000)),
        video(T::VideoMidpoint, AD1, "vid-1", S1, t(D0, TEN + 2_000)),
        // V2: a seek straight to the midpoint (a gap), rapid pauses (debounced to 2).
        video(T::VideoCreativeView, AD1, "vid-1", "s2", t(D0, TEN + 10)),
        video(T::VideoPlay, AD1, "vid-1", "s2", t(D0, TEN + 20)),
        video(T::VideoPause, AD1, "vid-1", "s2", t(D0, TEN + 100)),
        video(T::VideoPause, AD1, "vid-1", "s2", t(D0, TEN + 300)),
        video(T::VideoPause, AD1, "vid-1", "s2", t(D0, TEN + 600)),
        video(T::VideoMidpoint, AD1, "vid-1", "s2", t(D0, TEN + 700)),
        video(T::VideoPause, AD1, "vid-1", "s2", t(D0, TEN + 5_000)),
        video(T::VideoResume, AD1, "vid-1", "s2", t(D0, TEN + 5_100)),
        // V3: a view on day 0 (V4, same ad and creative, is on day 1).
        video(T::VideoCreativeView, AD1, "vid-2", "s3", t(D0, TEN + 50)),
        video(T::VideoPlay, AD1, "vid-2", "s3", t(D0, TEN + 60)),
        // V7: a play just after midnight; its creativeView, just before, comes late.
        video(T::VideoPlay, AD2, "vid-1", "s6", t(D1, 500)),
        // Products: p1 two impressions, p2 one impression and never a click.
        product(T::ProductImpression, AD1, "cat-1", "p1", t(D0, TEN + 10)),
        product(T::ProductImpression, AD1, "cat-1", "p1", t(D0, TEN + 20)),
        product(T::ProductImpression, AD1, "cat-1", "p2", t(D0, TEN + 40)),
        // Cart A: 3 and 0 arrive first (1 and 2, earlier, in batch 2).
        cart(
            AD1,
            SHOPPER1,
            "cat-1",
            "p1",
            0,
            Some(0.0),
            t(D0, TEN + 4_000),
        ),
        cart(
            AD1,
            SHOPPER1,
            "cat-1",
            "p1",
            3,
            Some(30.0),
            t(D0, TEN + 3_000),
        ),
        // Cart B: added from campaign c1 (raised from c2 in batch 2).
        cart(
            AD1,
            "shopper-2",
            "cat-1",
            "p2",
            2,
            Some(5.0),
            t(D0, TEN + 5_000),
        ),
    ])
}

/// Second batch.
fn batch2() -> Vec<EventRecord> {
    records(vec![
        // V1: the rest of the watch, a loop (second complete), a re-fired play.
        video(T::VideoComplete, AD1, "vid-1", S1, t(D0, TEN + 8_000)),
        video(T::VideoThirdQuartile, AD1, "vid-1", S1, t(D0, TEN + 3_000)),
        video(T::VideoComplete, AD1, "vid-1", S1, t(D0, TEN + 4_000)),
        refired(video(T::VideoPlay, AD1, "vid-1", S1, t(D0, TEN + 100))),
        // V4: day 1.
        video(T::VideoCreativeView, AD1, "vid-2", "s4", t(D1, TEN)),
        video(T::VideoPlay, AD1, "vid-2", "s4", t(D1, TEN + 10)),
        video(
            T::VideoFirstQuartile,
            AD1,
            "vid-2",
            "s4",
            t(D1, TEN + 1_000),
        ),
        // V5: campaign c2, skipped.
        video(T::VideoCreativeView, AD2, "vid-1", "s2", t(D1, TEN + 20)),
        video(T::VideoPlay, AD2, "vid-1", "s2", t(D1, TEN + 30)),
        video(T::VideoSkip, AD2, "vid-1", "s2", t(D1, TEN + 2_000)),
        // V6: controls only, no milestone.
        video(T::VideoMute, AD2, "vid-3", "s5", t(D1, TEN + 100)),
        video(T::VideoUnmute, AD2, "vid-3", "s5", t(D1, TEN + 150)),
        // V7: the late creativeView moves the view to day 0 and closes its gap.
        video(
            T::VideoCreativeView,
            AD2,
            "vid-1",
            "s6",
            t(D0, DAY_MS - 100),
        ),
        // Products: a re-fired impression, p1's click, p3 on day 1 (one impression
        // re-fired within the batch, no click), a click without impression.
        refired(product(
            T::ProductImpression,
            AD1,
            "cat-1",
            "p1",
            t(D0, TEN + 10),
        )),
        product(T::ProductClick, AD1, "cat-1", "p1", t(D0, TEN + 30)),
        product(T::ProductImpression, AD2, "cat-2", "p3", t(D1, TEN + 1)),
        product(T::ProductImpression, AD2, "cat-2", "p3", t(D1, TEN + 2)),
        product(T::ProductImpression, AD2, "cat-2", "p3", t(D1, TEN + 2)),
        product(T::ProductImpression, AD2, "cat-2", "p3", t(D1, TEN + 3)),
        product(T::ProductClick, AD2, "cat-1", "p1", t(D1, TEN + 5)),
        // Cart A: 2 then 1 (event times 1, 2, 3, 0).
        cart(
            AD1,
            SHOPPER1,
            "cat-1",
            "p1",
            2,
            Some(20.0),
            t(D0, TEN + 2_000),
        ),
        cart(
            AD1,
            SHOPPER1,
            "cat-1",
            "p1",
            1,
            Some(10.0),
            t(D0, TEN + 1_000),
        ),
        // Cart B: raised to 5 from campaign c2 on day 1.
        cart(
            AD2,
            "shopper-2",
            "cat-1",
            "p2",
            5,
            Some(12.5),
            t(D1, TEN + 1_000),
        ),
        // Cart C: campaign c2, no value.
        cart(AD2, "shopper-3", "cat-2", "p3", 1, None, t(D1, TEN + 2_000)),
    ])
}

/// What a restarted aggregator does with a batch: load the touched entities' sets
/// from the store, fold, write (here twice: a retried write changes nothing).
async fn ingest(store: &impl Store, batch: &[EventRecord]) -> (EntitySets, FoldStats) {
    let t = touched(batch);
    let mut sets = store
        .load(&t.views, &t.carts, &t.served)
        .await
        .expect("load");
    let (write, stats) = fold(batch, &mut sets, &Policy::default());
    store.write(&write).await.expect("write");
    store.write(&write).await.expect("write again");
    (sets, stats)
}

#[allow(clippy::too_many_arguments)]
fn funnel_row(
    campaign: &str,
    ad: &str,
    video: &str,
    day: &str,
    m: [u64; 7],
    rates: [f64; 4],
    c: [u64; 5],
    violations: [u64; 2],
) -> FunnelReportRow {
    FunnelReportRow {
        campaign_id: campaign.into(),
        ad_id: ad.into(),
        video_id: video.into(),
        day: day.into(),
        period_start: format!("{day}T00:00:00Z"),
        views: m[0],
        creative_views: m[1],
        plays: m[2],
        first_quartiles: m[3],
        midpoints: m[4],
        third_quartiles: m[5],
        completes: m[6],
        first_quartile_rate: rates[0],
        midpoint_rate: rates[1],
        third_quartile_rate: rates[2],
        completion_rate: rates[3],
        skips: c[0],
        pauses: c[1],
        resumes: c[2],
        mutes: c[3],
        unmutes: c[4],
        funnel_gap_violations: violations[0],
        repeated_milestone_violations: violations[1],
        impressions: 0,
        ad_id_status: AdIdStatus::Verified,
        invalid_views: 0,
        invalid_plays: 0,
    }
}

/// `g` = campaign, ad, catalog, product, day.
fn product_row(g: (&str, &str, &str, &str, &str), i: u64, c: u64, ctr: f64) -> ProductReportRow {
    let (campaign, ad, catalog, code, day) = g;
    ProductReportRow {
        campaign_id: campaign.into(),
        ad_id: ad.into(),
        catalog_id: catalog.into(),
        product_code: code.into(),
        day: day.into(),
        impressions: i,
        clicks: c,
        ctr,
        ad_id_status: AdIdStatus::Verified,
        ..ProductReportRow::default()
    }
}

/// An ads row as a store without the served-ad rule counts it: its repeats billable.
fn ads_without_repeats(
    mut r: rm_store::model::ads::AdReportRow,
) -> rm_store::model::ads::AdReportRow {
    let (i, c) = (
        r.invalid_impressions.served_ad_repeat,
        r.invalid_clicks.served_ad_repeat,
    );
    r.impressions += i;
    r.clicks += c;
    r.not_billable_impressions -= i;
    r.not_billable_clicks -= c;
    r.invalid_impressions.served_ad_repeat = 0;
    r.invalid_clicks.served_ad_repeat = 0;
    r.ctr = rm_store::model::rate(r.clicks, r.impressions);
    r
}

/// A products row as a store without the served-ad rule counts it.
fn products_without_repeats(mut r: ProductReportRow) -> ProductReportRow {
    r.impressions += r.invalid_impressions.served_ad_repeat;
    r.clicks += r.invalid_clicks.served_ad_repeat;
    r.invalid_impressions.served_ad_repeat = 0;
    r.invalid_clicks.served_ad_repeat = 0;
    r.ctr = rm_store::model::rate(r.clicks, r.impressions);
    r
}

/// `row` with `n` views (each with a play) that repeat their served ad's view.
fn with_repeat_views(row: FunnelReportRow, n: u64) -> FunnelReportRow {
    FunnelReportRow {
        invalid_views: n,
        invalid_plays: n,
        ..row
    }
}

/// `row` with `n` impressions that were repeats of its served ad.
fn with_repeats(row: ProductReportRow, n: u64) -> ProductReportRow {
    ProductReportRow {
        invalid_impressions: InvalidCounts {
            served_ad_repeat: n,
            ..InvalidCounts::default()
        },
        ..row
    }
}

/// `counts` = units, adds, increments, decrements, removals.
fn cart_row(
    key: (&str, &str, &str),
    counts: [u64; 5],
    value: Option<f64>,
    latest: (&str, &str, &str),
) -> CartStateRow {
    CartStateRow {
        tracking_id: key.0.into(),
        catalog_id: key.1.into(),
        product_code: key.2.into(),
        units: counts[0],
        // The values here are exact in f64: the report shows their decimals.
        last_conversion_value: value.and_then(rm_schemas::money::decimal_of_f64),
        currency: rm_schemas::money::DEFAULT_CURRENCY,
        adds: counts[1],
        increments: counts[2],
        decrements: counts[3],
        removals: counts[4],
        campaign_id: latest.0.into(),
        ad_id: latest.1.into(),
        last_day: latest.2.into(),
        ad_id_status: AdIdStatus::Verified,
    }
}

fn rollup_row(
    campaign: &str,
    catalog: &str,
    code: &str,
    added: u64,
    units: u64,
    value: f64,
) -> CartCampaignRow {
    CartCampaignRow {
        campaign_id: campaign.into(),
        catalog_id: catalog.into(),
        product_code: code.into(),
        carts_added: added,
        units_added: units,
        value: rm_schemas::money::decimal_of_f64(value).expect("finite"),
        currency: rm_schemas::money::DEFAULT_CURRENCY,
    }
}

fn filter(
    campaign: Option<&str>,
    ad: Option<&str>,
    catalog: Option<&str>,
    from: Option<i32>,
    to: Option<i32>,
) -> ReportFilter {
    ReportFilter {
        campaign_id: campaign.map(Into::into),
        ad_id: ad.map(Into::into),
        catalog_id: catalog.map(Into::into),
        from_day: from,
        to_day: to,
        ..ReportFilter::default()
    }
}

fn all() -> ReportFilter {
    ReportFilter::default()
}

fn campaign(c: &str) -> ReportFilter {
    filter(Some(c), None, None, None, None)
}

fn ad(a: &str) -> ReportFilter {
    filter(None, Some(a), None, None, None)
}

fn catalog(c: &str) -> ReportFilter {
    filter(None, None, Some(c), None, None)
}

fn days(from: Option<i32>, to: Option<i32>) -> ReportFilter {
    filter(None, None, None, from, to)
}

fn pick<R: Clone>(rows: &[R], which: &[usize]) -> Vec<R> {
    which.iter().map(|i| rows[*i].clone()).collect()
}

/// Every report under a sweep of filters, for comparing backends.
async fn transcript(store: &impl Store) -> Vec<String> {
    let mut out = Vec::new();
    for c in [None, Some("c1"), Some("c2")] {
        for a in [None, Some(AD2)] {
            for cat in [None, Some("cat-2")] {
                for from in [None, Some(D1)] {
                    for to in [None, Some(D0)] {
                        let f = filter(c, a, cat, from, to);
                        let label = format!("{f:?}");
                        out.push(format!(
                            "{label} funnel {:?}",
                            store.funnel(&f).await.expect("funnel")
                        ));
                        out.push(format!(
                            "{label} products {:?}",
                            store.products(&f).await.expect("products")
                        ));
                        out.push(format!(
                            "{label} carts {:?}",
                            store.carts(&f).await.expect("carts")
                        ));
                        out.push(format!(
                            "{label} rollup {:?}",
                            store.cart_campaigns(&f).await.expect("rollup")
                        ));
                    }
                }
            }
        }
    }
    out
}

/// The final reports, in full.
struct Expected {
    funnel: Vec<FunnelReportRow>,
    products: Vec<ProductReportRow>,
    carts: Vec<CartStateRow>,
    rollup: Vec<CartCampaignRow>,
}

/// Checks every report, with and without each filter, against `x`.
async fn check_final(store: &impl Store, x: &Expected) {
    // Funnel: the catalog filter does not apply to views.
    let cases: Vec<(ReportFilter, Vec<usize>)> = vec![
        (all(), vec![0, 1, 2, 3, 4, 5]),
        (campaign("c1"), vec![0, 1, 2]),
        (campaign("c2"), vec![3, 4, 5]),
        (campaign("nope"), vec![]),
        (ad(AD2), vec![3, 4, 5]),
        (catalog("cat-2"), vec![0, 1, 2, 3, 4, 5]),
        (days(Some(D1), None), vec![2, 4, 5]),
        (days(None, Some(D0)), vec![0, 1, 3]),
        (days(Some(D0), Some(D0)), vec![0, 1, 3]),
        (filter(Some("c2"), None, None, None, Some(D0)), vec![3]),
    ];
    for (f, want) in cases {
        assert_eq!(
            store.funnel(&f).await.expect("funnel"),
            pick(&x.funnel, &want),
            "funnel {f:?}"
        );
    }
    let cases: Vec<(ReportFilter, Vec<usize>)> = vec![
        (all(), vec![0, 1, 2, 3]),
        (campaign("c2"), vec![2, 3]),
        (ad(AD1), vec![0, 1]),
        (catalog("cat-1"), vec![0, 1, 2]),
        (catalog("cat-2"), vec![3]),
        (days(Some(D1), None), vec![2, 3]),
        (days(None, Some(D0)), vec![0, 1]),
        (filter(None, None, Some("cat-1"), Some(D1), None), vec![2]),
    ];
    for (f, want) in cases {
        assert_eq!(
            store.products(&f).await.expect("products"),
            pick(&x.products, &want),
            "products {f:?}"
        );
    }
    // Carts: filtered by the campaign, ad and day of each cart's latest event.
    let cases: Vec<(ReportFilter, Vec<usize>)> = vec![
        (all(), vec![0, 1, 2]),
        (campaign("c1"), vec![0]),
        (campaign("c2"), vec![1, 2]),
        (ad(AD1), vec![0]),
        (ad(AD2), vec![1, 2]),
        (catalog("cat-1"), vec![0, 1]),
        (catalog("cat-2"), vec![2]),
        (days(Some(D1), None), vec![1, 2]),
        (days(None, Some(D0)), vec![0]),
        (filter(Some("c1"), None, None, Some(D1), None), vec![]),
        (filter(Some("c2"), None, Some("cat-1"), None, None), vec![1]),
    ];
    for (f, want) in cases {
        assert_eq!(
            store.carts(&f).await.expect("carts"),
            pick(&x.carts, &want),
            "carts {f:?}"
        );
    }
    // Rollup: events of the days only; the ad filter does not apply.
    let cases: Vec<(ReportFilter, Vec<CartCampaignRow>)> = vec![
        (all(), x.rollup.clone()),
        (campaign("c2"), pick(&x.rollup, &[2, 3])),
        (catalog("cat-1"), pick(&x.rollup, &[0, 1, 2])),
        (ad(AD1), x.rollup.clone()),
        (
            days(None, Some(D0)),
            vec![
                rollup_row("c1", "cat-1", "p1", 1, 3, 0.0),
                rollup_row("c1", "cat-1", "p2", 1, 2, 5.0),
            ],
        ),
        (
            days(Some(D1), None),
            vec![
                rollup_row("c2", "cat-1", "p2", 0, 3, 12.5),
                rollup_row("c2", "cat-2", "p3", 1, 1, 0.0),
            ],
        ),
        (filter(Some("c1"), None, None, Some(D1), None), vec![]),
        (filter(Some("c2"), None, None, None, Some(D0)), vec![]),
    ];
    for (f, want) in cases {
        assert_eq!(
            store.cart_campaigns(&f).await.expect("rollup"),
            want,
            "rollup {f:?}"
        );
    }
}

/// Records of a batch that belong to a view or a cart (whose sets the store loads).
fn entity_records(batch: &[EventRecord]) -> usize {
    batch
        .iter()
        .filter(|r| {
            !matches!(
                r.event.interaction_type,
                T::ProductImpression | T::ProductClick | T::CreativeClick
            )
        })
        .count()
}

/// The shared suite. Returns the transcript of the final reports.
async fn suite(store: &impl Store) -> Vec<String> {
    assert_eq!(format_day(D0), DAY0);
    assert_eq!(format_day(D1), DAY1);
    store.readiness().expect("ready");

    // An empty store knows no entity, including many absent keys (several IN lists).
    let absent_views: rm_store::FastSet<ViewKey> = (0..2_500)
        .map(|i| ViewKey {
            ad_id: format!("rm1.none.{i}"),
            video_id: "v'\\".repeat(20),
            tracking_id: format!("t-{i}"),
        })
        .collect();
    let absent_carts: rm_store::FastSet<CartKey> = (0..2_500)
        .map(|i| CartKey {
            tracking_id: format!("t-{i}"),
            catalog_id: "c".repeat(60),
            product_code: format!("p{i}"),
        })
        .collect();
    let none = store
        .load(&absent_views, &absent_carts, &Default::default())
        .await
        .expect("load absent");
    assert!(none.views.is_empty() && none.carts.is_empty());

    // ---- Batch 1.
    let b1 = batch1();
    let (sets1, stats1) = ingest(store, &b1).await;
    assert_eq!(stats1.duplicates, 0);
    // The store gives back exactly the sets the batch was folded into.
    let t = touched(&b1);
    let loaded = store
        .load(&t.views, &t.carts, &t.served)
        .await
        .expect("load batch 1 entities");
    assert_eq!(loaded.views, sets1.views);
    assert_eq!(loaded.carts, sets1.carts);
    let view1 = ViewKey {
        ad_id: AD1.into(),
        video_id: "vid-1".into(),
        tracking_id: S1.into(),
    };
    let kinds: Vec<T> = loaded.views[&view1].iter().map(|f| f.kind).collect();
    assert_eq!(
        kinds,
        [
            T::VideoCreativeView,
            T::VideoPlay,
            T::VideoFirstQuartile,
            T::VideoMidpoint
        ]
    );
    let cart_a = CartKey {
        tracking_id: SHOPPER1.into(),
        catalog_id: "cat-1".into(),
        product_code: "p1".into(),
    };
    let units: Vec<u64> = loaded.carts[&cart_a].iter().map(|f| f.units).collect();
    assert_eq!(units, [3, 0], "in event-time order");

    let z4 = [0.0; 4];
    assert_eq!(
        store.funnel(&all()).await.expect("funnel"),
        vec![
            // s2 watches the served ad S1 watched first: its view is the ad's repeat
            // (issue 26), beside the counts (its rule violation still counted).
            with_repeat_views(
                funnel_row(
                    "c1",
                    AD1,
                    "vid-1",
                    DAY0,
                    [1, 1, 1, 1, 1, 0, 0],
                    [1.0, 1.0, 0.0, 0.0],
                    [0; 5],
                    [1, 0]
                ),
                1
            ),
            funnel_row(
                "c1",
                AD1,
                "vid-2",
                DAY0,
                [1, 1, 1, 0, 0, 0, 0],
                z4,
                [0; 5],
                [0, 0]
            ),
            funnel_row(
                "c2",
                AD2,
                "vid-1",
                DAY1,
                [1, 0, 1, 0, 0, 0, 0],
                z4,
                [0; 5],
                [1, 0]
            ),
        ]
    );
    assert_eq!(
        store.products(&all()).await.expect("products"),
        vec![
            // The second impression of p1 on the served ad AD1 is its repeat.
            with_repeats(product_row(("c1", AD1, "cat-1", "p1", DAY0), 1, 0, 0.0), 1),
            product_row(("c1", AD1, "cat-1", "p2", DAY0), 1, 0, 0.0),
        ]
    );
    assert_eq!(
        store.carts(&all()).await.expect("carts"),
        vec![
            cart_row(
                (SHOPPER1, "cat-1", "p1"),
                [0, 1, 0, 0, 1],
                Some(0.0),
                ("c1", AD1, DAY0)
            ),
            cart_row(
                ("shopper-2", "cat-1", "p2"),
                [2, 1, 0, 0, 0],
                Some(5.0),
                ("c1", AD1, DAY0)
            ),
        ]
    );
    assert_eq!(
        store.cart_campaigns(&all()).await.expect("rollup"),
        vec![
            rollup_row("c1", "cat-1", "p1", 1, 3, 0.0),
            rollup_row("c1", "cat-1", "p2", 1, 2, 5.0)
        ]
    );

    // ---- Batch 2, folded onto the sets loaded back from the store.
    let b2 = batch2();
    let (_, stats2) = ingest(store, &b2).await;
    assert_eq!(stats2.duplicates, 1, "the re-fired play");
    let t = touched(&b2);
    let loaded = store
        .load(&t.views, &t.carts, &t.served)
        .await
        .expect("load batch 2 entities");
    assert_eq!(loaded.views[&view1].len(), 7);
    let units: Vec<u64> = loaded.carts[&cart_a].iter().map(|f| f.units).collect();
    assert_eq!(units, [1, 2, 3, 0]);

    // Views of one served ad by other viewers are its repeats (issue 26), beside the
    // counts: V2 of V1's ad, V4 of V3's, V5 of V7's (V7's play arrived first). Rule
    // violations still count every view.
    let funnel = vec![
        with_repeat_views(
            funnel_row(
                "c1",
                AD1,
                "vid-1",
                DAY0,
                [1, 1, 1, 1, 1, 1, 1],
                [1.0, 1.0, 1.0, 1.0],
                [0; 5],
                [1, 1],
            ),
            1,
        ),
        funnel_row(
            "c1",
            AD1,
            "vid-2",
            DAY0,
            [1, 1, 1, 0, 0, 0, 0],
            z4,
            [0; 5],
            [0, 0],
        ),
        with_repeat_views(
            funnel_row("c1", AD1, "vid-2", DAY1, [0; 7], z4, [0; 5], [0, 0]),
            1,
        ),
        funnel_row(
            "c2",
            AD2,
            "vid-1",
            DAY0,
            [1, 1, 1, 0, 0, 0, 0],
            z4,
            [0; 5],
            [0, 0],
        ),
        with_repeat_views(
            funnel_row("c2", AD2, "vid-1", DAY1, [0; 7], z4, [0; 5], [0, 0]),
            1,
        ),
        funnel_row(
            "c2",
            AD2,
            "vid-3",
            DAY1,
            [0; 7],
            z4,
            [0, 0, 0, 1, 1],
            [0, 0],
        ),
    ];
    // Each served ad yields one billable impression per product: the others are its
    // repeats (before the served-ad rule, p1 had 2 impressions and p3 had 3).
    let products = vec![
        with_repeats(product_row(("c1", AD1, "cat-1", "p1", DAY0), 1, 1, 1.0), 1),
        product_row(("c1", AD1, "cat-1", "p2", DAY0), 1, 0, 0.0),
        product_row(("c2", AD2, "cat-1", "p1", DAY1), 0, 1, 0.0),
        with_repeats(product_row(("c2", AD2, "cat-2", "p3", DAY1), 1, 0, 0.0), 2),
    ];
    let carts = vec![
        cart_row(
            (SHOPPER1, "cat-1", "p1"),
            [0, 1, 2, 0, 1],
            Some(0.0),
            ("c1", AD1, DAY0),
        ),
        cart_row(
            ("shopper-2", "cat-1", "p2"),
            [5, 1, 1, 0, 0],
            Some(12.5),
            ("c2", AD2, DAY1),
        ),
        cart_row(
            ("shopper-3", "cat-2", "p3"),
            [1, 1, 0, 0, 0],
            None,
            ("c2", AD2, DAY1),
        ),
    ];
    let rollup = vec![
        rollup_row("c1", "cat-1", "p1", 1, 3, 0.0),
        rollup_row("c1", "cat-1", "p2", 1, 2, 0.0),
        rollup_row("c2", "cat-1", "p2", 0, 3, 12.5),
        rollup_row("c2", "cat-2", "p3", 1, 1, 0.0),
    ];

    let expected = Expected {
        funnel,
        products,
        carts,
        rollup,
    };
    check_final(store, &expected).await;
    let before = transcript(store).await;

    // ---- A restarted aggregator consuming batch 1 again (from an older offset):
    // every event is already in its entity's set, nothing changes.
    let (_, replay) = ingest(store, &b1).await;
    assert_eq!(replay.duplicates as usize, entity_records(&b1));
    check_final(store, &expected).await;
    let after = transcript(store).await;
    assert_eq!(before, after);
    store.readiness().expect("still ready");
    after
}

#[tokio::test]
async fn embedded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = EmbeddedStore::open(&EmbeddedStore::path(dir.path())).expect("open");
    let transcript = suite(&store).await;
    assert_eq!(transcript.len(), 3 * 2 * 2 * 2 * 2 * 4);
}

#[tokio::test]
async fn ads_embedded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = EmbeddedStore::open(&EmbeddedStore::path(dir.path())).expect("open");
    let transcript = ads::suite(&store).await;
    assert_eq!(transcript.len(), 3 * 2 * 2 * 2 * 5);
}

#[tokio::test]
async fn sales_embedded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = EmbeddedStore::open(&EmbeddedStore::path(dir.path())).expect("open");
    let transcript = sales::suite(&store).await;
    assert_eq!(transcript.len(), 4 * 2 * 2 * 3 * 3);
}

/// Each suite's store, rewritten into the previous version's layout (JSON keys, a
/// view's facts apart from its row) and opened again: converted at open, every report
/// the same, the entities' facts found again by a replay, the old tables gone.
/// The store at `path` as the previous version counted its events: it had no
/// served-ad rules, so its stores hold every product and ad fact as the edge classed
/// it ([`migration::undecided_facts`]).
async fn as_the_previous_version_counted(path: &std::path::Path) -> EmbeddedStore {
    let undecided = migration::undecided_facts(path);
    assert!(!undecided.product_facts.is_empty() || !undecided.ad_facts.is_empty());
    let store = EmbeddedStore::open(path).expect("open");
    store.write(&undecided).await.expect("write");
    store
}

#[tokio::test]
async fn embedded_stores_of_the_previous_version_are_converted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = EmbeddedStore::path(dir.path());
    suite(&EmbeddedStore::open(&path).expect("open")).await;
    let before = transcript(&as_the_previous_version_counted(&path).await).await;
    migration::downgrade(&path);
    let old = migration::tables(&path);
    assert!(
        migration::OLD.iter().all(|t| old.contains(&t.to_string())),
        "{old:?}"
    );

    let store = EmbeddedStore::open(&path).expect("open the previous version");
    assert_eq!(transcript(&store).await, before);
    for batch in [batch1(), batch2()] {
        let (_, replay) = ingest(&store, &batch).await;
        assert_eq!(replay.duplicates as usize, entity_records(&batch));
    }
    assert_eq!(transcript(&store).await, before);
    drop(store);
    let now = migration::tables(&path);
    assert!(
        now.iter().all(|t| !migration::OLD.contains(&t.as_str())),
        "{now:?}"
    );
    // Opening again converts nothing and changes nothing.
    let store = EmbeddedStore::open(&path).expect("open again");
    assert_eq!(transcript(&store).await, before);
    drop(store);
}

#[tokio::test]
async fn ad_stores_of_the_previous_version_are_converted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = EmbeddedStore::path(dir.path());
    ads::suite(&EmbeddedStore::open(&path).expect("open")).await;
    let before = ads::transcript(&as_the_previous_version_counted(&path).await).await;
    migration::downgrade(&path);
    let store = EmbeddedStore::open(&path).expect("open the previous version");
    assert_eq!(ads::transcript(&store).await, before);
}

#[tokio::test]
async fn rollups_embedded() {
    for seed in 1..=24 {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = EmbeddedStore::open(&EmbeddedStore::path(dir.path())).expect("open");
        rollups::counted_as_the_reports_count(&store, seed, true).await;
    }
}

/// Sales attributed as orders arrive equal the read-time attribution (see
/// [`offers`]), for many interleavings and crashes.
#[tokio::test]
async fn sales_rollups_embedded() {
    let mut credited = 0;
    for seed in 1..=16 {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = EmbeddedStore::open(&EmbeddedStore::path(dir.path())).expect("open");
        let t = offers::attributed_as_the_reports_attribute(&store, seed).await;
        if t.last().is_some_and(|l| l != "attributed rows 0") {
            credited += 1;
        }
    }
    assert!(
        credited >= 4,
        "streams whose orders are credited: {credited}"
    );
}

#[tokio::test]
async fn tallies_embedded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = EmbeddedStore::open(&EmbeddedStore::path(dir.path())).expect("open");
    tallies::suite(&store).await;
}

/// A store the previous version wrote (facts, no `tallies` table) is counted into
/// tallies once, by the aggregator's first start on it.
#[tokio::test]
async fn embedded_stores_without_tallies_are_backfilled() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = EmbeddedStore::path(dir.path());
    ads::suite(&EmbeddedStore::open(&path).expect("open")).await;
    migration::drop_tallies(&path);
    let store = EmbeddedStore::open(&path).expect("open the previous version's store");
    tallies::backfilled_as_the_report_counts(&store).await;
}

/// A store the version before the cart lines' product tallies wrote (its rollups
/// count cart adds per campaign only; here: lines stored, their marker deleted): the carts-per-campaign report waits (503)
/// until the aggregator's first start counts the stored lines, then reads what the
/// facts' rollup counts; counting again changes nothing.
#[tokio::test]
async fn embedded_carts_of_the_previous_version_are_counted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = EmbeddedStore::path(dir.path());
    let store = EmbeddedStore::open(&path).expect("open");
    suite(&store).await;
    let want = store.cart_campaigns(&all()).await.expect("facts");
    assert!(want.iter().any(|r| r.carts_added > 0), "{want:?}");
    // The suite folds without log positions: no tally moved, as in a store of the
    // previous version.
    let sums = rm_store::sums::cart_campaign_report(&store, &all()).await;
    assert_eq!(sums.expect("tallies"), Vec::new());
    drop(store);
    migration::drop_cart_products(&path);
    let store = EmbeddedStore::open(&path).expect("open the previous version's store");
    let waiting = rm_store::sums::cart_campaign_report(&store, &all()).await;
    assert!(
        matches!(waiting, Err(rm_store::StoreError::Unavailable(_))),
        "{waiting:?}"
    );
    assert!(store.backfill_tallies().await.expect("backfill"));
    let sums = rm_store::sums::cart_campaign_report(&store, &all()).await;
    assert_eq!(sums.expect("tallies"), want);
    assert!(!store.backfill_tallies().await.expect("backfill"));
    assert_eq!(
        rm_store::sums::cart_campaign_report(&store, &all())
            .await
            .expect("tallies"),
        want
    );
}

/// A store the previous version wrote (no zoned quarter hours) and crashed in, then
/// upgraded mid-stream, counts as one folded by this version alone.
#[tokio::test]
async fn embedded_zones_of_the_previous_version_are_backfilled() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = EmbeddedStore::path(dir.path());
    let store = EmbeddedStore::open(&path).expect("open");
    let (_, got) = rollups::zones_backfilled_mid_stream(store, 1, |store| async {
        drop(store);
        migration::drop_zones(&path);
        EmbeddedStore::open(&path).expect("open the previous version's store")
    })
    .await;
    let fresh = tempfile::tempdir().expect("tempdir");
    let embedded = EmbeddedStore::open(&EmbeddedStore::path(fresh.path())).expect("open");
    let want = rollups::counted_as_the_reports_count(&embedded, 1, true).await;
    assert_eq!(got, want, "as folded by this version alone");
}

/// A store the previous version wrote (quarter hours, no hours) reads its zoned
/// reports from its quarters until the aggregator's start sums them into hours, then
/// the same from its hours.
#[tokio::test]
async fn embedded_hours_of_the_previous_version_are_backfilled() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = EmbeddedStore::path(dir.path());
    let store = EmbeddedStore::open(&path).expect("open");
    hours::hours_backfilled(store, 3, |store| async {
        drop(store);
        migration::drop_hours(&path);
        EmbeddedStore::open(&path).expect("open the previous version's store")
    })
    .await;
}

#[tokio::test]
async fn sales_stores_of_the_previous_version_are_converted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = EmbeddedStore::path(dir.path());
    let before = sales::suite(&EmbeddedStore::open(&path).expect("open")).await;
    migration::downgrade(&path);
    let store = EmbeddedStore::open(&path).expect("open the previous version");
    assert_eq!(sales::transcript(&store).await, before);
}

/// A store the previous version wrote (orders and touches, no orders' states, no
/// indexes by shopper, no rollups) has its orders indexed when opened and attributed
/// by the aggregator's first start.
#[tokio::test]
async fn embedded_sales_of_the_previous_version_are_attributed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = EmbeddedStore::path(dir.path());
    sales::suite(&EmbeddedStore::open(&path).expect("open")).await;
    migration::drop_tallies(&path);
    migration::drop_sales_state(&path);
    let store = EmbeddedStore::open(&path).expect("open the previous version's store");
    sales::backfilled_as_the_report_attributes(&store).await;
}

async fn drop_database(url: &str, db: &str) {
    let client = clickhouse::Client::default()
        .with_url(url)
        .with_validation(false);
    client
        .query("DROP DATABASE IF EXISTS ?")
        .bind(clickhouse::sql::Identifier(db))
        .execute()
        .await
        .expect("drop test database");
}

/// The server URL in `var`, or `None` (the test is skipped) when it is not set;
/// a missing server fails the test when `RM_REQUIRE_SERVICES=1`.
fn server_url(var: &str, server: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(u) if !u.is_empty() => Some(u),
        _ => {
            if std::env::var("RM_REQUIRE_SERVICES").as_deref() == Ok("1") {
                panic!("{var} is not set but RM_REQUIRE_SERVICES=1: {server} must be running (deploy/local/up.sh starts it)");
            }
            eprintln!("SKIPPED: {var} is not set; start {server} with deploy/local/up.sh to run this test");
            None
        }
    }
}

/// `SELECT version()` of the server at `url`.
async fn server_version(url: &str) -> String {
    clickhouse::Client::default()
        .with_url(url)
        .with_validation(false)
        .query("SELECT version()")
        .fetch_one::<String>()
        .await
        .expect("server version")
}

/// The settings of a database of its own on the server at `url`
/// (`rm_test_<what>_<pid>_<nanos>`), for a test to drop at its end.
fn fresh_database(url: &str, what: &str) -> ClickHouseConfig {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_nanos();
    ClickHouseConfig {
        url: Some(url.to_owned()),
        database: format!("rm_test_{what}_{}_{nanos}", std::process::id()),
        user: "default".into(),
        password: String::new(),
    }
}

/// Served ads' states are kept while their ad id is young and forgotten once it
/// expired before the batch's cutoff (on ClickHouse, by a mutation that lands soon
/// after the write).
async fn served_states_are_forgotten(store: &impl Store) {
    use rm_store::model::served::{ServedAd, Unit};
    let keys =
        rm_schemas::ad_id::AdIdKeys::new(vec![b"0123456789abcdef-key-one".to_vec()]).expect("keys");
    let now = chrono::Utc::now().timestamp();
    let old = keys.mint("c", "banner", now - 7 * 86_400).expect("mint");
    let young = keys.mint("c", "banner", now + 3_600).expect("mint");
    let mut state = ServedAd::default();
    assert!(state.take(Unit::AdClick, 7));
    let both: rm_store::FastSet<String> = [old.clone(), young.clone()].into_iter().collect();
    let none = rm_store::FastSet::default();
    store
        .write(&rm_store::BatchWrite {
            served: vec![(old.clone(), state.clone()), (young.clone(), state.clone())],
            ..rm_store::BatchWrite::default()
        })
        .await
        .expect("write");
    let held = || async {
        let sets = store
            .load(&Default::default(), &Default::default(), &both)
            .await
            .expect("load");
        let mut ids: Vec<String> = sets.served.keys().cloned().collect();
        ids.sort();
        ids
    };
    let mut want = vec![old.clone(), young.clone()];
    want.sort();
    assert_eq!(held().await, want);
    let loaded = store
        .load(&none, &Default::default(), &both)
        .await
        .expect("load");
    assert_eq!(loaded.served[&young], state, "the state reads back");
    store
        .write(&rm_store::BatchWrite {
            forget_served_before: Some(now - 86_400),
            ..rm_store::BatchWrite::default()
        })
        .await
        .expect("forget");
    let t = std::time::Instant::now();
    while held().await != vec![young.clone()] {
        assert!(
            t.elapsed() < std::time::Duration::from_secs(30),
            "the old state stays: {:?}",
            held().await
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn embedded_served_states_are_forgotten() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = EmbeddedStore::open(&EmbeddedStore::path(dir.path())).expect("open");
    served_states_are_forgotten(&store).await;
}

#[tokio::test]
async fn clickhouse_served_states_are_forgotten() {
    let Some(url) = server_url("RM_CLICKHOUSE_URL", "ClickHouse 18.16") else {
        return;
    };
    let config = fresh_database(&url, "served");
    let store = ClickHouseStore::connect(&config).await.expect("connect");
    served_states_are_forgotten(&store).await;
    drop_database(&url, &config.database).await;
}

/// The `rollups` table as the previous version created it: sorted by campaign first.
const PREVIOUS_ROLLUPS: &str = "CREATE TABLE IF NOT EXISTS rollups (
    campaign_id String, scope UInt8, grain UInt8, bucket Int32, creative String,
    catalog_id String, product_code String, log_partition Int32, metric UInt16,
    value Int64, stamp UInt64
) ENGINE = ReplacingMergeTree(stamp)
ORDER BY (campaign_id, scope, grain, bucket, creative, catalog_id, product_code, log_partition, metric)";

/// A `rollups` table of the previous version, written to as that version wrote, is
/// re-sorted at the aggregator's start with every tally kept (the same transcript as
/// the embedded store's for the stream); a table an interrupted conversion left is
/// copied back and dropped without changing a count.
async fn rollups_of_the_previous_order_are_re_sorted(url: &str) {
    let config = fresh_database(url, "resort");
    let server = clickhouse::Client::default()
        .with_url(url.to_owned())
        .with_validation(false);
    server
        .query("CREATE DATABASE IF NOT EXISTS ?")
        .bind(clickhouse::sql::Identifier(&config.database))
        .execute()
        .await
        .expect("create database");
    let client = server.with_database(config.database.clone());
    client
        .query_raw(PREVIOUS_ROLLUPS)
        .execute()
        .await
        .expect("the previous table");
    let sorting_key = || async {
        client
            .query(
                "SELECT sorting_key FROM system.tables \
                 WHERE database = currentDatabase() AND name = 'rollups'",
            )
            .fetch_one::<String>()
            .await
            .expect("sorting key")
    };
    assert!(sorting_key().await.starts_with("campaign_id"));
    let store = ClickHouseStore::connect(&config).await.expect("connect");
    let converted = rollups::counted_across_a_resort(&store, 1).await;
    assert!(
        sorting_key()
            .await
            .replace(' ', "")
            .starts_with("scope,grain,bucket"),
        "{}",
        sorting_key().await
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let embedded = EmbeddedStore::open(&EmbeddedStore::path(dir.path())).expect("open");
    let want = rollups::counted_as_the_reports_count(&embedded, 1, true).await;
    assert_eq!(converted, want, "the re-sorted rollups count as before");
    // A conversion stopped after its rename: the earlier table, renamed away, still
    // holds (copies of) the rows.
    client
        .query_raw(&PREVIOUS_ROLLUPS.replacen("rollups (", "rollups_presort (", 1))
        .execute()
        .await
        .expect("a leftover table");
    client
        .query_raw("INSERT INTO rollups_presort SELECT * FROM rollups")
        .execute()
        .await
        .expect("its rows");
    store.backfill_tallies().await.expect("backfill");
    let left: u64 = client
        .query(
            "SELECT count() FROM system.tables WHERE database = currentDatabase() \
             AND name IN ('rollups_presort', 'rollups_sorted')",
        )
        .fetch_one()
        .await
        .expect("tables");
    assert_eq!(left, 0, "the leftover is dropped");
    let mut again = rollups::transcript(&store, 1, false).await;
    again.extend(cart_lines::as_folded(&store, 1).await);
    assert_eq!(again, want, "copies of tallies change no count");
    drop_database(url, &config.database).await;
}

/// A store of the previous version (cart lines in `cart_events`, no `cart_lines`
/// table, no index marker): the carts report reads `cart_events` until the
/// aggregator's start indexes the lines, then reads the index, with the same lines.
async fn cart_lines_of_the_previous_version_are_indexed(url: &str) {
    let config = fresh_database(url, "lines");
    let store = ClickHouseStore::connect(&config).await.expect("connect");
    let want = rollups::counted_as_the_reports_count(&store, 1, false).await;
    let client = clickhouse::Client::default()
        .with_url(url.to_owned())
        .with_validation(false)
        .with_database(config.database.clone());
    let count = |sql: &'static str| {
        let client = client.clone();
        async move { client.query(sql).fetch_one::<u64>().await.expect(sql) }
    };
    assert!(count("SELECT count() FROM cart_lines").await > 0);
    // As the previous version left it.
    client
        .query("DROP TABLE cart_lines")
        .execute()
        .await
        .expect("drop");
    client
        .query("ALTER TABLE rollups DELETE WHERE metric = 251")
        .execute()
        .await
        .expect("delete the marker");
    for _ in 0..200 {
        if count("SELECT count() FROM rollups WHERE metric = 251").await == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let store = ClickHouseStore::connect(&config)
        .await
        .expect("connect again");
    assert_eq!(count("SELECT count() FROM cart_lines").await, 0);
    let before = cart_lines::as_folded(&store, 1).await;
    assert!(store.backfill_tallies().await.expect("backfill"), "indexed");
    assert!(count("SELECT count() FROM cart_lines").await > 0);
    let after = cart_lines::as_folded(&store, 1).await;
    assert_eq!(before, after, "the same lines, from the index");
    // Pages that read every day in slices of tracking ids (a large store's days).
    store.read_days_in_slices_above(0);
    let sliced = cart_lines::as_folded(&store, 1).await;
    assert_eq!(sliced, after, "the same lines, by slices");
    assert!(want.ends_with(&after), "as written by this version");
    drop_database(url, &config.database).await;
}

/// A client of `database` on the server at `url`.
fn database_client(url: &str, database: &str) -> clickhouse::Client {
    clickhouse::Client::default()
        .with_url(url.to_owned())
        .with_validation(false)
        .with_database(database.to_owned())
}

/// Deletes the rows of `rollups` that `doomed` selects and waits for the mutation.
async fn delete_rollups(client: &clickhouse::Client, doomed: &str) {
    delete_rows(client, "rollups", doomed).await;
}

/// Deletes the rows of `table` that `doomed` selects and waits for the mutation.
async fn delete_rows(client: &clickhouse::Client, table: &str, doomed: &str) {
    client
        .query(&format!("ALTER TABLE {table} DELETE WHERE {doomed}"))
        .execute()
        .await
        .expect("delete rows");
    let left = format!("SELECT count() FROM {table} WHERE {doomed}");
    for _ in 0..200 {
        if client.query(&left).fetch_one::<u64>().await.expect("count") == 0 {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("rows left after deleting {doomed}");
}

/// A store of the previous version (quarter hours, no hours, no hours' marker;
/// its closed days compacted, as an aggregator leaves them) reads its zoned reports
/// from its quarters, then the same from its backfilled hours (on the closed days,
/// the places the backfill flagged).
async fn hours_of_the_previous_version_are_backfilled(url: &str) {
    let config = fresh_database(url, "hours");
    let store = ClickHouseStore::connect(&config).await.expect("connect");
    let client = database_client(url, &config.database);
    let reconnect = config.clone();
    hours::hours_backfilled(store, 4, |store| async move {
        let open = store.compact_tallies(0).await.expect("compact");
        assert!(open.is_some(), "days closed");
        drop(store);
        let doomed = "grain = 2 OR metric = 249";
        delete_rows(&client, "rollups_closed", doomed).await;
        delete_rollups(&client, doomed).await;
        ClickHouseStore::connect(&reconnect)
            .await
            .expect("connect again")
    })
    .await;
    drop_database(url, &config.database).await;
}

/// A store of the previous version (no zoned quarter hours, no zones' marker), which
/// crashed mid-batch: upgraded mid-stream, it counts as one folded by this version
/// alone.
async fn zones_of_the_previous_version_are_backfilled(url: &str) {
    let config = fresh_database(url, "zones");
    let store = ClickHouseStore::connect(&config).await.expect("connect");
    let client = database_client(url, &config.database);
    let reconnect = config.clone();
    let (_, got) = rollups::zones_backfilled_mid_stream(store, 2, |store| async move {
        drop(store);
        delete_rollups(
            &client,
            "(grain = 1 AND scope IN (0, 3, 5)) OR metric = 250 OR grain = 2 OR metric = 249",
        )
        .await;
        ClickHouseStore::connect(&reconnect)
            .await
            .expect("connect again")
    })
    .await;
    let dir = tempfile::tempdir().expect("tempdir");
    let embedded = EmbeddedStore::open(&EmbeddedStore::path(dir.path())).expect("open");
    let want = rollups::counted_as_the_reports_count(&embedded, 2, true).await;
    assert_eq!(got, want, "as folded by this version alone");
    drop_database(url, &config.database).await;
}

/// ClickHouse 18.16 (Debian's `clickhouse-server`).
#[tokio::test]
async fn clickhouse() {
    if let Some(url) = server_url("RM_CLICKHOUSE_URL", "ClickHouse 18.16") {
        same_reports_as_embedded(url).await;
    }
}

/// The newest ClickHouse: 26.9, embedded in chDB behind `deploy/local/chdb/shim.py`.
#[tokio::test]
async fn clickhouse_newest() {
    let Some(url) = server_url(
        "RM_CLICKHOUSE_NEWEST_URL",
        "the chDB shim (ClickHouse 26.9)",
    ) else {
        return;
    };
    let version = server_version(&url).await;
    let major: u32 = version
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .expect("a version number");
    assert!(
        major >= 26,
        "RM_CLICKHOUSE_NEWEST_URL answers version {version}"
    );
    same_reports_as_embedded(url).await;
}

/// Runs every suite on the ClickHouse server at `url` (in a fresh database
/// `rm_test_suite_<pid>_<nanos>`, dropped at the end) and on the embedded store, and requires
/// equal transcripts; then the column upgrade at start and the error classes.
async fn same_reports_as_embedded(url: String) {
    eprintln!("ClickHouse {} at {url}", server_version(&url).await);
    let config = fresh_database(&url, "suite");
    let database = config.database.clone();
    let url2 = url.clone();
    let run = tokio::spawn(async move {
        let url = url2;
        // Connecting twice applies the DDL twice: harmless.
        ClickHouseStore::connect(&config).await.expect("connect");
        let store = ClickHouseStore::connect(&config)
            .await
            .expect("connect again");
        let from_clickhouse = suite(&store).await;

        let dir = tempfile::tempdir().expect("tempdir");
        let embedded = EmbeddedStore::open(&EmbeddedStore::path(dir.path())).expect("open");
        let from_embedded = suite(&embedded).await;
        assert_eq!(from_clickhouse.len(), from_embedded.len());
        for (c, e) in from_clickhouse.iter().zip(&from_embedded) {
            assert_eq!(c, e, "the backends disagree");
        }
        let sales_clickhouse = sales::suite(&store).await;
        let sales_embedded = sales::suite(&embedded).await;
        assert_eq!(sales_clickhouse.len(), sales_embedded.len());
        for (c, e) in sales_clickhouse.iter().zip(&sales_embedded) {
            assert_eq!(c, e, "the backends disagree on sales");
        }
        let ads_clickhouse = ads::suite(&store).await;
        let ads_embedded = ads::suite(&embedded).await;
        assert_eq!(ads_clickhouse.len(), ads_embedded.len());
        for (c, e) in ads_clickhouse.iter().zip(&ads_embedded) {
            assert_eq!(c, e, "the backends disagree on ads");
        }

        // The ads suite wrote facts without tallies, as the previous version did.
        drop_table(&config, "rollups").await;
        // And orders without states or an index by shopper, as it did.
        drop_table(&config, "order_credits").await;
        drop_table(&config, "order_shoppers").await;
        let reopened = ClickHouseStore::connect(&config).await.expect("connect");
        tallies::backfilled_as_the_report_counts(&reopened).await;
        sales::backfilled_as_the_report_attributes(&reopened).await;
        // The stored cart lines were counted at their products' places too.
        let want = reopened.cart_campaigns(&all()).await.expect("facts");
        assert!(want.iter().any(|r| r.carts_added > 0), "{want:?}");
        assert_eq!(
            rm_store::sums::cart_campaign_report(&reopened, &all())
                .await
                .expect("tallies"),
            want
        );
        let fresh = fresh_database(&url, "tallies");
        let tallied = ClickHouseStore::connect(&fresh).await.expect("connect");
        let tallies_clickhouse = tallies::suite(&tallied).await;
        drop_database(&url, &fresh.database).await;
        let dir = tempfile::tempdir().expect("tempdir");
        let tallies_embedded =
            tallies::suite(&EmbeddedStore::open(&EmbeddedStore::path(dir.path())).expect("open"))
                .await;
        assert_eq!(
            tallies_clickhouse, tallies_embedded,
            "the backends disagree on tallies"
        );
        for seed in [1, 2] {
            let fresh = fresh_database(&url, "rollups");
            let on_clickhouse = rollups::counted_as_the_reports_count(
                &ClickHouseStore::connect(&fresh).await.expect("connect"),
                seed,
                false,
            )
            .await;
            drop_database(&url, &fresh.database).await;
            let dir = tempfile::tempdir().expect("tempdir");
            let embedded = EmbeddedStore::open(&EmbeddedStore::path(dir.path())).expect("open");
            let on_embedded = rollups::counted_as_the_reports_count(&embedded, seed, true).await;
            assert_eq!(
                on_clickhouse, on_embedded,
                "the backends disagree on rollups"
            );
        }
        for seed in [1, 2] {
            let fresh = fresh_database(&url, "offers");
            let store = ClickHouseStore::connect(&fresh).await.expect("connect");
            offers::attributed_as_the_reports_attribute(&store, seed).await;
            drop_database(&url, &fresh.database).await;
        }
        // Compactions between the batches change no answer, and a closed day is
        // read from its sums: a tally written there without its flag (what no
        // writer does) is not seen.
        for seed in [3, 4] {
            let fresh = fresh_database(&url, "compacted");
            let store = ClickHouseStore::connect(&fresh).await.expect("connect");
            let compacted = Box::pin(rollups::counted_with_compactions(&store, seed)).await;
            let dir = tempfile::tempdir().expect("tempdir");
            let embedded = EmbeddedStore::open(&EmbeddedStore::path(dir.path())).expect("open");
            let want = rollups::counted_as_the_reports_count(&embedded, seed, true).await;
            assert_eq!(compacted, want, "seed {seed}: compacted");
            Box::pin(unflagged_writes_to_closed_days_are_not_read(&fresh, &store)).await;
            Box::pin(a_move_in_a_quiet_snapshots_second_is_not_counted_twice(
                &fresh, &store,
            ))
            .await;
            drop_database(&url, &fresh.database).await;
        }
        Box::pin(rollups_of_the_previous_order_are_re_sorted(&url)).await;
        Box::pin(cart_lines_of_the_previous_version_are_indexed(&url)).await;
        // Boxed: the futures of these steps would otherwise all live on the test
        // thread's stack at once, past its size.
        Box::pin(cart_layouts::line_days_of_the_previous_version_are_listed(
            &url,
        ))
        .await;
        Box::pin(cart_layouts::lines_of_the_previous_granules_are_rebuilt(
            &url,
        ))
        .await;
        Box::pin(quarter_days::quarters_of_the_previous_compactions_are_kept_by_day(&url)).await;
        Box::pin(quarter_days::hours_closed_mid_day_read_as_their_partitions(
            &url,
        ))
        .await;
        Box::pin(zones_of_the_previous_version_are_backfilled(&url)).await;
        Box::pin(hours_of_the_previous_version_are_backfilled(&url)).await;
        let raced = fresh_database(&url, "backfills");
        let store2 = ClickHouseStore::connect(&raced).await.expect("connect");
        tallies::the_first_of_two_backfills_wins(&store2).await;
        drop_database(&url, &raced.database).await;

        // A table created before `ad_id_status` existed gets the column at start.
        let client = clickhouse::Client::default()
            .with_url(url.clone())
            .with_database(config.database.clone())
            .with_validation(false);
        // (`product_facts` has `ad_id_status` in its sorting key, which cannot be
        // dropped.) Tables created before the traffic class, shopper and receive time
        // columns (issue 15) get them too.
        let products_before = store.products(&all()).await.expect("products");
        let sales_before = store
            .sales(&all(), &Windows::default())
            .await
            .expect("sales");
        let ads_before = store.ads(&all()).await.expect("ads");
        assert!(!ads_before.is_empty() && !products_before.is_empty());
        for (table, column, _) in rm_schemas::tables::ADDED_COLUMNS
            .into_iter()
            .filter(|c| (c.0, c.1) != ("product_facts", "ad_id_status"))
        {
            client
                .query_raw(&format!("ALTER TABLE {table} DROP COLUMN {column}"))
                .execute()
                .await
                .expect("drop column");
        }
        let upgraded = ClickHouseStore::connect(&config)
            .await
            .expect("connect adds columns");
        // Old order lines (only the Float64 `revenue`, no `revenue_exact` or
        // `currency`) read as that f64's decimal in USD: every sale as it was. The
        // money suite's EUR order (5.00) lost its currency with the dropped column,
        // so it now adds to the USD row of its product and day, as an old table
        // would have it: 59.97 + 5 = 64.97 exactly.
        let sales_after = upgraded
            .sales(&all(), &Windows::default())
            .await
            .expect("sales after upgrade");
        let (money_before, others_before): (Vec<_>, Vec<_>) = sales_before
            .into_iter()
            .partition(|r| r.catalog_id == "cat-3");
        let (money_after, others_after): (Vec<_>, Vec<_>) = sales_after
            .into_iter()
            .partition(|r| r.catalog_id == "cat-3");
        assert_eq!(others_after, others_before);
        assert_eq!(money_before.len(), 2, "{money_before:?}");
        let merged: Vec<(String, String, u64, u64)> = money_after
            .iter()
            .map(|r| {
                (
                    r.currency.to_string(),
                    r.revenue.to_string(),
                    r.orders,
                    r.units,
                )
            })
            .collect();
        assert_eq!(merged, [("USD".into(), "64.97".into(), 2, 5)]);
        // Old rows read as valid traffic without a receive time: every count as it was
        // before the served-ad rule, whose decisions an old table does not hold.
        assert_eq!(
            upgraded.ads(&all()).await.expect("ads after upgrade"),
            ads_before
                .into_iter()
                .map(ads_without_repeats)
                .collect::<Vec<_>>()
        );
        assert_eq!(
            upgraded
                .products(&all())
                .await
                .expect("products after upgrade"),
            products_before
                .into_iter()
                .map(products_without_repeats)
                .collect::<Vec<_>>()
        );
        let funnel = upgraded.funnel(&all()).await.expect("funnel after upgrade");
        assert!(
            funnel
                .iter()
                .all(|r| r.ad_id_status == AdIdStatus::Verified),
            "old rows read as verified"
        );

        // A schema problem is refused (a retry will not help) and the store stays
        // ready; an unreachable server is retryable.
        drop_table(&config, "views").await;
        let batch = batch1();
        let t = touched(&batch);
        let mut sets = store
            .load(&t.views, &t.carts, &t.served)
            .await
            .expect("load");
        let (write, _) = fold(&batch, &mut sets, &Policy::default());
        let e = store.write(&write).await.expect_err("views table is gone");
        assert!(!e.is_retryable(), "{e}");
        store
            .readiness()
            .expect("a refused write says nothing about the server");
        let nowhere = ClickHouseConfig {
            url: Some("http://127.0.0.1:1".into()),
            ..config.clone()
        };
        let e = ClickHouseStore::connect(&nowhere)
            .await
            .err()
            .expect("nothing listens on port 1");
        assert!(e.is_retryable(), "{e}");
    })
    .await;
    drop_database(&url, &database).await;
    if let Err(e) = run {
        std::panic::resume_unwind(e.into_panic());
    }
}

/// A tally row inserted straight into `rollups` on a closed day, without the flag a
/// writer writes first, changes no read; once flagged, the read sums its partitions
/// again and sees it.
async fn unflagged_writes_to_closed_days_are_not_read(
    config: &ClickHouseConfig,
    store: &ClickHouseStore,
) {
    let spend = || async {
        rm_store::billable_clicks(store, None)
            .await
            .expect("spend")
            .expect("counted")
    };
    let before = spend().await;
    let day = before.first().expect("billable clicks").clone();
    let client = clickhouse::Client::default()
        .with_url(config.url.clone().expect("url"))
        .with_database(config.database.clone())
        .with_validation(false);
    let code = rm_store::model::tallies::Metric::BILLABLE_CLICKS.code();
    // A tally row of `day` on log partition `partition`, and a flag of its place.
    let tally = |partition: i32, value: i64| {
        let q = client
            .query(
                "INSERT INTO rollups (campaign_id, scope, grain, bucket, creative, catalog_id, \
                 product_code, log_partition, metric, value, stamp) \
                 VALUES (?, 0, 0, ?, '', '', '', ?, ?, ?, 1)",
            )
            .bind(day.campaign_id.as_str())
            .bind(day.day)
            .bind(partition)
            .bind(code)
            .bind(value);
        async move { q.execute().await.expect("tally") }
    };
    let flag = |written: i64| {
        let q = client
            .query(
                "INSERT INTO rollups_late (written, campaign_id, scope, grain, bucket, \
                 creative, catalog_id, product_code) VALUES (?, ?, 0, 0, ?, '', '', '')",
            )
            .bind(written)
            .bind(day.campaign_id.as_str())
            .bind(day.day);
        async move { q.execute().await.expect("flag") }
    };
    // What moved between two reads: (campaign, day, by how much).
    let moved = |now: &[rm_store::model::tallies::DayTally],
                 then: &[rm_store::model::tallies::DayTally]|
     -> Vec<(String, i32, i64)> {
        now.iter()
            .zip(then)
            .filter(|(a, b)| a != b)
            .map(|(a, b)| (a.campaign_id.clone(), a.day, a.value - b.value))
            .collect()
    };
    tally(77, 1000).await;
    assert_eq!(spend().await, before, "a closed day is read from its sums");
    let now = chrono::Utc::now().timestamp_millis();
    flag(now).await;
    let after = spend().await;
    assert_eq!(
        moved(&after, &before),
        vec![(day.campaign_id.clone(), day.day, 1000)]
    );
    // The next compaction sums it into the closed day.
    store.compact_tallies(0).await.expect("compact");
    assert_eq!(spend().await, after);
    // Flags of days long before the snapshots are dropped by the next compaction.
    flag(86_400_000).await;
    store.compact_tallies(0).await.expect("compact");
    let old: u64 = client
        .query("SELECT count() FROM rollups_late WHERE written < 1000000000")
        .fetch_one()
        .await
        .expect("count");
    assert_eq!(old, 0, "old flags are dropped");
    assert_eq!(spend().await, after);
    // Another process's compaction (the aggregator's) leaves the snapshot this one
    // keeps for its next reads older: a change flagged and compacted meanwhile is
    // read all the same.
    let other = ClickHouseStore::connect(config).await.expect("connect");
    assert_eq!(spend().await, after, "keeps a snapshot");
    // As a writer does: the flag, then the tally.
    flag(chrono::Utc::now().timestamp_millis()).await;
    tally(78, 5).await;
    other.compact_tallies(0).await.expect("compact");
    let last = spend().await;
    assert_eq!(
        moved(&last, &after),
        vec![(day.campaign_id.clone(), day.day, 5)]
    );
}

/// A late change moving a count from a closed day to today (as a view's milestone or
/// an event's better copy does), written between a read's snapshot of a quiet store
/// and its read of the tallies, is never counted on both days: the snapshot (kept a
/// second for the reads after it) says no place was flagged, so the read leaves the
/// dirty part out and takes the closed day's sum; it then finds the flag written
/// meanwhile and reads again with it. (Without that second look the count shows on
/// today's partitions and in the closed day's sum at once.)
async fn a_move_in_a_quiet_snapshots_second_is_not_counted_twice(
    config: &ClickHouseConfig,
    store: &ClickHouseStore,
) {
    let spend = || async {
        rm_store::billable_clicks(store, None)
            .await
            .expect("spend")
            .expect("counted")
    };
    let client = clickhouse::Client::default()
        .with_url(config.url.clone().expect("url"))
        .with_database(config.database.clone())
        .with_validation(false);
    let code = rm_store::model::tallies::Metric::BILLABLE_CLICKS.code();
    let closed = spend().await.first().expect("billable clicks").clone();
    let today = rm_store::model::day_of(Utc::now().timestamp_millis());
    assert!(closed.day < today - 1, "the suite's days are closed");
    let campaign = closed.campaign_id.clone();
    // Log partition 79's tallies of the closed day and of today, in one insert (a
    // writer's batch), after the closed day's flag, as a writer writes them.
    let write = |on_closed: i64, stamp: u64| {
        let flag = client
            .query(
                "INSERT INTO rollups_late (written, campaign_id, scope, grain, bucket, \
                 creative, catalog_id, product_code) VALUES (?, ?, 0, 0, ?, '', '', '')",
            )
            .bind(Utc::now().timestamp_millis())
            .bind(campaign.as_str())
            .bind(closed.day);
        let tallies = client
            .query(
                "INSERT INTO rollups (campaign_id, scope, grain, bucket, creative, catalog_id, \
                 product_code, log_partition, metric, value, stamp) \
                 VALUES (?, 0, 0, ?, '', '', '', 79, ?, ?, ?), \
                 (?, 0, 0, ?, '', '', '', 79, ?, ?, ?)",
            )
            .bind(campaign.as_str())
            .bind(closed.day)
            .bind(code)
            .bind(on_closed)
            .bind(stamp)
            .bind(campaign.as_str())
            .bind(today)
            .bind(code)
            .bind(7 - on_closed)
            .bind(stamp);
        async move {
            flag.execute().await.expect("flag");
            tallies.execute().await.expect("tallies");
        }
    };
    let on = |tallies: &[rm_store::model::tallies::DayTally], day: i32| -> i64 {
        tallies
            .iter()
            .filter(|t| t.campaign_id == campaign && t.day == day)
            .map(|t| t.value)
            .sum()
    };
    let total = |tallies: &[rm_store::model::tallies::DayTally]| -> i64 {
        tallies.iter().map(|t| t.value).sum()
    };
    // The 7 counted on the closed day, then summed into its closed row.
    write(7, 1).await;
    store.compact_tallies(0).await.expect("compact");
    let base = spend().await;
    let mut within = 0;
    for stamp in 2..12u64 {
        // Quiet again: no flag since this compaction's snapshot.
        store.compact_tallies(0).await.expect("compact");
        let started = std::time::Instant::now();
        let before = spend().await;
        let on_closed = if stamp % 2 == 0 { 0 } else { 7 };
        write(on_closed, stamp).await;
        let after = spend().await;
        assert_eq!(total(&after), total(&base), "stamp {stamp}: counted once");
        assert_eq!(
            on(&after, closed.day),
            on(&base, closed.day) - 7 + on_closed
        );
        assert_eq!(on(&after, today), on(&base, today) + 7 - on_closed);
        assert_eq!(total(&before), total(&base));
        // Both reads within the snapshot's second: the second read took the quiet one.
        if started.elapsed() < std::time::Duration::from_millis(800) {
            within += 1;
        }
    }
    assert!(within > 0, "no move landed within a kept snapshot's second");
}

async fn drop_table(config: &ClickHouseConfig, table: &str) {
    let client = clickhouse::Client::default()
        .with_url(config.url.clone().expect("url"))
        .with_database(config.database.clone())
        .with_validation(false);
    client
        .query("DROP TABLE ?")
        .bind(clickhouse::sql::Identifier(table))
        .execute()
        .await
        .expect("drop table");
}

/// Ages a stream's rows, forgets its expired served ads (as the aggregator does),
/// then erases one shopper's aged rows and settles the erasure: the traces a search
/// of every table must not find (each shopper's raw id and hash, the erased
/// shopper's pseudonym and aged hash).
async fn aged_then_erased(
    store: &(impl erasure::Erasing + WriteStore),
) -> Vec<(&'static str, Vec<u8>)> {
    use rm_store::model::traffic::shopper_hash;
    let a = ageing::aged_past_retention(store).await;
    let now = chrono::Utc::now().timestamp_millis();
    // A served ad of now: the embedded store keeps its newest state whatever it is.
    let fresh = rm_schemas::ad_id::AdIdKeys::new(vec![b"a key of a served ad of now".to_vec()])
        .expect("key")
        .mint("c1", "banner", now / 1000 + 600)
        .expect("id");
    store
        .write(&rm_store::BatchWrite {
            served: vec![(fresh, rm_store::model::served::ServedAd::default())],
            ..rm_store::BatchWrite::default()
        })
        .await
        .expect("a served ad of now");
    store
        .write(&rm_store::BatchWrite {
            forget_served_before: Some(now / 1000),
            ..rm_store::BatchWrite::default()
        })
        .await
        .expect("forget the expired served ads");
    ageing::erased_after_ageing(store, &a).await;
    store.settle_erasures(now + 60_000).await.expect("settle");
    let mut traces = Vec::new();
    for id in ageing::SHOPPERS {
        traces.extend(erasure::traces_of(id, shopper_hash(id)));
    }
    traces.extend(erasure::traces_of(
        &a.pseudonym(erasure::ERASED),
        a.hash(shopper_hash(erasure::ERASED)),
    ));
    traces
}

/// The embedded store's ageing pass; then every table of its file, read whole,
/// holds no shopper's raw id, and no trace of the aged rows an erasure replaced.
#[tokio::test]
async fn embedded_ageing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = EmbeddedStore::path(dir.path());
    let store = EmbeddedStore::open(&path).expect("open");
    let traces = aged_then_erased(&store).await;
    drop(store);
    for (name, bytes) in rm_store::embedded::tables_content(&path).expect("every table") {
        assert_eq!(erasure::trace_of_in(&traces, &name, &bytes), None, "{name}");
    }
}

/// ClickHouse's ageing pass; then every table of the database, read whole as
/// tab-separated text, holds no shopper's raw id, and no trace of the aged rows an
/// erasure replaced.
async fn clickhouse_ageing(url: &str) {
    let config = fresh_database(url, "age");
    let store = ClickHouseStore::connect(&config).await.expect("connect");
    let traces = aged_then_erased(&store).await;
    for (name, bytes) in every_table(url, &config.database).await {
        assert_eq!(erasure::trace_of_in(&traces, &name, &bytes), None, "{name}");
    }
    drop_database(url, &config.database).await;
}

/// Every table of `database`, each as its name and its rows as tab-separated text:
/// what an audit searches for an id.
async fn every_table(url: &str, database: &str) -> Vec<(String, Vec<u8>)> {
    let client = clickhouse::Client::default()
        .with_url(url.to_owned())
        .with_validation(false)
        .with_database(database.to_owned());
    let tables: Vec<String> = client
        .query("SELECT name FROM system.tables WHERE database = currentDatabase()")
        .fetch_all()
        .await
        .expect("tables");
    assert!(tables.len() > 10, "every table: {tables:?}");
    let mut out = Vec::new();
    for name in tables {
        let bytes = client
            .query(&format!("SELECT * FROM {name}"))
            .fetch_bytes("TabSeparated")
            .expect("select")
            .collect()
            .await
            .expect("rows");
        out.push((name, bytes.to_vec()));
    }
    out
}

#[tokio::test]
async fn clickhouse_ageing_18() {
    if let Some(url) = server_url("RM_CLICKHOUSE_URL", "ClickHouse 18.16") {
        clickhouse_ageing(&url).await;
    }
}

#[tokio::test]
async fn clickhouse_ageing_newest() {
    if let Some(url) = server_url(
        "RM_CLICKHOUSE_NEWEST_URL",
        "the chDB shim (ClickHouse 26.9)",
    ) {
        clickhouse_ageing(&url).await;
    }
}

/// The embedded store's erasure; then every table of its file, read whole, holds no
/// trace of the id.
#[tokio::test]
async fn embedded_erasure() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = EmbeddedStore::path(dir.path());
    let store = EmbeddedStore::open(&path).expect("open");
    erasure::erased_as_asked(&store).await;
    drop(store);
    let tables = rm_store::embedded::tables_content(&path).expect("every table");
    assert!(tables.len() > 10, "every table: {}", tables.len());
    for (name, bytes) in tables {
        assert_eq!(erasure::trace_in(&name, &bytes), None, "{name}");
    }
}

/// ClickHouse's erasure; then every table of the database, read whole as
/// tab-separated text, holds no trace of the id.
async fn clickhouse_erasure(url: &str) {
    let config = fresh_database(url, "erase");
    let store = ClickHouseStore::connect(&config).await.expect("connect");
    erasure::erased_as_asked(&store).await;
    for (name, bytes) in every_table(url, &config.database).await {
        assert_eq!(erasure::trace_in(&name, &bytes), None, "{name}");
    }
    drop_database(url, &config.database).await;
}

#[tokio::test]
async fn clickhouse_erasure_18() {
    if let Some(url) = server_url("RM_CLICKHOUSE_URL", "ClickHouse 18.16") {
        clickhouse_erasure(&url).await;
    }
}

#[tokio::test]
async fn clickhouse_erasure_newest() {
    if let Some(url) = server_url(
        "RM_CLICKHOUSE_NEWEST_URL",
        "the chDB shim (ClickHouse 26.9)",
    ) {
        clickhouse_erasure(&url).await;
    }
}

/// The embedded store's fact retention (`store_suite/retention.rs`).
#[tokio::test]
async fn embedded_retention() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = EmbeddedStore::open(&EmbeddedStore::path(dir.path())).expect("open");
    retention::retired_past_retention(&store).await;
}

async fn clickhouse_retention(url: &str) {
    let config = fresh_database(url, "retire");
    let store = ClickHouseStore::connect(&config).await.expect("connect");
    retention::retired_past_retention(&store).await;
    drop_database(url, &config.database).await;
}

#[tokio::test]
async fn clickhouse_retention_18() {
    if let Some(url) = server_url("RM_CLICKHOUSE_URL", "ClickHouse 18.16") {
        clickhouse_retention(&url).await;
    }
}

#[tokio::test]
async fn clickhouse_retention_newest() {
    if let Some(url) = server_url(
        "RM_CLICKHOUSE_NEWEST_URL",
        "the chDB shim (ClickHouse 26.9)",
    ) {
        clickhouse_retention(&url).await;
    }
}
