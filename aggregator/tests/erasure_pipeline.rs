//! The aggregator runs the erasures the api records and never stores an erased id
//! again (`rm_aggregator::erasures`): the real pipeline over the embedded log and
//! store. A shopper's cart and view are stored; an erasure is recorded; the running
//! loop runs it; records naming the id that arrive afterwards (still in the log, or
//! sent again) are stored under the replacement, the cart line keeping its history;
//! and a restarted loop still suppresses the id. Each time, running the erasure again
//! finds nothing left to replace: the id is nowhere in the store.

#[path = "support/log.rs"]
mod log;

use std::sync::Arc;
use std::time::Duration;

use rm_aggregator::batch::Policy;
use rm_aggregator::pipeline::{self, PipelineOptions, Progress};
use rm_aggregator::source::EmbeddedSource;
use rm_eventlog::embedded::EmbeddedLog;
use rm_eventlog::EmbeddedLogConfig;
use rm_schemas::{EventRecord, InteractionEvent, InteractionType as T};
use rm_store::embedded::EmbeddedStore;
use rm_store::model::erasure::Erasure;
use rm_store::{EraseStore, ReportFilter, ReportStore};
use tokio_util::sync::CancellationToken;

use log::{append, eventually, TOPIC};

const ERASED: &str = "cust-erase-me-7f3a";
const KEPT: &str = "cust-keep-me-19c2";

fn event(kind: T, customer: &str, units: Option<u64>) -> EventRecord {
    let now = chrono::Utc::now();
    let event = InteractionEvent {
        customer_id: Some(customer.into()),
        catalog_id: (kind == T::Cart).then(|| "cat".to_owned()),
        product_code: (kind == T::Cart).then(|| "sku-1".to_owned()),
        video_id: (kind != T::Cart).then(|| "vid-1".to_owned()),
        units,
        ..InteractionEvent::new("rm1.camp-1.ad-1", kind, now.fixed_offset())
    };
    EventRecord::new(event, uuid::Uuid::now_v7(), now)
}

struct Running {
    progress: Arc<Progress>,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<Result<(), rm_aggregator::AggregatorError>>,
}

fn start(store: &Arc<EmbeddedStore>, log: &EmbeddedLog) -> Running {
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
        retention: None,
    };
    let task = tokio::spawn(pipeline::run_with_progress(
        source,
        Arc::clone(store),
        "test",
        opts,
        stop.clone(),
        Arc::clone(&progress),
    ));
    Running {
        progress,
        stop,
        task,
    }
}

impl Running {
    async fn stored(&self, n: u64) {
        let p = Arc::clone(&self.progress);
        eventually("stored", || {
            let p = Arc::clone(&p);
            async move { p.records() >= n }
        })
        .await;
    }

    async fn stop(self) {
        self.stop.cancel();
        self.task
            .await
            .expect("task")
            .expect("pipeline ends cleanly");
    }
}

/// Nothing of the id is left: a run of the erasure finds nothing to replace.
async fn nowhere(store: &EmbeddedStore, e: &Erasure) {
    let left = store.erase(e).await.expect("erase");
    assert_eq!(left.total(), 0, "the id is stored again: {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn erased_ids_are_run_by_the_loop_and_never_stored_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log =
        EmbeddedLog::open(&dir.path().join("log"), &EmbeddedLogConfig::default()).expect("log");
    let store = Arc::new(EmbeddedStore::open(&dir.path().join("store.redb")).expect("store"));
    append(
        &log,
        &[
            event(T::Cart, ERASED, Some(1)),
            event(T::VideoPlay, ERASED, None),
            event(T::Cart, KEPT, Some(1)),
            event(T::VideoPlay, KEPT, None),
        ],
    )
    .await;
    let run = start(&store, &log);
    run.stored(4).await;

    let e = Erasure::new(
        uuid::Uuid::now_v7().to_string(),
        None,
        ERASED,
        "privacy".into(),
        chrono::Utc::now().timestamp_millis(),
        None,
    );
    store.request_erasure(&e).await.expect("record");
    eventually("the loop runs the erasure", || {
        let (store, id) = (Arc::clone(&store), e.request_id.clone());
        async move {
            store
                .erasure(&id)
                .await
                .expect("read")
                .is_some_and(|x| x.done_ms > 0)
        }
    })
    .await;
    let done = store
        .erasure(&e.request_id)
        .await
        .expect("read")
        .expect("recorded");
    assert_eq!((done.erased.cart_events, done.erased.views), (1, 1));

    // The shopper goes on: a cart change and a milestone name the id again.
    append(
        &log,
        &[
            event(T::Cart, ERASED, Some(3)),
            event(T::VideoFirstQuartile, ERASED, None),
        ],
    )
    .await;
    run.stored(6).await;
    let carts = store.carts(&ReportFilter::default()).await.expect("carts");
    let ids: Vec<&str> = carts.iter().map(|c| c.tracking_id.as_str()).collect();
    assert!(!ids.contains(&ERASED), "{ids:?}");
    assert!(ids.contains(&KEPT), "{ids:?}");
    let line = carts
        .iter()
        .find(|c| c.tracking_id == e.replacement)
        .expect("the line under the replacement");
    assert_eq!(
        (line.units, line.adds, line.increments),
        (3, 1, 1),
        "the line kept its history"
    );
    let funnel = store
        .funnel(&ReportFilter::default())
        .await
        .expect("funnel");
    let plays: u64 = funnel.iter().map(|r| r.plays).sum();
    let quartiles: u64 = funnel.iter().map(|r| r.first_quartiles).sum();
    // One served ad, one billable view: the erased shopper's, who played first. Its
    // served ad still names its taker (under the replacement's hash), so the later
    // milestone counts.
    assert_eq!(
        (plays, quartiles),
        (1, 1),
        "the view kept its billable unit"
    );
    nowhere(&store, &e).await;
    run.stop().await;

    // A restarted loop knows the erasure from the store.
    let run = start(&store, &log);
    append(&log, &[event(T::Cart, ERASED, Some(4))]).await;
    run.stored(1).await;
    nowhere(&store, &e).await;
    run.stop().await;
}
