//! Scale-out: two edges and two aggregators (one consumer group) side by side on the
//! real broker and store. Realistic sessions are fired at both edges at once (the
//! first third through both, so duplicates reach the log past either edge's window);
//! both aggregators consume; the reports the api serves equal the expectation
//! computed independently.
//!
//! Killing one of two group members, and a new one joining, is
//! `tests/it/kafka_group_failover.rs`.
//!
//! Records are keyed by tracking id, so each view, cart line and attribution touch
//! is written by one consumer at a time; the test would show lost or doubled counts
//! otherwise.
#![allow(clippy::unwrap_used, missing_docs)]

use crate::common;

use std::time::{Duration, Instant};

use common::Service;

use crate::common::sessions;

use crate::common::exact;

use exact::{converge, fire_all, metric};

#[test]
fn two_edges_and_two_aggregators_count_exactly() {
    let Some((mut env, _drop)) = common::kafka_clickhouse_env("scale", 4) else {
        return;
    };
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
    let (beacons, exp) = sessions::generate(31, 600, 400);
    let edge1 = Service::start("ingest", &sub("edge1"), &env);
    let edge2 = Service::start("ingest", &sub("edge2"), &env);
    let agg1 = Service::start("aggregate", &sub("agg1"), &env);
    let agg2 = Service::start("aggregate", &sub("agg2"), &env);

    // Both edges at once: alternate halves, and the first third through both.
    let (a, b): (Vec<_>, Vec<_>) = beacons
        .chunks(50)
        .enumerate()
        .partition(|(i, _)| i % 2 == 0);
    let flat = |v: Vec<(usize, &[sessions::Params])>| {
        v.into_iter()
            .flat_map(|(_, c)| c.to_vec())
            .collect::<Vec<_>>()
    };
    let (a, b) = (flat(a), flat(b));
    let third = beacons.len() / 3;
    let (e1, e2) = (edge1.ingest, edge2.ingest);
    let first = {
        let (a, dup) = (a.clone(), beacons[..third].to_vec());
        std::thread::spawn(move || {
            fire_all(e1, &a);
            fire_all(e1, &dup);
        })
    };
    let second = {
        let (b, dup) = (b.clone(), beacons[..third].to_vec());
        std::thread::spawn(move || {
            fire_all(e2, &b);
            fire_all(e2, &dup);
        })
    };

    // Both aggregators must take part: wait until each has consumed something.
    let t = Instant::now();
    for agg in [&agg1, &agg2] {
        while metric(agg.aggregator, "aggregator_events_total").unwrap_or(0.0) <= 0.0 {
            assert!(
                t.elapsed() < Duration::from_secs(90),
                "an aggregator never consumed"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    first.join().unwrap();
    second.join().unwrap();

    let api = Service::start("api", &sub("api"), &env);
    api.wait_ready(api.api, Duration::from_secs(60));
    converge(api.api, &exp, Duration::from_secs(120));
    let consumed = |s: &Service| metric(s.aggregator, "aggregator_events_total").unwrap_or(0.0);
    let (c1, c2) = (consumed(&agg1), consumed(&agg2));
    eprintln!("events aggregated: {c1} by the first aggregator, {c2} by the second");
    assert!(c1 > 0.0 && c2 > 0.0, "both aggregators took part");
    for s in [agg1, agg2, edge1, edge2, api] {
        assert_eq!(s.terminate(), Some(0));
    }
}
