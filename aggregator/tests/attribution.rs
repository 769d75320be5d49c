//! End to end: beacon records and order records written to the log, the real
//! aggregator pipeline consuming both topics, the sales report read from the store.
//!
//! The story, on one day (2026-11-18, UTC):
//!
//! 1. Two orders arrive before any ad event: `order-1` (customer `cust-1`, session
//!    `sess-2`: p1 x2 for 19.98 and p2 x1 for 5.00) and `order-2` (customer `cust-9`:
//!    p1 x1 for 9.99). Nothing can be credited yet: every sale is unattributed.
//! 2. The ad events arrive late (they happened before the orders): `cust-1` saw p1 on
//!    an ad of `camp-a` at 09:00 and clicked p1 on an ad of `camp-b` at 08:00 (the
//!    click is re-fired once: a duplicate); `sess-2` saw p2 on `camp-a` at 09:30; a
//!    video play of `sess-2`. `order-1` is also sent again with other lines. Now p1 of
//!    `order-1` is credited to `camp-b` (the last click beats the later impression), p2
//!    to `camp-a` (an impression, through the session id), `order-2` stays
//!    unattributed, and the re-sent order changes nothing.
//!    (Attribution as orders arrive: the aggregator offers each new touch to the
//!    stored orders of its shoppers through the orders topic, and each order to its
//!    shoppers' stored touches; the report reads the sums it keeps, and is checked
//!    against the same report attributed at read time from the facts.)
//! 3. The aggregator "crashes" after storing everything but before committing any
//!    offset (embedded: the committed offsets are reset; Kafka: a new consumer group
//!    reads from the start) and consumes it all again: the report does not move.
//!
//! The embedded variant always runs. The Kafka + ClickHouse variant needs
//! `RM_KAFKA_BROKERS` and `RM_CLICKHOUSE_URL` (`deploy/local/up.sh` prints them); it
//! uses fresh topics and a fresh database, dropped at the end. Without them it is
//! skipped, unless `RM_REQUIRE_SERVICES=1`, where it fails.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, FixedOffset, Utc};
use rm_aggregator::batch::Policy;
use rm_aggregator::pipeline::{self, PipelineOptions};
use rm_aggregator::source::{AnySource, EmbeddedSource, KafkaSource, LagProbe, Source};
use rm_eventlog::embedded::EmbeddedLog;
use rm_eventlog::kafka::KafkaLog;
use rm_eventlog::{AnyLog, EmbeddedLogConfig, EventLog, KafkaConfig};
use rm_schemas::money::{self, Decimal};
use rm_schemas::order::{self, Order, OrderItem};
use rm_schemas::{EventRecord, InteractionEvent, InteractionType as T};
use rm_store::clickhouse::{ClickHouseConfig, ClickHouseStore};
use rm_store::embedded::EmbeddedStore;
use rm_store::model::attribution::{SalesReportRow, Windows};
use rm_store::{AnyStore, ReportFilter, ReportStore};
use tokio_util::sync::CancellationToken;

#[path = "support/kafka.rs"]
mod support;

const DAY: &str = "2026-11-18";
const HOUR: i64 = 3_600_000;
/// 2026-11-18T00:00:00Z.
const D: i64 = 20_775 * 86_400_000;
const AD_A: &str = "rm1.camp-a.ad-1";
const AD_B: &str = "rm1.camp-b.ad-2";

fn at(ms: i64) -> DateTime<FixedOffset> {
    DateTime::from_timestamp_millis(ms)
        .expect("time in range")
        .fixed_offset()
}

fn event(
    kind: T,
    ad: &str,
    who: (Option<&str>, Option<&str>),
    product: Option<&str>,
    ms: i64,
) -> InteractionEvent {
    InteractionEvent {
        ad_id: ad.into(),
        interaction_type: kind,
        timestamp: at(ms),
        customer_id: who.0.map(Into::into),
        session_id: who.1.map(Into::into),
        dtm_token: None,
        video_id: (kind == T::VideoPlay).then(|| "vid-1".into()),
        product_code: product.map(Into::into),
        catalog_id: product.map(|_| "cat".into()),
        creative_id: None,
        units: None,
        conversion_value: None,
        iab_consent_string: None,
    }
}

/// The record the edge writes: a fresh event id, received a minute later.
fn beacon(e: InteractionEvent) -> (Vec<u8>, Vec<u8>) {
    let received = e.timestamp.with_timezone(&Utc) + chrono::Duration::minutes(1);
    let key = e.ad_id.clone().into_bytes();
    (
        key,
        EventRecord::new(e, uuid::Uuid::now_v7(), received).to_bytes(),
    )
}

/// The record the api writes for an order.
fn order_record(
    id: &str,
    who: (Option<&str>, Option<&str>),
    ms: i64,
    items: &[(&str, u64, &str)],
) -> (Vec<u8>, Vec<u8>) {
    let o = Order {
        id: id.into(),
        customer_id: who.0.map(Into::into),
        session_id: who.1.map(Into::into),
        order_date: at(ms),
        catalog_id: "cat".into(),
        team_id: None,
        ad_ids: Vec::new(),
        order_items: items
            .iter()
            .map(|(p, q, r)| OrderItem {
                product_code: (*p).into(),
                quantity: *q,
                regular_unit_price: None,
                total_order_item_price_after_discounts: Decimal::from_str_exact(r)
                    .expect("a price"),
                ad_id: None,
                seller_id: None,
            })
            .collect(),
        currency: None,
    };
    (order::key(&o).to_vec(), order::record(&o))
}

fn orders_first() -> Vec<(Vec<u8>, Vec<u8>)> {
    vec![
        order_record(
            "order-1",
            (Some("cust-1"), Some("sess-2")),
            D + 10 * HOUR,
            &[("p1", 2, "19.98"), ("p2", 1, "5.0")],
        ),
        order_record(
            "order-2",
            (Some("cust-9"), None),
            D + 11 * HOUR,
            &[("p1", 1, "9.99")],
        ),
    ]
}

fn late_events() -> Vec<(Vec<u8>, Vec<u8>)> {
    let cust = (Some("cust-1"), None);
    let click = event(T::ProductClick, AD_B, cust, Some("p1"), D + 8 * HOUR);
    vec![
        beacon(event(
            T::ProductImpression,
            AD_A,
            cust,
            Some("p1"),
            D + 9 * HOUR,
        )),
        beacon(click.clone()),
        beacon(event(
            T::ProductImpression,
            AD_A,
            (None, Some("sess-2")),
            Some("p2"),
            D + 9 * HOUR + HOUR / 2,
        )),
        beacon(click), // a re-fire that slipped past the edge: same dedup key
        beacon(event(
            T::VideoPlay,
            AD_A,
            (None, Some("sess-2")),
            None,
            D + 7 * HOUR,
        )),
    ]
}

fn resent_order() -> (Vec<u8>, Vec<u8>) {
    order_record(
        "order-1",
        (Some("cust-1"), None),
        D + 10 * HOUR,
        &[("p1", 50, "500.0")],
    )
}

fn row(
    campaign: &str,
    product: &str,
    orders: u64,
    units: u64,
    revenue: &str,
    credit: (u64, u64),
) -> SalesReportRow {
    SalesReportRow {
        campaign_id: campaign.into(),
        catalog_id: "cat".into(),
        product_code: product.into(),
        day: DAY.into(),
        orders,
        units,
        revenue: Decimal::from_str_exact(revenue).expect("revenue"),
        currency: money::DEFAULT_CURRENCY,
        click_attributions: credit.0,
        view_attributions: credit.1,
    }
}

fn unattributed() -> Vec<SalesReportRow> {
    vec![
        row("", "p1", 2, 3, "29.97", (0, 0)),
        row("", "p2", 1, 1, "5.0", (0, 0)),
    ]
}

fn attributed() -> Vec<SalesReportRow> {
    vec![
        row("", "p1", 1, 1, "9.99", (0, 0)),
        row("camp-a", "p2", 1, 1, "5.0", (0, 1)),
        row("camp-b", "p1", 1, 2, "19.98", (1, 0)),
    ]
}

fn options() -> PipelineOptions {
    PipelineOptions {
        // Small batches: orders and events meet in several batches.
        batch_max_records: 3,
        batch_max_wait: Duration::from_millis(50),
        batch_linger: Duration::ZERO,
        policy: Policy::default(),
        cache_max_entities: 10_000,
        served_retention: Duration::from_secs(48 * 3_600),
        erasures_every: Duration::from_secs(1),
        erasure_settle: Duration::from_secs(600),
        ageing: None,
        retention: None,
    }
}

struct Running {
    stop: CancellationToken,
    task: tokio::task::JoinHandle<Result<(), rm_aggregator::AggregatorError>>,
    probe: LagProbe,
}

fn start(source: AnySource, store: &Arc<AnyStore>) -> Running {
    let probe = source.lag_probe();
    let stop = CancellationToken::new();
    let task = tokio::spawn(pipeline::run(
        source,
        Arc::clone(store),
        "test",
        options(),
        stop.clone(),
    ));
    Running { stop, task, probe }
}

impl Running {
    /// Waits until both topics are assigned and fully committed.
    async fn drained(&self) {
        let t = Instant::now();
        loop {
            let lag = self.probe.lag().await;
            let streams: std::collections::HashSet<_> = lag.iter().map(|((s, _), _)| *s).collect();
            if streams.len() == 2 && lag.iter().all(|(_, l)| *l == 0) {
                return;
            }
            assert!(
                t.elapsed() < Duration::from_secs(90),
                "the aggregator did not drain: {:?}",
                lag.iter()
                    .map(|((s, p), l)| (s.as_str(), *p, *l))
                    .collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn drained_then_stop(self) {
        self.drained().await;
        self.stop().await;
    }

    async fn stop(self) {
        self.stop.cancel();
        self.task
            .await
            .expect("pipeline task")
            .expect("pipeline ends cleanly");
    }
}

/// The sales report as the api serves it (the sales tallies, attributed as orders and
/// offers arrive), checked against the same report attributed at read time from the
/// stored orders and touches.
async fn sales(store: &AnyStore) -> Vec<SalesReportRow> {
    let f = ReportFilter::default();
    let w = Windows::default();
    let tallied = rm_store::sums::sales_report(store, &f, &w)
        .await
        .expect("sales report");
    let facts = store.sales(&f, &w).await.expect("sales from the facts");
    assert_eq!(tallied, facts, "the tallies and the facts attribute alike");
    tallied
}

async fn append_all<L: EventLog>(log: &L, topic: &str, records: Vec<(Vec<u8>, Vec<u8>)>) {
    // One at a time, in order: each append is acknowledged before the next.
    for (key, value) in records {
        log.append(topic, &key, value).await.expect("append");
    }
}

/// The story, on a log, a store and a way to make a source for a consumer group.
async fn story<L: EventLog>(
    log: &L,
    topics: (&str, &str),
    store: Arc<AnyStore>,
    source: impl Fn(&str) -> AnySource,
    crash: impl Fn(&str) -> String,
) {
    let (events, orders) = topics;
    append_all(log, orders, orders_first()).await;
    // A video event in the same stream, so the events topic exists too.
    append_all(log, events, late_events().split_off(4)).await;
    let group = "rm-aggregator-test";
    let running = start(source(group), &store);
    running.drained().await;
    assert_eq!(
        sales(&store).await,
        unattributed(),
        "orders before their clicks"
    );

    append_all(log, events, late_events()).await;
    append_all(log, orders, vec![resent_order()]).await;
    running.drained().await;
    assert_eq!(
        sales(&store).await,
        attributed(),
        "once the clicks are stored"
    );
    running.stop().await;

    // Everything stored, nothing committed: consume it all again.
    let group = crash(group);
    let running = start(source(&group), &store);
    running.drained().await;
    assert_eq!(
        sales(&store).await,
        attributed(),
        "a replay changes nothing"
    );
    running.stop().await;
}

#[tokio::test]
async fn embedded_log_and_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = EmbeddedLog::open(
        &EmbeddedLogConfig::path(dir.path()),
        &EmbeddedLogConfig::default(),
    )
    .expect("open log");
    let store = EmbeddedStore::open(&EmbeddedStore::path(dir.path())).expect("open store");
    let store = Arc::new(AnyStore::Embedded(store));
    let (events, orders) = ("ad-interactions", rm_schemas::topics::ORDERS);
    let source = |group: &str| {
        AnySource::Embedded(EmbeddedSource::new(log.clone(), group, events).expect("source"))
    };
    let crash = |group: &str| {
        for topic in [events, orders] {
            log.commit(group, topic, 0).expect("reset offset");
        }
        group.to_owned()
    };
    story(&log, (events, orders), store, source, crash).await;
}

/// A source that cannot append to the orders topic: an aggregator whose every batch
/// is written and whose offers are never appended (the crash the next run replays).
struct NoOffers(EmbeddedSource);

impl Source for NoOffers {
    async fn poll(
        &mut self,
        max: usize,
        wait: Duration,
    ) -> Result<Vec<rm_aggregator::source::Raw>, rm_eventlog::LogError> {
        self.0.poll(max, wait).await
    }
    fn checkpoint(&mut self) -> rm_aggregator::source::Checkpoint {
        self.0.checkpoint()
    }
    async fn commit_to(
        &mut self,
        c: rm_aggregator::source::Checkpoint,
    ) -> Result<(), rm_eventlog::LogError> {
        self.0.commit_to(c).await
    }
    fn take_rebalanced(&mut self) -> bool {
        self.0.take_rebalanced()
    }
    fn lag_probe(&self) -> LagProbe {
        self.0.lag_probe()
    }
}

/// A crash after a batch's write and before its offers reach the log (and so before
/// its offsets are committed) loses no credit: the replay looks its orders up again
/// and sends the offers. The touches are stored and committed first, so only the
/// orders' side of the lookup can find them.
#[tokio::test]
async fn offers_lost_in_a_crash_are_sent_by_the_replay() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = EmbeddedLog::open(
        &EmbeddedLogConfig::path(dir.path()),
        &EmbeddedLogConfig::default(),
    )
    .expect("open log");
    let store = EmbeddedStore::open(&EmbeddedStore::path(dir.path())).expect("open store");
    let store = Arc::new(AnyStore::Embedded(store));
    let (events, orders) = ("ad-interactions", rm_schemas::topics::ORDERS);
    let group = "rm-aggregator-test";
    let run_losing_offers = || async {
        let lost = NoOffers(EmbeddedSource::new(log.clone(), group, events).expect("source"));
        let probe = lost.lag_probe();
        let stop = CancellationToken::new();
        let task = tokio::spawn(pipeline::run(
            lost,
            Arc::clone(&store),
            "test",
            options(),
            stop.clone(),
        ));
        Running { stop, task, probe }.drained_then_stop().await;
    };
    // The touches, stored and committed before any order.
    append_all(&log, events, late_events()).await;
    append_all(&log, orders, Vec::new()).await;
    run_losing_offers().await;
    // The orders, stored; their offers lost with the crash.
    append_all(&log, orders, orders_first()).await;
    run_losing_offers().await;
    let f = ReportFilter::default();
    let tallied = rm_store::sums::sales_report(&*store, &f, &Windows::default())
        .await
        .expect("sales");
    assert_eq!(tallied, unattributed(), "every offer was lost");
    // The crash came before the orders' commit: the next run reads them again.
    log.commit(group, orders, 0).expect("reset offset");
    let running = start(
        AnySource::Embedded(EmbeddedSource::new(log.clone(), group, events).expect("source")),
        &store,
    );
    running.drained().await;
    assert_eq!(
        sales(&store).await,
        attributed(),
        "the replay sent the offers"
    );
    running.stop().await;
}

#[tokio::test]
async fn kafka_and_clickhouse() {
    let (Some((kafka, tag)), Some(url)) = (support::kafka(), support::service("RM_CLICKHOUSE_URL"))
    else {
        return;
    };
    let kafka = KafkaConfig {
        partitions: 2,
        ..kafka
    };
    let events = format!("rm-test-events-{tag}");
    let orders = format!("rm-test-orders-{tag}");
    let database = format!("rm_test_sales_{tag}");
    let ch = ClickHouseConfig {
        url: Some(url.clone()),
        database: database.clone(),
        user: "default".into(),
        password: String::new(),
    };
    let run = tokio::spawn(async move {
        let log = KafkaLog::connect(&kafka, &[events.clone(), orders.clone()])
            .await
            .expect("kafka");
        let log = AnyLog::Kafka(log);
        let store = ClickHouseStore::connect(&ch).await.expect("clickhouse");
        let store = Arc::new(AnyStore::ClickHouse(store));
        let source = |group: &str| {
            AnySource::Kafka(
                KafkaSource::connect_with_orders(
                    &kafka,
                    &format!("{group}-{tag}"),
                    &events,
                    &orders,
                )
                .expect("consumer"),
            )
        };
        // A new group starts from the earliest offsets: a crash that lost every commit.
        let crash = |group: &str| format!("{group}-after-crash");
        story(&log, (&events, &orders), store, source, crash).await;
    })
    .await;
    let client = clickhouse::Client::default()
        .with_url(url)
        .with_validation(false);
    client
        .query("DROP DATABASE IF EXISTS ?")
        .bind(clickhouse::sql::Identifier(&database))
        .execute()
        .await
        .expect("drop test database");
    if let Err(e) = run {
        std::panic::resume_unwind(e.into_panic());
    }
}

/// Before the first order, the orders topic may not exist: the source still reads the
/// events, and no error reaches the pipeline.
#[tokio::test]
async fn kafka_source_reads_events_while_the_orders_topic_is_missing() {
    let Some((kafka, tag)) = support::kafka() else {
        return;
    };
    let events = format!("rm-test-events-only-{tag}");
    let log = KafkaLog::connect(&kafka, std::slice::from_ref(&events))
        .await
        .expect("kafka");
    append_all(&log, &events, late_events()).await;
    let mut source = KafkaSource::connect_with_orders(
        &kafka,
        &format!("g-{tag}"),
        &events,
        &format!("rm-test-never-created-{tag}"),
    )
    .expect("consumer");
    let t = Instant::now();
    let mut read = Vec::new();
    while read.len() < late_events().len() {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "read {} records",
            read.len()
        );
        let batch = source
            .poll(100, Duration::from_millis(500))
            .await
            .expect("a missing topic is not an error");
        read.extend(batch);
    }
    assert!(read
        .iter()
        .all(|r| r.stream == rm_aggregator::source::Stream::Events));
    source.commit().await.expect("commit");
}
