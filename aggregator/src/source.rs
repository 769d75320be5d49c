//! Reading the event log (step 5), from either backend behind one trait.
//!
//! A source hands out batches, bounded by size and by time since the first record
//! of the batch, and remembers what it handed out; `commit` stores that position
//! durably (the embedded log's offset table, or the Kafka consumer group) and is
//! called only after the store has taken the batch. A crash between the store write
//! and the commit replays the batch, which the idempotent store absorbs.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rdkafka::consumer::{CommitMode, Consumer, ConsumerContext, Rebalance, StreamConsumer};
use rdkafka::{ClientContext, Message, Offset, TopicPartitionList};
use rm_eventlog::embedded::EmbeddedLog;
use rm_eventlog::{KafkaConfig, LogError};
use tokio::time::Instant;

/// Reads batches of raw records.
pub trait Source: Send {
    /// Up to `max` records, waiting at most `wait` after the first one (and at most
    /// `wait` for the first one). May return an empty batch.
    fn poll(
        &mut self,
        max: usize,
        wait: Duration,
    ) -> impl std::future::Future<Output = Result<Vec<Vec<u8>>, LogError>> + Send;

    /// Durably records that everything polled so far is stored.
    fn commit(&mut self) -> impl std::future::Future<Output = Result<(), LogError>> + Send;

    /// True once after partitions moved (entity caches must be dropped).
    fn take_rebalanced(&mut self) -> bool;

    /// A handle that measures the lag from another task, even while the loop waits
    /// on the store.
    fn lag_probe(&self) -> LagProbe;
}

/// Measures records not yet committed, per partition (`-1` for the embedded log).
#[derive(Clone)]
pub enum LagProbe {
    /// A Kafka consumer group's assigned partitions.
    Kafka(Arc<StreamConsumer<RebalanceFlag>>, String),
    /// The embedded log and a consumer name.
    Embedded(EmbeddedLog, String, String),
}

impl LagProbe {
    /// The lag now.
    pub async fn lag(&self) -> Vec<(i32, i64)> {
        match self.clone() {
            Self::Embedded(log, group, topic) => tokio::task::spawn_blocking(move || {
                let end = log.end_offset(&topic).ok()?;
                let done = log.committed(&group, &topic).ok()?;
                Some(vec![(-1, end.saturating_sub(done) as i64)])
            })
            .await
            .ok()
            .flatten()
            .unwrap_or_default(),
            Self::Kafka(c, topic) => tokio::task::spawn_blocking(move || {
                let Ok(assigned) = c.assignment() else {
                    return Vec::new();
                };
                let committed = c.committed(Duration::from_secs(2)).ok();
                assigned
                    .elements_for_topic(&topic)
                    .iter()
                    .filter_map(|e| {
                        let (_, high) = c
                            .fetch_watermarks(&topic, e.partition(), Duration::from_secs(2))
                            .ok()?;
                        let done = committed
                            .as_ref()
                            .and_then(|t| t.find_partition(&topic, e.partition()))
                            .and_then(|p| p.offset().to_raw())
                            .filter(|o| *o >= 0)
                            .unwrap_or(0);
                        Some((e.partition(), (high - done).max(0)))
                    })
                    .collect()
            })
            .await
            .unwrap_or_default(),
        }
    }
}

/// The embedded log as a source.
pub struct EmbeddedSource {
    log: EmbeddedLog,
    group: String,
    topic: String,
    next: u64,
    polled_to: u64,
}

impl EmbeddedSource {
    /// Resumes `group` on `topic` from its committed offset.
    pub fn new(log: EmbeddedLog, group: &str, topic: &str) -> Result<Self, LogError> {
        let next = log.committed(group, topic)?;
        Ok(Self {
            log,
            group: group.to_owned(),
            topic: topic.to_owned(),
            next,
            polled_to: next,
        })
    }

    async fn read(&self, from: u64, max: usize) -> Result<Vec<(u64, Vec<u8>)>, LogError> {
        let (log, topic) = (self.log.clone(), self.topic.clone());
        tokio::task::spawn_blocking(move || log.read(&topic, from, max))
            .await
            .map_err(|e| LogError::Unavailable(e.to_string()))?
    }
}

impl Source for EmbeddedSource {
    async fn poll(&mut self, max: usize, wait: Duration) -> Result<Vec<Vec<u8>>, LogError> {
        let deadline = Instant::now() + wait;
        let mut out = Vec::new();
        loop {
            // Register interest before reading, so an append in between is not missed.
            let appended = self.log.appended();
            let rows = self.read(self.polled_to, max - out.len()).await?;
            if let Some((last, _)) = rows.last() {
                self.polled_to = last + 1;
            }
            out.extend(rows.into_iter().map(|(_, v)| v));
            if out.len() >= max || Instant::now() >= deadline {
                return Ok(out);
            }
            if tokio::time::timeout_at(deadline, appended).await.is_err() {
                return Ok(out);
            }
        }
    }

    async fn commit(&mut self) -> Result<(), LogError> {
        if self.polled_to == self.next {
            return Ok(());
        }
        let (log, group, topic, to) = (
            self.log.clone(),
            self.group.clone(),
            self.topic.clone(),
            self.polled_to,
        );
        tokio::task::spawn_blocking(move || log.commit(&group, &topic, to))
            .await
            .map_err(|e| LogError::Unavailable(e.to_string()))??;
        self.next = to;
        Ok(())
    }

    fn take_rebalanced(&mut self) -> bool {
        false
    }

    fn lag_probe(&self) -> LagProbe {
        LagProbe::Embedded(self.log.clone(), self.group.clone(), self.topic.clone())
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
    topic: String,
    rebalanced: Arc<AtomicBool>,
    positions: BTreeMap<i32, i64>,
}

impl KafkaSource {
    /// Joins consumer group `group` on `topic` (auto-commit off; new groups start at
    /// the earliest offset).
    pub fn connect(config: &KafkaConfig, group: &str, topic: &str) -> Result<Self, LogError> {
        let rebalanced = Arc::new(AtomicBool::new(false));
        let consumer: StreamConsumer<RebalanceFlag> = rm_eventlog::kafka::client_config(config)?
            .set("group.id", group)
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("auto.offset.reset", "earliest")
            .set("session.timeout.ms", "6000")
            .set("heartbeat.interval.ms", "1000")
            .set("max.poll.interval.ms", "20000")
            .create_with_context(RebalanceFlag(Arc::clone(&rebalanced)))
            .map_err(|e| LogError::Refused(format!("consumer configuration: {e}")))?;
        consumer
            .subscribe(&[topic])
            .map_err(|e| LogError::Unavailable(e.to_string()))?;
        Ok(Self {
            consumer: Arc::new(consumer),
            topic: topic.to_owned(),
            rebalanced,
            positions: BTreeMap::new(),
        })
    }
}

impl Source for KafkaSource {
    async fn poll(&mut self, max: usize, wait: Duration) -> Result<Vec<Vec<u8>>, LogError> {
        let deadline = Instant::now() + wait;
        let mut out = Vec::new();
        while out.len() < max {
            let msg = match tokio::time::timeout_at(deadline, self.consumer.recv()).await {
                Err(_) => break,
                // Records already taken are returned (their positions are recorded);
                // the error comes back on the next poll.
                Ok(Err(e)) if out.is_empty() => return Err(rm_eventlog::kafka::classify(&e)),
                Ok(Err(e)) => {
                    tracing::debug!(error = %e, "consumer error after a partial batch");
                    break;
                }
                Ok(Ok(m)) => m,
            };
            self.positions.insert(msg.partition(), msg.offset() + 1);
            if let Some(p) = msg.payload() {
                out.push(p.to_vec());
            }
        }
        Ok(out)
    }

    async fn commit(&mut self) -> Result<(), LogError> {
        if self.positions.is_empty() {
            return Ok(());
        }
        let mut tpl = TopicPartitionList::new();
        for (p, next) in &self.positions {
            tpl.add_partition_offset(&self.topic, *p, Offset::Offset(*next))
                .map_err(|e| LogError::Unavailable(e.to_string()))?;
        }
        self.consumer
            .commit(&tpl, CommitMode::Async)
            .map_err(|e| rm_eventlog::kafka::classify(&e))?;
        self.positions.clear();
        Ok(())
    }

    fn take_rebalanced(&mut self) -> bool {
        self.rebalanced.swap(false, Ordering::Relaxed)
    }

    fn lag_probe(&self) -> LagProbe {
        LagProbe::Kafka(Arc::clone(&self.consumer), self.topic.clone())
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
    async fn poll(&mut self, max: usize, wait: Duration) -> Result<Vec<Vec<u8>>, LogError> {
        match self {
            Self::Kafka(s) => s.poll(max, wait).await,
            Self::Embedded(s) => s.poll(max, wait).await,
        }
    }
    async fn commit(&mut self) -> Result<(), LogError> {
        match self {
            Self::Kafka(s) => s.commit().await,
            Self::Embedded(s) => s.commit().await,
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
}
