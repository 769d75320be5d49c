//! The operations listener (`RM_OPS_ADDR`): one port per process, for probes and
//! Prometheus, meant to stay inside the cluster.
//!
//! - `GET /healthz`: 200 `ok` while the process runs.
//! - `GET /readyz`: 200 `ready` when every service of the process is running and
//!   ready, else 503; either way the body lists the reasons a service is not ready,
//!   one per line (`not ready\n- ClickHouse ping: ...\n`).
//! - `GET /metrics`: the process's Prometheus registry.
//!
//! Every service registers its readiness check here when it builds its [`Ops`]
//! (the registry is process-wide, like the Prometheus recorder). The registry holds
//! the checks weakly: a service that has stopped no longer counts as running. Once
//! [`enable`] is called, services started afterwards stop serving `/metrics` on their
//! public ports.
//!
//! [`Ops`]: crate::ops::Ops

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use http::{Method, StatusCode};
use hyper::body::Incoming;
use metrics_exporter_prometheus::PrometheusHandle;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::ops::{metrics_response, ReadinessCheck};
use crate::serve::{Handler, ServeOptions};
use crate::{response, Response, ServeError};

static ENABLED: AtomicBool = AtomicBool::new(false);
static PROCESS: Registry = Registry::new();

/// Declares that this process serves its ops endpoints on an operations listener:
/// services started afterwards no longer serve `/metrics` on their public ports.
/// Call it before starting the services.
pub fn enable() {
    ENABLED.store(true, Ordering::Relaxed);
}

/// Whether [`enable`] was called.
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

type Check = dyn Fn() -> Result<(), String> + Send + Sync;

/// The readiness checks of the services of one process.
pub struct Registry {
    checks: Mutex<Vec<Weak<Check>>>,
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}

impl Registry {
    /// An empty registry.
    pub const fn new() -> Self {
        Self {
            checks: Mutex::new(Vec::new()),
        }
    }

    /// The registry of this process.
    pub fn process() -> &'static Registry {
        &PROCESS
    }

    /// Adds a service's check; it counts while the check is alive elsewhere.
    pub fn register(&self, check: &ReadinessCheck) {
        let mut checks = self.checks.lock().unwrap_or_else(PoisonError::into_inner);
        checks.retain(|c| c.strong_count() > 0);
        checks.push(Arc::downgrade(check));
    }

    /// Asks every live check: whether `expected` services run and all are ready, and
    /// the body of `/readyz` (the distinct reasons, one per line).
    pub fn report(&self, expected: usize) -> (bool, String) {
        let live: Vec<Arc<Check>> = {
            let mut checks = self.checks.lock().unwrap_or_else(PoisonError::into_inner);
            checks.retain(|c| c.strong_count() > 0);
            checks.iter().filter_map(Weak::upgrade).collect()
        };
        // Checks run outside the lock: they read their backend's health flags.
        let mut reasons: Vec<String> = Vec::new();
        if live.len() < expected {
            reasons.push(format!("{} of {expected} services running", live.len()));
        }
        for why in live.iter().filter_map(|c| c().err()) {
            if !reasons.contains(&why) {
                reasons.push(why);
            }
        }
        if reasons.is_empty() {
            return (true, "ready\n".to_owned());
        }
        let mut body = "not ready\n".to_owned();
        for r in reasons {
            body.push_str("- ");
            body.push_str(&r.replace('\n', " "));
            body.push('\n');
        }
        (false, body)
    }
}

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
            "/metrics" => metrics_response(&self.metrics),
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
    use http_body_util::BodyExt as _;
    use metrics_exporter_prometheus::PrometheusBuilder;

    use super::*;

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
