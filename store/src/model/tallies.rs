//! Tallies: counts decided once, as events arrive, kept as sums per campaign and day
//! (issue 26). A reader of a tally reads one row per campaign, day and log partition,
//! never the events behind it: the spend refresher's billable clicks cost
//! O(campaigns x days), whatever the volume.
//!
//! **Who decides.** The aggregator's fold: a [`Metric::AdClicks`] tally moves by one
//! when a served ad's [`super::served::Unit::AdClick`] is taken (its first eligible
//! click; a copy of that click or any other click of the served ad moves nothing).
//!
//! **Exactly once, without a transaction across the log and the store.** A tally is
//! kept per log partition, as an absolute value stamped with the offset of the last
//! record that moved it ([`Tally::add`]). Records of one ad id share a partition
//! (they are keyed by ad id), so one consumer owns each partition's tallies; the
//! store keeps the newest stamp of each (ClickHouse: `ReplacingMergeTree(stamp)`,
//! read with `argMax`; embedded: overwritten in the batch's transaction). A batch
//! writes its tallies **before** the served ads' states that decided them (ClickHouse
//! inserts them first; the embedded store writes both in one transaction). So after a
//! crash anywhere:
//! - tallies not written: neither are the states, the records are replayed and decide
//!   the same way again;
//! - tallies written, states not: the replayed records decide the same way (the old
//!   states), and every record at or below a tally's stamp is skipped for that tally;
//! - both written, offsets not committed: the replayed clicks find their unit taken by
//!   their own dedup key (a copy: no move), and are at or below the stamp anyway.
//!
//! A replayed batch may be cut at other offsets than the first time; the stamp is per
//! record, so that changes nothing.
//!
//! **Stores written before tallies** ([`BACKFILL_PARTITION`]): the counts of the facts
//! stored until then are written once, at the aggregator's first start on the store,
//! under a partition no log has, with a marker ([`Metric::Backfilled`]); readers use
//! tallies only once the marker is there ([`complete`]). Aggregators started together
//! on such a store (replicas of one deployment on ClickHouse) may each write a
//! backfill; the smallest count of each key wins there, the one read before any of
//! them wrote a batch (a later one would count that batch's clicks twice).

use serde::{Deserialize, Serialize};

/// What a tally counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Metric {
    /// Billable ad clicks: served ads whose click was taken, on the click's UTC day.
    AdClicks,
    /// The marker: the store's earlier facts are counted (one row, value 1).
    Backfilled,
}

impl Metric {
    /// Stable name, as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AdClicks => "ad_clicks",
            Self::Backfilled => "backfilled",
        }
    }

    /// Reads a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        [Self::AdClicks, Self::Backfilled]
            .into_iter()
            .find(|m| m.as_str() == s)
    }
}

/// The partition the counts of a store's earlier facts are kept under (no log has it).
pub const BACKFILL_PARTITION: i32 = i32::MIN;

/// Where a tally counts.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TallyKey {
    /// Campaign.
    pub campaign_id: String,
    /// UTC day (days since 1970-01-01).
    pub day: i32,
    /// What it counts.
    pub metric: Metric,
    /// The log partition whose records moved it (`-1`: the embedded log).
    pub partition: i32,
}

impl TallyKey {
    /// The backfill marker's key.
    pub fn marker() -> Self {
        Self {
            campaign_id: String::new(),
            day: 0,
            metric: Metric::Backfilled,
            partition: BACKFILL_PARTITION,
        }
    }
}

/// A tally's value and the offset of the last record that moved it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Tally {
    /// The count.
    pub value: i64,
    /// Offset of the last record applied (`-1`: none).
    pub stamp: i64,
}

impl Tally {
    /// An empty tally (nothing applied).
    pub const EMPTY: Self = Self {
        value: 0,
        stamp: -1,
    };

    /// Adds `delta` for the record at `offset`, unless a record at or after it was
    /// applied already (a replay); true when it moved.
    pub fn add(&mut self, offset: i64, delta: i64) -> bool {
        if offset <= self.stamp {
            return false;
        }
        self.value += delta;
        self.stamp = offset;
        true
    }
}

/// A tally summed over partitions: what a reader gets.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct DayTally {
    /// Campaign.
    pub campaign_id: String,
    /// UTC day.
    pub day: i32,
    /// The count, all partitions.
    pub value: i64,
}

/// Whether the tallies are complete: the marker of the backfill is among `rows`.
pub fn complete<'a>(rows: impl IntoIterator<Item = &'a TallyKey>) -> bool {
    rows.into_iter().any(|k| *k == TallyKey::marker())
}

/// Sums the newest tally of each key over partitions, per campaign and day, for
/// `metric`, in (campaign, day) order.
pub fn sum<'a>(
    rows: impl IntoIterator<Item = (&'a TallyKey, &'a Tally)>,
    metric: Metric,
) -> Vec<DayTally> {
    let mut by: std::collections::BTreeMap<(&str, i32), i64> = Default::default();
    for (k, t) in rows {
        if k.metric == metric {
            *by.entry((k.campaign_id.as_str(), k.day)).or_default() += t.value;
        }
    }
    by.into_iter()
        .map(|((c, day), value)| DayTally {
            campaign_id: c.to_owned(),
            day,
            value,
        })
        .collect()
}

/// The backfill's marker row (written last, once the counts are).
pub fn marker_row() -> (TallyKey, Tally) {
    (TallyKey::marker(), Tally { value: 1, stamp: 0 })
}

/// The backfill of a store written before tallies: its billable clicks per campaign
/// and day (the ads report's rows, whole history, of some campaigns: a campaign's rows
/// must all be in one call), under [`BACKFILL_PARTITION`]; the marker is
/// [`marker_row`].
pub fn backfill(ads: &[super::ads::AdReportRow]) -> Vec<(TallyKey, Tally)> {
    let mut by: std::collections::BTreeMap<(&str, i32), i64> = Default::default();
    for r in ads {
        let Some(day) = super::parse_day(&r.day) else {
            continue;
        };
        if r.clicks > 0 {
            *by.entry((r.campaign_id.as_str(), day)).or_default() +=
                i64::try_from(r.clicks).unwrap_or(i64::MAX);
        }
    }
    by.into_iter()
        .map(|((c, day), value)| {
            (
                TallyKey {
                    campaign_id: c.to_owned(),
                    day,
                    metric: Metric::AdClicks,
                    partition: BACKFILL_PARTITION,
                },
                Tally { value, stamp: 0 },
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Applying a partition's records, then any replays of any suffix of them
        /// (a crash after the tally was written, before the offsets were committed),
        /// counts every record once.
        #[test]
        fn replays_of_any_suffix_count_once(
            deltas in proptest::collection::vec(0i64..3, 0..40),
            replays in proptest::collection::vec(0usize..40, 0..4),
        ) {
            let mut t = Tally::EMPTY;
            for (o, d) in deltas.iter().enumerate() {
                t.add(o as i64, *d);
            }
            for from in replays {
                for (o, d) in deltas.iter().enumerate().skip(from) {
                    prop_assert!(!t.add(o as i64, *d));
                }
            }
            prop_assert_eq!(t.value, deltas.iter().sum::<i64>());
        }
    }

    #[test]
    fn sums_partitions_per_campaign_and_day() {
        let k = |c: &str, day, partition| TallyKey {
            campaign_id: c.into(),
            day,
            metric: Metric::AdClicks,
            partition,
        };
        let t = |value| Tally { value, stamp: 9 };
        let rows = [
            (k("a", 1, 0), t(2)),
            (k("a", 1, 1), t(3)),
            (k("a", 2, 0), t(1)),
            (k("b", 1, BACKFILL_PARTITION), t(7)),
            (TallyKey::marker(), t(1)),
        ];
        let summed = sum(rows.iter().map(|(k, t)| (k, t)), Metric::AdClicks);
        let got: Vec<(&str, i32, i64)> = summed
            .iter()
            .map(|d| (d.campaign_id.as_str(), d.day, d.value))
            .collect();
        assert_eq!(got, [("a", 1, 5), ("a", 2, 1), ("b", 1, 7)]);
        assert!(complete(rows.iter().map(|(k, _)| k)));
        assert!(!complete(rows[..4].iter().map(|(k, _)| k)));
    }

    #[test]
    fn metric_names_round_trip() {
        for m in [Metric::AdClicks, Metric::Backfilled] {
            assert_eq!(Metric::parse(m.as_str()), Some(m));
        }
        assert_eq!(Metric::parse("clicks"), None);
    }
}
