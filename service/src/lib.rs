//! Plumbing shared by the edge, the aggregator and the api, so each service is only
//! its own routes: the HTTP accept loop with graceful shutdown ([`mod@serve`]), the
//! `/healthz`, `/readyz` and `/metrics` endpoints of each port ([`ops`]) and of the
//! process's operations listener ([`ops_listener`]), response helpers
//! ([`response`]) and the body they carry, whole or streamed ([`body`]), the
//! process-wide Prometheus recorder ([`telemetry`]), the shutdown signal
//! ([`shutdown`]) and every listener's timeouts and connection cap ([`listener`],
//! enforced per connection by `watchdog`).

pub mod body;
pub mod listener;
pub mod ops;
pub mod ops_listener;
pub mod readiness;
pub mod response;
pub mod serve;
pub mod shutdown;
pub mod telemetry;
mod watchdog;

pub use serve::{serve, ServeError};
pub use tokio_util::sync::CancellationToken;

pub use body::Body;
/// A response of any service.
pub type Response = http::Response<Body>;
