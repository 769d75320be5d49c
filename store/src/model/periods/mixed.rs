//! A report in a zone other than UTC read mostly from UTC days (issue 26): each UTC
//! day counted in the period that holds most of its quarter hours (its home), and
//! only the quarters that fall in another period (or outside the range) read apart,
//! moved out of the home and into their own period.
//!
//! Summing every quarter of a local day is exact but costs 96 buckets a day whatever
//! the zone. A UTC day's tally is the sum of its 96 quarters' (both are written by
//! the same moves, `super::super::tallies::moves`), and every count is additive, so
//! for a day read whole: its tally goes to its home; each of its quarters in another
//! period is added there and subtracted from the home; a quarter in the home is not
//! read at all. Asia/Kolkata by day: one day and 22 quarters a day instead of 96;
//! Europe/Paris: one day and 4 or 8; a week, a month or a summary in any zone: the
//! days and the quarters at the range's two ends. A UTC day whose home holds fewer
//! quarters than moving the rest would cost is read as quarters, as before.
//!
//! The netted tallies ([`Periods::net`]) are placed at their period's first quarter
//! in the range, so the rows are made from them as from quarters ([`Periods::period_of_bucket`]
//! gives each its period back).

use std::collections::BTreeMap;

use chrono::NaiveDateTime;

use super::Periods;
use crate::model::tallies::{Grain, Metric, Place, Scope, SummedTally};
use crate::model::FastMap;

/// Quarter hours in a UTC day.
const QUARTERS: i32 = 96;

/// What a report reads instead of every quarter of its range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mixed {
    /// UTC days read whole, each with the period it counts in (its home).
    pub days: BTreeMap<i32, NaiveDateTime>,
    /// The quarter buckets read, as inclusive ranges in order.
    pub quarters: Vec<(i32, i32)>,
}

impl Mixed {
    /// Buckets read in all (days and quarters).
    pub fn buckets(&self) -> usize {
        self.days.len()
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
}

/// Adds `q` to the ranges, merging it into the last one when it follows it.
fn push(ranges: &mut Vec<(i32, i32)>, q: i32) {
    match ranges.last_mut() {
        Some((_, b)) if *b + 1 == q => *b = q,
        _ => ranges.push((q, q)),
    }
}

impl Periods {
    /// The mixed plan of this report, when one reads fewer buckets than every quarter:
    /// `None` in UTC (days already) and by hour (a local hour is quarters).
    pub fn mixed(&self) -> Option<Mixed> {
        if self.tz == chrono_tz::Tz::UTC || self.granularity == super::Granularity::Hour {
            return None;
        }
        let (start, end) = self.span_ms();
        let (first, last) = (Grain::Day.bucket(start), Grain::Day.bucket(end - 1));
        let mut days = BTreeMap::new();
        let mut quarters = Vec::new();
        let mut plain = 0usize;
        for d in first..=last {
            let q0 = Grain::Quarter.bucket(Grain::Day.start_ms(d));
            let of: Vec<Option<NaiveDateTime>> = (0..QUARTERS)
                .map(|i| self.period_of(Grain::Quarter.start_ms(q0 + i)))
                .collect();
            let mut counts: BTreeMap<NaiveDateTime, usize> = BTreeMap::new();
            for p in of.iter().flatten() {
                *counts.entry(*p).or_default() += 1;
            }
            let inside: usize = counts.values().sum();
            plain += inside;
            let home = counts
                .iter()
                .max_by_key(|(p, n)| (**n, std::cmp::Reverse(**p)));
            match home {
                // The day and the quarters out of its home cost less than its quarters.
                Some((home, n)) if 1 + (QUARTERS as usize - n) < inside => {
                    days.insert(d, *home);
                    for (i, p) in (0..QUARTERS).zip(&of) {
                        if *p != Some(*home) {
                            push(&mut quarters, q0 + i);
                        }
                    }
                }
                _ => {
                    for (i, p) in (0..QUARTERS).zip(&of) {
                        if p.is_some() {
                            push(&mut quarters, q0 + i);
                        }
                    }
                }
            }
        }
        let mixed = Mixed { days, quarters };
        (mixed.buckets() < plain).then_some(mixed)
    }

    /// The tallies per period of a mixed plan's reads: each day's tallies in its
    /// home, each quarter's moved from its day's home (when its day was read whole)
    /// to its own period (when it has one). Each comes out placed at its period's
    /// first quarter in the range, netted (zero ones left out).
    pub fn net<'s>(
        &self,
        mixed: &Mixed,
        days: &'s [SummedTally],
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
        for s in days {
            if let Some(home) = mixed.days.get(&s.place.bucket) {
                add(s, *home, 1);
            }
        }
        let mut own: FastMap<i32, Option<NaiveDateTime>> = FastMap::default();
        for s in quarters {
            let q = s.place.bucket;
            let period = *own
                .entry(q)
                .or_insert_with(|| self.period_of(Grain::Quarter.start_ms(q)));
            let day = Grain::Day.bucket(Grain::Quarter.start_ms(q));
            let home = mixed.days.get(&day).copied();
            if period == home {
                continue;
            }
            if let Some(home) = home {
                add(s, home, -1);
            }
            if let Some(p) = period {
                add(s, p, 1);
            }
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
                            campaign_id: campaign.to_owned(),
                            scope,
                            grain: Grain::Quarter,
                            bucket,
                            creative: creative.to_owned(),
                            catalog_id: catalog.to_owned(),
                            product_code: product.to_owned(),
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
