//! A real Prometheus server (Debian's `prometheus`) scrapes the running services every
//! second; through its HTTP query API (`/api/v1/query`) the key series exist, and they
//! move by exactly what the test sent once beacons flow: requests by status, accepted,
//! rejected and duplicate events at the edge, events and batches at the aggregator.
//!
//! The services run as `retail-media all` on the embedded log and store, on free ports,
//! so the test needs no broker. Prometheus listens on a free loopback port with its
//! TSDB in a temporary directory, and is killed on drop. Without the `prometheus`
//! binary the test prints `SKIPPED`, unless `RM_REQUIRE_SERVICES=1`, where it fails.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

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

    // Every target is up and the key series exist before any traffic.
    prom.wait_for("count(up == 1)", wait, |v| v == 3.0);
    for job in ["edge", "api", "aggregator"] {
        assert_eq!(
            prom.value(&format!(r#"up{{job="{job}"}}"#)),
            Some(1.0),
            "{job} not up"
        );
    }
    let before: Vec<f64> = [
        ACCEPTED, OK_BEACONS, REJECTED, DUPLICATES, AGGREGATED, BATCHES,
    ]
    .iter()
    .map(|q| prom.wait_for(q, wait, |_| true))
    .collect();
    for series in [
        r#"ingest_requests_total{job="edge",route="beacon",status="503"}"#,
        r#"ingest_events_rejected_total{job="edge",reason="unexpanded_macro"}"#,
        r#"ingest_log_write_seconds_bucket{job="edge",le="+Inf"}"#,
        r#"aggregator_freshness_seconds{job="aggregator"}"#,
        r#"aggregator_store_errors_total{job="aggregator",kind="unavailable"}"#,
    ] {
        assert_eq!(prom.query(series).len(), 1, "no series {series}");
    }

    // Traffic: 20 distinct events, one duplicate, three rejections.
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    for i in 0..20 {
        let session = format!("s-prom-{i}");
        let path = beacon(&[
            ("adId", "rm1.camp-prom.ad-1"),
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
        assert_eq!(get(svc.ingest, &path).unwrap().status, 200);
        if i == 0 {
            assert_eq!(get(svc.ingest, &path).unwrap().status, 200, "duplicate");
        }
    }
    for bad in [
        "/v1/events/ad/interaction?adId=a",
        "/v1/events/ad/interaction?adId=a&interactionType=videoJump&timestamp=2026-11-22T10:15:30Z&sessionId=s",
        "/v1/events/ad/interaction?adId=%5BADID%5D&interactionType=videoPlay&timestamp=2026-11-22T10:15:30Z&sessionId=s&videoId=v",
    ] {
        assert_eq!(get(svc.ingest, bad).unwrap().status, 400, "{bad}");
    }

    // Prometheus sees exactly that, at the edge and at the aggregator.
    let after = |q: &str, b: f64, n: f64| prom.wait_for(q, wait, |v| v >= b + n) - b;
    assert_eq!(after(ACCEPTED, before[0], 20.0), 20.0, "accepted");
    assert_eq!(after(OK_BEACONS, before[1], 21.0), 21.0, "200s");
    assert_eq!(after(REJECTED, before[2], 3.0), 3.0, "rejected");
    assert_eq!(after(DUPLICATES, before[3], 1.0), 1.0, "duplicates");
    assert_eq!(after(AGGREGATED, before[4], 20.0), 20.0, "aggregated");
    assert!(after(BATCHES, before[5], 1.0) >= 1.0);
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
    drop(prom);
}
