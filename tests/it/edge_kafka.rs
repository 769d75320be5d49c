//! The edge on the real Kafka cluster (three Apache Kafka nodes started by
//! `deploy/local/up.sh`; found through `RM_KAFKA_BROKERS`): records read back exactly,
//! and a cluster that stops answering turns the edge to 503, never to a 200 for a lost
//! event.
#![allow(clippy::unwrap_used, missing_docs)]

use crate::common;

use std::collections::{HashMap, HashSet};
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::{beacon, get, required_setting, Service};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
use rm_schemas::EventRecord;

/// Tests here pause the shared broker: run them one at a time.
static BROKER: Mutex<()> = Mutex::new(());

fn fresh_topic(name: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("test-{name}-{}-{nanos}", std::process::id())
}

/// Reads every record of `topic` from the beginning until `expect` arrive or `within` passes.
fn consume_all(
    brokers: &str,
    topic: &str,
    expect: usize,
    within: Duration,
) -> Vec<(Vec<u8>, EventRecord)> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("group.id", format!("reader-{topic}"))
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let md = consumer
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .unwrap();
    let partitions = md.topics()[0].partitions().len();
    assert!(partitions > 0, "topic {topic} has no partitions");
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p as i32, Offset::Beginning)
            .unwrap();
    }
    consumer.assign(&tpl).unwrap();
    let mut out = Vec::new();
    let t = Instant::now();
    while out.len() < expect && t.elapsed() < within {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(200)) {
            let rec = EventRecord::from_bytes(m.payload().unwrap()).unwrap();
            out.push((m.key().unwrap_or_default().to_vec(), rec));
        }
    }
    // Anything beyond `expect` would be a duplicate: give it a moment to show up.
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(1) {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) {
            out.push((
                m.key().unwrap_or_default().to_vec(),
                EventRecord::from_bytes(m.payload().unwrap()).unwrap(),
            ));
        }
    }
    out
}

fn edge_on_kafka(
    brokers: &str,
    topic: &str,
    extra: &[(&str, String)],
) -> (tempfile::TempDir, Service) {
    let dir = tempfile::tempdir().unwrap();
    let mut env = vec![
        ("RM_KAFKA_BROKERS", brokers.to_string()),
        ("RM_INGEST_TOPIC", topic.to_string()),
        ("RM_INGEST_REJECTED_TOPIC_NAME", format!("{topic}-rejected")),
        ("RM_KAFKA_PARTITIONS", "3".to_string()),
    ];
    env.extend(extra.iter().map(|(k, v)| (*k, v.clone())));
    let svc = Service::start("ingest", dir.path(), &env);
    (dir, svc)
}

fn event(i: usize) -> Vec<(&'static str, String)> {
    let ad = format!("ad-{}", i % 7);
    let ts = format!(
        "2026-11-22T10:{:02}:{:02}.{:03}Z",
        (i / 60) % 60,
        i % 60,
        i % 1000
    );
    match i % 3 {
        0 => vec![
            ("adId", ad),
            ("interactionType", "videoMidpoint".into()),
            ("timestamp", ts),
            ("sessionId", format!("s-{i}")),
            ("videoId", "v-9".into()),
        ],
        1 => vec![
            ("adId", ad),
            ("interactionType", "productClick".into()),
            ("timestamp", ts),
            ("customerId", format!("c-{i}")),
            ("productCode", format!("p-{i}")),
            ("catalogId", "cat".into()),
        ],
        _ => vec![
            ("adId", ad),
            ("interactionType", "cart".into()),
            ("timestamp", ts),
            ("dtmToken", format!("d-{i}")),
            ("productCode", "p".into()),
            ("catalogId", "cat".into()),
            ("units", (i % 5).to_string()),
            ("conversionValue", "12.5".into()),
            ("iabConsentString", "CO-x+y/z".into()),
        ],
    }
}

fn fire(addr: std::net::SocketAddr, params: &[(&'static str, String)]) -> u16 {
    let p: Vec<(&str, &str)> = params.iter().map(|(k, v)| (*k, v.as_str())).collect();
    get(addr, &beacon(&p)).map(|r| r.status).unwrap_or(0)
}

fn tracking(r: &EventRecord) -> String {
    r.event.tracking_id().to_string()
}

#[test]
fn beacons_are_read_back_from_kafka_exactly() {
    let Some(brokers) = required_setting("RM_KAFKA_BROKERS", "the Kafka cluster") else {
        return;
    };
    let _serial = BROKER.lock().unwrap_or_else(|e| e.into_inner());
    let topic = fresh_topic("exact");
    let (_dir, svc) = edge_on_kafka(&brokers, &topic, &[]);
    let n = 300;
    for i in 0..n {
        assert_eq!(fire(svc.ingest, &event(i)), 200, "event {i}");
    }
    // Duplicates are answered 200 and not written again.
    for i in (0..n).step_by(10) {
        assert_eq!(fire(svc.ingest, &event(i)), 200, "duplicate {i}");
    }
    assert_eq!(svc.terminate(), Some(0));
    let got = consume_all(&brokers, &topic, n, Duration::from_secs(30));
    assert_eq!(got.len(), n, "exactly one record per distinct event");
    let by_id: HashMap<String, &(Vec<u8>, EventRecord)> =
        got.iter().map(|r| (tracking(&r.1), r)).collect();
    assert_eq!(by_id.len(), n);
    for i in 0..n {
        let sent = event(i);
        let id = &sent[3].1;
        let (key, rec) = by_id.get(id).unwrap_or_else(|| panic!("event {i} missing"));
        let expected = if rec.event.interaction_type == rm_schemas::InteractionType::Cart {
            rec.event.tracking_id()
        } else {
            rec.event.ad_id.as_str()
        };
        assert_eq!(
            key,
            expected.as_bytes(),
            "record key: the ad id, a cart event's the tracking id"
        );
        assert_eq!(rec.event.ad_id, sent[0].1);
        assert_eq!(rec.event.interaction_type.as_str(), sent[1].1);
        assert_eq!(
            rec.event
                .timestamp
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            sent[2].1
        );
        if i % 3 == 2 {
            assert_eq!(rec.event.units, Some((i % 5) as u64));
            assert_eq!(rec.event.conversion_value, Some(12.5));
            assert_eq!(rec.event.iab_consent_string.as_deref(), Some("CO-x+y/z"));
        }
        assert_eq!(rec.dedup_key, rm_schemas::DedupKey::of(&rec.event));
    }
}

/// The pids of up.sh's Kafka nodes (`deploy/local/up.sh kafka-pids`).
fn broker_pids() -> Vec<String> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/local/up.sh");
    let out = Command::new("bash")
        .args([script, "kafka-pids"])
        .output()
        .unwrap();
    let pids: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_once('=').map(|(_, pid)| pid.to_string()))
        .collect();
    assert!(!pids.is_empty(), "no Kafka node of deploy/local/up.sh runs");
    pids
}

struct Resume(Vec<String>);

impl Drop for Resume {
    fn drop(&mut self) {
        for pid in &self.0 {
            let _ = Command::new("kill").args(["-CONT", pid]).status();
        }
    }
}

#[test]
fn a_stopped_broker_gives_503_never_a_lost_200_and_the_edge_recovers() {
    let Some(brokers) = required_setting("RM_KAFKA_BROKERS", "the Kafka cluster") else {
        return;
    };
    common::servers::exclusive();
    let _serial = BROKER.lock().unwrap_or_else(|e| e.into_inner());
    let topic = fresh_topic("outage");
    let (_dir, svc) = edge_on_kafka(
        &brokers,
        &topic,
        &[("RM_INGEST_WRITE_DEADLINE_MS", "1500".into())],
    );
    let mut acked = HashSet::new();
    let mut i = 0;
    while i < 50 {
        assert_eq!(fire(svc.ingest, &event(i)), 200);
        acked.insert(i);
        i += 1;
    }
    // Stop every broker (SIGSTOP: they keep their data but answer nothing; one
    // broker's loss is tests/it/kafka_broker_loss.rs).
    let pids = broker_pids();
    let resume = Resume(pids.clone());
    for pid in &pids {
        assert!(Command::new("kill")
            .args(["-STOP", pid])
            .status()
            .unwrap()
            .success());
    }
    let mut unavailable = 0;
    let outage = Instant::now();
    while outage.elapsed() < Duration::from_secs(8) {
        let params: Vec<(&str, String)> = event(i);
        let p: Vec<(&str, &str)> = params.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let r = get(svc.ingest, &beacon(&p)).unwrap();
        match r.status {
            200 => {
                acked.insert(i);
            }
            503 => {
                unavailable += 1;
                assert!(r.header("retry-after").is_some(), "503 carries Retry-After");
                assert_eq!(r.json()["code"], 14);
            }
            s => panic!("unexpected status {s} during the outage"),
        }
        i += 1;
    }
    assert!(unavailable > 0, "no 503 while the broker was stopped");
    let ready = get(svc.ingest, "/readyz").unwrap();
    assert_eq!(ready.status, 503, "readyz reports the outage");
    drop(resume);
    // The edge recovers by itself.
    svc.wait_ready(svc.ingest, Duration::from_secs(60));
    let t = Instant::now();
    let mut recovered = false;
    while t.elapsed() < Duration::from_secs(60) {
        let st = fire(svc.ingest, &event(i));
        if st == 200 {
            acked.insert(i);
            recovered = true;
            i += 1;
            break;
        }
        i += 1;
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(recovered, "edge did not recover after the broker returned");
    for _ in 0..50 {
        assert_eq!(fire(svc.ingest, &event(i)), 200);
        acked.insert(i);
        i += 1;
    }
    assert_eq!(svc.terminate(), Some(0));
    let got = consume_all(&brokers, &topic, acked.len(), Duration::from_secs(60));
    let ids: HashSet<String> = got.iter().map(|r| tracking(&r.1)).collect();
    for a in &acked {
        let id = &event(*a)[3].1;
        assert!(
            ids.contains(id),
            "event {a} was answered 200 but is not in Kafka"
        );
    }
    eprintln!(
        "outage: {unavailable} answered 503; {} acknowledged, all present",
        acked.len()
    );
}
