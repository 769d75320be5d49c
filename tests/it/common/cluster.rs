//! The local three-node Apache Kafka cluster as the failure tests drive it
//! (`tests/it/kafka_broker_loss.rs`, `tests/it/kafka_group_failover.rs`,
//! `tests/it/kafka_rolling_restart.rs`): nodes killed, stopped and started through
//! `deploy/local/up.sh` (never a broker mock), partition leaders and replicas read from
//! the cluster's metadata with the `rdkafka` crate, and a topic read back whole, by
//! event, to check what the edge acknowledged.
//!
//! A test needs `RM_KAFKA_BROKERS` to name up.sh's cluster (the nodes it can kill);
//! otherwise it prints `SKIPPED`, or fails under `RM_REQUIRE_SERVICES=1`.
#![allow(dead_code, clippy::unwrap_used, missing_docs)]

use std::collections::{BTreeMap, HashMap};
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};

/// Tests that kill or restart brokers take this lock: one disturbs the cluster at a
/// time (the binaries run one after another anyway; this covers tests of one binary).
pub static CLUSTER: Mutex<()> = Mutex::new(());

const UP_SH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/local/up.sh");

/// Runs `deploy/local/up.sh ARGS` and returns its stdout (`KEY=VALUE` lines).
/// A command that stops or kills a node holds the shared servers exclusively until the
/// test ends ([`super::servers::exclusive`]).
pub fn up_sh(args: &[&str]) -> String {
    if args
        .first()
        .is_some_and(|c| c.ends_with("-stop") || c.ends_with("-kill") || c.ends_with("-restart"))
    {
        super::servers::exclusive();
    }
    let out = Command::new("bash")
        .arg(UP_SH)
        .args(args)
        .stderr(std::process::Stdio::inherit())
        .output()
        .unwrap();
    assert!(out.status.success(), "deploy/local/up.sh {args:?} failed");
    String::from_utf8(out.stdout).unwrap()
}

/// The running nodes, by node id, with their pids (`up.sh kafka-pids`).
pub fn node_pids() -> BTreeMap<i32, String> {
    up_sh(&["kafka-pids"])
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once('=')?;
            Some((k.strip_prefix("RM_KAFKA_PID_")?.parse().ok()?, v.to_owned()))
        })
        .collect()
}

/// The cluster's bootstrap list, when it is up.sh's three nodes (which a test may
/// kill and restart); `None` (the test is skipped) otherwise.
pub fn cluster() -> Option<String> {
    let brokers = crate::common::required_setting("RM_KAFKA_BROKERS", "the Kafka cluster")?;
    let nodes = node_pids().len();
    let expected = up_sh(&["env"])
        .lines()
        .find_map(|l| l.strip_prefix("RM_KAFKA_BROKERS=").map(str::to_owned))
        .unwrap_or_default();
    if nodes < 3 || brokers != expected {
        let why = format!(
            "RM_KAFKA_BROKERS={brokers} is not deploy/local/up.sh's running three-node \
             cluster ({expected}, {nodes} nodes running): this test kills its brokers"
        );
        if std::env::var("RM_REQUIRE_SERVICES").as_deref() == Ok("1") {
            panic!("{why}");
        }
        eprintln!("SKIPPED: {why}");
        return None;
    }
    Some(brokers)
}

/// Starts every node that is not running when dropped, so a failing test leaves the
/// cluster whole for the next one.
pub struct AllNodesBack;

impl Drop for AllNodesBack {
    fn drop(&mut self) {
        let _ = Command::new("bash").args([UP_SH, "kafka-start"]).status();
    }
}

pub fn consumer(brokers: &str) -> BaseConsumer {
    ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("group.id", "rm-test-metadata")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap()
}

/// One partition as the metadata shows it.
#[derive(Debug, Clone)]
pub struct PartitionState {
    pub id: i32,
    pub leader: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
}

pub fn partitions(brokers: &str, topic: &str) -> Vec<PartitionState> {
    let c = consumer(brokers);
    let md = c
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .unwrap();
    let t = md.topics().iter().find(|t| t.name() == topic).unwrap();
    t.partitions()
        .iter()
        .map(|p| PartitionState {
            id: p.id(),
            leader: p.leader(),
            replicas: p.replicas().to_vec(),
            isr: p.isr().to_vec(),
        })
        .collect()
}

/// The partition holding the most records of `topic` and its leader's node id.
pub fn busiest_partition(brokers: &str, topic: &str) -> (i32, i32, i64) {
    let c = consumer(brokers);
    partitions(brokers, topic)
        .into_iter()
        .map(|p| {
            let (_, high) = c
                .fetch_watermarks(topic, p.id, Duration::from_secs(10))
                .unwrap();
            (p.id, p.leader, high)
        })
        .max_by_key(|(_, _, high)| *high)
        .unwrap()
}

/// Waits until every partition of `topics` has all its replicas in sync and a leader
/// (what a rolling restart waits for before the next node); returns how long it took.
pub fn wait_in_sync(brokers: &str, topics: &[&str], within: Duration) -> Duration {
    let t = Instant::now();
    loop {
        let lagging: Vec<String> = topics
            .iter()
            .flat_map(|topic| {
                partitions(brokers, topic)
                    .into_iter()
                    .filter(|p| p.leader < 0 || p.isr.len() < p.replicas.len())
                    .map(move |p| format!("{topic}/{}: {p:?}", p.id))
            })
            .collect();
        if lagging.is_empty() {
            return t.elapsed();
        }
        assert!(
            t.elapsed() < within,
            "partitions not back in sync within {within:?}: {lagging:?}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Every record of `topic`, read from the beginning up to the end offsets seen when
/// called (so nothing written later is waited for), each offset once: a consumer
/// may deliver an offset again when a partition's leader moves while it reads (the
/// broker loss test's restarted broker takes its leaderships back), and a record at
/// one offset is one record written, however often it is read. Each with its
/// partition and offset.
pub fn read_topic(brokers: &str, topic: &str) -> Vec<(i32, i64, rm_schemas::EventRecord)> {
    let c = consumer(brokers);
    let mut ends = HashMap::new();
    let mut tpl = TopicPartitionList::new();
    for p in partitions(brokers, topic) {
        let (_, high) = c
            .fetch_watermarks(topic, p.id, Duration::from_secs(10))
            .unwrap();
        if high > 0 {
            ends.insert(p.id, high);
            tpl.add_partition_offset(topic, p.id, Offset::Beginning)
                .unwrap();
        }
    }
    c.assign(&tpl).unwrap();
    let mut out = Vec::new();
    let mut next: HashMap<i32, i64> = HashMap::new();
    let mut redelivered = 0usize;
    let mut done: HashMap<i32, bool> = ends.keys().map(|p| (*p, false)).collect();
    let t = Instant::now();
    while done.values().any(|d| !d) {
        assert!(
            t.elapsed() < Duration::from_secs(120),
            "could not read {topic} to its end"
        );
        if let Some(m) = c.poll(Duration::from_millis(200)) {
            let m = m.unwrap();
            let at = next.entry(m.partition()).or_insert(0);
            if m.offset() < *at {
                redelivered += 1;
                continue;
            }
            *at = m.offset() + 1;
            let record = rm_schemas::EventRecord::from_bytes(m.payload().unwrap()).unwrap();
            out.push((m.partition(), m.offset(), record));
            if m.offset() + 1 >= ends[&m.partition()] {
                done.insert(m.partition(), true);
            }
        }
    }
    if redelivered > 0 {
        eprintln!("read {topic}: {redelivered} records delivered again by the consumer, read once");
    }
    out
}

/// Drops a test's ClickHouse database like [`crate::common::DropDatabase`], but gives
/// up after 30 s: on the loaded test machine ClickHouse 18.16's `DROP DATABASE` took
/// minutes after these tests (seen after `tests/aggregate_exact.rs` too: the
/// `views` and `view_facts` tables last), and a test must not hang on its clean-up.
pub struct DropDatabaseWithin(String, String);

impl From<crate::common::DropDatabase> for DropDatabaseWithin {
    fn from(guard: crate::common::DropDatabase) -> Self {
        let out = Self(guard.0.clone(), guard.1.clone());
        std::mem::forget(guard);
        out
    }
}

impl Drop for DropDatabaseWithin {
    fn drop(&mut self) {
        let dropped = Command::new("curl")
            .args([
                "-sf",
                "--max-time",
                "30",
                &self.0,
                "--data-binary",
                &format!("DROP DATABASE IF EXISTS {}", self.1),
            ])
            .status()
            .is_ok_and(|s| s.success());
        if !dropped {
            eprintln!(
                "warning: ClickHouse did not drop database {} within 30 s; it stays until \
                 deploy/local/down.sh --purge",
                self.1
            );
        }
    }
}
