//! `/healthz`, `/readyz` and `/metrics`, served on every port.
//!
//! - `/healthz`: 200 while the process runs (liveness).
//! - `/readyz`: 200 when the service can accept work, else 503 with the reason
//!   (readiness: the event log is writable, the store is reachable, ...).
//! - `/metrics`: Prometheus text exposition of the process registry.

use std::sync::Arc;

use http::{Method, StatusCode};
use metrics_exporter_prometheus::PrometheusHandle;
use tokio_util::sync::CancellationToken;

use crate::{response, Response};

/// Says whether the service can accept work, and if not, why.
pub type ReadinessCheck = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

/// The operational endpoints of one service.
#[derive(Clone)]
pub struct Ops {
    metrics: PrometheusHandle,
    ready: ReadinessCheck,
}

impl Ops {
    /// Ops endpoints rendering `metrics` and asking `ready`.
    pub fn new(metrics: PrometheusHandle, ready: ReadinessCheck) -> Self {
        Self { metrics, ready }
    }

    /// Ops endpoints of a service on the process registry: not ready once `shutdown`
    /// is cancelled (so load balancers stop sending work while it drains), else as
    /// `ready` says.
    pub fn until_shutdown(
        shutdown: CancellationToken,
        ready: impl Fn() -> Result<(), String> + Send + Sync + 'static,
    ) -> Self {
        let check = move || {
            if shutdown.is_cancelled() {
                Err("shutting down".to_owned())
            } else {
                ready()
            }
        };
        Self::new(crate::telemetry::install(), Arc::new(check))
    }

    /// Answers the request when its path is one of the ops endpoints.
    pub fn route(&self, method: &Method, path: &str) -> Option<Response> {
        let r = match path {
            "/healthz" => response::with_body(StatusCode::OK, "text/plain", "ok\n"),
            "/readyz" => match (self.ready)() {
                Ok(()) => response::with_body(StatusCode::OK, "text/plain", "ready\n"),
                Err(why) => response::with_body(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "text/plain",
                    format!("not ready: {why}\n"),
                ),
            },
            "/metrics" => response::with_body(
                StatusCode::OK,
                "text/plain; version=0.0.4; charset=utf-8",
                self.metrics.render(),
            ),
            _ => return None,
        };
        if method != Method::GET && method != Method::HEAD {
            return Some(response::method_not_allowed("GET, HEAD"));
        }
        Some(r)
    }
}
