//! Raw facts do not live forever (`RM_FACT_RETENTION_DAYS`, 400 by default): once a
//! stored fact is older than the retention it is removed, and the rollups that
//! counted it stay (pure rules, no I/O; the stores' passes are
//! `embedded/retention.rs` and `clickhouse/retention.rs`).
//!
//! **What goes.** Every row a report's drill-down, the carts report or a rebuild
//! reads rather than the rollups: product and ad facts, views and their facts, cart
//! lines (by their newest event: a line still in use stays whole), attribution
//! touches, orders, their states and the orders-by-shopper index, each dated before
//! the pass's cut ([`Retirement::before_ms`], a UTC midnight). **What stays**: the
//! rollups (every count and sum a report reads), the served ads' states (forgotten
//! on their own, long before), the erasures' audit log.
//!
//! **Why counts stay exact.** The fold never looks back further than the late
//! horizon (an event older is not aggregated), the attribution windows (a touch
//! older than its window takes no credit) or a served ad's retention; the retention
//! must exceed all of them ([`Retirement::new`] takes that look-back, the binary
//! refuses less), so no removed row is ever read by the fold again.
//!
//! **Why a rebuild stays exact.** `retail-media rebuild` counts the stored facts
//! into the rollups again. Facts before the cut are gone, and the decisions about
//! the first facts after it may lean on them (a copy of an event before the cut, an
//! order whose touches were before it), so a store that lost facts keeps the counts
//! of every bucket before its *recount floor* ([`Retirement::recount_from_ms`]: the
//! cut plus the look-back, a UTC midnight) and a rebuild, and every backfill, counts
//! only the buckets from the floor on ([`recounted`]): each bucket is counted either
//! as the fold counted it, or from every fact its decisions need. The store keeps
//! the highest cut and floor any pass wrote; it writes them before it removes a row,
//! so a crash between the two leaves a floor that is at worst ahead of the rows.

use std::time::Duration;

use super::erasure::Erased;
use super::tallies::TallyKey;
use super::DAY_MS;

/// Default of `RM_FACT_RETENTION_DAYS`.
pub const DEFAULT_RETENTION_DAYS: u32 = 400;

/// Rows a pass removed, per table (the tables an erasure reaches; `served_ads`
/// stays 0).
pub type Retired = Erased;

/// One pass: the facts before [`Self::before_ms`] go; the rollups of the buckets
/// before [`Self::recount_from_ms`] are never counted again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retirement {
    /// Rows dated before this (a UTC midnight, ms) are removed.
    pub before_ms: i64,
    /// Buckets starting before this (a UTC midnight, ms) keep their counts through a
    /// rebuild: the cut plus the look-back.
    pub recount_from_ms: i64,
}

impl Retirement {
    /// The pass due at `now_ms` for a `retention`, when the fold looks back at most
    /// `look_back` (the longest attribution window plus the late horizon, or the
    /// served ads' retention): the cut is `now - retention` rounded down to a UTC
    /// midnight, the floor the cut plus `look_back` rounded up to one.
    pub fn new(now_ms: i64, retention: Duration, look_back: Duration) -> Self {
        let ms = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        let before_ms = now_ms
            .saturating_sub(ms(retention))
            .div_euclid(DAY_MS)
            .saturating_mul(DAY_MS);
        let floor = before_ms.saturating_add(ms(look_back));
        let recount_from_ms = floor
            .saturating_add(DAY_MS - 1)
            .div_euclid(DAY_MS)
            .saturating_mul(DAY_MS);
        Self {
            before_ms,
            recount_from_ms,
        }
    }

    /// The cut's day (days since 1970-01-01): views of earlier days go.
    pub fn before_day(&self) -> i32 {
        super::day_of(self.before_ms)
    }
}

/// Whether a backfill or a rebuild counts this tally, in a store whose recount floor
/// is `floor` (`None`: no fact was ever removed): every marker and progress, and
/// every count of a bucket starting at or after the floor. A count before the floor
/// is the fold's, kept as it is.
pub fn recounted(k: &TallyKey, floor: Option<i64>) -> bool {
    match floor {
        Some(f) if k.metric.is_count() => k.place.grain.start_ms(k.place.bucket) >= f,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::tallies::{Grain, Metric, Place, QUARTER_MS};
    use proptest::prelude::*;

    const LOOK_BACK: Duration = Duration::from_secs(60 * 86_400);

    fn tally(grain: Grain, bucket: i32, metric: Metric) -> TallyKey {
        TallyKey {
            place: Place {
                campaign_id: "c".into(),
                grain,
                bucket,
                partition: 0,
                ..Place::marker()
            },
            metric,
        }
    }

    #[test]
    fn the_cut_and_the_floor_are_utc_midnights_around_the_retention() {
        let now = 1_000 * DAY_MS + 5 * 3_600_000;
        let r = Retirement::new(now, Duration::from_secs(400 * 86_400), LOOK_BACK);
        assert_eq!(r.before_ms, 600 * DAY_MS, "now - 400 days, rounded down");
        assert_eq!(r.before_day(), 600);
        assert_eq!(r.recount_from_ms, 660 * DAY_MS, "the cut + 60 days");
        let odd = Retirement::new(
            now,
            Duration::from_secs(400 * 86_400),
            LOOK_BACK + Duration::from_secs(1),
        );
        assert_eq!(odd.recount_from_ms, 661 * DAY_MS, "rounded up");
    }

    #[test]
    fn a_store_that_lost_no_fact_recounts_everything() {
        for metric in [
            Metric::BILLABLE_CLICKS,
            Metric::Backfilled,
            Metric::Progress,
        ] {
            assert!(recounted(&tally(Grain::Day, 0, metric), None));
        }
    }

    #[test]
    fn markers_and_progress_are_recounted_whatever_their_bucket() {
        let floor = Some(660 * DAY_MS);
        assert!(recounted(&TallyKey::marker(), floor));
        assert!(recounted(&TallyKey::sales_marker(), floor));
        assert!(recounted(&TallyKey::zones_marker(), floor));
        assert!(recounted(&TallyKey::progress(3), floor));
        assert!(!recounted(
            &tally(Grain::Day, 659, Metric::BILLABLE_CLICKS),
            floor
        ));
    }

    proptest! {
        /// A day and each of its quarter hours fall on the same side of the floor
        /// (it is a midnight), so a zone's netting never mixes a kept day with
        /// recounted quarters.
        #[test]
        fn a_day_and_its_quarters_fall_on_one_side(day in -1_000i32..30_000, q in 0i32..96, f in -1_000i64..30_000) {
            let floor = Some(f * DAY_MS);
            let d = tally(Grain::Day, day, Metric::BILLABLE_CLICKS);
            let quarter = Grain::Quarter.bucket(i64::from(day) * DAY_MS + i64::from(q) * QUARTER_MS);
            let qk = tally(Grain::Quarter, quarter, Metric::BILLABLE_CLICKS);
            prop_assert_eq!(recounted(&d, floor), recounted(&qk, floor));
            prop_assert_eq!(recounted(&d, floor), i64::from(day) >= f);
        }

        /// The floor is never before the cut plus the look-back, and the cut never
        /// after `now - retention`.
        #[test]
        fn the_floor_covers_the_look_back(now in 0i64..4_000_000_000_000, days in 1u64..2_000, back in 0u64..200) {
            let r = Retirement::new(now, Duration::from_secs(days * 86_400), Duration::from_secs(back * 86_400));
            prop_assert!(r.before_ms <= now - i64::try_from(days).unwrap() * DAY_MS);
            prop_assert!(r.recount_from_ms >= r.before_ms + i64::try_from(back).unwrap() * DAY_MS);
            prop_assert_eq!(r.before_ms.rem_euclid(DAY_MS), 0);
            prop_assert_eq!(r.recount_from_ms.rem_euclid(DAY_MS), 0);
        }
    }
}
