//! The pipeline commits a batch's offsets only after the store holds that batch, even
//! though it reads and folds the next batches while one is being written.
//!
//! The real pipeline, the embedded log and the embedded store; the store's writes are
//! held behind a gate (a wrapper behind the `Store` trait) so the test decides when
//! each write may land, and watches the committed offset in between. The consumer
//! lag is reported from the loop's start, while its start-up backfill is held too.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rm_aggregator::batch::Policy;
use rm_aggregator::pipeline::{self, PipelineOptions, Progress};
use rm_aggregator::source::EmbeddedSource;
use rm_eventlog::embedded::EmbeddedLog;
use rm_eventlog::{EmbeddedLogConfig, EventLog};
use rm_schemas::{EventRecord, InteractionEvent, InteractionType as T};
use rm_store::embedded::EmbeddedStore;
use rm_store::model::attribution::{Touch, Windows};
use rm_store::model::carts::CartKey;
use rm_store::model::erasure::{Erased, Erasure};
use rm_store::model::funnel::ViewKey;
use rm_store::model::tallies::sales::{OrderCredits, ShopperOrder};
use rm_store::model::tallies::{Place, PlaceTallies};
use rm_store::{
    Backend, BatchWrite, EntitySets, FastSet, ReportFilter, ReportStore, StoreError, WriteStore,
};
use std::collections::{BTreeSet, HashSet};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

const TOPIC: &str = "events";

/// The embedded store, each write waiting for a permit of `gate`, the start-up
/// backfill for one of `backfill`.
struct Gated {
    inner: EmbeddedStore,
    gate: Arc<Semaphore>,
    backfill: Arc<Semaphore>,
    /// Batches written.
    writes: AtomicUsize,
}

impl Backend for Gated {
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }
    fn readiness(&self) -> Result<(), String> {
        self.inner.readiness()
    }
}

impl WriteStore for Gated {
    async fn load(
        &self,
        views: &FastSet<ViewKey>,
        carts: &FastSet<CartKey>,
        served: &FastSet<String>,
    ) -> Result<EntitySets, StoreError> {
        self.inner.load(views, carts, served).await
    }
    async fn load_tallies(
        &self,
        places: &FastSet<Place>,
    ) -> Result<rm_store::FastMap<Place, PlaceTallies>, StoreError> {
        self.inner.load_tallies(places).await
    }
    async fn backfill_tallies(&self) -> Result<bool, StoreError> {
        let _permit = self.backfill.acquire().await.expect("gate open");
        self.inner.backfill_tallies().await
    }
    async fn known_orders(&self, ids: &HashSet<String>) -> Result<HashSet<String>, StoreError> {
        self.inner.known_orders(ids).await
    }
    async fn load_orders(
        &self,
        ids: &FastSet<String>,
    ) -> Result<rm_store::FastMap<String, OrderCredits>, StoreError> {
        self.inner.load_orders(ids).await
    }
    async fn touches_of(
        &self,
        shoppers: &BTreeSet<String>,
        from: i64,
        to: i64,
    ) -> Result<Vec<Touch>, StoreError> {
        self.inner.touches_of(shoppers, from, to).await
    }
    async fn orders_of(
        &self,
        shoppers: &BTreeSet<String>,
        from: i64,
        to: i64,
    ) -> Result<Vec<ShopperOrder>, StoreError> {
        self.inner.orders_of(shoppers, from, to).await
    }
    async fn backfill_sales(&self, w: &Windows) -> Result<bool, StoreError> {
        self.inner.backfill_sales(w).await
    }
    async fn backfill_zones(&self) -> Result<bool, StoreError> {
        self.inner.backfill_zones().await
    }
    async fn write(&self, batch: &BatchWrite) -> Result<(), StoreError> {
        let permit = self.gate.acquire().await.expect("gate open");
        permit.forget();
        self.writes.fetch_add(1, Ordering::AcqRel);
        self.inner.write(batch).await
    }
}

impl rm_store::EraseStore for Gated {
    async fn request_erasure(&self, e: &Erasure) -> Result<(), StoreError> {
        self.inner.request_erasure(e).await
    }
    async fn erasure(&self, request_id: &str) -> Result<Option<Erasure>, StoreError> {
        self.inner.erasure(request_id).await
    }
    async fn erasures_since(&self, since_ms: i64) -> Result<Vec<Erasure>, StoreError> {
        self.inner.erasures_since(since_ms).await
    }
    async fn erase(&self, e: &Erasure) -> Result<Erased, StoreError> {
        self.inner.erase(e).await
    }
    async fn finish_erasure(
        &self,
        e: &Erasure,
        done_ms: i64,
        erased: Erased,
    ) -> Result<(), StoreError> {
        self.inner.finish_erasure(e, done_ms, erased).await
    }
    async fn settle_erasures(&self, before_ms: i64) -> Result<usize, StoreError> {
        self.inner.settle_erasures(before_ms).await
    }
    async fn age(&self, a: &rm_store::model::ageing::Ageing) -> Result<Erased, StoreError> {
        self.inner.age(a).await
    }
    async fn retire(
        &self,
        r: &rm_store::model::retention::Retirement,
    ) -> Result<Erased, StoreError> {
        self.inner.retire(r).await
    }
}

/// Shopper `i`'s play of their own served ad, one per record: every record is a view.
fn play(i: u32) -> EventRecord {
    let now = chrono::Utc::now();
    let event = InteractionEvent {
        ad_id: format!("rm1.camp-1.ad-{i}"),
        interaction_type: T::VideoPlay,
        timestamp: now.fixed_offset(),
        session_id: Some(format!("s-{i}")),
        customer_id: None,
        dtm_token: None,
        video_id: Some("v-1".into()),
        product_code: None,
        catalog_id: None,
        creative_id: None,
        units: None,
        conversion_value: None,
        iab_consent_string: None,
    };
    EventRecord::new(event, uuid::Uuid::now_v7(), now)
}

/// Plays in the funnel report.
async fn plays(store: &Gated) -> u64 {
    let rows = store
        .inner
        .funnel(&ReportFilter::default())
        .await
        .expect("funnel");
    rows.iter().map(|r| r.plays).sum()
}

/// Polls `f` until it holds, for at most 10 s.
async fn eventually(what: &str, f: impl Fn() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < Duration::from_secs(10), "never: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The loop's settings: batches of at most `batch_max_records`, handed over at once
/// and at most 20 ms old.
fn options(batch_max_records: usize) -> PipelineOptions {
    PipelineOptions {
        batch_max_records,
        batch_max_wait: Duration::from_millis(20),
        batch_linger: Duration::ZERO,
        policy: Policy::default(),
        cache_max_entities: 10_000,
        served_retention: Duration::from_secs(48 * 3_600),
        erasures_every: Duration::from_secs(1),
        erasure_settle: Duration::from_secs(600),
        ageing: None,
        retention: None,
    }
}

/// The pipeline running over `log` into a gated embedded store under `dir`, with
/// batches of at most `batch_max_records`.
struct Running {
    store: Arc<Gated>,
    progress: Arc<Progress>,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<Result<(), rm_aggregator::AggregatorError>>,
}

impl Running {
    fn start(
        dir: &std::path::Path,
        log: &EmbeddedLog,
        gate: Arc<Semaphore>,
        batch_max_records: usize,
    ) -> Self {
        let open = Arc::new(Semaphore::new(Semaphore::MAX_PERMITS));
        Self::start_held(dir, log, gate, open, batch_max_records)
    }

    /// As [`Running::start`], the start-up backfill waiting for a permit of
    /// `backfill`.
    fn start_held(
        dir: &std::path::Path,
        log: &EmbeddedLog,
        gate: Arc<Semaphore>,
        backfill: Arc<Semaphore>,
        batch_max_records: usize,
    ) -> Self {
        Self::start_with(dir, log, gate, backfill, options(batch_max_records))
    }

    /// As [`Running::start`], batches bounded by `max_wait` and lingering `linger`.
    fn start_timed(
        dir: &std::path::Path,
        log: &EmbeddedLog,
        gate: Arc<Semaphore>,
        max_wait: Duration,
        linger: Duration,
    ) -> Self {
        let open = Arc::new(Semaphore::new(Semaphore::MAX_PERMITS));
        let opts = PipelineOptions {
            batch_max_wait: max_wait,
            batch_linger: linger,
            ..options(1_000)
        };
        Self::start_with(dir, log, gate, open, opts)
    }

    fn start_with(
        dir: &std::path::Path,
        log: &EmbeddedLog,
        gate: Arc<Semaphore>,
        backfill: Arc<Semaphore>,
        opts: PipelineOptions,
    ) -> Self {
        let store = Arc::new(Gated {
            inner: EmbeddedStore::open(&dir.join("store.redb")).expect("store"),
            gate,
            backfill,
            writes: AtomicUsize::new(0),
        });
        let source =
            EmbeddedSource::with_orders(log.clone(), "g", TOPIC, "orders").expect("source");
        let progress = Arc::new(Progress::default());
        let stop = CancellationToken::new();
        let task = tokio::spawn(pipeline::run_with_progress(
            source,
            Arc::clone(&store),
            "test",
            opts,
            stop.clone(),
            Arc::clone(&progress),
        ));
        Self {
            store,
            progress,
            stop,
            task,
        }
    }

    async fn stop(self) {
        self.stop.cancel();
        self.task
            .await
            .expect("task")
            .expect("pipeline ends cleanly");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offsets_are_committed_only_after_the_store_holds_the_batch() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = EmbeddedLog::open(&dir.path().join("log.redb"), &EmbeddedLogConfig::default())
        .expect("log");
    for i in 0..10 {
        log.append(TOPIC, b"k", play(i).to_bytes())
            .await
            .expect("append");
    }
    let gate = Arc::new(Semaphore::new(0));
    let run = Running::start(dir.path(), &log, Arc::clone(&gate), 4);
    let (store, progress) = (&run.store, &run.progress);
    let committed = || log.committed("g", TOPIC).expect("committed");

    // The reader runs ahead (batches 2 and 3 read and folded) while batch 1's write
    // waits: nothing is committed, nothing counts as stored.
    eventually("the reader reads ahead of the blocked write", || {
        progress.polled() >= 8
    })
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(committed(), 0);
    assert_eq!(progress.records(), 0);

    // Batch 1 lands: its 4 offsets are committed, not the ones read after it.
    gate.add_permits(1);
    eventually("batch 1 committed", || committed() == 4).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(committed(), 4);
    assert_eq!(progress.records(), 4);
    assert_eq!(plays(store).await, 4);

    // The rest lands: everything committed once, every play counted once.
    gate.add_permits(100);
    eventually("all committed", || committed() == 10).await;
    eventually("all stored", || progress.records() == 10).await;
    assert_eq!(plays(store).await, 10);
    run.stop().await;
}

/// While the store is busy with a write, the reader gathers what arrives into the
/// next batch until the loop asks for one, instead of cutting a batch per poll or
/// per wait: forty records that come one by one during a held write are stored in
/// three writes, long before the batches' time bound (a minute) runs out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_gathers_while_the_store_is_busy() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = EmbeddedLog::open(&dir.path().join("log.redb"), &EmbeddedLogConfig::default())
        .expect("log");
    let gate = Arc::new(Semaphore::new(0));
    let run = Running::start_timed(
        dir.path(),
        &log,
        Arc::clone(&gate),
        Duration::from_secs(60),
        Duration::ZERO,
    );
    let (store, progress) = (&run.store, &run.progress);
    log.append(TOPIC, b"k", play(0).to_bytes())
        .await
        .expect("append");
    eventually("the first batch's write is held", || {
        store.writes.load(Ordering::Acquire) == 0 && progress.polled() == 1
    })
    .await;
    for i in 1..=40 {
        log.append(TOPIC, b"k", play(i).to_bytes())
            .await
            .expect("append");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    eventually("the reader read them all", || progress.polled() == 41).await;
    gate.add_permits(1_000);
    eventually("all stored", || progress.records() == 41).await;
    assert_eq!(plays(store).await, 41);
    // The held batch, one folded and waiting for it, one gathered meanwhile.
    let writes = store.writes.load(Ordering::Acquire);
    assert!(writes <= 3, "{writes} writes for 41 records");
    run.stop().await;
}

/// On a quiet log a batch lingers before it is handed over, so records that come
/// close together are stored in one write rather than one each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_lingers_on_a_quiet_log() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = EmbeddedLog::open(&dir.path().join("log.redb"), &EmbeddedLogConfig::default())
        .expect("log");
    let gate = Arc::new(Semaphore::new(1_000));
    let run = Running::start_timed(
        dir.path(),
        &log,
        gate,
        Duration::from_secs(60),
        Duration::from_secs(2),
    );
    // The loop's start-up (backfills, a first look for erasures) is done.
    tokio::time::sleep(Duration::from_millis(300)).await;
    for i in 0..5 {
        log.append(TOPIC, b"k", play(i).to_bytes())
            .await
            .expect("append");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    eventually("all stored", || run.progress.records() == 5).await;
    assert_eq!(plays(&run.store).await, 5);
    assert_eq!(run.store.writes.load(Ordering::Acquire), 1);
    run.stop().await;
}

/// Records the aggregator cannot decode are skipped, and their offsets are committed
/// like any other: a batch of nothing but garbage is not read again and again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undecodable_records_are_committed_and_not_read_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = EmbeddedLog::open(&dir.path().join("log.redb"), &EmbeddedLogConfig::default())
        .expect("log");
    for _ in 0..5 {
        log.append(TOPIC, b"k", b"not a record".to_vec())
            .await
            .expect("append");
    }
    let run = Running::start(dir.path(), &log, Arc::new(Semaphore::new(1_000)), 100);
    let (store, progress) = (&run.store, &run.progress);
    eventually("the garbage is committed", || {
        log.committed("g", TOPIC).expect("committed") == 5
    })
    .await;
    // A good record after it is stored and counted; the garbage was read once.
    log.append(TOPIC, b"k", play(1).to_bytes())
        .await
        .expect("append");
    eventually("the play is committed", || {
        log.committed("g", TOPIC).expect("committed") == 6
    })
    .await;
    assert_eq!(plays(store).await, 1);
    assert_eq!(progress.polled(), 6);
    run.stop().await;
}

/// The lag gauge in the process's registry (`rm_service::telemetry`), `None` before
/// the loop set it.
fn lag_gauge(metrics: &str) -> Option<f64> {
    metrics
        .lines()
        .find(|l| {
            l.starts_with("aggregator_consumer_lag_records{") && l.contains("topic=\"events\"")
        })
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// The consumer lag is reported while the loop's start-up work still holds it (a
/// backfill of a store upgraded with millions of facts takes minutes): an operator
/// sees the backlog grow from the start, not once the loop first folds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lag_is_reported_from_the_start() {
    let handle = rm_service::telemetry::install();
    let dir = tempfile::tempdir().expect("tempdir");
    let log = EmbeddedLog::open(&dir.path().join("log.redb"), &EmbeddedLogConfig::default())
        .expect("log");
    for i in 0..7 {
        log.append(TOPIC, b"k", play(i).to_bytes())
            .await
            .expect("append");
    }
    let backfill = Arc::new(Semaphore::new(0));
    let open = Arc::new(Semaphore::new(Semaphore::MAX_PERMITS));
    let run = Running::start_held(dir.path(), &log, open, Arc::clone(&backfill), 100);
    eventually("the lag of the held loop is reported", || {
        lag_gauge(&handle.render()) == Some(7.0)
    })
    .await;
    assert_eq!(
        run.progress.polled(),
        0,
        "nothing is read while the start is held"
    );

    backfill.add_permits(1);
    eventually("all stored", || run.progress.records() == 7).await;
    eventually("the lag drains", || {
        lag_gauge(&handle.render()) == Some(0.0)
    })
    .await;
    run.stop().await;
}
