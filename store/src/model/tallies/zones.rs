//! The zones' backfill (issue 26): the quarter hours of campaigns, videos and
//! campaigns' sales ([`Scope::ZONED`]), counted once for a store written before they
//! were, so the campaign summary and the video funnel read in any IANA zone.
//!
//! Since this version every move of those scopes also moves their quarter hour
//! (`moves::places`, `views::places`, `carts::moves`, `OrderCredits::counts`); a store
//! an earlier version wrote has their UTC days only. At the aggregator's start, after
//! the other backfills and before its first write, each store counts what the
//! earlier version wrote into the quarter hours, then writes a marker
//! ([`super::Metric::ZonesBackfilled`]); reads of those quarter hours answer 503
//! until it is there ([`super::TallyQuery::marker`]). Every count is the same one
//! the days hold, so a day equals the sum of its quarters again:
//!
//! - **Events** ([`campaign_events`]): a campaign's quarter hour is the sum of its
//!   creatives' and products' quarter hours, which every event has moved since
//!   tallies began (and the first backfill wrote). Summed per log partition, each
//!   stamped with the partition's progress (the last record its writers folded), so
//!   a record replayed after the start (its batch written, its offset not
//!   committed) is at or below the stamp and moves nothing twice.
//! - **Views, cart adds and sales** ([`views`], `carts::backfill_rows_of`,
//!   [`sales`]): counted from the stored entities (each view's row with its facts'
//!   earliest time, each cart line's facts, each order's credits) under the
//!   backfill's partition. A record replayed after the start finds its entity as it
//!   left it (no move); one whose entity was not written moves its quarter hour
//!   as it moves its day, and the backfill did not count it.
//!
//! The first backfill and the sales' backfill leave these places out
//! ([`is_zoned`]), so a store of any earlier version counts them here once.

use std::collections::BTreeMap;

use super::sales::OrderCredits;
use super::views::{self, Counted};
use super::{Grain, Place, Scope, Tally, TallyKey, BACKFILL_PARTITION};

/// Whether a place is one the zones' backfill counts: a quarter hour of a zoned scope.
pub fn is_zoned(p: &Place) -> bool {
    p.grain == Grain::Quarter && Scope::ZONED.contains(&p.scope)
}

/// Whether a stored tally is one [`campaign_events`] sums: a creative's or a
/// product's quarter hour of events.
pub fn sums_into_campaigns(k: &TallyKey) -> bool {
    matches!(k.place.scope, Scope::Creative | Scope::Product)
        && k.place.grain == Grain::Quarter
        && k.metric.kind().is_some()
}

/// The campaigns' quarter hours of events from stored `tallies` (any; the creatives'
/// and products' quarter hours are used), per log partition, each stamped with the
/// partition's `progress` (the offset of its last record folded) where it has one.
pub fn campaign_events(
    tallies: impl IntoIterator<Item = (TallyKey, Tally)>,
    progress: &BTreeMap<i32, i64>,
) -> Vec<(TallyKey, Tally)> {
    let mut out: BTreeMap<TallyKey, Tally> = BTreeMap::new();
    for (k, t) in tallies {
        if !sums_into_campaigns(&k) {
            continue;
        }
        let p = &k.place;
        let key = TallyKey {
            place: Place {
                campaign_id: p.campaign_id.clone(),
                scope: Scope::Campaign,
                grain: Grain::Quarter,
                bucket: p.bucket,
                creative: Default::default(),
                catalog_id: Default::default(),
                product_code: Default::default(),
                partition: p.partition,
            },
            metric: k.metric,
        };
        let sum = out.entry(key).or_insert(Tally { value: 0, stamp: 0 });
        sum.value += t.value;
        sum.stamp = sum.stamp.max(t.stamp);
    }
    for (k, t) in &mut out {
        if let Some(done) = progress.get(&k.place.partition) {
            t.stamp = t.stamp.max(*done);
        }
    }
    out.into_iter().collect()
}

/// The quarter hours of stored views (each its row and its facts' earliest time).
pub fn views<'a>(rows: impl IntoIterator<Item = Counted<'a>>) -> Vec<(TallyKey, Tally)> {
    let mut counts: BTreeMap<TallyKey, i64> = BTreeMap::new();
    for v in rows {
        for (k, d) in views::moves(None, v, BACKFILL_PARTITION) {
            if is_zoned(&k.place) {
                *counts.entry(k).or_default() += d;
            }
        }
    }
    stamped(counts)
}

/// The campaigns' quarter hours of stored orders' credits.
pub fn sales<'a>(states: impl IntoIterator<Item = &'a OrderCredits>) -> Vec<(TallyKey, Tally)> {
    let mut counts: BTreeMap<TallyKey, i64> = BTreeMap::new();
    for s in states {
        let moved = super::sales::moves(&Default::default(), &s.counts(), BACKFILL_PARTITION);
        for (k, d) in moved {
            if is_zoned(&k.place) {
                *counts.entry(k).or_default() += d;
            }
        }
    }
    stamped(counts)
}

/// Counts as rows of the backfill (stamp 0), zeros left out.
pub(crate) fn stamped(counts: BTreeMap<TallyKey, i64>) -> Vec<(TallyKey, Tally)> {
    counts
        .into_iter()
        .filter(|(_, v)| *v != 0)
        .map(|(k, value)| (k, Tally { value, stamp: 0 }))
        .collect()
}

#[cfg(test)]
mod tests;
