//! The report store: the report tables on both backends, written by the aggregator
//! (step 7) and read by the api's reports (step 8).
//!
//! - [`model`]: the facts, the rows derived from them and the pure functions that
//!   derive and roll them up (no I/O).
//! - [`mod@write`]: a batch ([`BatchWrite`]) and the [`WriteStore`] trait (load fact sets,
//!   write a batch); [`mod@read`]: the [`ReportStore`] trait (one method per report) and
//!   the reports derived alike on every backend; [`sums`]: the reports that read the
//!   tallies (products, ads, the campaign summary) in any time zone and granularity.
//! - Two backends pass one shared test suite (`tests/store_suite.rs`):
//!   [`embedded::EmbeddedStore`] (redb, the default) and
//!   [`clickhouse::ClickHouseStore`] (production); [`AnyStore`] is the one a
//!   deployment [`open`]s from its [`StoreConfig`].
//! - [`mod@erase`]: the [`EraseStore`] trait (a shopper's identifiers erased on request,
//!   and the audit log of those erasures).
//!
//! Every write is idempotent (it carries complete fact sets and the rows derived from
//! them), so writing a batch again after a crash or a retry changes nothing. Reports
//! are read from the store only, never from the log. This crate depends on
//! `rm-schemas` only; the aggregator and the api depend on it, never on each other.

pub mod any;
pub mod clickhouse;
pub mod config;
pub mod embedded;
pub mod erase;
pub mod error;
pub mod filter;
pub mod model;
pub mod read;
pub mod sums;
pub mod write;

pub use any::{open, AnyStore};
pub use config::StoreConfig;
pub use erase::EraseStore;
pub use error::StoreError;
pub use filter::{ReportFilter, Tenant};
pub use read::{
    billable_clicks, campaign_report, campaign_sales_rows, cart_campaign_rows, sales_rows,
    ReportStore,
};
pub use write::{BatchWrite, EntitySets, FastMap, FastSet, PreparedWrite, WriteStore};

/// What both sides of every backend share.
pub trait Backend: Send + Sync + 'static {
    /// Short backend name (`embedded`, `clickhouse`), a metric label.
    fn backend(&self) -> &'static str;

    /// `Ok` when the store can take writes and answer reads, else why not.
    fn readiness(&self) -> Result<(), String>;
}
