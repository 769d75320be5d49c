//! Settings of the edge. Every field has a default, a flag and an `RM_` variable.

use std::net::SocketAddr;
use std::time::Duration;

/// Default of `--click-window-secs`.
pub const DEFAULT_CLICK_WINDOW_SECS: u64 = 30;

/// Default of `--ingest-click-redirect-grace-secs`: an hour.
pub const DEFAULT_CLICK_REDIRECT_GRACE_SECS: u64 = 3_600;

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
    /// A click (adClick, productClick, creativeClick) by the same shopper on the same
    /// ad and product or creative within this many seconds of the first is the same
    /// click, whatever its timestamp: the edge answers it 200 without writing it (a
    /// first line, per edge process; the window is kept at most this long, so the
    /// edge never drops a click counted later). 0 turns it off.
    #[arg(
        long = "click-window-secs",
        env = "RM_CLICK_WINDOW_SECS",
        default_value_t = DEFAULT_CLICK_WINDOW_SECS
    )]
    pub click_window_secs: u64,
    /// A signed click redirects while its ad id is valid and for this many seconds
    /// after it expired (a page left open a while); later it is answered `410 Gone`
    /// with a short page, never redirected, so an ended or rejected campaign's links
    /// stop leading through the edge within the ads' lifetime plus this.
    #[arg(
        long = "ingest-click-redirect-grace-secs",
        env = "RM_INGEST_CLICK_REDIRECT_GRACE_SECS",
        default_value_t = DEFAULT_CLICK_REDIRECT_GRACE_SECS
    )]
    pub click_redirect_grace_secs: u64,
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
    /// Refuse (400 `unverified_ad_id`) events whose `adId` is expired, badly signed or
    /// not ours; by default they are accepted, marked `adIdVerdict` and counted.
    #[arg(
        long = "ingest-require-valid-ad-ids",
        env = "RM_INGEST_REQUIRE_VALID_AD_IDS",
        default_value_t = false
    )]
    pub require_valid_ad_ids: bool,
    /// The integration inspector: `on` (every tracking id), `off`, or the fraction of
    /// tracking ids to keep (`0.01`). Production: `off`, or a small fraction.
    #[arg(
        long = "ingest-inspector",
        env = "RM_INGEST_INSPECTOR",
        default_value = "on",
        value_parser = crate::inspector::Sampling::parse
    )]
    pub inspector: crate::inspector::Sampling,
    /// Events kept per tracking id by the inspector (the oldest go first).
    #[arg(
        long = "ingest-inspector-events-per-id",
        env = "RM_INGEST_INSPECTOR_EVENTS_PER_ID",
        default_value_t = 200
    )]
    pub inspector_events_per_id: usize,
    /// Memory bound of the inspector in MiB (least recently seen tracking ids go first).
    #[arg(
        long = "ingest-inspector-max-mib",
        env = "RM_INGEST_INSPECTOR_MAX_MIB",
        default_value_t = 32
    )]
    pub inspector_max_mib: usize,
    /// New tracking ids the inspector admits per second (0: every one); ids already
    /// kept are always recorded. Bounds what a busy edge pays for the inspector.
    #[arg(
        long = "ingest-inspector-new-ids-per-sec",
        env = "RM_INGEST_INSPECTOR_NEW_IDS_PER_SEC",
        default_value_t = 1000
    )]
    pub inspector_new_ids_per_sec: u64,
    /// JWK set that verifies bearer tokens for `GET /v1/debug/events` on the edge's own
    /// port (the api's `/.well-known/jwks.json`): `https://`, or `http://` on loopback
    /// only. Unset: the edge does not serve it.
    #[arg(long = "ingest-jwks-url", env = "RM_INGEST_JWKS_URL")]
    pub jwks_url: Option<String>,
    /// PEM bundle of the CAs an `https://` `RM_INGEST_JWKS_URL`'s certificate is
    /// checked against; unset: the system's bundle.
    #[arg(long = "ingest-jwks-ca-file", env = "RM_INGEST_JWKS_CA_FILE")]
    pub jwks_ca_file: Option<std::path::PathBuf>,
    /// Issuer bearer tokens must carry.
    #[arg(
        long = "ingest-jwt-issuer",
        env = "RM_INGEST_JWT_ISSUER",
        default_value = "retail-media"
    )]
    pub jwt_issuer: String,
    /// Audience bearer tokens must carry.
    #[arg(
        long = "ingest-jwt-audience",
        env = "RM_INGEST_JWT_AUDIENCE",
        default_value = "retail-media-partner-api"
    )]
    pub jwt_audience: String,
    /// The platform's IAB TCF vendor id: beacons' `iabConsentString`s are decided for
    /// it (`crate::consent`). Unset: consent strings are not evaluated.
    #[arg(long = "tcf-vendor-id", env = "RM_TCF_VENDOR_ID")]
    pub tcf_vendor_id: Option<u16>,
    /// The TCF purposes the platform's measurement relies on, each with its legal
    /// basis: `<purpose>:<consent|li>`, comma-separated (purpose 1, storage and access,
    /// and 7, measuring ad performance, on consent by default).
    #[arg(
        long = "tcf-purposes",
        env = "RM_TCF_PURPOSES",
        default_value = "1:consent,7:consent"
    )]
    pub tcf_purposes: String,
}

impl IngestConfig {
    /// The write deadline as a duration.
    pub fn write_deadline(&self) -> Duration {
        Duration::from_millis(self.write_deadline_ms.max(1))
    }
}
