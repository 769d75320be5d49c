//! A rolling restart of the three Kafka nodes under load: realistic sessions flow
//! through the edge into the local three-node cluster and an aggregator writes them to
//! ClickHouse, while each node in turn is stopped (SIGTERM: a controlled shutdown,
//! leaderships move first), started again, and waited for until every replica is back
//! in sync, as an operator upgrading the cluster would.
//!
//! What it argues: no acknowledged event is lost (the reports the api serves equal
//! the expectation the generator computed independently, and every beacon was
//! eventually answered 200), whatever node leads a partition or coordinates the
//! aggregator's group at any moment. It prints the 503s the edge gave (clients retry
//! them) and how long each node took to come back in sync.
#![allow(clippy::unwrap_used, missing_docs)]

use crate::common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::Service;

use crate::common::sessions;

use crate::common::exact;

use crate::common::cluster;

use exact::{converge, fire_all};

/// Beacons the edge answered 503 so far.
fn beacon_503s(edge: std::net::SocketAddr) -> f64 {
    let body = common::get(edge, "/metrics").unwrap().body;
    String::from_utf8_lossy(&body)
        .lines()
        .filter(|l| {
            l.starts_with("ingest_requests_total{")
                && l.contains("route=\"beacon\"")
                && l.contains("status=\"503\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[test]
fn a_rolling_restart_under_load_loses_nothing() {
    let Some(brokers) = cluster::cluster() else {
        return;
    };
    // It takes brokers down: no other test runs on the cluster meanwhile.
    common::servers::exclusive();
    let Some((mut env, drop_database)) = common::kafka_clickhouse_env("rolling", 6) else {
        return;
    };
    let _drop_database = cluster::DropDatabaseWithin::from(drop_database);
    let _serial = cluster::CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let _back = cluster::AllNodesBack;
    let dir = tempfile::tempdir().unwrap();
    env.extend(sessions::service_env());
    env.extend([
        ("RM_AGGREGATOR_BATCH_MAX_RECORDS", "200".to_string()),
        ("RM_AGGREGATOR_BATCH_MAX_WAIT_MS", "50".to_string()),
    ]);
    let topic = env
        .iter()
        .find(|(k, _)| *k == "RM_INGEST_TOPIC")
        .map(|(_, v)| v.clone())
        .unwrap();
    let sub = |name: &str| {
        let d = dir.path().join(name);
        std::fs::create_dir_all(&d).unwrap();
        d
    };
    let (beacons, exp) = sessions::generate(59, 1000, 700);
    let edge = Service::start("ingest", &sub("edge"), &env);
    let agg = Service::start("aggregate", &sub("agg"), &env);
    let group_topic = "__consumer_offsets";

    // Beacons flow in slices, paced while the nodes restart, then the rest at once.
    let e = edge.ingest;
    let stream_beacons = beacons.clone();
    let restarted = Arc::new(AtomicBool::new(false));
    let done = Arc::clone(&restarted);
    let stream = std::thread::spawn(move || {
        let started = Instant::now();
        let mut during = 0;
        for slice in stream_beacons.chunks(stream_beacons.len() / 120 + 1) {
            fire_all(e, slice);
            if !done.load(Ordering::Relaxed) {
                during += slice.len();
                std::thread::sleep(Duration::from_millis(250));
            }
        }
        (started.elapsed(), during)
    });

    std::thread::sleep(Duration::from_secs(3));
    let mut back_in_sync = Vec::new();
    for node in ["1", "2", "3"] {
        let t = Instant::now();
        cluster::up_sh(&["kafka-restart", node]);
        let restarted = t.elapsed();
        let in_sync =
            cluster::wait_in_sync(&brokers, &[&topic, group_topic], Duration::from_secs(90));
        eprintln!(
            "node {node}: stopped and started in {restarted:?}, replicas in sync {in_sync:?} later"
        );
        back_in_sync.push(restarted + in_sync);
    }
    restarted.store(true, Ordering::Relaxed);
    let (streamed, during) = stream.join().unwrap();
    let refused = beacon_503s(edge.ingest);

    let api = Service::start("api", &sub("api"), &env);
    api.wait_ready(api.api, Duration::from_secs(60));
    converge(api.api, &exp, Duration::from_secs(180));
    eprintln!(
        "rolling restart: {} beacons over {streamed:?} ({during} while the nodes restarted), \
         all answered 200 in the end ({refused} answers were 503 and retried); each node \
         back in sync {back_in_sync:?} after its stop began; reports exact",
        beacons.len()
    );
    for s in [agg, edge, api] {
        assert_eq!(s.terminate(), Some(0));
    }
}
