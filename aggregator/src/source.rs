//! Reading the event log (step 5), from either backend behind one trait.
//!
//! A source reads two topics: the interaction events (`ad-interactions`, or the
//! configured topic) and the orders (`orders`, [`rm_schemas::topics::ORDERS`]), and
//! tags every record with the [`Stream`] it came from. It hands out batches, bounded
//! by size and by time since the first record of the batch, and remembers what it
//! handed out; `commit` stores that position durably (the embedded log's offset table,
//! one offset per topic, or the Kafka consumer group) and is called only after the
//! store has taken the batch. A crash between the store write and the commit, or
//! between the commits of the two topics, replays records, which the idempotent
//! store absorbs.
//!
//! A topic that does not exist yet (no order was ever sent) reads as empty; Kafka
//! looks for it again every [`METADATA_REFRESH_MS`].

use std::collections::BTreeMap;
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use rdkafka::consumer::{CommitMode, Consumer, ConsumerContext, Rebalance, StreamConsumer};
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::{ClientContext, Message, Offset, TopicPartitionList};
use rm_eventlog::embedded::EmbeddedLog;
use rm_eventlog::{KafkaConfig, LogError};
use rm_schemas::topics::ORDERS;
use tokio::time::Instant;

/// How often (ms) the Kafka consumer refreshes topic metadata, so a topic created
/// after it started (the first order) is read soon.
pub const METADATA_REFRESH_MS: u32 = 10_000;

/// Which topic a record came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Stream {
    /// Interaction events.
    Events,
    /// Orders.
    Orders,
}

impl Stream {
    /// Bounded label for metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Events => "events",
            Self::Orders => "orders",
        }
    }
}

/// One record read from the log; dereferences to its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Raw {
    /// Where it came from.
    pub stream: Stream,
    /// The record.
    pub bytes: Vec<u8>,
    /// Its partition (`-1`: the embedded log's only one).
    pub partition: i32,
    /// Its offset in the partition.
    pub offset: i64,
}

impl Deref for Raw {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.bytes
    }
}

/// Reads batches of raw records.
pub trait Source: Send {
    /// Up to `max` records: those the log holds for this reader now, without waiting
    /// for more once one is there; when there is none, the first to come within
    /// `wait`. May return an empty batch. The loop's reader gathers polls into a
    /// batch until the loop asks for one (see `crate::pipeline`), so a poll that
    /// waited for more would only delay a batch the loop is ready for.
    fn poll(
        &mut self,
        max: usize,
        wait: Duration,
    ) -> impl std::future::Future<Output = Result<Vec<Raw>, LogError>> + Send;

    /// Where the records polled so far end (and, for Kafka, which partitions they
    /// came from since the last checkpoint). Commit it with [`Self::commit_to`] once the
    /// store holds those records: the loop polls the next batch while one is written.
    fn checkpoint(&mut self) -> Checkpoint;

    /// Durably records that everything up to `checkpoint` is stored. Checkpoints are
    /// committed in the order they were taken.
    fn commit_to(
        &mut self,
        checkpoint: Checkpoint,
    ) -> impl std::future::Future<Output = Result<(), LogError>> + Send;

    /// Durably records that everything polled so far is stored.
    fn commit(&mut self) -> impl std::future::Future<Output = Result<(), LogError>> + Send {
        let checkpoint = self.checkpoint();
        self.commit_to(checkpoint)
    }

    /// True once after partitions moved (entity caches must be dropped).
    fn take_rebalanced(&mut self) -> bool;

    /// A handle that measures the lag from another task, even while the loop waits
    /// on the store.
    fn lag_probe(&self) -> LagProbe;

    /// A handle that appends to the orders topic this source reads (the offers of
    /// touches to orders, `crate::sales`); `None` for a source that cannot (a test's).
    fn appender(&self) -> Option<Appender> {
        None
    }
}

/// Records the embedded [`Appender`] queues at once: a fraction of the log writer's
/// queue (`RM_LOG_QUEUE_MAX`, 65,536 by default), which the edge's beacons share in
/// `retail-media all`.
pub const EMBEDDED_APPEND_CHUNK: usize = 1_024;

/// Appends records to the orders topic a source reads, durably before it returns.
#[derive(Clone)]
pub enum Appender {
    /// A Kafka producer (idempotent, every in-sync replica), the topic, the group.
    Kafka(rdkafka::producer::FutureProducer, String, String),
    /// The embedded log, the topic, the group.
    Embedded(EmbeddedLog, String, String),
}

impl Appender {
    /// The consumer group of the source: what it appends is for that group alone.
    pub fn group(&self) -> &str {
        match self {
            Self::Kafka(_, _, g) | Self::Embedded(_, _, g) => g,
        }
    }

    /// Appends `records` (key, value), all of them durable when it returns `Ok`.
    pub async fn append(&self, records: &[(Vec<u8>, Vec<u8>)]) -> Result<(), LogError> {
        use rm_eventlog::EventLog as _;
        match self {
            Self::Embedded(log, topic, _) => {
                // A chunk's records queued together share the writer's group commits
                // (awaited one by one, each waited out a commit of its own: a batch's
                // ten thousand offers took seconds). Chunks leave the writer's queue
                // room for the edge's beacons.
                for chunk in records.chunks(EMBEDDED_APPEND_CHUNK) {
                    let appends = chunk.iter().map(|(k, v)| log.append(topic, k, v.clone()));
                    for appended in futures_util::future::join_all(appends).await {
                        appended?;
                    }
                }
                Ok(())
            }
            Self::Kafka(producer, topic, _) => {
                let mut pending = Vec::with_capacity(records.len());
                for (k, v) in records {
                    let record = rdkafka::producer::FutureRecord::to(topic).key(k).payload(v);
                    let delivery = producer
                        .send_result(record)
                        .map_err(|(e, _)| rm_eventlog::kafka::classify(&e))?;
                    pending.push(delivery);
                }
                for delivery in pending {
                    match delivery.await {
                        Ok(Ok(_)) => {}
                        Ok(Err((e, _))) => return Err(rm_eventlog::kafka::classify(&e)),
                        Err(_) => return Err(LogError::Closed),
                    }
                }
                Ok(())
            }
        }
    }
}

/// Positions to commit: the next offset per (stream, partition), `-1` standing for
/// the embedded log's single partition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Checkpoint(pub BTreeMap<(Stream, i32), i64>);

/// Measures records not yet committed, per topic and partition (`-1` for the
/// embedded log).
#[derive(Clone)]
pub enum LagProbe {
    /// A Kafka consumer group's assigned partitions of these topics.
    Kafka(Arc<StreamConsumer<RebalanceFlag>>, Vec<(Stream, String)>),
    /// The embedded log, a consumer name and the topics.
    Embedded(EmbeddedLog, String, Vec<(Stream, String)>),
}

impl LagProbe {
    /// The lag now, per (stream, partition).
    pub async fn lag(&self) -> Vec<((Stream, i32), i64)> {
        match self.clone() {
            Self::Embedded(log, group, topics) => tokio::task::spawn_blocking(move || {
                topics
                    .iter()
                    .map(|(stream, topic)| {
                        let end = log.end_offset(topic).ok()?;
                        let done = log.committed(&group, topic).ok()?;
                        Some(((*stream, -1), end.saturating_sub(done) as i64))
                    })
                    .collect::<Option<Vec<_>>>()
            })
            .await
            .ok()
            .flatten()
            .unwrap_or_default(),
            Self::Kafka(c, topics) => tokio::task::spawn_blocking(move || {
                let Ok(assigned) = c.assignment() else {
                    return Vec::new();
                };
                let committed = c.committed(Duration::from_secs(2)).ok();
                let mut out = Vec::new();
                for (stream, topic) in &topics {
                    for e in assigned.elements_for_topic(topic) {
                        let Ok((_, high)) =
                            c.fetch_watermarks(topic, e.partition(), Duration::from_secs(2))
                        else {
                            continue;
                        };
                        let done = committed
                            .as_ref()
                            .and_then(|t| t.find_partition(topic, e.partition()))
                            .and_then(|p| p.offset().to_raw())
                            .filter(|o| *o >= 0)
                            .unwrap_or(0);
                        out.push(((*stream, e.partition()), (high - done).max(0)));
                    }
                }
                out
            })
            .await
            .unwrap_or_default(),
        }
    }
}

/// A topic read by the embedded source: its committed and polled positions.
struct Cursor {
    stream: Stream,
    topic: String,
    next: u64,
    polled_to: u64,
}

/// The embedded log as a source.
pub struct EmbeddedSource {
    log: EmbeddedLog,
    group: String,
    cursors: Vec<Cursor>,
}

impl EmbeddedSource {
    /// Resumes `group` on `topic` and on the orders topic from their committed offsets.
    pub fn new(log: EmbeddedLog, group: &str, topic: &str) -> Result<Self, LogError> {
        Self::with_orders(log, group, topic, ORDERS)
    }

    /// As [`Self::new`], reading orders from `orders_topic`.
    pub fn with_orders(
        log: EmbeddedLog,
        group: &str,
        topic: &str,
        orders_topic: &str,
    ) -> Result<Self, LogError> {
        let mut cursors = Vec::new();
        for (stream, t) in [(Stream::Orders, orders_topic), (Stream::Events, topic)] {
            let next = log.committed(group, t)?;
            cursors.push(Cursor {
                stream,
                topic: t.to_owned(),
                next,
                polled_to: next,
            });
        }
        Ok(Self {
            log,
            group: group.to_owned(),
            cursors,
        })
    }

    async fn read(
        &self,
        topic: &str,
        from: u64,
        max: usize,
    ) -> Result<Vec<(u64, Vec<u8>)>, LogError> {
        let (log, topic) = (self.log.clone(), topic.to_owned());
        tokio::task::spawn_blocking(move || log.read(&topic, from, max))
            .await
            .map_err(|e| LogError::Unavailable(e.to_string()))?
    }
}

impl Source for EmbeddedSource {
    fn checkpoint(&mut self) -> Checkpoint {
        Checkpoint(
            self.cursors
                .iter()
                .map(|c| ((c.stream, -1), c.polled_to as i64))
                .collect(),
        )
    }

    async fn poll(&mut self, max: usize, wait: Duration) -> Result<Vec<Raw>, LogError> {
        let deadline = Instant::now() + wait;
        loop {
            let mut out = Vec::new();
            // Register interest before reading, so an append in between is not missed.
            let appended = self.log.appended();
            for i in 0..self.cursors.len() {
                // Orders (read first) take at most half of the room left, so neither
                // topic starves the other.
                let room = max - out.len();
                let room = if i + 1 < self.cursors.len() {
                    room.div_ceil(2)
                } else {
                    room
                };
                if room == 0 {
                    continue;
                }
                let (topic, from) = (self.cursors[i].topic.clone(), self.cursors[i].polled_to);
                let rows = self.read(&topic, from, room).await?;
                let c = &mut self.cursors[i];
                if let Some((last, _)) = rows.last() {
                    c.polled_to = last + 1;
                }
                let stream = c.stream;
                out.extend(rows.into_iter().map(|(offset, bytes)| Raw {
                    stream,
                    bytes,
                    partition: -1,
                    offset: i64::try_from(offset).unwrap_or(i64::MAX),
                }));
            }
            if !out.is_empty() || Instant::now() >= deadline {
                return Ok(out);
            }
            if tokio::time::timeout_at(deadline, appended).await.is_err() {
                return Ok(out);
            }
        }
    }

    async fn commit_to(&mut self, checkpoint: Checkpoint) -> Result<(), LogError> {
        for c in &mut self.cursors {
            let Some(&to) = checkpoint.0.get(&(c.stream, -1)) else {
                continue;
            };
            let to = to.max(0) as u64;
            if to <= c.next {
                continue;
            }
            let (log, group, topic) = (self.log.clone(), self.group.clone(), c.topic.clone());
            tokio::task::spawn_blocking(move || log.commit(&group, &topic, to))
                .await
                .map_err(|e| LogError::Unavailable(e.to_string()))??;
            c.next = to;
        }
        Ok(())
    }

    fn take_rebalanced(&mut self) -> bool {
        false
    }

    fn lag_probe(&self) -> LagProbe {
        let topics = self
            .cursors
            .iter()
            .map(|c| (c.stream, c.topic.clone()))
            .collect();
        LagProbe::Embedded(self.log.clone(), self.group.clone(), topics)
    }

    fn appender(&self) -> Option<Appender> {
        let orders = self.cursors.iter().find(|c| c.stream == Stream::Orders)?;
        Some(Appender::Embedded(
            self.log.clone(),
            orders.topic.clone(),
            self.group.clone(),
        ))
    }
}

/// Flags rebalances so the pipeline can drop its caches.
pub struct RebalanceFlag(Arc<AtomicBool>);

impl ClientContext for RebalanceFlag {}

impl ConsumerContext for RebalanceFlag {
    fn post_rebalance(
        &self,
        _base: &rdkafka::consumer::BaseConsumer<Self>,
        rebalance: &Rebalance<'_>,
    ) {
        tracing::info!(?rebalance, "consumer group rebalanced");
        self.0.store(true, Ordering::Relaxed);
    }
}

/// A Kafka consumer group as a source.
pub struct KafkaSource {
    consumer: Arc<StreamConsumer<RebalanceFlag>>,
    topics: Vec<(Stream, String)>,
    rebalanced: Arc<AtomicBool>,
    positions: BTreeMap<(Stream, i32), i64>,
    /// Appends the offers to the orders topic.
    producer: rdkafka::producer::FutureProducer,
    /// The consumer group.
    group: String,
}

impl KafkaSource {
    /// Joins consumer group `group` on `topic` and the orders topic (auto-commit off;
    /// new groups start at the earliest offset).
    pub fn connect(config: &KafkaConfig, group: &str, topic: &str) -> Result<Self, LogError> {
        Self::connect_with_orders(config, group, topic, ORDERS)
    }

    /// As [`Self::connect`], reading orders from `orders_topic`.
    pub fn connect_with_orders(
        config: &KafkaConfig,
        group: &str,
        topic: &str,
        orders_topic: &str,
    ) -> Result<Self, LogError> {
        let rebalanced = Arc::new(AtomicBool::new(false));
        let consumer: StreamConsumer<RebalanceFlag> = rm_eventlog::kafka::client_config(config)?
            .set("group.id", group)
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("auto.offset.reset", "earliest")
            .set("session.timeout.ms", "6000")
            .set("heartbeat.interval.ms", "1000")
            .set("max.poll.interval.ms", "20000")
            .set(
                "topic.metadata.refresh.interval.ms",
                METADATA_REFRESH_MS.to_string(),
            )
            .create_with_context(RebalanceFlag(Arc::clone(&rebalanced)))
            .map_err(|e| LogError::Refused(format!("consumer configuration: {e}")))?;
        consumer
            .subscribe(&[topic, orders_topic])
            .map_err(|e| LogError::Unavailable(e.to_string()))?;
        Ok(Self {
            consumer: Arc::new(consumer),
            topics: vec![
                (Stream::Events, topic.to_owned()),
                (Stream::Orders, orders_topic.to_owned()),
            ],
            rebalanced,
            positions: BTreeMap::new(),
            producer: rm_eventlog::kafka::client_config(config)?
                .set("enable.idempotence", "true")
                .set("acks", "all")
                .create()
                .map_err(|e| LogError::Refused(format!("producer configuration: {e}")))?,
            group: group.to_owned(),
        })
    }

    fn stream_of(&self, topic: &str) -> Option<Stream> {
        self.topics
            .iter()
            .find(|(_, t)| t == topic)
            .map(|(s, _)| *s)
    }

    fn topic_of(&self, stream: Stream) -> &str {
        self.topics
            .iter()
            .find(|(s, _)| *s == stream)
            .map_or("", |(_, t)| t.as_str())
    }
}

/// A subscribed topic that does not exist (yet): not a failure of the source.
fn missing_topic(e: &rdkafka::error::KafkaError) -> bool {
    matches!(
        e.rdkafka_error_code(),
        Some(RDKafkaErrorCode::UnknownTopicOrPartition | RDKafkaErrorCode::UnknownTopic)
    )
}

impl Source for KafkaSource {
    async fn poll(&mut self, max: usize, wait: Duration) -> Result<Vec<Raw>, LogError> {
        let deadline = Instant::now() + wait;
        let mut out = Vec::new();
        while out.len() < max {
            // The first record is waited for; the rest are those librdkafka holds
            // fetched now.
            let next = if out.is_empty() {
                tokio::time::timeout_at(deadline, self.consumer.recv())
                    .await
                    .ok()
            } else {
                self.consumer.recv().now_or_never()
            };
            let msg = match next {
                None => break,
                Some(Err(e)) if missing_topic(&e) => {
                    tracing::debug!(error = %e, "a subscribed topic does not exist yet");
                    continue;
                }
                // Records already taken are returned (their positions are recorded);
                // the error comes back on the next poll.
                Some(Err(e)) if out.is_empty() => return Err(rm_eventlog::kafka::classify(&e)),
                Some(Err(e)) => {
                    tracing::debug!(error = %e, "consumer error after a partial batch");
                    break;
                }
                Some(Ok(m)) => m,
            };
            let Some(stream) = self.stream_of(msg.topic()) else {
                continue;
            };
            self.positions
                .insert((stream, msg.partition()), msg.offset() + 1);
            if let Some(p) = msg.payload() {
                out.push(Raw {
                    stream,
                    bytes: p.to_vec(),
                    partition: msg.partition(),
                    offset: msg.offset(),
                });
            }
        }
        Ok(out)
    }

    fn checkpoint(&mut self) -> Checkpoint {
        // Taken, not copied: a later checkpoint holds the partitions read since.
        Checkpoint(std::mem::take(&mut self.positions))
    }

    async fn commit_to(&mut self, checkpoint: Checkpoint) -> Result<(), LogError> {
        if checkpoint.0.is_empty() {
            return Ok(());
        }
        let mut tpl = TopicPartitionList::new();
        for ((stream, p), next) in &checkpoint.0 {
            tpl.add_partition_offset(self.topic_of(*stream), *p, Offset::Offset(*next))
                .map_err(|e| LogError::Unavailable(e.to_string()))?;
        }
        self.consumer
            .commit(&tpl, CommitMode::Async)
            .map_err(|e| rm_eventlog::kafka::classify(&e))
    }

    fn take_rebalanced(&mut self) -> bool {
        self.rebalanced.swap(false, Ordering::Relaxed)
    }

    fn lag_probe(&self) -> LagProbe {
        LagProbe::Kafka(Arc::clone(&self.consumer), self.topics.clone())
    }

    fn appender(&self) -> Option<Appender> {
        let (_, topic) = self.topics.iter().find(|(s, _)| *s == Stream::Orders)?;
        Some(Appender::Kafka(
            self.producer.clone(),
            topic.clone(),
            self.group.clone(),
        ))
    }
}

/// The source a deployment uses.
pub enum AnySource {
    /// Kafka.
    Kafka(KafkaSource),
    /// The embedded log.
    Embedded(EmbeddedSource),
}

impl Source for AnySource {
    async fn poll(&mut self, max: usize, wait: Duration) -> Result<Vec<Raw>, LogError> {
        match self {
            Self::Kafka(s) => s.poll(max, wait).await,
            Self::Embedded(s) => s.poll(max, wait).await,
        }
    }
    fn checkpoint(&mut self) -> Checkpoint {
        match self {
            Self::Kafka(s) => s.checkpoint(),
            Self::Embedded(s) => s.checkpoint(),
        }
    }
    async fn commit_to(&mut self, checkpoint: Checkpoint) -> Result<(), LogError> {
        match self {
            Self::Kafka(s) => s.commit_to(checkpoint).await,
            Self::Embedded(s) => s.commit_to(checkpoint).await,
        }
    }
    fn take_rebalanced(&mut self) -> bool {
        match self {
            Self::Kafka(s) => s.take_rebalanced(),
            Self::Embedded(s) => s.take_rebalanced(),
        }
    }
    fn lag_probe(&self) -> LagProbe {
        match self {
            Self::Kafka(s) => s.lag_probe(),
            Self::Embedded(s) => s.lag_probe(),
        }
    }
    fn appender(&self) -> Option<Appender> {
        match self {
            Self::Kafka(s) => s.appender(),
            Self::Embedded(s) => s.appender(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rm_eventlog::{EmbeddedLogConfig, EventLog};

    /// The loop polls batch N+1 before batch N is stored: committing N's checkpoint
    /// then must cover N only, and a source resumed from it reads N+1 again.
    #[tokio::test]
    async fn a_checkpoint_commits_only_what_was_polled_before_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = EmbeddedLog::open(&dir.path().join("log.redb"), &EmbeddedLogConfig::default())
            .expect("open");
        for i in 0..10u8 {
            log.append("events", b"k", vec![i]).await.expect("append");
        }
        let mut src =
            EmbeddedSource::with_orders(log.clone(), "g", "events", "orders").expect("source");
        let first = src.poll(4, Duration::from_millis(50)).await.expect("poll");
        assert_eq!(first.len(), 4);
        let at_four = src.checkpoint();
        let second = src.poll(4, Duration::from_millis(50)).await.expect("poll");
        assert_eq!(second[0].bytes, vec![4]);
        let at_eight = src.checkpoint();
        src.commit_to(at_four).await.expect("commit");
        assert_eq!(log.committed("g", "events").expect("committed"), 4);

        let mut resumed =
            EmbeddedSource::with_orders(log.clone(), "g", "events", "orders").expect("source");
        let again = resumed
            .poll(100, Duration::from_millis(50))
            .await
            .expect("poll");
        assert_eq!(
            again.iter().map(|r| r.bytes[0]).collect::<Vec<_>>(),
            (4..10).collect::<Vec<u8>>()
        );

        src.commit_to(at_eight).await.expect("commit");
        assert_eq!(log.committed("g", "events").expect("committed"), 8);
        // An empty checkpoint (nothing polled since) moves nothing.
        let none = src.checkpoint();
        src.commit_to(none).await.expect("commit");
        assert_eq!(log.committed("g", "events").expect("committed"), 8);
    }
}
