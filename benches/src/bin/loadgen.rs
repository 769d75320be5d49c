//! `loadgen`: an HTTP/1.1 keep-alive load generator for the beacon edge.
//!
//! Every request is a distinct valid beacon (see `rm_benches::beacon`), drawn from a
//! pool built before the clock starts. Two modes:
//!
//! - closed loop (default): `--connections N` each send a request as soon as the
//!   previous answer is in, for `--duration S` after `--warmup S`: max throughput;
//! - open loop: `--rate R` (or `--rate-from max.json --rate-fraction 0.5`) schedules
//!   requests at fixed intervals spread over the connections (connection `i` sends
//!   its `k`-th request at `(i + k N) / R` seconds). A request that could not go at
//!   its scheduled time because the previous answer on its connection was not in yet
//!   is timed from the scheduled time, so a stalled server is charged for every
//!   request it delayed (no coordinated omission); a request whose connection was
//!   idle is timed from its actual send, so the generator's own timer slack (tokio
//!   timers have 1 ms granularity) is not charged to the server. The plain service
//!   time (from the actual send) is reported too.
//!
//! Throughput counts 200 answers only. Progress is printed to stderr every second;
//! the summary table to stdout; `--json FILE` writes it as JSON.
//!
//! `loadgen report [--md FILE] [--json FILE] RUN.json...` prints the comparison of
//! several runs (max throughput, open-loop latency, ratios to nginx and bare hyper).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::{Args, Parser, Subcommand, ValueEnum};
use rm_benches::beacon::{self, Template, UrlKind};
use rm_benches::hist::Histogram;
use rm_benches::http::{parse_response, split_url};
use rm_benches::procstat;
use rm_benches::report::{self, Baselines, Goals, Latency, RunResult};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

#[derive(Debug, Parser)]
#[command(
    name = "loadgen",
    about = "HTTP/1.1 keep-alive load generator for beacons",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Compares runs written with --json: one table, ratios to the baselines.
    Report(ReportArgs),
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Kind {
    /// `GET /v1/events/ad/interaction?<distinct beacon>`.
    Beacon,
    /// GET / (for baselines that ignore the path).
    Plain,
}

#[derive(Debug, Clone, Args)]
struct RunArgs {
    /// Base URL of the target (http only).
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    url: String,
    /// Target name in the summary.
    #[arg(long, default_value = "target")]
    name: String,
    /// Keep-alive connections.
    #[arg(long, default_value_t = 64)]
    connections: usize,
    /// Measured seconds.
    #[arg(long, default_value_t = 15.0)]
    duration: f64,
    /// Seconds of load before measuring.
    #[arg(long, default_value_t = 0.0)]
    warmup: f64,
    /// Open loop: requests per second, spread over the connections.
    #[arg(long)]
    rate: Option<f64>,
    /// Open loop: take the rate from a closed-loop run's JSON, times --rate-fraction.
    #[arg(long, conflicts_with = "rate")]
    rate_from: Option<PathBuf>,
    /// Fraction of the --rate-from throughput to run at.
    #[arg(long, default_value_t = 0.5)]
    rate_fraction: f64,
    /// What to request.
    #[arg(long, value_enum, default_value_t = Kind::Beacon)]
    url_kind: Kind,
    /// Load-generator worker threads.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Distinct request templates built before the run (each request is still unique).
    #[arg(long, default_value_t = 65_536)]
    pool: usize,
    /// Seconds a request may take before it counts as an error and its connection is dropped.
    #[arg(long, default_value_t = 30.0)]
    timeout: f64,
    /// Process whose CPU time (with its children) is sampled over the measured window.
    #[arg(long)]
    server_pid: Option<u32>,
    /// Auxiliary processes (for example the Kafka brokers: repeat the flag, or
    /// comma-separated) whose CPU time, summed, is reported apart.
    #[arg(long, value_delimiter = ',')]
    aux_pid: Vec<u32>,
    /// Writes the summary as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
    /// `User-Agent` of every request (default `rm-loadgen/0.1`).
    #[arg(long, default_value = beacon::USER_AGENT)]
    user_agent: String,
    /// No per-second progress.
    #[arg(long)]
    quiet: bool,
    /// The `iabConsentString` of the beacons that carry one (half of them), instead
    /// of the pool's random text: a real TC string.
    #[arg(long)]
    consent_string: Option<String>,
}

#[derive(Debug, Clone, Args)]
struct ReportArgs {
    /// Runs, as written by --json.
    #[arg(required = true)]
    runs: Vec<PathBuf>,
    /// Name of the nginx baseline target.
    #[arg(long, default_value = "nginx-empty-gif")]
    nginx: String,
    /// Name of the bare hyper target.
    #[arg(long, default_value = "bare-hyper")]
    bare: String,
    /// Writes the Markdown tables here too.
    #[arg(long)]
    md: Option<PathBuf>,
    /// Writes the comparison (every run and the ratios) as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
}

type Error = Box<dyn std::error::Error + Send + Sync>;

fn main() -> Result<(), Error> {
    let cli = Cli::parse();
    if let Some(Command::Report(r)) = cli.command {
        return run_report(&r);
    }
    let args = cli.run;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.threads.max(1))
        .enable_all()
        .build()?;
    rt.block_on(run(args))
}

fn run_report(args: &ReportArgs) -> Result<(), Error> {
    let mut runs = Vec::new();
    for p in &args.runs {
        let text =
            std::fs::read_to_string(p).map_err(|e| format!("reading {}: {e}", p.display()))?;
        let r: RunResult =
            serde_json::from_str(&text).map_err(|e| format!("parsing {}: {e}", p.display()))?;
        runs.push(r);
    }
    let base = Baselines {
        nginx: args.nginx.clone(),
        bare: args.bare.clone(),
    };
    let goals = Goals::default();
    let cmp = report::compare(&runs, &base, goals);
    let md = report::markdown(&cmp, goals);
    println!("{md}");
    if let Some(p) = &args.md {
        std::fs::write(p, &md)?;
    }
    if let Some(p) = &args.json {
        std::fs::write(p, serde_json::to_string_pretty(&cmp)?)?;
    }
    Ok(())
}

/// Counters shared with the progress printer.
#[derive(Default)]
struct Live {
    answered: AtomicU64,
    not_ok: AtomicU64,
}

/// What one connection measured.
struct ConnStats {
    latency: Histogram,
    service: Histogram,
    requests: u64,
    ok: u64,
    statuses: BTreeMap<String, u64>,
}

/// When to send, for one connection.
#[derive(Clone, Copy)]
struct Plan {
    start: Instant,
    measure_from: Instant,
    end: Instant,
    /// Open loop: nanoseconds between two consecutive requests of the whole run.
    interval_ns: Option<f64>,
    timeout: Duration,
}

fn rate_of(args: &RunArgs) -> Result<Option<f64>, Error> {
    if let Some(r) = args.rate {
        return Ok(Some(r));
    }
    let Some(p) = &args.rate_from else {
        return Ok(None);
    };
    let text = std::fs::read_to_string(p).map_err(|e| format!("reading {}: {e}", p.display()))?;
    let r: RunResult =
        serde_json::from_str(&text).map_err(|e| format!("parsing {}: {e}", p.display()))?;
    Ok(Some(r.throughput_rps * args.rate_fraction))
}

async fn run(args: RunArgs) -> Result<(), Error> {
    let rate = rate_of(&args)?;
    if let Some(r) = rate {
        if !(r.is_finite() && r > 0.0) {
            return Err(format!("rate must be positive, got {r}").into());
        }
    }
    let connections = args.connections.max(1);
    let (connect, host) = split_url(&args.url)?;
    let addr = tokio::net::lookup_host(&connect)
        .await?
        .next()
        .ok_or_else(|| format!("{connect}: no address"))?;
    let now = SystemTime::now().duration_since(UNIX_EPOCH)?;
    let run_id = (now.as_nanos() as u64) ^ u64::from(std::process::id()).rotate_left(40);
    let kind = match args.url_kind {
        Kind::Beacon => UrlKind::Beacon,
        Kind::Plain => UrlKind::Plain,
    };
    let mut templates = beacon::pool_as(
        kind,
        &host,
        &args.user_agent,
        args.pool,
        run_id,
        now.as_millis() as u64,
    );
    if let Some(s) = &args.consent_string {
        templates = templates.iter().map(|t| t.with_consent(s)).collect();
    }
    let pool = Arc::new(templates);

    let start = Instant::now() + Duration::from_millis(50);
    let measure_from = start + Duration::from_secs_f64(args.warmup.max(0.0));
    let end = measure_from + Duration::from_secs_f64(args.duration.max(0.001));
    let plan = Plan {
        start,
        measure_from,
        end,
        interval_ns: rate.map(|r| 1e9 / r),
        timeout: Duration::from_secs_f64(args.timeout.max(0.001)),
    };
    let live = Arc::new(Live::default());
    let loadavg_start = procstat::loadavg();
    let mode = if rate.is_some() { "rate" } else { "max" };
    eprintln!(
        "loadgen: {} {} {}: {connections} connections, {} thread(s), {}s warm-up + {}s{}",
        args.name,
        mode,
        args.url,
        args.threads.max(1),
        args.warmup,
        args.duration,
        rate.map_or_else(String::new, |r| format!(", {r:.0} req/s")),
    );

    let mut tasks = Vec::with_capacity(connections);
    for i in 0..connections {
        let (pool, live) = (Arc::clone(&pool), Arc::clone(&live));
        tasks.push(tokio::spawn(connection(
            i,
            connections,
            addr,
            pool,
            plan,
            live,
        )));
    }
    let sampler = tokio::spawn(sample_cpu(plan, args.server_pid, args.aux_pid.clone()));
    let progress = (!args.quiet).then(|| tokio::spawn(progress(plan, Arc::clone(&live))));

    let mut latency = Histogram::new();
    let mut service = Histogram::new();
    let (mut requests, mut ok) = (0, 0);
    let mut statuses: BTreeMap<String, u64> = BTreeMap::new();
    for t in tasks {
        let s = t.await?;
        latency.merge(&s.latency);
        service.merge(&s.service);
        requests += s.requests;
        ok += s.ok;
        for (k, v) in s.statuses {
            *statuses.entry(k).or_default() += v;
        }
    }
    if let Some(p) = progress {
        p.abort();
    }
    let (server_cpu_s, aux_cpu_s, loadgen_cpu_s) = sampler.await?;
    let duration_s = (end - measure_from).as_secs_f64();
    let result = RunResult {
        name: args.name.clone(),
        mode: mode.into(),
        url: args.url.clone(),
        url_kind: format!("{:?}", args.url_kind).to_lowercase(),
        connections,
        threads: args.threads.max(1),
        warmup_s: args.warmup,
        duration_s,
        target_rate: rate,
        requests,
        ok,
        non_200: statuses,
        throughput_rps: ok as f64 / duration_s,
        latency_ms: Latency::of(&latency),
        service_latency_ms: rate.map(|_| Latency::of(&service)),
        server_cpu_s,
        aux_cpu_s,
        loadgen_cpu_s,
        loadavg_start,
        started_unix: now.as_secs(),
    };
    println!("{}", report::summary_table(std::slice::from_ref(&result)));
    if let Some(s) = &result.service_latency_ms {
        println!(
            "service time (from actual send): p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
            s.p50, s.p99, s.max
        );
    }
    if let (Some(cpu), Some(own)) = (result.server_cpu_s, result.loadgen_cpu_s) {
        println!(
            "CPU over the measured window: server {cpu:.2} s ({:.0}%), loadgen {own:.2} s ({:.0}%)",
            cpu * 100.0 / duration_s,
            own * 100.0 / duration_s
        );
    }
    if let Some(aux) = result.aux_cpu_s {
        println!(
            "auxiliary process (broker) CPU: {aux:.2} s ({:.0}%)",
            aux * 100.0 / duration_s
        );
    }
    if let Some(p) = &args.json {
        std::fs::write(p, serde_json::to_string_pretty(&result)?)?;
    }
    Ok(())
}

/// CPU seconds of the server, the auxiliary process and this process over the window.
async fn sample_cpu(
    plan: Plan,
    pid: Option<u32>,
    aux: Vec<u32>,
) -> (Option<f64>, Option<f64>, Option<f64>) {
    let sample = || {
        let aux_cpu = aux
            .iter()
            .map(|p| procstat::tree_cpu_s(*p))
            .try_fold(0.0, |sum, cpu| cpu.map(|c| sum + c));
        [
            pid.and_then(procstat::tree_cpu_s),
            aux_cpu.filter(|_| !aux.is_empty()),
            procstat::self_cpu_s(),
        ]
    };
    tokio::time::sleep_until(plan.measure_from).await;
    let before = sample();
    tokio::time::sleep_until(plan.end).await;
    let after = sample();
    let d = |i: usize| before[i].zip(after[i]).map(|(a, b)| b - a);
    (d(0), d(1), d(2))
}

async fn progress(plan: Plan, live: Arc<Live>) {
    let mut tick =
        tokio::time::interval_at(plan.start + Duration::from_secs(1), Duration::from_secs(1));
    let mut last = 0;
    let mut second = 0;
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
            "[{second:>3}s] {phase:<7} {:>9} req/s  answered {answered:>10}  non-200/errors {}",
            answered - last,
            live.not_ok.load(Ordering::Relaxed)
        );
        last = answered;
    }
}

/// Sends one request and reads its answer; `Ok((status, close))`.
async fn exchange(
    stream: &mut TcpStream,
    req: &[u8],
    buf: &mut Vec<u8>,
) -> std::io::Result<(u16, bool)> {
    stream.write_all(req).await?;
    let mut filled = 0;
    loop {
        match parse_response(&buf[..filled]) {
            Ok(Some(p)) => return Ok((p.status, p.close)),
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

async fn connection(
    index: usize,
    connections: usize,
    addr: SocketAddr,
    pool: Arc<Vec<Template>>,
    plan: Plan,
    live: Arc<Live>,
) -> ConnStats {
    let mut stats = ConnStats {
        latency: Histogram::new(),
        service: Histogram::new(),
        requests: 0,
        ok: 0,
        statuses: BTreeMap::new(),
    };
    let mut stream: Option<TcpStream> = None;
    let mut req = Vec::with_capacity(1024);
    let mut buf = vec![0u8; 16 * 1024];
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
        let conn = match stream.as_mut() {
            Some(s) => s,
            None => match TcpStream::connect(addr).await {
                Ok(s) => {
                    let _ = s.set_nodelay(true);
                    stream.insert(s)
                }
                Err(_) => {
                    let measured = scheduled.unwrap_or_else(Instant::now) >= plan.measure_from;
                    if measured {
                        stats.requests += 1;
                        *stats.statuses.entry("connect".into()).or_default() += 1;
                    }
                    live.not_ok.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
        };
        pool[(seq % pool.len() as u64) as usize].write(seq, &mut req);
        let sent = Instant::now();
        let outcome = tokio::time::timeout(plan.timeout, exchange(conn, &req, &mut buf)).await;
        let done = Instant::now();
        let status = match outcome {
            Ok(Ok((status, close))) => {
                if close {
                    stream = None;
                }
                Some(status)
            }
            Ok(Err(_)) | Err(_) => {
                stream = None;
                None
            }
        };
        live.answered.fetch_add(1, Ordering::Relaxed);
        if status != Some(200) {
            live.not_ok.fetch_add(1, Ordering::Relaxed);
        }
        // Open loop: a request held back by the previous answer on its connection is
        // timed from its scheduled send (coordinated-omission correction); one sent
        // late only by this generator's timer slack is timed from its actual send.
        let from = match scheduled {
            Some(at) if prev_done > at => at,
            _ => sent,
        };
        prev_done = done;
        let window_start = scheduled.unwrap_or(sent);
        if window_start >= plan.measure_from && window_start < plan.end {
            stats.requests += 1;
            match status {
                Some(200) => stats.ok += 1,
                Some(s) => *stats.statuses.entry(s.to_string()).or_default() += 1,
                None => *stats.statuses.entry("io".into()).or_default() += 1,
            }
            stats.latency.record((done - from).as_nanos() as u64);
            stats.service.record((done - sent).as_nanos() as u64);
        }
    }
    stats
}
