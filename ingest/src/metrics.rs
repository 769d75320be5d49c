//! The edge's metrics: every name in one place, every label from a bounded set.
//! Handles are registered once at start (so every series exists from the first
//! scrape, at zero) and incremented on the hot path without any lookup.
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `ingest_requests_total` | counter | `route` (beacon, impression, click, debug, other), `status` (200, 204, 302, 400, 401, 403, 404, 405, 410, 413, 414, 503) |
//! | `ingest_events_accepted_total` | counter | `interaction_type` (15 + adImpression, adClick) |
//! | `ingest_events_rejected_total` | counter | `reason` (fixed set) |
//! | `ingest_events_invalid_total` | counter | `reason` (known_bot, non_browser, prefetch, unverified_ad_id): written events that are invalid traffic, by their first reason (`rm_schemas::agent`); also counted in `ingest_events_accepted_total` |
//! | `ingest_events_duplicate_total` | counter | |
//! | `ingest_clicks_in_window_total` | counter | |
//! | `ingest_log_write_seconds` | histogram | `backend` |
//! | `ingest_log_errors_total` | counter | `kind` (backpressure, unavailable, refused, closed, timeout) |
//! | `ingest_inflight_requests` | gauge | |
//! | `ingest_dedup_keys` / `ingest_dedup_memory_bytes` | gauge | |
//! | `ingest_rejected_rows_dropped_total` | counter | |
//! | `ingest_ad_id_unverified_total` | counter | `verdict` (expired, bad_signature, foreign) |
//! | `ingest_click_redirects_total` | counter | `recorded` (true, false) |
//! | `ingest_click_links_ended_total` | counter | | signed clicks answered 410 instead of a redirect: their ad id expired beyond the grace period |
//! | `ingest_inspector_ids` / `ingest_inspector_memory_bytes` | gauge | |
//! | `ingest_consent_total` | counter | `outcome` (not_evaluated, absent, allowed, no_consent, no_legitimate_interest, restricted, undecodable_encoding, undecodable_version, undecodable_truncated, undecodable_range): what the consent stage decided per event (`crate::consent`) |

use metrics::{counter, gauge, histogram, Counter, Gauge, Histogram};
use rm_schemas::agent::InvalidReason;
use rm_schemas::record::UnverifiedAdId;
use rm_schemas::{InteractionType, RejectReason};

/// Beacon requests by route and status.
pub const REQUESTS: &str = "ingest_requests_total";
/// Accepted (durably written) events by interaction type.
pub const ACCEPTED: &str = "ingest_events_accepted_total";
/// Rejected beacons by reason.
pub const REJECTED: &str = "ingest_events_rejected_total";
/// Written events that are invalid traffic, by reason.
pub const INVALID: &str = "ingest_events_invalid_total";
/// Duplicates answered 200 without a write.
pub const DUPLICATES: &str = "ingest_events_duplicate_total";
/// Clicks answered 200 without a write because an earlier one of the same click key
/// was within the click window (also counted in [`DUPLICATES`]).
pub const CLICK_WINDOW: &str = "ingest_clicks_in_window_total";
/// Time from handing a record to the log to its durable acknowledgement.
pub const LOG_WRITE: &str = "ingest_log_write_seconds";
/// Failed log writes by kind.
pub const LOG_ERRORS: &str = "ingest_log_errors_total";
/// Beacon requests being processed.
pub const INFLIGHT: &str = "ingest_inflight_requests";
/// Keys held in the dedup window.
pub const DEDUP_KEYS: &str = "ingest_dedup_keys";
/// Bytes allocated by the dedup window.
pub const DEDUP_MEMORY: &str = "ingest_dedup_memory_bytes";
/// Rejected rows not sent to the rejected topic because of its rate limit.
pub const REJECTED_ROWS_DROPPED: &str = "ingest_rejected_rows_dropped_total";

/// Events whose `adId` did not verify, by verdict.
pub const AD_ID_UNVERIFIED: &str = "ingest_ad_id_unverified_total";
/// Events by what their consent string decided.
pub const CONSENT: &str = "ingest_consent_total";
/// Click redirects, by whether the click was durably recorded.
pub const CLICK_REDIRECTS: &str = "ingest_click_redirects_total";
/// Signed clicks not redirected because their ad id expired beyond the grace period.
pub const CLICK_LINKS_ENDED: &str = "ingest_click_links_ended_total";
/// Tracking ids held by the inspector.
pub const INSPECTOR_IDS: &str = "ingest_inspector_ids";
/// Bytes held by the inspector (as it accounts them).
pub const INSPECTOR_MEMORY: &str = "ingest_inspector_memory_bytes";

/// HTTP statuses the edge answers with (bounded label set).
pub const STATUSES: [u16; 12] = [200, 204, 302, 400, 401, 403, 404, 405, 410, 413, 414, 503];

/// Routes (bounded label set).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// `/v1/events/ad/interaction`.
    Beacon,
    /// `/v1/events/ad/impression`.
    Impression,
    /// `/v1/events/ad/click`.
    Click,
    /// `/v1/debug/events`.
    Debug,
    /// Anything else.
    Other,
}

impl Route {
    /// Every route, in label order.
    pub const ALL: [Route; 5] = [
        Route::Beacon,
        Route::Impression,
        Route::Click,
        Route::Debug,
        Route::Other,
    ];

    /// The `route` label.
    pub const fn as_str(self) -> &'static str {
        match self {
            Route::Beacon => "beacon",
            Route::Impression => "impression",
            Route::Click => "click",
            Route::Debug => "debug",
            Route::Other => "other",
        }
    }
}

/// Pre-registered metric handles of the edge.
pub struct EdgeMetrics {
    requests: Vec<(u16, [Counter; 5])>,
    accepted: Vec<Counter>,
    rejected: Vec<(RejectReason, Counter)>,
    invalid: [Counter; 4],
    /// Duplicates.
    pub duplicates: Counter,
    /// Clicks within the click window of an earlier one.
    pub click_window: Counter,
    /// Log write latency.
    pub log_write: Histogram,
    log_errors: Vec<(&'static str, Counter)>,
    /// In-flight beacon requests.
    pub inflight: Gauge,
    /// Dedup window size.
    pub dedup_keys: Gauge,
    /// Dedup window memory.
    pub dedup_memory: Gauge,
    /// Rejected rows dropped by the rate limit.
    pub rejected_rows_dropped: Counter,
    unverified: Vec<(UnverifiedAdId, Counter)>,
    consent: Vec<(&'static str, Counter)>,
    redirects: [Counter; 2],
    /// Signed clicks answered 410: their ad id ended.
    pub links_ended: Counter,
    /// Inspector tracking ids.
    pub inspector_ids: Gauge,
    /// Inspector memory.
    pub inspector_memory: Gauge,
}

impl EdgeMetrics {
    /// Registers every series of the edge for the given log backend.
    pub fn register(backend: &'static str) -> Self {
        let requests = STATUSES
            .iter()
            .map(|s| {
                let st = s.to_string();
                (
                    *s,
                    Route::ALL
                        .map(|r| counter!(REQUESTS, "route" => r.as_str(), "status" => st.clone())),
                )
            })
            .collect();
        let accepted = InteractionType::ALL
            .iter()
            .chain(InteractionType::AD_EVENTS.iter())
            .map(|t| counter!(ACCEPTED, "interaction_type" => t.as_str()))
            .collect();
        let rejected = RejectReason::ALL
            .iter()
            .map(|r| (*r, counter!(REJECTED, "reason" => r.as_str())))
            .collect();
        let log_errors = [
            "backpressure",
            "unavailable",
            "refused",
            "closed",
            "timeout",
            "inflight_limit",
        ]
        .into_iter()
        .map(|k| (k, counter!(LOG_ERRORS, "kind" => k)))
        .collect();
        Self {
            requests,
            accepted,
            rejected,
            invalid: InvalidReason::ALL.map(|r| counter!(INVALID, "reason" => r.as_str())),
            duplicates: counter!(DUPLICATES),
            click_window: counter!(CLICK_WINDOW),
            log_write: histogram!(LOG_WRITE, "backend" => backend),
            log_errors,
            inflight: gauge!(INFLIGHT),
            dedup_keys: gauge!(DEDUP_KEYS),
            dedup_memory: gauge!(DEDUP_MEMORY),
            rejected_rows_dropped: counter!(REJECTED_ROWS_DROPPED),
            unverified: UnverifiedAdId::ALL
                .iter()
                .map(|v| (*v, counter!(AD_ID_UNVERIFIED, "verdict" => v.as_str())))
                .collect(),
            consent: crate::consent::ConsentOutcome::LABELS
                .iter()
                .map(|l| (*l, counter!(CONSENT, "outcome" => *l)))
                .collect(),
            redirects: [
                counter!(CLICK_REDIRECTS, "recorded" => "true"),
                counter!(CLICK_REDIRECTS, "recorded" => "false"),
            ],
            links_ended: counter!(CLICK_LINKS_ENDED),
            inspector_ids: gauge!(INSPECTOR_IDS),
            inspector_memory: gauge!(INSPECTOR_MEMORY),
        }
    }

    /// Counts one answered request.
    pub fn request(&self, route: Route, status: u16) {
        if let Some((_, by_route)) = self.requests.iter().find(|(s, _)| *s == status) {
            by_route[route as usize].increment(1);
        }
    }

    /// Counts one accepted event.
    pub fn accepted(&self, t: InteractionType) {
        let i = InteractionType::ALL
            .iter()
            .chain(InteractionType::AD_EVENTS.iter())
            .position(|x| *x == t);
        if let Some(i) = i {
            self.accepted[i].increment(1);
        }
    }

    /// Counts one rejected beacon.
    pub fn rejected(&self, reason: RejectReason) {
        if let Some((_, c)) = self.rejected.iter().find(|(r, _)| *r == reason) {
            c.increment(1);
        }
    }

    /// Counts one written event that is invalid traffic.
    pub fn invalid(&self, reason: InvalidReason) {
        self.invalid[reason as usize].increment(1);
    }

    /// Counts an event's consent outcome (a label of
    /// [`crate::consent::ConsentOutcome::LABELS`]).
    pub fn consent(&self, outcome: &str) {
        if let Some((_, c)) = self.consent.iter().find(|(l, _)| *l == outcome) {
            c.increment(1);
        }
    }

    /// Counts one event whose `adId` did not verify.
    pub fn unverified(&self, v: UnverifiedAdId) {
        if let Some((_, c)) = self.unverified.iter().find(|(x, _)| *x == v) {
            c.increment(1);
        }
    }

    /// Counts one click redirect, recorded durably or not.
    pub fn click_redirect(&self, recorded: bool) {
        self.redirects[usize::from(!recorded)].increment(1);
    }

    /// Counts one failed log write.
    pub fn log_error(&self, kind: &str) {
        if let Some((_, c)) = self.log_errors.iter().find(|(k, _)| *k == kind) {
            c.increment(1);
        }
    }
}
