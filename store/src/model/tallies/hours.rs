//! UTC hours beside the quarter hours (issue 26): what lets a report in a zone
//! whose offset is not a whole number of hours (Asia/Kolkata, +5:30) read the hours
//! that leave a UTC day instead of their quarters (`crate::model::periods::Mixed`),
//! about three times fewer rows, and a zone of whole hours read a local hour as one
//! UTC hour instead of four quarters.
//!
//! An hour's tally is the sum of its four quarters' tallies, of the same place and
//! log partition: every move of a quarter hour of a scope kept by hour
//! ([`Scope::by_hour`]) moves its hour too, in the same record (`moves::places`,
//! `views::places_at`, `carts::places` and `carts::moves`, `OrderCredits::counts`).
//!
//! A store an earlier version wrote has the quarters only. At the aggregator's start,
//! after every other backfill (the zones' last among them, which writes the zoned
//! quarters this one sums) and before its first write, each store sums its stored
//! quarters into hours ([`of_quarters`]), then writes the marker
//! ([`super::Metric::HoursBackfilled`]). Until the marker is there a report reads
//! quarters as before (`crate::sums`), so nothing answers 503 for it. No other
//! backfill writes an hour ([`counted_by_a_later_backfill`]), so each is counted
//! once.
//!
//! Each summed hour carries its quarters' highest stamp (the offset of the last
//! record that moved one of them). A partition's records are folded in offset order
//! and written a batch at a time, so every record at or below that stamp has been
//! counted: a record replayed after the start (its batch written, its offset not
//! committed) moved one of the quarters, is at or below the stamp, and moves the
//! hour no more; a record above it moved none of them and moves the hour once.

use std::collections::BTreeMap;

use super::{Grain, Place, Tally, TallyKey, QUARTERS_PER_HOUR};

/// Whether a stored tally is one [`of_quarters`] sums: a count at a quarter hour of
/// a scope kept by hour.
pub fn sums_into_hours(k: &TallyKey) -> bool {
    k.place.grain == Grain::Quarter && k.place.scope.by_hour() && k.metric.is_count()
}

/// Whether a place is counted by a backfill that runs after the first, the sales'
/// and the cart products' (which leave it out): a zoned quarter hour (the zones'
/// backfill, [`super::zones::is_zoned`]) or an hour (this one's).
pub fn counted_by_a_later_backfill(p: &Place) -> bool {
    super::zones::is_zoned(p) || p.grain == Grain::Hour
}

/// The hour of a quarter hour's bucket.
pub fn hour_of_quarter(quarter: i32) -> i32 {
    quarter.div_euclid(QUARTERS_PER_HOUR)
}

/// The hours of stored `tallies` (any; those [`sums_into_hours`] picks are used):
/// per place, log partition and metric, the sum of its quarters, stamped with their
/// highest stamp. Zeros are left out.
pub fn of_quarters(tallies: impl IntoIterator<Item = (TallyKey, Tally)>) -> Vec<(TallyKey, Tally)> {
    let mut out: BTreeMap<TallyKey, Tally> = BTreeMap::new();
    for (mut k, t) in tallies {
        if !sums_into_hours(&k) {
            continue;
        }
        k.place.grain = Grain::Hour;
        k.place.bucket = hour_of_quarter(k.place.bucket);
        let sum = out.entry(k).or_insert(Tally {
            value: 0,
            stamp: t.stamp,
        });
        sum.value += t.value;
        sum.stamp = sum.stamp.max(t.stamp);
    }
    out.into_iter().filter(|(_, t)| t.value != 0).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::tallies::{Kind, Metric, Scope, QUARTER_MS};
    use proptest::prelude::*;

    fn key(scope: Scope, grain: Grain, bucket: i32, partition: i32, metric: Metric) -> TallyKey {
        TallyKey {
            place: Place {
                campaign_id: "c".into(),
                scope,
                grain,
                bucket,
                partition,
                ..Place::marker()
            },
            metric,
        }
    }

    const CLICKS: Metric = Metric::BILLABLE_CLICKS;

    #[test]
    fn an_hour_sums_its_quarters_per_partition_with_their_highest_stamp() {
        let t = |value, stamp| Tally { value, stamp };
        let rows = vec![
            (
                key(Scope::Campaign, Grain::Quarter, 400, 0, CLICKS),
                t(2, 7),
            ),
            (
                key(Scope::Campaign, Grain::Quarter, 403, 0, CLICKS),
                t(3, 9),
            ),
            (
                key(Scope::Campaign, Grain::Quarter, 404, 0, CLICKS),
                t(1, 4),
            ),
            (
                key(Scope::Campaign, Grain::Quarter, 401, 1, CLICKS),
                t(5, 2),
            ),
            // Not kept by hour, not a quarter, not a count: left out.
            (key(Scope::Product, Grain::Quarter, 400, 0, CLICKS), t(8, 1)),
            (key(Scope::Campaign, Grain::Day, 4, 0, CLICKS), t(6, 9)),
            (TallyKey::zones_marker(), Tally::MARKED),
            // Netted to zero: left out.
            (key(Scope::Video, Grain::Quarter, 8, 0, CLICKS), t(1, 3)),
            (key(Scope::Video, Grain::Quarter, 9, 0, CLICKS), t(-1, 5)),
        ];
        let got = of_quarters(rows);
        assert_eq!(
            got,
            vec![
                (key(Scope::Campaign, Grain::Hour, 100, 0, CLICKS), t(5, 9)),
                (key(Scope::Campaign, Grain::Hour, 100, 1, CLICKS), t(5, 2)),
                (key(Scope::Campaign, Grain::Hour, 101, 0, CLICKS), t(1, 4)),
            ]
        );
    }

    #[test]
    fn only_hours_and_zoned_quarters_are_left_to_the_later_backfills() {
        let at = |scope, grain| key(scope, grain, 0, 0, CLICKS).place;
        assert!(counted_by_a_later_backfill(&at(
            Scope::Campaign,
            Grain::Hour
        )));
        assert!(counted_by_a_later_backfill(&at(
            Scope::Campaign,
            Grain::Quarter
        )));
        assert!(!counted_by_a_later_backfill(&at(
            Scope::Campaign,
            Grain::Day
        )));
        assert!(!counted_by_a_later_backfill(&at(
            Scope::Product,
            Grain::Quarter
        )));
    }

    proptest! {
        /// Hours tile days and quarters: an instant's hour is its quarter's hour, and
        /// its day is its hour's day.
        #[test]
        fn hours_tile_quarters_and_days(ms in -10_000_000_000_000i64..10_000_000_000_000) {
            let (q, h) = (Grain::Quarter.bucket(ms), Grain::Hour.bucket(ms));
            prop_assert_eq!(hour_of_quarter(q), h);
            prop_assert_eq!(Grain::Hour.day_of_bucket(h), Grain::Day.bucket(ms));
            prop_assert!(Grain::Hour.start_ms(h) <= ms);
            prop_assert!(ms < Grain::Hour.start_ms(h) + 4 * QUARTER_MS);
        }

        /// Summed hours hold every quarter's count once, whatever the quarters.
        #[test]
        fn summed_hours_hold_the_quarters_counts(
            rows in proptest::collection::vec((0i32..200, 0i32..3, -3i64..5, 0i64..50), 0..60),
        ) {
            let rows: BTreeMap<TallyKey, Tally> = rows
                .into_iter()
                .map(|(q, p, value, stamp)| {
                    let m = Metric::Events(Kind::AdImpression, None);
                    (key(Scope::Campaign, Grain::Quarter, q, p, m), Tally { value, stamp })
                })
                .collect();
            let hours = of_quarters(rows.clone());
            for p in 0..3 {
                for h in 0..50 {
                    let quarters: i64 = rows
                        .iter()
                        .filter(|(k, _)| k.place.partition == p && hour_of_quarter(k.place.bucket) == h)
                        .map(|(_, t)| t.value)
                        .sum();
                    let hour: i64 = hours
                        .iter()
                        .filter(|(k, _)| k.place.partition == p && k.place.bucket == h)
                        .map(|(_, t)| t.value)
                        .sum();
                    prop_assert_eq!(quarters, hour);
                }
            }
        }
    }
}
