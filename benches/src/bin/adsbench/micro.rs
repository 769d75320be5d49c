//! `adsbench micro`: where the time of one generate request goes, in process and
//! single-threaded (no HTTP, no other load): the generated catalog and campaigns
//! are indexed in memory exactly as the api does (`ProductIndex::build`,
//! `AdsIndex::build`), then the same request bodies `run` sends are timed phase by
//! phase: JSON parse + validation, decisioning (`AdsIndex::decide`), the answer
//! (`response::build`: ad id minting, URLs, VAST), and its serialisation. Quantiles
//! per phase, and decisioning by kind of request (filter groups and mode).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;

use chrono::Utc;
use rm_ads::index::{AdsIndex, ProductIndex};
use rm_ads::request::FilterMode;
use rm_ads::{response, AdsRequest, Serving};
use rm_benches::hist::Histogram;
use rm_schemas::ad_id::AdIdKeys;

use super::bodies;
use super::gen::{self, Shape};

/// Builds the index for `shape` with `campaigns`, then times `requests` requests.
pub fn run(shape: &Shape, campaigns: u64, requests: usize, seed: u64) -> anyhow::Result<()> {
    let t = Instant::now();
    let products = ProductIndex::build((0..shape.products).map(|i| gen::product(shape, i)));
    let cs: Vec<_> = (0..campaigns).map(|j| gen::campaign(shape, j)).collect();
    let ix = AdsIndex::build(Arc::new(products), &cs, &HashMap::new(), Utc::now());
    println!(
        "index: {} products, {} campaign entries, built in {:.1} s",
        ix.products().len(),
        ix.campaign_entries(),
        t.elapsed().as_secs_f64()
    );
    let serving = Serving {
        keys: AdIdKeys::from_list(&AdIdKeys::generate_key())?,
        beacon_base: "http://127.0.0.1:8080".into(),
        ad_ttl_secs: 3600,
    };
    let pool = bodies::pool(requests, seed, 1, &shape.catalog);
    let phases = [
        "parse+validate",
        "decide",
        "build answer",
        "serialise",
        "total",
    ];
    let mut hist: Vec<Histogram> = phases.iter().map(|_| Histogram::new()).collect();
    let mut by_kind: BTreeMap<String, Histogram> = BTreeMap::new();
    let mut body = Vec::new();
    let mut bytes = 0usize;
    for (seq, tpl) in pool.iter().enumerate() {
        body.clear();
        tpl.body(seq as u64, &mut body);
        let t0 = Instant::now();
        let req: AdsRequest = serde_json::from_slice(&body)?;
        let d = req
            .validate()
            .map_err(|e| anyhow::anyhow!("request {seq}: {e:?}"))?;
        let t1 = Instant::now();
        let (ads, banners) = ix.decide_in(super::gen::NAMESPACE, &d);
        let t2 = Instant::now();
        let out = response::build(&serving, &d, &ads, &banners)
            .map_err(|e| anyhow::anyhow!("request {seq}: {e:?}"))?;
        let t3 = Instant::now();
        let json = serde_json::to_vec(&out)?;
        let t4 = Instant::now();
        bytes += json.len();
        for (h, (a, b)) in hist
            .iter_mut()
            .zip([(t0, t1), (t1, t2), (t2, t3), (t3, t4), (t0, t4)])
        {
            h.record((b - a).as_nanos() as u64);
        }
        let mode = match d.mode {
            FilterMode::OrAnd => "OrAnd",
            FilterMode::AndOr => "AndOr",
        };
        let kind = match d.filters.len() {
            0 => "no filter".to_owned(),
            n => format!("{n} group(s), {mode}"),
        };
        by_kind
            .entry(kind)
            .or_default()
            .record((t2 - t1).as_nanos() as u64);
    }
    let us = |ns: u64| ns as f64 / 1e3;
    println!(
        "{} requests, mean answer {} bytes",
        pool.len(),
        bytes / pool.len().max(1)
    );
    println!("| phase | mean us | p50 us | p99 us | max us |\n|---|---:|---:|---:|---:|");
    for (name, h) in phases.iter().zip(&hist) {
        println!(
            "| {name} | {:.0} | {:.0} | {:.0} | {:.0} |",
            h.mean() / 1e3,
            us(h.quantile(0.5)),
            us(h.quantile(0.99)),
            us(h.max())
        );
    }
    println!(
        "\n| decide, by request | share | mean us | p50 us | p99 us |\n|---|---:|---:|---:|---:|"
    );
    for (kind, h) in &by_kind {
        println!(
            "| {kind} | {:.0}% | {:.0} | {:.0} | {:.0} |",
            h.count() as f64 * 100.0 / pool.len().max(1) as f64,
            h.mean() / 1e3,
            us(h.quantile(0.5)),
            us(h.quantile(0.99))
        );
    }
    Ok(())
}
