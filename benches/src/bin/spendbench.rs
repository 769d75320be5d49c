//! Spend benchmark (issue 26, item 4): what the ads index's spend refresher costs as
//! the clicks behind it grow. It reads billable clicks per campaign and day every
//! `RM_API_ADS_REFRESH_SECS`; before tallies it ran the ads report of the served
//! campaigns over their whole history (every click fact resolved), now it reads the
//! tallies (one row per campaign, day and log partition).
//!
//! Two stores are filled the way the aggregator fills them (records folded with their
//! log positions, the touched served ads and tallies loaded from the store, batches
//! written), one with `--clicks` ad clicks and one with ten times as many, over the
//! same campaigns and days; then both reads run on both stores, alternating, and the
//! table gives medians, the rows each answer moves and the ratio between the sizes.
//!
//! Embedded store by default; ClickHouse when `RM_CLICKHOUSE_URL` is set (each store
//! in a database of its own, dropped at the end).
//! `cargo run --release -p rm-benches --bin spendbench -- --clicks 100000`.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use clap::Parser;
use rm_aggregator::batch::Policy;
use rm_benches::stores::{median, BenchStore, Partitions};
use rm_schemas::{EventRecord, InteractionEvent, InteractionType};
use rm_store::model::traffic::ClickWindow;
use rm_store::{AnyStore, ReportFilter, ReportStore, Tenant, WriteStore};

/// The allocator `retail-media` itself uses (see `src/main.rs`).
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Settings.
#[derive(Debug, Parser)]
struct Args {
    /// Ad clicks in the small store (the large one holds ten times as many).
    #[arg(long, default_value_t = 100_000)]
    clicks: usize,
    /// Campaigns the clicks are spread over (the measurement: 21).
    #[arg(long, default_value_t = 21)]
    campaigns: usize,
    /// Days the clicks are spread over.
    #[arg(long, default_value_t = 30)]
    days: usize,
    /// Log partitions the clicks come from.
    #[arg(long, default_value_t = 6)]
    partitions: i32,
    /// Timed reads of each kind on each store.
    #[arg(long, default_value_t = 9)]
    runs: usize,
    /// Records per folded batch.
    #[arg(long, default_value_t = 50_000)]
    batch: usize,
    /// ClickHouse HTTP URL (the embedded store when unset).
    #[arg(long, env = "RM_CLICKHOUSE_URL")]
    clickhouse_url: Option<String>,
}

/// Click `i`: served ad `i / 5 * 4 + ...`: four clicks in five are a served ad's
/// first (billable), one in five a second shopper's click on the ad before it (a
/// repeat), spread over campaigns and days.
fn click(i: usize, a: &Args, today: i64) -> EventRecord {
    let served = if i % 5 == 4 { i - 1 } else { i };
    let campaign = served % a.campaigns;
    let day = (served / a.campaigns) % a.days;
    let ms = (today - day as i64) * 86_400_000 + (served % 86_400) as i64 * 1000;
    let ts = chrono::DateTime::from_timestamp_millis(ms)
        .expect("time")
        .fixed_offset();
    let event = InteractionEvent {
        session_id: Some(format!("s-{i}")),
        ..InteractionEvent::new(
            format!("rm1.camp-{campaign}.ad-{served}"),
            InteractionType::AdClick,
            ts,
        )
    };
    EventRecord::new(event, uuid::Uuid::now_v7(), ts.to_utc())
}

/// Fills `store` with `n` clicks as the aggregator would.
async fn fill(store: &AnyStore, n: usize, a: &Args) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let today = chrono::Utc::now().timestamp_millis() / 86_400_000;
    // Ten days of late horizon cover the spread; the policy is otherwise the default.
    let policy = Policy {
        late_horizon_ms: (a.days as i64 + 2) * 86_400_000,
        ..Policy::default()
    };
    store.backfill_tallies().await?;
    let mut log = Partitions::new(usize::try_from(a.partitions).unwrap_or(1));
    let mut i = 0;
    while i < n {
        let end = (i + a.batch).min(n);
        let records: Vec<EventRecord> = (i..end).map(|j| click(j, a, today)).collect();
        log.fold_into(store, &records, &policy).await?;
        i = end;
    }
    Ok(started.elapsed())
}

/// The two reads of the spend refresher, timed once: (ms, rows moved, clicks).
async fn read(
    store: &AnyStore,
    campaigns: &HashSet<String>,
    tallies: bool,
) -> anyhow::Result<(f64, usize, i64)> {
    let t = Instant::now();
    let (rows, clicks) = if tallies {
        let rows = rm_store::billable_clicks(store, Some(campaigns.iter().cloned().collect()))
            .await?
            .ok_or_else(|| anyhow::anyhow!("not counted"))?;
        (rows.len(), rows.iter().map(|r| r.value).sum())
    } else {
        // The refresher's query before tallies (api/src/ads.rs, the fallback).
        let f = ReportFilter {
            tenant: Some(Tenant {
                namespace: String::new(),
                campaigns: std::sync::Arc::new(campaigns.iter().cloned().collect()),
            }),
            click_window: ClickWindow::default(),
            ..ReportFilter::default()
        };
        let rows = store.ads(&f).await?;
        let clicks = rows.iter().map(|r| r.clicks as i64).sum();
        (rows.len(), clicks)
    };
    Ok((t.elapsed().as_secs_f64() * 1e3, rows, clicks))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let a = Args::parse();
    let dir = std::env::temp_dir().join(format!("spendbench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let backend = if a.clickhouse_url.is_some() {
        "clickhouse"
    } else {
        "embedded"
    };
    let campaigns: HashSet<String> = (0..a.campaigns).map(|c| format!("camp-{c}")).collect();
    let mut stores = Vec::new();
    for (name, n) in [("small", a.clicks), ("large", a.clicks * 10)] {
        let store = BenchStore::open("spendbench", name, a.clickhouse_url.as_deref(), &dir).await?;
        let took = fill(&store.store, n, &a).await?;
        eprintln!("spendbench: {backend} {name}: {n} clicks stored in {took:.1?}");
        stores.push((n, store));
    }
    // Alternate stores and kinds, so drift hits both alike.
    let mut times = vec![vec![Vec::new(); 2]; stores.len()];
    let mut shape = vec![vec![(0usize, 0i64); 2]; stores.len()];
    for _ in 0..a.runs {
        for (s, (_, store)) in stores.iter().enumerate() {
            for (k, tallies) in [(0, true), (1, false)] {
                let (ms, rows, clicks) = read(&store.store, &campaigns, tallies).await?;
                times[s][k].push(ms);
                shape[s][k] = (rows, clicks);
            }
        }
    }
    println!();
    println!("| backend | clicks stored | read | median ms | rows moved | billable clicks |");
    println!("|---|---:|---|---:|---:|---:|");
    for (s, (n, _)) in stores.iter().enumerate() {
        for (k, what) in [(0, "tallies (now)"), (1, "ads report (before)")] {
            println!(
                "| {backend} | {n} | {what} | {:.2} | {} | {} |",
                median(times[s][k].clone()),
                shape[s][k].0,
                shape[s][k].1
            );
        }
    }
    for (k, what) in [(0, "tallies"), (1, "ads report")] {
        println!(
            "\n{what}: large / small = {:.2}x",
            median(times[1][k].clone()) / median(times[0][k].clone())
        );
    }
    for per_store in shape.iter().take(stores.len()) {
        assert_eq!(
            per_store[0].1, per_store[1].1,
            "tallies and the ads report count the same billable clicks"
        );
    }
    for (_, store) in stores {
        store.drop_database().await;
    }
    std::fs::remove_dir_all(&dir).ok();
    Ok(())
}
