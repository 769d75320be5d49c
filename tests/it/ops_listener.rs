//! Safe defaults against the real binary: the operations listener (`RM_OPS_ADDR`)
//! serves `/healthz`, `/readyz` with the reasons and `/metrics`, and then the public
//! ports serve no `/metrics`; a public `/readyz` says ready or not and never why, with
//! or without the listener; the demo data is loaded by default only in the quick
//! start's `retail-media all`.
//!
//! The not-ready case runs the api on a stand-in ClickHouse (a loopback HTTP server
//! that answers every statement with an empty 200, then drops connections), so the
//! store's readiness really fails, with an error naming the server.
#![allow(clippy::unwrap_used, missing_docs)]

use crate::common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{free_port, get, send, HttpResponse, Service};

fn text(r: &HttpResponse) -> String {
    String::from_utf8_lossy(&r.body).into_owned()
}

/// Polls `check` every 100 ms until it holds; panics with `what` after `within`.
fn eventually(within: Duration, what: &str, mut check: impl FnMut() -> Option<String>) {
    let t = Instant::now();
    loop {
        match check() {
            None => return,
            Some(last) if t.elapsed() > within => panic!("not within {within:?}: {what}: {last}"),
            Some(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

#[test]
fn with_the_ops_listener_metrics_and_reasons_leave_the_public_ports() {
    let dir = tempfile::tempdir().unwrap();
    let ops: SocketAddr = ([127, 0, 0, 1], free_port()).into();
    let svc = Service::start("all", dir.path(), &[("RM_OPS_ADDR", ops.to_string())]);
    eventually(Duration::from_secs(20), "ops /readyz 200", || {
        let r = get(ops, "/readyz").ok()?;
        (r.status != 200 || text(&r) != "ready\n").then(|| format!("{} {}", r.status, text(&r)))
    });
    let h = get(ops, "/healthz").unwrap();
    assert_eq!((h.status, text(&h).as_str()), (200, "ok\n"));
    let m = get(ops, "/metrics").unwrap();
    assert_eq!(m.status, 200);
    let metrics = text(&m);
    for series in [
        "ingest_requests_total",
        "aggregator_batches_total",
        "api_requests_total",
    ] {
        assert!(metrics.contains(series), "ops /metrics lacks {series}");
    }
    // The ops listener serves nothing else.
    assert_eq!(get(ops, "/v1/oauth2/token").unwrap().status, 404);
    assert_eq!(get(ops, "/v1/events/ad/interaction").unwrap().status, 404);

    for (name, addr) in [
        ("edge", svc.ingest),
        ("api", svc.api),
        ("aggregator", svc.aggregator),
    ] {
        let r = get(addr, "/metrics").unwrap();
        assert_eq!(r.status, 404, "{name} /metrics: {}", text(&r));
        assert!(!text(&r).contains("_total"), "{name}");
        let r = get(addr, "/readyz").unwrap();
        assert_eq!((r.status, text(&r).as_str()), (200, "ready\n"), "{name}");
        assert_eq!(get(addr, "/healthz").unwrap().status, 200, "{name}");
    }
    // The quick start's demo client is there (`all` without RM_API_DEMO).
    common::token(svc.api, "demo-client", "demo-secret", None);
}

#[test]
fn without_the_ops_listener_every_port_serves_metrics_and_a_bare_readyz() {
    let dir = tempfile::tempdir().unwrap();
    let svc = Service::start("all", dir.path(), &[]);
    for (name, addr) in [
        ("edge", svc.ingest),
        ("api", svc.api),
        ("aggregator", svc.aggregator),
    ] {
        assert_eq!(get(addr, "/metrics").unwrap().status, 200, "{name}");
        eventually(Duration::from_secs(10), name, || {
            let r = get(addr, "/readyz").ok()?;
            (r.status != 200 || text(&r) != "ready\n").then(|| format!("{} {}", r.status, text(&r)))
        });
    }
}

/// A stand-in ClickHouse on loopback: every request gets an empty 200 (no rows) while
/// `up`, and its connection is dropped unanswered otherwise.
struct FakeClickHouse {
    addr: SocketAddr,
    up: Arc<AtomicBool>,
}

impl FakeClickHouse {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let up = Arc::new(AtomicBool::new(true));
        let serving = Arc::clone(&up);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let up = Arc::clone(&serving);
                std::thread::spawn(move || answer(stream, &up));
            }
        });
        Self { addr, up }
    }
}

/// Reads one request (head, then a sized or chunked body) and answers it.
fn answer(stream: TcpStream, up: &AtomicBool) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let mut r = BufReader::new(stream);
    let (mut length, mut chunked) = (0usize, false);
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let l = line.trim_end().to_ascii_lowercase();
        if l.is_empty() {
            break;
        }
        if let Some(v) = l.strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
        if l.starts_with("transfer-encoding:") && l.contains("chunked") {
            chunked = true;
        }
    }
    if chunked {
        loop {
            let mut size = String::new();
            if r.read_line(&mut size).unwrap_or(0) == 0 {
                return;
            }
            let n = usize::from_str_radix(size.trim().split(';').next().unwrap(), 16).unwrap_or(0);
            let mut skip = vec![0; n + 2];
            if r.read_exact(&mut skip).is_err() || n == 0 {
                break;
            }
        }
    } else {
        let mut skip = vec![0; length];
        let _ = r.read_exact(&mut skip);
    }
    if up.load(Ordering::SeqCst) {
        let _ = r
            .get_mut()
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    }
}

#[test]
fn not_ready_reasons_only_on_the_ops_listener() {
    let ch = FakeClickHouse::start();
    let dir = tempfile::tempdir().unwrap();
    let ops: SocketAddr = ([127, 0, 0, 1], free_port()).into();
    let svc = Service::start(
        "api",
        dir.path(),
        &[
            ("RM_OPS_ADDR", ops.to_string()),
            ("RM_CLICKHOUSE_URL", format!("http://{}", ch.addr)),
        ],
    );
    assert_eq!(text(&get(ops, "/readyz").unwrap()), "ready\n");
    ch.up.store(false, Ordering::SeqCst);
    // The store pings an idle server every 5 s.
    eventually(
        Duration::from_secs(20),
        "ops /readyz 503 with the reason",
        || {
            let r = get(ops, "/readyz").ok()?;
            let body = text(&r);
            (r.status != 503 || !body.starts_with("not ready\n- ") || !body.contains("ClickHouse"))
                .then(|| format!("{} {body}", r.status))
        },
    );
    let public = get(svc.api, "/readyz").unwrap();
    assert_eq!(
        (public.status, text(&public).as_str()),
        (503, "not ready\n"),
        "the public port says why"
    );
    ch.up.store(true, Ordering::SeqCst);
    eventually(Duration::from_secs(20), "both ready again", || {
        let (o, p) = (get(ops, "/readyz").ok()?, get(svc.api, "/readyz").ok()?);
        (o.status != 200 || p.status != 200).then(|| format!("{} {}", text(&o), text(&p)))
    });
}

/// `retail-media <sub>` on free ports with nothing but the data dir and the listen
/// addresses set (no RM_API_DEMO), ready; the api's address.
fn start_bare(sub: &str, dir: &Path) -> (KillOnDrop, SocketAddr) {
    let api: SocketAddr = ([127, 0, 0, 1], free_port()).into();
    let log = std::fs::File::create(dir.join("service.log")).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_retail-media"))
        .arg(sub)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("RM_DATA_DIR", dir)
        .env("RM_INGEST_ADDR", format!("127.0.0.1:{}", free_port()))
        .env("RM_AGGREGATOR_ADDR", format!("127.0.0.1:{}", free_port()))
        .env("RM_API_ADDR", api.to_string())
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    let guard = KillOnDrop(child);
    eventually(Duration::from_secs(60), "api ready", || {
        let r = get(api, "/readyz").ok();
        (r.map(|r| r.status) != Some(200))
            .then(|| std::fs::read_to_string(dir.join("service.log")).unwrap_or_default())
    });
    (guard, api)
}

struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn demo_token_status(api: SocketAddr) -> u16 {
    use base64::Engine as _;
    let basic = base64::engine::general_purpose::STANDARD.encode("demo-client:demo-secret");
    send(
        api,
        "POST",
        "/v1/oauth2/token",
        &[
            ("Authorization", &format!("Basic {basic}")),
            ("Content-Type", "application/x-www-form-urlencoded"),
        ],
        b"grant_type=client_credentials",
    )
    .unwrap()
    .status
}

#[test]
fn demo_data_by_default_only_in_the_quick_start() {
    let dir = tempfile::tempdir().unwrap();
    let (api_alone, api) = start_bare("api", dir.path());
    assert_eq!(
        demo_token_status(api),
        401,
        "retail-media api has the demo client"
    );
    drop(api_alone);
    // The same data dir, now as the quick start: the demo data is loaded.
    let (_all, api) = start_bare("all", dir.path());
    assert_eq!(
        demo_token_status(api),
        200,
        "retail-media all lacks the demo client"
    );
}
