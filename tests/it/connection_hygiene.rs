//! Connection hygiene of every listener, against the real binary on loopback with
//! small settings: a half-sent request head is closed after the header timeout (edge
//! and api), an idle keep-alive connection after the idle timeout, a stalled body ends
//! its request with 408, and with the connection cap at N the next client waits until
//! one of the N closes while those N keep being served.
//!
//! Bounds are generous (the suite runs on a loaded 2-core machine): a close must come
//! no earlier than its timeout minus a little and within a few seconds after it.
#![allow(clippy::unwrap_used, missing_docs)]

use crate::common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use common::Service;

/// Slack after a timeout before a close counts as late.
const MARGIN: Duration = Duration::from_secs(4);

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s
}

/// Reads until the server closes; returns what it sent and when it closed, measured
/// from `since`.
fn until_closed(s: &mut TcpStream, since: Instant) -> (Vec<u8>, Duration) {
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => data.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("no close within the read timeout: {e}"),
        }
    }
    (data, since.elapsed())
}

/// Reads one whole response with a `Content-Length` from a keep-alive connection.
fn read_response(s: &mut TcpStream) -> String {
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&data).to_string();
        if let Some(end) = text.find("\r\n\r\n") {
            let len: usize = text[..end]
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse().ok())?
                })
                .unwrap_or(0);
            if data.len() >= end + 4 + len {
                return text;
            }
        }
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "closed mid-response: {text:?}");
        data.extend_from_slice(&buf[..n]);
    }
}

fn start(dir: &std::path::Path, env: &[(&str, &str)]) -> Service {
    let env: Vec<(&str, String)> = env.iter().map(|(k, v)| (*k, (*v).to_string())).collect();
    Service::start("all", dir, &env)
}

fn assert_closed_between(what: &str, took: Duration, low: Duration, timeout: Duration) {
    eprintln!("{what}: closed after {took:?}");
    assert!(took >= low, "{what}: closed too early, after {took:?}");
    assert!(
        took <= timeout + MARGIN,
        "{what}: closed after {took:?}, timeout {timeout:?}"
    );
}

#[test]
fn slow_heads_idle_connections_and_stalled_bodies_are_closed() {
    let dir = tempfile::tempdir().unwrap();
    let svc = start(
        dir.path(),
        &[
            ("RM_HTTP_HEADER_TIMEOUT_SECS", "1"),
            ("RM_HTTP_IDLE_TIMEOUT_SECS", "3"),
            ("RM_HTTP_BODY_TIMEOUT_SECS", "1"),
        ],
    );
    let header = Duration::from_secs(1);
    let idle = Duration::from_secs(3);
    std::thread::scope(|scope| {
        // Half a request line, on the edge and the api; and a connection that sends
        // nothing at all.
        for (what, addr, bytes) in [
            (
                "edge, half a request line",
                svc.ingest,
                &b"GET /v1/events/ad/inter"[..],
            ),
            (
                "api, half a request line",
                svc.api,
                &b"POST /v1/oauth2/to"[..],
            ),
            ("api, nothing sent", svc.api, &b""[..]),
        ] {
            scope.spawn(move || {
                let mut s = connect(addr);
                let t = Instant::now();
                s.write_all(bytes).unwrap();
                let (_, took) = until_closed(&mut s, t);
                assert_closed_between(what, took, header - Duration::from_millis(100), header);
            });
        }
        // A served keep-alive connection left idle: closed after the idle timeout, not
        // the (shorter) header timeout.
        for (what, addr) in [("edge, idle", svc.ingest), ("api, idle", svc.api)] {
            scope.spawn(move || {
                let mut s = connect(addr);
                s.write_all(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
                    .unwrap();
                let head = read_response(&mut s);
                assert!(head.starts_with("HTTP/1.1 200"), "{head}");
                let t = Instant::now();
                let (rest, took) = until_closed(&mut s, t);
                assert!(rest.is_empty(), "{rest:?}");
                assert_closed_between(what, took, idle - Duration::from_millis(300), idle);
            });
        }
        // A body that stalls: the request ends with 408 and the connection closes.
        scope.spawn(|| {
            let mut s = connect(svc.api);
            s.write_all(
                b"POST /v1/oauth2/token HTTP/1.1\r\nHost: t\r\n\
                  Content-Type: application/x-www-form-urlencoded\r\n\
                  Content-Length: 100\r\n\r\ngrant_type=cl",
            )
            .unwrap();
            let t = Instant::now();
            let (data, took) = until_closed(&mut s, t);
            let text = String::from_utf8_lossy(&data);
            assert!(text.starts_with("HTTP/1.1 408"), "{text}");
            assert_closed_between(
                "api, stalled body",
                took,
                header - Duration::from_millis(100),
                header,
            );
        });
    });
    // Still serving after all that.
    assert_eq!(common::get(svc.api, "/healthz").unwrap().status, 200);
    assert_eq!(common::get(svc.ingest, "/healthz").unwrap().status, 200);
}

#[test]
fn past_the_connection_cap_the_next_client_waits_and_the_open_ones_keep_working() {
    let dir = tempfile::tempdir().unwrap();
    const CAP: usize = 3;
    // Every connection comes from 127.0.0.1 here: no per-source bound (tested below).
    let svc = start(
        dir.path(),
        &[
            ("RM_HTTP_MAX_CONNECTIONS", "3"),
            ("RM_HTTP_MAX_CONNECTIONS_PER_SOURCE", "0"),
        ],
    );
    // wait_ready's own connections may still be closing: let them go.
    std::thread::sleep(Duration::from_millis(300));
    let ask = |s: &mut TcpStream| {
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        read_response(s)
    };
    let mut open: Vec<TcpStream> = (0..CAP).map(|_| connect(svc.ingest)).collect();
    for s in &mut open {
        assert!(ask(s).starts_with("HTTP/1.1 200"));
    }
    // One more: the kernel accepts it into the backlog, nobody answers it.
    let mut extra = connect(svc.ingest);
    extra
        .set_read_timeout(Some(Duration::from_millis(1500)))
        .unwrap();
    extra
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let mut buf = [0u8; 64];
    let waited = extra.read(&mut buf);
    assert!(
        matches!(&waited, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock || e.kind() == std::io::ErrorKind::TimedOut),
        "the connection past the cap was served: {waited:?}"
    );
    // The open ones keep working.
    for s in &mut open {
        assert!(ask(s).starts_with("HTTP/1.1 200"));
    }
    // One closes: the waiting client is served.
    drop(open.pop());
    let t = Instant::now();
    extra
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let answer = read_response(&mut extra);
    eprintln!("served {:?} after a slot freed", t.elapsed());
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    for s in &mut open {
        assert!(ask(s).starts_with("HTTP/1.1 200"));
    }
}

/// A connection to `addr` from the local address `from`.
fn connect_from(from: std::net::Ipv4Addr, addr: SocketAddr) -> TcpStream {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let s = rt.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind((from, 0).into()).unwrap();
        socket.connect(addr).await.unwrap()
    });
    let s = s.into_std().unwrap();
    s.set_nonblocking(false).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

/// One source holding its share of connections cannot take the rest: its next
/// connection is closed at once, while another source is served.
#[test]
fn one_source_holds_at_most_its_share_of_the_connections() {
    let dir = tempfile::tempdir().unwrap();
    let svc = start(
        dir.path(),
        &[
            ("RM_HTTP_MAX_CONNECTIONS", "8"),
            ("RM_HTTP_MAX_CONNECTIONS_PER_SOURCE", "2"),
        ],
    );
    let greedy = std::net::Ipv4Addr::new(127, 0, 5, 1);
    let other = std::net::Ipv4Addr::new(127, 0, 5, 2);
    let ask = |s: &mut TcpStream| {
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        read_response(s)
    };
    let mut held: Vec<TcpStream> = (0..2).map(|_| connect_from(greedy, svc.api)).collect();
    for s in &mut held {
        assert!(ask(s).starts_with("HTTP/1.1 200"));
    }
    let mut third = connect_from(greedy, svc.api);
    let _ = third.write_all(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n");
    let t = Instant::now();
    let (answer, took) = until_closed(&mut third, t);
    assert!(answer.is_empty(), "{}", String::from_utf8_lossy(&answer));
    assert!(took < Duration::from_secs(5), "closed after {took:?}");
    let mut theirs = connect_from(other, svc.api);
    assert!(ask(&mut theirs).starts_with("HTTP/1.1 200"));
    // Its share is given back when one of its connections closes.
    drop(held.pop());
    std::thread::sleep(Duration::from_millis(300));
    let mut again = connect_from(greedy, svc.api);
    assert!(ask(&mut again).starts_with("HTTP/1.1 200"));
}
