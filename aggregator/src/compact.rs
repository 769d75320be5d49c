//! The compaction of closed hours' rollups, every `RM_AGGREGATOR_COMPACT_SECS`
//! (`rm_store`'s `WriteStore::compact_tallies`; the ClickHouse store's `compact`
//! module argues why reads stay exact). A failure is logged and counted, and the
//! next round tries again: the reads never depend on a compaction having run, only
//! their cost does. Several aggregators may compact the same store: each round
//! writes absolute sums, the newest wins.

use std::sync::Arc;
use std::time::Duration;

use metrics::{counter, gauge};
use rm_store::{AnyStore, WriteStore};
use tokio_util::sync::CancellationToken;

use crate::metrics::{COMPACTIONS, OPEN_FROM_DAY};

/// Compacts `store` every `every` (never when zero) with `margin`, until `shutdown`.
pub async fn run(
    store: Arc<AnyStore>,
    every: Duration,
    margin: Duration,
    shutdown: CancellationToken,
) {
    if every.is_zero() {
        tracing::info!("the rollups' compaction is off (RM_AGGREGATOR_COMPACT_SECS=0)");
        return;
    }
    let margin_ms = i64::try_from(margin.as_millis()).unwrap_or(i64::MAX);
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(every) => {}
        }
        let started = std::time::Instant::now();
        match store.compact_tallies(margin_ms).await {
            Ok(None) => return,
            Ok(Some(open)) => {
                counter!(COMPACTIONS, "outcome" => "done").increment(1);
                gauge!(OPEN_FROM_DAY).set(f64::from(open));
                tracing::debug!(open_from_day = open, took = ?started.elapsed(), "compacted the closed hours' rollups");
            }
            Err(e) => {
                counter!(COMPACTIONS, "outcome" => "failed").increment(1);
                tracing::warn!(error = %e, "compacting the closed hours' rollups failed; the next round tries again");
            }
        }
    }
}
