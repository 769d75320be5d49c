//! A store written by the version before the zoned quarter hours keeps its video
//! funnel and campaign summary: opened by this version, they read in UTC by day as
//! that version answered them; in another zone or by hour they are unavailable until
//! the aggregator's start counts the campaigns', videos' and campaigns' sales' quarter
//! hours (`backfill_zones`), and then each count sits in its local hour.
//!
//! The fixture `fixtures/store-before-zones.redb` was written by the binary of fb36097
//! through its edge, api and aggregator (`fixtures/make-store-before-zones.sh`); the
//! `.funnel.json` and `.campaigns.json` beside it are what that version's api answered.

use chrono::{DateTime, FixedOffset, Timelike, Utc};
use rm_store::embedded::EmbeddedStore;
use rm_store::model::attribution::Windows;
use rm_store::model::periods::{self, Granularity, Periods};
use rm_store::{sums, ReportFilter, StoreError, WriteStore};
use serde_json::Value;

const FIXTURE: &str = "tests/fixtures/store-before-zones";

fn open_copy() -> (tempfile::TempDir, EmbeddedStore) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("store.redb");
    std::fs::copy(format!("{FIXTURE}.redb"), &path).expect("copy fixture");
    let store = EmbeddedStore::open(&path).expect("the old store opens");
    (dir, store)
}

/// The events' and the order's instants.
fn times() -> Vec<DateTime<Utc>> {
    std::fs::read_to_string(format!("{FIXTURE}.times.txt"))
        .expect("times")
        .lines()
        .map(|l| l.parse().expect("an instant"))
        .collect()
}

/// Rows as JSON objects without the columns named.
fn json<R: serde::Serialize>(rows: &[R], without: &[&str]) -> Vec<Value> {
    rows.iter()
        .map(|r| {
            let mut v = serde_json::to_value(r).expect("json");
            let o = v.as_object_mut().expect("an object");
            for c in without {
                o.remove(*c);
            }
            v
        })
        .collect()
}

/// What that version's api answered, without the columns named.
fn answered(report: &str, without: &[&str]) -> Vec<Value> {
    let text = std::fs::read_to_string(format!("{FIXTURE}.{report}.json")).expect("report");
    let v: Value = serde_json::from_str(&text).expect("json");
    json(v["rows"].as_array().expect("rows"), without)
}

/// The start of the hour of `t` in Asia/Kolkata (+05:30 all year), as `periodStart`.
fn kolkata_hour(t: DateTime<Utc>) -> String {
    let local = t.with_timezone(&FixedOffset::east_opt(5 * 3600 + 1800).expect("offset"));
    local
        .with_minute(0)
        .and_then(|l| l.with_second(0))
        .expect("an hour")
        .format("%Y-%m-%dT%H:%M:%S+05:30")
        .to_string()
}

#[tokio::test]
async fn the_previous_versions_reports_read_in_any_zone_once_backfilled() {
    let (_dir, store) = open_copy();
    let f = ReportFilter::default();
    let [events, order] = times()[..] else {
        panic!("two instants")
    };
    let day = rm_store::model::day_of(events.timestamp_millis());
    let utc = Periods::utc_days(day, day);
    // UTC by day reads at once, as that version answered (spend needs the bids).
    let funnel = sums::funnel_report(&store, &f, &utc).await.expect("funnel");
    assert_eq!(json(&funnel, &["periodStart"]), answered("funnel", &[]));
    let money = ["spend", "roas"];
    let summary = sums::campaign_summary(&store, &f, &utc, |_| None)
        .await
        .expect("summary");
    let mut without = money.to_vec();
    without.push("periodStart");
    assert_eq!(json(&summary, &without), answered("campaigns", &money));
    // By hour in Asia/Kolkata: unavailable until the zones' backfill.
    let kolkata = periods::zone("Asia/Kolkata").expect("zone");
    let hours = Periods::new(kolkata, Granularity::Hour, day, day + 1);
    for waiting in [
        sums::funnel_report(&store, &f, &hours).await.err(),
        sums::campaign_summary(&store, &f, &hours, |_| None)
            .await
            .err(),
    ] {
        assert!(
            matches!(waiting, Some(StoreError::Unavailable(_))),
            "{waiting:?}"
        );
    }
    // The aggregator's start: the other backfills were that version's.
    assert!(!store.backfill_tallies().await.expect("backfill"));
    assert!(!store
        .backfill_sales(&Windows::default())
        .await
        .expect("sales"));
    assert!(store.backfill_zones().await.expect("the zones' backfill"));
    assert!(!store.backfill_zones().await.expect("once"));
    // The view in its local hour.
    let by_hour = sums::funnel_report(&store, &f, &hours)
        .await
        .expect("funnel");
    assert_eq!(by_hour.len(), 1, "{by_hour:?}");
    assert_eq!(by_hour[0].period_start, kolkata_hour(events));
    assert_eq!(
        json(&by_hour, &["periodStart", "day"]),
        json(&funnel, &["periodStart", "day"])
    );
    // Every count of the summary in the hour of its event, the order's in its own.
    let by_hour = sums::campaign_summary(&store, &f, &hours, |_| None)
        .await
        .expect("summary");
    let at = |campaign: &str, hour: &str| {
        by_hour
            .iter()
            .find(|r| r.campaign_id == campaign && r.period_start == hour)
            .cloned()
    };
    let products = at("demo-products", &kolkata_hour(events)).expect("the events' hour");
    assert_eq!(
        (
            products.impressions,
            products.clicks,
            products.product_impressions
        ),
        (1, 1, 1)
    );
    assert_eq!((products.product_clicks, products.carts_added), (1, 1));
    let sold = at("demo-products", &kolkata_hour(order)).expect("the order's hour");
    assert_eq!(sold.attributed_orders, 1);
    assert_eq!(sold.revenue.to_string(), "5.00");
    let video = at("demo-video", &kolkata_hour(events)).expect("the view's hour");
    assert_eq!((video.impressions, video.video_plays), (1, 1));
    assert_eq!(video.completion_rate, 1.0);
    let orders: u64 = by_hour.iter().map(|r| r.attributed_orders).sum();
    let impressions: u64 = by_hour.iter().map(|r| r.impressions).sum();
    assert_eq!((orders, impressions), (1, 2), "{by_hour:?}");
    // And by day in UTC, the same as before.
    let again = sums::campaign_summary(&store, &f, &utc, |_| None)
        .await
        .expect("summary");
    assert_eq!(again, summary);
}
