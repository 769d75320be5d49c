//! `/healthz`, `/readyz` and `/metrics` on a service's own (public) port.
//!
//! - `/healthz`: 200 `ok` while the process runs (liveness).
//! - `/readyz`: 200 `ready` when the service can accept work, else 503 `not ready`.
//!   The body never says why: backend errors name hosts, users and databases, and the
//!   public ports face the internet. The reasons are on the operations listener
//!   ([`crate::ops_listener`], `RM_OPS_ADDR`) and in the backends' own logs.
//! - `/metrics`: Prometheus text exposition of the process registry, unless the
//!   process runs an operations listener: then it is served there only, and the
//!   public ports answer it as any unknown path (404).

use std::sync::Arc;

use http::{Method, StatusCode};
use metrics_exporter_prometheus::PrometheusHandle;
use tokio_util::sync::CancellationToken;

use crate::{readiness, response, Response};

pub use crate::readiness::ReadinessCheck;

/// The operational endpoints of one service's port.
#[derive(Clone)]
pub struct Ops {
    /// `None`: `/metrics` is not served on this port.
    metrics: Option<PrometheusHandle>,
    ready: ReadinessCheck,
}

impl Ops {
    /// Ops endpoints rendering `metrics` and asking `ready`.
    pub fn new(metrics: PrometheusHandle, ready: ReadinessCheck) -> Self {
        Self {
            metrics: Some(metrics),
            ready,
        }
    }

    /// The same endpoints without `/metrics` (it is served elsewhere).
    #[must_use]
    pub fn without_metrics(mut self) -> Self {
        self.metrics = None;
        self
    }

    /// Ops endpoints of a service on the process registry: not ready once `shutdown`
    /// is cancelled (so load balancers stop sending work while it drains), else as
    /// `ready` says. The check is also reported, with its reason, on the process's
    /// operations listener; when the process has one ([`readiness::enable`]),
    /// `/metrics` is served there and not on this port.
    pub fn until_shutdown(
        shutdown: CancellationToken,
        ready: impl Fn() -> Result<(), String> + Send + Sync + 'static,
    ) -> Self {
        let check: ReadinessCheck = Arc::new(move || {
            if shutdown.is_cancelled() {
                Err("shutting down".to_owned())
            } else {
                ready()
            }
        });
        readiness::Registry::process().register(&check);
        let ops = Self::new(crate::telemetry::install(), check);
        if readiness::enabled() {
            ops.without_metrics()
        } else {
            ops
        }
    }

    /// Whether the service can accept work now, and if not, why (for logs and the
    /// operations listener, never for a public response).
    pub fn readiness(&self) -> Result<(), String> {
        (self.ready)()
    }

    /// Answers the request when its path is one of the ops endpoints of this port.
    pub fn route(&self, method: &Method, path: &str) -> Option<Response> {
        let r = match path {
            "/healthz" => response::with_body(StatusCode::OK, "text/plain", "ok\n"),
            "/readyz" => match (self.ready)() {
                Ok(()) => response::with_body(StatusCode::OK, "text/plain", "ready\n"),
                Err(why) => {
                    tracing::debug!(reason = %why, "not ready");
                    response::with_body(
                        StatusCode::SERVICE_UNAVAILABLE,
                        "text/plain",
                        "not ready\n",
                    )
                }
            },
            "/metrics" => match &self.metrics {
                Some(m) => response::metrics(m),
                None => return None,
            },
            _ => return None,
        };
        if method != Method::GET && method != Method::HEAD {
            return Some(response::method_not_allowed("GET, HEAD"));
        }
        Some(r)
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt as _;
    use metrics_exporter_prometheus::PrometheusBuilder;

    use super::*;

    fn ops(ready: Result<(), String>) -> Ops {
        let handle = PrometheusBuilder::new().build_recorder().handle();
        Ops::new(handle, Arc::new(move || ready.clone()))
    }

    async fn body(r: Response) -> String {
        let bytes = r.into_body().collect().await.unwrap().to_bytes();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    #[tokio::test]
    async fn readyz_says_ready_or_not_and_never_why() {
        let r = ops(Ok(())).route(&Method::GET, "/readyz").unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(body(r).await, "ready\n");
        let failing = ops(Err("clickhouse at 10.0.0.7:8123 refused user rm".into()));
        assert!(failing.readiness().unwrap_err().contains("10.0.0.7"));
        let r = failing.route(&Method::GET, "/readyz").unwrap();
        assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(body(r).await, "not ready\n");
    }

    #[tokio::test]
    async fn metrics_are_served_unless_moved_off_the_port() {
        let on = ops(Ok(()));
        let r = on.route(&Method::GET, "/metrics").unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        let off = on.without_metrics();
        assert!(off.route(&Method::GET, "/metrics").is_none());
        assert_eq!(
            off.route(&Method::GET, "/healthz").unwrap().status(),
            StatusCode::OK
        );
        assert_eq!(
            off.route(&Method::POST, "/readyz").unwrap().status(),
            StatusCode::METHOD_NOT_ALLOWED
        );
        assert!(off.route(&Method::GET, "/v1/other").is_none());
    }
}
