//! The bound on new served ads and places: what it removes, and (as a property over
//! logs) that it never removes an ad whose state a writer before the cache could
//! have stored.

use proptest::prelude::*;
use rm_schemas::ad_id::AdIdKeys;
use rm_schemas::{EventRecord, InteractionEvent, InteractionType};
use rm_store::model::tallies::{Grain, Place, Scope};
use rm_store::FastSet;

use super::{FreshAds, MARGIN_MS};
use crate::batch::Position;

const TTL_MS: i64 = 1_800_000;
/// The property's clock allowance: events dated up to an hour after receipt.
const SKEW_MS: i64 = 3_600_000;
/// 2026-11-01T00:00:00Z, ms.
const T0: i64 = 1_793_491_200_000;

fn keys() -> AdIdKeys {
    AdIdKeys::new(vec![b"0123456789abcdef-key-one".to_vec()]).expect("keys")
}

/// An ad served at `served_ms` (its id expires a lifetime later).
fn ad(n: usize, served_ms: i64) -> String {
    keys()
        .mint(&format!("c{n}"), "banner", (served_ms + TTL_MS) / 1000)
        .expect("mint")
}

/// An impression of `ad` received at `received_ms`.
fn record(ad: &str, received_ms: i64) -> EventRecord {
    let at = chrono::DateTime::from_timestamp_millis(received_ms).expect("time");
    let event = InteractionEvent::new(
        ad.to_owned(),
        InteractionType::AdImpression,
        at.fixed_offset(),
    );
    EventRecord::new(event, uuid::Uuid::nil(), at)
}

fn set(ads: &[&str]) -> FastSet<String> {
    ads.iter().map(|a| (*a).to_owned()).collect()
}

/// What of `ads` a fold of `records` looks up.
fn looked_up(
    fresh: &FreshAds,
    mut ads: FastSet<String>,
    records: &[EventRecord],
    positions: &[Position],
) -> FastSet<String> {
    let new = fresh.new_ads(records, positions, TTL_MS);
    ads.retain(|a| !new.contains(a.as_str()));
    ads
}

#[test]
fn nothing_is_new_before_a_partition_has_its_bound() {
    let late = ad(1, T0 + 86_400_000);
    let records = vec![record(&late, T0)];
    let positions: Vec<Position> = vec![(0, 10)];
    let ads = looked_up(&FreshAds::default(), set(&[&late]), &records, &positions);
    assert_eq!(ads, set(&[&late]));
}

#[test]
fn a_partition_without_stored_progress_gets_no_bound() {
    let mut fresh = FreshAds::default();
    let records = vec![record(&ad(1, T0), T0)];
    fresh.establish(&records, &[(0, 10)], |_| None);
    assert_eq!(fresh.after(0, TTL_MS), None);
}

#[test]
fn only_a_record_above_the_stored_progress_sets_the_bound() {
    let mut fresh = FreshAds::default();
    let a = ad(1, T0);
    let records = vec![
        record(&a, T0),
        record(&a, T0 + 1_000),
        record(&a, T0 + 2_000),
    ];
    let positions: Vec<Position> = vec![(3, 10), (3, 11), (3, 12)];
    // Every record at or below the progress: a replay, no bound.
    fresh.establish(&records, &positions, |_| Some(12));
    assert_eq!(fresh.after(3, TTL_MS), None);
    // The first record above it sets the bound, from its receipt.
    fresh.establish(&records, &positions, |_| Some(10));
    let bound = (T0 + 1_000 + MARGIN_MS + TTL_MS) / 1000 + 1;
    assert_eq!(fresh.after(3, TTL_MS), Some(bound));
    // A later batch does not move it.
    fresh.establish(&records, &positions, |_| Some(0));
    assert_eq!(fresh.after(3, TTL_MS), Some(bound));
    assert_eq!(fresh.after(4, TTL_MS), None);
}

#[test]
fn ads_served_after_the_bound_are_new_the_rest_and_ids_not_ours_are_looked_up() {
    let mut fresh = FreshAds::default();
    let old = ad(1, T0 - 86_400_000);
    let within = ad(2, T0 + MARGIN_MS / 2);
    let new = ad(3, T0 + 2 * MARGIN_MS);
    let foreign = "not-one-of-ours".to_owned();
    let records = vec![
        record(&old, T0),
        record(&within, T0 + 1),
        record(&new, T0 + 2),
        record(&foreign, T0 + 3),
    ];
    let positions: Vec<Position> = vec![(0, 100), (0, 101), (0, 102), (0, 103)];
    fresh.establish(&records, &positions, |_| Some(99));
    let ads = looked_up(
        &fresh,
        set(&[&old, &within, &new, &foreign]),
        &records,
        &positions,
    );
    assert_eq!(ads, set(&[&old, &within, &foreign]));
    // The same ad in a partition without a bound is looked up.
    let ads = looked_up(&fresh, set(&[&new]), &records[2..3], &[(1, 5)]);
    assert_eq!(ads, set(&[&new]));
}

#[test]
fn a_cart_event_in_another_partition_never_makes_its_ad_new() {
    let mut fresh = FreshAds::default();
    let new = ad(1, T0 + 2 * MARGIN_MS);
    let mut cart = record(&new, T0);
    cart.event.interaction_type = InteractionType::Cart;
    cart.event.session_id = Some("shopper".into());
    let impression = record(&new, T0 + 1);
    // The cart's partition (its shopper's) has a bound, the ad's has none.
    fresh.establish(std::slice::from_ref(&cart), &[(2, 10)], |_| Some(0));
    let records = vec![cart, impression];
    let positions: Vec<Position> = vec![(2, 11), (5, 3)];
    let ads = looked_up(&fresh, set(&[&new]), &records, &positions);
    assert_eq!(ads, set(&[&new]));
}

/// A place of `scope` and `grain` at `time_ms`, in partition 0.
fn place(scope: Scope, grain: Grain, time_ms: i64) -> Place {
    Place {
        scope,
        grain,
        bucket: grain.bucket(time_ms),
        campaign_id: "c".into(),
        ..Place::progress(0)
    }
}

#[test]
fn places_begun_after_every_event_the_stored_records_can_name_are_new() {
    // The default allowance: a day.
    let skew = 86_400_000;
    let mut fresh = FreshAds::default();
    let probe = place(Scope::Product, Grain::Quarter, T0 + 3 * skew);
    assert!(!fresh.is_new_place(&probe, skew), "no bound yet");
    fresh.establish(&[record(&ad(1, T0), T0)], &[(0, 5)], |_| Some(4));
    let bound = T0 + MARGIN_MS + skew;
    for grain in [Grain::Quarter, Grain::Hour, Grain::Day] {
        for scope in [
            Scope::Campaign,
            Scope::Product,
            Scope::Video,
            Scope::CartProduct,
        ] {
            // A bucket begun before the bound may hold an event dated up to the skew
            // after a record received before it.
            assert!(!fresh.is_new_place(&place(scope, grain, bound), skew));
            let later = place(scope, grain, bound + 86_400_000 + 1);
            assert!(fresh.is_new_place(&later, skew), "{scope:?} {grain:?}");
            // Another partition has no bound.
            let other = Place {
                partition: 1,
                ..later
            };
            assert!(!fresh.is_new_place(&other, skew));
        }
        // Sales are moved by the orders topic's partitions: never new.
        for scope in [Scope::Sales, Scope::CampaignSales] {
            let later = place(scope, grain, bound + 86_400_000 + 1);
            assert!(!fresh.is_new_place(&later, skew));
        }
    }
    // A dropped tally's place, and every one begun before it, is looked up again.
    let dropped = place(Scope::Product, Grain::Quarter, bound + 2 * 86_400_000);
    let after = place(
        Scope::Product,
        Grain::Quarter,
        bound + 2 * 86_400_000 + 900_000,
    );
    fresh.drop_places([&dropped]);
    assert!(!fresh.is_new_place(&dropped, skew));
    assert!(!fresh.is_new_place(
        &place(Scope::Product, Grain::Day, bound + 86_400_000 + 1),
        skew
    ));
    assert!(fresh.is_new_place(&after, skew));
}

#[test]
fn an_ad_whose_state_the_cache_dropped_is_looked_up_again() {
    let mut fresh = FreshAds::default();
    let first = ad(1, T0 + 2 * MARGIN_MS);
    let second = ad(2, T0 + 3 * MARGIN_MS);
    let records = vec![record(&first, T0), record(&second, T0 + 1)];
    let positions: Vec<Position> = vec![(0, 1), (0, 2)];
    fresh.establish(&records, &positions, |_| Some(0));
    fresh.drop_states([&first]);
    let ads = looked_up(&fresh, set(&[&first, &second]), &records, &positions);
    assert_eq!(ads, set(&[&first]));
    fresh.drop_states([&second]);
    let ads = looked_up(&fresh, set(&[&first, &second]), &records, &positions);
    assert_eq!(ads, set(&[&first, &second]));
}

proptest! {
    /// A partition's log: ads served within half an hour, each record received soon
    /// after (up to five minutes) or late (up to a day) and appended within ten minutes
    /// of receipt, in append order, each dated up to an hour (the test's clock
    /// allowance) after its receipt. Any prefix may have been folded and stored by
    /// another writer (its progress the prefix's last offset). The loop then folds
    /// the rest in batches; no ad with a record in the stored prefix, and no place
    /// such a record moved, is ever taken for new, and every ad served after the
    /// bound with no record there is.
    #[test]
    fn no_ad_a_writer_before_the_cache_stored_is_skipped(
        ads in prop::collection::vec(
            (
                0i64..1_800_000,
                prop::collection::vec(
                    (prop_oneof![0i64..300_000, 0i64..86_400_000], 0i64..600_000, 0i64..SKEW_MS),
                    1..4,
                ),
            ),
            1..24,
        ),
        stored_frac in 0.0f64..1.0,
        batch in 1usize..8,
    ) {
        // (appended, received, ad, dated)
        let mut log: Vec<(i64, i64, usize, i64)> = Vec::new();
        let ids: Vec<String> = ads.iter().enumerate().map(|(n, (s, _))| ad(n, T0 + s)).collect();
        for (n, (served, events)) in ads.iter().enumerate() {
            for (after, delay, ahead) in events {
                let received = T0 + served + after;
                log.push((received + delay, received, n, received + ahead));
            }
        }
        log.sort();
        let records: Vec<EventRecord> = log
            .iter()
            .map(|(_, r, n, at)| {
                let mut rec = record(&ids[*n], *r);
                rec.event.timestamp = chrono::DateTime::from_timestamp_millis(*at)
                    .expect("time")
                    .fixed_offset();
                rec
            })
            .collect();
        let positions: Vec<Position> = (0..records.len() as i64).map(|o| (7, o)).collect();
        let stored_len = ((records.len() as f64) * stored_frac) as usize;
        let progress = (stored_len > 0).then(|| stored_len as i64 - 1);
        let stored_ads: std::collections::HashSet<usize> = log[..stored_len].iter().map(|l| l.2).collect();
        let mut fresh = FreshAds::default();
        for start in (stored_len..records.len()).step_by(batch) {
            let end = (start + batch).min(records.len());
            let (rs, ps) = (&records[start..end], &positions[start..end]);
            let all: FastSet<String> = rs.iter().map(|r| r.event.ad_id.clone()).collect();
            let looked = looked_up(&fresh, all, rs, ps);
            for n in &stored_ads {
                if rs.iter().any(|r| r.event.ad_id == ids[*n]) {
                    prop_assert!(looked.contains(&ids[*n]), "ad {n} has a stored state and was skipped");
                }
            }
            fresh.establish(rs, ps, |_| progress);
            for (_, _, _, at) in &log[..stored_len] {
                for grain in [Grain::Quarter, Grain::Hour, Grain::Day] {
                    let moved = Place { partition: 7, ..place(Scope::Product, grain, *at) };
                    prop_assert!(!fresh.is_new_place(&moved, SKEW_MS), "a stored record's {:?}", grain);
                }
            }
        }
        if let (Some(after), Some(_)) = (fresh.after(7, TTL_MS), progress) {
            for (n, id) in ids.iter().enumerate() {
                let expiry = rm_store::model::served::expiry_of(id).expect("ours");
                let one = looked_up(&fresh, set(&[id]), &records, &positions);
                prop_assert_eq!(one.is_empty(), expiry > after, "ad {}", n);
            }
        }
    }
}
