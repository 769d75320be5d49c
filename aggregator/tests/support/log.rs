//! Helpers the pipeline tests share: appending records to the embedded log's events
//! topic, and waiting for a condition the running loop brings about.

use std::time::{Duration, Instant};

use rm_eventlog::embedded::EmbeddedLog;
use rm_eventlog::EventLog;
use rm_schemas::EventRecord;

/// The events topic of the tests' logs.
pub const TOPIC: &str = "events";

/// Appends `records` to [`TOPIC`], keyed as the edge keys them.
pub async fn append(log: &EmbeddedLog, records: &[EventRecord]) {
    for r in records {
        log.append(TOPIC, r.partition_key(), r.to_bytes())
            .await
            .expect("append");
    }
}

/// Polls `f` until it holds, for at most 20 s.
pub async fn eventually<F: std::future::Future<Output = bool>>(what: &str, f: impl Fn() -> F) {
    let t = Instant::now();
    while !f().await {
        assert!(t.elapsed() < Duration::from_secs(20), "never: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
