//! A poll returns what the log holds for the reader now, and waits only while it holds
//! nothing: the pipeline's reader gathers polls into a batch until the loop can take
//! it, so a poll that waited out its time with records in hand would only make every
//! batch that much staler. On the embedded log and on Kafka (three brokers, started by
//! `deploy/local/up.sh`; skipped without `RM_KAFKA_BROKERS` unless
//! `RM_REQUIRE_SERVICES=1`).

use std::time::{Duration, Instant};

#[path = "support/kafka.rs"]
mod support;

use rm_aggregator::source::{EmbeddedSource, KafkaSource, Raw, Source};
use rm_eventlog::embedded::EmbeddedLog;
use rm_eventlog::kafka::KafkaLog;
use rm_eventlog::{EmbeddedLogConfig, EventLog, KafkaConfig};

/// Far longer than any read of records already there takes.
const LONG: Duration = Duration::from_secs(20);

/// Polls until `n` records came, each poll allowed [`LONG`]; returns them and the
/// number of polls.
async fn read_n(source: &mut impl Source, n: usize) -> (Vec<Raw>, usize) {
    let (mut read, mut polls) = (Vec::new(), 0);
    while read.len() < n {
        polls += 1;
        assert!(polls < 100, "read {} of {n} records", read.len());
        read.extend(source.poll(1_000, LONG).await.expect("poll"));
    }
    (read, polls)
}

/// The embedded log: records already there come back at once; on an empty log the
/// poll returns with the first record appended, not at the end of its wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_embedded_poll_returns_what_the_log_holds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = EmbeddedLog::open(&dir.path().join("log.redb"), &EmbeddedLogConfig::default())
        .expect("log");
    for i in 0..3u8 {
        log.append("events", b"k", vec![i]).await.expect("append");
    }
    let mut source =
        EmbeddedSource::with_orders(log.clone(), "g", "events", "orders").expect("source");
    let t = Instant::now();
    let first = source.poll(1_000, LONG).await.expect("poll");
    assert_eq!(
        first.iter().map(|r| r.bytes[0]).collect::<Vec<_>>(),
        [0, 1, 2]
    );
    assert!(
        t.elapsed() < LONG / 4,
        "waited {:?} holding records",
        t.elapsed()
    );

    let late = log.clone();
    let appender = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        late.append("events", b"k", vec![3]).await.expect("append");
    });
    let t = Instant::now();
    let (next, _) = read_n(&mut source, 1).await;
    assert_eq!(next[0].bytes, vec![3]);
    assert!(
        t.elapsed() < LONG / 4,
        "waited {:?} after the append",
        t.elapsed()
    );
    appender.await.expect("appender");

    // Nothing there: the wait runs out and the poll is empty.
    let idle = source
        .poll(1_000, Duration::from_millis(50))
        .await
        .expect("poll");
    assert!(idle.is_empty());
}

/// Kafka: records fetched come back without the poll waiting out its time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kafka_poll_returns_what_the_log_holds() {
    let Some((kafka, tag)) = support::kafka() else {
        return;
    };
    let kafka = KafkaConfig {
        partitions: 2,
        ..kafka
    };
    let (events, orders) = (
        format!("rm-test-poll-{tag}"),
        format!("rm-test-poll-orders-{tag}"),
    );
    let log = KafkaLog::connect(&kafka, &[events.clone(), orders.clone()])
        .await
        .expect("kafka");
    for i in 0..50u8 {
        log.append(&events, &[i], vec![i]).await.expect("append");
    }
    let mut source =
        KafkaSource::connect_with_orders(&kafka, &format!("g-{tag}"), &events, &orders)
            .expect("consumer");
    // Joining the group and the first fetch take a while; after that, each poll
    // returns what was fetched.
    let t = Instant::now();
    let (read, polls) = read_n(&mut source, 50).await;
    let mut bytes: Vec<u8> = read.iter().map(|r| r.bytes[0]).collect();
    bytes.sort_unstable();
    assert_eq!(bytes, (0..50).collect::<Vec<u8>>());
    assert!(
        t.elapsed() < LONG,
        "{polls} polls took {:?}: a poll waited out its time holding records",
        t.elapsed()
    );

    let late = log.clone();
    let topic = events.clone();
    let appender = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        late.append(&topic, b"k", vec![99]).await.expect("append");
    });
    let t = Instant::now();
    let (next, _) = read_n(&mut source, 1).await;
    assert_eq!(next[0].bytes, vec![99]);
    assert!(
        t.elapsed() < LONG / 2,
        "waited {:?} after the append",
        t.elapsed()
    );
    appender.await.expect("appender");
    source.commit().await.expect("commit");
}
