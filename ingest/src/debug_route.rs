//! `GET /v1/debug/events?trackingId=...` on the edge's own port: the integration
//! inspector's report ([`crate::inspector_report`]) behind a bearer token with scope
//! `reports` (or `admin`), verified against the api's JWK set ([`crate::jwks`]).
//! A tenant's token sees only its namespace's events (`crate::inspector_report`).
//!
//! Served only when `RM_INGEST_JWKS_URL` is set; otherwise 404 saying where the
//! inspector is (the api serves the same route when the edge runs in its process).

use http::{header, HeaderValue, Method, StatusCode};
use hyper::body::Incoming;
use rm_eventlog::EventLog;
use rm_schemas::rpc_status::Code;
use rm_schemas::{RejectReason, Rejection};
use rm_service::{response, Response};

use crate::edge::Edge;
use crate::jwks::Denied;

impl<L: EventLog> Edge<L> {
    /// Answers the inspector route.
    pub(crate) async fn debug(&self, req: &http::Request<Incoming>) -> Response {
        if req.method() != Method::GET && req.method() != Method::HEAD {
            return response::method_not_allowed("GET, HEAD");
        }
        let Some(bearer) = &self.bearer else {
            return response::error(
                Code::NotFound,
                "inspector_not_served_here",
                "the integration inspector is served by the api (GET /v1/debug/events on its port); \
                 to serve it on an edge running alone, set RM_INGEST_JWKS_URL to the api's /.well-known/jwks.json",
            );
        };
        let auth = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        let viewer = match bearer.check(auth).await {
            Ok(v) => v,
            Err(denied) => {
                return match denied {
                    Denied::Unauthenticated(m) => {
                        let mut r = response::error(Code::Unauthenticated, "unauthenticated", m);
                        r.headers_mut().insert(
                            header::WWW_AUTHENTICATE,
                            HeaderValue::from_static("Bearer realm=\"retail-media\""),
                        );
                        r
                    }
                    Denied::Forbidden(m) => response::error(Code::PermissionDenied, "forbidden", m),
                    Denied::Unavailable(m) => {
                        tracing::warn!(error = %m, "jwks unavailable");
                        response::unavailable(
                            "jwks_unavailable",
                            "the token cannot be verified right now; retry later",
                            5,
                        )
                    }
                }
            }
        };
        let query = req.uri().query().unwrap_or("");
        let tracking_id = rm_schemas::query::decode_query(query)
            .map_err(|r| response::status(&rm_schemas::rpc_status::RpcStatus::from_rejection(&r)))
            .map(|pairs| {
                pairs
                    .into_iter()
                    .find(|p| p.key == "trackingId")
                    .map(|p| p.value.into_owned())
                    .filter(|v| !v.is_empty())
            });
        let tracking_id = match tracking_id {
            Ok(Some(id)) => id,
            Ok(None) => {
                let r = Rejection::new(
                    RejectReason::MissingParameter,
                    "trackingId",
                    "trackingId is required: the sessionId, customerId or dtmToken to inspect",
                );
                return response::status(&rm_schemas::rpc_status::RpcStatus::from_rejection(&r));
            }
            Err(r) => return r,
        };
        let body = crate::inspector_report::report(&self.inspector, &tracking_id, &viewer);
        let mut r = response::json(
            StatusCode::OK,
            serde_json::to_vec(&body).unwrap_or_default(),
        );
        r.headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        r
    }
}
