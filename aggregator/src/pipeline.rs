//! The consume -> aggregate -> store loop.
//!
//! **Exactly once.** Every write carries the complete fact set of each entity it
//! touches plus rows derived from that set alone, keyed by entity (see
//! [`crate::batch`]); facts are keyed by the event's dedup key. Offsets are committed
//! to the source only after the store has durably taken the batch. So:
//! - a crash before the store write loses nothing (the batch is read again);
//! - a crash after the write and before the commit replays the batch: its facts are
//!   already in their sets, the derived rows come out identical, counts do not move;
//! - a duplicate that slipped past the edge (another edge, an edge restart) has the
//!   dedup key of the original, so it is already in the set and changes nothing;
//! - a store that is down is retried with backoff, forever, without committing: the
//!   lag grows and then drains when the store returns.
//!
//! The entity cache only saves store reads; after a restart or a rebalance the sets
//! are loaded from the store, which is the authority. What the cache lacks is not
//! looked up when no store can hold it yet: a served ad (its state, its views)
//! served over an hour after the first record above its partition's stored
//! progress, a tally's place begun over an hour and the clock allowance after it,
//! each later than anything the cache dropped ([`crate::fresh_ads`], which argues
//! it).
//!
//! **Tallies** (counts decided as events arrive, [`rm_store::model::tallies`]) are not
//! sets: a tally is an absolute count per log partition stamped with the offset of
//! the last record that moved it, and each record carries its (partition, offset)
//! from the source. A replayed record at or below a tally's stamp moves nothing, and
//! the store writes a batch's tallies no later than the served ads' states that
//! decided them, so the argument above holds for them too. A consumer that lost a
//! partition may still write a batch of it after its new owner cached it; each batch
//! writes its partitions' progress with its tallies and the next fold reads it after
//! the states: a partition another writer folded further than the cache holds makes
//! the loop finish its write in flight, drop the cache and fold the batch again from
//! the store (`aggregator_overtaken_total`). Before its first batch the
//! loop has a store written by an earlier version counted into tallies once
//! ([`WriteStore::backfill_tallies`]).
//!
//! **Three stages.** A reader task polls and decodes batch N+2 while the loop folds
//! batch N+1 and the store encodes and writes batch N, so the two cores of a small machine stay
//! busy while either stage waits on the disk (fsync) or the network. The reader
//! gathers what the log holds into a batch until the loop asks for one (after the
//! batch lingered `batch_linger`, at most `batch_max_wait` or `batch_max_records`),
//! so a batch grows with the time the stages after it take: small and soon on a
//! quiet log, large under a backlog. This is sound
//! because at most one write is in flight and writes complete in order: every entity
//! batch N touched is in the cache when N+1 is folded (the cache is updated before
//! N's write starts), and an entity N+1 loads from the store was last written by a
//! batch whose write already completed. A batch's offsets ([`Source::checkpoint`],
//! taken when it was polled) go back to the reader once its own write is done, and
//! the reader commits them ([`Source::commit_to`]) in that order before its next poll;
//! orders' states are cached like served ads' (an order the store does not hold is a
//! new one); on a rebalance the
//! write in flight is finished before the cache is dropped, so nothing is loaded from
//! the store while it may still change it.
//!
//! **Orders** (the `orders` topic, read by the same source) are entities too
//! ([`crate::sales`]): an order whose id has a state is a copy (a replayed or re-sent
//! order changes nothing), a new one is written as its lines and its state, and the
//! touches offered to it move its lines' credits and the sales tallies. Once a batch's
//! write lands, and before its offsets are committed, the write stage looks up the
//! offers the batch makes (its orders' shoppers' stored touches, its touches'
//! shoppers' stored orders) and appends them to the orders topic ([`Appender`]), so
//! whether an order or its click is stored first, the second one's lookup finds the
//! first, and a crash before the append replays the batch and looks again.
//!
//! **Erasures** ([`crate::erasures`]) run between two folds: at start, and whenever
//! a look for new ones (every `erasures_every`) finds some, the write in flight lands
//! and the cache is dropped first, as after a rebalance, so nothing cached can write
//! an erased id back; each erasure is then suppressed in every record read. A crash
//! during a run leaves the erasure pending: the next start runs it again, and a run
//! is idempotent.
//!
//! **Ageing** ([`crate::ageing`]) runs the same way: a pass at start and every
//! `ageing.every`, after the write in flight landed and the cache was dropped, so
//! nothing cached writes a raw id back under a row the pass aged. The same pass then
//! removes the raw facts past their retention ([`crate::retention`]).

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rm_schemas::EventRecord;
use tokio_util::sync::CancellationToken;

use rm_store::model::ad_id_campaign::campaign_of;
use rm_store::model::attribution::Windows;
use rm_store::model::carts::{CartFact, CartKey};
use rm_store::model::funnel::{self, ViewFact, ViewKey};
use rm_store::model::served::ServedAd;
use rm_store::model::tallies::sales::OrderCredits;
use rm_store::model::tallies::{Metric, Place, PlaceTallies};
use rm_store::{BatchWrite, EntitySets, EraseStore, FastMap, FastSet, StoreError, WriteStore};

use crate::ageing::AgeingOptions;
use crate::batch::{
    cart_places, copy_places, fold_at, progress_places, touched_at, view_places, FoldStats, Policy,
    Position, Touched,
};
use crate::erasures::{self, Erasures};
use crate::fresh_ads::FreshAds;
use crate::loads::{self, Counts, Found, Need};
use crate::metrics;
use crate::retention::RetentionOptions;
use crate::sales::{self, Lookups, OrderIn, OrderMsg, OrderStats};
use crate::source::{Appender, Checkpoint, Raw, Source, Stream};

/// Default of `--aggregator-batch-max-records`.
pub const DEFAULT_BATCH_MAX_RECORDS: usize = 50_000;
/// Default of `--aggregator-batch-max-wait-ms`.
pub const DEFAULT_BATCH_MAX_WAIT_MS: u64 = 500;
/// Default of `--aggregator-batch-linger-ms`.
pub const DEFAULT_BATCH_LINGER_MS: u64 = 100;

/// Loop settings.
#[derive(Debug, Clone, Copy)]
pub struct PipelineOptions {
    /// Most records per batch.
    pub batch_max_records: usize,
    /// Longest a batch gathers records while the loop is busy (and the longest one
    /// poll of an idle log waits).
    pub batch_max_wait: Duration,
    /// Shortest a batch gathers records before it is handed to the loop (fewer,
    /// larger store writes when the log is quiet).
    pub batch_linger: Duration,
    /// Aggregation policy.
    pub policy: Policy,
    /// Most entities kept in the cache.
    pub cache_max_entities: usize,
    /// How long after its ad id expired a served ad's state is kept.
    pub served_retention: Duration,
    /// How often the loop looks for new erasures ([`crate::erasures`]).
    pub erasures_every: Duration,
    /// How long an erasure keeps the id itself before the loop settles it.
    pub erasure_settle: Duration,
    /// How the loop ages identifiers past their retention ([`crate::ageing`]);
    /// `None`: never.
    pub ageing: Option<AgeingOptions>,
    /// How the loop removes raw facts past their retention, in the same pass
    /// ([`crate::retention`]); `None`: never.
    pub retention: Option<RetentionOptions>,
}

impl PipelineOptions {
    /// How often the daily pass (ageing and retention) runs, when either is on.
    fn pass_every(&self) -> Option<Duration> {
        let ageing = self.ageing.map(|a| a.every);
        ageing
            .into_iter()
            .chain(self.retention.map(|r| r.every))
            .min()
    }
}

/// How often the loop settles erasures old enough (their ids forgotten).
const SETTLE_EVERY: Duration = Duration::from_secs(60);

/// How often a write also forgets the states of served ads expired beyond the
/// retention.
const FORGET_EVERY: Duration = Duration::from_secs(600);

/// What the loop has stored so far, readable from other tasks (benchmarks, tests).
#[derive(Debug, Default)]
pub struct Progress {
    polled: AtomicU64,
    records: AtomicU64,
    newest_event_ms: AtomicI64,
    /// Nanoseconds each stage spent working (not waiting for the next): reading and
    /// decoding, folding (with the store loads), writing.
    busy_ns: [AtomicU64; 3],
    /// What the folds needed, by where it was found.
    loads: loads::Totals,
}

/// The stages of the loop, for [`Progress::busy`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Polling the log and decoding records (the reader task).
    Read = 0,
    /// Loading entity sets and folding (the loop).
    Fold = 1,
    /// The store write.
    Write = 2,
}

impl Progress {
    /// Records (events and orders) read from the log since the loop started.
    pub fn polled(&self) -> u64 {
        self.polled.load(Ordering::Acquire)
    }

    /// Records (events and orders) stored and committed since the loop started.
    pub fn records(&self) -> u64 {
        self.records.load(Ordering::Acquire)
    }

    /// Time `stage` has spent working since the loop started.
    pub fn busy(&self, stage: Stage) -> Duration {
        Duration::from_nanos(self.busy_ns[stage as usize].load(Ordering::Acquire))
    }

    fn add_busy(&self, stage: Stage, since: std::time::Instant) {
        let ns = u64::try_from(since.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.busy_ns[stage as usize].fetch_add(ns, Ordering::AcqRel);
    }

    /// Event time (ms) of the newest event stored, 0 before the first.
    pub fn newest_event_ms(&self) -> i64 {
        self.newest_event_ms.load(Ordering::Acquire)
    }

    /// How many things of `kind` the folds since the loop started found at `found`
    /// (also `aggregator_loads_total`).
    pub fn loads(&self, kind: loads::Need, found: loads::Found) -> u64 {
        self.loads.get(kind, found)
    }
}

#[derive(Default)]
struct Cache {
    views: FastMap<ViewKey, Vec<ViewFact>>,
    carts: FastMap<CartKey, Vec<CartFact>>,
    /// Served ads' states (an ad id absent from the store is cached as the empty state).
    served: FastMap<String, ServedAd>,
    /// Tallies (one absent from the store is cached as empty).
    tallies: FastMap<Place, PlaceTallies>,
    /// Orders' states (only the stored ones: an absent order is a new one).
    orders: FastMap<String, OrderCredits>,
    /// When a write last forgot expired served ads.
    forgot_at: Option<std::time::Instant>,
    /// Rule violations (funnel gaps, repeated milestones) of each cached view's set.
    violations: FastMap<ViewKey, (i64, i64)>,
    /// What the cache lacks that no store can hold yet: served ads, places
    /// ([`crate::fresh_ads`]).
    fresh: FreshAds,
}

impl Cache {
    fn len(&self) -> usize {
        self.views.len()
            + self.carts.len()
            + self.served.len()
            + self.tallies.len()
            + self.orders.len()
    }
}

/// What folding a batch came to.
enum Folded {
    /// Ready to write.
    Ready(Box<Prepared>),
    /// Another writer folded this partition further than the cache holds: the batch
    /// must be folded again from the store alone (see `rm_store::model::tallies`).
    Overtaken(i32),
}

/// A folded batch on its way to the store.
struct Prepared {
    /// Encoded for the store on the write stage ([`store_batch`]), which has slack
    /// while folding is the busiest stage.
    write: BatchWrite,
    stats: FoldStats,
    order_stats: OrderStats,
    /// What the batch looks up once written, to offer touches to orders.
    lookups: Lookups,
    records: usize,
    violations: (i64, i64),
    checkpoint: Checkpoint,
}

/// The write in flight.
struct InFlight {
    task: tokio::task::JoinHandle<Option<Stored>>,
}

/// A batch the store holds.
struct Stored {
    records: usize,
    newest_ms: Option<i64>,
    checkpoint: Checkpoint,
}

/// Runs until `shutdown`. Returns when the source fails for good.
pub async fn run<S: Source + 'static, T: WriteStore + EraseStore>(
    source: S,
    store: Arc<T>,
    backend: &'static str,
    opts: PipelineOptions,
    shutdown: CancellationToken,
) -> Result<(), crate::AggregatorError> {
    run_with_progress(source, store, backend, opts, shutdown, Arc::default()).await
}

/// As [`run`], counting what is stored in `progress`.
pub async fn run_with_progress<S: Source + 'static, T: WriteStore + EraseStore>(
    source: S,
    store: Arc<T>,
    backend: &'static str,
    opts: PipelineOptions,
    shutdown: CancellationToken,
    progress: Arc<Progress>,
) -> Result<(), crate::AggregatorError> {
    // The lag is sampled from the start: the backfills, erasures and passes below
    // can take minutes (a store upgraded with millions of facts, a store that does
    // not answer), and the backlog they leave is what an operator needs to see.
    let _sampler = lag_sampler(source.lag_probe(), shutdown.clone());
    // A store written before tallies has its earlier clicks counted first, before
    // this loop writes anything (see `rm_store::model::tallies`).
    match retry("backfill tallies", &shutdown, || store.backfill_tallies()).await {
        None => return Ok(()),
        Some(Ok(_)) => {}
        Some(Err(e)) => return Err(e.into()),
    }
    // Orders of a store written before attribution as orders arrive are attributed
    // once, before this loop writes anything (`rm_store::model::tallies::sales`).
    match retry("backfill sales", &shutdown, || {
        store.backfill_sales(&opts.policy.windows)
    })
    .await
    {
        None => return Ok(()),
        Some(Ok(_)) => {}
        Some(Err(e)) => return Err(e.into()),
    }
    // A store written before the campaigns' and videos' quarter hours has them
    // counted once, after the other backfills and before this loop writes anything
    // (`rm_store::model::tallies::zones`).
    match retry("backfill zones", &shutdown, || store.backfill_zones()).await {
        None => return Ok(()),
        Some(Ok(_)) => {}
        Some(Err(e)) => return Err(e.into()),
    }
    // Erasures recorded so far are suppressed, and run where they still hold their
    // id, before this loop folds anything (`crate::erasures`).
    let mut erasures = Erasures::default();
    match look_for_erasures(&*store, &mut erasures, true, &shutdown).await {
        None => return Ok(()),
        Some(new) => {
            if !run_erasures(&*store, &new, opts.ageing.map(|a| a.key), &shutdown).await {
                return Ok(());
            }
        }
    }
    // Identifiers past their retention are aged, and facts past theirs removed,
    // once before this loop folds anything, then every `ageing.every`
    // (`crate::ageing`, `crate::retention`).
    if !daily_pass(&*store, &opts, &shutdown).await {
        return Ok(());
    }
    let pass_every = opts.pass_every();
    let mut ageing_tick = tokio::time::interval(pass_every.unwrap_or(Duration::from_secs(86_400)));
    ageing_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ageing_tick.tick().await;
    let mut erasure_tick = tokio::time::interval(opts.erasures_every);
    erasure_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    erasure_tick.tick().await;
    let mut settled_at = std::time::Instant::now();
    let mut cache = Cache::default();
    let mut in_flight: Option<InFlight> = None;
    let appender = source.appender();
    if appender.is_none() {
        tracing::warn!(
            "this source cannot append to the orders topic: touches are not offered to \
             orders (sales stay unattributed)"
        );
    }
    let (requests, asked) = tokio::sync::mpsc::unbounded_channel();
    let mut next = Batches {
        requests,
        pending: None,
    };
    let (commits, to_commit) = tokio::sync::mpsc::unbounded_channel();
    let _reader = AbortOnDrop(tokio::spawn(read(
        source,
        opts,
        asked,
        to_commit,
        Arc::clone(&progress),
        shutdown.clone(),
    )));
    loop {
        let polled = tokio::select! {
            () = shutdown.cancelled() => return Ok(()),
            // A write that lands while no batch is waiting is committed at once.
            landed = wait(&mut in_flight), if in_flight.is_some() => {
                in_flight = None;
                if !stored(&commits, &progress, landed) {
                    return Ok(());
                }
                continue;
            }
            p = next.next() => p,
            _ = ageing_tick.tick(), if pass_every.is_some() => {
                // As before an erasure: nothing cached may write a raw id back.
                if !stored(&commits, &progress, wait(&mut in_flight).await) {
                    return Ok(());
                }
                in_flight = None;
                cache = Cache::default();
                if !daily_pass(&*store, &opts, &shutdown).await {
                    return Ok(());
                }
                continue;
            }
            _ = erasure_tick.tick() => {
                let Some(new) = look_for_erasures(&*store, &mut erasures, false, &shutdown).await else {
                    return Ok(());
                };
                if !new.is_empty() {
                    // Nothing cached may be written back, and nothing is loaded while
                    // the write in flight can still change the store.
                    if !stored(&commits, &progress, wait(&mut in_flight).await) {
                        return Ok(());
                    }
                    in_flight = None;
                    cache = Cache::default();
                    if !run_erasures(&*store, &new, opts.ageing.map(|a| a.key), &shutdown).await {
                        return Ok(());
                    }
                }
                if settled_at.elapsed() > SETTLE_EVERY.min(opts.erasure_settle) {
                    settled_at = std::time::Instant::now();
                    let now = chrono::Utc::now().timestamp_millis();
                    match erasures::Erasures::settle(&*store, now, opts.erasure_settle).await {
                        Ok(n) if n > 0 => tracing::info!(erasures = n, "erasures settled: their ids forgotten"),
                        Ok(_) => {}
                        Err(e) => tracing::warn!(error = %e, "settling erasures failed; trying again later"),
                    }
                }
                continue;
            }
        };
        let mut polled = match polled {
            None => return Ok(()), // the reader stopped: shutdown
            Some(Err(e)) => return Err(e.into()),
            Some(Ok(p)) => p,
        };
        // Offers another consumer group appended are its own (see `offer`).
        let group = appender.as_ref().map(Appender::group);
        polled.orders.retain(|o| match &o.msg {
            OrderMsg::Offer(of) => of.to.is_empty() || group == Some(of.to.as_str()),
            OrderMsg::Order(_) => true,
        });
        let suppressed = erasures.apply(&mut polled.records, &mut polled.orders);
        if suppressed > 0 {
            ::metrics::counter!(metrics::ERASED_RECORDS).increment(suppressed);
        }
        if polled.rebalanced {
            // Nothing may be loaded while the write in flight can still change the store.
            if !stored(&commits, &progress, wait(&mut in_flight).await) {
                return Ok(());
            }
            in_flight = None;
            cache = Cache::default();
        }
        // A batch of undecodable records still goes through (an empty write), so its
        // offsets are committed and it is not read again.
        if polled.records.is_empty() && polled.orders.is_empty() && polled.checkpoint.0.is_empty() {
            continue;
        }
        let folding = std::time::Instant::now();
        let mut prepared = loop {
            match prepare(
                &polled.records,
                &polled.positions,
                &polled.orders,
                &mut cache,
                &*store,
                &opts,
                &progress,
                &shutdown,
            )
            .await
            {
                // Shutting down mid-batch: nothing committed, it will be replayed.
                None => return Ok(()),
                Some(Folded::Ready(p)) => break *p,
                Some(Folded::Overtaken(partition)) => {
                    ::metrics::counter!(metrics::OVERTAKEN).increment(1);
                    tracing::warn!(
                        partition,
                        "another writer folded this log partition further than this \
                         aggregator's cache holds (a consumer that lost it in a rebalance, \
                         or a second consumer group on the topic); folding the batch again \
                         from the store"
                    );
                    // As after a rebalance: the write in flight lands, then nothing
                    // cached is trusted.
                    if !stored(&commits, &progress, wait(&mut in_flight).await) {
                        return Ok(());
                    }
                    in_flight = None;
                    cache = Cache::default();
                }
            }
        };
        prepared.checkpoint = polled.checkpoint;
        drop(polled.records);
        progress.add_busy(Stage::Fold, folding);
        // One write in flight at a time, completed in order.
        if !stored(&commits, &progress, wait(&mut in_flight).await) {
            return Ok(());
        }
        let (store, shutdown, counters) =
            (Arc::clone(&store), shutdown.clone(), Arc::clone(&progress));
        let (appender, windows) = (appender.clone(), opts.policy.windows);
        in_flight = Some(InFlight {
            task: tokio::spawn(async move {
                let writing = std::time::Instant::now();
                let lookups = std::mem::take(&mut prepared.lookups);
                let written = store_batch(prepared, &*store, backend, &shutdown).await;
                // Offers of touches to orders, before the batch's offsets are committed
                // (a crash before they are appended replays the batch and looks again).
                let written = match written {
                    Some(s) => offer(&lookups, &*store, appender.as_ref(), &windows, &shutdown)
                        .await
                        .then_some(s),
                    None => None,
                };
                counters.add_busy(Stage::Write, writing);
                written
            }),
        });
        let ms = progress.newest_event_ms();
        if ms > 0 {
            let now = chrono::Utc::now().timestamp_millis();
            ::metrics::gauge!(metrics::FRESHNESS).set((now - ms).max(0) as f64 / 1000.0);
        }
    }
}

/// A batch the reader polled and decoded.
struct Polled {
    records: Vec<EventRecord>,
    /// Each record's partition and offset.
    positions: Vec<Position>,
    orders: Vec<OrderIn>,
    checkpoint: Checkpoint,
    /// Partitions moved before this batch was polled.
    rebalanced: bool,
}

/// The loop's end of the reader: asks for a batch when the loop is ready for one.
struct Batches {
    requests: tokio::sync::mpsc::UnboundedSender<Handover>,
    /// The batch asked for and not yet received (kept when the loop turns to other
    /// work meanwhile: the reader may already have handed it over).
    pending: Option<tokio::sync::oneshot::Receiver<Result<Polled, rm_eventlog::LogError>>>,
}

/// Where the reader hands the batch the loop asked for.
type Handover = tokio::sync::oneshot::Sender<Result<Polled, rm_eventlog::LogError>>;

impl Batches {
    /// The next batch; `None` once the reader stopped. Cancel-safe: a batch asked
    /// for is kept for the next call.
    async fn next(&mut self) -> Option<Result<Polled, rm_eventlog::LogError>> {
        let pending = match &mut self.pending {
            Some(p) => p,
            None => {
                let (tx, rx) = tokio::sync::oneshot::channel();
                self.requests.send(tx).ok()?;
                self.pending.insert(rx)
            }
        };
        let batch = pending.await.ok();
        self.pending = None;
        batch
    }
}

/// The reader task: polls and decodes the next batch while the loop folds this one
/// and the store writes the one before, gathering polls into it until the loop asks
/// for it, and commits the checkpoints the loop sends back (before each poll, in the
/// order received).
async fn read<S: Source>(
    mut source: S,
    opts: PipelineOptions,
    mut asked: tokio::sync::mpsc::UnboundedReceiver<Handover>,
    mut to_commit: tokio::sync::mpsc::UnboundedReceiver<Checkpoint>,
    progress: Arc<Progress>,
    shutdown: CancellationToken,
) {
    let mut gathered = Gathered::default();
    let mut want: Option<Handover> = None;
    loop {
        while let Ok(checkpoint) = to_commit.try_recv() {
            if let Err(e) = source.commit_to(checkpoint).await {
                tracing::warn!(error = %e, "offset commit failed; the batch may be replayed (harmless)");
            }
        }
        if want.is_none() {
            match asked.try_recv() {
                Ok(w) => want = Some(w),
                Err(tokio::sync::mpsc::error::TryRecvError::Empty) => {}
                Err(tokio::sync::mpsc::error::TryRecvError::Disconnected) => return,
            }
        }
        let age = gathered.since.map_or(Duration::ZERO, |t| t.elapsed());
        if gathered.raw > 0 || gathered.rebalanced {
            // Handed over once it lingered, when the loop asks; a full batch, or one
            // as old as the bound, waits for the loop instead of growing.
            let must = gathered.raw >= opts.batch_max_records || age >= opts.batch_max_wait;
            if must && want.is_none() {
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    w = asked.recv() => match w {
                        Some(w) => want = Some(w),
                        None => return, // the loop ended
                    },
                }
            }
            if must || age >= opts.batch_linger || gathered.raw == 0 {
                if let Some(w) = want.take() {
                    let checkpoint = source.checkpoint();
                    // A loop that stopped meanwhile drops it: it was not committed.
                    let _ = w.send(Ok(std::mem::take(&mut gathered).into_batch(checkpoint)));
                    continue;
                }
            }
        }
        // With a batch (or a rebalance) in hand, a short look, so it is handed over
        // soon after it lingered and the loop asked for it.
        let wait = if gathered.raw > 0 || gathered.rebalanced {
            HAND_OVER_EVERY.min(opts.batch_max_wait.saturating_sub(age))
        } else {
            opts.batch_max_wait
        };
        let started = std::time::Instant::now();
        let polled = tokio::select! {
            () = shutdown.cancelled() => return,
            p = source.poll(opts.batch_max_records.saturating_sub(gathered.raw), wait) => p,
        };
        let raw = match polled {
            Ok(r) => r,
            Err(e) if e.is_retryable() => {
                tracing::warn!(error = %e, "reading the log failed; retrying");
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
            Err(e) => {
                let w = match want.take() {
                    Some(w) => Some(w),
                    None => tokio::select! {
                        () = shutdown.cancelled() => None,
                        w = asked.recv() => w,
                    },
                };
                if let Some(w) = w {
                    let _ = w.send(Err(e));
                }
                return;
            }
        };
        gathered.rebalanced |= source.take_rebalanced();
        if raw.is_empty() {
            continue;
        }
        progress
            .polled
            .fetch_add(raw.len() as u64, Ordering::AcqRel);
        gathered.since.get_or_insert_with(std::time::Instant::now);
        gathered.add(&raw);
        drop(raw);
        // A poll that found records at once is work; one that waited for them
        // includes the wait (idle time, small when the log is behind).
        progress.add_busy(Stage::Read, started);
    }
}

/// How long the reader, holding a batch the loop has not asked for yet, reads more
/// into it before it looks again.
const HAND_OVER_EVERY: Duration = Duration::from_millis(5);

/// The records the reader gathered since it last handed a batch over.
#[derive(Default)]
struct Gathered {
    records: Vec<EventRecord>,
    positions: Vec<Position>,
    orders: Vec<OrderIn>,
    /// Raw records read (undecodable ones included: their offsets are committed too).
    raw: usize,
    /// When its first record was read.
    since: Option<std::time::Instant>,
    rebalanced: bool,
}

impl Gathered {
    fn add(&mut self, raw: &[Raw]) {
        let (records, positions, orders) = decode(raw);
        self.records.extend(records);
        self.positions.extend(positions);
        self.orders.extend(orders);
        self.raw += raw.len();
    }

    fn into_batch(self, checkpoint: Checkpoint) -> Polled {
        Polled {
            records: self.records,
            positions: self.positions,
            orders: self.orders,
            checkpoint,
            rebalanced: self.rebalanced,
        }
    }
}

/// The outcome of the write in flight (`None` when there is none, which counts as
/// done).
/// Looks for erasures this loop has not seen (they are suppressed from now on); a
/// store that is unavailable is retried until `shutdown` (`None`) when `patient`,
/// else the look is left to the next tick.
async fn look_for_erasures<T: EraseStore>(
    store: &T,
    erasures: &mut Erasures,
    patient: bool,
    shutdown: &CancellationToken,
) -> Option<Vec<rm_store::model::erasure::Erasure>> {
    let mut delay = Duration::from_millis(100);
    loop {
        match erasures.poll(store).await {
            Ok(new) => return Some(new),
            Err(e) if patient && e.is_retryable() => {
                tracing::warn!(error = %e, retry_in = ?delay, "looking for erasures failed; retrying");
            }
            Err(e) => {
                tracing::warn!(error = %e, "looking for erasures failed; trying again later");
                return Some(Vec::new());
            }
        }
        tokio::select! {
            () = shutdown.cancelled() => return None,
            () = tokio::time::sleep(delay) => {}
        }
        delay = (delay * 2).min(Duration::from_secs(5));
    }
}

/// Samples the consumer lag of `probe` into [`metrics::LAG`] every second until
/// `stop` (or until dropped).
fn lag_sampler(probe: crate::source::LagProbe, stop: CancellationToken) -> AbortOnDrop {
    AbortOnDrop(tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tokio::select! {
                () = stop.cancelled() => break,
                _ = tick.tick() => {}
            }
            for ((stream, p), lag) in probe.lag().await {
                let label = if p < 0 {
                    "embedded".to_string()
                } else {
                    p.to_string()
                };
                ::metrics::gauge!(metrics::LAG, "topic" => stream.as_str(), "partition" => label)
                    .set(lag as f64);
            }
        }
    }))
}

/// The daily pass: ageing, then fact retention, each when set; false on shutdown.
async fn daily_pass<T: EraseStore>(
    store: &T,
    opts: &PipelineOptions,
    shutdown: &CancellationToken,
) -> bool {
    age(store, opts.ageing, shutdown).await && retire(store, opts.retention, shutdown).await
}

/// Removes the facts past their retention when `retention` is set (retrying while
/// the store is unavailable); false on shutdown. A pass the store refuses is logged
/// and counted, and the next one runs at its time.
async fn retire<T: EraseStore>(
    store: &T,
    retention: Option<RetentionOptions>,
    shutdown: &CancellationToken,
) -> bool {
    let Some(o) = retention else { return true };
    let r = o.pass(chrono::Utc::now().timestamp_millis());
    match retry("retire facts", shutdown, || store.retire(&r)).await {
        None => false,
        Some(Ok(gone)) => {
            ::metrics::counter!(metrics::RETENTION_PASSES, "outcome" => "done").increment(1);
            ::metrics::counter!(metrics::RETIRED_ROWS).increment(gone.total());
            tracing::info!(
                target: "audit",
                before_ms = r.before_ms,
                recount_from_ms = r.recount_from_ms,
                rows = gone.total(),
                removed = ?gone,
                "facts past their retention removed"
            );
            true
        }
        Some(Err(e)) => {
            ::metrics::counter!(metrics::RETENTION_PASSES, "outcome" => "failed").increment(1);
            tracing::error!(error = %e, "a retention pass was refused; the next one runs at its time");
            true
        }
    }
}

/// Runs an ageing pass when `ageing` is set (retrying while the store is
/// unavailable); false on shutdown. A pass the store refuses is logged and counted,
/// and the next one runs at its time.
async fn age<T: EraseStore>(
    store: &T,
    ageing: Option<AgeingOptions>,
    shutdown: &CancellationToken,
) -> bool {
    let Some(o) = ageing else { return true };
    let a = o.pass(chrono::Utc::now().timestamp_millis());
    match retry("age identifiers", shutdown, || store.age(&a)).await {
        None => false,
        Some(Ok(aged)) => {
            ::metrics::counter!(metrics::AGEING_PASSES, "outcome" => "done").increment(1);
            ::metrics::counter!(metrics::AGED_ROWS).increment(aged.total());
            tracing::info!(
                target: "audit",
                before_ms = a.before_ms,
                rows = aged.total(),
                aged = ?aged,
                "identifiers past their retention aged"
            );
            true
        }
        Some(Err(e)) => {
            ::metrics::counter!(metrics::AGEING_PASSES, "outcome" => "failed").increment(1);
            tracing::error!(error = %e, "an ageing pass was refused; the next one runs at its time");
            true
        }
    }
}

/// Runs each erasure that still holds its id (retrying while the store is
/// unavailable); false on shutdown. One the store refuses is logged and left (the
/// next start runs it again).
async fn run_erasures<T: EraseStore>(
    store: &T,
    new: &[rm_store::model::erasure::Erasure],
    ageing: Option<rm_store::model::ageing::AgeingKey>,
    shutdown: &CancellationToken,
) -> bool {
    for e in new.iter().filter(|e| e.holds_id()) {
        match retry("erase", shutdown, || erasures::run(store, e, ageing)).await {
            None => return false,
            Some(Ok(erased)) => {
                ::metrics::counter!(metrics::ERASURES).increment(1);
                tracing::info!(
                    request_id = e.request_id,
                    rows = erased.total(),
                    "erasure run"
                );
            }
            Some(Err(err)) => {
                tracing::error!(request_id = e.request_id, error = %err, "an erasure was refused");
            }
        }
    }
    true
}

async fn wait(in_flight: &mut Option<InFlight>) -> Option<Option<Stored>> {
    let f = in_flight.as_mut()?;
    Some(match (&mut f.task).await {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "the store write task failed");
            None
        }
    })
}

/// Hands a stored batch's checkpoint to the reader for committing and counts it in
/// `progress`. False when the write did not happen (shutdown, or a store error that
/// stops the pipeline); `None` (no write was in flight) is fine.
fn stored(
    commits: &tokio::sync::mpsc::UnboundedSender<Checkpoint>,
    progress: &Progress,
    outcome: Option<Option<Stored>>,
) -> bool {
    let stored = match outcome {
        None => return true,
        Some(None) => return false,
        Some(Some(s)) => s,
    };
    let _ = commits.send(stored.checkpoint);
    progress
        .records
        .fetch_add(stored.records as u64, Ordering::AcqRel);
    if let Some(ms) = stored.newest_ms {
        progress.newest_event_ms.fetch_max(ms, Ordering::AcqRel);
    }
    true
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
fn decode(raw: &[Raw]) -> (Vec<EventRecord>, Vec<Position>, Vec<OrderIn>) {
    let mut events = Vec::with_capacity(raw.len());
    let mut positions = Vec::with_capacity(raw.len());
    let mut orders = Vec::new();
    let mut bad = 0u64;
    for r in raw {
        match r.stream {
            Stream::Events => match EventRecord::from_bytes(r) {
                Ok(rec) => {
                    events.push(rec);
                    positions.push((r.partition, r.offset));
                }
                Err(e) => {
                    bad += 1;
                    tracing::warn!(error = %e, "undecodable record skipped");
                }
            },
            Stream::Orders => match OrderMsg::decode(r) {
                Ok(msg) => orders.push(OrderIn {
                    msg,
                    at: (r.partition, r.offset),
                }),
                Err(e) => {
                    bad += 1;
                    tracing::warn!(error = %e, "undecodable order record skipped");
                }
            },
        }
    }
    if bad > 0 {
        ::metrics::counter!(metrics::DROPPED, "reason" => "undecodable").increment(bad);
    }
    (events, positions, orders)
}

/// Retries `op` with backoff until it succeeds, fails for good, or shutdown.
async fn retry<R, F, Fut>(
    what: &str,
    shutdown: &CancellationToken,
    mut op: F,
) -> Option<Result<R, StoreError>>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<R, StoreError>>,
{
    let mut delay = Duration::from_millis(100);
    loop {
        match op().await {
            Ok(r) => return Some(Ok(r)),
            Err(e) => {
                let kind = if e.is_retryable() {
                    "unavailable"
                } else {
                    "refused"
                };
                ::metrics::counter!(metrics::STORE_ERRORS, "kind" => kind).increment(1);
                if !e.is_retryable() {
                    return Some(Err(e));
                }
                tracing::warn!(error = %e, what, retry_in = ?delay, "store unavailable; retrying");
            }
        }
        tokio::select! {
            () = shutdown.cancelled() => return None,
            () = tokio::time::sleep(delay) => {}
        }
        delay = (delay * 2).min(Duration::from_secs(5));
    }
}

/// Everything a batch of `records` at `positions` folds into, read from the store
/// alone (no cache: what a restarted aggregator loads for its first batch). For
/// tools and tests that fold batches themselves ([`fold_at`]).
pub async fn load_sets<T: WriteStore>(
    store: &T,
    records: &[EventRecord],
    positions: &[Position],
) -> Result<EntitySets, StoreError> {
    let t = touched_at(records, positions);
    let mut sets = store.load(&t.views, &t.carts, &t.served).await?;
    let mut places = t.places;
    places.extend(copy_places(records, positions, &sets.served));
    places.extend(view_places(records, positions, &sets.views));
    places.extend(cart_places(records, positions, &sets.carts));
    sets.tallies = store.load_tallies(&places).await?;
    Ok(sets)
}

/// Loads what the batch needs and folds it (nothing is written yet); `None` on
/// shutdown or when the store refused a read for good (then the pipeline stops).
#[allow(clippy::too_many_arguments)]
async fn prepare<T: WriteStore>(
    records: &[EventRecord],
    positions: &[Position],
    orders: &[OrderIn],
    cache: &mut Cache,
    store: &T,
    opts: &PipelineOptions,
    counters: &Progress,
    shutdown: &CancellationToken,
) -> Option<Folded> {
    let Touched {
        views,
        carts,
        served,
        places,
    } = touched_at(records, positions);
    // Ads no store can hold yet: neither their states nor their views' facts are
    // looked up (`crate::fresh_ads`).
    let new_ads = cache
        .fresh
        .new_ads(records, positions, opts.policy.ad_ttl_ms);
    let mut loads = Counts::default();
    let missing_views: FastSet<ViewKey> = loads.to_look_up(Need::Views, &views, |k| {
        if cache.views.contains_key(k) {
            Found::Cache
        } else if new_ads.contains(k.ad_id.as_str()) {
            Found::Nowhere
        } else {
            Found::Store
        }
    });
    let missing_carts: FastSet<CartKey> = loads.to_look_up(Need::Carts, &carts, |k| {
        if cache.carts.contains_key(k) {
            Found::Cache
        } else {
            Found::Store
        }
    });
    let missing_served: FastSet<String> = loads.to_look_up(Need::ServedAds, &served, |k| {
        if cache.served.contains_key(k) {
            Found::Cache
        } else if new_ads.contains(k.as_str()) {
            Found::Nowhere
        } else {
            Found::Store
        }
    });
    let mut sets = EntitySets::default();
    if !missing_views.is_empty() || !missing_carts.is_empty() || !missing_served.is_empty() {
        match retry("load", shutdown, || {
            store.load(&missing_views, &missing_carts, &missing_served)
        })
        .await?
        {
            Ok(loaded) => sets = loaded,
            Err(e) => {
                // A permanent read error: aggregate from empty sets would double count. Stop.
                tracing::error!(error = %e, "store refused a read; stopping the pipeline");
                shutdown.cancel();
                return None;
            }
        }
    }
    // Violations before this batch: loaded sets are derived once, cached ones known.
    let mut before = violations(&sets, opts);
    for k in &views {
        if let Some((k, v)) = cache.views.remove_entry(k) {
            sets.views.insert(k, v);
        }
        if let Some((k, v)) = cache.violations.remove_entry(k) {
            before.insert(k, v);
        }
    }
    for k in &carts {
        if let Some((k, v)) = cache.carts.remove_entry(k) {
            sets.carts.insert(k, v);
        }
    }
    for k in &served {
        if let Some((k, v)) = cache.served.remove_entry(k) {
            sets.served.insert(k, v);
        }
    }
    // Orders' states: the cached ones, the rest from the store (an absent one is a
    // new order's).
    let order_ids = sales::order_ids(orders);
    let missing_orders: FastSet<String> = loads.to_look_up(Need::Orders, &order_ids, |id| {
        if cache.orders.contains_key(id) {
            Found::Cache
        } else {
            Found::Store
        }
    });
    let mut order_states: FastMap<String, OrderCredits> = FastMap::default();
    if !missing_orders.is_empty() {
        match retry("load orders", shutdown, || {
            store.load_orders(&missing_orders)
        })
        .await?
        {
            Ok(loaded) => order_states = loaded,
            Err(e) => {
                // Without knowing which orders are stored, a re-sent one would count again.
                tracing::error!(error = %e, "store refused an order lookup; stopping the pipeline");
                shutdown.cancel();
                return None;
            }
        }
    }
    for id in &order_ids {
        if let Some((k, v)) = cache.orders.remove_entry(id) {
            order_states.insert(k, v);
        }
    }
    // The tallies' places: the records' own, and those of earlier copies their served
    // ads remember (known now that the states are). The partitions' progress is read
    // from the store every time, after the states (see `rm_store::model::tallies`).
    let mut places = places;
    places.extend(copy_places(records, positions, &sets.served));
    places.extend(view_places(records, positions, &sets.views));
    places.extend(cart_places(records, positions, &sets.carts));
    places.extend(sales::places(orders, &order_states, &opts.policy.windows));
    let mut progress = progress_places(positions);
    progress.extend(sales::progress_places(orders));
    places.extend(progress.iter().cloned());
    // A place no store can hold yet is not looked up either (`crate::fresh_ads`).
    let skew = opts.policy.future_skew_ms;
    let missing_places: FastSet<Place> = loads.to_look_up(Need::Tallies, &places, |p| {
        if progress.contains(p) {
            Found::Store
        } else if cache.tallies.contains_key(p) {
            Found::Cache
        } else if cache.fresh.is_new_place(p, skew) {
            Found::Nowhere
        } else {
            Found::Store
        }
    });
    if !missing_places.is_empty() {
        match retry("load tallies", shutdown, || {
            store.load_tallies(&missing_places)
        })
        .await?
        {
            Ok(loaded) => sets.tallies = loaded,
            Err(e) => {
                // Without a tally's stamp, a replayed record would be counted again. Stop.
                tracing::error!(error = %e, "store refused a tally read; stopping the pipeline");
                shutdown.cancel();
                return None;
            }
        }
    }
    metrics::loads(&loads);
    counters.loads.add(&loads);
    // A served ad's state loaded above may remember events another writer counted in
    // tallies this cache holds from before: then nothing cached may be used.
    for p in &progress {
        let of = |t: Option<&PlaceTallies>| t.and_then(|t| t.get(Metric::Progress));
        if let (Some(stored), Some(ours)) = (of(sets.tallies.get(p)), of(cache.tallies.get(p))) {
            if stored.stamp > ours.stamp {
                return Some(Folded::Overtaken(p.partition));
            }
        }
    }
    // The partitions' stored progress bounds which ads and places later batches need
    // not look up.
    cache.fresh.establish(records, positions, |p| {
        let t = sets.tallies.get(&Place::progress(p))?;
        t.get(Metric::Progress).map(|t| t.stamp)
    });
    for p in &places {
        if let Some((p, v)) = cache.tallies.remove_entry(p) {
            sets.tallies.insert(p, v);
        }
    }
    // Served ads expired beyond the retention may have been forgotten: their events
    // are repeats from now on, and every so often a write forgets them.
    let forgotten_before = chrono::Utc::now().timestamp()
        - i64::try_from(opts.served_retention.as_secs()).unwrap_or(i64::MAX);
    let policy = Policy {
        forgotten_before: Some(forgotten_before),
        ..opts.policy
    };
    let (mut write, stats) = fold_at(records, Some(positions), &mut sets, &policy);
    if cache.forgot_at.is_none_or(|t| t.elapsed() >= FORGET_EVERY) {
        write.forget_served_before = Some(forgotten_before);
        cache.forgot_at = Some(std::time::Instant::now());
        let fresh = &mut cache.fresh;
        cache.served.retain(|ad, _| {
            let gone = rm_store::model::served::expired_before(ad, forgotten_before);
            if gone {
                fresh.drop_states([ad]);
            }
            !gone
        });
    }
    let sold = sales::fold(
        orders,
        &mut order_states,
        &mut sets.tallies,
        &opts.policy.windows,
    );
    write.order_lines = sold.lines;
    write.order_states = sold.states;
    write.tallies.extend(sold.tallies);
    let lookups = Lookups {
        orders: sold.orders,
        touches: write.touches.clone(),
    };
    // Only the views the batch re-derived can have changed; fold already derived them.
    let mut delta = (0, 0);
    for v in &write.views {
        let now = (i64::from(v.funnel_gaps), i64::from(v.repeated_milestones));
        let (bg, br) = before.get(&v.key).copied().unwrap_or_default();
        delta = (delta.0 + now.0 - bg, delta.1 + now.1 - br);
        cache.violations.insert(v.key.clone(), now);
    }
    if cache.len() + sets.views.len() + sets.carts.len() + sets.served.len() + sets.tallies.len()
        > opts.cache_max_entities
    {
        let kept: FastMap<ViewKey, (i64, i64)> = sets
            .views
            .keys()
            .filter_map(|k| cache.violations.get(k).map(|v| (k.clone(), *v)))
            .collect();
        let mut fresh = std::mem::take(&mut cache.fresh);
        fresh.drop_states(cache.served.keys());
        fresh.drop_states(cache.views.keys().map(|k| &k.ad_id));
        fresh.drop_places(cache.tallies.keys());
        *cache = Cache {
            violations: kept,
            forgot_at: cache.forgot_at,
            fresh,
            ..Cache::default()
        };
    }
    cache.views.extend(sets.views);
    cache.carts.extend(sets.carts);
    cache.orders.extend(order_states);
    // Every place the batch could move, stored or not (an absent one is empty).
    for p in places {
        let t = sets.tallies.remove(&p).unwrap_or_default();
        cache.tallies.insert(p, t);
    }
    // Every served ad the batch touched, stored or not: one the store did not hold
    // and the batch did not decide on is still empty, so no later load is needed.
    for k in served {
        let state = sets.served.remove(&k).unwrap_or_default();
        cache.served.insert(k, state);
    }
    Some(Folded::Ready(Box::new(Prepared {
        write,
        stats,
        order_stats: sold.stats,
        lookups,
        records: records.len() + orders.len(),
        violations: delta,
        checkpoint: Checkpoint::default(),
    })))
}

/// Writes a folded batch, retrying while the store is unavailable; `None` on
/// shutdown or when the store refused the batch for good (then the pipeline stops).
async fn store_batch<T: WriteStore>(
    p: Prepared,
    store: &T,
    backend: &'static str,
    shutdown: &CancellationToken,
) -> Option<Stored> {
    let started = std::time::Instant::now();
    let newest_ms = p.write.newest_event_ms;
    let write = store.prepare(p.write);
    match retry("write", shutdown, || store.write_prepared(&write)).await? {
        Ok(()) => {}
        Err(e) => {
            tracing::error!(error = %e, "store refused a batch; stopping the pipeline without committing it");
            shutdown.cancel();
            return None;
        }
    }
    ::metrics::histogram!(metrics::STORE_WRITE, "backend" => backend)
        .record(started.elapsed().as_secs_f64());
    metrics::batch(p.records, &p.stats, p.violations.0, p.violations.1);
    metrics::orders(&p.order_stats);
    Some(Stored {
        records: p.records,
        newest_ms,
        checkpoint: p.checkpoint,
    })
}

/// Looks up the offers of touches to orders a written batch makes (its new orders'
/// shoppers' touches, its touches' shoppers' orders) and appends them to the orders
/// topic; false on shutdown or when the store or the log refused for good (the
/// pipeline stops; the batch is not committed and is read again).
async fn offer<T: WriteStore>(
    l: &Lookups,
    store: &T,
    appender: Option<&Appender>,
    w: &Windows,
    shutdown: &CancellationToken,
) -> bool {
    let Some(appender) = appender else {
        return true;
    };
    let offers = match retry("look up offers", shutdown, || l.offers(store, w)).await {
        None => return false,
        Some(Ok(offers)) => offers,
        Some(Err(e)) => {
            tracing::error!(error = %e, "store refused an offers lookup; stopping the pipeline");
            shutdown.cancel();
            return false;
        }
    };
    if offers.is_empty() {
        return true;
    }
    // Addressed to this consumer group: another group reading the topic (another
    // deployment's, or a test's) makes its own from its own store.
    let records: Vec<(Vec<u8>, Vec<u8>)> = offers
        .into_iter()
        .map(|mut o| {
            o.to = appender.group().to_owned();
            (o.key().to_vec(), o.to_bytes())
        })
        .collect();
    let mut delay = Duration::from_millis(100);
    loop {
        match appender.append(&records).await {
            Ok(()) => {
                metrics::offers_sent(records.len());
                return true;
            }
            Err(e) if e.is_retryable() => {
                tracing::warn!(error = %e, retry_in = ?delay, "appending offers to the orders topic failed; retrying");
            }
            Err(e) => {
                tracing::error!(error = %e, "the log refused offers; stopping the pipeline");
                shutdown.cancel();
                return false;
            }
        }
        tokio::select! {
            () = shutdown.cancelled() => return false,
            () = tokio::time::sleep(delay) => {}
        }
        delay = (delay * 2).min(Duration::from_secs(5));
    }
}

/// Rule violations (funnel gaps, repeated milestones) of each view's current set.
fn violations(sets: &EntitySets, opts: &PipelineOptions) -> FastMap<ViewKey, (i64, i64)> {
    sets.views
        .iter()
        .map(|(k, facts)| {
            let v = funnel::derive_view(
                k.clone(),
                campaign_of(&k.ad_id),
                facts,
                opts.policy.debounce_ms,
            );
            (
                k.clone(),
                (i64::from(v.funnel_gaps), i64::from(v.repeated_milestones)),
            )
        })
        .collect()
}
