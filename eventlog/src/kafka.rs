//! The Kafka event log: an idempotent rdkafka `FutureProducer` with `acks=all`.
//!
//! An append resolves `Ok` only when the broker acknowledged the record on all
//! in-sync replicas. Retry policy, decided here once: a full producer queue is
//! [`LogError::Backpressure`]; a timed-out or broker-side transient failure is
//! [`LogError::Unavailable`] (retry later; the producer itself retries within
//! `message.timeout.ms`); an oversized record or unknown topic is
//! [`LogError::Refused`]. Readiness comes from a background metadata probe of the
//! configured topics (every partition must have a leader; not ready until the first
//! probe passes), so `/readyz` turns 503 while the brokers are away and back to
//! 200 when they return. Topics are created at start (many production clusters, and
//! the local test cluster, do not auto-create them) with the configured replication
//! factor (3 by default) capped by the brokers the metadata shows, with
//! `min.insync.replicas` (min(2, replication factor) when replicated, so `acks=all`
//! means at least two copies and writes go on with one broker down) and the
//! configured `retention.ms` / `retention.bytes`; Kafka applies retention itself,
//! by time and size only, regardless of consumer groups (unlike the embedded log).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::util::Timeout;

use crate::config::KafkaConfig;
use crate::{EventLog, LogError};

/// How often readiness is probed.
const PROBE_INTERVAL: Duration = Duration::from_secs(1);

/// Builds the librdkafka client configuration common to producers, consumers and admin.
pub fn client_config(config: &KafkaConfig) -> Result<ClientConfig, LogError> {
    let brokers = config
        .brokers
        .as_deref()
        .ok_or_else(|| LogError::Refused("no Kafka brokers configured".into()))?;
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", brokers);
    for prop in &config.properties {
        let (k, v) = prop.split_once('=').ok_or_else(|| {
            LogError::Refused(format!("kafka property '{prop}' is not key=value"))
        })?;
        c.set(k.trim(), v.trim());
    }
    Ok(c)
}

/// The topic configs topics of `replication` replicas are created with:
/// `min.insync.replicas` (see [`KafkaConfig::effective_min_insync_replicas`]),
/// `retention.ms` and `retention.bytes` when set.
pub fn topic_configs(config: &KafkaConfig, replication: i32) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    if let Some(n) = config.effective_min_insync_replicas(replication) {
        out.push(("min.insync.replicas", n.to_string()));
    }
    if let Some(ms) = config.retention_ms {
        out.push(("retention.ms", ms.to_string()));
    }
    if let Some(bytes) = config.retention_bytes {
        out.push(("retention.bytes", bytes.to_string()));
    }
    out
}

/// True when a broker's answer to a topic creation refuses its configs (rather than
/// the topic): then the topic is created again without them.
pub fn refuses_config(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::InvalidConfig
            | RDKafkaErrorCode::PolicyViolation
            | RDKafkaErrorCode::InvalidRequest
    )
}

/// Creates `topics` if they do not exist yet, with the replication factor capped by
/// the brokers the cluster shows and [`topic_configs`]. Existing topics keep their
/// configs. A broker that refuses the configs gets a warning and the topics are
/// created without them.
pub async fn ensure_topics(config: &KafkaConfig, topics: &[String]) -> Result<(), LogError> {
    let admin: AdminClient<DefaultClientContext> = client_config(config)?
        .create()
        .map_err(|e| LogError::Unavailable(e.to_string()))?;
    let replication = replication_for(config).await?;
    let configs = topic_configs(config, replication);
    let (admin, with_configs) = (&admin, configs.as_slice());
    create_with_fallback(topics.to_vec(), with_configs, |names, with| async move {
        let configs = if with { with_configs } else { &[] };
        create_topics(admin, config, replication, &names, configs).await
    })
    .await
}

/// The replication factor new topics get: the setting, capped by the brokers the
/// cluster's metadata shows now (a warning when that caps it).
async fn replication_for(config: &KafkaConfig) -> Result<i32, LogError> {
    let client: BaseConsumer = client_config(config)?
        .create()
        .map_err(|e| LogError::Unavailable(e.to_string()))?;
    let brokers = tokio::task::spawn_blocking(move || {
        client
            .fetch_metadata(None, Duration::from_secs(10))
            .map(|md| md.brokers().len())
    })
    .await
    .map_err(|e| LogError::Unavailable(e.to_string()))?
    .map_err(|e| LogError::Unavailable(format!("reading the cluster's brokers: {e}")))?;
    let replication = config.effective_replication(brokers);
    if replication < config.replication {
        tracing::warn!(
            configured = config.replication,
            brokers,
            replication,
            "fewer brokers than the replication factor: new topics get one replica per broker"
        );
    }
    Ok(replication)
}

/// The fallback policy: `create(topics, true)` creates with the configs and returns
/// the topics whose configs the broker refused; those are created again with
/// `create(refused, false)`, after a warning.
pub(crate) async fn create_with_fallback<F, Fut>(
    topics: Vec<String>,
    configs: &[(&'static str, String)],
    mut create: F,
) -> Result<(), LogError>
where
    F: FnMut(Vec<String>, bool) -> Fut,
    Fut: std::future::Future<Output = Result<Vec<(String, RDKafkaErrorCode)>, LogError>>,
{
    let refused = create(topics, true).await?;
    let Some((_, code)) = refused.first() else {
        return Ok(());
    };
    let names: Vec<String> = refused.iter().map(|(t, _)| t.clone()).collect();
    tracing::warn!(
        topics = ?names,
        configs = ?configs,
        error = %code,
        "the broker refused the topic configs; creating the topics without them"
    );
    match create(names, false).await?.first() {
        Some((topic, code)) => Err(LogError::Unavailable(format!(
            "creating topic {topic}: {code}"
        ))),
        None => Ok(()),
    }
}

/// Creates `topics` with `configs`; returns the topics whose configs were refused.
async fn create_topics(
    admin: &AdminClient<DefaultClientContext>,
    config: &KafkaConfig,
    replication: i32,
    topics: &[String],
    configs: &[(&'static str, String)],
) -> Result<Vec<(String, RDKafkaErrorCode)>, LogError> {
    let new: Vec<NewTopic<'_>> = topics
        .iter()
        .map(|t| {
            configs.iter().fold(
                NewTopic::new(t, config.partitions, TopicReplication::Fixed(replication)),
                |topic, (k, v)| topic.set(k, v),
            )
        })
        .collect();
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    let results = admin
        .create_topics(&new, &opts)
        .await
        .map_err(|e| LogError::Unavailable(e.to_string()))?;
    let mut refused = Vec::new();
    for r in results {
        match r {
            Ok(topic) => tracing::info!(
                topic,
                partitions = config.partitions,
                replication,
                configs = ?configs,
                "created topic"
            ),
            Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((topic, code)) if !configs.is_empty() && refuses_config(code) => {
                refused.push((topic, code));
            }
            Err((topic, code)) => {
                return Err(LogError::Unavailable(format!(
                    "creating topic {topic}: {code}"
                )))
            }
        }
    }
    Ok(refused)
}

struct Health {
    ready: AtomicBool,
    last_error: Mutex<String>,
}

/// The Kafka event log.
#[derive(Clone)]
pub struct KafkaLog {
    producer: FutureProducer,
    health: Arc<Health>,
}

impl KafkaLog {
    /// Connects a producer, creates `topics` when missing, and starts the readiness probe.
    pub async fn connect(config: &KafkaConfig, topics: &[String]) -> Result<Self, LogError> {
        ensure_topics(config, topics).await?;
        let producer: FutureProducer = client_config(config)?
            .set("enable.idempotence", "true")
            .set("acks", "all")
            .set("compression.type", &config.compression)
            .set("linger.ms", config.linger_ms.to_string())
            .set(
                "queue.buffering.max.messages",
                config.queue_max_messages.to_string(),
            )
            .set("message.timeout.ms", config.message_timeout_ms.to_string())
            .create()
            .map_err(|e| LogError::Refused(format!("producer configuration: {e}")))?;
        let health = Arc::new(Health {
            // Not ready until the first probe has seen a leader for every partition:
            // a topic created a moment ago takes writes only once they are elected.
            ready: AtomicBool::new(false),
            last_error: Mutex::new("not probed yet".to_owned()),
        });
        let log = Self { producer, health };
        log.spawn_probe(topics.to_vec());
        Ok(log)
    }

    fn spawn_probe(&self, topics: Vec<String>) {
        let producer = self.producer.clone();
        let health = Arc::downgrade(&self.health);
        tokio::spawn(async move {
            let mut first = true;
            loop {
                if !std::mem::take(&mut first) {
                    tokio::time::sleep(PROBE_INTERVAL).await;
                }
                let Some(h) = health.upgrade() else { break };
                let p = producer.clone();
                let ts = topics.clone();
                let probe = tokio::task::spawn_blocking(move || {
                    for t in &ts {
                        let md = p
                            .client()
                            .fetch_metadata(Some(t), Duration::from_secs(2))
                            .map_err(|e| e.to_string())?;
                        let Some(mt) = md
                            .topics()
                            .iter()
                            .find(|mt| mt.name() == t.as_str() && mt.error().is_none())
                        else {
                            return Err(format!("topic {t} has no metadata"));
                        };
                        if mt.partitions().is_empty() {
                            return Err(format!("topic {t} has no partitions"));
                        }
                        if let Some(p) = mt
                            .partitions()
                            .iter()
                            .find(|p| p.leader() < 0 || p.error().is_some())
                        {
                            return Err(format!("topic {t} partition {} has no leader", p.id()));
                        }
                    }
                    Ok(())
                })
                .await
                .unwrap_or_else(|e| Err(e.to_string()));
                match probe {
                    Ok(()) => {
                        if !h.ready.swap(true, Ordering::Relaxed) {
                            tracing::info!("kafka reachable: every partition has a leader");
                        }
                    }
                    Err(e) => {
                        if h.ready.swap(false, Ordering::Relaxed) {
                            tracing::warn!(error = %e, "kafka unreachable");
                        }
                        if let Ok(mut last) = h.last_error.lock() {
                            *last = e;
                        }
                    }
                }
            }
        });
    }

    /// The underlying producer (for metrics of its queue).
    pub fn producer(&self) -> &FutureProducer {
        &self.producer
    }
}

/// Classifies a producer error: the one retry policy of this sink.
pub fn classify(e: &KafkaError) -> LogError {
    match e.rdkafka_error_code() {
        Some(RDKafkaErrorCode::QueueFull) => LogError::Backpressure(e.to_string()),
        Some(
            RDKafkaErrorCode::MessageSizeTooLarge
            | RDKafkaErrorCode::UnknownTopic
            | RDKafkaErrorCode::UnknownTopicOrPartition
            | RDKafkaErrorCode::InvalidRecord
            | RDKafkaErrorCode::TopicAuthorizationFailed,
        ) => LogError::Refused(e.to_string()),
        _ => LogError::Unavailable(e.to_string()),
    }
}

impl EventLog for KafkaLog {
    async fn append(&self, topic: &str, key: &[u8], value: Vec<u8>) -> Result<(), LogError> {
        let record = FutureRecord::to(topic).key(key).payload(&value);
        let delivery = self
            .producer
            .send_result(record)
            .map_err(|(e, _)| classify(&e))?;
        match delivery.await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err((e, _))) => Err(classify(&e)),
            Err(_) => Err(LogError::Closed),
        }
    }

    fn readiness(&self) -> Result<(), String> {
        if self.health.ready.load(Ordering::Relaxed) {
            Ok(())
        } else {
            let why = self
                .health
                .last_error
                .lock()
                .map(|e| e.clone())
                .unwrap_or_default();
            Err(format!("kafka unreachable: {why}"))
        }
    }

    async fn flush(&self, deadline: Duration) -> Result<(), LogError> {
        let p = self.producer.clone();
        tokio::task::spawn_blocking(move || p.flush(Timeout::After(deadline)))
            .await
            .map_err(|e| LogError::Unavailable(e.to_string()))?
            .map_err(|e| classify(&e))
    }
}

#[cfg(test)]
mod tests;
