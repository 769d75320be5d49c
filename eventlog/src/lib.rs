//! The event log: where an accepted event becomes durable, and where consumers read it.
//!
//! Two implementations share one trait, [`EventLog`], so that every line above them
//! (the edge's handler, the api's order intake) is the same on both:
//!
//! - [`kafka::KafkaLog`]: rdkafka `FutureProducer`, idempotent, `acks=all`; used when
//!   brokers are configured. Records are keyed by the caller (the edge uses the
//!   realised ad id, a cart event's tracking id, so one served ad's events, and one
//!   shopper's cart, stay ordered in one partition and one aggregator writes them).
//! - [`embedded::EmbeddedLog`]: append-only segment files per topic with CRC32C
//!   framing and group commit (one write and one `fdatasync` per batch); the default,
//!   for one machine. Retention removes old group commits by age and size, never past
//!   a consumer group's committed offset ([`embedded::retention`]).
//!
//! The log is mechanism only: topic, key and value are decided upstream. `append`
//! resolves `Ok` only once the record is durable (fsynced locally, or acknowledged by
//! all in-sync replicas); every error says whether a retry may succeed
//! ([`LogError::is_retryable`]).

pub mod config;
pub mod embedded;
pub mod kafka;

use std::future::Future;
use std::time::Duration;

pub use config::{EmbeddedLogConfig, KafkaConfig};

/// Errors of the event log.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LogError {
    /// The log cannot take more work right now (queue full); retry shortly.
    #[error("event log is saturated: {0}")]
    Backpressure(String),
    /// The log is unreachable or failed to make the record durable; retry later.
    #[error("event log unavailable: {0}")]
    Unavailable(String),
    /// The record can never be written (too large, unknown topic); do not retry.
    #[error("record refused by the event log: {0}")]
    Refused(String),
    /// The log is shutting down.
    #[error("event log is closed")]
    Closed,
}

impl LogError {
    /// True when the same append may succeed later.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Backpressure(_) | Self::Unavailable(_))
    }

    /// A bounded label for metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Backpressure(_) => "backpressure",
            Self::Unavailable(_) => "unavailable",
            Self::Refused(_) => "refused",
            Self::Closed => "closed",
        }
    }
}

/// A durable, append-only, topic-partitioned log.
pub trait EventLog: Send + Sync + 'static {
    /// Appends one record; resolves once it is durable.
    fn append(
        &self,
        topic: &str,
        key: &[u8],
        value: Vec<u8>,
    ) -> impl Future<Output = Result<(), LogError>> + Send;

    /// `Ok` when appends can currently succeed, else why not.
    fn readiness(&self) -> Result<(), String>;

    /// Makes everything appended so far durable, waiting at most `deadline`.
    fn flush(&self, deadline: Duration) -> impl Future<Output = Result<(), LogError>> + Send;
}

/// The log a deployment uses, chosen by configuration.
pub enum AnyLog {
    /// Kafka.
    Kafka(kafka::KafkaLog),
    /// The embedded log.
    Embedded(embedded::EmbeddedLog),
}

impl EventLog for AnyLog {
    async fn append(&self, topic: &str, key: &[u8], value: Vec<u8>) -> Result<(), LogError> {
        match self {
            Self::Kafka(l) => l.append(topic, key, value).await,
            Self::Embedded(l) => l.append(topic, key, value).await,
        }
    }

    fn readiness(&self) -> Result<(), String> {
        match self {
            Self::Kafka(l) => l.readiness(),
            Self::Embedded(l) => l.readiness(),
        }
    }

    async fn flush(&self, deadline: Duration) -> Result<(), LogError> {
        match self {
            Self::Kafka(l) => l.flush(deadline).await,
            Self::Embedded(l) => l.flush(deadline).await,
        }
    }
}

impl AnyLog {
    /// A short name of the backend, for logs.
    pub fn backend(&self) -> &'static str {
        match self {
            Self::Kafka(_) => "kafka",
            Self::Embedded(_) => "embedded",
        }
    }
}

/// Opens the log the settings select: Kafka when brokers are set (creating `topics`
/// when missing), else the embedded log under `data_dir`.
pub async fn open(
    kafka: &KafkaConfig,
    embedded: &EmbeddedLogConfig,
    data_dir: &std::path::Path,
    topics: &[String],
) -> Result<AnyLog, LogError> {
    if kafka.brokers.is_some() {
        Ok(AnyLog::Kafka(
            kafka::KafkaLog::connect(kafka, topics).await?,
        ))
    } else {
        let path = EmbeddedLogConfig::path(data_dir);
        let cfg = embedded.clone();
        let log = tokio::task::spawn_blocking(move || embedded::EmbeddedLog::open(&path, &cfg))
            .await
            .map_err(|e| LogError::Unavailable(e.to_string()))??;
        Ok(AnyLog::Embedded(log))
    }
}
