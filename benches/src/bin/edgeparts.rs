//! The edge's work per beacon, part by part, before and after issue 17's levers, in
//! one process on one thread: parsing and validation (`parse_beacon`, unchanged),
//! the dedup key (the `format!` canonical form it had against the in-place form
//! hashed from a reused buffer), the record's JSON (`serde_json` against the
//! hand-written encoder of the same bytes), and the inspector (every event kept,
//! against the bounded admission of new tracking ids). The beacons are distinct, as
//! `loadgen` sends them (every one a new session: the inspector's worst case).
//!
//! `cargo run --release -p rm-benches --bin edgeparts` (`--beacons 20000 --runs 7`);
//! pin it (`taskset -c 1`) for steadier figures. Prints median ns per beacon.

use std::hint::black_box;
use std::time::Instant;

use clap::Parser;
use rm_ingest::inspector::{admits_query, params_of, samples_query, Inspector, Recorded, Sampling};
use rm_schemas::dedup_key::DedupKey;
use rm_schemas::inspect::{Endpoint, Outcome};
use rm_schemas::{parse_beacon, EventRecord, InteractionEvent, InteractionType};

/// The allocator `retail-media` itself uses (see `src/main.rs`).
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Settings.
#[derive(Debug, Parser)]
struct Args {
    /// Distinct beacons per run.
    #[arg(long, default_value_t = 20_000)]
    beacons: usize,
    /// Runs (the table gives medians).
    #[arg(long, default_value_t = 7)]
    runs: usize,
}

fn queries(n: usize) -> Vec<String> {
    let ad = "rm1.camp-17.YmFubmVy.1795341600.AAAAAAAAAAAAAAAA.c2lnbmF0dXJlLW9mLXRoZS1hZA";
    (0..n)
        .map(|i| {
            let base = format!(
                "adId={ad}&timestamp=2026-11-24T10%3A15%3A{:02}.{:03}%2B01%3A00&sessionId=s-{i:08}-3f2a9c",
                i % 60,
                i % 1000
            );
            match i % 5 {
                0..=2 => format!("{base}&interactionType=videoPlay&videoId=v-{}&cb={i}", i % 97),
                3 => format!(
                    "{base}&interactionType=productImpression&productCode=p-{}&catalogId=cat-1&customerId=c-{}",
                    i % 1000,
                    i % 5000
                ),
                _ => format!(
                    "{base}&interactionType=cart&productCode=p-{}&catalogId=cat-1&units={}&conversionValue={}.99",
                    i % 1000,
                    i % 7,
                    i % 50
                ),
            }
        })
        .collect()
}

/// The canonical form as it was built before (one `format!` per field).
fn old_key(e: &InteractionEvent) -> DedupKey {
    use std::fmt::Write as _;
    fn field(out: &mut String, name: &str, value: &str) {
        let _ = write!(out, "{name}:{}:{value};", value.len());
    }
    let mut out = String::with_capacity(192);
    out.push_str("v1;");
    field(&mut out, "interactionType", e.interaction_type.as_str());
    field(&mut out, "adId", &e.ad_id);
    if e.interaction_type != InteractionType::AdImpression {
        let nanos = e.timestamp.timestamp() as i128 * 1_000_000_000
            + i128::from(e.timestamp.timestamp_subsec_nanos());
        field(&mut out, "timestamp", &nanos.to_string());
    }
    for (name, value) in [
        ("sessionId", &e.session_id),
        ("customerId", &e.customer_id),
        ("dtmToken", &e.dtm_token),
        ("videoId", &e.video_id),
        ("productCode", &e.product_code),
        ("catalogId", &e.catalog_id),
        ("creativeId", &e.creative_id),
    ] {
        if let Some(v) = value {
            field(&mut out, name, v);
        }
    }
    if let Some(u) = e.units {
        field(&mut out, "units", &u.to_string());
    }
    if let Some(v) = e.conversion_value {
        let v = if v == 0.0 { 0.0 } else { v };
        field(&mut out, "conversionValue", &v.to_string());
    }
    DedupKey(xxhash_rust::xxh3::xxh3_128(out.as_bytes()))
}

fn time(runs: usize, n: usize, mut f: impl FnMut()) -> f64 {
    let mut per: Vec<f64> = (0..runs)
        .map(|_| {
            let started = Instant::now();
            f();
            started.elapsed().as_nanos() as f64 / n as f64
        })
        .collect();
    per.sort_by(f64::total_cmp);
    per[per.len() / 2]
}

fn main() {
    let args = Args::parse();
    let qs = queries(args.beacons);
    let events: Vec<InteractionEvent> = qs
        .iter()
        .map(|q| parse_beacon(q).expect("valid beacon"))
        .collect();
    let records: Vec<EventRecord> = events
        .iter()
        .map(|e| EventRecord::new(e.clone(), uuid::Uuid::now_v7(), chrono::Utc::now()))
        .collect();
    for (e, r) in events.iter().zip(&records) {
        assert_eq!(old_key(e), DedupKey::of(e));
        assert_eq!(serde_json::to_vec(r).expect("json"), r.to_bytes());
    }
    let (n, runs) = (qs.len(), args.runs);
    let mut rows: Vec<(&str, f64, f64)> = Vec::new();
    let parse = time(runs, n, || {
        for q in &qs {
            black_box(parse_beacon(black_box(q)).ok());
        }
    });
    rows.push(("parse + validate (unchanged)", parse, parse));
    rows.push((
        "dedup key",
        time(runs, n, || {
            events.iter().for_each(|e| {
                black_box(old_key(black_box(e)));
            })
        }),
        time(runs, n, || {
            events.iter().for_each(|e| {
                black_box(DedupKey::of(black_box(e)));
            })
        }),
    ));
    rows.push((
        "record JSON",
        time(runs, n, || {
            records.iter().for_each(|r| {
                black_box(serde_json::to_vec(black_box(r)).ok());
            })
        }),
        time(runs, n, || {
            records.iter().for_each(|r| {
                black_box(black_box(r).to_bytes());
            })
        }),
    ));
    let observe = |i: &Inspector, admit: bool, k: usize| {
        for (j, q) in qs.iter().enumerate() {
            let keep = if admit {
                admits_query(i, q)
            } else {
                samples_query(i, q)
            };
            if keep {
                i.record(Recorded {
                    received_at_ms: (k * n + j) as i64,
                    endpoint: Endpoint::Interaction,
                    params: params_of(q),
                    outcome: Outcome::Accepted,
                    message: None,
                    ad_id_verdict: None,
                });
            }
        }
    };
    // A full inspector (32 MiB, as the edge's default) before timing: the steady state.
    let before = Inspector::new(Sampling::On, 200, 32 << 20);
    let after = Inspector::new(Sampling::On, 200, 32 << 20);
    after.set_new_ids_per_sec(1000);
    for k in 0..5 {
        observe(&before, false, k);
    }
    let mut k = 10;
    let old = time(runs, n, || {
        k += 1;
        observe(&before, false, k)
    });
    let new = time(runs, n, || {
        k += 1;
        observe(&after, true, k)
    });
    rows.push(("inspector (on, every beacon a new session)", old, new));
    println!("| part | before ns/beacon | after ns/beacon |");
    println!("|---|---:|---:|");
    for (name, b, a) in &rows {
        println!("| {name} | {b:.0} | {a:.0} |");
    }
    let (tb, ta) = rows
        .iter()
        .skip(1)
        .fold((0.0, 0.0), |(x, y), (_, b, a)| (x + b, y + a));
    println!("| levers' parts together | {tb:.0} | {ta:.0} |");
}
