//! The result of an `adsbench run` (printed, and written as JSON with `--json`) and
//! `adsbench report`: one Markdown table of runs, each generate run's p99 and CPU
//! per request as a ratio to the `healthz` run of the same mode and rate.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use rm_benches::report::Latency;
use serde::{Deserialize, Serialize};

use super::load;

/// One run, as printed and written.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AdsRun {
    pub name: String,
    pub route: String,
    /// `rate` (open loop) or `max` (closed loop).
    pub mode: String,
    pub api: String,
    pub connections: usize,
    pub warmup_s: f64,
    pub duration_s: f64,
    pub target_rate: Option<f64>,
    pub requests: u64,
    pub ok: u64,
    /// Bad answers by status (`io`, `connect`, `bad-body`, or the HTTP status).
    pub bad: BTreeMap<String, u64>,
    pub first_error: Option<String>,
    pub throughput_rps: f64,
    pub latency_ms: Latency,
    pub service_latency_ms: Latency,
    pub target_ms: f64,
    /// Requests over the target, and the seconds of the window they fell in.
    pub over_target: u64,
    pub seconds_over_target: Vec<(usize, load::Second)>,
    pub ads_per_answer: f64,
    pub banners_per_answer: f64,
    pub video_per_answer: f64,
    pub empty_answers: u64,
    pub server_cpu_s: Option<f64>,
    pub server_cpu_us_per_req: Option<f64>,
    pub loadgen_cpu_s: Option<f64>,
    pub loadavg_start: String,
    pub loadavg_end: String,
    pub machine: String,
    pub started_unix: u64,
}

/// Prints a run.
pub fn print_run(r: &AdsRun) {
    let l = &r.latency_ms;
    println!(
        "{} ({} {}, {} connections, {:.0} s): {} requests, {} ok, {:.1} req/s",
        r.name, r.route, r.mode, r.connections, r.duration_s, r.requests, r.ok, r.throughput_rps
    );
    println!(
        "latency ms: p50 {:.3}  p90 {:.3}  p99 {:.3}  p99.9 {:.3}  max {:.3}  (service time p99 {:.3})",
        l.p50, l.p90, l.p99, l.p999, l.max, r.service_latency_ms.p99
    );
    println!("bad answers: {:?}", r.bad);
    if let Some(e) = &r.first_error {
        println!("first bad answer: {e}");
    }
    if r.route == "generate" {
        println!(
            "per answer: {:.2} product ads, {:.2} banners, {:.2} video (VAST); {} answers empty",
            r.ads_per_answer, r.banners_per_answer, r.video_per_answer, r.empty_answers
        );
    }
    if let Some(c) = r.server_cpu_s {
        println!(
            "server CPU: {c:.2} s ({:.0}% of one core), {:.0} us per request; loadgen CPU {:.2} s",
            c * 100.0 / r.duration_s,
            r.server_cpu_us_per_req.unwrap_or(0.0),
            r.loadgen_cpu_s.unwrap_or(0.0)
        );
    }
    println!(
        "over {} ms: {} requests in {} of {:.0} seconds {:?}",
        r.target_ms,
        r.over_target,
        r.seconds_over_target.len(),
        r.duration_s,
        r.seconds_over_target
            .iter()
            .map(|(s, x)| format!("{s}s:{}/{} max {:.1}ms", x.over, x.count, x.max_ms))
            .collect::<Vec<_>>()
    );
    println!(
        "load average: {} -> {}; {}",
        r.loadavg_start, r.loadavg_end, r.machine
    );
}

/// The Markdown table of the runs in `paths`, printed and written to `md`.
pub fn report(paths: &[PathBuf], md_out: Option<&Path>) -> anyhow::Result<()> {
    let mut runs = Vec::new();
    for p in paths {
        let text =
            std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
        let r: AdsRun =
            serde_json::from_str(&text).with_context(|| format!("parsing {}", p.display()))?;
        runs.push(r);
    }
    let mut md = String::from(
        "| run | route | mode | rate asked | achieved req/s | p50 ms | p90 ms | p99 ms | p99.9 ms | max ms | bad | ads/banners/video per answer | server CPU us/req | p99 / healthz p99 | CPU / healthz CPU | load avg (start) |\n|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---|\n",
    );
    for r in &runs {
        let base = runs.iter().find(|b| {
            b.route == "healthz"
                && b.mode == r.mode
                && b.target_rate.map(|x| x.round()) == r.target_rate.map(|x| x.round())
        });
        let ratio = |x: Option<f64>, y: Option<f64>| match (x, y) {
            (Some(x), Some(y)) if y > 0.0 && r.route != "healthz" => format!("{:.1}x", x / y),
            _ => "".into(),
        };
        let l = &r.latency_ms;
        md.push_str(&format!(
            "| {} | {} | {} | {} | {:.0} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {} | {} | {} | {} | {} | {} |\n",
            r.name,
            r.route,
            r.mode,
            r.target_rate.map_or("-".into(), |x| format!("{x:.0}")),
            r.throughput_rps,
            l.p50,
            l.p90,
            l.p99,
            l.p999,
            l.max,
            r.bad.values().sum::<u64>(),
            if r.route == "generate" {
                format!(
                    "{:.1} / {:.1} / {:.2}",
                    r.ads_per_answer, r.banners_per_answer, r.video_per_answer
                )
            } else {
                "-".into()
            },
            r.server_cpu_us_per_req.map_or("-".into(), |x| format!("{x:.0}")),
            ratio(Some(l.p99), base.map(|b| b.latency_ms.p99)),
            ratio(r.server_cpu_us_per_req, base.and_then(|b| b.server_cpu_us_per_req)),
            r.loadavg_start.split(' ').take(3).collect::<Vec<_>>().join(" "),
        ));
    }
    println!("{md}");
    if let Some(p) = md_out {
        std::fs::write(p, &md).with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(())
}
