//! The embedded event log under load, both formats in one run: the redb log of the
//! previous version (`rm_eventlog::embedded::legacy::RedbLog`) and the segment-file
//! log (`EmbeddedLog`). C producers append N records of about 400 bytes (the edge's
//! JSON record) through the `EventLog` trait, each waiting for its record to be
//! durable before the next, as the edge's connections do. Per run and log: records
//! per second, CPU time per record (user + system of this process, all threads, from
//! `/proc/self/stat`: the counters `getrusage(RUSAGE_SELF)` reads) and bytes written
//! to storage per record (`write_bytes` of `/proc/self/io`, counted when pages are
//! dirtied). The two logs alternate, the order flipping every run, on fresh
//! directories; the medians are printed.
//!
//! `cargo run --release -p rm-benches --bin logbench -- --records 200000 --producers 64 --runs 5`

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Parser;
use rm_benches::procstat::self_cpu_s;
use rm_eventlog::embedded::legacy::RedbLog;
use rm_eventlog::embedded::EmbeddedLog;
use rm_eventlog::{EmbeddedLogConfig, EventLog, LogError};

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Settings of a run.
#[derive(Debug, Parser)]
#[command(about = "Embedded event log throughput: redb log against segment files")]
struct Args {
    /// Records appended per run and log.
    #[arg(long, default_value_t = 200_000)]
    records: usize,
    /// Concurrent producers (each waits for its append to be durable).
    #[arg(long, default_value_t = 64)]
    producers: usize,
    /// Bytes per record.
    #[arg(long, default_value_t = 400)]
    size: usize,
    /// Runs per log (alternating); the median is reported.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Directory for the logs (on the disk under test; not a tmpfs).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Run only this log (`redb` or `segments`), for a profile.
    #[arg(long)]
    only: Option<String>,
}

/// What one run measured.
#[derive(Debug, Clone, Copy)]
struct Sample {
    per_s: f64,
    cpu_us: f64,
    bytes: f64,
    refused: u64,
}

/// `write_bytes` of `/proc/self/io`.
fn write_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/io")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("write_bytes:"))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0)
}

/// An edge-like JSON record of `size` bytes, distinct per `i`.
fn record(i: usize, size: usize) -> Vec<u8> {
    let mut v = format!(
        "{{\"v\":1,\"event_id\":\"{i:032x}\",\"type\":\"impression\",\"ad_id\":\"ad-{}\",\"placement\":\"home-top\",\"ts\":{},\"tracking_id\":\"t-{:016x}\",\"pad\":\"",
        i % 977,
        1_700_000_000_000u64 + i as u64,
        (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
    )
    .into_bytes();
    v.resize(size.saturating_sub(2).max(v.len()), b'x');
    v.extend_from_slice(b"\"}");
    v
}

/// Appends `n` records from `producers` tasks; back-pressure is retried after 1 ms.
async fn load<L: EventLog + Clone>(log: &L, args: &Args) -> Sample {
    let (cpu0, io0, t0) = (self_cpu_s().unwrap_or(0.0), write_bytes(), Instant::now());
    let per = args.records / args.producers.max(1);
    let tasks: Vec<_> = (0..args.producers)
        .map(|p| {
            let (log, size) = (log.clone(), args.size);
            tokio::spawn(async move {
                let mut refused = 0u64;
                for j in 0..per {
                    let v = record(p * per + j, size);
                    loop {
                        match log.append("events", b"k", v.clone()).await {
                            Ok(()) => break,
                            Err(LogError::Backpressure(_)) => {
                                refused += 1;
                                tokio::time::sleep(Duration::from_millis(1)).await;
                            }
                            Err(e) => panic!("append: {e}"),
                        }
                    }
                }
                refused
            })
        })
        .collect();
    let mut refused = 0;
    for t in tasks {
        refused += t.await.expect("producer");
    }
    let secs = t0.elapsed().as_secs_f64();
    let cpu = self_cpu_s().unwrap_or(0.0) - cpu0;
    let n = (per * args.producers) as f64;
    Sample {
        per_s: n / secs,
        cpu_us: cpu * 1e6 / n,
        bytes: (write_bytes() - io0) as f64 / n,
        refused,
    }
}

/// Opens a log in `dir`, retrying while a previous handle's threads let go.
fn open_retry<L>(f: impl Fn() -> Result<L, LogError>) -> L {
    for _ in 0..200 {
        if let Ok(l) = f() {
            return l;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    f().expect("open log")
}

async fn run_one(which: &str, dir: &Path, args: &Args) -> Sample {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).expect("mkdir");
    let cfg = EmbeddedLogConfig::default();
    let sample = if which == "redb" {
        let path = dir.join("events.redb");
        let log = open_retry(|| RedbLog::open(&path, &cfg));
        load(&log, args).await
    } else {
        let path = dir.join("log");
        let log = open_retry(|| EmbeddedLog::open(&path, &cfg));
        load(&log, args).await
    };
    // Let the writer threads of the dropped log end before the next run.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let _ = std::fs::remove_dir_all(dir);
    sample
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args = Args::parse();
    let base = args
        .dir
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join(format!("logbench-{}", std::process::id())));
    println!(
        "logbench: {} records of {} B from {} producers per run, {} runs per log alternating, dir {}",
        args.records,
        args.size,
        args.producers,
        args.runs,
        base.display()
    );
    let names = ["redb", "segments"];
    let mut samples: [Vec<Sample>; 2] = [Vec::new(), Vec::new()];
    for run in 0..args.runs {
        let order = if run % 2 == 0 { [0, 1] } else { [1, 0] };
        for i in order {
            if args.only.as_deref().is_some_and(|o| o != names[i]) {
                continue;
            }
            let s = run_one(names[i], &base.join(names[i]), &args).await;
            println!(
                "run {run} {:<8} {:>9.0} records/s {:>7.2} us CPU/record {:>8.1} B written/record{}",
                names[i],
                s.per_s,
                s.cpu_us,
                s.bytes,
                if s.refused > 0 {
                    format!(" ({} refused, retried)", s.refused)
                } else {
                    String::new()
                }
            );
            samples[i].push(s);
        }
    }
    println!("median of {} runs:", args.runs);
    println!(
        "{:<8} {:>12} {:>14} {:>18}",
        "log", "records/s", "us CPU/record", "B written/record"
    );
    let mut medians = Vec::new();
    for (i, name) in names.iter().enumerate() {
        if samples[i].is_empty() {
            return;
        }
        let m = (
            median(samples[i].iter().map(|s| s.per_s).collect()),
            median(samples[i].iter().map(|s| s.cpu_us).collect()),
            median(samples[i].iter().map(|s| s.bytes).collect()),
        );
        println!("{name:<8} {:>12.0} {:>14.2} {:>18.1}", m.0, m.1, m.2);
        medians.push(m);
    }
    println!(
        "segments/redb: {:.2}x records/s, {:.2}x CPU/record, {:.2}x bytes written/record",
        medians[1].0 / medians[0].0,
        medians[1].1 / medians[0].1,
        medians[1].2 / medians[0].2
    );
    let _ = std::fs::remove_dir_all(&base);
}
