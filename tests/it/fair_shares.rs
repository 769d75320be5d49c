//! No tenant starves another (README, "What one tenant can take from the others"),
//! attacked from outside against the real binary, one namespace (`demo`, the quick
//! start's) flooding while another (`rival`) goes about its business:
//!
//! | flood by `demo` | what `rival` must see |
//! |---|---|
//! | 60 clients posting orders with the valid orders key | its first token requests (each an Argon2 check) answered 200, none 503 |
//! | wrong secrets for demo's client from 60 addresses | the same |
//! | 16 report requests at once, again and again | its reports answered 200, never 429; demo gets 429 beyond its share |
//!
//! On the code before fair shares the first two gave `rival` 503s (one global queue,
//! valid checks never remembered) and the third let `demo` hold every report place.

#![allow(clippy::unwrap_used, missing_docs)]

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::auth_limits::{percentile, post_from, runtime, token_from, Answer};
use crate::common::{self, Service};

const RIVAL: &str = "rival";
const RIVAL_CLIENTS: usize = 8;

/// Creates `RIVAL_CLIENTS` clients of namespace `rival` (scope `reports`); their
/// secrets.
fn rival_clients(api: SocketAddr) -> Vec<(String, String)> {
    (0..RIVAL_CLIENTS)
        .map(|i| {
            let id = format!("rival-{i}");
            let secret = common::namespace_client(api, &id, RIVAL);
            (id, secret)
        })
        .collect()
}

/// Each rival client's first token (an Argon2 check each), while `flood` runs: the
/// answers.
async fn rival_tokens(api: SocketAddr, clients: &[(String, String)]) -> Vec<Answer> {
    let mut out = Vec::new();
    for (i, (id, secret)) in clients.iter().enumerate() {
        let from = Ipv4Addr::new(127, 0, 9, i as u8 + 1);
        out.push(token_from(from, api, id, secret).await);
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    out
}

/// Runs `n` copies of `one` (given its index) until stopped; the statuses they got.
fn flood<F, Fut>(n: usize, stop: &Arc<AtomicBool>, one: F) -> Vec<tokio::task::JoinHandle<Vec<u16>>>
where
    F: Fn(usize) -> Fut + Send + Sync + Clone + 'static,
    Fut: std::future::Future<Output = u16> + Send,
{
    (0..n)
        .map(|i| {
            let (stop, one) = (Arc::clone(stop), one.clone());
            tokio::spawn(async move {
                let mut statuses = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    statuses.push(one(i).await);
                }
                statuses
            })
        })
        .collect()
}

async fn statuses(flood: Vec<tokio::task::JoinHandle<Vec<u16>>>) -> Vec<u16> {
    let mut all = Vec::new();
    for f in flood {
        all.extend(f.await.unwrap());
    }
    all
}

fn count(statuses: &[u16], status: u16) -> usize {
    statuses.iter().filter(|s| **s == status).count()
}

#[test]
fn one_namespaces_credentials_valid_or_wrong_never_starve_anothers_token_requests() {
    let dir = tempfile::tempdir().unwrap();
    let svc = Service::start("api", dir.path(), &[]);
    let api = svc.api;
    let clients = rival_clients(api);
    runtime().block_on(async {
        // 1. Valid credentials: 60 clients posting orders with demo's key (each a
        // different address, so no per-address limit is what protects rival).
        let stop = Arc::new(AtomicBool::new(false));
        let orders = flood(60, &stop, move |i| async move {
            let from = Ipv4Addr::new(127, 0, 3, i as u8 + 1);
            let body = r#"{"orders": []}"#;
            post_from(from, api, "/v1/orders", "demo-orders-key:", "application/json", body)
                .await
                .status
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        let t = Instant::now();
        let answers = rival_tokens(api, &clients[..RIVAL_CLIENTS / 2]).await;
        stop.store(true, Ordering::Relaxed);
        let flood_statuses = statuses(orders).await;
        let valid_flood = t.elapsed();
        for a in &answers {
            assert_eq!(a.status, 200, "rival refused during demo's valid flood: {a:?}");
        }
        let authenticated = flood_statuses.iter().filter(|s| **s != 503 && **s != 401).count();
        assert!(
            count(&flood_statuses, 503) * 10 <= flood_statuses.len(),
            "demo's valid key was refused for lack of hashing places: {} of {}",
            count(&flood_statuses, 503),
            flood_statuses.len()
        );
        let took: Vec<Duration> = answers.iter().map(|a| a.took).collect();
        eprintln!(
            "valid flood: {} orders requests in {valid_flood:?} ({authenticated} authenticated, {} x 503); rival's first tokens p50 {:?}, max {:?}",
            flood_statuses.len(),
            count(&flood_statuses, 503),
            percentile(took.clone(), 0.5),
            percentile(took, 1.0)
        );

        // 2. Wrong secrets for demo's client from 60 addresses (each may fail 10 times a
        // minute before its pair is locked: up to 600 Argon2 checks).
        let stop = Arc::new(AtomicBool::new(false));
        let guesses = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let wrong = flood(60, &stop, move |i| {
            // Distinct guesses (identical ones in flight share one check).
            let n = guesses.fetch_add(1, Ordering::Relaxed);
            async move {
                let from = Ipv4Addr::new(127, 0, 4, i as u8 + 1);
                token_from(from, api, "demo-client", &format!("wrong-{n}")).await.status
            }
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        let answers = rival_tokens(api, &clients[RIVAL_CLIENTS / 2..]).await;
        stop.store(true, Ordering::Relaxed);
        let wrong_statuses = statuses(wrong).await;
        for a in &answers {
            assert_eq!(a.status, 200, "rival refused during demo's wrong-secret flood: {a:?}");
        }
        assert!(
            count(&wrong_statuses, 503) > 0,
            "demo's flood never met its share: {} x 401, {} x 429",
            count(&wrong_statuses, 401),
            count(&wrong_statuses, 429)
        );
        let took: Vec<Duration> = answers.iter().map(|a| a.took).collect();
        eprintln!(
            "wrong-secret flood: {} x 401, {} x 429, {} x 503 (beyond demo's share); rival's first tokens p50 {:?}, max {:?}",
            count(&wrong_statuses, 401),
            count(&wrong_statuses, 429),
            count(&wrong_statuses, 503),
            percentile(took.clone(), 0.5),
            percentile(took, 1.0)
        );
    });
}

/// `GET path` with a bearer token: the status.
async fn get(api: SocketAddr, token: &str, path: &str) -> u16 {
    let mut s = tokio::net::TcpStream::connect(api).await.unwrap();
    let req = format!(
        "GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\nAuthorization: Bearer {token}\r\n\r\n"
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut data = Vec::new();
    s.read_to_end(&mut data).await.unwrap();
    let text = String::from_utf8_lossy(&data);
    text.split(' ').nth(1).unwrap().parse().unwrap()
}

#[test]
fn one_namespaces_reports_never_take_anothers_report_places() {
    let dir = tempfile::tempdir().unwrap();
    let svc = Service::start("api", dir.path(), &[]);
    let api = svc.api;
    let clients = rival_clients(api);
    let demo = common::token(api, "demo-client", "demo-secret", None);
    let rival = common::token(api, &clients[0].0, &clients[0].1, None);
    runtime().block_on(async {
        let stop = Arc::new(AtomicBool::new(false));
        let demo_flood = flood(16, &stop, move |i| {
            let demo = demo.clone();
            async move {
                let path = match i % 3 {
                    0 => "/v1/reports/campaigns",
                    1 => "/v1/reports/products?format=csv",
                    _ => "/v1/reports/sales",
                };
                get(api, &demo, path).await
            }
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        let mut rival_statuses = Vec::new();
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(3) {
            rival_statuses.push(get(api, &rival, "/v1/reports/campaigns").await);
        }
        stop.store(true, Ordering::Relaxed);
        let demo_statuses = statuses(demo_flood).await;
        assert!(
            rival_statuses.iter().all(|s| *s == 200),
            "rival's reports during demo's flood: {rival_statuses:?}"
        );
        assert!(count(&demo_statuses, 429) > 0, "demo never met its share");
        assert_eq!(
            count(&demo_statuses, 200) + count(&demo_statuses, 429),
            demo_statuses.len(),
            "{demo_statuses:?}"
        );
        eprintln!(
            "report flood: demo {} x 200, {} x 429; rival {} reports, all 200",
            count(&demo_statuses, 200),
            count(&demo_statuses, 429),
            rival_statuses.len()
        );
    });
}
