//! The embedded log's appender (how the aggregator sends its offers of touches to
//! orders to the orders topic) queues a chunk of records at once, so they share the
//! log writer's group commits. What it must keep doing as it does so: every record
//! is in the log (durable) when it returns, in the order it was given, past a chunk's
//! bound.

use rm_aggregator::source::{EmbeddedSource, Source, Stream, EMBEDDED_APPEND_CHUNK};
use rm_eventlog::embedded::EmbeddedLog;
use rm_eventlog::EmbeddedLogConfig;

/// Records given to one append, over two chunks and a part.
const N: usize = 2 * EMBEDDED_APPEND_CHUNK + 17;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_embedded_append_is_whole_and_in_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log =
        EmbeddedLog::open(&dir.path().join("log"), &EmbeddedLogConfig::default()).expect("log");
    let records: Vec<(Vec<u8>, Vec<u8>)> = (0..N)
        .map(|i| (b"order".to_vec(), format!("offer-{i}").into_bytes()))
        .collect();
    let source = EmbeddedSource::with_orders(log.clone(), "g", "events", "orders").expect("source");
    let appender = source.appender().expect("an embedded source appends");
    appender.append(&records).await.expect("append");
    // Every one acknowledged (durable) when the append returned.
    assert_eq!(log.end_offset("orders").expect("end"), N as u64);

    let mut source =
        EmbeddedSource::with_orders(log, "reader", "events", "orders").expect("source");
    let mut read = Vec::new();
    while read.len() < N {
        let polled = source
            .poll(N, std::time::Duration::from_secs(5))
            .await
            .expect("poll");
        assert!(!polled.is_empty(), "read {} of {N} records", read.len());
        assert!(polled.iter().all(|r| r.stream == Stream::Orders));
        read.extend(polled.into_iter().map(|r| r.bytes));
    }
    let given: Vec<Vec<u8>> = records.into_iter().map(|(_, v)| v).collect();
    assert_eq!(read, given);
}
