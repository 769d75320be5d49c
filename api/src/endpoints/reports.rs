//! The report routes (`GET /v1/reports/*`, scope `reports`), one row per
//! [`ReportKind`], read by one handler: it decodes the query once, decides the
//! caller's tenant (its namespace, or for an operator the one `namespaceId` names, or
//! every namespace without it), gathers the campaign costs and bids the report needs
//! (ROAS, spend) and has `crate::reports` read and render the rows (JSON pages or
//! streamed CSV).

use http::Method;
use rm_service::Response;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::reports::{self, admission, query, KnownCosts, ReportKind};
use crate::routes::{schema, Access, Call, Content, Handler, QueryParam, RequestBody, Route};
use crate::{Api, ApiError};
use rm_auth::client::Scope;

/// A report answer.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct ReportRows {
    /// Rows, with camelCase members (see the README's report tables).
    pub rows: Vec<Map<String, Value>>,
}

/// The query parameters every report route reads (`timeZone` and `granularity` other
/// than `UTC` and `day` by the products, ads, funnel and campaigns reports: `query`).
const QUERY: [QueryParam; 11] = [
    param("campaignId", r#"{"type": "string"}"#),
    param("namespaceId", r#"{"type": "string"}"#),
    param("adId", r#"{"type": "string"}"#),
    param("catalogId", r#"{"type": "string"}"#),
    param("from", r#"{"type": "string", "format": "date"}"#),
    param("to", r#"{"type": "string", "format": "date"}"#),
    param("timeZone", r#"{"type": "string", "default": "UTC"}"#),
    param(
        "granularity",
        r#"{"type": "string", "enum": ["hour", "day", "week", "month", "summary"], "default": "day"}"#,
    ),
    param("format", r#"{"type": "string", "enum": ["json", "csv"]}"#),
    param(
        "pageSize",
        r#"{"type": "integer", "minimum": 1, "maximum": 10000, "default": 1000}"#,
    ),
    param("pageToken", r#"{"type": "string"}"#),
];

const fn param(name: &'static str, schema: &'static str) -> QueryParam {
    QueryParam {
        name,
        required: false,
        schema,
    }
}

/// The handler of report `kind`'s row.
fn handler(kind: ReportKind) -> Handler {
    match kind {
        ReportKind::VideoFunnel => |api, call| Box::pin(report(api, call, ReportKind::VideoFunnel)),
        ReportKind::Products => |api, call| Box::pin(report(api, call, ReportKind::Products)),
        ReportKind::Ads => |api, call| Box::pin(report(api, call, ReportKind::Ads)),
        ReportKind::Campaigns => |api, call| Box::pin(report(api, call, ReportKind::Campaigns)),
        ReportKind::Carts => |api, call| Box::pin(report(api, call, ReportKind::Carts)),
        ReportKind::CartCampaigns => {
            |api, call| Box::pin(report(api, call, ReportKind::CartCampaigns))
        }
        ReportKind::Sales => |api, call| Box::pin(report(api, call, ReportKind::Sales)),
    }
}

/// The report routes, one per kind.
pub(crate) fn routes() -> Vec<Route> {
    ReportKind::ALL
        .iter()
        .map(|&kind| Route {
            method: Method::GET,
            path: kind.path(),
            op: "Report",
            handler: handler(kind),
            access: Access::Bearer(&[Scope::Reports]),
            summary: "Campaign report rows (JSON, or CSV with format=csv)",
            query: &QUERY,
            request: RequestBody::None,
            ok: 200,
            response: Content::JsonOrCsv(schema::<ReportRows>),
            errors: &[400, 401, 403, 404, 429, 503],
        })
        .collect()
}

/// Report `kind` for the caller's namespace (an operator's: the one `namespaceId`
/// names, or every namespace without it). Campaign costs (ROAS) and bids (spend) come
/// from the campaign records.
async fn report(api: &Api, call: Call, kind: ReportKind) -> Result<Response, ApiError> {
    let caller = call.caller()?;
    let pairs = query::decode(call.parts.uri.query().unwrap_or(""))?;
    let requested = query::namespace_of(&pairs).map(str::to_owned);
    let campaigns = api.state.campaigns().await?;
    let tenant = if caller.admin && requested.is_none() {
        None
    } else {
        let namespace = caller.acting_in(requested.as_deref(), "namespaceId")?;
        let ids = campaigns
            .iter()
            .filter(|c| c.namespace_id == namespace)
            .map(|c| c.id.clone())
            .collect();
        Some(rm_store::Tenant {
            namespace,
            campaigns: std::sync::Arc::new(ids),
        })
    };
    let mut costs = KnownCosts::default();
    if kind.needs_costs() {
        for c in &campaigns {
            if let Some(k) = c.known_cost() {
                costs.cost.insert(c.id.clone(), k);
            }
            if let Some(b) = c.max_bid() {
                costs.max_bid.insert(c.id.clone(), b);
            }
        }
    }
    let today = rm_store::model::day_of(chrono::Utc::now().timestamp_millis());
    let q = query::from_pairs(kind, pairs, &call.parts.headers, today)?;
    let party = tenant
        .as_ref()
        .map_or(admission::OPERATOR, |t| t.namespace.as_str())
        .to_owned();
    let place = api.reports.enter(&party).await?;
    let (store, w) = (&*api.store, &api.windows);
    reports::rows(store, &costs, w, (tenant, Some(place)), kind, q).await
}
