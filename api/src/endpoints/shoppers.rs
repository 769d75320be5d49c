//! A shopper's identifiers erased on request: `DELETE /v1/shoppers/{trackingId}`
//! and `GET /v1/shoppers/erasures/{requestId}` (scope `shoppers`).
//!
//! A tenant's erasure covers its own namespace's data; an operator's (`admin`) covers
//! every namespace. The request is recorded in the report store's audit log of
//! erasures (`rm_store::EraseStore::request_erasure`: who, when, which namespaces,
//! the id's SHA-256), the edge's inspector (when it runs in this process) forgets the
//! id's events at once, and the aggregator, the one writer of the report tables, runs
//! the erasure before it stores anything else (`rm_aggregator::erasures`). The answer
//! waits for that run up to `RM_API_ERASURE_WAIT_SECS`: 200 with what it replaced,
//! else 202 with the request's id to read later. Asking again is harmless: a second
//! run finds nothing left to replace. Counts in reports do not move; the id is never
//! stored again (records still in the event log that name it are stored under the
//! replacement, until the log's retention removes them).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use http::{header, HeaderValue, Method, StatusCode};
use rm_service::Response;
use rm_store::model::erasure::Erasure;
use rm_store::EraseStore;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::json_status;
use crate::routes::{schema, Access, Call, Content, RequestBody, Route};
use crate::tenancy::Caller;
use crate::{Api, ApiError};
use rm_auth::client::Scope;

/// Longest tracking id an erasure takes (the beacon's ids are bounded alike).
pub const MAX_ID_BYTES: usize = 512;

/// Most erasures one party (a namespace, or the operators) may have waiting for the
/// aggregator at once; one more is a 429. Each run scans the report store and the
/// aggregator folds nothing meanwhile, so no tenant may queue them without bound.
pub const MAX_PENDING: usize = 8;

/// How far back the pending erasures are looked for (ms).
const PENDING_WINDOW_MS: i64 = 60 * 60 * 1000;

/// How often a waiting request reads the erasure's state.
const POLL: Duration = Duration::from_millis(100);

/// An erasure, as the api answers it.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ErasureAnswer {
    /// The request's id: `GET /v1/shoppers/erasures/{requestId}` reads it again.
    pub request_id: String,
    /// `done` once the aggregator ran it, else `pending`.
    pub status: String,
    /// The namespace it covers; absent: every namespace (an operator's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace_id: Option<String>,
    /// SHA-256 of the erased id, hex: all the audit log keeps of it.
    pub tracking_id_sha256: String,
    /// What now stands where the id was.
    pub replacement: String,
    /// The client that asked.
    pub client_id: String,
    /// When it was asked (RFC 3339).
    pub requested_at: String,
    /// When the aggregator's first run ended (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<String>,
    /// True once the audit log no longer keeps the id itself, only its SHA-256
    /// (`RM_AGGREGATOR_ERASURE_SETTLE_SECS` after the request).
    pub settled: bool,
    /// Rows (or states) whose identifiers that run replaced, per table.
    pub erased: BTreeMap<String, u64>,
    /// Events the edge's inspector forgot (this request only; absent where the
    /// inspector does not run in this process).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inspector_events: Option<u64>,
}

impl ErasureAnswer {
    fn of(e: &Erasure, inspector_events: Option<u64>) -> Self {
        let erased = serde_json::to_value(e.erased)
            .ok()
            .and_then(|v| serde_json::from_value(v).ok())
            .unwrap_or_default();
        let time = |ms: i64| {
            chrono::DateTime::from_timestamp_millis(ms)
                .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
                .unwrap_or_default()
        };
        Self {
            request_id: e.request_id.clone(),
            status: if e.done_ms > 0 { "done" } else { "pending" }.into(),
            namespace_id: e.namespace.clone(),
            tracking_id_sha256: e.digest.clone(),
            replacement: e.replacement.clone(),
            client_id: e.client_id.clone(),
            requested_at: time(e.requested_ms),
            completed_at: (e.done_ms > 0).then(|| time(e.done_ms)),
            settled: !e.holds_id(),
            erased,
            inspector_events,
        }
    }
}

/// The routes.
pub(crate) fn routes() -> Vec<Route> {
    vec![
        Route {
            method: Method::DELETE,
            path: "/v1/shoppers/{trackingId}",
            op: "EraseShopper",
            handler: |api, call| Box::pin(erase(api, call)),
            access: Access::Bearer(&[Scope::Shoppers]),
            summary: "Erases a shopper's identifiers (a customerId, sessionId or dtmToken) from every store, in the caller's namespace (an operator: every namespace); counts stay. 200 once done, 202 while the aggregator has not run it yet",
            query: &[],
            request: RequestBody::None,
            ok: 200,
            response: Content::Json(schema::<ErasureAnswer>),
            errors: &[202, 400, 401, 403, 429, 503],
        },
        Route {
            method: Method::GET,
            path: "/v1/shoppers/erasures/{requestId}",
            op: "GetErasure",
            handler: |api, call| Box::pin(get_erasure(api, call)),
            access: Access::Bearer(&[Scope::Shoppers]),
            summary: "An erasure the caller's namespace asked for (an operator: any), and what it replaced",
            query: &[],
            request: RequestBody::None,
            ok: 200,
            response: Content::Json(schema::<ErasureAnswer>),
            errors: &[401, 403, 404, 503],
        },
    ]
}

/// The namespace an erasure of `caller` covers: its own, or every one for an operator.
fn scope_of(caller: &Caller) -> Option<String> {
    (!caller.admin).then(|| caller.namespace.clone())
}

/// `DELETE /v1/shoppers/{trackingId}`.
async fn erase(api: &Api, call: Call) -> Result<Response, ApiError> {
    let caller = call.caller()?.clone();
    let id = call.id.as_str();
    if id.is_empty() || id.len() > MAX_ID_BYTES || id.chars().any(char::is_control) {
        return Err(ApiError::invalid(
            "trackingId",
            format!("a tracking id of 1 to {MAX_ID_BYTES} bytes without control characters"),
        ));
    }
    let (namespace, now) = (scope_of(&caller), chrono::Utc::now().timestamp_millis());
    let pending = api
        .store
        .erasures_since(now - PENDING_WINDOW_MS)
        .await?
        .iter()
        .filter(|x| x.done_ms == 0 && x.namespace == namespace)
        .count();
    if pending >= MAX_PENDING {
        return Err(ApiError::ResourceExhausted(format!(
            "{pending} erasures of this namespace are still waiting for the aggregator \
             (at most {MAX_PENDING}); retry once they are done"
        )));
    }
    let e = Erasure::new(
        uuid::Uuid::now_v7().to_string(),
        namespace,
        id,
        caller.client_id.clone(),
        now,
        None,
    );
    api.store.request_erasure(&e).await?;
    tracing::info!(
        target: "audit",
        request_id = e.request_id,
        client = caller.client_id,
        namespace = e.namespace.as_deref().unwrap_or("*"),
        tracking_id_sha256 = e.digest,
        "erasure requested"
    );
    let forgotten = api
        .inspector_forget
        .as_ref()
        .map(|forget| forget(id, e.namespace.as_deref()) as u64);
    let deadline = Instant::now() + api.erasure_wait;
    let mut seen = e;
    loop {
        if let Some(now) = api.store.erasure(&seen.request_id).await? {
            seen = now;
        }
        if seen.done_ms > 0 || Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(POLL).await;
    }
    let status = if seen.done_ms > 0 {
        StatusCode::OK
    } else {
        StatusCode::ACCEPTED
    };
    let mut r = json_status(status, &ErasureAnswer::of(&seen, forgotten))?;
    let location = format!("/v1/shoppers/erasures/{}", seen.request_id);
    if let Ok(v) = HeaderValue::from_str(&location) {
        r.headers_mut().insert(header::LOCATION, v);
    }
    Ok(r)
}

/// `GET /v1/shoppers/erasures/{requestId}`: another namespace's is a 404.
async fn get_erasure(api: &Api, call: Call) -> Result<Response, ApiError> {
    let caller = call.caller()?;
    let hidden = || ApiError::NotFound(format!("no erasure has id '{}'", call.id));
    let e = api.store.erasure(&call.id).await?.ok_or_else(hidden)?;
    match &e.namespace {
        Some(ns) => caller.own(ns, hidden)?,
        // An operator's erasure of every namespace: operators only.
        None if !caller.admin => return Err(hidden()),
        None => {}
    }
    json_status(StatusCode::OK, &ErasureAnswer::of(&e, None))
}
