//! Raw facts past their retention, removed by the aggregator
//! (`rm_store::model::retention`): in the same pass as identifier ageing (at start
//! and every `RM_AGGREGATOR_AGEING_SECS`, a day), the rows dated before
//! `RM_FACT_RETENTION_DAYS` (400) go and the rollups that counted them stay.
//!
//! **Why here.** The aggregator is the one writer of the tables and caches views,
//! carts and orders: the loop lets the write in flight land and drops its cache
//! before a pass, so nothing cached writes a removed row back. **Why safe.** The
//! retention is longer than the fold ever looks back (the longest attribution
//! window plus the late horizon, or the served ads' retention: the binary refuses
//! less), so no removed row is read again; a rebuild keeps the counts before the
//! store's recount floor (the cut plus that look-back).

use std::time::Duration;

use rm_store::model::retention::Retirement;

/// How the loop removes facts past their retention.
#[derive(Debug, Clone, Copy)]
pub struct RetentionOptions {
    /// How long a raw fact is kept.
    pub retention: Duration,
    /// How far back the fold looks (`crate::ageing::shortest_retention`).
    pub look_back: Duration,
    /// How often a pass runs (and once at start).
    pub every: Duration,
}

impl RetentionOptions {
    /// The pass due at `now_ms`.
    pub fn pass(&self, now_ms: i64) -> Retirement {
        Retirement::new(now_ms, self.retention, self.look_back)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rm_store::model::DAY_MS;

    #[test]
    fn a_pass_cuts_at_the_retention_and_floors_past_the_look_back() {
        let o = RetentionOptions {
            retention: Duration::from_secs(400 * 86_400),
            look_back: Duration::from_secs(60 * 86_400),
            every: Duration::from_secs(60),
        };
        let r = o.pass(1_000 * DAY_MS + 1);
        assert_eq!(r.before_ms, 600 * DAY_MS);
        assert_eq!(r.recount_from_ms, 660 * DAY_MS);
    }
}
