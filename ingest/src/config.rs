//! Settings of the edge. Every field has a default, a flag and an `RM_` variable.

use std::net::SocketAddr;
use std::time::Duration;

/// The edge's settings.
#[derive(Debug, Clone, clap::Args)]
pub struct IngestConfig {
    /// Address the edge listens on.
    #[arg(
        id = "ingest_addr",
        long = "ingest-addr",
        env = "RM_INGEST_ADDR",
        default_value = "127.0.0.1:8080"
    )]
    pub addr: SocketAddr,
    /// Most beacon requests waiting on the log at once; beyond it the edge answers 503.
    #[arg(
        long = "ingest-max-inflight",
        env = "RM_INGEST_MAX_INFLIGHT",
        default_value_t = 16_384
    )]
    pub max_inflight: usize,
    /// How long a beacon may wait for the log to make it durable before a 503.
    #[arg(
        long = "ingest-write-deadline-ms",
        env = "RM_INGEST_WRITE_DEADLINE_MS",
        default_value_t = 2_000
    )]
    pub write_deadline_ms: u64,
    /// How long the edge remembers a dedup key (at least this, at most twice).
    #[arg(
        long = "dedup-ttl-secs",
        env = "RM_DEDUP_TTL_SECS",
        default_value_t = 300
    )]
    pub dedup_ttl_secs: u64,
    /// Most dedup keys remembered (memory bound; 29 to 57 bytes a key).
    #[arg(
        long = "dedup-max-keys",
        env = "RM_DEDUP_MAX_KEYS",
        default_value_t = 2_000_000
    )]
    pub dedup_max_keys: usize,
    /// Longest accepted query string in bytes; longer is 414.
    #[arg(
        long = "ingest-max-query-bytes",
        env = "RM_INGEST_MAX_QUERY_BYTES",
        default_value_t = 8_192
    )]
    pub max_query_bytes: usize,
    /// Topic accepted events are written to.
    #[arg(long = "ingest-topic", env = "RM_INGEST_TOPIC", default_value = rm_schemas::topics::AD_INTERACTIONS)]
    pub topic: String,
    /// Topic rejected beacons are written to when `--rejected-topic` is on.
    #[arg(long = "ingest-rejected-topic-name", env = "RM_INGEST_REJECTED_TOPIC_NAME", default_value = rm_schemas::topics::AD_INTERACTIONS_REJECTED)]
    pub rejected_topic_name: String,
    /// Also write rejected beacons (reason, field, truncated query) to `ad-interactions-rejected`.
    #[arg(
        long = "rejected-topic",
        env = "RM_REJECTED_TOPIC",
        default_value_t = false
    )]
    pub rejected_topic: bool,
    /// Most rejected rows written per second (the rest are counted and dropped).
    #[arg(
        long = "rejected-rows-per-sec",
        env = "RM_REJECTED_ROWS_PER_SEC",
        default_value_t = 100
    )]
    pub rejected_rows_per_sec: u64,
}

impl IngestConfig {
    /// The write deadline as a duration.
    pub fn write_deadline(&self) -> Duration {
        Duration::from_millis(self.write_deadline_ms.max(1))
    }
}
