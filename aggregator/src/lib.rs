//! The aggregator: 5 consume the event log -> 6 pure aggregations -> 7 store writer.
//!
//! [`aggregate`] holds the pure cores. The service's operational endpoints
//! (`/healthz`, `/readyz`, `/metrics`) listen on their own port (default
//! 127.0.0.1:8082).

pub mod aggregate;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use rm_service::ops::Ops;
use rm_service::serve::{Handler, ServeOptions};
use rm_service::{response, Response};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

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
}

/// Errors that end the aggregator.
#[derive(Debug, thiserror::Error)]
pub enum AggregatorError {
    /// Shutdown could not drain in time.
    #[error(transparent)]
    Serve(#[from] rm_service::ServeError),
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

/// Serves the aggregator's operational endpoints until `shutdown`.
pub async fn run(
    listener: TcpListener,
    shutdown: CancellationToken,
    drain: Duration,
) -> Result<(), AggregatorError> {
    let stopping = shutdown.clone();
    let ops = Ops::new(
        rm_service::telemetry::install(),
        Arc::new(move || {
            if stopping.is_cancelled() {
                Err("shutting down".into())
            } else {
                Ok(())
            }
        }),
    );
    tracing::info!(addr = ?listener.local_addr().ok(), "aggregator listening");
    rm_service::serve(
        listener,
        OpsHandler(ops),
        shutdown,
        ServeOptions {
            drain_deadline: drain,
            ..Default::default()
        },
    )
    .await?;
    Ok(())
}
