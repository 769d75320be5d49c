//! What one distinct event does to the tallies: the places it counts in and the
//! metrics it moves there, and how a better copy of it moves it from its old
//! reason (or bucket) to its new one. Pure: the aggregator's fold and the backfill
//! of stored facts both count through [`moves`].

use super::{Grain, Kind, Metric, Place, PlaceTallies, Scope, Tally, TallyKey, Text};
use crate::model::status::AdIdStatus;
use crate::model::traffic::{self, TrafficClass};
use std::collections::HashMap;
use std::hash::BuildHasher;

/// Where a distinct event counts, apart from its time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event<'a> {
    /// What it is.
    pub kind: Kind,
    /// Its campaign.
    pub campaign_id: &'a str,
    /// The creative its ad id names (empty when none).
    pub creative: &'a str,
    /// Catalog (product events; ignored for ad events).
    pub catalog_id: &'a str,
    /// Product (product events; ignored for ad events).
    pub product_code: &'a str,
}

/// How a distinct event counts: its best copy's status and class, and its earliest
/// copy's time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Judged {
    /// Ad id status of its best copy.
    pub status: AdIdStatus,
    /// Traffic class of its best copy (the edge's, or the served-ad rules').
    pub class: TrafficClass,
    /// Event time of its earliest copy, ms.
    pub time_ms: i64,
}

impl Judged {
    /// The event as it counts once `other`, a copy of it, is known too: the best of
    /// the two copies' (status, class) ([`traffic::best_copy`]), the earlier time.
    pub fn with_copy(self, other: Judged) -> Judged {
        let (status, class) =
            traffic::best_copy((self.status, self.class), (other.status, other.class));
        Judged {
            status,
            class,
            time_ms: self.time_ms.min(other.time_ms),
        }
    }

    /// The metrics it moves: its reason (or billable), and its status when the ad id
    /// did not verify.
    fn metrics(self, kind: Kind) -> [Option<Metric>; 2] {
        [
            Some(Metric::Events(
                kind,
                traffic::reason(self.class, self.status),
            )),
            (self.status != AdIdStatus::Verified).then_some(Metric::Status(kind, self.status)),
        ]
    }
}

/// The five places an event at `time_ms` of log `partition` counts in: its
/// campaign's and its creative's, each per UTC day and per quarter hour (the
/// campaign summary and spend; the products and ads reports; in any zone), and its
/// campaign's UTC hour ([`super::hours`]).
pub fn places(e: &Event<'_>, time_ms: i64, partition: i32) -> [Place; 5] {
    let detail = if e.kind.is_product() {
        Scope::Product
    } else {
        Scope::Creative
    };
    let place = |scope: Scope, grain: Grain| {
        let product = scope == Scope::Product;
        let pick = |on: bool, s: &str| if on { Text::from(s) } else { Text::default() };
        Place {
            campaign_id: e.campaign_id.into(),
            scope,
            grain,
            bucket: grain.bucket(time_ms),
            creative: pick(scope != Scope::Campaign, e.creative),
            catalog_id: pick(product, e.catalog_id),
            product_code: pick(product, e.product_code),
            partition,
        }
    };
    [
        place(Scope::Campaign, Grain::Day),
        place(Scope::Campaign, Grain::Quarter),
        place(Scope::Campaign, Grain::Hour),
        place(detail, Grain::Day),
        place(detail, Grain::Quarter),
    ]
}

/// The net moves of one distinct event that was counted as `old` (`None`: not yet)
/// and now counts as `new`: -1 where it was, +1 where it is, netted per tally (none
/// when nothing changed).
pub fn moves(
    e: &Event<'_>,
    old: Option<Judged>,
    new: Judged,
    partition: i32,
) -> Vec<(TallyKey, i64)> {
    let mut out: Vec<(TallyKey, i64)> = Vec::new();
    let mut add = |j: Judged, delta: i64| {
        let [reason, status] = j.metrics(e.kind);
        for place in places(e, j.time_ms, partition) {
            // The place is copied only for a second metric (an ad id that did not
            // verify); the last one takes it.
            let keys = match (reason, status) {
                (Some(r), Some(s)) => [
                    Some(TallyKey {
                        place: place.clone(),
                        metric: r,
                    }),
                    Some(TallyKey { place, metric: s }),
                ],
                (Some(m), None) | (None, Some(m)) => [Some(TallyKey { place, metric: m }), None],
                (None, None) => [None, None],
            };
            for key in keys.into_iter().flatten() {
                match out.iter_mut().find(|(k, _)| *k == key) {
                    Some((_, d)) => *d += delta,
                    None => out.push((key, delta)),
                }
            }
        }
    };
    if let Some(old) = old {
        add(old, -1);
    }
    add(new, 1);
    out.retain(|(_, d)| *d != 0);
    out
}

/// Applies a record's moves (from [`moves`]) at `offset` to the tallies of their
/// places (absent places are empty), marking each tally that moved
/// ([`PlaceTallies::add`]); true when any moved (false for a replayed record at or
/// below the stamps). One lookup per run of moves of one place (the move makers
/// list a place's metrics together).
pub fn apply<S: BuildHasher>(
    moves: Vec<(TallyKey, i64)>,
    offset: i64,
    tallies: &mut HashMap<Place, PlaceTallies, S>,
) -> bool {
    let mut moved = false;
    let mut moves = moves.into_iter().peekable();
    let mut run: Vec<(Metric, i64)> = Vec::new();
    while let Some((key, delta)) = moves.next() {
        run.clear();
        run.push((key.metric, delta));
        while let Some((next, d)) = moves.next_if(|(k, _)| k.place == key.place) {
            run.push((next.metric, d));
        }
        let p = tallies.entry(key.place).or_default();
        for &(metric, d) in &run {
            moved |= p.add(metric, offset, d);
        }
    }
    moved
}

/// The rows a batch writes: the moved tallies' new values, each once, in no
/// particular order (each store orders its own writes: the embedded store sorts a
/// batch's encoded keys, ClickHouse sorts on insert); the marks are cleared, so the
/// next batch's rows start empty.
pub fn dirty_rows<S: BuildHasher>(
    tallies: &mut HashMap<Place, PlaceTallies, S>,
) -> Vec<(TallyKey, Tally)> {
    let mut rows: Vec<(TallyKey, Tally)> = Vec::new();
    for (place, p) in tallies.iter_mut() {
        if !p.any_moved() {
            continue;
        }
        for (metric, t) in p.take_moved() {
            rows.push((
                TallyKey {
                    place: place.clone(),
                    metric,
                },
                t,
            ));
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::traffic::Invalid;

    fn event(kind: Kind) -> Event<'static> {
        Event {
            kind,
            campaign_id: "c",
            creative: "p:sku",
            catalog_id: "cat",
            product_code: "sku",
        }
    }

    fn judged(status: AdIdStatus, class: TrafficClass, time_ms: i64) -> Judged {
        Judged {
            status,
            class,
            time_ms,
        }
    }

    #[test]
    fn an_event_counts_in_five_places_and_only_product_events_name_a_product() {
        let p = places(&event(Kind::ProductClick), 90_000_000, 3);
        assert!(p[..3].iter().all(|x| x.creative.is_empty()));
        assert!(p[..3].iter().all(|x| x.scope == Scope::Campaign));
        assert_eq!(p[3].creative, "p:sku");
        assert_eq!(p[3].product_code, "sku");
        assert_eq!(
            p.each_ref().map(|x| (x.grain, x.bucket)),
            [
                (Grain::Day, 1),
                (Grain::Quarter, 100),
                (Grain::Hour, 25),
                (Grain::Day, 1),
                (Grain::Quarter, 100)
            ]
        );
        assert!(p.iter().all(|x| x.partition == 3));
        let a = places(&event(Kind::AdImpression), 0, 0);
        assert_eq!(
            (a[4].creative.as_str(), a[4].product_code.as_str()),
            ("p:sku", "")
        );
    }

    #[test]
    fn a_better_copy_moves_the_event_and_a_worse_one_nothing() {
        let e = event(Kind::AdClick);
        let prefetch = judged(AdIdStatus::Verified, TrafficClass::Prefetch, 1_000);
        let first = moves(&e, None, prefetch, 0);
        assert_eq!(first.len(), 5);
        assert!(first
            .iter()
            .all(|(k, d)| *d == 1
                && k.metric == Metric::Events(Kind::AdClick, Some(Invalid::Prefetch))));
        let genuine = judged(AdIdStatus::Verified, TrafficClass::Valid, 1_000);
        let best = prefetch.with_copy(genuine);
        assert_eq!(best, genuine);
        let m = moves(&e, Some(prefetch), best, 0);
        assert_eq!(m.len(), 10);
        assert_eq!(m.iter().map(|(_, d)| d).sum::<i64>(), 0);
        assert_eq!(moves(&e, Some(genuine), genuine.with_copy(prefetch), 0), []);
    }

    #[test]
    fn an_earlier_copy_moves_the_event_to_its_buckets_and_statuses_count_beside() {
        let e = event(Kind::AdImpression);
        let late = judged(
            AdIdStatus::Expired,
            TrafficClass::Valid,
            2 * crate::model::DAY_MS,
        );
        let m = moves(&e, None, late, 0);
        assert_eq!(m.len(), 10, "reason and status, five places each");
        let early = late.with_copy(judged(AdIdStatus::Expired, TrafficClass::Valid, 5));
        assert_eq!(early.time_ms, 5);
        let m = moves(&e, Some(late), early, 0);
        assert_eq!(m.len(), 20);
        assert!(m
            .iter()
            .filter(|(_, d)| *d > 0)
            .all(|(k, _)| k.place.bucket == 0));
        let mut tallies = HashMap::new();
        assert!(apply(moves(&e, None, late, 0), 7, &mut tallies));
        assert!(
            !apply(moves(&e, None, late, 0), 7, &mut tallies),
            "a replay"
        );
        assert_eq!(dirty_rows(&mut tallies).len(), 10);
        assert!(dirty_rows(&mut tallies).is_empty(), "taken once");
        // A tally moved again after its row was taken is taken again, alone.
        let m = moves(&e, Some(late), early, 0);
        assert!(apply(m, 8, &mut tallies));
        let rows = dirty_rows(&mut tallies);
        assert_eq!(rows.len(), 20, "every tally the copy moved");
        let keys: std::collections::BTreeSet<&TallyKey> = rows.iter().map(|(k, _)| k).collect();
        assert_eq!(keys.len(), rows.len(), "each tally once");
    }
}
