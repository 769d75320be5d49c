//! Authentication limits against the real binary on loopback, with requests from
//! several source addresses (all of 127.0.0.0/8 is loopback on Linux, so client
//! sockets bound to 127.0.0.2, 127.0.0.3, ... are different peers to the api):
//! a flood of wrong secrets for the partner's client id from another address never
//! locks the partner's own address out; random client ids get 429 once the global
//! budget is spent; orders API key guesses are limited per address; a burst beyond
//! the hashing queue is answered 503 at once instead of waiting.

#![allow(clippy::unwrap_used, missing_docs)]

use crate::common;

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use common::Service;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpSocket;

/// Status, `Retry-After`, JSON body and latency of one answer.
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) retry_after: Option<u64>,
    pub(crate) body: serde_json::Value,
    pub(crate) took: Duration,
}

/// `POST path` with Basic `user:password`, sent from a socket bound to `from`.
pub(crate) async fn post_from(
    from: Ipv4Addr,
    api: SocketAddr,
    path: &str,
    basic: &str,
    content_type: &str,
    body: &str,
) -> Answer {
    let started = Instant::now();
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind((from, 0).into()).unwrap();
    let mut s = socket.connect(api).await.unwrap();
    let req = format!(
        "POST {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\nAuthorization: Basic {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n{body}",
        STANDARD.encode(basic),
        body.len()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut data = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), s.read_to_end(&mut data))
        .await
        .expect("an answer within 30 s")
        .unwrap();
    let text = String::from_utf8_lossy(&data);
    let (head, body) = text.split_once("\r\n\r\n").expect("a response head");
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    let retry_after = head
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.eq_ignore_ascii_case("retry-after"))
        .map(|(_, v)| v.trim().parse().unwrap());
    Answer {
        status,
        retry_after,
        body: serde_json::from_str(body).unwrap_or(serde_json::Value::Null),
        took: started.elapsed(),
    }
}

pub(crate) async fn token_from(from: Ipv4Addr, api: SocketAddr, id: &str, secret: &str) -> Answer {
    post_from(
        from,
        api,
        "/v1/oauth2/token",
        &format!("{id}:{secret}"),
        "application/x-www-form-urlencoded",
        "grant_type=client_credentials",
    )
    .await
}

const PARTNER: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);
const ATTACKER: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 3);

pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap()
}

pub(crate) fn percentile(mut v: Vec<Duration>, p: f64) -> Duration {
    v.sort();
    v[((v.len() - 1) as f64 * p).round() as usize]
}

#[test]
fn a_flood_of_wrong_secrets_from_another_address_never_locks_the_partner_out() {
    let dir = tempfile::tempdir().unwrap();
    let svc = Service::start("api", dir.path(), &[]);
    let api = svc.api;
    runtime().block_on(async {
        let mut quiet = Vec::new();
        for _ in 0..10 {
            let a = token_from(PARTNER, api, "demo-client", "demo-secret").await;
            assert_eq!(a.status, 200, "{}", a.body);
            quiet.push(a.took);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let mut flooders = Vec::new();
        for _ in 0..8 {
            let stop = Arc::clone(&stop);
            flooders.push(tokio::spawn(async move {
                let (mut unauthorized, mut limited) = (0u32, 0u32);
                while !stop.load(Ordering::Relaxed) {
                    let a = token_from(ATTACKER, api, "demo-client", "wrong").await;
                    match a.status {
                        401 => unauthorized += 1,
                        429 => {
                            assert_eq!(a.body["error"], "slow_down");
                            assert!(a.retry_after.is_some_and(|s| (1..=60).contains(&s)));
                            limited += 1;
                        }
                        other => panic!("flood answered {other}: {}", a.body),
                    }
                }
                (unauthorized, limited)
            }));
        }
        let mut latencies = Vec::new();
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(4) {
            let a = token_from(PARTNER, api, "demo-client", "demo-secret").await;
            assert_eq!(a.status, 200, "partner refused during the flood: {}", a.body);
            latencies.push(a.took);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        stop.store(true, Ordering::Relaxed);
        let (mut unauthorized, mut limited) = (0, 0);
        for f in flooders {
            let (u, l) = f.await.unwrap();
            unauthorized += u;
            limited += l;
        }
        // The attacker's pair is locked after 10 failures; its later guesses cost no hash.
        assert!(unauthorized <= 10 + 8, "{unauthorized} wrong secrets were checked");
        assert!(limited > 100, "only {limited} flood requests were refused");
        // The lockout is the attacker's address's: even the right secret is refused there.
        let there = token_from(ATTACKER, api, "demo-client", "demo-secret").await;
        assert_eq!(there.status, 429);
        eprintln!(
            "partner tokens without a flood: p50 {:?}; during the flood: {} issued, p50 {:?}, p99 {:?}, max {:?}; flood: {unauthorized} x 401, {limited} x 429",
            percentile(quiet, 0.5),
            latencies.len(),
            percentile(latencies.clone(), 0.5),
            percentile(latencies.clone(), 0.99),
            percentile(latencies, 1.0),
        );
    });
}

#[test]
fn random_client_ids_get_429_once_the_global_budget_is_spent() {
    let dir = tempfile::tempdir().unwrap();
    let env = [
        ("RM_API_UNKNOWN_AUTH_BURST", "5".to_owned()),
        ("RM_API_UNKNOWN_AUTH_PER_SEC", "1".to_owned()),
        ("RM_API_MAX_SOURCE_AUTH_FAILURES", "1000".to_owned()),
    ];
    let svc = Service::start("api", dir.path(), &env);
    let api = svc.api;
    runtime().block_on(async {
        let (mut unauthorized, mut limited) = (0, 0);
        let t = Instant::now();
        // From 30 addresses, so no per-address rule is what refuses them.
        for i in 0..30u8 {
            let from = Ipv4Addr::new(127, 0, 1, i + 1);
            let a = token_from(
                from,
                api,
                &format!("random-{i}-{}", t.elapsed().as_nanos()),
                "x",
            )
            .await;
            match a.status {
                401 => unauthorized += 1,
                429 => {
                    assert_eq!(a.body["error"], "slow_down", "{}", a.body);
                    assert!(a.retry_after.is_some_and(|s| s >= 1), "{a:?}");
                    assert!(a.took < Duration::from_millis(500), "{a:?}");
                    limited += 1;
                }
                other => panic!("unknown id answered {other}: {}", a.body),
            }
        }
        let secs = t.elapsed().as_secs() as i32;
        // The burst (5) plus what refilled at 1 a second while the test ran.
        assert!(
            (5..=5 + secs + 1).contains(&unauthorized),
            "{unauthorized} unknown ids were checked in {secs} s"
        );
        assert!(limited >= 30 - (5 + secs + 1), "{limited} refused");
        // The partner's known id does not need the budget.
        let a = token_from(PARTNER, api, "demo-client", "demo-secret").await;
        assert_eq!(a.status, 200, "{}", a.body);
        eprintln!(
            "random ids: {unauthorized} x 401, {limited} x 429 in {:?}",
            t.elapsed()
        );
    });
}

#[test]
fn orders_key_guesses_are_limited_per_address() {
    let dir = tempfile::tempdir().unwrap();
    let env = [
        ("RM_API_MAX_SOURCE_AUTH_FAILURES", "5".to_owned()),
        ("RM_API_UNKNOWN_AUTH_BURST", "1000".to_owned()),
    ];
    let svc = Service::start("api", dir.path(), &env);
    let api = svc.api;
    runtime().block_on(async {
        let order = |from, key: String| async move {
            post_from(
                from,
                api,
                "/v1/orders",
                &format!("{key}:"),
                "application/json",
                "{}",
            )
            .await
        };
        let mut statuses = Vec::new();
        for i in 0..8 {
            statuses.push(order(ATTACKER, format!("guess-{i}")).await.status);
        }
        assert_eq!(statuses, [401, 401, 401, 401, 401, 429, 429, 429]);
        let locked = order(ATTACKER, "demo-orders-key".into()).await;
        assert_eq!(locked.status, 429, "{}", locked.body);
        assert_eq!(locked.body["code"], 8, "{}", locked.body);
        // Another address with the real key gets past authentication (to the body check).
        let partner = order(PARTNER, "demo-orders-key".into()).await;
        assert_eq!(partner.status, 400, "{}", partner.body);
    });
}

#[test]
fn a_burst_beyond_the_hashing_queue_gets_503_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let env = [
        ("RM_API_HASH_CONCURRENCY", "1".to_owned()),
        ("RM_API_HASH_QUEUE", "2".to_owned()),
    ];
    let svc = Service::start("api", dir.path(), &env);
    let api = svc.api;
    runtime().block_on(async {
        let t = Instant::now();
        // 40 concurrent distinct wrong secrets (identical ones in flight would share one
        // check), each from an address of its own (no lockouts).
        let burst: Vec<_> = (0..40u8)
            .map(|i| {
                tokio::spawn(async move {
                    let guess = format!("wrong-{i}");
                    token_from(Ipv4Addr::new(127, 0, 2, i + 1), api, "demo-client", &guess).await
                })
            })
            .collect();
        let mut answers = Vec::new();
        for b in burst {
            answers.push(b.await.unwrap());
        }
        let whole = t.elapsed();
        let busy: Vec<&Answer> = answers.iter().filter(|a| a.status == 503).collect();
        let checked = answers.iter().filter(|a| a.status == 401).count();
        assert_eq!(busy.len() + checked, 40, "{answers:?}");
        // At most one running and two waiting at any time (and one namespace's share of
        // that, a quarter but at least one place); the rest are refused.
        assert!(busy.len() >= 20, "only {} of 40 got 503", busy.len());
        for a in &busy {
            assert_eq!(a.body["error"], "temporarily_unavailable");
            assert_eq!(a.retry_after, Some(1));
        }
        let slowest_busy = busy.iter().map(|a| a.took).max().unwrap();
        assert!(slowest_busy < Duration::from_secs(2), "a 503 took {slowest_busy:?}");
        eprintln!(
            "burst of 40: {} x 503 (slowest {slowest_busy:?}), {checked} x 401; all answered in {whole:?}",
            busy.len()
        );
        // The queue drains: the partner gets its token afterwards.
        let a = token_from(PARTNER, api, "demo-client", "demo-secret").await;
        assert_eq!(a.status, 200, "{}", a.body);
    });
}
