//! The ad part of the store suite: ad-level impressions and clicks, unverified ad ids
//! (`adIdStatus` on every row keyed by an ad id), impressions in the video funnel, and
//! the campaign summary, written as the pipeline writes them (every batch twice, sets
//! loaded back from the store) and checked against values written out here.
//!
//! Ads: `AD7` (campaign c7), `AD8` (c8), `EXT` (a foreign id: the empty campaign).
//! Day D0 = 2026-11-18, D1 the day after. Verdicts in brackets (none = verified).
//!
//! | event | shopper | what | when |
//! |---|---|---|---|
//! | I1 | sa | impression AD7 | D0 10:00, re-fired D0 10:05 and D1 09:00 [expired] |
//! | I2 | sb | impression AD7 | D0 11:00 |
//! | I3 | sc | impression AD7 [expired] | D0 12:00 |
//! | C1 | sa | click AD7 | D0 10:01, re-fired identically (another offset) |
//! | C2 | sb | click AD7 | D1 08:00 |
//! | I4, C3 | sd | impression and click AD8 [bad_signature] | D1 10:00, 10:01 |
//! | I5 | se | impression EXT [foreign] | D0 10:00 |
//! | V1 | sa | AD7 vid-7 creativeView, play, complete | D0 10:00 |
//! | V2 | sc | AD7 vid-7 creativeView, play [expired] | D0 12:00 |
//! | P1, P2 | cust-7 | AD7 cat-7/p7 impression, click [expired] | D0 10:10, 10:11 |
//! | K1 | cust-7 | cart AD7 cat-7/p7 2 units | D0 10:12 |
//! | K2 | cust-8 | cart AD8 cat-7/p8 1 unit [bad_signature] | D1 10:02 |
//!
//! Orders of cust-7 on D0: O7 (p7 8.0) and O8 (p7 4.0, p7 2.0), all credited to the
//! click P2 (c7). Campaign bids: c7 0.25, c8 0, the others unknown.
//!
//! AD7 is one served ad named by three shoppers: it yields one billable impression
//! (I1, the first to arrive) and one billable click (C1); I2 and C2 are its repeats
//! (`servedAdRepeat`; before the served-ad rule they were billable too).

use chrono::{Duration, FixedOffset};
use rm_aggregator::batch::{fold, fold_orders, touched, Policy};
use rm_store::model::ads::AdReportRow;
use rm_store::model::attribution::Windows;
use rm_store::model::campaigns::CampaignReportRow;
use rm_store::model::status::AdIdStatus;
use rm_store::model::traffic::InvalidCounts;
use rm_store::{campaign_report, ReportFilter};

use crate::Store;
use rm_schemas::money::{self, Decimal, Money};
use rm_schemas::order::{self, Order, OrderItem, OrderRecord};
use rm_schemas::record::UnverifiedAdId;
use rm_schemas::{EventRecord, InteractionEvent, InteractionType as T};

use super::{at, event, filter, records, t, D0, D1, DAY0, DAY1, TEN};

const AD7: &str = "rm1.c7.x";
const AD8: &str = "rm1.c8.x";
const EXT: &str = "ext-ad-1";
const MIN: i64 = 60_000;

fn with(e: InteractionEvent, session: Option<&str>, customer: Option<&str>) -> InteractionEvent {
    InteractionEvent {
        session_id: session.map(Into::into),
        customer_id: customer.map(Into::into),
        ..e
    }
}

fn ad(kind: T, ad: &str, session: &str, ms: i64) -> InteractionEvent {
    with(event(kind, ad, ms), Some(session), None)
}

fn vid(kind: T, session: &str, ms: i64) -> InteractionEvent {
    InteractionEvent {
        video_id: Some("vid-7".into()),
        ..ad(kind, AD7, session, ms)
    }
}

fn prod(kind: T, ms: i64) -> InteractionEvent {
    InteractionEvent {
        catalog_id: Some("cat-7".into()),
        product_code: Some("p7".into()),
        ..with(event(kind, AD7, ms), None, Some("cust-7"))
    }
}

fn cart(ad_id: &str, customer: &str, code: &str, units: u64, ms: i64) -> InteractionEvent {
    InteractionEvent {
        catalog_id: Some("cat-7".into()),
        product_code: Some(code.into()),
        units: Some(units),
        ..with(event(T::Cart, ad_id, ms), None, Some(customer))
    }
}

/// Records, each with the verdict the edge gave it.
fn verdicts(events: Vec<(InteractionEvent, Option<UnverifiedAdId>)>) -> Vec<EventRecord> {
    let (events, vs): (Vec<_>, Vec<_>) = events.into_iter().unzip();
    records(events)
        .into_iter()
        .zip(vs)
        .map(|(mut r, v)| {
            r.ad_id_verdict = v;
            r
        })
        .collect()
}

fn batch_a() -> Vec<EventRecord> {
    use UnverifiedAdId::*;
    let east2 = FixedOffset::east_opt(2 * 3600).expect("offset");
    let c1 = ad(T::AdClick, AD7, "sa", t(D0, TEN + MIN));
    let c1_again = InteractionEvent {
        timestamp: c1.timestamp.with_timezone(&east2),
        ..c1.clone()
    };
    verdicts(vec![
        (ad(T::AdImpression, AD7, "sa", t(D0, TEN)), None),
        (
            ad(T::AdImpression, AD7, "sc", t(D0, TEN + 120 * MIN)),
            Some(Expired),
        ),
        (c1, None),
        (c1_again, None),
        (ad(T::AdImpression, EXT, "se", t(D0, TEN)), Some(Foreign)),
        (vid(T::VideoCreativeView, "sa", t(D0, TEN)), None),
        (vid(T::VideoPlay, "sa", t(D0, TEN + 10)), None),
        (vid(T::VideoComplete, "sa", t(D0, TEN + 20)), None),
        (prod(T::ProductImpression, t(D0, TEN + 10 * MIN)), None),
        (prod(T::ProductClick, t(D0, TEN + 11 * MIN)), Some(Expired)),
        (cart(AD7, "cust-7", "p7", 2, t(D0, TEN + 12 * MIN)), None),
    ])
}

fn batch_b() -> Vec<EventRecord> {
    use UnverifiedAdId::*;
    verdicts(vec![
        // I1 re-fired on a re-render, then the next day after the ad expired.
        (ad(T::AdImpression, AD7, "sa", t(D0, TEN + 5 * MIN)), None),
        (
            ad(T::AdImpression, AD7, "sa", t(D1, TEN - 60 * MIN)),
            Some(Expired),
        ),
        (ad(T::AdImpression, AD7, "sb", t(D0, TEN + 60 * MIN)), None),
        (ad(T::AdClick, AD7, "sb", t(D1, TEN - 120 * MIN)), None),
        (
            ad(T::AdImpression, AD8, "sd", t(D1, TEN)),
            Some(BadSignature),
        ),
        (
            ad(T::AdClick, AD8, "sd", t(D1, TEN + MIN)),
            Some(BadSignature),
        ),
        (
            vid(T::VideoCreativeView, "sc", t(D0, TEN + 120 * MIN)),
            Some(Expired),
        ),
        (
            vid(T::VideoPlay, "sc", t(D0, TEN + 120 * MIN + 10)),
            Some(Expired),
        ),
        (
            cart(AD8, "cust-8", "p8", 1, t(D1, TEN + 2 * MIN)),
            Some(BadSignature),
        ),
    ])
}

fn order_rec(id: &str, ms: i64, items: &[&str]) -> OrderRecord {
    let o = Order {
        id: id.into(),
        customer_id: Some("cust-7".into()),
        session_id: None,
        order_date: at(ms),
        catalog_id: "cat-7".into(),
        team_id: None,
        ad_ids: Vec::new(),
        order_items: items
            .iter()
            .map(|revenue| OrderItem {
                product_code: "p7".into(),
                quantity: 1,
                regular_unit_price: None,
                total_order_item_price_after_discounts: dec(revenue),
                ad_id: None,
                seller_id: None,
            })
            .collect(),
        currency: None,
    };
    let received = at(ms + 1_000).with_timezone(&chrono::Utc);
    order::parse_record(&order::record_at(&o, received)).expect("a record reads back")
}

/// The pipeline's steps for one batch of events and orders, each write done twice.
async fn ingest(store: &impl Store, events: &[EventRecord], orders: &[OrderRecord]) -> u64 {
    let t = touched(events);
    let mut sets = store
        .load(&t.views, &t.carts, &t.served)
        .await
        .expect("load");
    let (mut write, stats) = fold(events, &mut sets, &Policy::default());
    let ids = orders.iter().map(|o| o.order.id.clone()).collect();
    let known = store.known_orders(&ids).await.expect("known orders");
    write.order_lines = fold_orders(orders, &known).0;
    store.write(&write).await.expect("write");
    store.write(&write).await.expect("write again");
    stats.unverified.values().sum()
}

#[allow(clippy::too_many_arguments)]
fn ad_row(
    campaign: &str,
    ad_id: &str,
    day: &str,
    billable: (u64, u64),
    not_billable: (u64, u64),
    status: AdIdStatus,
) -> AdReportRow {
    repeat_row(campaign, ad_id, day, billable, not_billable, (0, 0), status)
}

/// [`ad_row`] with a served ad's repeats (impressions, clicks) beside its unverified
/// ones (`not_billable`).
fn repeat_row(
    campaign: &str,
    ad_id: &str,
    day: &str,
    billable: (u64, u64),
    not_billable: (u64, u64),
    repeats: (u64, u64),
    status: AdIdStatus,
) -> AdReportRow {
    AdReportRow {
        campaign_id: campaign.into(),
        ad_id: ad_id.into(),
        day: day.into(),
        impressions: billable.0,
        clicks: billable.1,
        ctr: if billable.0 == 0 {
            0.0
        } else {
            billable.1 as f64 / billable.0 as f64
        },
        not_billable_impressions: not_billable.0 + repeats.0,
        not_billable_clicks: not_billable.1 + repeats.1,
        ad_id_status: status,
        // The suite's other not billable events are unverified ad ids.
        invalid_impressions: InvalidCounts {
            unverified_ad_id: not_billable.0,
            served_ad_repeat: repeats.0,
            ..InvalidCounts::default()
        },
        invalid_clicks: InvalidCounts {
            unverified_ad_id: not_billable.1,
            served_ad_repeat: repeats.1,
            ..InvalidCounts::default()
        },
    }
}

fn dec(s: &str) -> Decimal {
    Decimal::from_str_exact(s).expect("decimal")
}

fn bid(campaign: &str) -> Option<Money> {
    let usd = |s| Some(Money::new(dec(s), money::DEFAULT_CURRENCY));
    match campaign {
        "c7" => usd("0.25"),
        "c8" => usd("0"),
        _ => None,
    }
}

fn campaign_filter(c: &str) -> ReportFilter {
    filter(Some(c), None, None, None, None)
}

async fn campaigns(store: &impl Store, f: &ReportFilter) -> Vec<CampaignReportRow> {
    campaign_report(store, f, &Windows::default(), bid)
        .await
        .expect("campaign report")
}

/// Checks every new column and report against the values written out above.
async fn check(store: &impl Store) {
    use AdIdStatus::*;
    let ads7 = vec![
        repeat_row("c7", AD7, DAY0, (1, 1), (1, 0), (1, 0), Expired),
        repeat_row("c7", AD7, DAY1, (0, 0), (0, 0), (0, 1), Verified),
    ];
    assert_eq!(store.ads(&campaign_filter("c7")).await.expect("ads"), ads7);
    let f = filter(Some("c7"), None, None, Some(D1), None);
    assert_eq!(
        store.ads(&f).await.expect("ads"),
        ads7[1..].to_vec(),
        "I1 stays on D0"
    );
    let f = filter(None, Some(AD8), None, None, None);
    let ads8 = vec![ad_row("c8", AD8, DAY1, (0, 0), (1, 1), BadSignature)];
    assert_eq!(store.ads(&f).await.expect("ads"), ads8);
    let f = filter(None, Some(EXT), None, None, None);
    let ext = vec![ad_row("", EXT, DAY0, (0, 0), (1, 0), Foreign)];
    assert_eq!(store.ads(&f).await.expect("ads"), ext);

    let funnel = store.funnel(&campaign_filter("c7")).await.expect("funnel");
    assert_eq!(funnel.len(), 1);
    let r = &funnel[0];
    assert_eq!(
        (
            r.views,
            r.impressions,
            r.creative_views,
            r.plays,
            r.completes
        ),
        (1, 1, 1, 1, 1)
    );
    // V2's ad id had expired: beside the counts, not in them.
    assert_eq!((r.invalid_views, r.invalid_plays), (1, 1));
    assert_eq!((r.completion_rate, r.ad_id_status), (1.0, Expired));

    let products = store
        .products(&campaign_filter("c7"))
        .await
        .expect("products");
    assert_eq!(products.len(), 1);
    let p = &products[0];
    // The product click's ad id had expired: flagged, not counted (issue 15).
    assert_eq!((p.impressions, p.clicks, p.ad_id_status), (1, 0, Expired));
    assert_eq!(p.invalid_clicks.unverified_ad_id, 1);

    let f = filter(None, None, Some("cat-7"), None, None);
    let carts = store.carts(&f).await.expect("carts");
    let statuses: Vec<(&str, AdIdStatus)> = carts
        .iter()
        .map(|c| (c.tracking_id.as_str(), c.ad_id_status))
        .collect();
    assert_eq!(statuses, [("cust-7", Verified), ("cust-8", BadSignature)]);

    let c7 = vec![
        CampaignReportRow {
            campaign_id: "c7".into(),
            day: DAY0.into(),
            period_start: format!("{DAY0}T00:00:00Z"),
            impressions: 1,
            clicks: 1,
            ctr: 1.0,
            // I3's expired id and I2, the served ad's repeat.
            not_billable_impressions: 2,
            not_billable_clicks: 0,
            video_plays: 1,
            invalid_video_plays: 1,
            completion_rate: 1.0,
            product_impressions: 1,
            // Its ad id had expired: not valid, not counted.
            product_clicks: 0,
            carts_added: 1,
            invalid_carts_added: 0,
            attributed_orders: 2,
            revenue: dec("14.00"),
            currency: money::DEFAULT_CURRENCY,
            spend: Some(dec("0.25")),
            roas: Some(dec("56")),
        },
        CampaignReportRow {
            campaign_id: "c7".into(),
            day: DAY1.into(),
            period_start: format!("{DAY1}T00:00:00Z"),
            impressions: 0,
            // C2 is a repeat of the served ad: no click, no spend.
            clicks: 0,
            ctr: 0.0,
            not_billable_impressions: 0,
            not_billable_clicks: 1,
            video_plays: 0,
            invalid_video_plays: 0,
            completion_rate: 0.0,
            product_impressions: 0,
            product_clicks: 0,
            carts_added: 0,
            invalid_carts_added: 0,
            attributed_orders: 0,
            revenue: dec("0.00"),
            currency: money::DEFAULT_CURRENCY,
            spend: Some(dec("0")),
            roas: None,
        },
    ];
    assert_eq!(campaigns(store, &campaign_filter("c7")).await, c7);
    let f = filter(Some("c7"), None, None, None, Some(D0));
    assert_eq!(campaigns(store, &f).await, c7[..1].to_vec());
    let c8 = campaigns(store, &campaign_filter("c8")).await;
    assert_eq!(c8.len(), 1);
    let r = &c8[0];
    assert_eq!(
        (
            r.day.as_str(),
            r.impressions,
            r.clicks,
            r.carts_added,
            r.invalid_carts_added
        ),
        // K2's ad id did not verify: no cart added to c8 (before the rule: 1), one
        // beside.
        (DAY1, 0, 0, 0, 1)
    );
    assert_eq!(
        (r.spend, r.roas),
        (Some(dec("0")), None),
        "no bid spent, no ROAS"
    );
    let ext = campaigns(store, &campaign_filter("")).await;
    assert!(ext.iter().all(|r| r.spend.is_none() && r.roas.is_none()));
}

/// Every new report under a sweep of filters, for comparing backends.
pub async fn transcript(store: &impl Store) -> Vec<String> {
    let mut out = Vec::new();
    for c in [None, Some("c7"), Some("c8")] {
        for a in [None, Some(AD7)] {
            for from in [None, Some(D1)] {
                for to in [None, Some(D0)] {
                    let f = filter(c, a, None, from, to);
                    out.push(format!("{f:?} ads {:?}", store.ads(&f).await.expect("ads")));
                    out.push(format!(
                        "{f:?} funnel {:?}",
                        store.funnel(&f).await.expect("f")
                    ));
                    out.push(format!(
                        "{f:?} products {:?}",
                        store.products(&f).await.expect("p")
                    ));
                    out.push(format!(
                        "{f:?} carts {:?}",
                        store.carts(&f).await.expect("c")
                    ));
                    out.push(format!("{f:?} campaigns {:?}", campaigns(store, &f).await));
                }
            }
        }
    }
    out
}

/// The ad part of the suite. Returns the transcript of the final reports.
pub async fn suite(store: &impl Store) -> Vec<String> {
    let (a, b) = (batch_a(), batch_b());
    let orders = [
        order_rec("O7", t(D0, TEN + 180 * MIN), &["8.0"]),
        order_rec("O8", t(D0, TEN + 240 * MIN), &["4.0", "2.0"]),
    ];
    // Unverified events aggregated: I3, I5, P2 (batch a); the I1 copy, I4, C3, V2 x2,
    // K2 (batch b).
    assert_eq!(ingest(store, &a, &orders[..1]).await, 3);
    assert_eq!(ingest(store, &b, &orders[1..]).await, 6);
    check(store).await;
    let before = transcript(store).await;
    // Replays of both batches, in the other order, a day of delivery later.
    let late = |rs: &[EventRecord]| -> Vec<EventRecord> {
        rs.iter()
            .map(|r| EventRecord {
                received_at: r.received_at + Duration::hours(1),
                ..r.clone()
            })
            .collect()
    };
    ingest(store, &late(&b), &orders).await;
    ingest(store, &late(&a), &orders).await;
    check(store).await;
    let after = transcript(store).await;
    assert_eq!(before, after);
    after
}
