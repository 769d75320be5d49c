//! The partner API service (port 8081 by default).
//!
//! Serves the campaign reports ([`reports`]) from the report store, plus the
//! operational endpoints every service has (`/healthz`, `/readyz`, `/metrics`). The
//! OAuth token endpoint, ads, segments, campaigns and orders arrive with their issues
//! and plug into [`ApiHandler`]; the report routes are ready for bearer-token checks
//! at that single point.

pub mod reports;
pub mod sdk;
pub mod vast;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http::Method;
use hyper::body::Incoming;
use rm_aggregator::store::{AnyStore, Store};
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
    store: Arc<AnyStore>,
}

impl Handler for ApiHandler {
    async fn call(&self, req: http::Request<Incoming>) -> Response {
        let path = req.uri().path();
        if let Some(r) = self.ops.route(req.method(), path) {
            return r;
        }
        if reports::ROUTES.contains(&path) {
            if req.method() != Method::GET {
                return response::method_not_allowed("GET");
            }
            return reports::answer(
                &*self.store,
                path,
                req.uri().query().unwrap_or(""),
                req.headers(),
            )
            .await;
        }
        response::not_found(path)
    }
}

/// Runs the api on `listener` until `shutdown`, draining within `drain`.
pub async fn run(
    _config: ApiConfig,
    store: Arc<AnyStore>,
    listener: TcpListener,
    shutdown: CancellationToken,
    drain: Duration,
) -> Result<(), ApiError> {
    let ready_store = Arc::clone(&store);
    let ops = Ops::until_shutdown(shutdown.clone(), move || ready_store.readiness());
    tracing::info!(addr = ?listener.local_addr().ok(), "api listening");
    let handler = ApiHandler { ops, store };
    rm_service::serve(
        listener,
        handler,
        shutdown,
        ServeOptions {
            drain_deadline: drain,
            ..Default::default()
        },
    )
    .await?;
    Ok(())
}
