//! The integration inspector on the api: `GET /v1/debug/events?trackingId=` (scope
//! `reports`) answers a tracking id's latest events, their outcomes and the spec's
//! rule checks, as the caller may see them (a tenant: the events of its verified ad
//! ids only). The inspector lives on the edge; the api answers only when the edge runs
//! in the same process (`retail-media all`), else 404 naming where to ask.

use http::Method;
use rm_service::Response;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::routes::{schema, Access, Call, Content, QueryParam, RequestBody, Route};
use crate::{Api, ApiError};
use rm_auth::client::Scope;

/// The inspector's answer (see the README's "integration inspector").
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct InspectorReport {
    /// The report members: events, views, carts, rules.
    #[serde(flatten)]
    pub report: Map<String, Value>,
}

/// The inspector route.
pub(crate) fn routes() -> Vec<Route> {
    vec![Route {
        method: Method::GET,
        path: "/v1/debug/events",
        op: "DebugEvents",
        handler: |api, call| Box::pin(debug_events(api, call)),
        access: Access::Bearer(&[Scope::Reports]),
        summary: "The integration inspector: a tracking id's latest events, their outcomes, and the spec's rule checks (query: trackingId)",
        query: &[QueryParam {
            name: "trackingId",
            required: true,
            schema: r#"{"type": "string", "minLength": 1}"#,
        }],
        request: RequestBody::None,
        ok: 200,
        response: Content::Json(schema::<InspectorReport>),
        errors: &[400, 401, 403, 404],
    }]
}

/// `GET /v1/debug/events?trackingId=`: the edge's inspector, when it runs here,
/// answered by the edge's own route logic (`crate::InspectorFn`) for the caller the
/// router verified.
async fn debug_events(api: &Api, call: Call) -> Result<Response, ApiError> {
    let inspector = api.inspector.as_ref().ok_or_else(|| {
        ApiError::NotFound(
            "the inspector lives on the edge: run `retail-media all`, or set RM_INGEST_JWKS_URL on the edge and ask it there"
                .into(),
        )
    })?;
    let query = call.parts.uri.query().unwrap_or("");
    Ok(inspector(query, &call.caller()?.viewer()))
}
