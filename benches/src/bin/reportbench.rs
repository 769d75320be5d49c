//! Report benchmark (issue 26, "Benchmarks"): what each report costs as the events
//! behind the same answer grow tenfold (or `--scale` times). Two stores are filled
//! the way the aggregator fills them (records folded with their log positions,
//! touched entities and tallies loaded from the store, batches written): one with
//! `--sessions` shopper sessions and one with ten times as many (`--scale`), over the
//! same campaigns, products and days (so every
//! report groups into the same number of campaign-days, and grows only in the rows
//! keyed by the served ad). Then every report of a 30-day range is read from both,
//! alternating, through the store's read side (`ReportStore`, what the api calls;
//! JSON or CSV formatting not included). The table gives medians, the rows of each
//! answer and the large/small ratio; a report that costs what its answer costs has a
//! ratio near 1.
//!
//! A session: one shopper, one video ad watched to the end (six milestones), a
//! product ad's impressions of ten products and a click on one, a banner's impression
//! and click, one cart add, and an order of one of four products (attributed as the
//! aggregator attributes orders as they arrive: folded after the events, offered
//! their shoppers' touches). Every served ad is its own realised ad id, minted as the
//! api mints them (naming its campaign and creative), as in production.
//!
//! The products and ads reports and the campaign summary are read as the api reads
//! them (from the rollups, `rm_store::sums`) and, for the baseline, from the stored
//! facts as every report was before (`(facts)`).
//!
//! Embedded store by default; ClickHouse when `RM_CLICKHOUSE_URL` is set (each store
//! in a database of its own, dropped at the end).
//! `cargo run --release -p rm-benches --bin reportbench -- --sessions 10000`.

use std::time::{Duration, Instant};

use clap::Parser;
use rm_aggregator::batch::Policy;
use rm_benches::stores::{median, BenchStore, Partitions};
use rm_schemas::{EventRecord, InteractionEvent, InteractionType as T};
use rm_store::model::attribution::Windows;
use rm_store::{AnyStore, ReportFilter, ReportStore, WriteStore};

/// The allocator `retail-media` itself uses (see `src/main.rs`).
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Settings.
#[derive(Debug, Parser)]
struct Args {
    /// Sessions in the small store (the large one holds `--scale` times as many).
    #[arg(long, default_value_t = 10_000)]
    sessions: usize,
    /// How many times the small store's sessions the large one holds (10M against
    /// 50M records: `--sessions 500000 --scale 5`).
    #[arg(long, default_value_t = 10)]
    scale: usize,
    /// Campaigns.
    #[arg(long, default_value_t = 21)]
    campaigns: usize,
    /// Products.
    #[arg(long, default_value_t = 200)]
    products: usize,
    /// Days the sessions are spread over (the reports read all of them).
    #[arg(long, default_value_t = 30)]
    days: usize,
    /// Timed reads of each report on each store.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Records per folded batch.
    #[arg(long, default_value_t = 50_000)]
    batch: usize,
    /// Fill through the aggregator's own loop (`rm_aggregator::pipeline`) from an
    /// embedded log: the records and orders appended as the edge and the api append
    /// them, the loop folding them with its caches and appending its offers, as a
    /// running aggregator does. The default folds each batch here, loading what it
    /// touches from the store (a restarted aggregator's every batch): on ClickHouse
    /// that fills ten million records in about 50 minutes, too slow for 100 million.
    #[arg(long)]
    pipeline: bool,
    /// After the timed reads, merge the rollups' versions (ClickHouse: `OPTIMIZE TABLE
    /// rollups FINAL`) and read every report again: what the reads cost once the
    /// background merges caught up.
    #[arg(long)]
    optimize: bool,
    /// After the timed reads, compact the closed hours' rollups (ClickHouse: their
    /// sums over the log partitions, as the aggregator does every
    /// `RM_AGGREGATOR_COMPACT_SECS`) and read every report again.
    #[arg(long)]
    compact: bool,
    /// Read as a tenant owning every campaign (the reads name the campaigns, as a
    /// tenant's do) instead of as an operator (every campaign, none named).
    #[arg(long)]
    as_tenant: bool,
    /// Keep the ClickHouse databases (`rm_reportbench_small_<pid>`, `..._large_<pid>`)
    /// for a look at their tables afterwards; drop them by hand.
    #[arg(long)]
    keep: bool,
    /// Read the ClickHouse databases the run of this process id kept (`--keep`, or
    /// left on a failure) instead of filling new ones; they are kept again.
    #[arg(long)]
    reuse: Option<u32>,
    /// Read only the reports the api serves (leave out the "(facts)" baselines, which
    /// take minutes each at ten million records).
    #[arg(long)]
    skip_facts: bool,
    /// Read only the reports whose name contains this (repeatable; a profile of one
    /// report's queries: `--only "Asia/Kolkata"`).
    #[arg(long)]
    only: Vec<String>,
    /// After the reports, erase this many shoppers from each store (spread over
    /// its sessions, `rm_store::EraseStore::erase`, as the aggregator runs an
    /// erasure) and report the median time of one and the rows it replaced.
    #[arg(long, default_value_t = 0)]
    erase: usize,
    /// After the reports (and erasures), time an ageing pass over each store
    /// (`rm_store::EraseStore::age`): a first one that ages every row, then a
    /// second that finds nothing left (a daily pass's cost lies between).
    #[arg(long)]
    age: bool,
    /// After the reports, time fact retention passes over each store
    /// (`rm_store::EraseStore::retire`): one with nothing due (a cut before the
    /// oldest day), one removing the oldest day (a daily pass's work), one removing
    /// the older half of the days, and that one again (nothing left); the campaign
    /// summary must answer the same after each.
    #[arg(long)]
    retire: bool,
    /// Skip the report tables (with `--erase`: time the erasures only).
    #[arg(long)]
    no_reports: bool,
    /// ClickHouse HTTP URL (the embedded store when unset).
    #[arg(long, env = "RM_CLICKHOUSE_URL")]
    clickhouse_url: Option<String>,
}

/// The key the bench's ad ids are minted with.
static KEYS: std::sync::LazyLock<rm_schemas::ad_id::AdIdKeys> = std::sync::LazyLock::new(|| {
    rm_schemas::ad_id::AdIdKeys::new(vec![b"reportbench-ad-id-key".to_vec()]).expect("a key")
});

/// When session `s` starts, with the fill begun at `now` (ms): on one of the `--days`
/// days up to today (today's sessions before `now`, as a live store holds them: the
/// part of the rollups a ClickHouse compaction leaves open), at a time of that day
/// drawn by a multiplicative hash of `s`, so the sessions of a day spread over all of
/// it and a small store has events in about every quarter hour a large one has: the
/// stores differ in the events behind each bucket, not in the buckets. (Before, the
/// sessions of a day came in clusters of a few minutes, over 22 of its hours: a
/// million records filled a third of the quarter hours, ten million nine tenths, and
/// a zoned report's growth between them was mostly buckets.) A session's events and
/// order end within [`SESSION_MS`] of its start, on its day.
fn session_start(s: usize, a: &Args, now: i64) -> i64 {
    use rm_store::model::DAY_MS as DAY;
    let today = now.div_euclid(DAY);
    let day = ((s / a.campaigns) % a.days) as i64;
    let span = if day == 0 {
        (now - today * DAY - 60_000).clamp(1, DAY - SESSION_MS)
    } else {
        DAY - SESSION_MS
    };
    let spread = (s as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 16;
    (today - day) * DAY + (spread % span as u64) as i64
}

/// How long after its start a session's last record (its order) is dated, at most.
const SESSION_MS: i64 = 11 * 60_000;

/// The events of session `s`, with the fill begun at `now` (ms).
fn session(s: usize, a: &Args, now: i64) -> Vec<InteractionEvent> {
    let campaign = s % a.campaigns;
    let base = session_start(s, a, now);
    let shopper = format!("shopper-{s}");
    let at = |ms: i64| {
        chrono::DateTime::from_timestamp_millis(base + ms)
            .expect("time")
            .fixed_offset()
    };
    let event = |kind: T, ad: String, ms: i64| InteractionEvent {
        session_id: Some(shopper.clone()),
        ..InteractionEvent::new(ad, kind, at(ms))
    };
    // Served ad ids as the api mints them: unique per served ad, naming their creative.
    let expiry = (base + 1_800_000) / 1000;
    let mint = |creative: &str| {
        KEYS.mint(&format!("camp-{campaign}"), creative, expiry)
            .expect("an id")
    };
    let video_ad = mint(&format!("video-{}", campaign % 3));
    let product_ad = mint("carousel");
    let banner = mint("banner");
    let product = |k: usize| format!("sku-{}", (s * 13 + k) % a.products);
    let mut out = Vec::with_capacity(22);
    for (i, kind) in rm_schemas::video_funnel::MILESTONES.iter().enumerate() {
        out.push(InteractionEvent {
            video_id: Some(format!("video-{}", campaign % 3)),
            ..event(*kind, video_ad.clone(), i as i64 * 1000)
        });
    }
    for k in 0..10 {
        out.push(InteractionEvent {
            catalog_id: Some("catalog".into()),
            product_code: Some(product(k)),
            ..event(T::ProductImpression, product_ad.clone(), 10_000 + k as i64)
        });
    }
    out.push(InteractionEvent {
        catalog_id: Some("catalog".into()),
        product_code: Some(product(3)),
        ..event(T::ProductClick, product_ad.clone(), 12_000)
    });
    out.push(event(T::AdImpression, banner.clone(), 13_000));
    out.push(event(T::AdClick, banner, 14_000));
    out.push(InteractionEvent {
        catalog_id: Some("catalog".into()),
        product_code: Some(product(3)),
        units: Some(1),
        conversion_value: Some(2.5),
        ..event(T::Cart, product_ad, 15_000)
    });
    out
}

/// The order of session `s`: one of four products, ten minutes after its events.
fn order_of(s: usize, a: &Args, now: i64) -> rm_aggregator::sales::OrderMsg {
    rm_aggregator::sales::OrderMsg::decode(order_json(s, a, now).as_bytes())
        .expect("an order record")
}

/// The order of session `s` as the api appends it to the orders topic.
fn order_json(s: usize, a: &Args, now: i64) -> String {
    let base = session_start(s, a, now);
    let at = chrono::DateTime::from_timestamp_millis(base + 600_000)
        .expect("time")
        .to_rfc3339();
    format!(
        r#"{{"v":1,"receivedAt":"{at}","id":"order-{s}","orderDate":"{at}","catalogId":"catalog","sessionId":"shopper-{s}","currency":"USD","orderItems":[{{"productCode":"sku-{}","quantity":1,"totalOrderItemPriceAfterDiscounts":19.99}}]}}"#,
        s % 4
    )
}

/// The policy the fill folds with: events up to `--days` old are on time.
fn policy(a: &Args) -> Policy {
    Policy {
        late_horizon_ms: (a.days as i64 + 2) * 86_400_000,
        ..Policy::default()
    }
}

/// The event record of `e`, received two seconds after it happened.
fn record_of(e: InteractionEvent) -> EventRecord {
    let received = e.timestamp.to_utc() + chrono::Duration::seconds(2);
    EventRecord::new(e, uuid::Uuid::now_v7(), received)
}

/// Fills `store` with `n` sessions as the aggregator would; returns the records.
async fn fill(store: &AnyStore, n: usize, a: &Args) -> anyhow::Result<(usize, Duration)> {
    let started = Instant::now();
    let now = chrono::Utc::now().timestamp_millis();
    let policy = policy(a);
    store.backfill_tallies().await?;
    store.backfill_sales(&policy.windows).await?;
    let mut log = Partitions::new(6);
    let mut orders_log = Partitions::new(6);
    let mut pending: Vec<EventRecord> = Vec::with_capacity(a.batch);
    let mut orders = Vec::new();
    let mut total = 0;
    for s in 0..n {
        pending.extend(session(s, a, now).into_iter().map(record_of));
        orders.push(order_of(s, a, now));
        if pending.len() >= a.batch || s + 1 == n {
            log.fold_into(store, &pending, &policy).await?;
            orders_log
                .fold_orders_into(store, std::mem::take(&mut orders), &policy.windows)
                .await?;
            total += pending.len();
            pending.clear();
        }
    }
    Ok((total, started.elapsed()))
}

/// Records the fill appends ahead of what the loop committed (`--pipeline`): the
/// log's retention removes what is committed, so the log's disk stays small.
const PIPELINE_AHEAD: u64 = 1_000_000;

/// Fills `store` with `n` sessions through the aggregator's loop (`--pipeline`): the
/// sessions' records and orders appended to an embedded log under `dir`, at most
/// [`PIPELINE_AHEAD`] records ahead of the loop, and the loop run until it committed
/// both topics to their ends (its offers to orders included). Returns the records.
async fn fill_through_pipeline(
    store: &AnyStore,
    n: usize,
    a: &Args,
    dir: &std::path::Path,
) -> anyhow::Result<(usize, Duration)> {
    use rm_aggregator::pipeline::{self, PipelineOptions};
    use rm_aggregator::source::{AnySource, EmbeddedSource};
    use rm_eventlog::embedded::EmbeddedLog;
    use rm_eventlog::{EmbeddedLogConfig, EventLog};
    use std::sync::Arc;
    let started = Instant::now();
    let now = chrono::Utc::now().timestamp_millis();
    let (events, orders, group) = ("interactions", "orders", "reportbench");
    let config = EmbeddedLogConfig {
        retention_bytes: 256 << 20,
        ..EmbeddedLogConfig::default()
    };
    let log = EmbeddedLog::open(&EmbeddedLogConfig::path(dir), &config)?;
    let source = EmbeddedSource::with_orders(log.clone(), group, events, orders)?;
    let opts = PipelineOptions {
        batch_max_records: pipeline::DEFAULT_BATCH_MAX_RECORDS,
        batch_max_wait: Duration::from_millis(pipeline::DEFAULT_BATCH_MAX_WAIT_MS),
        batch_linger: Duration::from_millis(pipeline::DEFAULT_BATCH_LINGER_MS),
        policy: policy(a),
        cache_max_entities: 1_000_000,
        // Kept while the fill lasts: a session's served ads are never forgotten.
        served_retention: Duration::from_secs((a.days as u64 + 2) * 86_400),
        erasures_every: Duration::from_secs(3_600),
        erasure_settle: Duration::from_secs(600),
        ageing: None,
        retention: None,
    };
    let stop = tokio_util::sync::CancellationToken::new();
    let progress = Arc::new(pipeline::Progress::default());
    let task = tokio::spawn(pipeline::run_with_progress(
        AnySource::Embedded(source),
        Arc::new(store.clone()),
        "bench",
        opts,
        stop.clone(),
        Arc::clone(&progress),
    ));
    let behind = |topic: &str| -> anyhow::Result<u64> {
        Ok(log
            .end_offset(topic)?
            .saturating_sub(log.committed(group, topic)?))
    };
    let mut total = 0;
    let mut next_report = Duration::from_secs(60);
    let mut pending = Vec::with_capacity(4096);
    // The sessions in the order they happened, as a live aggregator reads them (each
    // batch's tallies are of the quarter hours just before, which its cache holds),
    // and the same sessions, times and answers as the batches' fill.
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&s| session_start(s, a, now));
    for (i, s) in order.into_iter().enumerate() {
        let mut appends = session(s, a, now)
            .into_iter()
            .map(|e| (events, record_of(e).to_bytes()))
            .collect::<Vec<_>>();
        total += appends.len();
        appends.push((orders, order_json(s, a, now).into_bytes()));
        for (topic, bytes) in appends {
            let log = log.clone();
            let key = format!("shopper-{s}");
            pending.push(tokio::spawn(async move {
                log.append(topic, key.as_bytes(), bytes).await
            }));
        }
        if pending.len() >= 4096 || i + 1 == n {
            for p in pending.drain(..) {
                p.await??;
            }
            if started.elapsed() >= next_report {
                next_report += Duration::from_secs(60);
                eprintln!(
                    "reportbench: {:.0?}: {} of {n} sessions appended ({total} records), {} records stored",
                    started.elapsed(),
                    i + 1,
                    progress.records()
                );
            }
            while behind(events)? > PIPELINE_AHEAD {
                anyhow::ensure!(!task.is_finished(), "the aggregator's loop stopped");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    while behind(events)? > 0 || behind(orders)? > 0 {
        anyhow::ensure!(!task.is_finished(), "the aggregator's loop stopped");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.cancel();
    task.await??;
    let took = started.elapsed();
    let busy = |s| progress.busy(s).as_secs_f64() / took.as_secs_f64() * 100.0;
    eprintln!(
        "reportbench: the loop stored {} records (events, orders and offers); stages busy: read {:.0} %, fold {:.0} %, write {:.0} %",
        progress.records(),
        busy(pipeline::Stage::Read),
        busy(pipeline::Stage::Fold),
        busy(pipeline::Stage::Write)
    );
    Ok((total, took))
}

/// The reports, by name: each read once, (ms, rows). "(facts)": the same report
/// counted from the stored facts, as every report was before the rollups (the
/// products and ads rows then per served ad id); the others are what the api serves.
const REPORTS: [&str; 23] = [
    "campaigns",
    "campaigns, Asia/Kolkata",
    "campaigns, Asia/Kolkata, by hour",
    "campaigns (facts)",
    "products",
    "products, first page",
    "products, page at camp-5",
    "products, Asia/Kolkata",
    "products, Asia/Kolkata, every quarter",
    "products (facts)",
    "ads",
    "ads (facts)",
    "video-funnel",
    "video-funnel, Asia/Kolkata",
    "video-funnel, Asia/Kolkata, by hour",
    "video-funnel (facts)",
    "carts",
    "carts, first page",
    "carts, page at camp-5",
    "carts/campaigns",
    "carts/campaigns (facts)",
    "sales",
    "sales (facts)",
];

/// Asia/Kolkata by day over `from..=to`, or by hour over its last 7 days.
fn kolkata(which: &str, from: i32, to: i32) -> rm_store::model::periods::Periods {
    use rm_store::model::periods::{zone, Granularity, Periods};
    let tz = zone("Asia/Kolkata").expect("a zone");
    if which.ends_with("by hour") {
        Periods::new(tz, Granularity::Hour, (to - 6).max(from), to)
    } else {
        Periods::new(tz, Granularity::Day, from, to)
    }
}

async fn read(
    store: &AnyStore,
    which: &str,
    f: &ReportFilter,
) -> anyhow::Result<(f64, usize, usize)> {
    use rm_store::model::periods::{zone, Granularity, Periods};
    use rm_store::sums;
    let w = Windows::default();
    let (from, to) = (f.from_day.unwrap_or(0), f.to_day.unwrap_or(0));
    let utc = Periods::utc_days(from, to);
    let t = Instant::now();
    // The time to the rows, then their JSON's size (what the api would send).
    let sized = |rows: &dyn erased::Rows| {
        (
            t.elapsed().as_secs_f64() * 1e3,
            rows.count(),
            rows.json_bytes(),
        )
    };
    let (ms, rows, bytes) = match which {
        "campaigns" => sized(&sums::campaign_summary(store, f, &utc, |_| None).await?),
        "campaigns (facts)" => sized(&rm_store::campaign_report(store, f, &w, |_| None).await?),
        // By day over the range in a zone (whole UTC days and the quarters that leave
        // them); by hour over its last 7 days (every quarter hour).
        "campaigns, Asia/Kolkata" | "campaigns, Asia/Kolkata, by hour" => {
            let p = kolkata(which, from, to);
            sized(&sums::campaign_summary(store, f, &p, |_| None).await?)
        }
        "video-funnel, Asia/Kolkata" | "video-funnel, Asia/Kolkata, by hour" => {
            let p = kolkata(which, from, to);
            sized(&sums::funnel_report(store, f, &p).await?)
        }
        "products" => sized(&sums::product_report(store, f, &utc).await?),
        // A page of 1,000 rows by key (the api's default), from the first place or
        // from a campaign in the middle of the report.
        "products, first page" | "products, page at camp-5" => {
            let mut cursor = rm_store::model::tallies::page::PageCursor::default();
            if which.ends_with("camp-5") {
                cursor.place.campaign_id = "camp-5".into();
            }
            let at = sums::PageAt {
                cursor: &cursor,
                size: 1_000,
            };
            sized(&sums::product_page(store, f, &utc, Some(at)).await?.rows)
        }
        "products, Asia/Kolkata" => {
            let tz = zone("Asia/Kolkata").expect("a zone");
            let p = Periods::new(tz, Granularity::Day, from, to);
            sized(&sums::product_report(store, f, &p).await?)
        }
        // The baseline of the line above: every quarter hour of the range summed, as
        // a report in a zone read before the mixed plan.
        "products, Asia/Kolkata, every quarter" => {
            let tz = zone("Asia/Kolkata").expect("a zone");
            let p = Periods::new(tz, Granularity::Day, from, to);
            let (grain, a, b) = p.plan();
            let q = rm_store::model::tallies::TallyQuery {
                campaigns: f
                    .tenant
                    .as_ref()
                    .map(|t| t.campaigns.iter().cloned().collect()),
                scope: rm_store::model::tallies::Scope::Product,
                grain,
                from: a,
                to: b,
                kinds: vec![
                    rm_store::model::tallies::Kind::ProductImpression,
                    rm_store::model::tallies::Kind::ProductClick,
                ],
                catalog_id: None,
                page: None,
                only: Vec::new(),
                group: rm_store::model::tallies::Group::Each,
            };
            let summed = store.tallies(&q).await?.unwrap_or_default();
            sized(&rm_store::model::rollup::product_rows(&summed, &p))
        }
        "products (facts)" => sized(&store.products(f).await?),
        "ads" => sized(&sums::ad_report(store, f, &utc).await?),
        "ads (facts)" => sized(&store.ads(f).await?),
        "video-funnel" => sized(&sums::funnel_report(store, f, &utc).await?),
        "video-funnel (facts)" => sized(&store.funnel(f).await?),
        "carts" => sized(&store.carts(f).await?),
        "carts, first page" | "carts, page at camp-5" => {
            let from =
                which
                    .ends_with("camp-5")
                    .then(|| rm_store::model::carts::lines::LinePlace {
                        campaign_id: "camp-5".into(),
                        day: i32::MIN,
                        tracking_id: String::new(),
                        catalog_id: String::new(),
                        product_code: String::new(),
                    });
            sized(
                &sums::cart_page(store, f, from.as_ref(), Some(1_000))
                    .await?
                    .0,
            )
        }
        "carts/campaigns" => sized(&sums::cart_campaign_report(store, f).await?),
        "carts/campaigns (facts)" => sized(&store.cart_campaigns(f).await?),
        "sales" => sized(&sums::sales_report(store, f, &w).await?),
        _ => sized(&store.sales(f, &w).await?),
    };
    Ok((ms, rows, bytes))
}

/// Rows of any report, counted and measured as JSON.
mod erased {
    /// A report's rows.
    pub trait Rows {
        /// How many.
        fn count(&self) -> usize;
        /// Their JSON's bytes.
        fn json_bytes(&self) -> usize;
    }

    impl<T: serde::Serialize> Rows for Vec<T> {
        fn count(&self) -> usize {
            self.len()
        }

        fn json_bytes(&self) -> usize {
            serde_json::to_vec(self).map_or(0, |v| v.len())
        }
    }
}

/// Reads every report `a.runs` times from both stores, alternating, and prints the
/// medians.
async fn table(
    stores: &[(usize, BenchStore)],
    f: &ReportFilter,
    a: &Args,
    backend: &str,
) -> anyhow::Result<()> {
    let mut times = vec![vec![Vec::new(); REPORTS.len()]; 2];
    let mut rows = vec![vec![0usize; REPORTS.len()]; 2];
    let mut bytes = vec![vec![0usize; REPORTS.len()]; 2];
    let wanted = |which: &str| {
        !(a.skip_facts && which.ends_with("(facts)"))
            && (a.only.is_empty() || a.only.iter().any(|o| which.contains(o.as_str())))
    };
    for _ in 0..a.runs {
        for (r, which) in REPORTS.iter().enumerate().filter(|(_, w)| wanted(w)) {
            for (s, (_, store)) in stores.iter().enumerate() {
                let (ms, n, b) = read(&store.store, which, f).await?;
                times[s][r].push(ms);
                rows[s][r] = n;
                bytes[s][r] = b;
            }
        }
    }
    println!();
    println!(
        "| backend | report (30 days) | ms at {} records | rows | ms at {} records | rows | JSON bytes (large) | large / small |",
        stores[0].0, stores[1].0
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|");
    for (r, which) in REPORTS.iter().enumerate().filter(|(_, w)| wanted(w)) {
        let (small, large) = (median(times[0][r].clone()), median(times[1][r].clone()));
        println!(
            "| {backend} | {which} | {small:.1} | {} | {large:.1} | {} | {} | {:.1}x |",
            rows[0][r],
            rows[1][r],
            bytes[1][r],
            large / small
        );
    }
    Ok(())
}

/// Erases `--erase` shoppers of each store, one at a time: the median time of one,
/// the rows each replaced, and the large/small ratio.
async fn erasures(stores: &[(usize, BenchStore)], a: &Args, backend: &str) -> anyhow::Result<()> {
    use rm_store::model::erasure::Erasure;
    use rm_store::EraseStore;
    println!();
    println!("Erasing one shopper ({backend}, `--erase {}`):", a.erase);
    println!();
    println!("| store | records | erase, median | rows replaced |");
    println!("|---|---:|---:|---:|");
    let mut medians = Vec::new();
    for (i, (records, store)) in stores.iter().enumerate() {
        let sessions = a.sessions * if i == 0 { 1 } else { a.scale.max(2) };
        let mut times = Vec::new();
        let mut rows = 0;
        for k in 0..a.erase {
            let shopper = format!("shopper-{}", k * sessions / a.erase);
            let e = Erasure::new(
                uuid::Uuid::now_v7().to_string(),
                None,
                &shopper,
                "reportbench".into(),
                chrono::Utc::now().timestamp_millis(),
                None,
            );
            let t = Instant::now();
            let erased = store.store.erase(&e).await?;
            times.push(t.elapsed().as_secs_f64() * 1000.0);
            rows = erased.total();
        }
        let m = median(times);
        medians.push(m);
        println!(
            "| {} | {records} | {m:.1} ms | {rows} |",
            if i == 0 { "small" } else { "large" },
        );
    }
    if let [small, large] = medians.as_slice() {
        println!();
        println!("large/small: {:.2}x", large / small.max(1e-9));
    }
    Ok(())
}

/// Times a first ageing pass over every row of each store, then a second one.
async fn ageing(stores: &[(usize, BenchStore)], backend: &str) -> anyhow::Result<()> {
    use rm_store::model::ageing::{Ageing, AgeingKey};
    use rm_store::EraseStore;
    println!();
    println!("Ageing every shopper id ({backend}, `--age`):");
    println!();
    println!("| store | records | first pass | rows replaced | second pass |");
    println!("|---|---:|---:|---:|---:|");
    let a = Ageing::new(
        AgeingKey::new(b"reportbench-ageing-key"),
        chrono::Utc::now().timestamp_millis() + 86_400_000,
    );
    for (i, (records, store)) in stores.iter().enumerate() {
        let t = Instant::now();
        let first = store.store.age(&a).await?;
        let first_ms = t.elapsed().as_secs_f64() * 1000.0;
        let t = Instant::now();
        let second = store.store.age(&a).await?;
        let second_ms = t.elapsed().as_secs_f64() * 1000.0;
        anyhow::ensure!(second.total() == 0, "a second pass replaced {second:?}");
        println!(
            "| {} | {records} | {first_ms:.0} ms | {} | {second_ms:.0} ms |",
            if i == 0 { "small" } else { "large" },
            first.total(),
        );
    }
    Ok(())
}

async fn retention(
    stores: &[(usize, BenchStore)],
    f: &ReportFilter,
    a: &Args,
    backend: &str,
) -> anyhow::Result<()> {
    use rm_store::model::periods::Periods;
    use rm_store::model::retention::Retirement;
    use rm_store::sums;
    use rm_store::EraseStore;
    println!();
    println!("Fact retention passes ({backend}, `--retire`; ms, rows removed):");
    println!();
    println!("| store | records | nothing due | the oldest day | the older half | again |");
    println!("|---|---:|---:|---:|---:|---:|");
    let today = chrono::Utc::now().timestamp_millis() / 86_400_000;
    let days = i64::try_from(a.days).unwrap_or(30);
    let cut = |day: i64| Retirement {
        before_ms: day * 86_400_000,
        recount_from_ms: day * 86_400_000,
    };
    // The sessions' days: `today - days + 1` (the oldest) to today.
    let passes = [
        cut(today - days - 2),
        cut(today - days + 2),
        cut(today - days / 2),
        cut(today - days / 2),
    ];
    let (from, to) = (f.from_day.unwrap_or(0), f.to_day.unwrap_or(0));
    let utc = Periods::utc_days(from, to);
    for (i, (records, store)) in stores.iter().enumerate() {
        let before = sums::campaign_summary(&store.store, f, &utc, |_| None).await?;
        let mut cells = Vec::new();
        for r in &passes {
            let t = Instant::now();
            let gone = store.store.retire(r).await?;
            let ms = t.elapsed().as_secs_f64() * 1000.0;
            cells.push(format!("{ms:.0} ms, {}", gone.total()));
            let after = sums::campaign_summary(&store.store, f, &utc, |_| None).await?;
            anyhow::ensure!(after == before, "the campaign summary changed");
        }
        println!(
            "| {} | {records} | {} |",
            if i == 0 { "small" } else { "large" },
            cells.join(" | ")
        );
    }
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let a = Args::parse();
    let dir = std::env::temp_dir().join(format!("reportbench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let backend = if a.clickhouse_url.is_some() {
        "clickhouse"
    } else {
        "embedded"
    };
    let mut stores = Vec::new();
    for (name, n) in [
        ("small", a.sessions),
        ("large", a.sessions * a.scale.max(2)),
    ] {
        let url = a.clickhouse_url.as_deref();
        let store = match a.reuse {
            Some(pid) if url.is_some() => {
                let store = BenchStore::open_of("reportbench", name, url, &dir, pid).await?;
                let now = chrono::Utc::now().timestamp_millis();
                let records: usize = (0..n).map(|s| session(s, &a, now).len()).sum();
                eprintln!("reportbench: {backend} {name}: {n} sessions, {records} records kept");
                stores.push((records, store));
                continue;
            }
            Some(_) => anyhow::bail!("--reuse reads ClickHouse databases: give its URL"),
            None => BenchStore::open("reportbench", name, url, &dir).await?,
        };
        let (records, took) = if a.pipeline {
            let log = dir.join(format!("log-{name}"));
            let filled = fill_through_pipeline(&store.store, n, &a, &log).await?;
            std::fs::remove_dir_all(&log).ok();
            filled
        } else {
            fill(&store.store, n, &a).await?
        };
        eprintln!(
            "reportbench: {backend} {name}: {n} sessions, {records} records stored in {took:.1?}"
        );
        stores.push((records, store));
    }
    let today = chrono::Utc::now().timestamp_millis() / 86_400_000;
    let f = ReportFilter {
        from_day: Some(i32::try_from(today - 30).unwrap_or(0)),
        to_day: Some(i32::try_from(today).unwrap_or(0)),
        tenant: a.as_tenant.then(|| rm_store::Tenant {
            namespace: rm_schemas::namespace::DEFAULT.to_owned(),
            campaigns: std::sync::Arc::new((0..a.campaigns).map(|c| format!("camp-{c}")).collect()),
        }),
        ..ReportFilter::default()
    };
    if !a.no_reports {
        table(&stores, &f, &a, backend).await?;
    }
    if a.erase > 0 {
        erasures(&stores, &a, backend).await?;
    }
    if a.age {
        ageing(&stores, backend).await?;
    }
    if a.retire {
        retention(&stores, &f, &a, backend).await?;
    }
    if a.optimize {
        for (_, store) in &stores {
            store.optimize_rollups().await?;
        }
        println!();
        println!("After merging the rollups' versions:");
        table(&stores, &f, &a, backend).await?;
    }
    if a.compact {
        for (_, store) in &stores {
            let t = Instant::now();
            let open = store.store.compact_tallies(0).await?;
            eprintln!(
                "reportbench: compacted in {:.1?} (first open day {open:?})",
                t.elapsed()
            );
        }
        println!();
        println!("After compacting the closed hours' rollups:");
        table(&stores, &f, &a, backend).await?;
    }
    for (_, store) in stores {
        if !a.keep && a.reuse.is_none() {
            store.drop_database().await;
        }
    }
    std::fs::remove_dir_all(&dir).ok();
    Ok(())
}
