//! Two writers of one partition (`rm_store::model::tallies`): a consumer that lost a
//! partition in a rebalance may still write a batch of it after the new owner cached
//! that partition's tallies. The real pipeline (the new owner) reads a scripted source
//! into the embedded store; between its two batches the test folds and writes the
//! old owner's batch beside it, as a consumer that lost the partition would. The
//! second batch names an ad whose state the old owner wrote and a place the
//! pipeline's cache holds from before that write: folded from that mix, the old
//! owner's event would count nowhere (the bug a three-broker group failover test
//! found). The counts stay exact.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rm_aggregator::batch::{fold_at, Policy, Position};
use rm_aggregator::pipeline::{self, load_sets, PipelineOptions, Progress};
use rm_aggregator::source::{Checkpoint, LagProbe, Raw, Source, Stream};
use rm_eventlog::embedded::EmbeddedLog;
use rm_eventlog::{EmbeddedLogConfig, LogError};
use rm_schemas::ad_id::{product_creative, AdIdKeys};
use rm_schemas::{EventRecord, InteractionEvent, InteractionType as T};
use rm_store::embedded::EmbeddedStore;
use rm_store::model::tallies::{Grain, Kind, Metric, Scope, TallyQuery};
use rm_store::{ReportStore, WriteStore};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// A source that hands out the batches the test sends it, as one consumer's poll of
/// a Kafka partition would.
struct Scripted {
    batches: mpsc::UnboundedReceiver<Vec<Raw>>,
    positions: BTreeMap<(Stream, i32), i64>,
    lag: LagProbe,
}

impl Source for Scripted {
    async fn poll(&mut self, _max: usize, wait: Duration) -> Result<Vec<Raw>, LogError> {
        let Ok(Some(batch)) = tokio::time::timeout(wait, self.batches.recv()).await else {
            return Ok(Vec::new());
        };
        for r in &batch {
            self.positions
                .insert((Stream::Events, r.partition), r.offset + 1);
        }
        Ok(batch)
    }

    fn checkpoint(&mut self) -> Checkpoint {
        Checkpoint(std::mem::take(&mut self.positions))
    }

    async fn commit_to(&mut self, _checkpoint: Checkpoint) -> Result<(), LogError> {
        Ok(())
    }

    fn take_rebalanced(&mut self) -> bool {
        false
    }

    fn lag_probe(&self) -> LagProbe {
        self.lag.clone()
    }
}

/// A product impression of a fresh served ad of one campaign, creative and product,
/// a minute ago.
fn impression(keys: &AdIdKeys, shopper: &str) -> EventRecord {
    let now = chrono::Utc::now();
    let expiry = now.timestamp() + 29 * 60;
    let ad = keys
        .mint("camp", &product_creative("sku-1"), expiry)
        .expect("ad id");
    let at = now - chrono::Duration::seconds(60);
    let e = InteractionEvent {
        session_id: Some(shopper.to_owned()),
        catalog_id: Some("cat".to_owned()),
        product_code: Some("sku-1".to_owned()),
        ..InteractionEvent::new(ad.as_str(), T::ProductImpression, at.fixed_offset())
    };
    EventRecord::new(e, uuid::Uuid::now_v7(), at + chrono::Duration::seconds(2))
}

fn raw(r: &EventRecord, offset: i64) -> Raw {
    Raw {
        stream: Stream::Events,
        bytes: r.to_bytes(),
        partition: 0,
        offset,
    }
}

/// Billable product impressions in the store's tallies.
async fn billable_impressions(store: &EmbeddedStore) -> i64 {
    let q = TallyQuery::history(Scope::Product, Grain::Day, vec![Kind::ProductImpression]);
    store
        .tallies(&q)
        .await
        .expect("read tallies")
        .expect("a new store is counted")
        .iter()
        .filter(|s| s.metric == Metric::Events(Kind::ProductImpression, None))
        .map(|s| s.value)
        .sum()
}

async fn eventually(what: &str, f: impl Fn() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < Duration::from_secs(10), "never: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_written_by_a_consumer_that_lost_the_partition_is_never_lost() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Arc::new(EmbeddedStore::open(&dir.path().join("store.redb")).expect("store"));
    let log = EmbeddedLog::open(&dir.path().join("log.redb"), &EmbeddedLogConfig::default())
        .expect("log");
    let keys = AdIdKeys::new(vec![b"0123456789abcdef-overtaken".to_vec()]).expect("keys");
    // Three served ads, one impression each, all counted at the same places of
    // partition 0: offsets 0, 1 and 2.
    let records: Vec<EventRecord> = ["b", "a", "c"]
        .iter()
        .map(|s| impression(&keys, s))
        .collect();

    let (send, batches) = mpsc::unbounded_channel();
    let source = Scripted {
        batches,
        positions: BTreeMap::new(),
        lag: LagProbe::Embedded(log, "g".to_owned(), Vec::new()),
    };
    let progress = Arc::new(Progress::default());
    let stop = CancellationToken::new();
    let opts = PipelineOptions {
        batch_max_records: 10,
        batch_max_wait: Duration::from_millis(20),
        batch_linger: Duration::ZERO,
        policy: Policy::default(),
        cache_max_entities: 10_000,
        served_retention: Duration::from_secs(48 * 3_600),
        erasures_every: Duration::from_secs(1),
        erasure_settle: Duration::from_secs(600),
        ageing: None,
        retention: None,
    };
    let task = tokio::spawn(pipeline::run_with_progress(
        source,
        Arc::clone(&store),
        "test",
        opts,
        stop.clone(),
        Arc::clone(&progress),
    ));

    // The new owner folds offset 0 and caches its places.
    send.send(vec![raw(&records[0], 0)]).expect("send");
    eventually("the first batch is stored", || progress.records() == 1).await;
    assert_eq!(billable_impressions(&store).await, 1);

    // The old owner, which read offsets 0 and 1 before it lost the partition, writes
    // them now (from what the store holds, as a restarted fold would).
    let zombie = &records[..2];
    let at: Vec<Position> = vec![(0, 0), (0, 1)];
    let mut sets = load_sets(&*store, zombie, &at).await.expect("load");
    let (write, _) = fold_at(zombie, Some(&at), &mut sets, &Policy::default());
    store.write(&write).await.expect("zombie write");
    assert_eq!(billable_impressions(&store).await, 2);

    // The new owner goes on from offset 1: the ad of offset 1 is not in its cache (the
    // store's state remembers the impression the old owner counted), the places are.
    send.send(vec![raw(&records[1], 1), raw(&records[2], 2)])
        .expect("send");
    eventually("the second batch is stored", || progress.records() == 3).await;
    assert_eq!(
        billable_impressions(&store).await,
        3,
        "every distinct impression counts once, whoever wrote it"
    );

    // A replay of everything from offset 0 changes nothing.
    send.send(records.iter().zip(0..).map(|(r, o)| raw(r, o)).collect())
        .expect("send");
    eventually("the replay is stored", || progress.records() == 6).await;
    assert_eq!(billable_impressions(&store).await, 3);

    stop.cancel();
    task.await.expect("task").expect("pipeline ends cleanly");
}
