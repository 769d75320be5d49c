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

use rm_eventlog::{AnyLog, EventLog};
use rm_schemas::{order, topics};

use crate::error::ApiError;
use crate::metrics;
use crate::openapi::{OrderOutcome, OrdersAccepted};
use crate::state::State;

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
