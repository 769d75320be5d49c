//! The beacon edge: a minimal hyper server for `GET /v1/events/ad/interaction`.
//!
//! Data path: [`edge`] decodes and validates the query string (the contract lives in
//! `rm-schemas`), asks the [`dedup`] window whether the event was just seen, and
//! writes it to the event log (`rm-eventlog`), answering 200 only once it is durable.
//! [`metrics`] names every series; [`config`] holds the settings.

pub mod config;
pub mod dedup;
pub mod edge;
pub mod error;
pub mod metrics;

use std::sync::Arc;
use std::time::Duration;

use rm_eventlog::EventLog;
use rm_service::ops::Ops;
use rm_service::serve::ServeOptions;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use config::IngestConfig;
pub use error::IngestError;

/// Runs the edge on `listener` over `log` until `shutdown`, then drains in order:
/// stop accepting, finish in-flight requests, flush the log, all within `drain`.
pub async fn run<L: EventLog>(
    config: IngestConfig,
    log: Arc<L>,
    backend: &'static str,
    listener: TcpListener,
    shutdown: CancellationToken,
    drain: Duration,
) -> Result<(), IngestError> {
    let ready_log = Arc::clone(&log);
    let ops = Ops::until_shutdown(shutdown.clone(), move || ready_log.readiness());
    let edge = Arc::new(edge::Edge::new(
        config,
        Arc::clone(&log),
        metrics::EdgeMetrics::register(backend),
        ops,
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
    let served = rm_service::serve(
        listener,
        edge::EdgeHandler(edge),
        shutdown,
        ServeOptions {
            drain_deadline: drain,
            ..ServeOptions::default()
        },
    )
    .await;
    sampler.abort();
    let left = drain
        .saturating_sub(started.elapsed())
        .max(Duration::from_secs(1));
    log.flush(left).await?;
    tracing::info!("edge stopped; log flushed");
    served.map_err(IngestError::from)
}
