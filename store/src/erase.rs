//! The erasure side of a report store: recording erasures (the audit log), running
//! them, and reading them back (see [`crate::model::erasure`] for what an erasure
//! replaces and keeps).
//!
//! The api records an erasure ([`EraseStore::request_erasure`]); the aggregator, the
//! one writer of the tables, runs it between two of its writes, after dropping what
//! it cached ([`EraseStore::erase`]), and records the end of the first run
//! ([`EraseStore::finish_erasure`]). A run is idempotent: run again (another
//! aggregator, a restart) it replaces what is left, usually nothing.
//!
//! The same side ages identifiers past their retention ([`EraseStore::age`],
//! [`crate::model::ageing`]): the aggregator runs a pass at start and every
//! `RM_AGGREGATOR_AGEING_SECS`, between two of its writes, as it runs erasures; and
//! in the same pass removes the raw rows past their retention ([`EraseStore::retire`],
//! [`crate::model::retention`]).

use std::future::Future;

use crate::model::ageing::Ageing;
use crate::model::erasure::{Erased, Erasure};
use crate::model::retention::{Retired, Retirement};
use crate::{Backend, StoreError};

/// `Ok` when `e` can run: it still holds the id (a settled erasure keeps only its
/// digest and hash, and cannot find the rows).
pub fn runnable(e: &Erasure) -> Result<(), StoreError> {
    if e.holds_id() {
        return Ok(());
    }
    Err(StoreError::Refused(format!(
        "erasure {} has settled: it no longer holds the id",
        e.request_id
    )))
}

/// Recording, running and reading erasures.
pub trait EraseStore: Backend {
    /// Records a requested erasure (pending) in the audit log.
    fn request_erasure(&self, e: &Erasure) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// The erasure recorded as `request_id`.
    fn erasure(
        &self,
        request_id: &str,
    ) -> impl Future<Output = Result<Option<Erasure>, StoreError>> + Send;

    /// Every erasure requested at or after `since_ms`, oldest first.
    fn erasures_since(
        &self,
        since_ms: i64,
    ) -> impl Future<Output = Result<Vec<Erasure>, StoreError>> + Send;

    /// Replaces the erasure's id everywhere it covers (it must still hold the id):
    /// what it replaced.
    fn erase(&self, e: &Erasure) -> impl Future<Output = Result<Erased, StoreError>> + Send;

    /// Records that a run of `e` ended at `done_ms`, replacing `erased`, unless one
    /// already did.
    fn finish_erasure(
        &self,
        e: &Erasure,
        done_ms: i64,
        erased: Erased,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Forgets the id of every erasure requested before `before_ms` (their digests
    /// and hashes stay); how many it changed.
    fn settle_erasures(
        &self,
        before_ms: i64,
    ) -> impl Future<Output = Result<usize, StoreError>> + Send;

    /// Ages the identifiers of the rows older than the pass's time
    /// ([`crate::model::ageing`]): what it replaced. Idempotent: a second pass over
    /// the same time replaces nothing.
    fn age(&self, a: &Ageing) -> impl Future<Output = Result<Erased, StoreError>> + Send;

    /// Records the pass's cut and recount floor (each kept at the highest written),
    /// then removes the raw rows dated before the cut ([`crate::model::retention`]):
    /// what it removed. Idempotent: a second pass over the same cut removes nothing.
    fn retire(&self, r: &Retirement) -> impl Future<Output = Result<Retired, StoreError>> + Send;
}
