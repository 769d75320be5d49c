//! The aggregator removes raw facts past their retention (`rm_aggregator::retention`):
//! the real pipeline over the embedded log and store, with a retention of one day
//! (no look-back) and a pass every 200 ms. A shopper's cart and click dated three
//! days ago, and another's of now, are stored; the loop's pass removes the old
//! ones' raw rows (the carts report lists only today's line, the drill-down reads
//! only today's click, a second pass finds nothing) while every sum the reports
//! read keeps counting both.

#[path = "support/log.rs"]
mod log;

use std::sync::Arc;
use std::time::Duration;

use rm_aggregator::batch::Policy;
use rm_aggregator::pipeline::{self, PipelineOptions, Progress};
use rm_aggregator::retention::RetentionOptions;
use rm_aggregator::source::EmbeddedSource;
use rm_eventlog::embedded::EmbeddedLog;
use rm_eventlog::EmbeddedLogConfig;
use rm_schemas::{EventRecord, InteractionEvent, InteractionType as T};
use rm_store::embedded::EmbeddedStore;
use rm_store::model::DAY_MS;
use rm_store::{sums, EraseStore, ReportFilter, ReportStore};
use tokio_util::sync::CancellationToken;

use log::{append, eventually, TOPIC};

/// Shopper `who`'s event of `kind`, dated `days_ago` days before now.
fn event(who: &str, kind: T, days_ago: i64, units: Option<u64>) -> EventRecord {
    let now = chrono::Utc::now();
    let at = now - chrono::Duration::days(days_ago);
    let event = InteractionEvent {
        customer_id: Some(who.into()),
        catalog_id: Some("cat".into()),
        product_code: Some("sku-1".into()),
        units,
        ..InteractionEvent::new("rm1.camp-1.ad-1", kind, at.fixed_offset())
    };
    EventRecord::new(event, uuid::Uuid::now_v7(), now)
}

fn all() -> ReportFilter {
    ReportFilter::default()
}

/// The carts added, per the rollups (what the carts per campaign report reads).
async fn carts_added(store: &EmbeddedStore) -> u64 {
    let rows = sums::cart_campaign_report(store, &all())
        .await
        .expect("cart campaigns");
    rows.iter().map(|r| r.carts_added).sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_loop_removes_facts_past_their_retention() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log =
        EmbeddedLog::open(&dir.path().join("log"), &EmbeddedLogConfig::default()).expect("log");
    let store = Arc::new(EmbeddedStore::open(&dir.path().join("store.redb")).expect("store"));
    append(
        &log,
        &[
            event("cust-old", T::Cart, 3, Some(2)),
            event("cust-old", T::ProductClick, 3, None),
        ],
    )
    .await;
    let source = EmbeddedSource::with_orders(log.clone(), "g", TOPIC, "orders").expect("source");
    let progress = Arc::new(Progress::default());
    let stop = CancellationToken::new();
    let opts = PipelineOptions {
        batch_max_records: 100,
        batch_max_wait: Duration::from_millis(20),
        batch_linger: Duration::ZERO,
        policy: Policy::default(),
        cache_max_entities: 10_000,
        served_retention: Duration::from_secs(48 * 3_600),
        erasures_every: Duration::from_millis(100),
        erasure_settle: Duration::from_secs(600),
        ageing: None,
        retention: Some(RetentionOptions {
            retention: Duration::from_secs(86_400),
            look_back: Duration::ZERO,
            every: Duration::from_millis(200),
        }),
    };
    let task = tokio::spawn(pipeline::run_with_progress(
        source,
        Arc::clone(&store),
        "test",
        opts,
        stop.clone(),
        Arc::clone(&progress),
    ));
    let stored = |n: u64| {
        let p = Arc::clone(&progress);
        async move {
            eventually("stored", || {
                let p = Arc::clone(&p);
                async move { p.records() >= n }
            })
            .await;
        }
    };
    stored(2).await;
    // The new shopper's in a later batch: the newest cart line stays whatever its
    // age (its slot is the table's last), so the old one must not be it.
    append(
        &log,
        &[
            event("cust-new", T::Cart, 0, Some(1)),
            event("cust-new", T::ProductClick, 0, None),
        ],
    )
    .await;
    stored(4).await;

    eventually("the old line is removed", || {
        let store = Arc::clone(&store);
        async move {
            let lines = store.carts(&all()).await.expect("carts");
            lines.len() == 1 && lines[0].tracking_id == "cust-new"
        }
    })
    .await;
    let yesterday = rm_store::model::day_of(chrono::Utc::now().timestamp_millis() - DAY_MS);
    let facts = store.products(&all()).await.expect("products");
    assert!(
        facts
            .iter()
            .all(|r| rm_store::model::parse_day(&r.day) >= Some(yesterday)),
        "only the recent facts are left: {facts:?}"
    );
    assert!(!facts.is_empty(), "today's click stays");
    assert_eq!(carts_added(&store).await, 2, "the sums count both carts");

    // Every later pass finds nothing more.
    let again = store
        .retire(
            &RetentionOptions {
                retention: Duration::from_secs(86_400),
                look_back: Duration::ZERO,
                every: Duration::from_secs(1),
            }
            .pass(chrono::Utc::now().timestamp_millis()),
        )
        .await
        .expect("retire");
    assert_eq!(again.total(), 0, "{again:?}");
    stop.cancel();
    task.await.expect("task").expect("pipeline ends cleanly");
}
