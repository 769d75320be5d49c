//! Results of load-generator runs: one JSON object per run, and the comparison
//! table across targets (max throughput, latency at a fraction of it, ratios of
//! each edge to the baselines, and the targets met or missed).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::hist::Histogram;

/// Latency quantiles in milliseconds.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Latency {
    /// Smallest.
    pub min: f64,
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Largest.
    pub max: f64,
}

impl Latency {
    /// Quantiles of a histogram of nanoseconds, in milliseconds.
    pub fn of(h: &Histogram) -> Self {
        let ms = |ns: u64| ns as f64 / 1e6;
        Self {
            min: ms(h.min()),
            mean: h.mean() / 1e6,
            p50: ms(h.quantile(0.50)),
            p90: ms(h.quantile(0.90)),
            p99: ms(h.quantile(0.99)),
            p999: ms(h.quantile(0.999)),
            max: ms(h.max()),
        }
    }
}

/// One run of the load generator against one target.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunResult {
    /// Target name (for example `edge-embedded`, `nginx-empty-gif`).
    pub name: String,
    /// `max` (closed loop, as fast as answers come) or `rate` (open loop, fixed rate).
    pub mode: String,
    /// Base URL of the target.
    pub url: String,
    /// `beacon` or `plain`.
    pub url_kind: String,
    /// Keep-alive connections.
    pub connections: usize,
    /// Load-generator worker threads.
    pub threads: usize,
    /// Warm-up seconds (not measured).
    pub warmup_s: f64,
    /// Measured seconds.
    pub duration_s: f64,
    /// Requests per second asked for (open loop only).
    pub target_rate: Option<f64>,
    /// Requests sent (or scheduled, in open loop) in the measured window.
    pub requests: u64,
    /// Answers with status 200.
    pub ok: u64,
    /// Answers other than 200, by status; `io` counts connection errors and timeouts.
    pub non_200: BTreeMap<String, u64>,
    /// 200 answers per second of the measured window.
    pub throughput_rps: f64,
    /// Latency of every answer; in open loop corrected for coordinated omission
    /// (timed from the scheduled send when the previous answer held it back).
    pub latency_ms: Latency,
    /// Open loop only: latency from the actual send (service time, uncorrected).
    pub service_latency_ms: Option<Latency>,
    /// CPU seconds the server process tree used in the measured window.
    pub server_cpu_s: Option<f64>,
    /// CPU seconds an auxiliary process tree (the Kafka broker) used in the window.
    #[serde(default)]
    pub aux_cpu_s: Option<f64>,
    /// CPU seconds the load generator used in the measured window.
    pub loadgen_cpu_s: Option<f64>,
    /// `/proc/loadavg` when the run started.
    pub loadavg_start: String,
    /// Unix time (seconds) when the run started.
    pub started_unix: u64,
}

impl RunResult {
    /// Answers other than 200 (including connection errors).
    pub fn non_200_total(&self) -> u64 {
        self.non_200.values().sum()
    }

    /// Server CPU microseconds per 200 answer, when the server was sampled.
    pub fn server_cpu_us_per_req(&self) -> Option<f64> {
        let cpu = self.server_cpu_s?;
        (self.ok > 0).then(|| cpu * 1e6 / self.ok as f64)
    }

    /// Auxiliary (broker) CPU microseconds per 200 answer, when it was sampled.
    pub fn aux_cpu_us_per_req(&self) -> Option<f64> {
        let cpu = self.aux_cpu_s?;
        (self.ok > 0).then(|| cpu * 1e6 / self.ok as f64)
    }

    /// Server CPU per request, with the auxiliary process's in parentheses.
    pub fn cpu_text(&self) -> String {
        match (self.server_cpu_us_per_req(), self.aux_cpu_us_per_req()) {
            (Some(s), Some(a)) => format!("{s:.1} (+{a:.1} broker)"),
            (Some(s), None) => format!("{s:.1}"),
            _ => "-".into(),
        }
    }

    /// `status:count` pairs, or `0`.
    pub fn non_200_text(&self) -> String {
        if self.non_200.is_empty() {
            "0".into()
        } else {
            self.non_200
                .iter()
                .map(|(k, v)| format!("{k}:{v}"))
                .collect::<Vec<_>>()
                .join(" ")
        }
    }
}

/// The one-run summary table (plain text).
pub fn summary_table(runs: &[RunResult]) -> String {
    let mut out = format!(
        "{:<18} {:<5} {:>5} {:>10} {:>12} {:>11} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9}\n",
        "target",
        "mode",
        "conns",
        "requests",
        "non-200",
        "req/s",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "p99.9 ms",
        "max ms",
        "srv us/r"
    );
    for r in runs {
        let l = &r.latency_ms;
        out.push_str(&format!(
            "{:<18} {:<5} {:>5} {:>10} {:>12} {:>11.0} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>9}\n",
            r.name,
            r.mode,
            r.connections,
            r.requests,
            r.non_200_text(),
            r.throughput_rps,
            l.p50,
            l.p90,
            l.p99,
            l.p999,
            l.max,
            r.server_cpu_us_per_req()
                .map_or_else(|| "-".into(), |v| format!("{v:.1}")),
        ));
    }
    out
}

/// Names of the two baselines in a comparison.
#[derive(Debug, Clone)]
pub struct Baselines {
    /// The nginx `empty_gif` target.
    pub nginx: String,
    /// The bare hyper target.
    pub bare: String,
}

/// Targets an edge must meet.
#[derive(Debug, Clone, Copy)]
pub struct Goals {
    /// Least throughput as a fraction of nginx's.
    pub vs_nginx: f64,
    /// Least throughput as a fraction of bare hyper's.
    pub vs_bare: f64,
    /// Largest p99 in milliseconds in the open-loop run.
    pub p99_ms: f64,
}

impl Default for Goals {
    fn default() -> Self {
        Self {
            vs_nginx: 1.0,
            vs_bare: 0.5,
            p99_ms: 10.0,
        }
    }
}

/// A target's max run and open-loop run.
#[derive(Debug, Clone, Serialize)]
pub struct TargetSummary {
    /// Target name.
    pub name: String,
    /// The closed-loop run.
    pub max: Option<RunResult>,
    /// The open-loop run.
    pub rate: Option<RunResult>,
}

/// An edge measured against the baselines.
#[derive(Debug, Clone, Serialize)]
pub struct Ratio {
    /// Edge target name.
    pub name: String,
    /// Edge max throughput / nginx max throughput.
    pub vs_nginx: Option<f64>,
    /// Edge max throughput / bare hyper max throughput.
    pub vs_bare: Option<f64>,
    /// p99 (ms) of the edge's open-loop run.
    pub p99_ms_open_loop: Option<f64>,
    /// Requests per server CPU-second, edge / nginx (closed-loop runs): the
    /// throughput ratio were both CPU-bound on dedicated cores.
    pub cpu_vs_nginx: Option<f64>,
    /// Requests per server CPU-second, edge / bare hyper.
    pub cpu_vs_bare: Option<f64>,
    /// Every goal met (missing data counts as missed).
    pub meets_goals: bool,
}

/// The whole comparison.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    /// Per target, in the order first seen.
    pub targets: Vec<TargetSummary>,
    /// Per edge target.
    pub ratios: Vec<Ratio>,
}

/// Groups runs by target and computes the ratios of every non-baseline target.
pub fn compare(runs: &[RunResult], base: &Baselines, goals: Goals) -> Comparison {
    let mut targets: Vec<TargetSummary> = Vec::new();
    for r in runs {
        let i = match targets.iter().position(|t| t.name == r.name) {
            Some(i) => i,
            None => {
                targets.push(TargetSummary {
                    name: r.name.clone(),
                    max: None,
                    rate: None,
                });
                targets.len() - 1
            }
        };
        if r.mode == "rate" {
            targets[i].rate = Some(r.clone());
        } else {
            targets[i].max = Some(r.clone());
        }
    }
    let max_of = |name: &str| {
        targets
            .iter()
            .find(|t| t.name == name)
            .and_then(|t| t.max.as_ref())
            .map(|m| m.throughput_rps)
            .filter(|v| *v > 0.0)
    };
    let (nginx, bare) = (max_of(&base.nginx), max_of(&base.bare));
    let cpu_of = |name: &str| {
        targets
            .iter()
            .find(|t| t.name == name)
            .and_then(|t| t.max.as_ref())
            .and_then(RunResult::server_cpu_us_per_req)
            .filter(|v| *v > 0.0)
    };
    let (nginx_cpu, bare_cpu) = (cpu_of(&base.nginx), cpu_of(&base.bare));
    let ratios = targets
        .iter()
        .filter(|t| t.name != base.nginx && t.name != base.bare)
        .map(|t| {
            let own = t.max.as_ref().map(|m| m.throughput_rps);
            let vs_nginx = own.zip(nginx).map(|(a, b)| a / b);
            let vs_bare = own.zip(bare).map(|(a, b)| a / b);
            let p99 = t.rate.as_ref().map(|r| r.latency_ms.p99);
            let own_cpu = cpu_of(&t.name);
            let meets_goals = vs_nginx.is_some_and(|v| v >= goals.vs_nginx)
                && vs_bare.is_some_and(|v| v >= goals.vs_bare)
                && p99.is_some_and(|p| p < goals.p99_ms);
            Ratio {
                name: t.name.clone(),
                vs_nginx,
                vs_bare,
                p99_ms_open_loop: p99,
                cpu_vs_nginx: own_cpu.zip(nginx_cpu).map(|(a, b)| b / a),
                cpu_vs_bare: own_cpu.zip(bare_cpu).map(|(a, b)| b / a),
                meets_goals,
            }
        })
        .collect();
    Comparison { targets, ratios }
}

fn cell(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.digits$}"))
}

fn mark(ok: bool) -> &'static str {
    if ok {
        "yes"
    } else {
        "**no**"
    }
}

/// The comparison as Markdown tables (readable as plain text too).
pub fn markdown(c: &Comparison, goals: Goals) -> String {
    let mut out = String::from(
        "| target | max req/s | non-200 (max) | p50 ms @max | p99 ms @max | srv CPU us/req | open-loop req/s | non-200 (open) | p50 ms | p90 ms | p99 ms | p99.9 ms | max ms | service p99 ms |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for t in &c.targets {
        let m = t.max.as_ref();
        let r = t.rate.as_ref();
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            t.name,
            cell(m.map(|m| m.throughput_rps), 0),
            m.map_or_else(|| "-".into(), RunResult::non_200_text),
            cell(m.map(|m| m.latency_ms.p50), 3),
            cell(m.map(|m| m.latency_ms.p99), 3),
            m.map_or_else(|| "-".into(), RunResult::cpu_text),
            match r {
                Some(r) => format!(
                    "{:.0} (of {:.0})",
                    r.throughput_rps,
                    r.target_rate.unwrap_or(0.0)
                ),
                None => "-".into(),
            },
            r.map_or_else(|| "-".into(), RunResult::non_200_text),
            cell(r.map(|r| r.latency_ms.p50), 3),
            cell(r.map(|r| r.latency_ms.p90), 3),
            cell(r.map(|r| r.latency_ms.p99), 3),
            cell(r.map(|r| r.latency_ms.p999), 3),
            cell(r.map(|r| r.latency_ms.max), 3),
            cell(
                r.and_then(|r| r.service_latency_ms.as_ref()).map(|l| l.p99),
                3
            ),
        ));
    }
    out.push_str(&format!(
        "\n| edge | vs nginx (goal >= {:.1}x) | vs bare hyper (goal >= {:.1}x) | open-loop p99 ms (goal < {}) | all goals met | req per CPU-s vs nginx | vs bare hyper |\n\
         |---|---:|---:|---:|---|---:|---:|\n",
        goals.vs_nginx, goals.vs_bare, goals.p99_ms
    ));
    for r in &c.ratios {
        out.push_str(&format!(
            "| {} | {} {} | {} {} | {} {} | {} | {} | {} |\n",
            r.name,
            cell(r.vs_nginx, 2),
            mark(r.vs_nginx.is_some_and(|v| v >= goals.vs_nginx)),
            cell(r.vs_bare, 2),
            mark(r.vs_bare.is_some_and(|v| v >= goals.vs_bare)),
            cell(r.p99_ms_open_loop, 3),
            mark(r.p99_ms_open_loop.is_some_and(|p| p < goals.p99_ms)),
            mark(r.meets_goals),
            cell(r.cpu_vs_nginx, 2),
            cell(r.cpu_vs_bare, 2),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(name: &str, mode: &str, rps: f64, p99: f64) -> RunResult {
        RunResult {
            name: name.into(),
            mode: mode.into(),
            url: String::new(),
            url_kind: "beacon".into(),
            connections: 64,
            threads: 1,
            warmup_s: 0.0,
            duration_s: 1.0,
            target_rate: (mode == "rate").then_some(rps),
            requests: rps as u64,
            ok: rps as u64,
            non_200: BTreeMap::new(),
            throughput_rps: rps,
            latency_ms: Latency {
                p99,
                ..Latency::default()
            },
            service_latency_ms: None,
            server_cpu_s: Some(1.0),
            aux_cpu_s: None,
            loadgen_cpu_s: None,
            loadavg_start: String::new(),
            started_unix: 0,
        }
    }

    #[test]
    fn ratios_and_goals() {
        let runs = [
            run("edge", "max", 50.0, 3.0),
            run("edge", "rate", 25.0, 4.0),
            run("nginx-empty-gif", "max", 40.0, 1.0),
            run("bare-hyper", "max", 120.0, 1.0),
        ];
        let base = Baselines {
            nginx: "nginx-empty-gif".into(),
            bare: "bare-hyper".into(),
        };
        let c = compare(&runs, &base, Goals::default());
        assert_eq!(c.targets.len(), 3);
        assert_eq!(c.ratios.len(), 1);
        let r = &c.ratios[0];
        assert_eq!(r.vs_nginx, Some(1.25));
        assert!(r.vs_bare.is_some_and(|v| (v - 50.0 / 120.0).abs() < 1e-9));
        assert!(!r.meets_goals, "0.42x bare hyper misses 0.5x");
        let md = markdown(&c, Goals::default());
        assert!(md.contains("| edge | 1.25 yes | 0.42 **no** | 4.000 yes | **no** | 1.25 | 0.42 |"));
        assert!(summary_table(&runs).contains("nginx-empty-gif"));
    }
}
