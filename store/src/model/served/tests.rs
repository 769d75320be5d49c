//! The served-ad rules: one billable event per unit whatever arrives, decided the
//! same on a replay, and the stateless rules.

use super::*;
use proptest::prelude::*;
use rm_schemas::ad_id::{product_creative, AdIdKeys};

fn unit(kind: u8, product: u8) -> Unit<'static> {
    const P: [&str; 3] = ["p0", "p1", "p2"];
    let p = P[usize::from(product % 3)];
    match kind % 5 {
        0 => Unit::AdImpression,
        1 => Unit::AdClick,
        2 => Unit::ProductImpression("cat", p),
        3 => Unit::ProductClick("cat", p),
        _ => Unit::View(p),
    }
}

#[test]
fn forty_shoppers_on_one_served_ad_make_one_billable_click() {
    let mut ad = ServedAd::default();
    let billable: Vec<bool> = (0..40u128).map(|i| ad.take(Unit::AdClick, i)).collect();
    assert_eq!(billable.iter().filter(|b| **b).count(), 1);
    assert!(billable[0], "the first to arrive");
    assert!(ad.take(Unit::AdClick, 0), "a copy of it stays billable");
    assert!(ad.taken_by_another(Unit::AdClick, 5));
    assert!(!ad.taken_by_another(Unit::AdClick, 0));
    assert!(!ad.taken_by_another(Unit::AdImpression, 5), "not taken yet");
    assert!(ad.take(Unit::AdImpression, 99), "another unit is apart");
    assert!(ad.take(Unit::ProductClick("cat", "a"), 100));
    assert!(ad.take(Unit::ProductClick("cat", "b"), 101), "each product");
    assert!(!ad.take(Unit::ProductClick("cat", "a"), 102));
    assert!(
        ad.take(Unit::ProductImpression("cat", "a"), 103),
        "impression apart"
    );
    let viewer = |id: &str| crate::model::traffic::shopper_hash(id);
    let (first, second) = (viewer("s-1"), viewer("s-2"));
    assert!(ad.take_view("v-1", first, 7), "the first viewer's view");
    assert!(ad.take_view("v-1", first, 8), "and all its events");
    assert!(
        !ad.take_view("v-1", second, 9),
        "another viewer's is a repeat"
    );
    assert!(ad.take_view("v-2", second, 10), "another creative apart");
    assert_eq!(
        ad.view_taken_by("v-1", first),
        Some(Some(7)),
        "by its event 7"
    );
    assert_eq!(ad.view_taken_by("v-1", second), None);
}

#[test]
fn units_and_shoppers_are_bounded() {
    let mut ad = ServedAd::default();
    let names: Vec<String> = (0..MAX_UNITS + 10).map(|i| format!("p{i}")).collect();
    let taken = names
        .iter()
        .enumerate()
        .filter(|(i, p)| ad.take(Unit::ProductClick("c", p), *i as u128))
        .count();
    assert_eq!(taken, MAX_UNITS);
    assert_eq!(ad.units(), MAX_UNITS);
    let mut second = Vec::new();
    for s in 1..=20u64 {
        second.push(ad.see(s));
        if s <= MAX_SHOPPERS as u64 {
            assert!(!ad.see(s), "a shopper seen again");
        }
    }
    assert!(!ad.see(0), "no tracking id");
    assert_eq!(second.iter().filter(|b| **b).count(), 1);
    assert!(second[1], "told once, at the second shopper");
    assert_eq!(ad.shoppers(), 20);
    let bytes = postcard::to_allocvec(&ad).expect("encodes");
    assert!(bytes.len() < 2_048, "{} bytes at the bounds", bytes.len());
    let back: ServedAd = postcard::from_bytes(&bytes).expect("decodes");
    assert_eq!(back, ad);
}

#[test]
fn stateless_rules_judge_the_date_and_the_product() {
    let keys = AdIdKeys::new(vec![b"0123456789abcdef-key-one".to_vec()]).expect("keys");
    let expires = 1_800_000_000; // Unix seconds
    let product_ad = rm_schemas::ad_id::parse(
        &keys
            .mint("c", &product_creative("sku-1"), expires)
            .expect("mint"),
    )
    .expect("parse");
    let banner =
        rm_schemas::ad_id::parse(&keys.mint("c", "banner", expires).expect("mint")).expect("parse");
    let rules = ServeRules {
        ad_ttl_ms: 3_600_000,
        skew_ms: 60_000,
    };
    let served_ms = expires * 1000 - 3_600_000;
    let judge = |ad, t, p| stateless(Some(ad), t, p, rules);
    assert_eq!(judge(&product_ad, served_ms, Some("sku-1")), None);
    assert_eq!(judge(&product_ad, served_ms - 60_000, None), None, "skew");
    assert_eq!(
        judge(&product_ad, served_ms - 60_001, Some("sku-1")),
        Some(TrafficClass::BeforeServe)
    );
    assert_eq!(
        judge(&product_ad, served_ms - 5 * 86_400_000, None),
        Some(TrafficClass::BeforeServe),
        "five days before it was served"
    );
    assert_eq!(
        judge(&product_ad, served_ms, Some("sku-2")),
        Some(TrafficClass::NotInAd)
    );
    assert_eq!(judge(&banner, served_ms, Some("any")), None, "companions");
    assert_eq!(stateless(None, 0, Some("x"), rules), None, "not ours");
}

proptest! {
    /// Any sequence of events: at most one billable event per unit, exactly one when
    /// the unit had an event, the first of its unit to arrive; replaying the sequence
    /// (or any prefix then the whole) over the stored state decides every event the
    /// same, and the version never goes down.
    #[test]
    fn one_billable_event_per_unit_and_replays_decide_the_same(
        events in proptest::collection::vec((0u8..5, 0u8..3, 0u128..30), 1..60),
        crash_at in any::<usize>(),
    ) {
        let mut state = ServedAd::default();
        let mut first: std::collections::HashMap<Unit<'static>, u128> = Default::default();
        let mut decided = Vec::new();
        let mut version = 0;
        for (k, p, d) in &events {
            let u = unit(*k, *p);
            let billable = state.take(u, *d);
            let expected = *first.entry(u).or_insert(*d) == *d;
            prop_assert_eq!(billable, expected);
            decided.push(billable);
            prop_assert!(state.version() >= version);
            version = state.version();
        }
        // A crash after storing the state of a prefix, then the whole replayed.
        let at = crash_at % (events.len() + 1);
        let mut replay = ServedAd::default();
        for (k, p, d) in &events[..at] {
            replay.take(unit(*k, *p), *d);
        }
        for ((k, p, d), before) in events.iter().zip(&decided) {
            prop_assert_eq!(replay.take(unit(*k, *p), *d), *before);
        }
        prop_assert_eq!(replay, state);
    }
}

#[test]
fn a_claim_says_new_once_then_copy_or_repeat() {
    let mut ad = ServedAd::default();
    assert_eq!(ad.claim(Unit::AdClick, 1), Take::New);
    assert_eq!(ad.claim(Unit::AdClick, 1), Take::Copy);
    assert_eq!(ad.claim(Unit::AdClick, 2), Take::Repeat);
    assert_eq!(ad.claim(Unit::AdImpression, 2), Take::New);
}

/// The state exactly as the version before tallies declared it (field for field): the
/// bytes it wrote.
#[derive(Serialize)]
struct WrittenBefore {
    taken: Vec<Taken>,
    shoppers: Vec<u64>,
    more_shoppers: u32,
}

#[test]
fn a_state_of_the_version_before_reads_as_remembering_no_events() {
    let mut ad = ServedAd::default();
    assert!(ad.take(Unit::AdClick, 7));
    ad.see(1);
    ad.see(2);
    let before = WrittenBefore {
        taken: ad.taken.clone(),
        shoppers: ad.shoppers.clone(),
        more_shoppers: 0,
    };
    let bytes = postcard::to_allocvec(&before).expect("bytes");
    let read = ServedAd::from_bytes(&bytes, Encoding::V1).expect("reads");
    assert_eq!((read.units(), read.shoppers()), (1, 2));
    assert_eq!(read.counted(7), None, "no events remembered");
    assert_eq!(
        read.version(),
        (1 << 40) + 2,
        "the version that state had, so newer rows win"
    );
    assert!(ServedAd::from_bytes(&bytes, Encoding::V2).is_err());
    let again = ServedAd::from_bytes(&read.to_bytes(), Encoding::V2).expect("reads");
    assert_eq!(again, read);
}

#[test]
fn copies_move_an_event_only_when_they_are_better_and_versions_grow() {
    use crate::model::status::AdIdStatus;
    let j = |status, class, time_ms| Judged {
        status,
        class,
        time_ms,
    };
    let mut ad = ServedAd::default();
    let prefetch = j(AdIdStatus::Verified, TrafficClass::Prefetch, 50);
    assert_eq!(ad.judge(1, prefetch), Some((None, prefetch)), "new");
    let v = ad.version();
    assert_eq!(ad.judge(1, prefetch), None, "a copy");
    assert_eq!(ad.version(), v, "nothing changed");
    let genuine = j(AdIdStatus::Verified, TrafficClass::Valid, 80);
    let now = j(AdIdStatus::Verified, TrafficClass::Valid, 50);
    assert_eq!(
        ad.judge(1, genuine),
        Some((Some(prefetch), now)),
        "better, at the earlier time"
    );
    assert!(ad.version() > v);
    assert_eq!(ad.counted(1), Some(now));
    for k in 2..(MAX_SEEN as u128 + 10) {
        assert!(ad.judge(k, prefetch).is_some());
    }
    assert_eq!(ad.unremembered(), 9);
    assert!(
        ad.judge(MAX_SEEN as u128 + 5, prefetch).is_some(),
        "beyond the bound, every event is new"
    );
}
