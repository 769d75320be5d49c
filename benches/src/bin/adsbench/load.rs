//! The load loop of `adsbench run`: keep-alive HTTP/1.1 connections, each one request
//! at a time, either closed loop (`--rate 0`: the next request as soon as the answer
//! is in; max throughput) or open loop (a fixed rate spread over the connections:
//! connection `i` sends its `k`-th request at `(i + k N) / R` s).
//!
//! As in `loadgen`, an open-loop request held back by the previous answer on its
//! connection is timed from its scheduled send (queueing counts: no coordinated
//! omission); one sent late only by this process's timer slack is timed from its
//! actual send. Every answer is checked (`bodies::check_generate` for generate).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rm_benches::hist::Histogram;
use rm_benches::http::parse_response;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::bodies::{self, Counted, Route, Template};

/// When to send.
#[derive(Clone, Copy)]
pub struct Plan {
    /// First send.
    pub start: Instant,
    /// Start of the measured window (after the warm-up).
    pub measure_from: Instant,
    /// End of the measured window; nothing is sent after it.
    pub end: Instant,
    /// Open loop: nanoseconds between two requests of the whole run.
    pub interval_ns: Option<f64>,
    /// Longest wait for an answer before the connection is dropped.
    pub timeout: Duration,
    /// Latency above which a request counts as over the target (ns).
    pub target_ns: u64,
}

/// What every connection sends to.
pub struct Target {
    /// Server address.
    pub addr: SocketAddr,
    /// `Host` header.
    pub host: String,
    /// Bearer token.
    pub token: String,
    /// Route.
    pub route: Route,
    /// Request bodies.
    pub pool: Vec<Template>,
}

/// One second of the measured window.
#[derive(Debug, Default, Clone, Copy, Serialize, Deserialize)]
pub struct Second {
    /// Requests scheduled (or sent) in it.
    pub count: u64,
    /// Of which over the latency target.
    pub over: u64,
    /// Largest latency (ms).
    pub max_ms: f64,
}

/// Counters for the progress line.
#[derive(Default)]
pub struct Live {
    /// Answers so far.
    pub answered: AtomicU64,
    /// Non-200, bad answers and I/O errors so far.
    pub bad: AtomicU64,
}

/// What one connection (or all, merged) measured.
pub struct Stats {
    /// Latency (open loop: from the scheduled send when held back).
    pub latency: Histogram,
    /// Latency from the actual send.
    pub service: Histogram,
    /// Requests in the window.
    pub requests: u64,
    /// Good answers (200, and for generate a JSON `{ads, banners}`).
    pub ok: u64,
    /// Everything else by status (`io`, `connect`, `late` (not sent: a whole timeout
    /// behind schedule), `bad-body` for a 200 that fails the check).
    pub statuses: BTreeMap<String, u64>,
    /// Ads in the good generate answers.
    pub counted: Counted,
    /// Good generate answers with neither ads nor banners.
    pub empty: u64,
    /// Per second of the window.
    pub seconds: Vec<Second>,
    /// The first bad answer's description.
    pub first_error: Option<String>,
}

impl Stats {
    fn new(seconds: usize) -> Stats {
        Stats {
            latency: Histogram::new(),
            service: Histogram::new(),
            requests: 0,
            ok: 0,
            statuses: BTreeMap::new(),
            counted: Counted::default(),
            empty: 0,
            seconds: vec![Second::default(); seconds],
            first_error: None,
        }
    }

    /// Empty stats for a window of `plan`.
    pub fn for_plan(plan: &Plan) -> Stats {
        Stats::new((plan.end - plan.measure_from).as_secs_f64().ceil() as usize)
    }

    /// Adds `o`.
    pub fn merge(&mut self, o: &Stats) {
        self.latency.merge(&o.latency);
        self.service.merge(&o.service);
        self.requests += o.requests;
        self.ok += o.ok;
        for (k, v) in &o.statuses {
            *self.statuses.entry(k.clone()).or_default() += v;
        }
        self.counted.ads += o.counted.ads;
        self.counted.banners += o.counted.banners;
        self.counted.video += o.counted.video;
        self.empty += o.empty;
        for (a, b) in self.seconds.iter_mut().zip(&o.seconds) {
            a.count += b.count;
            a.over += b.over;
            a.max_ms = a.max_ms.max(b.max_ms);
        }
        if self.first_error.is_none() {
            self.first_error.clone_from(&o.first_error);
        }
    }
}

/// Sends `req` and reads one complete response into `buf`; `(status, close, len)`.
async fn exchange(
    stream: &mut TcpStream,
    req: &[u8],
    buf: &mut Vec<u8>,
) -> std::io::Result<(u16, bool, usize)> {
    stream.write_all(req).await?;
    let mut filled = 0;
    loop {
        match parse_response(&buf[..filled]) {
            Ok(Some(p)) => return Ok((p.status, p.close, p.len)),
            Ok(None) => {}
            Err(e) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("{e:?}"),
                ))
            }
        }
        if filled == buf.len() {
            buf.resize(buf.len() * 2, 0);
        }
        let n = stream.read(&mut buf[filled..]).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        filled += n;
    }
}

/// The outcome of one exchange: `Ok(counted)` for a good answer, else a status key.
fn judge(
    route: Route,
    outcome: std::io::Result<(u16, bool, usize)>,
    buf: &[u8],
) -> Result<Counted, (String, String)> {
    let (status, _, len) = outcome.map_err(|e| ("io".to_owned(), e.to_string()))?;
    if status != 200 {
        let text = String::from_utf8_lossy(&buf[..len.min(600)]).into_owned();
        return Err((status.to_string(), text));
    }
    if route != Route::Generate {
        return Ok(Counted::default());
    }
    let (head, body) = bodies::body_of(buf, len)
        .ok_or_else(|| ("bad-body".to_owned(), "malformed head or chunk".to_owned()))?;
    bodies::check_generate(head, &body).map_err(|e| ("bad-body".to_owned(), e))
}

/// Runs connection `index` of `connections` until the plan ends.
pub async fn connection(
    index: usize,
    connections: usize,
    target: Arc<Target>,
    plan: Plan,
    live: Arc<Live>,
) -> Stats {
    let mut stats = Stats::for_plan(&plan);
    let mut stream: Option<TcpStream> = None;
    let (mut req, mut body) = (Vec::with_capacity(2048), Vec::with_capacity(1024));
    let mut buf = vec![0u8; 64 * 1024];
    tokio::time::sleep_until(plan.start).await;
    let mut prev_done = plan.start;
    for k in 0u64.. {
        let seq = k * connections as u64 + index as u64;
        let scheduled = plan
            .interval_ns
            .map(|ns| plan.start + Duration::from_nanos((seq as f64 * ns) as u64));
        match scheduled {
            Some(at) if at >= plan.end => break,
            Some(at) => tokio::time::sleep_until(at).await,
            None if Instant::now() >= plan.end => break,
            None => {}
        }
        // A request already a whole timeout behind its schedule would time out: it
        // counts as one (`late`, with its latency so far) without being sent, so an
        // overloaded server cannot stretch the run without bound.
        if let Some(at) = scheduled.filter(|at| Instant::now() > *at + plan.timeout) {
            live.answered.fetch_add(1, Ordering::Relaxed);
            live.bad.fetch_add(1, Ordering::Relaxed);
            if at >= plan.measure_from {
                let ns = (Instant::now() - at).as_nanos() as u64;
                stats.requests += 1;
                *stats.statuses.entry("late".into()).or_default() += 1;
                stats.latency.record(ns);
                let sec = (at - plan.measure_from).as_secs() as usize;
                if let Some(s) = stats.seconds.get_mut(sec) {
                    s.count += 1;
                    s.over += 1;
                    s.max_ms = s.max_ms.max(ns as f64 / 1e6);
                }
            }
            continue;
        }
        let conn = match stream.as_mut() {
            Some(s) => s,
            None => match TcpStream::connect(target.addr).await {
                Ok(s) => {
                    let _ = s.set_nodelay(true);
                    stream.insert(s)
                }
                Err(_) => {
                    if scheduled.unwrap_or_else(Instant::now) >= plan.measure_from {
                        stats.requests += 1;
                        *stats.statuses.entry("connect".into()).or_default() += 1;
                    }
                    live.bad.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
        };
        let t = &target.pool[(seq % target.pool.len() as u64) as usize];
        bodies::request(
            target.route,
            &target.host,
            &target.token,
            t,
            seq,
            &mut body,
            &mut req,
        );
        let sent = Instant::now();
        let outcome = match tokio::time::timeout(plan.timeout, exchange(conn, &req, &mut buf)).await
        {
            Ok(r) => r,
            Err(_) => Err(std::io::ErrorKind::TimedOut.into()),
        };
        let done = Instant::now();
        if !matches!(outcome, Ok((_, false, _))) {
            stream = None;
        }
        let verdict = judge(target.route, outcome, &buf);
        live.answered.fetch_add(1, Ordering::Relaxed);
        if verdict.is_err() {
            live.bad.fetch_add(1, Ordering::Relaxed);
        }
        let from = match scheduled {
            Some(at) if prev_done > at => at,
            _ => sent,
        };
        prev_done = done;
        let window_start = scheduled.unwrap_or(sent);
        if window_start < plan.measure_from || window_start >= plan.end {
            continue;
        }
        stats.requests += 1;
        match verdict {
            Ok(c) => {
                stats.ok += 1;
                stats.counted.ads += c.ads;
                stats.counted.banners += c.banners;
                stats.counted.video += c.video;
                stats.empty += u64::from(target.route == Route::Generate && c.ads + c.banners == 0);
            }
            Err((key, text)) => {
                *stats.statuses.entry(key.clone()).or_default() += 1;
                if stats.first_error.is_none() {
                    stats.first_error = Some(format!("{key}: {text}"));
                }
            }
        }
        let ns = (done - from).as_nanos() as u64;
        stats.latency.record(ns);
        stats.service.record((done - sent).as_nanos() as u64);
        let sec = (window_start - plan.measure_from).as_secs() as usize;
        if let Some(s) = stats.seconds.get_mut(sec) {
            s.count += 1;
            s.over += u64::from(ns > plan.target_ns);
            s.max_ms = s.max_ms.max(ns as f64 / 1e6);
        }
    }
    stats
}

/// Prints answers per second to stderr until aborted.
pub async fn progress(plan: Plan, live: Arc<Live>) {
    let mut tick =
        tokio::time::interval_at(plan.start + Duration::from_secs(1), Duration::from_secs(1));
    let (mut last, mut second) = (0, 0);
    loop {
        let now = tick.tick().await;
        second += 1;
        let answered = live.answered.load(Ordering::Relaxed);
        let phase = if now <= plan.measure_from {
            "warm-up"
        } else if now <= plan.end + Duration::from_millis(100) {
            "measure"
        } else {
            "drain"
        };
        eprintln!(
            "[{second:>3}s] {phase:<7} {:>7} req/s  answered {answered:>9}  bad {}",
            answered - last,
            live.bad.load(Ordering::Relaxed)
        );
        last = answered;
    }
}

/// One short request on a fresh connection (`Connection: close`): status and body.
pub async fn one_shot(addr: SocketAddr, request: &[u8]) -> std::io::Result<(u16, Vec<u8>)> {
    let mut s = TcpStream::connect(addr).await?;
    let mut buf = vec![0u8; 64 * 1024];
    let (status, _, len) = exchange(&mut s, request, &mut buf).await?;
    let body = bodies::body_of(&buf, len)
        .map(|(_, b)| b)
        .ok_or_else(|| std::io::Error::other("malformed response"))?;
    Ok((status, body))
}
