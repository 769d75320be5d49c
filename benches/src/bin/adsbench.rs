//! `adsbench`: the `POST /v1/ads/generate` benchmark (issue 5: p50/p99 and throughput
//! with 1M products and 10k campaigns; target p99 < 5 ms at 1,000 req/s).
//!
//! - `adsbench gen --data-dir DIR`: writes the synthetic catalog and campaigns
//!   ([`gen`] describes the shape) into the api's embedded state under `DIR` (the
//!   api must not be running on it), and `DIR/adsbench-shape.txt` saying what.
//! - `adsbench wait --api URL`: waits until the api is ready and its ads index
//!   serves the generated catalog (the first index build reads every product).
//! - `adsbench run --api URL --rate 1000 --duration 30`: an open-loop run (or closed
//!   loop with `--rate 0`) against generate or a baseline route ([`bodies`],
//!   [`load`]); prints the latency quantiles, the achieved rate, the bad answers, the
//!   server's CPU per request and the seconds over the target; `--json FILE` keeps it.
//! - `adsbench micro`: the phases of one request timed in process ([`micro`]).
//! - `adsbench report RUN.json...`: one Markdown table of runs, with the ratio of each
//!   generate run's p99 and CPU per request to the `healthz` run of the same mode
//!   and rate (the same-session baseline).
//!
//! `benches/ads.sh` runs the whole procedure; `BENCHMARKS.md` has the figures.

#[path = "adsbench/bodies.rs"]
mod bodies;
#[path = "adsbench/gen.rs"]
mod gen;
#[path = "adsbench/load.rs"]
mod load;
#[path = "adsbench/micro.rs"]
mod micro;
#[path = "adsbench/rng.rs"]
mod rng;
#[path = "adsbench/summary.rs"]
mod summary;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, bail, Context};
use base64::Engine as _;
use clap::{Args, Parser, Subcommand};
use rm_api::state::State;
use rm_benches::http::split_url;
use rm_benches::procstat;
use rm_benches::report::Latency;
use tokio::time::Instant;

use bodies::Route;

#[derive(Debug, Parser)]
#[command(name = "adsbench", about = "Benchmark of POST /v1/ads/generate")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Writes the synthetic catalog and campaigns into the api's embedded state.
    Gen(GenArgs),
    /// Waits until the api serves ads for the generated catalog.
    Wait(WaitArgs),
    /// Loads one route at a fixed rate (open loop) or as fast as it answers.
    Run(RunArgs),
    /// Prints a Markdown table of runs written with `run --json`.
    Report(ReportArgs),
    /// Times each phase of generate in process over an in-memory index (no server).
    Micro(MicroArgs),
}

#[derive(Debug, Args)]
struct MicroArgs {
    /// Products.
    #[arg(long, default_value_t = 1_000_000)]
    products: u64,
    /// Campaigns.
    #[arg(long, default_value_t = 10_000)]
    campaigns: u64,
    /// Seed of the data (as `gen`).
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Requests to time.
    #[arg(long, default_value_t = 20_000)]
    requests: usize,
    /// Seed of the request bodies (as `run`).
    #[arg(long, default_value_t = 7)]
    body_seed: u64,
}

#[derive(Debug, Args)]
struct GenArgs {
    /// The api's data dir (the state goes to DIR/api/state.redb).
    #[arg(long)]
    data_dir: PathBuf,
    /// Products.
    #[arg(long, default_value_t = 1_000_000)]
    products: u64,
    /// Campaigns.
    #[arg(long, default_value_t = 10_000)]
    campaigns: u64,
    /// Seed of every random choice.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Catalog id.
    #[arg(long, default_value = "bench-catalog")]
    catalog: String,
    /// Records per write transaction.
    #[arg(long, default_value_t = 50_000)]
    chunk: u64,
}

#[derive(Debug, Clone, Args)]
struct Api {
    /// Base URL of the api.
    #[arg(long, default_value = "http://127.0.0.1:8081")]
    api: String,
    /// OAuth client id.
    #[arg(long, default_value = "demo-client")]
    client: String,
    /// OAuth client secret.
    #[arg(long, default_value = "demo-secret")]
    secret: String,
    /// Catalog the requests ask for.
    #[arg(long, default_value = "bench-catalog")]
    catalog: String,
}

#[derive(Debug, Args)]
struct WaitArgs {
    #[command(flatten)]
    api: Api,
    /// Seconds to wait at most.
    #[arg(long, default_value_t = 900.0)]
    timeout: f64,
}

#[derive(Debug, Args)]
struct RunArgs {
    #[command(flatten)]
    api: Api,
    /// Run name in the summary.
    #[arg(long, default_value = "generate")]
    name: String,
    /// Route to load.
    #[arg(long, value_enum, default_value_t = Route::Generate)]
    route: Route,
    /// Requests per second (open loop); 0 for closed loop (max throughput).
    #[arg(long, default_value_t = 1000.0)]
    rate: f64,
    /// Measured seconds.
    #[arg(long, default_value_t = 30.0)]
    duration: f64,
    /// Seconds of load before measuring.
    #[arg(long, default_value_t = 5.0)]
    warmup: f64,
    /// Keep-alive connections.
    #[arg(long, default_value_t = 32)]
    connections: usize,
    /// Load-generator worker threads.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Distinct request bodies (each request still gets its own tracking id).
    #[arg(long, default_value_t = 8192)]
    pool: usize,
    /// Seed of the request bodies.
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Latency target (ms): seconds with requests over it are listed.
    #[arg(long, default_value_t = 5.0)]
    target_ms: f64,
    /// Seconds an answer may take before it counts as an error.
    #[arg(long, default_value_t = 10.0)]
    timeout: f64,
    /// The server's pid, for its CPU time over the window.
    #[arg(long)]
    server_pid: Option<u32>,
    /// Writes the result as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
    /// No per-second progress.
    #[arg(long)]
    quiet: bool,
}

#[derive(Debug, Args)]
struct ReportArgs {
    /// Runs written with `run --json`.
    #[arg(required = true)]
    runs: Vec<PathBuf>,
    /// Also writes the table here.
    #[arg(long)]
    md: Option<PathBuf>,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let threads = match &cli.command {
        Command::Run(r) => r.threads.max(1),
        _ => 1,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()?;
    match cli.command {
        Command::Gen(a) => rt.block_on(generate_data(a)),
        Command::Wait(a) => rt.block_on(wait(a)),
        Command::Run(a) => rt.block_on(run(a)),
        Command::Report(a) => summary::report(&a.runs, a.md.as_deref()),
        Command::Micro(a) => micro::run(
            &gen::Shape {
                catalog: "bench-catalog".into(),
                products: a.products,
                seed: a.seed,
            },
            a.campaigns,
            a.requests,
            a.body_seed,
        ),
    }
}

/// `nproc`, CPU model.
fn machine() -> String {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, m)| m.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    format!("{cpus} CPUs, {model}")
}

async fn generate_data(a: GenArgs) -> anyhow::Result<()> {
    let shape = gen::Shape {
        catalog: a.catalog.clone(),
        products: a.products,
        seed: a.seed,
    };
    let state = State::open_embedded(&a.data_dir)
        .with_context(|| format!("opening the api state under {}", a.data_dir.display()))?;
    let chunk = a.chunk.max(1);
    let started = std::time::Instant::now();
    let mut start = 0;
    while start < a.products {
        let end = (start + chunk).min(a.products);
        let ps: Vec<_> = (start..end).map(|i| gen::product(&shape, i)).collect();
        for (p, i) in ps.iter().zip(start..) {
            p.validate(&format!("products[{i}]"))
                .map_err(|e| anyhow!("generated product {i} is invalid: {e:?}"))?;
        }
        state.put_products(&ps).await?;
        eprintln!(
            "products {end}/{} ({:.1} s)",
            a.products,
            started.elapsed().as_secs_f64()
        );
        start = end;
    }
    let mut census = gen::Census::default();
    let mut start = 0;
    while start < a.campaigns {
        let end = (start + chunk.min(5_000)).min(a.campaigns);
        let cs: Vec<_> = (start..end).map(|j| gen::campaign(&shape, j)).collect();
        for c in &cs {
            c.validate()
                .map_err(|e| anyhow!("generated campaign {} is invalid: {e:?}", c.id))?;
            census.add(c);
        }
        state.put_campaigns(&cs).await?;
        eprintln!("campaigns {end}/{}", a.campaigns);
        start = end;
    }
    let summary = format!(
        "catalog {} seed {}: {} products in a 10x10x10 category tree; {} campaigns: {} sponsored products, {} banner X ({} video, {} with two videos), {} wildcard, {} with include and {} with exclude filters, {} with spend limits; placements category/search/any {}/{}/{}; {} advertised product keys; written in {:.1} s\n",
        a.catalog,
        a.seed,
        a.products,
        a.campaigns,
        census.sponsored,
        census.banners,
        census.video,
        census.two_videos,
        census.wildcard,
        census.include,
        census.exclude,
        census.limited,
        census.placements[0],
        census.placements[1],
        census.placements[2],
        census.advertised,
        started.elapsed().as_secs_f64()
    );
    print!("{summary}");
    let marker = a.data_dir.join("adsbench-shape.txt");
    std::fs::write(&marker, summary).with_context(|| format!("writing {}", marker.display()))?;
    Ok(())
}

async fn resolve(url: &str) -> anyhow::Result<(SocketAddr, String)> {
    let (connect, host) = split_url(url).map_err(|e| anyhow!(e))?;
    let addr = tokio::net::lookup_host(&connect)
        .await?
        .next()
        .ok_or_else(|| anyhow!("{connect}: no address"))?;
    Ok((addr, host))
}

/// A bearer token for the client (OAuth client credentials).
async fn token(addr: SocketAddr, host: &str, api: &Api) -> anyhow::Result<String> {
    let form = |s: &str| serde_urlencoded::to_string([("", s)]).unwrap_or_default()[1..].to_owned();
    let basic = base64::engine::general_purpose::STANDARD.encode(format!(
        "{}:{}",
        form(&api.client),
        form(&api.secret)
    ));
    let body = "grant_type=client_credentials";
    let req = format!(
        "POST /v1/oauth2/token HTTP/1.1\r\nhost: {host}\r\nauthorization: Basic {basic}\r\ncontent-type: application/x-www-form-urlencoded\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let (status, body) = load::one_shot(addr, req.as_bytes()).await?;
    let text = String::from_utf8_lossy(&body);
    if status != 200 {
        bail!("token endpoint answered {status}: {text}");
    }
    let v: serde_json::Value = serde_json::from_slice(&body)?;
    v["access_token"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| anyhow!("no access_token in {text}"))
}

async fn wait(a: WaitArgs) -> anyhow::Result<()> {
    let (addr, host) = resolve(&a.api.api).await?;
    let started = std::time::Instant::now();
    let deadline = started + Duration::from_secs_f64(a.timeout);
    let readyz = format!("GET /readyz HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\n\r\n");
    let mut last = String::new();
    loop {
        if std::time::Instant::now() > deadline {
            bail!(
                "the api at {} was not ready in {} s: {last}",
                a.api.api,
                a.timeout
            );
        }
        match load::one_shot(addr, readyz.as_bytes()).await {
            Ok((200, _)) => break,
            Ok((s, b)) => last = format!("/readyz {s}: {}", String::from_utf8_lossy(&b)),
            Err(e) => last = format!("/readyz: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    eprintln!("ready after {:.1} s", started.elapsed().as_secs_f64());
    let token = token(addr, &host, &a.api).await?;
    let body = format!(
        r#"{{"sessionId":"adsbench-probe","placement":"category","catalogId":"{}","maxNumberOfAds":5}}"#,
        a.api.catalog
    );
    let req = format!(
        "POST /v1/ads/generate HTTP/1.1\r\nhost: {host}\r\nauthorization: Bearer {token}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    loop {
        if std::time::Instant::now() > deadline {
            bail!("no ads for {} in {} s: {last}", a.api.catalog, a.timeout);
        }
        let (status, body) = load::one_shot(addr, req.as_bytes()).await?;
        if status == 200 {
            let head = b"content-type: application/json";
            match bodies::check_generate(head, &body) {
                Ok(c) if c.ads > 0 => {
                    eprintln!(
                        "ads index serves {} after {:.1} s ({} ads, {} banners in the probe)",
                        a.api.catalog,
                        started.elapsed().as_secs_f64(),
                        c.ads,
                        c.banners
                    );
                    return Ok(());
                }
                Ok(_) => last = "no ads yet".into(),
                Err(e) => last = e,
            }
        } else {
            last = format!("{status}: {}", String::from_utf8_lossy(&body));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

async fn run(a: RunArgs) -> anyhow::Result<()> {
    if !(a.rate.is_finite() && a.rate >= 0.0) {
        bail!("--rate must be 0 (closed loop) or positive, got {}", a.rate);
    }
    let (addr, host) = resolve(&a.api.api).await?;
    let token = match a.route {
        Route::Healthz => String::new(),
        _ => token(addr, &host, &a.api).await?,
    };
    let now = SystemTime::now().duration_since(UNIX_EPOCH)?;
    let run_id = (now.as_nanos() as u64) ^ u64::from(std::process::id()).rotate_left(40);
    let target = Arc::new(load::Target {
        addr,
        host,
        token,
        route: a.route,
        pool: bodies::pool(a.pool, a.seed, run_id, &a.api.catalog),
    });
    let connections = a.connections.max(1);
    let rate = (a.rate > 0.0).then_some(a.rate);
    let start = Instant::now() + Duration::from_millis(50);
    let measure_from = start + Duration::from_secs_f64(a.warmup.max(0.0));
    let plan = load::Plan {
        start,
        measure_from,
        end: measure_from + Duration::from_secs_f64(a.duration.max(0.001)),
        interval_ns: rate.map(|r| 1e9 / r),
        timeout: Duration::from_secs_f64(a.timeout.max(0.001)),
        target_ns: (a.target_ms * 1e6) as u64,
    };
    let mode = if rate.is_some() { "rate" } else { "max" };
    let loadavg_start = procstat::loadavg();
    eprintln!(
        "adsbench: {} {mode} {:?} {}: {connections} connections, {}s warm-up + {}s{}; load average {loadavg_start}",
        a.name,
        a.route,
        a.api.api,
        a.warmup,
        a.duration,
        rate.map_or_else(String::new, |r| format!(", {r:.0} req/s")),
    );
    let live = Arc::new(load::Live::default());
    let tasks: Vec<_> = (0..connections)
        .map(|i| {
            tokio::spawn(load::connection(
                i,
                connections,
                Arc::clone(&target),
                plan,
                Arc::clone(&live),
            ))
        })
        .collect();
    let pid = a.server_pid;
    let sampler = tokio::spawn(async move {
        let sample = || (pid.and_then(procstat::tree_cpu_s), procstat::self_cpu_s());
        tokio::time::sleep_until(plan.measure_from).await;
        let before = sample();
        tokio::time::sleep_until(plan.end).await;
        let after = sample();
        (
            before.0.zip(after.0).map(|(x, y)| y - x),
            before.1.zip(after.1).map(|(x, y)| y - x),
        )
    });
    let progress = (!a.quiet).then(|| tokio::spawn(load::progress(plan, Arc::clone(&live))));
    let mut all = load::Stats::for_plan(&plan);
    for t in tasks {
        all.merge(&t.await?);
    }
    if let Some(p) = progress {
        p.abort();
    }
    let (server_cpu_s, loadgen_cpu_s) = sampler.await?;
    let duration_s = (plan.end - plan.measure_from).as_secs_f64();
    let per = |n: u64| {
        if all.ok == 0 {
            0.0
        } else {
            n as f64 / all.ok as f64
        }
    };
    let result = summary::AdsRun {
        name: a.name.clone(),
        route: format!("{:?}", a.route).to_lowercase(),
        mode: mode.into(),
        api: a.api.api.clone(),
        connections,
        warmup_s: a.warmup,
        duration_s,
        target_rate: rate,
        requests: all.requests,
        ok: all.ok,
        bad: all.statuses.clone(),
        first_error: all.first_error.clone(),
        throughput_rps: all.ok as f64 / duration_s,
        latency_ms: Latency::of(&all.latency),
        service_latency_ms: Latency::of(&all.service),
        target_ms: a.target_ms,
        over_target: all.seconds.iter().map(|s| s.over).sum(),
        seconds_over_target: all
            .seconds
            .iter()
            .copied()
            .enumerate()
            .filter(|(_, s)| s.over > 0)
            .collect(),
        ads_per_answer: per(all.counted.ads),
        banners_per_answer: per(all.counted.banners),
        video_per_answer: per(all.counted.video),
        empty_answers: all.empty,
        server_cpu_s,
        server_cpu_us_per_req: server_cpu_s
            .filter(|_| all.requests > 0)
            .map(|c| c * 1e6 / all.requests as f64),
        loadgen_cpu_s,
        loadavg_start,
        loadavg_end: procstat::loadavg(),
        machine: machine(),
        started_unix: now.as_secs(),
    };
    summary::print_run(&result);
    if let Some(p) = &a.json {
        std::fs::write(p, serde_json::to_string_pretty(&result)?)
            .with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(())
}
