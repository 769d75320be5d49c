//! The hours' backfill (issue 26). A store this version wrote, its hours and their
//! marker removed (what the version before them kept), reads every zoned report as
//! before, from its quarter hours (no 503 while it waits); after the aggregator's
//! start (the zones' and hours' backfills) it reads the same again, from its hours:
//! period by period, in zones of half and whole hours, so a plan with hours answers
//! as one without them on a real store.

use rm_store::model::periods::{self, Granularity, Periods};
use rm_store::model::tallies::{Grain, Scope};
use rm_store::sums;

use super::rollups::{counted_as_the_reports_count, everything, transcript};
use super::{all, Store};

/// The campaign summary's and the video funnel's rows, as text, over days
/// `from..=to` with a day to spare at each end: by day and by hour in Asia/Kolkata
/// (+05:30), by hour in Europe/Paris and in UTC, by week in Asia/Kathmandu (+05:45).
pub(crate) async fn zoned_reports(store: &impl Store, from: i32, to: i32) -> Vec<String> {
    let at = |zone: &str, g: Granularity| {
        Periods::new(periods::zone(zone).expect("zone"), g, from - 1, to + 1)
    };
    let cuts = [
        at("Asia/Kolkata", Granularity::Day),
        at("Asia/Kolkata", Granularity::Hour),
        at("Europe/Paris", Granularity::Hour),
        at("UTC", Granularity::Hour),
        at("Asia/Kathmandu", Granularity::Week),
    ];
    let mut out = Vec::new();
    for p in &cuts {
        let summary = sums::campaign_summary(store, &all(), p, |_| None)
            .await
            .expect("campaign summary");
        let funnel = sums::funnel_report(store, &all(), p).await.expect("funnel");
        assert!(!summary.is_empty() && !funnel.is_empty(), "{p:?}: rows");
        out.extend(summary.iter().map(|r| format!("{p:?} {r:?}")));
        out.extend(funnel.iter().map(|r| format!("{p:?} {r:?}")));
    }
    out
}

/// Folds stream `seed` into `store`, has `forget` remove its hours and their
/// marker, and checks the reads before, meanwhile and after the backfill (see the
/// module header). Returns the store.
pub(crate) async fn hours_backfilled<S, F, Fut>(store: S, seed: u64, forget: F) -> S
where
    S: Store,
    F: FnOnce(S) -> Fut,
    Fut: std::future::Future<Output = S>,
{
    let want = counted_as_the_reports_count(&store, seed, false).await;
    let days = store
        .tallies(&everything(Scope::Campaign, Grain::Day))
        .await
        .expect("read")
        .expect("counted");
    let buckets = days.iter().map(|s| s.place.bucket);
    let (from, to) = (
        buckets.clone().min().expect("days"),
        buckets.max().expect("days"),
    );
    let before = zoned_reports(&store, from, to).await;
    let hours = everything(Scope::Campaign, Grain::Hour);
    assert!(
        store
            .tallies(&hours)
            .await
            .expect("read")
            .is_some_and(|h| !h.is_empty()),
        "seed {seed}: the fold counts hours"
    );
    let store = forget(store).await;
    assert_eq!(
        store.tallies(&hours).await.expect("read"),
        None,
        "seed {seed}: the hours wait for their backfill"
    );
    assert_eq!(
        zoned_reports(&store, from, to).await,
        before,
        "seed {seed}: read from the quarter hours meanwhile"
    );
    assert!(!store.backfill_tallies().await.expect("backfill"));
    assert!(store.backfill_zones().await.expect("the hours' backfill"));
    assert!(!store.backfill_zones().await.expect("once"));
    assert_eq!(
        zoned_reports(&store, from, to).await,
        before,
        "seed {seed}: read from the backfilled hours"
    );
    let mut after = transcript(&store, seed, false).await;
    after.extend(super::cart_lines::as_folded(&store, seed).await);
    assert_eq!(after, want, "seed {seed}: as folded");
    store
}
