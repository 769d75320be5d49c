//! The aggregator: 5 consume the event log ([`source`]) -> 6 fold each batch into the
//! touched entities' fact sets and derived rows ([`batch`], with the pure rules of
//! `rm_store::model`) -> 7 write it to the report store (`rm_store`'s
//! `WriteStore`), driven by [`pipeline`], which also explains the exactly-once
//! design. The reports are read from the store by the api, never through this crate.
//!
//! The service's operational endpoints (`/healthz`, `/readyz`, `/metrics`) listen on
//! their own port (default 127.0.0.1:8082).

pub mod ageing;
pub mod batch;
pub mod compact;
pub mod erasures;
pub mod fresh_ads;
pub mod loads;
pub mod metrics;
pub mod pipeline;
pub mod retention;
pub mod sales;
pub mod source;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use rm_schemas::video_funnel::Debounce;
use rm_service::ops::Ops;
use rm_service::serve::{Handler, ServeOptions};
use rm_service::{response, Response};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::source::AnySource;
use rm_store::{AnyStore, Backend, StoreError};

/// The aggregator's settings.
#[derive(Debug, Clone, clap::Args)]
pub struct AggregatorConfig {
    /// Address of the aggregator's health and metrics endpoints.
    #[arg(
        id = "aggregator_addr",
        long = "aggregator-addr",
        env = "RM_AGGREGATOR_ADDR",
        default_value = "127.0.0.1:8082"
    )]
    pub addr: SocketAddr,
    /// Consumer group (Kafka) or offset name (embedded log).
    #[arg(
        id = "aggregator_group",
        long = "aggregator-group",
        env = "RM_AGGREGATOR_GROUP",
        default_value = "rm-aggregator"
    )]
    pub group: String,
    /// Topic the aggregator reads.
    #[arg(id = "aggregator_topic", long = "aggregator-topic", env = "RM_AGGREGATOR_TOPIC", default_value = rm_schemas::topics::AD_INTERACTIONS)]
    pub topic: String,
    /// Most records per batch (and per store insert).
    #[arg(
        long = "aggregator-batch-max-records",
        env = "RM_AGGREGATOR_BATCH_MAX_RECORDS",
        default_value_t = pipeline::DEFAULT_BATCH_MAX_RECORDS
    )]
    pub batch_max_records: usize,
    /// Longest a batch gathers records, in milliseconds, while the aggregator is busy
    /// with the one before; a batch that old waits to be stored instead of growing.
    #[arg(
        long = "aggregator-batch-max-wait-ms",
        env = "RM_AGGREGATOR_BATCH_MAX_WAIT_MS",
        default_value_t = pipeline::DEFAULT_BATCH_MAX_WAIT_MS
    )]
    pub batch_max_wait_ms: u64,
    /// Shortest a batch gathers records, in milliseconds, before it is stored: fewer,
    /// larger store writes while the log is quiet, at this much freshness.
    #[arg(
        long = "aggregator-batch-linger-ms",
        env = "RM_AGGREGATOR_BATCH_LINGER_MS",
        default_value_t = pipeline::DEFAULT_BATCH_LINGER_MS
    )]
    pub batch_linger_ms: u64,
    /// Events dated more than this many hours before their receipt are not aggregated.
    #[arg(
        long = "late-horizon-hours",
        env = "RM_LATE_HORIZON_HOURS",
        default_value_t = batch::DEFAULT_LATE_HORIZON_HOURS
    )]
    pub late_horizon_hours: i64,
    /// Events dated more than this many hours after their receipt are not aggregated.
    #[arg(
        long = "future-skew-hours",
        env = "RM_FUTURE_SKEW_HOURS",
        default_value_t = batch::DEFAULT_FUTURE_SKEW_HOURS
    )]
    pub future_skew_hours: i64,
    /// Hours a served ad's state (which of its events was billable) is kept after its
    /// ad id expired; an aggregator lagging further behind counts the events of ads
    /// expired that long as repeats, never as billable twice.
    #[arg(
        long = "aggregator-served-retention-hours",
        env = "RM_AGGREGATOR_SERVED_RETENTION_HOURS",
        default_value_t = batch::DEFAULT_SERVED_RETENTION_HOURS
    )]
    pub served_retention_hours: i64,
    /// Most entities (views, carts) whose fact sets are kept in memory.
    #[arg(
        long = "aggregator-cache-max-entities",
        env = "RM_AGGREGATOR_CACHE_MAX_ENTITIES",
        default_value_t = 1_000_000
    )]
    pub cache_max_entities: usize,
    /// Seconds between compactions of the closed hours' rollups (ClickHouse: their
    /// sums over the log partitions, which keep reads at their answer's size); 0:
    /// never.
    #[arg(
        long = "aggregator-compact-secs",
        env = "RM_AGGREGATOR_COMPACT_SECS",
        default_value_t = 600
    )]
    pub compact_secs: u64,
    /// Seconds a writer may take between flagging a tally of a closed day and writing
    /// it, plus the clock skew between aggregators (a compaction reads places flagged
    /// that long before it as changed).
    #[arg(
        long = "aggregator-compact-margin-secs",
        env = "RM_AGGREGATOR_COMPACT_MARGIN_SECS",
        default_value_t = 300
    )]
    pub compact_margin_secs: u64,
    /// Seconds between looks for erasures the api recorded (each is run, and its id
    /// never stored again, before the next batch is folded).
    #[arg(
        long = "aggregator-erasures-secs",
        env = "RM_AGGREGATOR_ERASURES_SECS",
        default_value_t = erasures::DEFAULT_ERASURES_SECS
    )]
    pub erasures_secs: u64,
    /// Seconds an erasure keeps the erased id itself (every aggregator runs it again
    /// within them, once it has dropped its cache); then only its SHA-256 and hash
    /// stay in the audit log. Longer than a batch's write can take.
    #[arg(
        long = "aggregator-erasure-settle-secs",
        env = "RM_AGGREGATOR_ERASURE_SETTLE_SECS",
        default_value_t = 600
    )]
    pub erasure_settle_secs: u64,
    /// Days a stored row keeps its shopper ids; then they are replaced by keyed
    /// hashes and the counts stay (`rm_store::model::ageing`). Longer than the
    /// attribution windows and the late horizon together; 0: kept for ever.
    #[arg(
        long = "identifier-retention-days",
        env = "RM_IDENTIFIER_RETENTION_DAYS",
        default_value_t = rm_store::model::ageing::DEFAULT_RETENTION_DAYS
    )]
    pub identifier_retention_days: u32,
    /// Days a raw fact (an event, view, cart line, touch or order) is kept; then it
    /// is removed and the rollups that counted it stay (`rm_store::model::retention`).
    /// Longer than the attribution windows and the late horizon together; 0: kept
    /// for ever.
    #[arg(
        long = "fact-retention-days",
        env = "RM_FACT_RETENTION_DAYS",
        default_value_t = rm_store::model::retention::DEFAULT_RETENTION_DAYS
    )]
    pub fact_retention_days: u32,
    /// Seconds between two ageing passes, each also removing the facts past their
    /// retention (one runs at start too).
    #[arg(
        long = "aggregator-ageing-secs",
        env = "RM_AGGREGATOR_AGEING_SECS",
        default_value_t = ageing::DEFAULT_AGEING_SECS
    )]
    pub ageing_secs: u64,
}

/// Settings the aggregator shares with other services (the binary reads them once).
#[derive(Debug, Clone, Copy)]
pub struct Shared {
    /// The video funnel's control debounce (rule 2), shared with the edge's inspector.
    pub debounce: Debounce,
    /// The ads' lifetime in seconds (`RM_API_AD_TTL_SECS`), shared with the api that
    /// mints the ad ids: an ad was served at its id's expiry minus this.
    pub ad_ttl_secs: i64,
    /// The attribution windows (the store's settings, shared with the api's
    /// drill-down by served ad).
    pub windows: rm_store::model::attribution::Windows,
    /// The key of the ageing passes (the binary's `RM_IDENTIFIER_KEY`); `None`: no
    /// pass runs.
    pub ageing_key: Option<rm_store::model::ageing::AgeingKey>,
}

impl AggregatorConfig {
    /// The pipeline options these settings describe, with the settings shared with
    /// other services.
    pub fn pipeline(&self, shared: Shared) -> pipeline::PipelineOptions {
        pipeline::PipelineOptions {
            batch_max_records: self.batch_max_records.max(1),
            batch_max_wait: Duration::from_millis(self.batch_max_wait_ms.max(1)),
            batch_linger: Duration::from_millis(self.batch_linger_ms),
            policy: batch::Policy {
                debounce_ms: shared.debounce.ms(),
                late_horizon_ms: self.late_horizon_hours.max(0) * 3_600_000,
                future_skew_ms: self.future_skew_hours.max(0) * 3_600_000,
                ad_ttl_ms: shared.ad_ttl_secs.max(0).saturating_mul(1000),
                forgotten_before: None,
                windows: shared.windows,
            },
            cache_max_entities: self.cache_max_entities,
            served_retention: Duration::from_secs(
                u64::try_from(self.served_retention_hours.max(1)).unwrap_or(1) * 3_600,
            ),
            erasures_every: Duration::from_secs(self.erasures_secs.max(1)),
            erasure_settle: Duration::from_secs(self.erasure_settle_secs.max(1)),
            ageing: shared
                .ageing_key
                .filter(|_| self.identifier_retention_days > 0)
                .map(|key| {
                    ageing::AgeingOptions::days(
                        key,
                        self.identifier_retention_days,
                        Duration::from_secs(self.ageing_secs.max(1)),
                    )
                }),
            retention: (self.fact_retention_days > 0).then(|| retention::RetentionOptions {
                retention: Duration::from_secs(u64::from(self.fact_retention_days) * 86_400),
                look_back: self.look_back(&shared),
                every: Duration::from_secs(self.ageing_secs.max(1)),
            }),
        }
    }

    /// How far back the fold ever looks (see [`ageing::shortest_retention`]): no
    /// retention may be shorter.
    fn look_back(&self, shared: &Shared) -> Duration {
        let w = shared.windows;
        ageing::shortest_retention(
            w.click_ms.max(w.view_ms),
            self.late_horizon_hours.max(0).saturating_mul(3_600_000),
            self.served_retention_hours.max(0).saturating_mul(3_600_000),
        )
    }

    /// Refuses an identifier or fact retention that rows still looked up by the fold
    /// would outlive (see [`ageing::shortest_retention`]).
    pub fn check_retention(&self, shared: &Shared) -> Result<(), String> {
        let shortest = self.look_back(shared);
        for (name, days) in [
            (
                "RM_IDENTIFIER_RETENTION_DAYS",
                self.identifier_retention_days,
            ),
            ("RM_FACT_RETENTION_DAYS", self.fact_retention_days),
        ] {
            let d = u64::from(days);
            if days > 0 && Duration::from_secs(d * 86_400) <= shortest {
                return Err(format!(
                    "{name}={d} is not longer than the attribution window plus the late \
                     horizon (or the served ads' retention): {} days; set more, or 0 to \
                     keep them",
                    shortest.as_secs().div_ceil(86_400)
                ));
            }
        }
        Ok(())
    }
}

/// Errors that end the aggregator.
#[derive(Debug, thiserror::Error)]
pub enum AggregatorError {
    /// Shutdown could not drain in time.
    #[error(transparent)]
    Serve(#[from] rm_service::ServeError),
    /// The event log failed for good.
    #[error(transparent)]
    Log(#[from] rm_eventlog::LogError),
    /// The store failed for good.
    #[error(transparent)]
    Store(#[from] StoreError),
}

#[derive(Clone)]
struct OpsHandler(Ops);

impl Handler for OpsHandler {
    async fn call(&self, req: http::Request<Incoming>) -> Response {
        let path = req.uri().path();
        self.0
            .route(req.method(), path)
            .unwrap_or_else(|| response::not_found(path))
    }
}

/// Runs the pipeline from `source` into `store` and serves the operational endpoints
/// on `listener`, until `shutdown`. `shared` holds the settings other services read
/// too (the control debounce, the ads' lifetime), read once by the binary.
pub async fn run(
    config: AggregatorConfig,
    shared: Shared,
    source: AnySource,
    store: Arc<AnyStore>,
    listener: TcpListener,
    shutdown: CancellationToken,
    serve: ServeOptions,
) -> Result<(), AggregatorError> {
    let backend = store.backend();
    metrics::register(backend);
    let ready_store = Arc::clone(&store);
    let ops = Ops::until_shutdown(shutdown.clone(), move || ready_store.readiness());
    tracing::info!(addr = ?listener.local_addr().ok(), backend, topic = %config.topic, "aggregator listening");
    let server = rm_service::serve(listener, OpsHandler(ops), shutdown.clone(), serve);
    let compactor = compact::run(
        Arc::clone(&store),
        Duration::from_secs(config.compact_secs),
        Duration::from_secs(config.compact_margin_secs),
        shutdown.clone(),
    );
    let work = pipeline::run(
        source,
        store,
        backend,
        config.pipeline(shared),
        shutdown.clone(),
    );
    let (served, worked, ()) = tokio::join!(
        server,
        async {
            let r = work.await;
            // The pipeline ended (shutdown or a permanent error): stop serving too.
            shutdown.cancel();
            r
        },
        compactor
    );
    worked?;
    served?;
    Ok(())
}
