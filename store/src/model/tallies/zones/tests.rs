//! The zones' backfill against the moves that count the same events as they arrive.

use std::collections::{BTreeMap, HashMap};

use proptest::prelude::*;

use super::*;
use crate::model::status::AdIdStatus;
use crate::model::tallies::moves::{self, Event, Judged};
use crate::model::tallies::{Kind, Metric, PlaceTallies, QUARTER_MS};
use crate::model::traffic::TrafficClass;

/// One distinct event and the copy that later improves it (or not): kind, campaign,
/// creative, product, quarter hour offset, first class, better class, partition.
type Arb = (usize, u8, u8, u8, i64, bool, bool, u8);

fn arb_event() -> impl Strategy<Value = Arb> {
    (
        0..4usize,
        0..2u8,
        0..3u8,
        0..3u8,
        0..(3 * 96 * QUARTER_MS),
        any::<bool>(),
        any::<bool>(),
        0..2u8,
    )
}

/// Every stored tally of the map, as rows.
fn rows(tallies: &HashMap<Place, PlaceTallies>) -> Vec<(TallyKey, Tally)> {
    tallies
        .iter()
        .flat_map(|(p, t)| {
            t.0.iter().map(move |(metric, tally)| {
                (
                    TallyKey {
                        place: p.clone(),
                        metric: *metric,
                    },
                    *tally,
                )
            })
        })
        .collect()
}

proptest! {
    /// Events folded as the aggregator folds them (a copy of a better class moving
    /// some): the campaigns' quarter hours the zones' backfill sums from the
    /// creatives' and products' equal those the moves counted, value for value, and
    /// each campaign's day is the sum of its quarters.
    #[test]
    fn campaign_quarters_sum_to_what_the_moves_counted(
        events in proptest::collection::vec(arb_event(), 1..60)
    ) {
        let mut tallies: HashMap<Place, PlaceTallies> = HashMap::new();
        let mut offsets: BTreeMap<i32, i64> = BTreeMap::new();
        let day0 = 20_000 * crate::model::DAY_MS;
        for (kind, c, cr, pr, t, bot, better, part) in events {
            let (campaign, creative, product) =
                (format!("c{c}"), format!("cr{cr}"), format!("p{pr}"));
            let e = Event {
                kind: Kind::ALL[kind],
                campaign_id: &campaign,
                creative: &creative,
                catalog_id: "cat",
                product_code: &product,
            };
            let partition = i32::from(part);
            let first = Judged {
                status: AdIdStatus::Verified,
                class: if bot { TrafficClass::KnownBot } else { TrafficClass::Valid },
                time_ms: day0 + t,
            };
            let offset = offsets.entry(partition).or_insert(0);
            *offset += 1;
            moves::apply(moves::moves(&e, None, first, partition), *offset, &mut tallies);
            if better {
                let copy = Judged { class: TrafficClass::Valid, time_ms: first.time_ms - QUARTER_MS, ..first };
                *offset += 1;
                let now = first.with_copy(copy);
                moves::apply(moves::moves(&e, Some(first), now, partition), *offset, &mut tallies);
            }
        }
        let all = rows(&tallies);
        let counted: BTreeMap<TallyKey, i64> = all
            .iter()
            .filter(|(k, _)| is_zoned(&k.place))
            .map(|(k, t)| (k.clone(), t.value))
            .collect();
        let without: Vec<(TallyKey, Tally)> =
            all.iter().filter(|(k, _)| !is_zoned(&k.place)).cloned().collect();
        let summed = campaign_events(without, &offsets);
        let backfilled: BTreeMap<TallyKey, i64> = summed
            .iter()
            .filter(|(_, t)| t.value != 0)
            .map(|(k, t)| (k.clone(), t.value))
            .collect();
        let counted_nonzero: BTreeMap<TallyKey, i64> =
            counted.into_iter().filter(|(_, v)| *v != 0).collect();
        prop_assert_eq!(&backfilled, &counted_nonzero);
        // Stamped at the partition's progress: every record folded is at or below it.
        for (k, t) in &summed {
            prop_assert_eq!(t.stamp, offsets[&k.place.partition]);
        }
        // A day is its quarters' sum, per campaign, partition and metric.
        let mut days: BTreeMap<(String, i32, i32, Metric), i64> = BTreeMap::new();
        for (k, t) in &all {
            let p = &k.place;
            if p.scope != Scope::Campaign {
                continue;
            }
            let day = match p.grain {
                Grain::Day => p.bucket,
                Grain::Quarter => crate::model::day_of(Grain::Quarter.start_ms(p.bucket)),
                Grain::Hour => continue,
            };
            let sign = if p.grain == Grain::Day { 1 } else { -1 };
            *days.entry((p.campaign_id.to_string(), day, p.partition, k.metric)).or_default() +=
                sign * t.value;
        }
        prop_assert!(days.values().all(|v| *v == 0), "{:?}", days);
        // The fold's hours are its quarters' sums, as the hours' backfill sums them.
        let hours: BTreeMap<TallyKey, i64> = all
            .iter()
            .filter(|(k, t)| k.place.grain == Grain::Hour && t.value != 0)
            .map(|(k, t)| (k.clone(), t.value))
            .collect();
        let summed: BTreeMap<TallyKey, i64> = super::super::hours::of_quarters(all.clone())
            .into_iter()
            .map(|(k, t)| (k, t.value))
            .collect();
        prop_assert_eq!(hours, summed);
    }
}

/// A view counts at its earliest event's quarter hour, at its campaign's and its
/// video's places, and nowhere else.
#[test]
fn a_view_is_backfilled_at_its_first_quarter_hour() {
    let row = crate::model::funnel::ViewRow {
        key: crate::model::funnel::ViewKey {
            ad_id: "ad".into(),
            video_id: "vid".into(),
            tracking_id: "s".into(),
        },
        campaign_id: "c".into(),
        day: 20_000,
        version: 2,
        milestones: [1, 1, 0, 0, 0, 0],
        controls: [0; 5],
        funnel_gaps: 0,
        repeated_milestones: 0,
        ad_id_status: AdIdStatus::Verified,
        served_repeat: false,
    };
    let first_ms = 20_000 * crate::model::DAY_MS + 5 * QUARTER_MS + 1;
    let got = views([Counted {
        row: &row,
        first_ms,
    }]);
    // views, creative views and plays, at two places.
    assert_eq!(got.len(), 6);
    for (k, t) in &got {
        assert!(is_zoned(&k.place));
        assert_eq!(k.place.bucket, 20_000 * 96 + 5);
        assert_eq!((t.value, t.stamp), (1, 0));
        assert_eq!(k.place.partition, BACKFILL_PARTITION);
    }
}
