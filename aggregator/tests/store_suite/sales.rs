//! The sales part of the store suite: attribution touches and order lines written as
//! the pipeline writes them (orders looked up by id first, every batch written twice),
//! and the sales report checked against values written out here, on both backends.
//!
//! Shoppers: `K1` (a customer id with a quote and a backslash), `K2`, session `S9`.
//! Events (campaign c1 = `AD1`, c2 = `AD2`; day D0 = 2026-11-18, D1 the day after):
//!
//! | event | shopper | what | when |
//! |---|---|---|---|
//! | E1 | K1 | impression AD1 cat-1/p1 | D0 09:00 |
//! | E2 | K1 | click AD2 cat-1/p1 | D0 08:00 |
//! | E3 | S9 | impression AD1 cat-1/p2 | D0 09:30 |
//! | E4 | K1 | creative click AD1 | D0 09:45 |
//! | E5 | K2 | click AD1 cat-2/p3 | D1 - 40 days (outside the click window) |
//! | E6 | K2 | impression AD2 cat-2/p3 | D1 09:00 |
//! | E7 | K1 + S9 | click AD2 cat-1/p2 | D1 08:00 (arrives after the order O5) |
//!
//! Orders and the credit each line must get:
//!
//! | order | shopper | day | lines -> credit |
//! |---|---|---|---|
//! | O1 | K1, S9 | D0 10:00 | p1 x2 20.0 -> E2 click c2; p2 x1 5.5 -> E3 view c1 (via the session) |
//! | O2 | K1, adIds [AD1] | D0 11:00 | p9 x1 7.25 -> E4 click c1; p1 x3 30.0 -> E4 click c1 (later than E2) |
//! | O3 | K2 | D1 10:00 | cat-2/p3 x4 12.0 -> E6 view c2 (E5 too old) |
//! | O4 | session `s-none` | D1 12:00 | p1 x1 3.0 -> unattributed |
//! | O5 | K1 | D1 09:00 | p2 x1 4.0 -> E7 click c2 (once E7 is stored) |
//! | O6 | K1 | D0 12:00 | p1 x1 10.0 and p1 x1 10.0 -> E2 click c2 |
//!
//! O1 is sent again later with other content (and twice in one batch): nothing moves.

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use rm_aggregator::batch::{fold, fold_orders, touched, OrderStats, Policy};
use rm_store::model::attribution::{SalesReportRow, Windows};
use rm_store::ReportFilter;

use crate::Store;
use rm_schemas::money::{self, Currency, Decimal};
use rm_schemas::order::{self, Order, OrderItem, OrderRecord};
use rm_schemas::{EventRecord, InteractionEvent, InteractionType as T};

use super::{at, event, filter, records, t, D0, D1, DAY0, DAY1};

/// The suite's served ads, of campaigns c1 and c2: others than the main suite's, so
/// its served-ad states (one billable event per thing an ad carries) are apart when
/// both suites share a store.
const AD1: &str = "rm1.c1.sales";
const AD2: &str = "rm1.c2.sales";

const HOUR: i64 = 3_600_000;
const K1: &str = "k'1\\";
const K2: &str = "k2";
const S9: &str = "s9";

fn touch(
    kind: T,
    ad: &str,
    who: (Option<&str>, Option<&str>),
    p: Option<(&str, &str)>,
    ms: i64,
) -> InteractionEvent {
    InteractionEvent {
        customer_id: who.0.map(Into::into),
        session_id: who.1.map(Into::into),
        catalog_id: p.map(|p| p.0.into()),
        product_code: p.map(|p| p.1.into()),
        ..event(kind, ad, ms)
    }
}

/// An order as the api writes it and the aggregator reads it back.
fn order(
    id: &str,
    who: (Option<&str>, Option<&str>),
    ms: i64,
    catalog: &str,
    ad_ids: &[&str],
    items: &[(&str, u64, &str)],
) -> OrderRecord {
    order_in(None, id, who, ms, catalog, ad_ids, items)
}

/// An order in `currency` (`None`: none named, the default USD).
fn order_in(
    currency: Option<&str>,
    id: &str,
    who: (Option<&str>, Option<&str>),
    ms: i64,
    catalog: &str,
    ad_ids: &[&str],
    items: &[(&str, u64, &str)],
) -> OrderRecord {
    let o = Order {
        id: id.into(),
        customer_id: who.0.map(Into::into),
        session_id: who.1.map(Into::into),
        order_date: at(ms),
        catalog_id: catalog.into(),
        team_id: Some("team".into()),
        ad_ids: ad_ids.iter().map(|a| (*a).to_owned()).collect(),
        order_items: items
            .iter()
            .map(|(p, q, r)| OrderItem {
                product_code: (*p).into(),
                quantity: *q,
                regular_unit_price: None,
                total_order_item_price_after_discounts: Decimal::from_str_exact(r)
                    .expect("a price"),
                ad_id: None,
                seller_id: None,
            })
            .collect(),
        currency: currency.map(|c| Currency::from_code(c).expect("a code")),
    };
    let received = DateTime::<Utc>::from_timestamp_millis(ms + 1_000).expect("time");
    order::parse_record(&order::record_at(&o, received)).expect("a record reads back")
}

fn batch_a() -> (Vec<EventRecord>, Vec<OrderRecord>) {
    let k1 = (Some(K1), None);
    let events = records(vec![
        touch(
            T::ProductImpression,
            AD1,
            k1,
            Some(("cat-1", "p1")),
            t(D0, 9 * HOUR),
        ),
        touch(
            T::ProductClick,
            AD2,
            k1,
            Some(("cat-1", "p1")),
            t(D0, 8 * HOUR),
        ),
        touch(
            T::ProductImpression,
            AD1,
            (None, Some(S9)),
            Some(("cat-1", "p2")),
            t(D0, 9 * HOUR + HOUR / 2),
        ),
        touch(
            T::CreativeClick,
            AD1,
            k1,
            None,
            t(D0, 9 * HOUR + 45 * 60_000),
        ),
        touch(
            T::ProductClick,
            AD1,
            (Some(K2), None),
            Some(("cat-2", "p3")),
            t(D1 - 40, 10 * HOUR),
        ),
        touch(
            T::ProductImpression,
            AD2,
            (Some(K2), None),
            Some(("cat-2", "p3")),
            t(D1, 9 * HOUR),
        ),
    ]);
    let orders = vec![
        order(
            "O1",
            (Some(K1), Some(S9)),
            t(D0, 10 * HOUR),
            "cat-1",
            &[],
            &[("p1", 2, "20.0"), ("p2", 1, "5.5")],
        ),
        order(
            "O2",
            k1,
            t(D0, 11 * HOUR),
            "cat-1",
            &[AD1],
            &[("p9", 1, "7.25"), ("p1", 3, "30.0")],
        ),
        // Ordered before its click (E7, batch B) is stored.
        order("O5", k1, t(D1, 9 * HOUR), "cat-1", &[], &[("p2", 1, "4.0")]),
    ];
    (events, orders)
}

fn batch_b() -> (Vec<EventRecord>, Vec<OrderRecord>) {
    let events = records(vec![touch(
        T::ProductClick,
        AD2,
        (Some(K1), Some(S9)),
        Some(("cat-1", "p2")),
        t(D1, 8 * HOUR),
    )]);
    let resent = order(
        "O1",
        (Some(K1), None),
        t(D1, 10 * HOUR),
        "cat-9",
        &[],
        &[("p1", 100, "999.0")],
    );
    let orders = vec![
        order(
            "O3",
            (Some(K2), None),
            t(D1, 10 * HOUR),
            "cat-2",
            &[],
            &[("p3", 4, "12.0")],
        ),
        order(
            "O4",
            (None, Some("s-none")),
            t(D1, 12 * HOUR),
            "cat-1",
            &[],
            &[("p1", 1, "3.0")],
        ),
        resent.clone(),
        order(
            "O6",
            (Some(K1), None),
            t(D0, 12 * HOUR),
            "cat-1",
            &[],
            &[("p1", 1, "10.0"), ("p1", 1, "10.0")],
        ),
        resent,
    ];
    (events, orders)
}

/// What the pipeline does with a batch (sets and known orders loaded from the store),
/// the write done twice.
async fn ingest(store: &impl Store, events: &[EventRecord], orders: &[OrderRecord]) -> OrderStats {
    let t = touched(events);
    let mut sets = store
        .load(&t.views, &t.carts, &t.served)
        .await
        .expect("load");
    let ids: HashSet<String> = orders.iter().map(|o| o.order.id.clone()).collect();
    let known = store.known_orders(&ids).await.expect("known orders");
    let (mut write, _) = fold(events, &mut sets, &Policy::default());
    let (lines, stats) = fold_orders(orders, &known);
    write.order_lines = lines;
    store.write(&write).await.expect("write");
    store.write(&write).await.expect("write again");
    stats
}

#[allow(clippy::too_many_arguments)]
fn row(
    campaign: &str,
    catalog: &str,
    product: &str,
    day: &str,
    orders: u64,
    units: u64,
    revenue: &str,
    credit: (u64, u64),
) -> SalesReportRow {
    SalesReportRow {
        campaign_id: campaign.into(),
        catalog_id: catalog.into(),
        product_code: product.into(),
        day: day.into(),
        orders,
        units,
        revenue: Decimal::from_str_exact(revenue).expect("revenue"),
        currency: money::DEFAULT_CURRENCY,
        click_attributions: credit.0,
        view_attributions: credit.1,
    }
}

async fn sales(store: &impl Store, f: &ReportFilter) -> Vec<SalesReportRow> {
    store
        .sales(f, &Windows::default())
        .await
        .expect("sales report")
}

/// Every sales report under a sweep of filters and windows, for comparing backends.
pub async fn transcript(store: &impl Store) -> Vec<String> {
    let mut out = Vec::new();
    for c in [None, Some(""), Some("c1"), Some("c2")] {
        for a in [None, Some(AD2)] {
            for cat in [None, Some("cat-2")] {
                for (from, to) in [(None, None), (Some(D1), None), (None, Some(D0))] {
                    for w in [
                        Windows::default(),
                        Windows::days(30, 0),
                        Windows::days(0, 1),
                    ] {
                        let f = filter(c, a, cat, from, to);
                        let rows = store.sales(&f, &w).await.expect("sales");
                        out.push(format!("{f:?} {w:?} {rows:?}"));
                    }
                }
            }
        }
    }
    out
}

/// The suite. Returns the transcript of the final reports.
pub async fn suite(store: &impl Store) -> Vec<String> {
    // Many absent ids (several IN lists), some needing escapes.
    let absent: HashSet<String> = (0..2_500).map(|i| format!("o'\\{i}")).collect();
    assert!(store.known_orders(&absent).await.expect("known").is_empty());
    assert!(sales(store, &ReportFilter::default()).await.is_empty());

    let (events, orders) = batch_a();
    let stats = ingest(store, &events, &orders).await;
    assert_eq!((stats.new, stats.duplicates), (3, 0));
    let ids: HashSet<String> = ["O1", "O2", "O5", "O3"].map(String::from).into();
    let known = store.known_orders(&ids).await.expect("known");
    assert_eq!(known, ["O1", "O2", "O5"].map(String::from).into());
    // O5 is stored before its click: unattributed for now.
    assert_eq!(
        sales(store, &filter(None, None, None, Some(D1), None)).await,
        vec![row("", "cat-1", "p2", DAY1, 1, 1, "4.0", (0, 0))]
    );

    let (events, orders) = batch_b();
    let stats = ingest(store, &events, &orders).await;
    assert_eq!((stats.new, stats.duplicates), (3, 2), "O1 re-sent twice");

    let all = vec![
        row("", "cat-1", "p1", DAY1, 1, 1, "3.0", (0, 0)),
        row("c1", "cat-1", "p1", DAY0, 1, 3, "30.0", (1, 0)),
        row("c1", "cat-1", "p2", DAY0, 1, 1, "5.5", (0, 1)),
        row("c1", "cat-1", "p9", DAY0, 1, 1, "7.25", (1, 0)),
        row("c2", "cat-1", "p1", DAY0, 2, 4, "40.0", (3, 0)),
        row("c2", "cat-1", "p2", DAY1, 1, 1, "4.0", (1, 0)),
        row("c2", "cat-2", "p3", DAY1, 1, 4, "12.0", (0, 1)),
    ];
    let check = |f: ReportFilter, which: &'static [usize]| {
        let want: Vec<SalesReportRow> = which.iter().map(|i| all[*i].clone()).collect();
        (f, want)
    };
    let cases = [
        check(ReportFilter::default(), &[0, 1, 2, 3, 4, 5, 6]),
        check(filter(Some("c1"), None, None, None, None), &[1, 2, 3]),
        check(filter(Some(""), None, None, None, None), &[0]),
        check(filter(None, Some(AD2), None, None, None), &[4, 5, 6]),
        check(filter(None, None, Some("cat-2"), None, None), &[6]),
        check(filter(None, None, None, Some(D1), None), &[0, 5, 6]),
        check(filter(None, None, None, None, Some(D0)), &[1, 2, 3, 4]),
        check(
            filter(Some("c2"), None, Some("cat-1"), Some(D0), Some(D0)),
            &[4],
        ),
    ];
    for (f, want) in &cases {
        assert_eq!(&sales(store, f).await, want, "{f:?}");
    }
    // No view window: the two view-credited lines are unattributed.
    let no_views = store
        .sales(&ReportFilter::default(), &Windows::days(30, 0))
        .await
        .expect("sales");
    assert_eq!(
        no_views,
        vec![
            row("", "cat-1", "p1", DAY1, 1, 1, "3.0", (0, 0)),
            row("", "cat-1", "p2", DAY0, 1, 1, "5.5", (0, 0)),
            row("", "cat-2", "p3", DAY1, 1, 4, "12.0", (0, 0)),
            all[1].clone(),
            all[3].clone(),
            all[4].clone(),
            all[5].clone(),
        ]
    );
    let before = transcript(store).await;

    // A restarted aggregator reading both batches again, in the other order.
    let (eb, ob) = batch_b();
    let (ea, oa) = batch_a();
    let replay = ingest(store, &eb, &ob).await;
    assert_eq!(replay.new, 0);
    let replay = ingest(store, &ea, &oa).await;
    assert_eq!(replay.new, 0);
    assert_eq!(sales(store, &ReportFilter::default()).await, all);
    let after = transcript(store).await;
    assert_eq!(before, after);

    // Exact money: three lines of 19.99 are 59.97 (not 59.97000000000001), and an
    // order in EUR of the same product and day is a row of its own.
    let money = vec![
        order_in(
            None,
            "M1",
            (None, Some("s-money")),
            t(D0, 14 * HOUR),
            "cat-3",
            &[],
            &[("p7", 1, "19.99"), ("p7", 1, "19.99"), ("p7", 1, "19.99")],
        ),
        order_in(
            Some("EUR"),
            "M2",
            (None, Some("s-money")),
            t(D0, 15 * HOUR),
            "cat-3",
            &[],
            &[("p7", 2, "5")],
        ),
    ];
    let stats = ingest(store, &[], &money).await;
    assert_eq!(stats.new, 2);
    let rows = sales(store, &filter(None, None, Some("cat-3"), None, None)).await;
    let eur = SalesReportRow {
        currency: Currency::from_code("EUR").expect("eur"),
        ..row("", "cat-3", "p7", DAY0, 1, 2, "5.00", (0, 0))
    };
    assert_eq!(
        rows,
        vec![eur, row("", "cat-3", "p7", DAY0, 1, 3, "59.97", (0, 0))]
    );
    let text: Vec<String> = rows
        .iter()
        .map(|r| {
            format!(
                "{} {}",
                r.currency,
                serde_json::to_value(r).expect("json")["revenue"]
            )
        })
        .collect();
    assert_eq!(text, [r#"EUR "5.00""#, r#"USD "59.97""#]);
    transcript(store).await
}

/// A store of the previous version (orders and touches, no orders' states, no sales
/// marker): its sales report from the rollups is unavailable until the aggregator's
/// first start attributes every stored order, and then equals the report attributed
/// at read time from the stored orders and touches, for every campaign, catalog and
/// day filter, as does the campaign summary's sales; a second start changes nothing.
pub async fn backfilled_as_the_report_attributes(store: &impl Store) {
    let w = Windows::default();
    assert!(
        rm_store::sums::sales_report(store, &ReportFilter::default(), &w)
            .await
            .is_err(),
        "not attributed yet"
    );
    assert!(store.backfill_sales(&w).await.expect("backfill"));
    // The aggregator's start goes on with the zones' backfill (the campaign summary's
    // sales by quarter hour, read below).
    assert!(store.backfill_zones().await.expect("the zones' backfill"));
    let check = || async {
        let mut rows = 0;
        for c in [None, Some(""), Some("c1"), Some("c2")] {
            for cat in [None, Some("cat-2")] {
                for (from, to) in [(None, None), (Some(D1), None), (None, Some(D0))] {
                    let f = filter(c, None, cat, from, to);
                    let tallied = rm_store::sums::sales_report(store, &f, &w)
                        .await
                        .expect("sales from the rollups");
                    let facts = store.sales(&f, &w).await.expect("sales from the facts");
                    assert_eq!(tallied, facts, "{f:?}");
                    rows += tallied.len();
                }
            }
        }
        assert!(rows > 10, "the suite's store has sales: {rows}");
        let (tallied, facts) = campaign_sales_both_ways(store).await;
        assert!(!facts.is_empty());
        assert_eq!(tallied, facts);
    };
    check().await;
    assert!(!store.backfill_sales(&w).await.expect("once"));
    assert!(!store.backfill_zones().await.expect("once"));
    check().await;
}

/// The campaign summary's sales per campaign, UTC day and currency, as the rollups
/// hold them and as the stored orders and touches attribute at read time (default
/// windows).
pub async fn campaign_sales_both_ways(
    store: &impl Store,
) -> (
    Vec<rm_store::model::campaigns::CampaignSalesRow>,
    Vec<rm_store::model::campaigns::CampaignSalesRow>,
) {
    use rm_store::model::tallies::{sales as sales_t, Grain, Scope, TallyQuery};
    let q = super::rollups::everything(Scope::CampaignSales, Grain::Day);
    let summed = store
        .tallies(&q)
        .await
        .expect("tallies")
        .expect("attributed");
    let facts = store
        .campaign_sales(&ReportFilter::default(), &Windows::default())
        .await
        .expect("campaign sales");
    let days = summed.iter().map(|s| s.place.bucket);
    let (first, last) = (days.clone().min().unwrap_or(0), days.max().unwrap_or(0));
    let periods = rm_store::model::periods::Periods::utc_days(first, last);
    let rows = sales_t::campaign_rows(&summed, &periods);
    // The quarter hours hold the same sales: summed into the same UTC days they are
    // the days' rows.
    let quarters = store
        .tallies(&TallyQuery {
            grain: Grain::Quarter,
            from: Grain::Quarter.bucket(Grain::Day.start_ms(first)),
            to: Grain::Quarter.bucket(Grain::Day.start_ms(last + 1)) - 1,
            ..q
        })
        .await
        .expect("tallies")
        .expect("counted by quarter hour");
    assert_eq!(sales_t::campaign_rows(&quarters, &periods), rows);
    (rows, facts)
}
