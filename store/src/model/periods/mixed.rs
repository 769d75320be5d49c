//! A report in a zone other than UTC read mostly from UTC days and hours (issue 26):
//! each UTC day counted in the period that holds most of its quarter hours (its
//! home), each UTC hour with quarters elsewhere read whole in its own home, and only
//! the quarters left over read apart; each read moved out of the period its nearest
//! read ancestor counts in and into its own.
//!
//! Summing every quarter of a local day is exact but costs 96 buckets a day whatever
//! the zone. A UTC day's tally is the sum of its 24 hours', and an hour's the sum of
//! its 4 quarters' (all written by the same moves, `super::super::tallies::moves`),
//! and every count is additive. So a quarter's count lands in its own period when
//! every read adds its tally to the period it counts in and takes it from the one
//! its nearest read ancestor counts in (a quarter's: its hour's, else its day's; an
//! hour's: its day's; none read: no period) ([`Periods::net`]): summed down the
//! tree, the ancestors' shares cancel and each quarter is left in the period of its
//! nearest read bucket, which the plan makes its own period. A bucket outside the
//! range counts in no period: read under a read ancestor, it is only taken out.
//!
//! **Three levels, each the cheaper choice** ([`Periods::mixed`]). Within one UTC
//! hour, given the period its quarters inherit (their day's home, or none): read
//! the quarters in another period, or the hour in its home (the period, or none,
//! most of its four quarters are in) and the quarters out of it, whichever reads
//! fewer buckets. Within one UTC day: not read (its quarters inherit nothing), or
//! read in the home that makes its hours cheapest, a day read only when strictly
//! cheaper. The choices of different hours and days do not interact, so the plan
//! reads the fewest buckets of any plan of this shape. Asia/Kolkata by day: a day,
//! 5 hours and 2 quarters a UTC day (the 5:30 after local midnight) instead of 22
//! quarters or 96; Europe/Paris by day: a day and one or two hours; by hour, one UTC
//! hour per local hour where the offset is whole hours, instead of 4 quarters (in
//! Asia/Kolkata by hour a plan would read three quarters of the quarters, so every
//! quarter is read instead). A week, a month or a summary: the days and the ends'
//! hours and quarters.
//!
//! Without hours (a scope not kept by hour, or a store before their backfill) the
//! hour level is left out and each day's home is its majority period: days and
//! quarters as before, and a report by hour reads quarters.
//!
//! The netted tallies are placed at their period's first quarter in the range, so
//! the rows are made from them as from quarters ([`Periods::period_of_bucket`]
//! gives each its period back).

use std::cmp::Reverse;
use std::collections::BTreeMap;

use chrono::NaiveDateTime;

use super::{Granularity, Periods};
use crate::model::tallies::{
    Grain, Metric, Place, Scope, SummedTally, QUARTERS_PER_DAY, QUARTERS_PER_HOUR,
};
use crate::model::FastMap;

/// Quarter hours in a UTC day and in a UTC hour, as indices.
const QUARTERS: usize = QUARTERS_PER_DAY as usize;
const PER_HOUR: usize = QUARTERS_PER_HOUR as usize;

/// The period a bucket counts in (`None`: none, outside the range).
type In = Option<NaiveDateTime>;

/// What a report reads instead of every quarter of its range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mixed {
    /// UTC days read whole, each with the period it counts in (its home).
    pub days: BTreeMap<i32, NaiveDateTime>,
    /// UTC hours read whole, each with the period it counts in (its home; `None`:
    /// outside the range, read only to be taken out of its day's home).
    pub hours: BTreeMap<i32, In>,
    /// The quarter buckets read, as inclusive ranges in order.
    pub quarters: Vec<(i32, i32)>,
}

impl Mixed {
    /// Buckets read in all (days, hours and quarters).
    pub fn buckets(&self) -> usize {
        self.days.len()
            + self.hours.len()
            + self
                .quarters
                .iter()
                .map(|(a, b)| usize::try_from(b - a + 1).unwrap_or(0))
                .sum::<usize>()
    }

    /// The first and last day read whole (`None`: none).
    pub fn day_span(&self) -> Option<(i32, i32)> {
        Some((*self.days.keys().next()?, *self.days.keys().next_back()?))
    }

    /// The hour buckets read, as inclusive ranges in order (a query's `only`).
    pub fn hour_ranges(&self) -> Vec<(i32, i32)> {
        let mut ranges = Vec::new();
        for h in self.hours.keys() {
            push(&mut ranges, *h);
        }
        ranges
    }
}

/// Adds `q` to the ranges, merging it into the last one when it follows it.
fn push(ranges: &mut Vec<(i32, i32)>, q: i32) {
    match ranges.last_mut() {
        Some((_, b)) if *b + 1 == q => *b = q,
        _ => ranges.push((q, q)),
    }
}

/// The cheaper reads of one UTC hour whose quarters are in `of` and inherit
/// `inherit`: the buckets read, and the hour's home when it is read whole (only
/// with `hours`). Its home is where most of its quarters are (a period before none,
/// then the earliest, on a tie), the cheapest home for it.
fn hour_plan(of: &[In], inherit: In, hours: bool) -> (usize, Option<In>) {
    let apart = of.iter().filter(|p| **p != inherit).count();
    // An hour read whole costs a bucket at least.
    if !hours || apart < 2 {
        return (apart, None);
    }
    let home = of
        .iter()
        .map(|p| (*p, of.iter().filter(|x| *x == p).count()))
        .max_by_key(|(p, n)| (*n, p.is_some(), Reverse(*p)));
    match home {
        Some((home, n)) if 1 + (of.len() - n) < apart => (1 + (of.len() - n), Some(home)),
        _ => (apart, None),
    }
}

/// The buckets a UTC day's hours and quarters (`of`) read under `inherit`.
fn hours_cost(of: &[In; QUARTERS], inherit: In, hours: bool) -> usize {
    of.chunks(PER_HOUR)
        .map(|h| hour_plan(h, inherit, hours).0)
        .sum()
}

/// The home of a UTC day whose quarters are in `of`, when reading it whole is
/// cheaper than not: its majority period without hours (the earliest on a tie), the
/// cheapest of its periods with them (the majority first on a tie).
fn day_home(of: &[In; QUARTERS], hours: bool) -> Option<NaiveDateTime> {
    let mut counts: BTreeMap<NaiveDateTime, usize> = BTreeMap::new();
    for p in of.iter().flatten() {
        *counts.entry(*p).or_default() += 1;
    }
    let mut homes: Vec<(NaiveDateTime, usize)> = counts.into_iter().collect();
    homes.sort_by_key(|(p, n)| (Reverse(*n), *p));
    if !hours {
        homes.truncate(1);
    }
    let mut best = (hours_cost(of, None, hours), None);
    for (home, _) in homes {
        let cost = 1 + hours_cost(of, Some(home), hours);
        if cost < best.0 {
            best = (cost, Some(home));
        }
    }
    best.1
}

impl Periods {
    /// The mixed plan of this report, when one reads at most half the buckets of
    /// every quarter (`hours`: whether UTC hours can be read, the scope's and the
    /// store's). `None`
    /// in UTC but by hour (days already), and by hour without hours (a local hour is
    /// quarters).
    pub fn mixed(&self, hours: bool) -> Option<Mixed> {
        let by_hour = self.granularity == Granularity::Hour;
        if (self.tz == chrono_tz::Tz::UTC && !by_hour) || (by_hour && !hours) {
            return None;
        }
        let (start, end) = self.span_ms();
        let (first, last) = (Grain::Day.bucket(start), Grain::Day.bucket(end - 1));
        let mut mixed = Mixed {
            days: BTreeMap::new(),
            hours: BTreeMap::new(),
            quarters: Vec::new(),
        };
        let mut plain = 0usize;
        let mut of: [In; QUARTERS] = [None; QUARTERS];
        for d in first..=last {
            let q0 = Grain::Quarter.first_of_day(d);
            let h0 = Grain::Hour.first_of_day(d);
            for (q, p) in (q0..).zip(of.iter_mut()) {
                *p = self.period_of(Grain::Quarter.start_ms(q));
            }
            plain += of.iter().flatten().count();
            let home = day_home(&of, hours);
            if let Some(home) = home {
                mixed.days.insert(d, home);
            }
            for ((h, q), quarters) in (h0..)
                .zip((q0..).step_by(PER_HOUR))
                .zip(of.chunks(PER_HOUR))
            {
                let inherit = match hour_plan(quarters, home, hours).1 {
                    Some(own) => {
                        mixed.hours.insert(h, own);
                        own
                    }
                    None => home,
                };
                for (q, p) in (q..).zip(quarters) {
                    if *p != inherit {
                        push(&mut mixed.quarters, q);
                    }
                }
            }
        }
        // Worth it only at half the buckets or fewer: every tally read is netted (one
        // or two sums instead of one) and the reads are three instead of one, so a
        // plan saving a quarter of the buckets (Asia/Kolkata by hour: 2,132 of
        // 2,880) measured slower than reading every quarter.
        (mixed.buckets() * 2 <= plain).then_some(mixed)
    }

    /// The tallies per period of a mixed plan's reads: each read's tally added to
    /// the period it counts in (a day's and an hour's: its home; a quarter's: its
    /// own) and taken from the one its nearest read ancestor counts in (a quarter's:
    /// its hour's, else its day's; an hour's: its day's). Each comes out placed at
    /// its period's first quarter in the range, netted (zero ones left out).
    pub fn net<'s>(
        &self,
        mixed: &Mixed,
        days: &'s [SummedTally],
        hours: &'s [SummedTally],
        quarters: &'s [SummedTally],
    ) -> Vec<SummedTally> {
        // Keyed by the place's text borrowed from the reads (no place cloned until
        // its netted tally comes out): campaign, scope, creative, catalog, product.
        type Key<'s> = (
            &'s str,
            Scope,
            &'s str,
            &'s str,
            &'s str,
            Metric,
            NaiveDateTime,
        );
        let mut acc: FastMap<Key<'s>, i64> = FastMap::default();
        let mut add = |s: &'s SummedTally, period: NaiveDateTime, sign: i64| {
            let p = &s.place;
            let key = (
                p.campaign_id.as_str(),
                p.scope,
                p.creative.as_str(),
                p.catalog_id.as_str(),
                p.product_code.as_str(),
                s.metric,
                period,
            );
            *acc.entry(key).or_default() += sign * s.value;
        };
        // Moves a read's tally from its ancestor's period to its own.
        let mut moved = |s: &'s SummedTally, own: In, ancestor: In| {
            if own != ancestor {
                if let Some(a) = ancestor {
                    add(s, a, -1);
                }
                if let Some(o) = own {
                    add(s, o, 1);
                }
            }
        };
        let day_home =
            |bucket: i32, grain: Grain| mixed.days.get(&grain.day_of_bucket(bucket)).copied();
        for s in days {
            if let Some(home) = mixed.days.get(&s.place.bucket) {
                moved(s, Some(*home), None);
            }
        }
        for s in hours {
            let h = s.place.bucket;
            if let Some(own) = mixed.hours.get(&h) {
                moved(s, *own, day_home(h, Grain::Hour));
            }
        }
        let mut own: FastMap<i32, In> = FastMap::default();
        for s in quarters {
            let q = s.place.bucket;
            let period = *own
                .entry(q)
                .or_insert_with(|| self.period_of(Grain::Quarter.start_ms(q)));
            let ancestor = match mixed.hours.get(&q.div_euclid(QUARTERS_PER_HOUR)) {
                Some(hour) => *hour,
                None => day_home(q, Grain::Quarter),
            };
            moved(s, period, ancestor);
        }
        // A period's first instant in the range (a week's Monday may be before it).
        let (start, _) = self.span_ms();
        let mut bucket_of: FastMap<NaiveDateTime, i32> = FastMap::default();
        let mut out: Vec<SummedTally> = acc
            .into_iter()
            .filter(|(_, v)| *v != 0)
            .map(
                |((campaign, scope, creative, catalog, product, metric, period), value)| {
                    let bucket = *bucket_of
                        .entry(period)
                        .or_insert_with(|| Grain::Quarter.bucket(self.start_of(period).max(start)));
                    SummedTally {
                        place: Place {
                            campaign_id: campaign.into(),
                            scope,
                            grain: Grain::Quarter,
                            bucket,
                            creative: creative.into(),
                            catalog_id: catalog.into(),
                            product_code: product.into(),
                            partition: 0,
                        },
                        metric,
                        value,
                    }
                },
            )
            .collect();
        out.sort_unstable_by(|a, b| (&a.place, a.metric).cmp(&(&b.place, b.metric)));
        out
    }
}

#[cfg(test)]
mod tests;
