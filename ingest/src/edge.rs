//! The beacon path: 1 decode -> 2 validate -> 3 dedup window -> 4 write to the log.
//!
//! Routes: `/v1/events/ad/interaction` (here), `/v1/events/ad/impression` and
//! `/v1/events/ad/click` ([`crate::ad_events`]), `/v1/debug/events`
//! ([`crate::debug_route`]), and the ops endpoints. Every event's `adId` is verified
//! ([`rm_schemas::ad_id::AdIdKeys::verify`]): one that does not verify is accepted and
//! marked `adIdVerdict` in its record, or refused with 400 `unverified_ad_id` when
//! `RM_INGEST_REQUIRE_VALID_AD_IDS` is on. Every answered event is shown to the
//! integration inspector ([`crate::inspector`]). Every event's record carries its
//! traffic class from the request headers ([`crate::traffic`]): invalid traffic
//! (bots, non-browsers, prefetches) is answered and written like any other, flagged
//! in the record and counted by reason (`ingest_events_invalid_total`).
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
use chrono::{DateTime, Utc};
use http::{header, HeaderValue, Method, StatusCode};
use hyper::body::Incoming;
use rm_eventlog::EventLog;
use rm_schemas::ad_id::AdIdKeys;
use rm_schemas::agent::Traffic;
use rm_schemas::inspect::{Endpoint, Outcome};
use rm_schemas::record::UnverifiedAdId;
use rm_schemas::rpc_status::{Code, RpcStatus};
use rm_schemas::{parse_beacon, EventRecord, InteractionEvent, RejectReason, Rejection};
use rm_service::ops::Ops;
use rm_service::serve::Handler;
use rm_service::{response, Response};
use tokio::sync::Semaphore;

use crate::config::IngestConfig;
use crate::consent::ConsentStage;
use crate::dedup::{DedupWindow, Seen};
use crate::inspector::{admits_query, params_of, Inspector, Recorded};
use crate::jwks::BearerVerifier;
use crate::metrics::{EdgeMetrics, Route};

/// Path of the interaction beacon.
pub const BEACON_PATH: &str = "/v1/events/ad/interaction";
/// Path of the ad impression endpoint.
pub const IMPRESSION_PATH: &str = "/v1/events/ad/impression";
/// Path of the ad click endpoint.
pub const CLICK_PATH: &str = "/v1/events/ad/click";
/// Path of the integration inspector.
pub const DEBUG_PATH: &str = "/v1/debug/events";

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
    /// Clicks seen within the click window, by click key (`None`: off).
    clicks: Option<DedupWindow>,
    pub(crate) metrics: EdgeMetrics,
    inflight: Semaphore,
    pub(crate) config: IngestConfig,
    ops: Ops,
    epoch: Instant,
    rejected_window: AtomicU64,
    pub(crate) ad_keys: AdIdKeys,
    pub(crate) inspector: Arc<Inspector>,
    pub(crate) bearer: Option<BearerVerifier>,
    consent: ConsentStage,
}

/// What the write path did with a record.
pub(crate) enum Written {
    /// Durably written now.
    Durable,
    /// A duplicate of a durable event: not written again.
    Duplicate,
    /// Not durable: the 503 to answer.
    Failed(Response),
}

impl Written {
    pub(crate) fn outcome(&self) -> Outcome {
        match self {
            Written::Durable => Outcome::Accepted,
            Written::Duplicate => Outcome::Duplicate,
            Written::Failed(_) => Outcome::NotRecorded,
        }
    }
}

/// What the edge shares with the rest of the process.
pub struct Shared {
    /// Verifies realised ad ids and click destinations.
    pub ad_keys: AdIdKeys,
    /// The integration inspector.
    pub inspector: Arc<Inspector>,
    /// Verifies bearer tokens for the inspector on the edge's port (when configured).
    pub bearer: Option<BearerVerifier>,
    /// Decides consent strings (`crate::consent`).
    pub consent: ConsentStage,
}

impl<L: EventLog> Edge<L> {
    /// Builds the edge over `log`.
    pub fn new(
        config: IngestConfig,
        log: Arc<L>,
        metrics: EdgeMetrics,
        ops: Ops,
        shared: Shared,
    ) -> Self {
        // The bot patterns compile here, not on the first beacon.
        rm_schemas::agent::warm();
        let shards =
            (std::thread::available_parallelism().map_or(4, |n| n.get()) * 16).next_power_of_two();
        Self {
            dedup: DedupWindow::new(
                config.dedup_ttl_secs.saturating_mul(1000),
                config.dedup_max_keys,
                shards,
            ),
            // Generations of half the window: a click key is remembered between half
            // the window and the window, never longer, so the edge only drops a click
            // the click window makes the same as an earlier one.
            clicks: (config.click_window_secs > 0).then(|| {
                DedupWindow::new(
                    (config.click_window_secs * 1000 / 2).max(1),
                    config.dedup_max_keys / 4,
                    shards,
                )
            }),
            inflight: Semaphore::new(config.max_inflight.max(1)),
            log,
            metrics,
            config,
            ops,
            epoch: Instant::now(),
            rejected_window: AtomicU64::new(0),
            ad_keys: shared.ad_keys,
            inspector: shared.inspector,
            bearer: shared.bearer,
            consent: shared.consent,
        }
    }

    /// The record of `event` received at `now`: its consent string decided first, so
    /// that ids it refuses are replaced before the dedup key, the log or anything else
    /// sees them ([`ConsentStage`]).
    pub(crate) fn record(&self, mut event: InteractionEvent, now: DateTime<Utc>) -> EventRecord {
        let consent = self.consent.apply(&mut event, now);
        self.metrics.consent(consent.label());
        let mut record = EventRecord::new(event, uuid::Uuid::now_v7(), now);
        record.anonymous = consent.anonymous();
        record
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
        let (ids, bytes) = self.inspector.usage();
        self.metrics.inspector_ids.set(ids as f64);
        self.metrics.inspector_memory.set(bytes as f64);
    }

    async fn route(&self, req: &http::Request<Incoming>) -> (Route, Response) {
        let path = req.uri().path();
        if let Some(r) = self.ops.route(req.method(), path) {
            return (Route::Other, r);
        }
        let route = match path {
            BEACON_PATH => Route::Beacon,
            IMPRESSION_PATH => Route::Impression,
            CLICK_PATH => Route::Click,
            DEBUG_PATH => return (Route::Debug, self.debug(req).await),
            _ => return (Route::Other, response::not_found(path)),
        };
        let r = match *req.method() {
            Method::GET | Method::HEAD => {
                let query = req.uri().query().unwrap_or("");
                if query.len() > self.config.max_query_bytes {
                    too_long(self.config.max_query_bytes)
                } else {
                    let traffic = crate::traffic::of(req.headers());
                    match route {
                        Route::Impression => {
                            use rm_schemas::InteractionType::AdImpression;
                            self.ad_event(AdImpression, query, traffic).await
                        }
                        Route::Click => {
                            use rm_schemas::InteractionType::AdClick;
                            self.ad_event(AdClick, query, traffic).await
                        }
                        _ => self.beacon(query, traffic).await,
                    }
                }
            }
            Method::OPTIONS => preflight(),
            _ => response::method_not_allowed("GET, HEAD, OPTIONS"),
        };
        (route, r)
    }

    /// Handles one beacon query string sent with `traffic`'s headers.
    pub async fn beacon(&self, query: &str, traffic: Traffic) -> Response {
        let event = match parse_beacon(query) {
            Ok(e) => e,
            Err(rejection) => return self.reject(Endpoint::Interaction, query, &rejection),
        };
        let verdict = match self.verdict(&event) {
            Ok(v) => v,
            Err(rejection) => return self.reject(Endpoint::Interaction, query, &rejection),
        };
        let mut record = self.record(event, Utc::now());
        record.ad_id_verdict = verdict;
        record.set_traffic(traffic);
        let anonymous = record.anonymous;
        let written = self.write(record).await;
        // An event without consent is never shown to the inspector (its query holds
        // the ids the shopper refused).
        if !anonymous {
            self.observe(
                Endpoint::Interaction,
                query,
                written.outcome(),
                None,
                verdict,
            );
        }
        match written {
            Written::Durable | Written::Duplicate => pixel(),
            Written::Failed(r) => r,
        }
    }

    /// Verifies the event's `adId`: `Ok(None)` when valid, `Ok(Some(_))` when it does
    /// not verify but is accepted (marked and counted), `Err` when the setting refuses it.
    pub(crate) fn verdict(
        &self,
        event: &InteractionEvent,
    ) -> Result<Option<UnverifiedAdId>, Rejection> {
        let verdict = self.ad_keys.verify(&event.ad_id, Utc::now().timestamp());
        let Some(unverified) = UnverifiedAdId::of(verdict) else {
            return Ok(None);
        };
        self.metrics.unverified(unverified);
        if self.config.require_valid_ad_ids {
            let why = match unverified {
                UnverifiedAdId::Expired => "has expired",
                UnverifiedAdId::BadSignature => "does not carry a valid signature",
                UnverifiedAdId::Foreign => "is not an ad id this service served",
            };
            return Err(Rejection::new(
                RejectReason::UnverifiedAdId,
                "adId",
                format!(
                    "the adId {why} ({}); this edge refuses unverified ad ids",
                    unverified.as_str()
                ),
            ));
        }
        Ok(Some(unverified))
    }

    /// 3 dedup window -> 4 write to the log: durable, duplicate, or the 503 to answer.
    pub(crate) async fn write(&self, record: EventRecord) -> Written {
        let interaction_type = record.event.interaction_type;
        let invalid = record.invalid_reason();
        let key = record.dedup_key.0;
        let now_ms = self.epoch.elapsed().as_millis() as u64;
        // A click re-fired within the click window (any timestamp) is the same click.
        let click = self
            .clicks
            .as_ref()
            .zip(rm_schemas::dedup_key::click_key(&record.event))
            .map(|(w, k)| (w, k.0, w.check(k.0, now_ms)));
        if let Some((_, _, Seen::Durable)) = click {
            self.metrics.duplicates.increment(1);
            self.metrics.click_window.increment(1);
            return Written::Duplicate;
        }
        let seen = self.dedup.check(key, now_ms);
        if seen == Seen::Durable {
            self.metrics.duplicates.increment(1);
            return Written::Duplicate;
        }
        let forget = || {
            if seen == Seen::New {
                self.dedup.forget(key);
            }
            if let Some((w, k, Seen::New)) = click {
                w.forget(k);
            }
        };
        let Ok(_permit) = self.inflight.try_acquire() else {
            forget();
            self.metrics.log_error("inflight_limit");
            return Written::Failed(response::unavailable(
                "overloaded",
                "too many beacons in flight; retry shortly",
                1,
            ));
        };
        let started = Instant::now();
        // Keyed by the served ad (a cart event by its shopper): every entity the
        // aggregator keeps lives in one partition and one consumer of a group writes it.
        let write = self.log.append(
            &self.config.topic,
            record.partition_key(),
            record.to_bytes(),
        );
        let outcome = tokio::time::timeout(self.config.write_deadline(), write).await;
        self.metrics
            .log_write
            .record(started.elapsed().as_secs_f64());
        match outcome {
            Ok(Ok(())) => {
                self.dedup.mark_durable(key);
                if let Some((w, k, _)) = click {
                    w.mark_durable(k);
                }
                self.metrics.accepted(interaction_type);
                if let Some(reason) = invalid {
                    self.metrics.invalid(reason);
                }
                Written::Durable
            }
            Ok(Err(e)) => {
                forget();
                self.metrics.log_error(e.kind());
                tracing::warn!(error = %e, "event not durable");
                Written::Failed(response::unavailable(
                    "log_unavailable",
                    "the event could not be made durable; retry later",
                    1,
                ))
            }
            Err(_) => {
                forget();
                self.metrics.log_error("timeout");
                Written::Failed(response::unavailable(
                    "log_timeout",
                    "the event log did not confirm the write in time; retry later",
                    1,
                ))
            }
        }
    }

    /// Shows an answered event to the inspector (nothing at all when it is off, the
    /// event's tracking ids are not sampled, or they are new past the second's budget).
    pub(crate) fn observe(
        &self,
        endpoint: Endpoint,
        query: &str,
        outcome: Outcome,
        message: Option<String>,
        verdict: Option<UnverifiedAdId>,
    ) {
        if !admits_query(&self.inspector, query) {
            return;
        }
        let params = params_of(query);
        // A rejected event was never verified: its ad id is judged here, so an id
        // that does not verify never shows it in the namespace it names (no verdict
        // reads as genuine, `inspector_report::namespace_of`).
        let verdict = match outcome {
            Outcome::Rejected { .. } => {
                params
                    .iter()
                    .find(|(k, _)| *k == "adId")
                    .and_then(|(_, id)| {
                        UnverifiedAdId::of(self.ad_keys.verify(id, Utc::now().timestamp()))
                    })
            }
            _ => verdict,
        };
        let recorded = Recorded {
            received_at_ms: Utc::now().timestamp_millis(),
            endpoint,
            params,
            outcome,
            message,
            ad_id_verdict: verdict,
        };
        self.inspector.record(recorded);
    }

    pub(crate) fn reject(
        &self,
        endpoint: Endpoint,
        query: &str,
        rejection: &Rejection,
    ) -> Response {
        self.metrics.rejected(rejection.reason);
        if self.config.rejected_topic {
            self.write_rejected_row(query, rejection);
        }
        self.observe(
            endpoint,
            query,
            Outcome::Rejected {
                reason: rejection.reason,
                field: rejection.field.to_string(),
            },
            Some(rejection.message.clone()),
            None,
        );
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

pub(crate) fn beacon_headers(mut r: Response) -> Response {
    let h = r.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        HeaderValue::from_static("*"),
    );
    r
}

pub(crate) fn pixel() -> Response {
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
        match route {
            Route::Beacon | Route::Impression | Route::Click => beacon_headers(r),
            Route::Debug | Route::Other => r,
        }
    }
}
