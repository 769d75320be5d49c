//! The partner API service (port 8081 by default).
//!
//! Today it serves the operational endpoints every service has (`/healthz`,
//! `/readyz`, `/metrics`) and answers every other path with the error status object;
//! the OAuth token endpoint, ads, segments, campaigns, orders and reports arrive with
//! their issues and plug into [`ApiHandler`].

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use rm_service::ops::Ops;
use rm_service::serve::{Handler, ServeOptions};
use rm_service::{response, Response};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// The api's settings.
#[derive(Debug, Clone, clap::Args)]
pub struct ApiConfig {
    /// Address the api listens on.
    #[arg(
        id = "api_addr",
        long = "api-addr",
        env = "RM_API_ADDR",
        default_value = "127.0.0.1:8081"
    )]
    pub addr: SocketAddr,
}

/// Errors that end the api.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// Shutdown could not drain in time.
    #[error(transparent)]
    Serve(#[from] rm_service::ServeError),
}

/// The api's request handler.
#[derive(Clone)]
pub struct ApiHandler {
    ops: Ops,
}

impl Handler for ApiHandler {
    async fn call(&self, req: http::Request<Incoming>) -> Response {
        let path = req.uri().path();
        self.ops
            .route(req.method(), path)
            .unwrap_or_else(|| response::not_found(path))
    }
}

/// Runs the api on `listener` until `shutdown`, draining within `drain`.
pub async fn run(
    listener: TcpListener,
    shutdown: CancellationToken,
    drain: Duration,
) -> Result<(), ApiError> {
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
    tracing::info!(addr = ?listener.local_addr().ok(), "api listening");
    rm_service::serve(
        listener,
        ApiHandler { ops },
        shutdown,
        ServeOptions {
            drain_deadline: drain,
            ..Default::default()
        },
    )
    .await?;
    Ok(())
}
