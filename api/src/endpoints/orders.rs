//! `POST /v1/orders`: orders in the shape of the CitrusAd order sync, authenticated
//! with the secret API key (HTTP Basic), validated by `rm_schemas::order`, and
//! written durably to the `orders` topic for the aggregator's attribution.
//!
//! Orders belong to the namespace of the key that sent them: stored and written to
//! the log in it (`namespaceId` in the record), their ids unique within it, and
//! attributed only to its campaigns.
//!
//! Idempotent by order id (within the namespace). An order is answered `duplicate` when its id was taken
//! before; otherwise its record is appended to the log, and only once the log has it
//! durably is the id marked taken, so a crash in between can at worst write an
//! order twice, never lose one. The aggregator keys order lines by order id, so a
//! second copy changes no count. A log failure answers 503: nothing of that order
//! was acknowledged, and the retry writes it.

use http::Method;
use rm_eventlog::{AnyLog, EventLog};
use rm_schemas::order::Order;
use rm_schemas::{order, topics};
use rm_service::Response;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ok_json;
use crate::error::ApiError;
use crate::metrics;
use crate::routes::{schema, Access, Call, Content, RequestBody, Route};
use crate::state::State;
use crate::Api;

/// `POST /v1/orders` body, documented with the contract's own types
/// (`rm_schemas::order`), which `order::parse_orders` reads.
#[derive(Debug, Serialize, JsonSchema)]
pub struct OrdersRequest {
    /// Orders (at most 1,000).
    pub orders: Vec<Order>,
}

/// One order's outcome.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct OrderOutcome {
    /// Order id.
    pub id: String,
    /// `accepted` (written now) or `duplicate` (taken before; nothing changed).
    pub status: String,
}

/// `POST /v1/orders` answer.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct OrdersAccepted {
    /// Orders written now.
    pub accepted: u64,
    /// Orders taken before.
    pub duplicates: u64,
    /// Per order.
    pub orders: Vec<OrderOutcome>,
}

/// The orders route (HTTP Basic with an orders API key).
pub(crate) fn routes() -> Vec<Route> {
    vec![Route {
        method: Method::POST,
        path: "/v1/orders",
        op: "Orders",
        handler: |api, call| Box::pin(orders(api, call)),
        access: Access::ApiKey,
        summary: "Report orders (HTTP Basic with the secret API key); idempotent by order id",
        query: &[],
        request: RequestBody::Json(schema::<OrdersRequest>),
        ok: 200,
        response: Content::Json(schema::<OrdersAccepted>),
        errors: &[400, 401, 429, 503],
    }]
}

/// `POST /v1/orders` (the router has checked the API key): in the key's namespace.
async fn orders(api: &Api, call: Call) -> Result<Response, ApiError> {
    let log = api.log.as_deref().ok_or_else(|| {
        ApiError::Unavailable("this api instance has no event log for orders".into())
    })?;
    let ns = call.caller()?.namespace.clone();
    let body = api.body(call.body).await?;
    ok_json(&take(&api.state, log, &ns, &body).await?)
}

/// Takes the orders of `body`, sent with a key of namespace `ns`.
pub async fn take(
    state: &State,
    log: &AnyLog,
    ns: &str,
    body: &[u8],
) -> Result<OrdersAccepted, ApiError> {
    let orders = order::parse_orders(body).map_err(|e| ApiError::invalid(e.field, e.message))?;
    let mut out = OrdersAccepted {
        accepted: 0,
        duplicates: 0,
        orders: Vec::with_capacity(orders.len()),
    };
    for o in &orders {
        if state.order_taken(ns, &o.id).await? {
            out.duplicates += 1;
            out.orders.push(OrderOutcome {
                id: o.id.clone(),
                status: "duplicate".into(),
            });
            continue;
        }
        let now = chrono::Utc::now();
        log.append(topics::ORDERS, order::key(o), order::record_in(ns, o, now))
            .await
            .map_err(|e| {
                tracing::warn!(error = %e, "orders: log append failed");
                ApiError::Unavailable(format!(
                    "the event log did not take order '{}' ({}); nothing from it on was stored, retry",
                    o.id,
                    e.kind()
                ))
            })?;
        state.mark_order(ns, &o.id, &now.to_rfc3339()).await?;
        out.accepted += 1;
        out.orders.push(OrderOutcome {
            id: o.id.clone(),
            status: "accepted".into(),
        });
    }
    metrics::orders(out.accepted, out.duplicates);
    Ok(out)
}
