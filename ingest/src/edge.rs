//! The beacon path: 1 decode -> 2 validate -> 3 dedup window -> 4 write to the log.
//!
//! `GET /v1/events/ad/interaction?<query>` answers:
//! - 200 with a 1x1 GIF once the event is durable (or is a duplicate of one);
//! - 400 with the error status object naming reason and field for a bad event;
//! - 414 for a query longer than the bound;
//! - 503 with `Retry-After` when the log cannot make the event durable within the
//!   deadline, or too many writes are in flight: never a 200 for an event that is
//!   not durable.
//!
//! Every beacon response carries `Cache-Control: no-store` and
//! `Access-Control-Allow-Origin: *`; `OPTIONS` answers CORS preflights with 204.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use chrono::Utc;
use http::{header, HeaderValue, Method, StatusCode};
use hyper::body::Incoming;
use rm_eventlog::EventLog;
use rm_schemas::rpc_status::{Code, RpcStatus};
use rm_schemas::{parse_beacon, EventRecord, Rejection};
use rm_service::ops::Ops;
use rm_service::serve::Handler;
use rm_service::{response, Response};
use tokio::sync::Semaphore;

use crate::config::IngestConfig;
use crate::dedup::{DedupWindow, Seen};
use crate::metrics::{EdgeMetrics, Route};

/// Path of the interaction beacon.
pub const BEACON_PATH: &str = "/v1/events/ad/interaction";

/// A transparent 1x1 GIF, the body of a successful beacon.
pub const PIXEL_GIF: &[u8] = &[
    0x47, 0x49, 0x46, 0x38, 0x39, 0x61, 0x01, 0x00, 0x01, 0x00, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00,
    0xff, 0xff, 0xff, 0x21, 0xf9, 0x04, 0x01, 0x00, 0x00, 0x00, 0x00, 0x2c, 0x00, 0x00, 0x00, 0x00,
    0x01, 0x00, 0x01, 0x00, 0x00, 0x02, 0x02, 0x44, 0x01, 0x00, 0x3b,
];

/// Longest raw query kept in a rejected row.
const REJECTED_QUERY_MAX: usize = 2048;

/// The edge: shared by every connection.
pub struct Edge<L> {
    log: Arc<L>,
    dedup: DedupWindow,
    metrics: EdgeMetrics,
    inflight: Semaphore,
    config: IngestConfig,
    ops: Ops,
    epoch: Instant,
    rejected_window: AtomicU64,
}

impl<L: EventLog> Edge<L> {
    /// Builds the edge over `log`.
    pub fn new(config: IngestConfig, log: Arc<L>, metrics: EdgeMetrics, ops: Ops) -> Self {
        let shards =
            (std::thread::available_parallelism().map_or(4, |n| n.get()) * 16).next_power_of_two();
        Self {
            dedup: DedupWindow::new(
                config.dedup_ttl_secs.saturating_mul(1000),
                config.dedup_max_keys,
                shards,
            ),
            inflight: Semaphore::new(config.max_inflight.max(1)),
            log,
            metrics,
            config,
            ops,
            epoch: Instant::now(),
            rejected_window: AtomicU64::new(0),
        }
    }

    /// The dedup window (for its gauges).
    pub fn dedup(&self) -> &DedupWindow {
        &self.dedup
    }

    /// Refreshes the gauges sampled rather than counted on the hot path.
    pub fn sample_gauges(&self) {
        self.metrics.dedup_keys.set(self.dedup.len() as f64);
        self.metrics
            .dedup_memory
            .set(self.dedup.memory_bytes() as f64);
        let busy = self.config.max_inflight.max(1) - self.inflight.available_permits();
        self.metrics.inflight.set(busy as f64);
    }

    async fn route(&self, req: &http::Request<Incoming>) -> (Route, Response) {
        let path = req.uri().path();
        if let Some(r) = self.ops.route(req.method(), path) {
            return (Route::Other, r);
        }
        if path != BEACON_PATH {
            return (Route::Other, response::not_found(path));
        }
        let r = match *req.method() {
            Method::GET | Method::HEAD => {
                let query = req.uri().query().unwrap_or("");
                if query.len() > self.config.max_query_bytes {
                    too_long(self.config.max_query_bytes)
                } else {
                    self.beacon(query).await
                }
            }
            Method::OPTIONS => preflight(),
            _ => response::method_not_allowed("GET, HEAD, OPTIONS"),
        };
        (Route::Beacon, r)
    }

    /// Handles one beacon query string.
    pub async fn beacon(&self, query: &str) -> Response {
        let event = match parse_beacon(query) {
            Ok(e) => e,
            Err(rejection) => return self.reject(query, &rejection),
        };
        let interaction_type = event.interaction_type;
        let record = EventRecord::new(event, uuid::Uuid::now_v7(), Utc::now());
        let key = record.dedup_key.0;
        let now_ms = self.epoch.elapsed().as_millis() as u64;
        let seen = self.dedup.check(key, now_ms);
        if seen == Seen::Durable {
            self.metrics.duplicates.increment(1);
            return pixel();
        }
        let forget = || {
            if seen == Seen::New {
                self.dedup.forget(key);
            }
        };
        let Ok(_permit) = self.inflight.try_acquire() else {
            forget();
            self.metrics.log_error("inflight_limit");
            return response::unavailable(
                "overloaded",
                "too many beacons in flight; retry shortly",
                1,
            );
        };
        let started = Instant::now();
        // Keyed by the shopper: every entity the aggregator derives (a view, a cart
        // line, an attribution touch) belongs to one tracking id, so it lives in one
        // partition and one consumer of a group writes it.
        let write = self.log.append(
            &self.config.topic,
            record.event.tracking_id().as_bytes(),
            record.to_bytes(),
        );
        let outcome = tokio::time::timeout(self.config.write_deadline(), write).await;
        self.metrics
            .log_write
            .record(started.elapsed().as_secs_f64());
        match outcome {
            Ok(Ok(())) => {
                self.dedup.mark_durable(key);
                self.metrics.accepted(interaction_type);
                pixel()
            }
            Ok(Err(e)) => {
                forget();
                self.metrics.log_error(e.kind());
                tracing::warn!(error = %e, "event not durable");
                response::unavailable(
                    "log_unavailable",
                    "the event could not be made durable; retry later",
                    1,
                )
            }
            Err(_) => {
                forget();
                self.metrics.log_error("timeout");
                response::unavailable(
                    "log_timeout",
                    "the event log did not confirm the write in time; retry later",
                    1,
                )
            }
        }
    }

    fn reject(&self, query: &str, rejection: &Rejection) -> Response {
        self.metrics.rejected(rejection.reason);
        if self.config.rejected_topic {
            self.write_rejected_row(query, rejection);
        }
        response::status(&RpcStatus::from_rejection(rejection))
    }

    /// Writes a "bad row" to the rejected topic, rate-limited, without waiting.
    fn write_rejected_row(&self, query: &str, rejection: &Rejection) {
        let second = self.epoch.elapsed().as_secs();
        // Upper 32 bits: the second; lower 32: rows written in it.
        let prev = self
            .rejected_window
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |w| {
                Some(if w >> 32 == second {
                    w + 1
                } else {
                    second << 32 | 1
                })
            })
            .unwrap_or(0);
        let used = if prev >> 32 == second {
            (prev & 0xffff_ffff) + 1
        } else {
            1
        };
        if used > self.config.rejected_rows_per_sec {
            self.metrics.rejected_rows_dropped.increment(1);
            return;
        }
        let mut end = query.len().min(REJECTED_QUERY_MAX);
        while !query.is_char_boundary(end) {
            end -= 1;
        }
        let row = serde_json::json!({
            "v": 1,
            "receivedAt": rm_schemas::record::format_received_at(Utc::now()),
            "reason": rejection.reason.as_str(),
            "field": rejection.field,
            "message": rejection.message,
            "query": &query[..end],
            "truncated": end < query.len(),
        });
        let log = Arc::clone(&self.log);
        let topic = self.config.rejected_topic_name.clone();
        tokio::spawn(async move {
            let bytes = serde_json::to_vec(&row).unwrap_or_default();
            if let Err(e) = log.append(&topic, b"", bytes).await {
                tracing::debug!(error = %e, "rejected row not written");
            }
        });
    }
}

fn beacon_headers(mut r: Response) -> Response {
    let h = r.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        HeaderValue::from_static("*"),
    );
    r
}

fn pixel() -> Response {
    response::with_body(StatusCode::OK, "image/gif", Bytes::from_static(PIXEL_GIF))
}

fn preflight() -> Response {
    let mut r = response::with_body(StatusCode::NO_CONTENT, "text/plain", Bytes::new());
    let h = r.headers_mut();
    h.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("GET, HEAD, OPTIONS"),
    );
    h.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static("*"),
    );
    h.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static("86400"),
    );
    r
}

fn too_long(max: usize) -> Response {
    let mut r = response::error(
        Code::InvalidArgument,
        "query_too_long",
        format!("the query string is longer than {max} bytes"),
    );
    *r.status_mut() = StatusCode::URI_TOO_LONG;
    r
}

/// The edge as an HTTP handler.
pub struct EdgeHandler<L>(pub Arc<Edge<L>>);

impl<L> Clone for EdgeHandler<L> {
    fn clone(&self) -> Self {
        Self(Arc::clone(&self.0))
    }
}

impl<L: EventLog> Handler for EdgeHandler<L> {
    async fn call(&self, req: http::Request<Incoming>) -> Response {
        let (route, r) = self.0.route(&req).await;
        self.0.metrics.request(route, r.status().as_u16());
        if matches!(route, Route::Beacon) {
            beacon_headers(r)
        } else {
            r
        }
    }
}
