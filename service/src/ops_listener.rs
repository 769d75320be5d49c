//! The operations listener (`RM_OPS_ADDR`): one port per process, for probes and
//! Prometheus, meant to stay inside the cluster.
//!
//! - `GET /healthz`: 200 `ok` while the process runs.
//! - `GET /readyz`: 200 `ready` when every service of the process is running and
//!   ready, else 503; either way the body lists the reasons a service is not ready,
//!   one per line (`not ready\n- ClickHouse ping: ...\n`).
//! - `GET /metrics`: the process's Prometheus registry.
//!
//! Every service registers its readiness check in the process's [`Registry`]
//! ([`crate::readiness`]) when it builds its [`Ops`]; this listener asks it. Once
//! [`enable`] is called, services started afterwards stop serving `/metrics` on their
//! public ports.
//!
//! [`Ops`]: crate::ops::Ops

use http::{Method, StatusCode};
use hyper::body::Incoming;
use metrics_exporter_prometheus::PrometheusHandle;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use crate::readiness::{enable, enabled, Registry};
use crate::serve::{Handler, ServeOptions};
use crate::{response, Response, ServeError};

/// Answers the operations listener's requests.
#[derive(Clone)]
pub struct OpsHandler {
    registry: &'static Registry,
    expected: usize,
    metrics: PrometheusHandle,
}

impl OpsHandler {
    /// Reports on `registry`, expecting `expected` services, and renders `metrics`.
    pub fn new(registry: &'static Registry, expected: usize, metrics: PrometheusHandle) -> Self {
        Self {
            registry,
            expected,
            metrics,
        }
    }

    /// The response to `method path`.
    pub fn answer(&self, method: &Method, path: &str) -> Response {
        let r = match path {
            "/healthz" => response::with_body(StatusCode::OK, "text/plain", "ok\n"),
            "/readyz" => {
                let (ready, body) = self.registry.report(self.expected);
                let status = if ready {
                    StatusCode::OK
                } else {
                    StatusCode::SERVICE_UNAVAILABLE
                };
                response::with_body(status, "text/plain", body)
            }
            "/metrics" => response::metrics(&self.metrics),
            _ => return response::not_found(path),
        };
        if method != Method::GET && method != Method::HEAD {
            return response::method_not_allowed("GET, HEAD");
        }
        r
    }
}

impl Handler for OpsHandler {
    async fn call(&self, req: http::Request<Incoming>) -> Response {
        self.answer(req.method(), req.uri().path())
    }
}

/// Serves the operations endpoints of this process's `expected` services on
/// `listener` until `shutdown`. Cancel `shutdown` after the services have drained, so
/// probes and scrapes see the drain.
pub async fn run(
    listener: TcpListener,
    expected: usize,
    shutdown: CancellationToken,
    opts: ServeOptions,
) -> Result<(), ServeError> {
    tracing::info!(addr = ?listener.local_addr().ok(), "operations listener: /healthz, /readyz, /metrics");
    let handler = OpsHandler::new(Registry::process(), expected, crate::telemetry::install());
    crate::serve(listener, handler, shutdown, opts).await
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use http_body_util::BodyExt as _;
    use metrics_exporter_prometheus::PrometheusBuilder;

    use super::*;
    use crate::readiness::ReadinessCheck;

    fn check(r: Result<(), &'static str>) -> ReadinessCheck {
        Arc::new(move || r.map_err(str::to_owned))
    }

    fn leaked() -> &'static Registry {
        Box::leak(Box::new(Registry::new()))
    }

    #[test]
    fn ready_when_every_expected_service_runs_and_is_ready() {
        let reg = leaked();
        assert_eq!(
            reg.report(2),
            (false, "not ready\n- 0 of 2 services running\n".into())
        );
        let edge = check(Ok(()));
        reg.register(&edge);
        assert!(!reg.report(2).0);
        let api = check(Ok(()));
        reg.register(&api);
        assert_eq!(reg.report(2), (true, "ready\n".into()));
        drop(api);
        assert_eq!(
            reg.report(2),
            (false, "not ready\n- 1 of 2 services running\n".into())
        );
    }

    #[test]
    fn reasons_are_listed_once_each() {
        let reg = leaked();
        let a = check(Err("shutting down"));
        let b = check(Err("shutting down"));
        let c = check(Err("ClickHouse ping: connection refused\n(os error 111)"));
        let d = check(Ok(()));
        for x in [&a, &b, &c, &d] {
            reg.register(x);
        }
        let (ready, body) = reg.report(4);
        assert!(!ready);
        assert_eq!(
            body,
            "not ready\n- shutting down\n- ClickHouse ping: connection refused (os error 111)\n"
        );
    }

    #[tokio::test]
    async fn the_listener_answers_health_readiness_details_and_metrics_only() {
        let reg = leaked();
        let failing = check(Err("kafka unreachable: broker down"));
        reg.register(&failing);
        let h = OpsHandler::new(reg, 1, PrometheusBuilder::new().build_recorder().handle());
        let text = |r: Response| async move {
            let s = r.status();
            let b = r.into_body().collect().await.unwrap().to_bytes();
            (s, String::from_utf8(b.to_vec()).unwrap())
        };
        assert_eq!(
            text(h.answer(&Method::GET, "/readyz")).await,
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "not ready\n- kafka unreachable: broker down\n".into()
            )
        );
        assert_eq!(h.answer(&Method::GET, "/healthz").status(), StatusCode::OK);
        assert_eq!(h.answer(&Method::GET, "/metrics").status(), StatusCode::OK);
        assert_eq!(
            h.answer(&Method::GET, "/v1/oauth2/token").status(),
            StatusCode::NOT_FOUND
        );
        assert_eq!(
            h.answer(&Method::DELETE, "/metrics").status(),
            StatusCode::METHOD_NOT_ALLOWED
        );
    }
}
