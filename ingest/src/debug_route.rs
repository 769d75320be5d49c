//! `GET /v1/debug/events?trackingId=...`: the integration inspector's report
//! ([`crate::inspector_report`]) behind a bearer token with scope `reports` (or
//! `admin`). A tenant's token sees only its namespace's events. On an edge running
//! alone, `DELETE` with scope `shoppers` makes the inspector forget a shopper's
//! events (an erasure; the api does it for an edge in its process).
//!
//! One endpoint, one implementation of its logic ([`answer`]: the `trackingId`
//! parameter, the report, `Cache-Control: no-store`), served on two ports: the api's
//! when the edge runs in its process (the api's router checks the token and calls
//! [`answer`] through `rm_api::InspectorFn`), and the edge's own when it runs alone
//! and `RM_INGEST_JWKS_URL` is set (the token verified against the api's JWK set,
//! [`crate::jwks`]; otherwise 404 saying where the inspector is). Both ports verify
//! with `rm_auth`'s one rule and refuse with its one denial answer
//! (`rm_auth::denial`).

use http::{header, HeaderValue, Method, StatusCode};
use hyper::body::Incoming;
use rm_auth::client::Scope;
use rm_auth::denial::Denial;
use rm_auth::AuthError;
use rm_eventlog::EventLog;
use rm_schemas::namespace::Viewer;
use rm_schemas::rpc_status::Code;
use rm_schemas::{RejectReason, Rejection};
use rm_service::{response, Response};

use crate::edge::Edge;
use crate::inspector::Inspector;

impl<L: EventLog> Edge<L> {
    /// Answers the inspector route: `GET` reads (scope `reports`), `DELETE` forgets a
    /// shopper's events (scope `shoppers`: an erasure, for an edge running alone;
    /// the api's `DELETE /v1/shoppers/{trackingId}` does it for the edge in its
    /// process).
    pub(crate) async fn debug(&self, req: &http::Request<Incoming>) -> Response {
        let scope = match *req.method() {
            Method::GET | Method::HEAD => Scope::Reports,
            Method::DELETE => Scope::Shoppers,
            _ => return response::method_not_allowed("GET, HEAD, DELETE"),
        };
        let Some(bearer) = &self.bearer else {
            return response::error(
                Code::NotFound,
                "inspector_not_served_here",
                "the integration inspector is served by the api (GET /v1/debug/events on its port); \
                 to serve it on an edge running alone, set RM_INGEST_JWKS_URL to the api's /.well-known/jwks.json",
            );
        };
        let viewer = match bearer
            .check(req.headers().get(header::AUTHORIZATION), scope)
            .await
        {
            Ok(v) => v,
            Err(e) => return denied(&e),
        };
        let query = req.uri().query().unwrap_or("");
        if scope == Scope::Shoppers {
            return forget(&self.inspector, query, &viewer);
        }
        answer(&self.inspector, query, &viewer)
    }
}

/// The `trackingId` of the route's query: a 400 answer when it does not decode or
/// names none.
fn tracking_id_of(query: &str) -> Result<String, Box<Response>> {
    let tracking_id = rm_schemas::query::decode_query(query)
        .map_err(|r| {
            Box::new(response::status(
                &rm_schemas::rpc_status::RpcStatus::from_rejection(&r),
            ))
        })?
        .into_iter()
        .find(|p| p.key == "trackingId")
        .map(|p| p.value.into_owned())
        .filter(|v| !v.is_empty());
    tracking_id.ok_or_else(|| {
        let r = Rejection::new(
            RejectReason::MissingParameter,
            "trackingId",
            "trackingId is required: the sessionId, customerId or dtmToken to inspect",
        );
        Box::new(response::status(
            &rm_schemas::rpc_status::RpcStatus::from_rejection(&r),
        ))
    })
}

/// `DELETE /v1/debug/events?trackingId=`: the inspector forgets the id's events the
/// viewer may see (a tenant: those of its namespace's ad ids); how many.
fn forget(inspector: &Inspector, query: &str, viewer: &Viewer) -> Response {
    let tracking_id = match tracking_id_of(query) {
        Ok(id) => id,
        Err(r) => return *r,
    };
    let namespace = match viewer {
        Viewer::Operator => None,
        Viewer::Tenant(ns) => Some(ns.as_str()),
    };
    let n = inspector.forget(&tracking_id, namespace);
    let mut r = response::json(
        StatusCode::OK,
        serde_json::to_vec(&serde_json::json!({ "inspectorEvents": n })).unwrap_or_default(),
    );
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

/// The answer to a request the token let in: 401/403 by the one denial answer; the
/// key set unavailable is a 503.
fn denied(e: &AuthError) -> Response {
    if let Some(d) = Denial::of(e) {
        return d.response();
    }
    tracing::warn!(error = %e, "jwks unavailable");
    response::unavailable(
        "jwks_unavailable",
        "the token cannot be verified right now; retry later",
        5,
    )
}

/// The route's answer to `query` for `viewer` (who the token let in), on either
/// port: the report of the `trackingId` as the viewer may see it, 400 when the
/// query does not decode or names no `trackingId`.
pub fn answer(inspector: &Inspector, query: &str, viewer: &Viewer) -> Response {
    let tracking_id = match tracking_id_of(query) {
        Ok(id) => id,
        Err(r) => return *r,
    };
    let body = crate::inspector_report::report(inspector, &tracking_id, viewer);
    let mut r = response::json(
        StatusCode::OK,
        serde_json::to_vec(&body).unwrap_or_default(),
    );
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}
