//! A broker dies under load: the edge on the local three-node Kafka cluster takes
//! beacons at a steady rate from eight clients while the leader of the busiest
//! partition is `kill -9`ed, and later restarted.
//!
//! What it argues: `acks=all` with three replicas and `min.insync.replicas=2` loses
//! nothing a 200 answered (every acknowledged beacon is read back from the topic with
//! the crate, by event), writes an event again only as the same record (the same
//! event, so the same dedup key, which the aggregator drops), and costs the edge a
//! bounded window of 503s with `Retry-After` (while the controller fences the dead
//! broker and moves its leaderships) after which it recovers by itself. The test
//! prints the window, the 503s and the records checked (README, Tests).
//!
//! **Copies.** A beacon answered 503 may have been written after all, so its retry
//! writes it again: at most one record per request, the idempotent producer's
//! promise. Rarely, a leader's change writes one request twice: librdkafka bumps its
//! producer epoch after an out-of-order sequence and sends again a batch the old
//! leader had already persisted (confluentinc/librdkafka#4953, open; seen here once,
//! "event 1311 written 5 times for 4 requests", in a full suite run). Such copies
//! are the same record, harmless to the counts, so they are counted apart, printed
//! with their partitions and offsets, and bounded (at most one acknowledged event in
//! a hundred): a producer that wrote every retry twice would fail it.
#![allow(clippy::unwrap_used, missing_docs)]

use crate::common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{beacon, get, Service};

use crate::common::cluster;

/// Clients firing at once, and beacons a second each.
const CLIENTS: usize = 8;
const PER_CLIENT_PER_SEC: u64 = 40;

/// One beacon's distinct event: its own session, so its tracking id names it, and its
/// own served ad, so the records (keyed by ad id) spread over every partition as a
/// shop's traffic does.
fn event(run: u128, i: usize) -> Vec<(&'static str, String)> {
    vec![
        ("adId", format!("rm1.camp-loss.ad-{i}")),
        ("interactionType", "videoPlay".into()),
        (
            "timestamp",
            format!("2026-11-22T10:{:02}:{:02}.000Z", (i / 60) % 60, i % 60),
        ),
        ("sessionId", format!("loss-{run}-{i}")),
        ("videoId", "v-1".into()),
    ]
}

/// When a request was sent and when its answer came.
type Answered = (Instant, Instant);

/// What one client saw for one event: the answers, each with when it came.
struct Fired {
    id: usize,
    answers: Vec<(Instant, Instant, u16)>,
}

/// Fires distinct events at a steady rate until `stop`; a 503 (which must carry
/// `Retry-After`) is retried after 100 ms, as a player would.
fn client(
    ingest: std::net::SocketAddr,
    run: u128,
    first: usize,
    stop: Arc<AtomicBool>,
) -> Vec<Fired> {
    let mut out = Vec::new();
    let period = Duration::from_micros(1_000_000 / PER_CLIENT_PER_SEC);
    let mut next = Instant::now();
    let mut id = first;
    while !stop.load(Ordering::Relaxed) {
        let params = event(run, id);
        let p: Vec<(&str, &str)> = params.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let path = beacon(&p);
        let mut fired = Fired {
            id,
            answers: Vec::new(),
        };
        loop {
            let sent = Instant::now();
            let status = match get(ingest, &path) {
                Ok(r) => {
                    if r.status == 503 {
                        assert!(r.header("retry-after").is_some(), "503 without Retry-After");
                    }
                    r.status
                }
                Err(_) => 0,
            };
            fired.answers.push((sent, Instant::now(), status));
            match status {
                200 => break,
                503 if fired.answers.len() < 200 => std::thread::sleep(Duration::from_millis(100)),
                s => panic!(
                    "event {id}: answered {s} (after {} tries)",
                    fired.answers.len()
                ),
            }
        }
        out.push(fired);
        id += CLIENTS;
        next += period;
        if let Some(wait) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    }
    out
}

#[test]
fn a_leader_killed_under_load_loses_no_acknowledged_beacon() {
    let Some(brokers) = cluster::cluster() else {
        return;
    };
    // It takes brokers down: no other test runs on the cluster meanwhile.
    common::servers::exclusive();
    let _serial = cluster::CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let _back = cluster::AllNodesBack;
    let run = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let topic = format!("test-loss-{}-{run}", std::process::id());
    let dir = tempfile::tempdir().unwrap();
    let edge = Service::start(
        "ingest",
        dir.path(),
        &[
            ("RM_KAFKA_BROKERS", brokers.clone()),
            ("RM_KAFKA_PARTITIONS", "6".into()),
            ("RM_INGEST_TOPIC", topic.clone()),
            ("RM_INGEST_REJECTED_TOPIC_NAME", format!("{topic}-rejected")),
        ],
    );
    // Created by the service: three replicas, two in sync before an acknowledgement.
    for p in cluster::partitions(&brokers, &topic) {
        assert_eq!(p.replicas.len(), 3, "partition {} replicas", p.id);
    }

    // The producer's first write waits for its connections and producer id: wait for
    // one 200 before the load starts (that event is checked like the others).
    let t = Instant::now();
    while get(edge.ingest, &{
        let params = event(run, usize::MAX);
        let p: Vec<(&str, &str)> = params.iter().map(|(k, v)| (*k, v.as_str())).collect();
        beacon(&p)
    })
    .map(|r| r.status)
    .unwrap_or(0)
        != 200
    {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "the edge never wrote"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let stop = Arc::clone(&stop);
            let ingest = edge.ingest;
            std::thread::spawn(move || client(ingest, run, c, stop))
        })
        .collect();

    std::thread::sleep(Duration::from_secs(4));
    let (partition, leader, records) = cluster::busiest_partition(&brokers, &topic);
    let killed_at = Instant::now();
    cluster::up_sh(&["kafka-kill", &leader.to_string()]);
    eprintln!("kill -9 of node {leader}, leader of partition {partition} ({records} records)");
    std::thread::sleep(Duration::from_secs(12));
    let restart = Instant::now();
    cluster::up_sh(&["kafka-start", &leader.to_string()]);
    eprintln!("node {leader} started again in {:?}", restart.elapsed());
    let in_sync = cluster::wait_in_sync(&brokers, &[&topic], Duration::from_secs(60));
    eprintln!("every replica in sync {in_sync:?} after the restart");
    // Steady state again: the last seconds must be all 200s.
    let calm = Instant::now();
    std::thread::sleep(Duration::from_secs(4));
    stop.store(true, Ordering::Relaxed);
    let fired: Vec<Fired> = clients
        .into_iter()
        .flat_map(|c| c.join().unwrap())
        .collect();
    assert_eq!(edge.terminate(), Some(0));

    // 503s before the kill mean the machine could not keep up (the write deadline
    // passed): reported, not the broker's doing. The window is that of the 503s after.
    let (before_kill, refused): (Vec<Answered>, Vec<Answered>) = fired
        .iter()
        .flat_map(|f| &f.answers)
        .filter(|(_, _, s)| *s == 503)
        .map(|(sent, answered, _)| (*sent, *answered))
        .partition(|(_, answered)| *answered < killed_at);
    let after_calm = refused.iter().filter(|(_, a)| *a >= calm).count();
    let calm_200s = fired
        .iter()
        .flat_map(|f| &f.answers)
        .filter(|(sent, _, s)| *s == 200 && *sent >= calm)
        .count();
    assert!(calm_200s > 0, "no 200 once the cluster was whole again");
    let window = match (
        refused.iter().map(|(s, _)| *s).min(),
        refused.iter().map(|(_, a)| *a).max(),
    ) {
        (Some(first), Some(last)) => last - first,
        _ => Duration::ZERO,
    };
    let last_503_after_kill = refused
        .iter()
        .map(|(_, a)| *a - killed_at)
        .max()
        .unwrap_or_default();
    assert!(
        window < Duration::from_secs(30),
        "the edge answered 503 for {window:?}"
    );

    // Read back: every 200 is in the topic; an event is there more than once only as
    // the same record (the same event, the same dedup key).
    let records = cluster::read_topic(&brokers, &topic);
    // Per event, its dedup key and where each of its records is (partition, offset).
    let mut seen: HashMap<String, (rm_schemas::DedupKey, Vec<(i32, i64)>)> = HashMap::new();
    for (partition, offset, r) in &records {
        let e = seen
            .entry(r.event.tracking_id().to_string())
            .or_insert((r.dedup_key, Vec::new()));
        assert_eq!(e.0, r.dedup_key, "one event, one dedup key");
        e.1.push((*partition, *offset));
    }
    let mut duplicates = 0;
    // Events written more often than they were requested (the header's "Copies").
    let mut over: Vec<String> = Vec::new();
    for f in &fired {
        let id = format!("loss-{run}-{}", f.id);
        let tries = f.answers.len();
        let (_, at) = seen
            .get(&id)
            .unwrap_or_else(|| panic!("event {} answered 200 but not in the topic", f.id));
        let copies = at.len();
        if copies > tries {
            over.push(format!(
                "event {} written {copies} times for {tries} requests: at (partition, \
                 offset) {:?}; answers (ms after the first request, status) {:?}",
                f.id,
                at,
                f.answers
                    .iter()
                    .map(|(sent, _, s)| ((*sent - f.answers[0].0).as_millis(), *s))
                    .collect::<Vec<_>>()
            ));
        }
        duplicates += copies - 1;
    }
    for o in &over {
        eprintln!("broker loss: written again by the producer: {o}");
    }
    assert!(
        over.len() * 100 <= fired.len(),
        "{} of {} events written more often than requested: {over:#?}",
        over.len(),
        fired.len()
    );
    assert!(seen.contains_key(&format!("loss-{run}-{}", usize::MAX)));
    assert_eq!(seen.len(), fired.len() + 1, "records of events never fired");
    let answered: usize = fired.iter().map(|f| f.answers.len()).sum();
    eprintln!(
        "broker loss: {} beacons acknowledged ({answered} requests), {} answered 503 \
         within a window of {window:?} (the last {last_503_after_kill:?} after the kill); \
         {} records checked, every acknowledged event present, {duplicates} written again \
         (same dedup key; {} of them more often than requested); {} 503s before the kill \
         and {after_calm} once the cluster was whole again ({calm_200s} 200s then)",
        fired.len(),
        refused.len(),
        records.len(),
        over.len(),
        before_kill.len()
    );
}
