//! The aggregator ages identifiers past their retention (`rm_aggregator::ageing`):
//! the real pipeline over the embedded log and store, with a retention of two
//! seconds and a pass every 200 ms. A shopper's cart and click are stored under the
//! raw id; once older than the retention the loop replaces it by its pseudonym (the
//! carts report names the pseudonym, the counts stay, no row keeps the raw id); a
//! new event of the shopper is stored under the raw id, and is aged in its turn; an
//! erasure then reaches the aged rows through the id's aged form.

#[path = "support/log.rs"]
mod log;

use std::sync::Arc;
use std::time::Duration;

use rm_aggregator::ageing::{aged_erasure, AgeingOptions};
use rm_aggregator::batch::Policy;
use rm_aggregator::pipeline::{self, PipelineOptions, Progress};
use rm_aggregator::source::EmbeddedSource;
use rm_eventlog::embedded::EmbeddedLog;
use rm_eventlog::EmbeddedLogConfig;
use rm_schemas::{EventRecord, InteractionEvent, InteractionType as T};
use rm_store::embedded::EmbeddedStore;
use rm_store::model::ageing::{Ageing, AgeingKey};
use rm_store::model::carts::CartStateRow;
use rm_store::model::erasure::Erasure;
use rm_store::{EraseStore, ReportFilter, ReportStore};
use tokio_util::sync::CancellationToken;

use log::{append, eventually, TOPIC};

const SHOPPER: &str = "cust-ageing-4b1d";

fn key() -> AgeingKey {
    AgeingKey::new(b"ageing-pipeline-secret")
}

fn event(kind: T, units: Option<u64>) -> EventRecord {
    let now = chrono::Utc::now();
    let event = InteractionEvent {
        customer_id: Some(SHOPPER.into()),
        catalog_id: Some("cat".into()),
        product_code: Some("sku-1".into()),
        units,
        ..InteractionEvent::new("rm1.camp-1.ad-1", kind, now.fixed_offset())
    };
    EventRecord::new(event, uuid::Uuid::now_v7(), now)
}

async fn carts(store: &EmbeddedStore) -> Vec<CartStateRow> {
    store.carts(&ReportFilter::default()).await.expect("carts")
}

/// An erasure of the raw id (not run by the loop: only to count what names it).
fn erasure() -> Erasure {
    Erasure::new("count".into(), None, SHOPPER, "test".into(), 0, None)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_loop_ages_ids_past_their_retention() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log =
        EmbeddedLog::open(&dir.path().join("log"), &EmbeddedLogConfig::default()).expect("log");
    let store = Arc::new(EmbeddedStore::open(&dir.path().join("store.redb")).expect("store"));
    append(
        &log,
        &[event(T::Cart, Some(2)), event(T::ProductClick, None)],
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
        ageing: Some(AgeingOptions {
            key: key(),
            retention: Duration::from_secs(2),
            every: Duration::from_millis(200),
        }),
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
    let pseudonym = Ageing::new(key(), 0).pseudonym(SHOPPER);

    eventually("the line is aged", || {
        let store = Arc::clone(&store);
        let p = pseudonym.clone();
        async move { carts(&store).await.iter().any(|c| c.tracking_id == p) }
    })
    .await;
    let lines = carts(&store).await;
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!((lines[0].units, lines[0].adds), (2, 1), "the counts stay");
    eventually("no row keeps the raw id", || {
        let store = Arc::clone(&store);
        async move { store.erase(&erasure()).await.expect("count").total() == 0 }
    })
    .await;

    // The shopper comes back: a new line under the raw id, aged in its turn.
    append(&log, &[event(T::Cart, Some(5))]).await;
    stored(3).await;
    eventually("the new line is aged too", || {
        let store = Arc::clone(&store);
        let p = pseudonym.clone();
        async move {
            let c = carts(&store).await;
            c.iter().all(|c| c.tracking_id == p) && c.iter().any(|c| c.units == 5)
        }
    })
    .await;
    assert_eq!(store.erase(&erasure()).await.expect("count").total(), 0);

    // An erasure reaches the aged rows through the id's aged form.
    let aged = aged_erasure(&erasure(), key()).expect("holds its id");
    let erased = store.erase(&aged).await.expect("erase");
    assert!(
        erased.cart_events > 0 && erased.touches > 0 && erased.product_facts > 0,
        "{erased:?}"
    );
    stop.cancel();
    task.await.expect("task").expect("pipeline ends cleanly");
}
