//! Settings of the event log, shared by every service that reads or writes it.

use std::path::PathBuf;

/// Default of `--kafka-partitions`.
pub const DEFAULT_KAFKA_PARTITIONS: i32 = 6;
/// Default of `--kafka-replication`: three copies of every record (capped by the
/// number of brokers the cluster shows, so one broker of a development setup works).
pub const DEFAULT_KAFKA_REPLICATION: i32 = 3;
/// Default of `--kafka-compression`.
pub const DEFAULT_KAFKA_COMPRESSION: &str = "lz4";
/// Default of `--kafka-linger-ms`.
pub const DEFAULT_KAFKA_LINGER_MS: u32 = 10;
/// Default of `--kafka-queue-max-messages`.
pub const DEFAULT_KAFKA_QUEUE_MAX_MESSAGES: u32 = 200_000;
/// Default of `--kafka-message-timeout-ms`.
pub const DEFAULT_KAFKA_MESSAGE_TIMEOUT_MS: u32 = 10_000;

/// Kafka settings. Kafka is used when `brokers` is set.
#[derive(Debug, Clone, clap::Args)]
pub struct KafkaConfig {
    /// Comma-separated bootstrap brokers (host:port); when set, Kafka is the event log.
    #[arg(long = "kafka-brokers", env = "RM_KAFKA_BROKERS")]
    pub brokers: Option<String>,
    /// Partitions of topics the service creates at start (existing topics are kept).
    #[arg(
        long = "kafka-partitions",
        env = "RM_KAFKA_PARTITIONS",
        default_value_t = DEFAULT_KAFKA_PARTITIONS
    )]
    pub partitions: i32,
    /// Replication factor of topics the service creates, capped by the number of
    /// brokers the cluster's metadata shows at creation (with a warning), so the
    /// default 3 also works on a single development broker.
    #[arg(
        long = "kafka-replication",
        env = "RM_KAFKA_REPLICATION",
        default_value_t = DEFAULT_KAFKA_REPLICATION
    )]
    pub replication: i32,
    /// Producer compression codec: none, gzip, snappy, lz4 or zstd.
    #[arg(
        long = "kafka-compression",
        env = "RM_KAFKA_COMPRESSION",
        default_value = DEFAULT_KAFKA_COMPRESSION
    )]
    pub compression: String,
    /// Producer linger in milliseconds (batching delay). Every acknowledged beacon waits
    /// for it; on a replicated cluster (`acks=all`, three brokers) 10 ms measured 2.4x
    /// the beacons per second of 1 ms at 0.13x the edge's CPU per beacon and 0.34x the
    /// brokers' (fewer, fuller produce requests; BENCHMARKS.md, issue 24).
    #[arg(
        long = "kafka-linger-ms",
        env = "RM_KAFKA_LINGER_MS",
        default_value_t = DEFAULT_KAFKA_LINGER_MS
    )]
    pub linger_ms: u32,
    /// Most messages queued in the producer before appends are refused with back-pressure.
    #[arg(
        long = "kafka-queue-max-messages",
        env = "RM_KAFKA_QUEUE_MAX_MESSAGES",
        default_value_t = DEFAULT_KAFKA_QUEUE_MAX_MESSAGES
    )]
    pub queue_max_messages: u32,
    /// How long the producer keeps retrying one message before it fails it.
    #[arg(
        long = "kafka-message-timeout-ms",
        env = "RM_KAFKA_MESSAGE_TIMEOUT_MS",
        default_value_t = DEFAULT_KAFKA_MESSAGE_TIMEOUT_MS
    )]
    pub message_timeout_ms: u32,
    /// Extra librdkafka properties, `key=value`, comma-separated (for example TLS or SASL).
    #[arg(
        long = "kafka-property",
        env = "RM_KAFKA_PROPERTIES",
        value_delimiter = ',',
        hide_env_values = true
    )]
    pub properties: Vec<String>,
    /// `min.insync.replicas` of topics the service creates: how many replicas must
    /// hold a record before `acks=all` acknowledges it. Unset: min(2, replication)
    /// when the (capped) replication factor is above 1, else the broker's default
    /// (with 3 replicas and 2: a write survives one broker's loss and goes on while
    /// one broker is down). A broker
    /// that refuses it gets a warning and the topic is created without it.
    #[arg(
        long = "kafka-min-insync-replicas",
        env = "RM_KAFKA_MIN_INSYNC_REPLICAS"
    )]
    pub min_insync_replicas: Option<i32>,
    /// `retention.ms` of topics the service creates (-1: keep forever). Unset: the
    /// broker's default (Kafka's is 7 days).
    #[arg(
        id = "kafka_retention_ms",
        long = "kafka-retention-ms",
        env = "RM_KAFKA_RETENTION_MS"
    )]
    pub retention_ms: Option<i64>,
    /// `retention.bytes` of topics the service creates, per partition (-1: no size
    /// limit). Unset: the broker's default (Kafka's is no limit).
    #[arg(
        id = "kafka_retention_bytes",
        long = "kafka-retention-bytes",
        env = "RM_KAFKA_RETENTION_BYTES"
    )]
    pub retention_bytes: Option<i64>,
}

impl KafkaConfig {
    /// The replication factor to create topics with on a cluster showing `brokers`
    /// brokers: the setting, capped by `brokers` (at least 1).
    pub fn effective_replication(&self, brokers: usize) -> i32 {
        let brokers = i32::try_from(brokers).unwrap_or(i32::MAX).max(1);
        self.replication.clamp(1, brokers)
    }

    /// The `min.insync.replicas` to create topics with, if any, for topics of
    /// `replication` replicas (see the field).
    pub fn effective_min_insync_replicas(&self, replication: i32) -> Option<i32> {
        self.min_insync_replicas
            .or((replication > 1).then(|| replication.min(2)))
    }
}

impl Default for KafkaConfig {
    fn default() -> Self {
        Self {
            brokers: None,
            partitions: DEFAULT_KAFKA_PARTITIONS,
            replication: DEFAULT_KAFKA_REPLICATION,
            compression: DEFAULT_KAFKA_COMPRESSION.into(),
            linger_ms: DEFAULT_KAFKA_LINGER_MS,
            queue_max_messages: DEFAULT_KAFKA_QUEUE_MAX_MESSAGES,
            message_timeout_ms: DEFAULT_KAFKA_MESSAGE_TIMEOUT_MS,
            properties: Vec::new(),
            min_insync_replicas: None,
            retention_ms: None,
            retention_bytes: None,
        }
    }
}

/// Default of `--log-batch-max`.
pub const DEFAULT_LOG_BATCH_MAX: usize = 4096;
/// Default of `--log-queue-max`.
pub const DEFAULT_LOG_QUEUE_MAX: usize = 65_536;
/// Default of `--log-retention-hours` (7 days, Kafka's default).
pub const DEFAULT_LOG_RETENTION_HOURS: u64 = 168;
/// Default of `--log-retention-bytes` (10 GiB per topic).
pub const DEFAULT_LOG_RETENTION_BYTES: u64 = 10 << 30;
/// Default of `--log-retention-check-secs`.
pub const DEFAULT_LOG_RETENTION_CHECK_SECS: u64 = 60;

/// Embedded log settings.
#[derive(Debug, Clone, clap::Args)]
pub struct EmbeddedLogConfig {
    /// Most records written in one group commit (one fsync).
    #[arg(
        long = "log-batch-max",
        env = "RM_LOG_BATCH_MAX",
        default_value_t = DEFAULT_LOG_BATCH_MAX
    )]
    pub batch_max: usize,
    /// Most appends waiting for the writer before appends are refused with back-pressure.
    #[arg(
        long = "log-queue-max",
        env = "RM_LOG_QUEUE_MAX",
        default_value_t = DEFAULT_LOG_QUEUE_MAX
    )]
    pub queue_max: usize,
    /// Group commits older than this many hours are removed once every consumer group
    /// reading the topic has committed past them (0: no time limit).
    #[arg(
        long = "log-retention-hours",
        env = "RM_LOG_RETENTION_HOURS",
        default_value_t = DEFAULT_LOG_RETENTION_HOURS
    )]
    pub retention_hours: u64,
    /// Segment bytes kept per topic before the oldest are removed, again only past
    /// every consumer group's committed offset (0: no size limit).
    #[arg(
        long = "log-retention-bytes",
        env = "RM_LOG_RETENTION_BYTES",
        default_value_t = DEFAULT_LOG_RETENTION_BYTES
    )]
    pub retention_bytes: u64,
    /// Seconds between two retention passes.
    #[arg(
        long = "log-retention-check-secs",
        env = "RM_LOG_RETENTION_CHECK_SECS",
        default_value_t = DEFAULT_LOG_RETENTION_CHECK_SECS,
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub retention_check_secs: u64,
}

impl EmbeddedLogConfig {
    /// Where the embedded log lives under a data directory: the directory
    /// `<data-dir>/log` (segment files and `offsets.redb`; a previous version's
    /// `events.redb` there is converted at open).
    pub fn path(data_dir: &std::path::Path) -> PathBuf {
        data_dir.join("log")
    }
}

impl Default for EmbeddedLogConfig {
    fn default() -> Self {
        Self {
            batch_max: DEFAULT_LOG_BATCH_MAX,
            queue_max: DEFAULT_LOG_QUEUE_MAX,
            retention_hours: DEFAULT_LOG_RETENTION_HOURS,
            retention_bytes: DEFAULT_LOG_RETENTION_BYTES,
            retention_check_secs: DEFAULT_LOG_RETENTION_CHECK_SECS,
        }
    }
}
