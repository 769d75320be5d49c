//! Ads served after the loop's bound, and places begun after it, are not looked up
//! (`rm_aggregator::fresh_ads`); the counts stay exact when the cache that stands
//! in for the look-up is dropped (a full cache) or lost (a restart). The real pipeline over the embedded log and
//! store: twenty served ads each seen by a first shopper, then by a second one
//! after the cache was dropped many times over, then by a third after a restart.
//! Each ad is one billable impression; the later shoppers' are repeats. An ad whose
//! state the cache dropped and that the loop then took for new would bill again; a
//! place whose tallies it dropped, taken for new, would lose its counts.

use std::sync::Arc;
use std::time::Duration;

use rm_aggregator::batch::Policy;
use rm_aggregator::loads::{Found, Need};
use rm_aggregator::pipeline::{self, PipelineOptions, Progress};
use rm_aggregator::source::EmbeddedSource;
use rm_eventlog::embedded::EmbeddedLog;
use rm_eventlog::EmbeddedLogConfig;
use rm_schemas::ad_id::{product_creative, AdIdKeys, DEFAULT_TTL_SECS};
use rm_schemas::{EventRecord, InteractionEvent, InteractionType as T};
use rm_store::embedded::EmbeddedStore;
use rm_store::model::tallies::{Grain, Kind, Metric, Scope, TallyQuery};
use rm_store::ReportStore;
use tokio_util::sync::CancellationToken;

#[path = "support/log.rs"]
mod log;
use log::{append, eventually, TOPIC};

/// The id of an ad served at `served_ms` (each call mints another served ad).
fn served_ad(keys: &AdIdKeys, n: usize, served_ms: i64) -> String {
    let expiry = served_ms / 1000 + DEFAULT_TTL_SECS;
    keys.mint(
        &format!("camp-{}", n % 3),
        &product_creative("sku-1"),
        expiry,
    )
    .expect("ad id")
}

/// A product impression by `shopper` of `ad`, at `at_ms` (received two seconds
/// later).
fn impression(ad: &str, at_ms: i64, shopper: &str) -> EventRecord {
    let at = chrono::DateTime::from_timestamp_millis(at_ms).expect("time");
    let e = InteractionEvent {
        session_id: Some(shopper.to_owned()),
        catalog_id: Some("cat".to_owned()),
        product_code: Some("sku-1".to_owned()),
        ..InteractionEvent::new(ad, T::ProductImpression, at.fixed_offset())
    };
    EventRecord::new(e, uuid::Uuid::now_v7(), at + chrono::Duration::seconds(2))
}

/// Product impressions in the store's tallies: (billable, invalid), the same by
/// UTC day and by quarter hour (the day places begin before the loop's bound and
/// are always looked up; the quarters' are not).
async fn impressions(store: &EmbeddedStore) -> (i64, i64) {
    let mut by = Vec::new();
    for grain in [Grain::Day, Grain::Quarter] {
        let q = TallyQuery::history(Scope::Product, grain, vec![Kind::ProductImpression]);
        let sums = store
            .tallies(&q)
            .await
            .expect("read tallies")
            .expect("a new store is counted");
        let mut out = (0, 0);
        for s in sums {
            match s.metric {
                Metric::Events(Kind::ProductImpression, None) => out.0 += s.value,
                Metric::Events(Kind::ProductImpression, Some(_)) => out.1 += s.value,
                _ => {}
            }
        }
        by.push(out);
    }
    assert_eq!(by[0], by[1], "by day and by quarter hour");
    by[0]
}

/// The loop over `log` into `store`: batches of five records, a cache of at most
/// one entity (dropped after every batch).
fn start(
    log: &EmbeddedLog,
    store: &Arc<EmbeddedStore>,
) -> (
    Arc<Progress>,
    CancellationToken,
    tokio::task::JoinHandle<Result<(), rm_aggregator::AggregatorError>>,
) {
    let opts = PipelineOptions {
        batch_max_records: 5,
        batch_max_wait: Duration::from_millis(20),
        batch_linger: Duration::ZERO,
        // Events dated at most ten minutes ahead: places begun after the bound and
        // that allowance are new too.
        policy: Policy {
            future_skew_ms: 600_000,
            ..Policy::default()
        },
        cache_max_entities: 1,
        served_retention: Duration::from_secs(48 * 3_600),
        erasures_every: Duration::from_secs(60),
        erasure_settle: Duration::from_secs(600),
        ageing: None,
        retention: None,
    };
    let source = EmbeddedSource::with_orders(log.clone(), "g", TOPIC, "orders").expect("source");
    let progress = Arc::new(Progress::default());
    let stop = CancellationToken::new();
    let task = tokio::spawn(pipeline::run_with_progress(
        source,
        Arc::clone(store),
        "test",
        opts,
        stop.clone(),
        Arc::clone(&progress),
    ));
    (progress, stop, task)
}

/// Waits until the loop stored at least `n` records.
async fn stored(progress: &Arc<Progress>, n: u64) {
    eventually("the loop stores the records", || {
        let p = Arc::clone(progress);
        async move { p.records() >= n }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ads_taken_for_new_are_billed_once_through_dropped_caches_and_a_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Arc::new(EmbeddedStore::open(&dir.path().join("store.redb")).expect("store"));
    let log = EmbeddedLog::open(&dir.path().join("log.redb"), &EmbeddedLogConfig::default())
        .expect("log");
    let keys = AdIdKeys::new(vec![b"0123456789abcdef-fresh-ads".to_vec()]).expect("keys");
    // Ten hours ago, to the minute.
    let t0 = (chrono::Utc::now().timestamp_millis() / 60_000 - 600) * 60_000;
    let (progress, stop, task) = start(&log, &store);

    // Two ads served before the loop's records begin: the first batch finds no
    // progress stored, the second sets the bound (an hour and a lifetime after its
    // first record's receipt).
    for (n, at) in [(100, t0), (101, t0 + 1_000)] {
        let ad = served_ad(&keys, n, at);
        append(&log, &[impression(&ad, at + 60_000, "early")]).await;
        let want = (n - 99) as u64;
        stored(&progress, want).await;
    }
    // Twenty ads served three and four hours later, well after the bound (ten in
    // each hour, a minute apart): each one's first shopper, then a second shopper of
    // each, in batches that alternate between the hours, so each batch's places
    // were dropped from the cache by the batch before it.
    let served = |n: usize| t0 + (3 + n as i64 / 10) * 3_600_000 + (n as i64 % 10) * 60_000;
    let order = [
        0, 1, 2, 3, 4, 10, 11, 12, 13, 14, 5, 6, 7, 8, 9, 15, 16, 17, 18, 19,
    ];
    let ads: Vec<String> = (0..20).map(|n| served_ad(&keys, n, served(n))).collect();
    let first: Vec<EventRecord> = order
        .iter()
        .map(|&n| impression(&ads[n], served(n) + 60_000, &format!("first-{n}")))
        .collect();
    append(&log, &first).await;
    stored(&progress, 22).await;
    assert_eq!(impressions(&store).await, (22, 0));
    // What the folds needed, by where they found it (`aggregator_loads_total`): each
    // record's served ad once, the two early ones and those at or before a dropped
    // one looked up, the first of the twenty not (nothing is cached).
    let served_ads = |p: &Progress, found| p.loads(Need::ServedAds, found);
    assert_eq!(served_ads(&progress, Found::Cache), 0);
    assert!(served_ads(&progress, Found::Store) >= 2);
    assert!(served_ads(&progress, Found::Nowhere) > 0);
    assert_eq!(
        served_ads(&progress, Found::Store) + served_ads(&progress, Found::Nowhere),
        22
    );
    assert!(progress.loads(Need::Tallies, Found::Nowhere) > 0);
    assert!(progress.loads(Need::Tallies, Found::Store) > 0);
    let second: Vec<EventRecord> = order
        .iter()
        .map(|&n| impression(&ads[n], served(n) + 120_000, &format!("second-{n}")))
        .collect();
    append(&log, &second).await;
    stored(&progress, 42).await;
    assert_eq!(
        impressions(&store).await,
        (22, 20),
        "a second shopper of a served ad is a repeat, its state dropped from the cache or not"
    );

    // A restart: a new loop, an empty cache, the same store.
    stop.cancel();
    task.await.expect("task").expect("pipeline ends cleanly");
    let (progress, stop, task) = start(&log, &store);
    let mut third = vec![impression(
        &served_ad(&keys, 102, served(0)),
        served(0) + 60_000,
        "late-start",
    )];
    third.extend((0..20).map(|n| impression(&ads[n], served(n) + 180_000, &format!("third-{n}"))));
    append(&log, &third).await;
    // (The restarted loop may read the last batch before the restart again.)
    stored(&progress, 21).await;
    eventually("the third shoppers are counted", || {
        let store = Arc::clone(&store);
        async move {
            let (billable, invalid) = impressions(&store).await;
            billable + invalid >= 63
        }
    })
    .await;
    assert_eq!(
        impressions(&store).await,
        (23, 40),
        "after a restart every earlier ad is looked up, and the new one counts once"
    );
    assert_eq!(served_ads(&progress, Found::Nowhere), 0);
    assert!(served_ads(&progress, Found::Store) >= 21);
    stop.cancel();
    task.await.expect("task").expect("pipeline ends cleanly");
}
