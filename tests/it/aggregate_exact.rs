//! The whole pipeline counts exactly: realistic sessions with duplicates and
//! out-of-order delivery go through the real edge into the log; the aggregator is
//! `kill -9`ed at random points at least ten times and restarted; the reports the api
//! serves must equal the expectation computed independently by the generator.
//! Run on the embedded log and store, and on Kafka + ClickHouse (with ClickHouse
//! stopped for a while: no loss, the lag rises and then recovers).
#![allow(clippy::unwrap_used, missing_docs)]

use crate::common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::Service;
use sessions::Rng;

use crate::common::sessions;

use crate::common::exact;

use exact::{converge, fire_all, local, metric, ClickHouseBack};

/// Starts the aggregator and `kill -9`s it at random points while it works (its lag
/// is above zero), until it was killed `kills` times mid-stream.
fn aggregate_with_kills(dir: &Path, env: &[(&str, String)], kills: usize, rng: &mut Rng) {
    for i in 0..kills {
        let agg = Service::start("aggregate", dir, env);
        // Wait until it consumes (a Kafka consumer first has to join its group).
        let t = Instant::now();
        let mut lag = 0.0;
        while t.elapsed() < Duration::from_secs(60) {
            lag = metric(agg.aggregator, "aggregator_consumer_lag_records").unwrap_or(0.0);
            if lag > 0.0 {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(
            lag > 0.0,
            "kill {}: no lag seen within {:?}; make the stream longer",
            i + 1,
            t.elapsed()
        );
        eprintln!("aggregator consuming after {:?}", t.elapsed());
        // Short enough that ten kills land before the stream drains: at two records a
        // batch the embedded backends store about 2,000 records a second (debug build).
        std::thread::sleep(Duration::from_millis(10 + rng.below(90)));
        agg.kill9();
        eprintln!(
            "kill -9 #{} of the aggregator mid-stream ({lag} records behind)",
            i + 1
        );
    }
}

#[test]
fn embedded_backends_count_exactly_through_ten_kills() {
    let dir = tempfile::tempdir().unwrap();
    let (beacons, exp) = sessions::generate(7, 300, 200);
    let half = beacons.len() / 2;
    // Two edge runs: the restart empties the edge's dedup window, so duplicates of
    // the first half reach the log and only the aggregator can drop them.
    let genuine = sessions::service_env();
    let edge = Service::start("ingest", dir.path(), &genuine);
    fire_all(edge.ingest, &beacons[..half]);
    assert_eq!(edge.terminate(), Some(0));
    let edge = Service::start("ingest", dir.path(), &genuine);
    fire_all(edge.ingest, &beacons[half..]);
    fire_all(edge.ingest, &beacons[..half / 3]);
    assert_eq!(edge.terminate(), Some(0));

    let mut env = vec![
        ("RM_AGGREGATOR_BATCH_MAX_RECORDS", "2".to_string()),
        ("RM_AGGREGATOR_BATCH_MAX_WAIT_MS", "5".to_string()),
    ];
    env.extend(genuine.clone());
    let mut rng = Rng::new(11);
    aggregate_with_kills(dir.path(), &env, 10, &mut rng);
    let agg = Service::start("aggregate", dir.path(), &env);
    let t = Instant::now();
    while metric(agg.aggregator, "aggregator_consumer_lag_records") != Some(0.0) {
        assert!(
            t.elapsed() < Duration::from_secs(120),
            "aggregator never caught up"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(agg.terminate(), Some(0));
    let api = Service::start("api", dir.path(), &[]);
    converge(api.api, &exp, Duration::from_secs(10));
}

#[test]
fn kafka_and_clickhouse_count_exactly_through_kills_and_a_store_outage() {
    let Some((mut env, _drop_database)) = common::kafka_clickhouse_env("exact", 3) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    env.extend([
        ("RM_AGGREGATOR_BATCH_MAX_RECORDS", "50".to_string()),
        ("RM_AGGREGATOR_BATCH_MAX_WAIT_MS", "20".to_string()),
    ]);
    env.extend(sessions::service_env());
    let (beacons, exp) = sessions::generate(23, 1400, 1000);
    let third = beacons.len() / 3;
    let edge = Service::start("ingest", dir.path(), &env);
    fire_all(edge.ingest, &beacons);
    // Kill the aggregator ten times while it works through the backlog.
    let mut rng = Rng::new(5);
    // Two records a batch while killing, so that ten kills land before the end.
    let mut slow = env.clone();
    slow.push(("RM_AGGREGATOR_BATCH_MAX_RECORDS", "2".to_string()));
    aggregate_with_kills(dir.path(), &slow, 10, &mut rng);

    // Store outage: ClickHouse stops, beacons keep flowing, the lag rises. The
    // aggregator is consuming first (past its start's backfill checks, which wait for
    // the store instead): the outage is one mid-stream.
    let agg = Service::start("aggregate", dir.path(), &env);
    let t = Instant::now();
    while metric(agg.aggregator, "aggregator_consumer_lag_records").unwrap_or(0.0) <= 0.0 {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "the aggregator did not consume the backlog"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    local("clickhouse-stop");
    let back = ClickHouseBack;
    // Duplicates (identical re-fires, past the edge's window only when it restarts:
    // these are answered 200 without a write) and the same beacons through a second
    // edge, whose empty window lets them into the log: the aggregator must drop them.
    fire_all(edge.ingest, &beacons[..third]);
    let edge2 = Service::start("ingest", dir.path(), &env);
    fire_all(edge2.ingest, &beacons[..third]);
    let t = Instant::now();
    let mut peak = 0.0;
    while t.elapsed() < Duration::from_secs(6) {
        peak = metric(agg.aggregator, "aggregator_consumer_lag_records")
            .unwrap_or(0.0)
            .max(peak);
        std::thread::sleep(Duration::from_millis(250));
    }
    assert!(peak > 0.0, "the lag did not rise while the store was down");
    let errors = metric(agg.aggregator, "aggregator_store_errors_total").unwrap_or(0.0);
    assert!(errors > 0.0, "no store errors counted during the outage");
    drop(back); // ClickHouse starts again
    let t = Instant::now();
    while metric(agg.aggregator, "aggregator_consumer_lag_records") != Some(0.0) {
        assert!(
            t.elapsed() < Duration::from_secs(120),
            "lag did not recover after the store returned"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    eprintln!("lag peaked at {peak} records during the outage and recovered to 0");
    let api = Service::start("api", dir.path(), &env);
    converge(api.api, &exp, Duration::from_secs(30));
    assert_eq!(agg.terminate(), Some(0));
    assert_eq!(edge.terminate(), Some(0));
    assert_eq!(edge2.terminate(), Some(0));
}
