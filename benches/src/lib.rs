//! Benchmarks of the beacon edge (`benches/edge.sh` runs them; results in
//! `BENCHMARKS.md`).
//!
//! - `loadgen` (binary): an HTTP/1.1 keep-alive load generator sending a distinct,
//!   valid beacon per request, closed loop (max throughput) or open loop (fixed
//!   rate, latency from the scheduled send time), with a summary table and JSON;
//!   `loadgen report` compares runs.
//! - `bare-hyper` (binary): the ceiling, a bare hyper 1 server answering the pixel.
//!
//! The library holds their testable parts: the request pool ([`beacon`]), response
//! parsing ([`http`]), the latency histogram ([`hist`]), CPU accounting
//! ([`procstat`]) and the result format and comparison ([`report`]).

pub mod beacon;
pub mod hist;
pub mod http;
pub mod procstat;
pub mod report;
pub mod stores;
