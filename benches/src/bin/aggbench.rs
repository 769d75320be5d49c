//! Aggregator benchmark: events per second from the event log into the report store,
//! against a consume-only pass over the same records (the ceiling for reading them),
//! and end-to-end freshness (beacon appended to the log -> the report shows it).
//!
//! Runs on the embedded log and store (default), or on Kafka + ClickHouse when
//! `RM_KAFKA_BROKERS` and `RM_CLICKHOUSE_URL` are set. `cargo run --release -p
//! rm-benches --bin aggbench -- --records 300000` prints a summary table.

use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use rm_aggregator::pipeline::{self, PipelineOptions};
use rm_aggregator::source::{AnySource, EmbeddedSource, KafkaSource, Source};
use rm_eventlog::{EmbeddedLogConfig, EventLog, KafkaConfig};
use rm_schemas::{EventRecord, InteractionEvent, InteractionType};
use rm_store::{AnyStore, ReportFilter, ReportStore, StoreConfig};
use tokio_util::sync::CancellationToken;

/// The allocator `retail-media` itself uses (see `src/main.rs`).
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Settings.
#[derive(Debug, Parser)]
struct Args {
    /// Records in the throughput runs.
    #[arg(long, default_value_t = 300_000)]
    records: usize,
    /// Throughput rounds, each on fresh backends (the table gives medians).
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Freshness probes.
    #[arg(long, default_value_t = 200)]
    probes: usize,
    /// How often a probe polls the report, milliseconds (each poll is two store
    /// queries: a short interval measures finely and loads the store more).
    #[arg(long, default_value_t = 5)]
    probe_poll_ms: u64,
    /// Background events per second during the freshness run.
    #[arg(long, default_value_t = 2_000)]
    steady_rate: u64,
    /// Date the freshness run's events as the throughput records are (one to two
    /// hours back, so every tally they move is of an hour a compaction may have
    /// closed and is flagged), instead of live, as players fire beacons.
    #[arg(long)]
    late_steady: bool,
    /// Every event its own ad and video (one new view per event: the worst case).
    #[arg(long)]
    entity_per_event: bool,
    /// Batch bound of the aggregator, records (the service's default).
    #[arg(long, default_value_t = rm_aggregator::pipeline::DEFAULT_BATCH_MAX_RECORDS)]
    batch_max_records: usize,
    /// Batch bound of the aggregator, milliseconds (the service's default).
    #[arg(long, default_value_t = rm_aggregator::pipeline::DEFAULT_BATCH_MAX_WAIT_MS)]
    batch_max_wait_ms: u64,
    /// Shortest gathering of a batch, milliseconds (the service's default).
    #[arg(long, default_value_t = rm_aggregator::pipeline::DEFAULT_BATCH_LINGER_MS)]
    batch_linger_ms: u64,
    #[command(flatten)]
    kafka: KafkaConfig,
    #[command(flatten)]
    store: StoreConfig,
}

/// A realistic record: video funnels, product tiles and carts over many sessions.
///
/// Records come in sessions of eight: one shopper watching one ad's video through
/// its six milestones (one view), then a product impression and a cart change of that
/// ad, each session its own served ad. With `--entity-per-event` every event has its own ad and video instead (the
/// generator of the first measurements): each event is then a new view, the worst
/// case for the aggregator, which loads and writes one entity per event.
fn record(i: usize, now: chrono::DateTime<chrono::Utc>, entity_per_event: bool) -> EventRecord {
    use rm_schemas::video_funnel::MILESTONES as VIDEO;
    // Session ids as the SDK makes them (`crypto.randomUUID()`): random, so a batch's
    // views and carts are spread over the store's key space.
    let session =
        uuid::Uuid::from_u128(xxhash_rust::xxh3::xxh3_128(&(i / 8).to_le_bytes())).to_string();
    // The ad, video and products of the session (or of the event, worst case).
    let a = if entity_per_event { i } else { i / 8 };
    let (kind, video, product, units) = match i % 8 {
        k @ 0..=5 => (VIDEO[k], Some(format!("v-{}", a % 3)), None, None),
        6 => (
            InteractionType::ProductImpression,
            None,
            Some(format!("sku-{}", i % 97)),
            None,
        ),
        _ => (
            InteractionType::Cart,
            None,
            Some(format!("sku-{}", i % 97)),
            Some((i % 4) as u64),
        ),
    };
    let ts = now - chrono::Duration::milliseconds(((1_000_000 - (i % 1_000_000)) * 7) as i64);
    let event = InteractionEvent {
        // Each session is served its own ad (a realised ad id per served ad), so the
        // aggregator keeps a served-ad state per session, as it does in production.
        ad_id: format!("rm1.camp-{}.ad-{a}", a % 11),
        interaction_type: kind,
        timestamp: ts.fixed_offset(),
        session_id: Some(session),
        customer_id: None,
        dtm_token: None,
        video_id: video,
        catalog_id: product.as_ref().map(|_| "cat-1".to_owned()),
        product_code: product,
        creative_id: None,
        units,
        conversion_value: units.map(|u| u as f64 * 9.5),
        iab_consent_string: None,
    };
    EventRecord::new(event, uuid::Uuid::now_v7(), now)
}

/// A record of the freshness run: dated now (a live beacon) unless `late`, received
/// now.
fn steady(mut r: EventRecord, late: bool) -> EventRecord {
    let now = chrono::Utc::now();
    if !late {
        r.event.timestamp = now.fixed_offset();
    }
    EventRecord::new(r.event, uuid::Uuid::now_v7(), now)
}

fn options(a: &Args) -> PipelineOptions {
    PipelineOptions {
        batch_max_records: a.batch_max_records,
        batch_max_wait: Duration::from_millis(a.batch_max_wait_ms),
        batch_linger: Duration::from_millis(a.batch_linger_ms),
        policy: rm_aggregator::batch::Policy::default(),
        cache_max_entities: 1_000_000,
        served_retention: Duration::from_secs(48 * 3_600),
        erasures_every: Duration::from_secs(1),
        erasure_settle: Duration::from_secs(600),
        ageing: None,
        retention: None,
    }
}

struct Backends {
    log: Arc<rm_eventlog::AnyLog>,
    store: Arc<AnyStore>,
    topic: String,
    /// The ClickHouse server and database, when the store is one (dropped by
    /// [`Backends::close`]).
    clickhouse: Option<(String, String)>,
    _dir: tempdir::Dir,
}

impl Backends {
    /// Drops the run's ClickHouse database (the embedded files go with the directory).
    async fn close(self) {
        if let Some((url, db)) = &self.clickhouse {
            rm_benches::stores::drop_clickhouse_database(url, db).await;
        }
    }
}

mod tempdir {
    /// A directory removed on drop.
    pub struct Dir(pub std::path::PathBuf);
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

async fn backends(a: &Args, name: &str) -> anyhow::Result<Backends> {
    let dir = std::env::temp_dir().join(format!("rm-aggbench-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let topic = format!("aggbench-{}-{name}", std::process::id());
    let log = rm_eventlog::open(
        &a.kafka,
        &EmbeddedLogConfig::default(),
        &dir,
        std::slice::from_ref(&topic),
    )
    .await?;
    let mut config = a.store.clone();
    config.clickhouse.database = format!("rm_aggbench_{}_{name}", std::process::id());
    let store = rm_store::open(&config, &dir).await?;
    let clickhouse = config
        .clickhouse
        .url
        .clone()
        .map(|url| (url, config.clickhouse.database.clone()));
    Ok(Backends {
        log: Arc::new(log),
        store: Arc::new(store),
        topic,
        clickhouse,
        _dir: tempdir::Dir(dir),
    })
}

fn source(b: &Backends, a: &Args, group: &str) -> anyhow::Result<AnySource> {
    Ok(match b.log.as_ref() {
        rm_eventlog::AnyLog::Embedded(l) => {
            // A per-run orders topic: the bench's records are all events.
            let orders = format!("{}-orders", b.topic);
            AnySource::Embedded(EmbeddedSource::with_orders(
                l.clone(),
                group,
                &b.topic,
                &orders,
            )?)
        }
        rm_eventlog::AnyLog::Kafka(_) => {
            let orders = format!("{}-orders", b.topic);
            AnySource::Kafka(KafkaSource::connect_with_orders(
                &a.kafka, group, &b.topic, &orders,
            )?)
        }
    })
}

async fn fill(b: &Backends, n: usize, entity_per_event: bool) -> anyhow::Result<Duration> {
    let now = chrono::Utc::now();
    let t = Instant::now();
    let mut pending = Vec::with_capacity(4096);
    for i in 0..n {
        let r = record(i, now, entity_per_event);
        let log = Arc::clone(&b.log);
        let topic = b.topic.clone();
        pending.push(tokio::spawn(async move {
            log.append(&topic, r.event.ad_id.as_bytes(), r.to_bytes())
                .await
        }));
        if pending.len() == 4096 {
            for p in pending.drain(..) {
                p.await??;
            }
        }
    }
    for p in pending {
        p.await??;
    }
    Ok(t.elapsed())
}

/// Reads and decodes every record once, storing nothing: the ceiling.
async fn consume_only(b: &Backends, a: &Args, n: usize) -> anyhow::Result<f64> {
    let mut src = source(b, a, "consume-only")?;
    let t = Instant::now();
    let mut seen = 0;
    let mut first = None;
    while seen < n {
        // A batch as the aggregator's reader gathers one when its loop is busy: polls
        // until the bound on records or on time, then one commit.
        let deadline = Instant::now() + Duration::from_millis(a.batch_max_wait_ms);
        let mut raw = Vec::new();
        while raw.len() < a.batch_max_records && Instant::now() < deadline {
            let wait = deadline.saturating_duration_since(Instant::now());
            raw.extend(src.poll(a.batch_max_records - raw.len(), wait).await?);
        }
        if !raw.is_empty() && first.is_none() {
            first = Some(Instant::now());
        }
        for r in &raw {
            std::hint::black_box(EventRecord::from_bytes(r)?);
        }
        seen += raw.len();
        src.commit().await?;
    }
    let start = first.unwrap_or(t);
    Ok(n as f64 / start.elapsed().as_secs_f64())
}

/// The real pipeline until it has stored every record; timed from its first read,
/// as the consume-only pass is.
async fn aggregate(b: &Backends, a: &Args, n: usize) -> anyhow::Result<f64> {
    let src = source(b, a, "aggregator")?;
    let stop = CancellationToken::new();
    let progress = Arc::new(pipeline::Progress::default());
    let task = tokio::spawn(pipeline::run_with_progress(
        src,
        Arc::clone(&b.store),
        "bench",
        options(a),
        stop.clone(),
        Arc::clone(&progress),
    ));
    let t = Instant::now();
    let mut started = None;
    loop {
        tokio::time::sleep(Duration::from_millis(1)).await;
        if started.is_none() && progress.polled() > 0 {
            started = Some(Instant::now());
        }
        if progress.records() >= n as u64 {
            break;
        }
        anyhow::ensure!(
            t.elapsed() < Duration::from_secs(900),
            "aggregation did not finish"
        );
    }
    let secs = started.unwrap_or(t).elapsed().as_secs_f64();
    stop.cancel();
    task.await??;
    let busy = |s| progress.busy(s).as_secs_f64() / secs * 100.0;
    eprintln!(
        "  stages busy: read {:.0} %, fold {:.0} %, write {:.0} % of {secs:.2} s",
        busy(pipeline::Stage::Read),
        busy(pipeline::Stage::Fold),
        busy(pipeline::Stage::Write)
    );
    Ok(n as f64 / secs)
}

/// Steady background load; for each probe, a fresh view appended, then the funnel
/// report polled until it shows it. Probing starts once the aggregator has stored
/// background events for two seconds, so joining the consumer group (seconds, on
/// Kafka) is not counted as freshness.
async fn freshness(b: &Backends, a: &Args) -> anyhow::Result<Vec<f64>> {
    let src = source(b, a, "aggregator")?;
    let stop = CancellationToken::new();
    let progress = Arc::new(pipeline::Progress::default());
    let task = tokio::spawn(pipeline::run_with_progress(
        src,
        Arc::clone(&b.store),
        "bench",
        options(a),
        stop.clone(),
        Arc::clone(&progress),
    ));
    let (log, topic, rate) = (Arc::clone(&b.log), b.topic.clone(), a.steady_rate.max(1));
    let (entity_per_event, late) = (a.entity_per_event, a.late_steady);
    let bg_stop = stop.clone();
    let background = tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_micros(1_000_000 / rate));
        let mut i = 10_000_000;
        while !bg_stop.is_cancelled() {
            tick.tick().await;
            let r = steady(record(i, chrono::Utc::now(), entity_per_event), late);
            let (log, topic) = (Arc::clone(&log), topic.clone());
            tokio::spawn(async move {
                log.append(&topic, r.event.ad_id.as_bytes(), r.to_bytes())
                    .await
            });
            i += 1;
        }
    });
    let warm = Instant::now();
    while progress.records() == 0 {
        anyhow::ensure!(
            warm.elapsed() < Duration::from_secs(120),
            "the aggregator stored nothing in two minutes"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut lat = Vec::with_capacity(a.probes);
    for p in 0..a.probes {
        let mut r = record(p * 8, chrono::Utc::now(), false);
        r.event.ad_id = format!("rm1.probe.{p}-{}", std::process::id());
        let r = steady(r, a.late_steady);
        let filter = ReportFilter {
            ad_id: Some(r.event.ad_id.clone()),
            campaign_id: Some("probe".into()),
            ..Default::default()
        };
        let sent = Instant::now();
        b.log
            .append(&b.topic, r.event.ad_id.as_bytes(), r.to_bytes())
            .await?;
        loop {
            if !b.store.funnel(&filter).await?.is_empty() {
                break;
            }
            anyhow::ensure!(
                sent.elapsed() < Duration::from_secs(60),
                "probe {p} never showed up"
            );
            tokio::time::sleep(Duration::from_millis(a.probe_poll_ms)).await;
        }
        lat.push(sent.elapsed().as_secs_f64() * 1000.0);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.cancel();
    background.abort();
    task.await??;
    lat.sort_by(f64::total_cmp);
    Ok(lat)
}

fn pct(v: &[f64], p: f64) -> f64 {
    v.get(
        ((v.len() as f64 * p).ceil() as usize)
            .saturating_sub(1)
            .min(v.len().saturating_sub(1)),
    )
    .copied()
    .unwrap_or(0.0)
}

/// One throughput round on fresh backends: consume-only, then the pipeline, over
/// the same records. Returns (consume-only rec/s, pipeline rec/s, pipeline CPU µs
/// per record).
async fn round(a: &Args, i: usize) -> anyhow::Result<(f64, f64, f64)> {
    let b = backends(a, &format!("throughput{i}")).await?;
    let fill_time = fill(&b, a.records, a.entity_per_event).await?;
    let cpu0 = rm_benches::procstat::self_cpu_s().unwrap_or(0.0);
    let read = consume_only(&b, a, a.records).await?;
    let cpu1 = rm_benches::procstat::self_cpu_s().unwrap_or(0.0);
    let agg = aggregate(&b, a, a.records).await?;
    let cpu2 = rm_benches::procstat::self_cpu_s().unwrap_or(0.0);
    let per = |cpu: f64| cpu * 1e6 / a.records as f64;
    // The embedded store's file once the records are in: bytes per session (8 records).
    let store_bytes = dir_bytes(&b._dir.0.join("store"));
    eprintln!(
        "round {i}: filled in {:.1}s; consume-only {read:.0} rec/s ({:.2} us CPU/rec); \
         log -> store {agg:.0} rec/s ({:.2} us CPU/rec); ratio {:.2}; store {:.1} MB, \
         {:.0} bytes a session",
        fill_time.as_secs_f64(),
        per(cpu1 - cpu0),
        per(cpu2 - cpu1),
        agg / read,
        store_bytes as f64 / 1e6,
        store_bytes as f64 * 8.0 / a.records as f64
    );
    b.close().await;
    Ok((read, agg, per(cpu2 - cpu1)))
}

/// Bytes of the files under `dir` (0 when absent: a ClickHouse store).
fn dir_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| match e.metadata() {
                    Ok(m) if m.is_dir() => dir_bytes(&e.path()),
                    Ok(m) => m.len(),
                    Err(_) => 0,
                })
                .sum()
        })
        .unwrap_or(0)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    pct(&v, 0.5)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let a = Args::parse();
    let backend = match (a.kafka.brokers.is_some(), a.store.clickhouse.url.is_some()) {
        (true, true) => "kafka + clickhouse",
        (true, false) => "kafka + embedded store",
        (false, true) => "embedded log + clickhouse",
        (false, false) => "embedded log + embedded store",
    };
    eprintln!(
        "aggbench: {backend}, {} records, {} rounds, load {}",
        a.records,
        a.rounds,
        rm_benches::procstat::loadavg()
    );
    let mut rounds = Vec::new();
    for i in 0..a.rounds.max(1) {
        rounds.push(round(&a, i).await?);
    }
    let ratio = median(rounds.iter().map(|r| r.1 / r.0).collect());
    let read = median(rounds.iter().map(|r| r.0).collect());
    let agg = median(rounds.iter().map(|r| r.1).collect());
    let cpu = median(rounds.iter().map(|r| r.2).collect());
    let f = backends(&a, "freshness").await?;
    let lat = freshness(&f, &a).await?;
    f.close().await;
    println!();
    println!("| backend | records | rounds | consume-only rec/s | log->store rec/s | ratio (goal >= 0.5) | CPU us/rec | freshness p50 ms | p99 ms (goal < 2000) | max ms |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    println!(
        "| {backend} | {} | {} | {read:.0} | {agg:.0} | **{ratio:.2}** | {cpu:.2} | {:.0} | **{:.0}** | {:.0} |",
        a.records,
        rounds.len(),
        pct(&lat, 0.5),
        pct(&lat, 0.99),
        lat.last().copied().unwrap_or(0.0)
    );
    println!(
        "(medians over the rounds; the ratio is the median of each round's own ratio. \
         Freshness: {} probes under a steady {} events/s, {}.)",
        lat.len(),
        a.steady_rate,
        if a.late_steady {
            "dated 1-2 hours back"
        } else {
            "live"
        }
    );
    Ok(())
}
