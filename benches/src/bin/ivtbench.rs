//! Invalid-traffic classification benchmark: CPU per beacon of what the edge does on
//! every beacon, impression and click request before validation's result is written:
//! reading the six headers from the request's `HeaderMap` (as
//! `rm_ingest::traffic::of` does) and classifying them
//! (`rm_schemas::agent::classify`).
//!
//! The mix is a day of traffic as an edge sees it: mostly browsers and in-app players,
//! then server-side insertion (a server's agent with the device's in
//! `X-Device-User-Agent`), crawlers and headless browsers, prefetches, and HTTP
//! libraries or no agent at all. Each run classifies the whole shuffled mix
//! `--passes` times; the table gives the median, min and max of `--runs` runs in ns
//! per classification, for the mix and for each kind alone.
//!
//! `cargo run --release -p rm-benches --bin ivtbench` (defaults: 7 runs, 100 passes
//! over 10,000 requests).

use std::hint::black_box;
use std::time::Instant;

use clap::Parser;
use http::header::{HeaderMap, HeaderName, HeaderValue};
use rm_schemas::agent::{AgentClass, Traffic};

/// The allocator `retail-media` itself uses (see `src/main.rs`).
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Settings.
#[derive(Debug, Parser)]
struct Args {
    /// Requests in the mix.
    #[arg(long, default_value_t = 10_000)]
    requests: usize,
    /// Passes over the mix per run.
    #[arg(long, default_value_t = 100)]
    passes: usize,
    /// Runs (the table gives medians).
    #[arg(long, default_value_t = 7)]
    runs: usize,
}

const BROWSERS: &[&str] = &[
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1",
    "Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36",
    "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.0.0",
    "Mozilla/5.0 (Linux; Android 14; SM-S918B) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/25.0 Chrome/121.0.0.0 Mobile Safari/537.36",
    "AppleCoreMedia/1.0.0.21F79 (iPhone; U; CPU OS 17_5 like Mac OS X; en_us)",
];

const BOTS: &[&str] = &[
    "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
    "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; Googlebot/2.1; +http://www.google.com/bot.html) Chrome/131.0.6778.204 Safari/537.36",
    "Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)",
    "Mozilla/5.0 (compatible; AhrefsBot/7.0; +http://ahrefs.com/robot/)",
    "Mozilla/5.0 (compatible; YandexBot/3.0; +http://yandex.com/bots)",
    "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)",
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/131.0.0.0 Safari/537.36",
    "facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)",
];

const NON_BROWSERS: &[Option<&str>] = &[
    Some("curl/8.5.0"),
    Some("python-requests/2.32.3"),
    Some("Go-http-client/1.1"),
    Some("okhttp/4.12.0"),
    None,
];

/// A kind of request in the mix, and its share in percent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Browser,
    ServerSide,
    Bot,
    Prefetch,
    NonBrowser,
}

const MIX: [(Kind, u32); 5] = [
    (Kind::Browser, 80),
    (Kind::ServerSide, 6),
    (Kind::Bot, 6),
    (Kind::Prefetch, 4),
    (Kind::NonBrowser, 4),
];

/// A deterministic xorshift, so every run classifies the same mix.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[(self.next() % xs.len() as u64) as usize]
    }
}

fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert("host", HeaderValue::from_static("edge.example"));
    h.insert(
        "accept",
        HeaderValue::from_static("image/avif,image/webp,*/*"),
    );
    h.insert(
        "referer",
        HeaderValue::from_static("https://shop.example/p/123"),
    );
    for (k, v) in pairs {
        if let Ok(v) = HeaderValue::from_str(v) {
            h.insert(HeaderName::from_static(k), v);
        }
    }
    h
}

fn request(kind: Kind, rng: &mut Rng) -> HeaderMap {
    match kind {
        Kind::Browser => headers(&[("user-agent", rng.pick(BROWSERS))]),
        Kind::ServerSide => headers(&[
            ("user-agent", "Go-http-client/1.1"),
            ("x-device-user-agent", rng.pick(BROWSERS)),
        ]),
        Kind::Bot => headers(&[("user-agent", rng.pick(BOTS))]),
        Kind::Prefetch => headers(&[
            ("user-agent", rng.pick(BROWSERS)),
            ("sec-purpose", "prefetch;prerender"),
        ]),
        Kind::NonBrowser => match rng.pick(NON_BROWSERS) {
            Some(ua) => headers(&[("user-agent", ua)]),
            None => headers(&[]),
        },
    }
}

/// What the edge does per request: its own header reading and classification.
fn traffic_of(headers: &HeaderMap) -> Traffic {
    rm_ingest::traffic::of(headers)
}

/// Median, min and max of the runs, in ns per classification.
fn measure(requests: &[HeaderMap], passes: usize, runs: usize) -> (f64, f64, f64) {
    let mut ns: Vec<f64> = (0..runs.max(1))
        .map(|_| {
            let started = Instant::now();
            for _ in 0..passes {
                for r in requests {
                    black_box(traffic_of(black_box(r)));
                }
            }
            started.elapsed().as_nanos() as f64 / (passes * requests.len()).max(1) as f64
        })
        .collect();
    ns.sort_by(f64::total_cmp);
    (ns[ns.len() / 2], ns[0], ns[ns.len() - 1])
}

fn main() {
    let args = Args::parse();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let total: u32 = MIX.iter().map(|(_, w)| w).sum();
    let mix: Vec<(Kind, HeaderMap)> = (0..args.requests)
        .map(|_| {
            let mut roll = (rng.next() % u64::from(total)) as u32;
            let kind = MIX
                .iter()
                .find(|(_, w)| {
                    let hit = roll < *w;
                    roll = roll.saturating_sub(*w);
                    hit
                })
                .map_or(Kind::Browser, |(k, _)| *k);
            (kind, request(kind, &mut rng))
        })
        .collect();
    // Compiles the bot patterns, and checks the mix is classified as meant.
    let started = Instant::now();
    rm_schemas::agent::warm();
    let warm_ms = started.elapsed().as_secs_f64() * 1e3;
    for (kind, h) in &mix {
        let t = traffic_of(h);
        let ok = match kind {
            Kind::Browser => t == Traffic::BROWSER,
            Kind::ServerSide => t.agent == AgentClass::Browser && t.server_side,
            Kind::Bot => t.agent == AgentClass::KnownBot,
            Kind::Prefetch => t.agent == AgentClass::Browser && t.prefetch,
            Kind::NonBrowser => matches!(t.agent, AgentClass::NonBrowser | AgentClass::Missing),
        };
        assert!(ok, "{kind:?} classified {t:?}: {h:?}");
    }
    println!(
        "invalid-traffic classification: {} requests x {} passes, {} runs; \
         bot patterns compiled in {warm_ms:.1} ms",
        args.requests, args.passes, args.runs
    );
    println!("| requests | share | median ns | min ns | max ns |");
    println!("|---|---:|---:|---:|---:|");
    let all: Vec<HeaderMap> = mix.iter().map(|(_, h)| h.clone()).collect();
    let (med, min, max) = measure(&all, args.passes, args.runs);
    println!("| mix | 100% | {med:.0} | {min:.0} | {max:.0} |");
    for (kind, share) in MIX {
        let only: Vec<HeaderMap> = mix
            .iter()
            .filter(|(k, _)| *k == kind)
            .map(|(_, h)| h.clone())
            .collect();
        // The same number of classifications per run as the mix.
        let passes = args.passes * args.requests / only.len().max(1);
        let (med, min, max) = measure(&only, passes, args.runs);
        println!("| {kind:?} | {share}% | {med:.0} | {min:.0} | {max:.0} |");
    }
}
