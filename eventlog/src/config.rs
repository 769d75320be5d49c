//! Settings of the event log, shared by every service that reads or writes it.

use std::path::PathBuf;

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
        default_value_t = 6
    )]
    pub partitions: i32,
    /// Replication factor of topics the service creates.
    #[arg(
        long = "kafka-replication",
        env = "RM_KAFKA_REPLICATION",
        default_value_t = 1
    )]
    pub replication: i32,
    /// Producer compression codec: none, gzip, snappy, lz4 or zstd.
    #[arg(
        long = "kafka-compression",
        env = "RM_KAFKA_COMPRESSION",
        default_value = "lz4"
    )]
    pub compression: String,
    /// Producer linger in milliseconds (batching delay). Every acknowledged beacon waits
    /// for it, so it bounds throughput per connection: 1 ms measured 2.9x the
    /// throughput of 5 ms (BENCHMARKS.md).
    #[arg(
        long = "kafka-linger-ms",
        env = "RM_KAFKA_LINGER_MS",
        default_value_t = 1
    )]
    pub linger_ms: u32,
    /// Most messages queued in the producer before appends are refused with back-pressure.
    #[arg(
        long = "kafka-queue-max-messages",
        env = "RM_KAFKA_QUEUE_MAX_MESSAGES",
        default_value_t = 200_000
    )]
    pub queue_max_messages: u32,
    /// How long the producer keeps retrying one message before it fails it.
    #[arg(
        long = "kafka-message-timeout-ms",
        env = "RM_KAFKA_MESSAGE_TIMEOUT_MS",
        default_value_t = 10_000
    )]
    pub message_timeout_ms: u32,
    /// Extra librdkafka properties, `key=value`, comma-separated (for example TLS or SASL).
    #[arg(
        long = "kafka-property",
        env = "RM_KAFKA_PROPERTIES",
        value_delimiter = ','
    )]
    pub properties: Vec<String>,
}

/// Default of `--log-batch-max`.
pub const DEFAULT_LOG_BATCH_MAX: usize = 4096;
/// Default of `--log-queue-max`.
pub const DEFAULT_LOG_QUEUE_MAX: usize = 65_536;

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
}

impl EmbeddedLogConfig {
    /// Where the embedded log lives under a data directory.
    pub fn path(data_dir: &std::path::Path) -> PathBuf {
        data_dir.join("log").join("events.redb")
    }
}

impl Default for EmbeddedLogConfig {
    fn default() -> Self {
        Self {
            batch_max: DEFAULT_LOG_BATCH_MAX,
            queue_max: DEFAULT_LOG_QUEUE_MAX,
        }
    }
}
