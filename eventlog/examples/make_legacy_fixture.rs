//! Writes the redb-format embedded log fixture `eventlog/tests/fixtures/events-v1.redb`
//! (see that folder's README): two topics of ~400-byte records in multi-record group
//! commits, a consumer group committed on each, and a retention pass that removed the
//! front of one topic, so the fixture has a first offset above 0.
//!
//! Usage: `cargo run -p rm-eventlog --example make_legacy_fixture -- <path>`.

use std::path::PathBuf;

use rm_eventlog::embedded::legacy::RedbLog;
use rm_eventlog::{EmbeddedLogConfig, EventLog};

/// A record naming its topic and index, padded to about 400 bytes like an edge record.
fn record(topic: &str, i: usize) -> Vec<u8> {
    let mut v = format!("{{\"topic\":\"{topic}\",\"i\":{i},\"pad\":\"").into_bytes();
    v.resize(396, b'x');
    v.extend_from_slice(b"\"}\n");
    v
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let path = PathBuf::from(std::env::args().nth(1).expect("usage: <path>"));
    let _ = std::fs::remove_file(&path);
    let cfg = EmbeddedLogConfig {
        retention_hours: 0,
        retention_bytes: 20_000,
        retention_check_secs: 3600,
        ..EmbeddedLogConfig::default()
    };
    let log = RedbLog::open(&path, &cfg).expect("open");
    for (topic, batches) in [("events", 12usize), ("orders", 3)] {
        for b in 0..batches {
            // Ten concurrent appends: one group commit of (usually) ten records.
            let tasks: Vec<_> = (0..10)
                .map(|j| {
                    let (l, v) = (log.clone(), record(topic, b * 10 + j));
                    tokio::spawn(async move { l.append(topic, b"k", v).await })
                })
                .collect();
            for t in tasks {
                t.await.expect("join").expect("append");
            }
        }
    }
    log.commit("aggregator", "events", 90).expect("commit");
    log.commit("aggregator", "orders", 25).expect("commit");
    log.commit("slow/reader", "events", 100).expect("commit");
    let removed = log.enforce_retention().expect("retention");
    for (topic, r) in removed {
        let st = log
            .retention_status(&topic)
            .expect("status")
            .expect("topic");
        println!(
            "{topic}: removed {} records in {} segments; first {} end {} retained {} bytes",
            r.records, r.segments, st.first_offset, st.end_offset, st.retained_bytes
        );
    }
}
