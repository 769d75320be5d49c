//! A real Prometheus server (Debian's `prometheus`) scrapes the running services every
//! second; through its HTTP query API (`/api/v1/query`) the key series exist, and they
//! move by exactly what the test sent once beacons flow: requests by status, accepted,
//! rejected and duplicate events at the edge, events and batches at the aggregator.
//!
//! Two shapes: `retail-media all` on the embedded log and store (no server needed), and
//! the deployed one, three processes (`ingest`, `aggregate`, `api`) on Kafka and
//! ClickHouse (`RM_KAFKA_BROKERS`, `RM_CLICKHOUSE_URL`, a fresh topic and database).
//! Prometheus listens on a free loopback port with its TSDB in a temporary directory,
//! and is killed on drop. Without the `prometheus` binary or a server the test prints
//! `SKIPPED`, unless `RM_REQUIRE_SERVICES=1`, where it fails.
#![allow(clippy::unwrap_used, missing_docs)]

use crate::common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{beacon, enc, free_port, get, Service};

/// A Prometheus server process, killed on drop.
struct Prometheus {
    child: Child,
    addr: SocketAddr,
    log: PathBuf,
}

impl Prometheus {
    /// Starts `prometheus` scraping `targets` (job, address) every second, and waits
    /// until it is ready.
    fn start(binary: &Path, dir: &Path, targets: &[(&str, SocketAddr)]) -> Prometheus {
        let mut config = String::from(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\nscrape_configs:\n",
        );
        for (job, addr) in targets {
            config.push_str(&format!(
                "  - job_name: {job}\n    static_configs:\n      - targets: [\"{addr}\"]\n"
            ));
        }
        let config_path = dir.join("prometheus.yml");
        std::fs::write(&config_path, config).unwrap();
        let addr: SocketAddr = ([127, 0, 0, 1], free_port()).into();
        let log = dir.join("prometheus.log");
        let out = std::fs::File::create(&log).unwrap();
        let child = Command::new(binary)
            .arg(format!("--config.file={}", config_path.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("tsdb").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .arg("--log.level=warn")
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", binary.display()));
        let mut p = Prometheus { child, addr, log };
        let t = Instant::now();
        loop {
            if get(addr, "/-/ready").is_ok_and(|r| r.status == 200) {
                return p;
            }
            if let Ok(Some(status)) = p.child.try_wait() {
                panic!("prometheus exited ({status}):\n{}", p.log());
            }
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "prometheus not ready in 30 s:\n{}",
                p.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The result vector of an instant query: (labels, value) per series.
    fn query(&self, expr: &str) -> Vec<(serde_json::Value, f64)> {
        let r = get(self.addr, &format!("/api/v1/query?query={}", enc(expr))).unwrap();
        let body = r.json();
        assert_eq!(body["status"], "success", "query {expr}: {body}");
        body["data"]["result"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                let v = s["value"][1].as_str().unwrap().parse().unwrap();
                (s["metric"].clone(), v)
            })
            .collect()
    }

    /// The single value of a query that yields one series (`sum(...)`), if any.
    fn value(&self, expr: &str) -> Option<f64> {
        let r = self.query(expr);
        assert!(r.len() <= 1, "{expr} returned {} series", r.len());
        r.first().map(|(_, v)| *v)
    }

    /// Polls `expr` until `ok` holds for its value, within `within`.
    fn wait_for(&self, expr: &str, within: Duration, ok: impl Fn(f64) -> bool) -> f64 {
        let t = Instant::now();
        loop {
            let v = self.value(expr);
            if let Some(v) = v.filter(|v| ok(*v)) {
                return v;
            }
            assert!(t.elapsed() < within, "{expr} = {v:?} after {within:?}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Debian's `prometheus` binary, or a skip (a failure under `RM_REQUIRE_SERVICES=1`).
fn prometheus_binary() -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .chain([PathBuf::from("/usr/bin")])
            .map(|d| d.join("prometheus"))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        if std::env::var("RM_REQUIRE_SERVICES").as_deref() == Ok("1") {
            panic!("prometheus not found but RM_REQUIRE_SERVICES=1: install Debian's prometheus package (deploy/local/up.sh install)");
        }
        eprintln!("SKIPPED: prometheus not found; install Debian's prometheus package (deploy/local/up.sh install)");
    }
    found
}

const ACCEPTED: &str = r#"sum(ingest_events_accepted_total{job="edge"})"#;
const OK_BEACONS: &str = r#"sum(ingest_requests_total{job="edge",route="beacon",status="200"})"#;
const REJECTED: &str = r#"sum(ingest_events_rejected_total{job="edge"})"#;
const DUPLICATES: &str = r#"sum(ingest_events_duplicate_total{job="edge"})"#;
const AGGREGATED: &str = r#"sum(aggregator_events_total{job="aggregator"})"#;
const BATCHES: &str = r#"sum(aggregator_batches_total{job="aggregator"})"#;

/// The counters a flow of beacons moves, before it.
struct Before(Vec<f64>);

/// Waits until every target is up and the edge's series exist; returns the counters'
/// values (a series not there yet counts as 0: the aggregator's may appear only once
/// it counted something, which tests/it/deploy_artifacts.rs checks separately).
fn key_series_exist(prom: &Prometheus, wait: Duration) -> Before {
    prom.wait_for("count(up == 1)", wait, |v| v == 3.0);
    for job in ["edge", "api", "aggregator"] {
        assert_eq!(
            prom.value(&format!(r#"up{{job="{job}"}}"#)),
            Some(1.0),
            "{job} not up"
        );
    }
    for series in [
        r#"ingest_requests_total{job="edge",route="beacon",status="503"}"#,
        r#"ingest_events_rejected_total{job="edge",reason="unexpanded_macro"}"#,
        r#"ingest_log_write_seconds_bucket{job="edge",le="+Inf"}"#,
        r#"aggregator_consumer_lag_records{job="aggregator"}"#,
    ] {
        prom.wait_for(&format!("count({series})"), wait, |v| v >= 1.0);
    }
    Before(
        [
            ACCEPTED, OK_BEACONS, REJECTED, DUPLICATES, AGGREGATED, BATCHES,
        ]
        .iter()
        .map(|q| prom.value(q).unwrap_or(0.0))
        .collect(),
    )
}

/// Sends 20 distinct events (10 plays, 10 creative views of `campaign`), one
/// duplicate and three rejected beacons.
fn fire_beacons(edge: SocketAddr, campaign: &str) {
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let ad = format!("rm1.{campaign}.ad-1");
    for i in 0..20 {
        let session = format!("s-prom-{i}");
        let path = beacon(&[
            ("adId", &ad),
            (
                "interactionType",
                if i % 2 == 0 {
                    "videoPlay"
                } else {
                    "videoCreativeView"
                },
            ),
            ("timestamp", &now),
            ("sessionId", &session),
            ("videoId", "v-prom"),
        ]);
        assert_eq!(get(edge, &path).unwrap().status, 200);
        if i == 0 {
            assert_eq!(get(edge, &path).unwrap().status, 200, "duplicate");
        }
    }
    for bad in [
        "/v1/events/ad/interaction?adId=a",
        "/v1/events/ad/interaction?adId=a&interactionType=videoJump&timestamp=2026-11-22T10:15:30Z&sessionId=s",
        "/v1/events/ad/interaction?adId=%5BADID%5D&interactionType=videoPlay&timestamp=2026-11-22T10:15:30Z&sessionId=s&videoId=v",
    ] {
        assert_eq!(get(edge, bad).unwrap().status, 400, "{bad}");
    }
}

/// Prometheus sees exactly what [`fire_beacons`] sent, at the edge and the aggregator.
fn series_moved(prom: &Prometheus, before: &Before, wait: Duration) {
    let b = &before.0;
    let after = |q: &str, b: f64, n: f64| prom.wait_for(q, wait, |v| v >= b + n) - b;
    assert_eq!(after(ACCEPTED, b[0], 20.0), 20.0, "accepted");
    assert_eq!(after(OK_BEACONS, b[1], 21.0), 21.0, "200s");
    assert_eq!(after(REJECTED, b[2], 3.0), 3.0, "rejected");
    assert_eq!(after(DUPLICATES, b[3], 1.0), 1.0, "duplicates");
    assert_eq!(after(AGGREGATED, b[4], 20.0), 20.0, "aggregated");
    assert!(after(BATCHES, b[5], 1.0) >= 1.0);
    let freshness = prom.wait_for(
        r#"aggregator_freshness_seconds{job="aggregator"}"#,
        wait,
        |v| v >= 0.0,
    );
    assert!(
        freshness < 600.0,
        "freshness {freshness} s for events sent just now"
    );
    let by_type =
        prom.query(r#"sum by (interaction_type) (ingest_events_accepted_total{job="edge"}) > 0"#);
    let mut types: Vec<(String, f64)> = by_type
        .iter()
        .map(|(m, v)| (m["interaction_type"].as_str().unwrap().to_string(), *v))
        .collect();
    types.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        types,
        [
            ("videoCreativeView".to_string(), 10.0),
            ("videoPlay".to_string(), 10.0)
        ]
    );
    // Rates move too, as alerts and dashboards read them.
    let rate = prom.wait_for(
        r#"sum(increase(ingest_events_accepted_total{job="edge"}[1m]))"#,
        wait,
        |v| v > 0.0,
    );
    eprintln!(
        "prometheus at {}: accepted increase over 1m = {rate:.1}",
        prom.addr
    );
}

#[test]
fn prometheus_scrapes_the_services_and_sees_beacons_flow() {
    let Some(binary) = prometheus_binary() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let svc = Service::start("all", &dir.path().join("service"), &[]);
    let prom = Prometheus::start(
        &binary,
        dir.path(),
        &[
            ("edge", svc.ingest),
            ("api", svc.api),
            ("aggregator", svc.aggregator),
        ],
    );
    let wait = Duration::from_secs(30);
    let before = key_series_exist(&prom, wait);
    fire_beacons(svc.ingest, "camp-prom");
    series_moved(&prom, &before, wait);
}

/// The deployed shape: three processes (`ingest`, `aggregate`, `api`) on Kafka and
/// ClickHouse, each scraped as its own job. Each exports its own series: the lag
/// per Kafka partition comes from the aggregator, the beacon counters from the edge.
#[test]
fn prometheus_scrapes_three_processes_on_kafka_and_clickhouse() {
    let Some(binary) = prometheus_binary() else {
        return;
    };
    let Some((mut env, _drop_database)) = common::kafka_clickhouse_env("prom", 2) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    env.push(("RM_AGGREGATOR_BATCH_MAX_WAIT_MS", "20".to_string()));
    let edge = Service::start("ingest", &dir.path().join("edge"), &env);
    let agg = Service::start("aggregate", &dir.path().join("aggregator"), &env);
    let api = Service::start("api", &dir.path().join("api"), &env);
    let prom = Prometheus::start(
        &binary,
        dir.path(),
        &[
            ("edge", edge.ingest),
            ("api", api.api),
            ("aggregator", agg.aggregator),
        ],
    );
    let wait = Duration::from_secs(60);
    let before = key_series_exist(&prom, wait);
    // Each process exports its own series only.
    assert!(prom
        .query(r#"ingest_requests_total{job="aggregator"}"#)
        .is_empty());
    assert!(prom
        .query(r#"aggregator_batches_total{job="edge"}"#)
        .is_empty());
    fire_beacons(edge.ingest, "camp-prom-kafka");
    series_moved(&prom, &before, wait);
    // The lag is reported per Kafka partition, and drains to zero.
    let lag = prom.query(r#"aggregator_consumer_lag_records{job="aggregator"}"#);
    let mut partitions: Vec<&str> = lag
        .iter()
        .filter_map(|(m, _)| m["partition"].as_str())
        .collect();
    partitions.sort_unstable();
    partitions.dedup();
    assert!(
        partitions.starts_with(&["0", "1"]) && partitions.iter().all(|p| p.parse::<u32>().is_ok()),
        "lag by partition: {lag:?}"
    );
    prom.wait_for(
        r#"sum(aggregator_consumer_lag_records{job="aggregator"})"#,
        wait,
        |v| v == 0.0,
    );
    // The api counts its requests (once its instrumentation has landed).
    let r = get(
        api.api,
        "/v1/reports/video-funnel?campaignId=camp-prom-kafka",
    )
    .unwrap();
    assert!(r.status < 500, "api: {}", r.status);
    let t = Instant::now();
    let api_requests = loop {
        let v = prom.value(r#"sum(api_requests_total{job="api"})"#);
        if v.is_some_and(|v| v >= 1.0) || t.elapsed() > Duration::from_secs(10) {
            break v;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    match api_requests {
        Some(v) if v >= 1.0 => eprintln!("api_requests_total{{job=\"api\"}} = {v}"),
        _ => eprintln!("PENDING: the api does not export api_requests_total yet"),
    }
}
