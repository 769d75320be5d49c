//! The beacon edge: a minimal hyper server for `GET /v1/events/ad/interaction`, the
//! served ads' impression and click URLs, and the integration inspector.
//!
//! Data path: [`edge`] decodes and validates the query string (the contract lives in
//! `rm-schemas`), asks the [`dedup`] window whether the event was just seen, and
//! writes it to the event log (`rm-eventlog`), answering 200 only once it is durable.
//! [`ad_events`] serves `/v1/events/ad/impression` and `/click` on the same path.
//! Every answer is shown to the [`inspector`], whose [`inspector_report`] the api (or,
//! alone, the edge's [`debug_route`] behind [`jwks`]) serves.
//! [`traffic`] reads the headers that classify invalid traffic (flagged in the
//! record, never refused). [`metrics`] names every series; [`config`] holds the
//! settings.

pub mod ad_events;
pub mod config;
pub mod consent;
pub mod debug_route;
pub mod dedup;
pub mod edge;
pub mod error;
pub mod inspector;
pub mod inspector_report;
pub mod jwks;
pub mod metrics;
pub mod traffic;

use std::sync::Arc;
use std::time::Duration;

use rm_eventlog::EventLog;
use rm_service::ops::Ops;
use rm_service::serve::ServeOptions;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use config::IngestConfig;
pub use debug_route::answer as debug_answer;
pub use error::IngestError;
pub use inspector::Inspector;
pub use inspector_report::report;

/// What the edge takes from the process that runs it.
pub struct EdgeDeps {
    /// The ad id keys every service shares (verifies ad ids and click destinations).
    pub ad_keys: rm_schemas::ad_id::AdIdKeys,
    /// The inspector (shared with the api, which serves its report in one process).
    pub inspector: Arc<Inspector>,
    /// The secret of the pseudonyms of events without consent (`RM_CONSENT_ID_KEY`,
    /// or a key generated once under the data dir).
    pub consent_key: Vec<u8>,
}

/// Runs the edge on `listener` over `log` until `shutdown`, then drains in order:
/// stop accepting, finish in-flight requests, flush the log, all within the drain
/// deadline of `serve` (which also carries the listener's timeouts and connection cap).
pub async fn run<L: EventLog>(
    config: IngestConfig,
    log: Arc<L>,
    backend: &'static str,
    listener: TcpListener,
    shutdown: CancellationToken,
    serve: ServeOptions,
    deps: EdgeDeps,
) -> Result<(), IngestError> {
    let bearer = config
        .jwks_url
        .as_deref()
        .filter(|u| !u.trim().is_empty())
        .map(|u| {
            jwks::BearerVerifier::new(
                u,
                &config.jwt_issuer,
                &config.jwt_audience,
                config.jwks_ca_file.as_deref(),
            )
        })
        .transpose()
        .map_err(IngestError::Config)?;
    let policy = config
        .tcf_vendor_id
        .map(|v| consent::ConsentPolicy::new(v, &config.tcf_purposes))
        .transpose()
        .map_err(|e| IngestError::Config(format!("RM_TCF_PURPOSES / RM_TCF_VENDOR_ID: {e}")))?;
    match &policy {
        Some(p) => tracing::info!(
            vendor = p.vendor(),
            purposes = config.tcf_purposes,
            "deciding consent strings: events whose string does not allow these purposes \
             are counted with their tracking ids replaced by daily keyed hashes"
        ),
        None => tracing::info!(
            "consent strings are not evaluated (RM_TCF_VENDOR_ID is unset): every event \
             keeps the tracking ids it was sent with"
        ),
    }
    let consent = consent::ConsentStage::new(policy, &deps.consent_key);
    let ready_log = Arc::clone(&log);
    let ops = Ops::until_shutdown(shutdown.clone(), move || ready_log.readiness());
    let edge = Arc::new(edge::Edge::new(
        config,
        Arc::clone(&log),
        metrics::EdgeMetrics::register(backend),
        ops,
        edge::Shared {
            ad_keys: deps.ad_keys,
            inspector: deps.inspector,
            bearer,
            consent,
        },
    ));
    let sampler = {
        let edge = Arc::clone(&edge);
        let stop = shutdown.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(2));
            loop {
                tokio::select! {
                    () = stop.cancelled() => break,
                    _ = tick.tick() => edge.sample_gauges(),
                }
            }
        })
    };
    tracing::info!(addr = ?listener.local_addr().ok(), backend, "edge listening");
    let started = tokio::time::Instant::now();
    let served = rm_service::serve(listener, edge::EdgeHandler(edge), shutdown, serve).await;
    sampler.abort();
    let left = serve
        .drain_deadline
        .saturating_sub(started.elapsed())
        .max(Duration::from_secs(1));
    log.flush(left).await?;
    tracing::info!("edge stopped; log flushed");
    served.map_err(IngestError::from)
}
