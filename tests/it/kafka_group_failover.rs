//! An aggregator dies in a group of two: two aggregator processes share one consumer
//! group over six partitions on the local three-node Kafka cluster, writing to
//! ClickHouse, while realistic sessions (duplicates through a second edge included)
//! keep flowing. Three times, at a random point, the older of the two is `kill -9`ed:
//! the survivor must take over all six partitions (measured from the kill to its lag
//! probe showing them: the group's session timeout, 6 s, plus the rebalance), and a
//! new aggregator then joins and takes partitions back (it consumes). At the end the
//! reports the api serves equal the expectation the generator computed independently.
//!
//! What it argues: a crash of a group member between its store write and its commit
//! replays records on the member that inherits the partition, and the idempotent
//! store absorbs them; nothing is lost or counted twice across takeovers and joins.
#![allow(clippy::unwrap_used, missing_docs)]

use crate::common;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::{get, Service};
use sessions::Rng;

use crate::common::sessions;

use crate::common::exact;

use crate::common::cluster;

use exact::{converge, fire_all, metric};

const PARTITIONS: usize = 6;

/// The events partitions an aggregator's lag probe has shown (it samples its
/// assignment every second; a partition once shown stays in the metrics).
fn partitions_seen(agg: SocketAddr) -> BTreeSet<u32> {
    let Ok(r) = get(agg, "/metrics") else {
        return BTreeSet::new();
    };
    String::from_utf8_lossy(&r.body)
        .lines()
        .filter(|l| {
            l.starts_with("aggregator_consumer_lag_records{") && l.contains("topic=\"events\"")
        })
        .filter_map(|l| {
            let rest = &l[l.find("partition=\"")? + "partition=\"".len()..];
            rest[..rest.find('"')?].parse().ok()
        })
        .collect()
}

fn consumed(agg: SocketAddr) -> f64 {
    metric(agg, "aggregator_events_total").unwrap_or(0.0)
}

fn wait_until(what: &str, within: Duration, mut ok: impl FnMut() -> bool) -> Duration {
    let t = Instant::now();
    while !ok() {
        assert!(t.elapsed() < within, "{what}: not within {within:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    t.elapsed()
}

#[test]
fn a_killed_group_member_is_replaced_and_reports_stay_exact() {
    if cluster::cluster().is_none() {
        return;
    }
    let Some((mut env, drop_database)) =
        common::kafka_clickhouse_env("groupfail", PARTITIONS as u32)
    else {
        return;
    };
    let _drop_database = cluster::DropDatabaseWithin::from(drop_database);
    let _serial = cluster::CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    env.extend(sessions::service_env());
    env.extend([
        ("RM_AGGREGATOR_BATCH_MAX_RECORDS", "20".to_string()),
        ("RM_AGGREGATOR_BATCH_MAX_WAIT_MS", "20".to_string()),
    ]);
    let sub = |name: &str| {
        let d = dir.path().join(name);
        std::fs::create_dir_all(&d).unwrap();
        d
    };
    let (beacons, exp) = sessions::generate(43, 1400, 1000);
    let third = beacons.len() / 3;
    let edge = Service::start("ingest", &sub("edge"), &env);
    let edge2 = Service::start("ingest", &sub("edge2"), &env);
    fire_all(edge.ingest, &beacons[..third]);

    // The rest flows while aggregators die: in slices, with the first third again
    // through the second edge (its empty dedup window lets the copies into the log).
    let (e1, e2) = (edge.ingest, edge2.ingest);
    let rest = beacons[third..].to_vec();
    let again = beacons[..third].to_vec();
    let stream = std::thread::spawn(move || {
        for (slice, dup) in rest
            .chunks(rest.len() / 24 + 1)
            .zip(again.chunks(again.len() / 24 + 1))
        {
            fire_all(e1, slice);
            fire_all(e2, dup);
            std::thread::sleep(Duration::from_millis(400));
        }
    });

    let mut n = 0;
    let start = |n: &mut usize| {
        *n += 1;
        Service::start("aggregate", &sub(&format!("agg{n}")), &env)
    };
    let mut older = start(&mut n);
    wait_until(
        "the first aggregator consumes",
        Duration::from_secs(60),
        || consumed(older.aggregator) > 0.0,
    );
    let mut younger = start(&mut n);
    let joined = wait_until(
        "the second aggregator consumes",
        Duration::from_secs(60),
        || consumed(younger.aggregator) > 0.0,
    );
    eprintln!("aggregator 2 joined and consumed within {joined:?}");

    let mut rng = Rng::new(17);
    let mut takeovers = Vec::new();
    for round in 1..=3 {
        std::thread::sleep(Duration::from_millis(500 + rng.below(2500)));
        let before = partitions_seen(younger.aggregator);
        assert!(
            before.len() < PARTITIONS,
            "round {round}: the survivor already had every partition ({before:?})"
        );
        let behind = metric(older.aggregator, "aggregator_consumer_lag_records").unwrap_or(0.0);
        older.kill9();
        let takeover = wait_until(
            "the survivor takes every partition",
            Duration::from_secs(30),
            || partitions_seen(younger.aggregator).len() == PARTITIONS,
        );
        eprintln!(
            "round {round}: kill -9 of an aggregator ({behind} records behind); the survivor \
             held partitions {before:?} and took all {PARTITIONS} {takeover:?} after the kill"
        );
        assert!(
            takeover < Duration::from_secs(6 + 6),
            "takeover took {takeover:?} (session timeout 6 s)"
        );
        takeovers.push(takeover);
        // A new member joins and takes partitions back.
        let newcomer = start(&mut n);
        let back = wait_until(
            "the new aggregator consumes",
            Duration::from_secs(60),
            || consumed(newcomer.aggregator) > 0.0,
        );
        // Its lag probe samples its assignment every second.
        wait_until(
            "the new aggregator shows partitions",
            Duration::from_secs(10),
            || !partitions_seen(newcomer.aggregator).is_empty(),
        );
        let held = partitions_seen(newcomer.aggregator);
        eprintln!(
            "round {round}: aggregator {n} joined and consumed within {back:?}, holding {held:?}"
        );
        assert!(!held.is_empty() && held.len() < PARTITIONS);
        older = younger;
        younger = newcomer;
    }
    stream.join().unwrap();

    let api = Service::start("api", &sub("api"), &env);
    api.wait_ready(api.api, Duration::from_secs(60));
    let t = Instant::now();
    converge(api.api, &exp, Duration::from_secs(180));
    let (c1, c2) = (consumed(older.aggregator), consumed(younger.aggregator));
    // Batches the last two refolded because a member that lost a partition still wrote
    // it (see `rm_store::model::tallies`).
    let overtaken = [&older, &younger]
        .iter()
        .map(|s| metric(s.aggregator, "aggregator_overtaken_total").unwrap_or(0.0))
        .sum::<f64>();
    eprintln!(
        "group failover: {} beacons ({} distinct views and products in the expectation); \
         takeovers after kill -9: {takeovers:?}; reports exact {:?} after the stream ended; \
         the last two aggregators consumed {c1} and {c2} events and refolded {overtaken} \
         batches another member had overtaken",
        beacons.len() + third,
        exp.funnels.len() + exp.products.len() + exp.carts.len(),
        t.elapsed()
    );
    for s in [older, younger, edge, edge2, api] {
        assert_eq!(s.terminate(), Some(0));
    }
}
