//! Raw facts removed past their retention (`rm_store::EraseStore::retire`), on
//! every backend, after a store holds a stream's events and orders (dated from
//! three days before `D0` to `D0`):
//!
//! - a pass with a cut before the stream removes nothing, and a rebuild under a
//!   recount floor that splits the stream (`D0`) reads as a rebuild of the whole
//!   store did: the days before the floor keep their counts, the rest are counted
//!   again from the same facts;
//! - a pass with a cut after the stream removes every raw row of every table (but
//!   the embedded store's newest view and cart line, kept for their slots): every
//!   report the api reads from the rollups reads as before, the reads of raw rows
//!   (drill-downs by served ad, the carts report's lines) find nothing, a rebuild
//!   (its floor after the stream) reads as before (not one count recounted from the
//!   facts that are gone), and a second pass removes nothing.

use std::future::Future;

use rm_store::model::attribution::Windows;
use rm_store::model::periods::{self, Granularity, Periods};
use rm_store::model::retention::Retirement;
use rm_store::model::DAY_MS;
use rm_store::sums;

use super::erasure::{same, Erasing};
use super::{all, D0};

/// A store `retail-media rebuild` can rebuild.
pub(crate) trait Rebuilt: Erasing {
    fn rebuild(&self) -> impl Future<Output = ()>;
}

impl Rebuilt for rm_store::embedded::EmbeddedStore {
    async fn rebuild(&self) {
        self.rebuild_tallies(Default::default(), &Default::default())
            .await
            .expect("rebuild");
    }
}

impl Rebuilt for rm_store::clickhouse::ClickHouseStore {
    async fn rebuild(&self) {
        self.rebuild_tallies(Default::default(), &Default::default())
            .await
            .expect("rebuild");
    }
}

/// What the api's reports read, all sums of the rollups: the stream's tallies (by
/// day, quarter hour, zone and page: `rollups::transcript`) and each report over
/// its days, in UTC and in Asia/Kolkata by week.
async fn sums(store: &impl Erasing) -> Vec<String> {
    let mut out = super::rollups::transcript(store, 3, false).await;
    let f = &all();
    let w = Windows::default();
    let kolkata = periods::zone("Asia/Kolkata").expect("zone");
    for p in [
        Periods::utc_days(D0 - 4, D0 + 1),
        Periods::new(kolkata, Granularity::Week, D0 - 4, D0 + 1),
    ] {
        let products = sums::product_report(store, f, &p).await.expect("products");
        let ads = sums::ad_report(store, f, &p).await.expect("ads");
        let funnel = sums::funnel_report(store, f, &p).await.expect("funnel");
        let summary = sums::campaign_summary(store, f, &p, |_| None)
            .await
            .expect("summary");
        out.extend([
            format!("{products:?}"),
            format!("{ads:?}"),
            format!("{funnel:?}"),
            format!("{summary:?}"),
        ]);
    }
    let sales = sums::sales_report(store, f, &w).await.expect("sales");
    let carts = sums::cart_campaign_report(store, f).await.expect("carts");
    out.extend([format!("{sales:?}"), format!("{carts:?}")]);
    out
}

/// What is read from the raw rows: the drill-downs' reads of views, product and ad
/// facts, and of orders and touches, and the carts reports' reads of cart lines;
/// how many rows each gives.
async fn raw(store: &impl Erasing) -> [usize; 6] {
    let f = &all();
    [
        store.funnel(f).await.expect("funnel").len(),
        store.products(f).await.expect("products").len(),
        store.ads(f).await.expect("ads").len(),
        store
            .sales(f, &Windows::default())
            .await
            .expect("sales")
            .len(),
        store.carts(f).await.expect("carts").len(),
        store.cart_campaigns(f).await.expect("cart campaigns").len(),
    ]
}

pub(crate) async fn retired_past_retention(store: &impl Rebuilt) {
    super::offers::attributed_as_the_reports_attribute(store, 3).await;
    store.rebuild().await;
    let rebuilt = sums(store).await;
    let rows = raw(store).await;
    assert!(
        rows.iter().all(|n| *n > 0),
        "the stream fills every report: {rows:?}"
    );

    // Nothing is that old; the floor splits the stream's days.
    let none = Retirement {
        before_ms: i64::from(D0 - 5) * DAY_MS,
        recount_from_ms: i64::from(D0) * DAY_MS,
    };
    let gone = store.retire(&none).await.expect("retire nothing");
    assert_eq!(gone.total(), 0, "nothing is that old: {gone:?}");
    same(&sums(store).await, &rebuilt, "a pass over nothing");
    store.rebuild().await;
    same(
        &sums(store).await,
        &rebuilt,
        "a rebuild under a floor in the stream",
    );
    assert_eq!(raw(store).await, rows, "no raw row went");

    // Everything is that old.
    let cut = (chrono::Utc::now().timestamp_millis() / DAY_MS + 2) * DAY_MS;
    let all_of_it = Retirement {
        before_ms: cut,
        recount_from_ms: cut,
    };
    let gone = store.retire(&all_of_it).await.expect("retire");
    for (what, n) in [
        ("views", gone.views),
        ("view facts", gone.view_facts),
        ("product facts", gone.product_facts),
        ("ad facts", gone.ad_facts),
        ("cart events", gone.cart_events),
        ("touches", gone.touches),
        ("order lines", gone.order_lines),
        ("order states", gone.order_states),
        ("orders by shopper", gone.order_shoppers),
    ] {
        assert!(n > 0, "the stream stores {what}: {gone:?}");
    }
    assert_eq!(gone.served_ads, 0, "served ads are forgotten on their own");
    same(&sums(store).await, &rebuilt, "every sum reads as before");
    // The embedded store keeps its newest view and cart line (their slots are the
    // tables' last): a served ad's funnel row and a cart line at most.
    let left = raw(store).await;
    let kept = [1, 0, 0, 0, 1, 1];
    assert!(
        left.iter().zip(kept).all(|(n, k)| *n <= k),
        "the raw rows go: {left:?}"
    );

    store.rebuild().await;
    same(
        &sums(store).await,
        &rebuilt,
        "a rebuild keeps the counts of the days whose facts are gone",
    );
    let again = store.retire(&all_of_it).await.expect("retire again");
    assert_eq!(again.total(), 0, "a second pass finds nothing: {again:?}");
}
