//! Helpers of the exactness tests (`tests/it/aggregate_exact.rs`, `tests/it/scale_out.rs`):
//! fire beacons concurrently, read metrics, read the three reports with a token, wait
//! until they equal the generator's expectation, and drive the local servers.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::sessions::{self, Params};
use crate::common::{beacon, get};

pub fn fire_all(addr: SocketAddr, beacons: &[Params]) {
    let chunks: Vec<Vec<Params>> = beacons
        .chunks(beacons.len().div_ceil(4).max(1))
        .map(<[Params]>::to_vec)
        .collect();
    let threads: Vec<_> = chunks
        .into_iter()
        .map(|chunk| {
            std::thread::spawn(move || {
                for p in chunk {
                    let q: Vec<(&str, &str)> = p.iter().map(|(k, v)| (*k, v.as_str())).collect();
                    let path = beacon(&q);
                    let mut tries = 0;
                    loop {
                        match get(addr, &path) {
                            Ok(r) if r.status == 200 => break,
                            Ok(r) if r.status == 503 && tries < 50 => {}
                            other => {
                                panic!("beacon refused: {:?} {:?}", other.map(|r| r.status), p)
                            }
                        }
                        tries += 1;
                        std::thread::sleep(Duration::from_millis(100));
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

pub fn metric(addr: SocketAddr, prefix: &str) -> Option<f64> {
    let body = String::from_utf8(get(addr, "/metrics").ok()?.body).ok()?;
    let mut sum = None;
    for line in body.lines().filter(|l| l.starts_with(prefix)) {
        let v: f64 = line.rsplit(' ').next()?.parse().ok()?;
        sum = Some(sum.unwrap_or(0.0) + v);
    }
    sum
}

pub fn reports(
    api: SocketAddr,
) -> Option<(serde_json::Value, serde_json::Value, serde_json::Value)> {
    let auth = format!("Bearer {}", crate::common::demo_token(api));
    let one = |p: &str| {
        let r = crate::common::send(api, "GET", p, &[("Authorization", &auth)], b"").ok()?;
        (r.status == 200).then(|| r.json())
    };
    // One page holds every row: each session was served its own ad.
    Some((
        one("/v1/reports/video-funnel?pageSize=10000")?,
        one("/v1/reports/products?pageSize=10000")?,
        one("/v1/reports/carts?pageSize=10000")?,
    ))
}

/// Waits until the aggregator's lag is 0 and the reports equal the expectation.
pub fn converge(api: SocketAddr, exp: &sessions::Expected, within: Duration) {
    let t = Instant::now();
    let mut last = Vec::new();
    while t.elapsed() < within {
        if let Some((f, p, c)) = reports(api) {
            last = sessions::diff(exp, &f, &p, &c);
            if last.is_empty() {
                return;
            }
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    panic!(
        "reports never matched the expectation:\n{}",
        last.join("\n")
    );
}

/// Runs `deploy/local/up.sh cmd`; a command that stops a server holds the servers
/// exclusively until the test ends ([`super::servers::exclusive`]).
pub fn local(cmd: &str) {
    if cmd.ends_with("-stop") || cmd.ends_with("-restart") {
        super::servers::exclusive();
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/local/up.sh");
    let st = Command::new("bash").args([script, cmd]).status().unwrap();
    assert!(st.success(), "deploy/local/up.sh {cmd} failed");
}

pub struct ClickHouseBack;

impl Drop for ClickHouseBack {
    fn drop(&mut self) {
        local("clickhouse-start");
    }
}
