//! The api's metrics: every name in one place, labels from bounded sets (route
//! templates from the route table, HTTP statuses, token outcomes; never ids).
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `api_requests_total` | counter | `route` (a route template or `other`), `status` |
//! | `api_request_duration_seconds` | histogram | `route` |
//! | `api_token_requests_total` | counter | `outcome` (issued, invalid_client, invalid_request, unsupported_grant_type, rate_limited) |
//! | `api_orders_total` | counter | `outcome` (accepted, duplicate) |

use std::time::Duration;

use metrics::{counter, histogram};

/// Requests by route template and status.
pub const REQUESTS: &str = "api_requests_total";
/// Request latency by route template.
pub const DURATION: &str = "api_request_duration_seconds";
/// Token endpoint outcomes.
pub const TOKEN: &str = "api_token_requests_total";
/// Orders taken.
pub const ORDERS: &str = "api_orders_total";

/// Token endpoint outcomes (bounded label set).
pub const TOKEN_OUTCOMES: [&str; 5] = [
    "issued",
    "invalid_client",
    "invalid_request",
    "unsupported_grant_type",
    "rate_limited",
];

/// Registers every series that must exist from the first scrape.
pub fn register(routes: &[&'static str]) {
    for r in routes {
        let _ = histogram!(DURATION, "route" => *r);
        let _ = counter!(REQUESTS, "route" => *r, "status" => "200");
    }
    for o in TOKEN_OUTCOMES {
        let _ = counter!(TOKEN, "outcome" => o);
    }
    for o in ["accepted", "duplicate"] {
        let _ = counter!(ORDERS, "outcome" => o);
    }
}

/// Counts one answered request.
pub fn request(route: &'static str, status: u16, took: Duration) {
    counter!(REQUESTS, "route" => route, "status" => status.to_string()).increment(1);
    histogram!(DURATION, "route" => route).record(took.as_secs_f64());
}

/// Counts one token request.
pub fn token_outcome(outcome: &'static str) {
    counter!(TOKEN, "outcome" => outcome).increment(1);
}

/// Counts orders by outcome.
pub fn orders(accepted: u64, duplicate: u64) {
    counter!(ORDERS, "outcome" => "accepted").increment(accepted);
    counter!(ORDERS, "outcome" => "duplicate").increment(duplicate);
}
