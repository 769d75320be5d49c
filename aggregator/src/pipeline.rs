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
//! are loaded from the store, which is the authority.
//!
//! **Orders** (the `orders` topic, read by the same source) follow the same rule: a
//! batch's orders are looked up in the store by id, only the ones it does not hold are
//! written (as order lines keyed by order id and line, in the same store write as the
//! batch's events), so a replayed or re-sent order changes nothing. Attribution is
//! computed at read time from the stored lines and touches, so it does not matter
//! whether an order or its click is stored first.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use rm_schemas::order::{self, OrderRecord};
use rm_schemas::EventRecord;
use tokio_util::sync::CancellationToken;

use crate::aggregate::carts::{CartFact, CartKey};
use crate::aggregate::funnel::{self, ViewFact, ViewKey};
use crate::batch::{fold, fold_orders, touched, EntitySets, Policy};
use crate::campaign::campaign_of;
use crate::metrics;
use crate::source::{Raw, Source, Stream};
use crate::store::{Store, StoreError};

/// Loop settings.
#[derive(Debug, Clone, Copy)]
pub struct PipelineOptions {
    /// Most records per batch.
    pub batch_max_records: usize,
    /// Longest wait after the first record of a batch.
    pub batch_max_wait: Duration,
    /// Aggregation policy.
    pub policy: Policy,
    /// Most entities kept in the cache.
    pub cache_max_entities: usize,
}

#[derive(Default)]
struct Cache {
    views: HashMap<ViewKey, Vec<ViewFact>>,
    carts: HashMap<CartKey, Vec<CartFact>>,
}

/// Runs until `shutdown`. Returns when the source fails for good.
pub async fn run<S: Source, T: Store>(
    mut source: S,
    store: Arc<T>,
    backend: &'static str,
    opts: PipelineOptions,
    shutdown: CancellationToken,
) -> Result<(), crate::AggregatorError> {
    let mut cache = Cache::default();
    let mut newest_ms: Option<i64> = None;
    let probe = source.lag_probe();
    let stop = shutdown.clone();
    let _sampler = AbortOnDrop(tokio::spawn(async move {
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
    }));
    loop {
        let polled = tokio::select! {
            () = shutdown.cancelled() => return Ok(()),
            p = source.poll(opts.batch_max_records, opts.batch_max_wait) => p,
        };
        let raw = match polled {
            Ok(r) => r,
            Err(e) if e.is_retryable() => {
                tracing::warn!(error = %e, "reading the log failed; retrying");
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        if source.take_rebalanced() {
            cache = Cache::default();
        }
        if !raw.is_empty() {
            let (records, orders) = decode(&raw);
            let Some(outcome) = process(
                &records, &orders, &mut cache, &*store, backend, &opts, &shutdown,
            )
            .await
            else {
                return Ok(()); // shutting down mid-batch: nothing committed, it will be replayed
            };
            newest_ms = newest_ms.max(outcome);
            if let Err(e) = source.commit().await {
                tracing::warn!(error = %e, "offset commit failed; the batch may be replayed (harmless)");
            }
        }
        if let Some(ms) = newest_ms {
            let now = chrono::Utc::now().timestamp_millis();
            ::metrics::gauge!(metrics::FRESHNESS).set((now - ms).max(0) as f64 / 1000.0);
        }
    }
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn decode(raw: &[Raw]) -> (Vec<EventRecord>, Vec<OrderRecord>) {
    let mut events = Vec::with_capacity(raw.len());
    let mut orders = Vec::new();
    let mut bad = 0u64;
    for r in raw {
        match r.stream {
            Stream::Events => match EventRecord::from_bytes(r) {
                Ok(rec) => events.push(rec),
                Err(e) => {
                    bad += 1;
                    tracing::warn!(error = %e, "undecodable record skipped");
                }
            },
            Stream::Orders => match order::parse_record(r) {
                Ok(rec) => orders.push(rec),
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
    (events, orders)
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

/// Folds and stores one batch; the newest event time stored, or `None` on shutdown.
async fn process<T: Store>(
    records: &[EventRecord],
    orders: &[OrderRecord],
    cache: &mut Cache,
    store: &T,
    backend: &'static str,
    opts: &PipelineOptions,
    shutdown: &CancellationToken,
) -> Option<Option<i64>> {
    let (views, carts) = touched(records);
    let missing_views: HashSet<ViewKey> = views
        .iter()
        .filter(|k| !cache.views.contains_key(*k))
        .cloned()
        .collect();
    let missing_carts: HashSet<CartKey> = carts
        .iter()
        .filter(|k| !cache.carts.contains_key(*k))
        .cloned()
        .collect();
    let mut sets = EntitySets::default();
    if !missing_views.is_empty() || !missing_carts.is_empty() {
        match retry("load", shutdown, || {
            store.load(&missing_views, &missing_carts)
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
    for k in &views {
        if let Some(v) = cache.views.remove(k) {
            sets.views.insert(k.clone(), v);
        }
    }
    for k in &carts {
        if let Some(v) = cache.carts.remove(k) {
            sets.carts.insert(k.clone(), v);
        }
    }
    let known = if orders.is_empty() {
        HashSet::new()
    } else {
        let ids: HashSet<String> = orders.iter().map(|o| o.order.id.clone()).collect();
        match retry("load orders", shutdown, || store.known_orders(&ids)).await? {
            Ok(k) => k,
            Err(e) => {
                // Without knowing which orders are stored, a re-sent one could change.
                tracing::error!(error = %e, "store refused an order lookup; stopping the pipeline");
                shutdown.cancel();
                return None;
            }
        }
    };
    let before = violations(&sets, opts);
    let (mut write, stats) = fold(records, &mut sets, &opts.policy);
    let (order_lines, order_stats) = fold_orders(orders, &known);
    write.order_lines = order_lines;
    // Only the views the batch re-derived can have changed; fold already derived them.
    let delta = write.views.iter().fold((0, 0), |(g, r), v| {
        let (bg, br) = before.get(&v.key).copied().unwrap_or_default();
        (
            g + i64::from(v.funnel_gaps) - bg,
            r + i64::from(v.repeated_milestones) - br,
        )
    });
    let started = std::time::Instant::now();
    match retry("write", shutdown, || store.write(&write)).await? {
        Ok(()) => {}
        Err(e) => {
            tracing::error!(error = %e, "store refused a batch; stopping the pipeline without committing it");
            shutdown.cancel();
            return None;
        }
    }
    ::metrics::histogram!(metrics::STORE_WRITE, "backend" => backend)
        .record(started.elapsed().as_secs_f64());
    metrics::batch(records.len() + orders.len(), &stats, delta.0, delta.1);
    metrics::orders(&order_stats);
    if cache.views.len() + cache.carts.len() + sets.views.len() + sets.carts.len()
        > opts.cache_max_entities
    {
        *cache = Cache::default();
    }
    cache.views.extend(sets.views);
    cache.carts.extend(sets.carts);
    Some(write.newest_event_ms)
}

/// Rule violations (funnel gaps, repeated milestones) of each view's current set.
fn violations(sets: &EntitySets, opts: &PipelineOptions) -> HashMap<ViewKey, (i64, i64)> {
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
