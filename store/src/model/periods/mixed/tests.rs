//! A mixed plan counts every quarter hour in the period it falls in, exactly as
//! summing every quarter does, in any zone (offsets of 30 and 45 minutes, changes of
//! offset, the date line), granularity and range; and it reads far fewer buckets.

use std::collections::BTreeMap;

use chrono::NaiveDateTime;
use proptest::prelude::*;

use super::super::{zone, Granularity, Periods};
use crate::model::tallies::{Grain, Kind, Metric, Place, Scope, SummedTally};

fn tally(grain: Grain, bucket: i32, value: i64) -> SummedTally {
    SummedTally {
        place: Place {
            campaign_id: "c".into(),
            scope: Scope::Product,
            grain,
            bucket,
            creative: "p:x".into(),
            catalog_id: "cat".into(),
            product_code: "x".into(),
            partition: 0,
        },
        metric: Metric::Events(Kind::ProductImpression, None),
        value,
    }
}

/// Counts per period, by summing every quarter of the range (the reference) and by
/// the mixed plan's reads, netted; and the buckets the plan reads.
fn both_ways(
    p: &Periods,
    count: impl Fn(i32) -> i64,
) -> (
    BTreeMap<NaiveDateTime, i64>,
    BTreeMap<NaiveDateTime, i64>,
    usize,
) {
    let (_, a, b) = p.plan();
    let mut reference = BTreeMap::new();
    for q in a..=b {
        if let Some(period) = p.period_of_bucket(Grain::Quarter, q) {
            *reference.entry(period).or_insert(0) += count(q);
        }
    }
    reference.retain(|_, v| *v != 0);
    let Some(mixed) = p.mixed() else {
        return (
            reference.clone(),
            reference,
            usize::try_from(b - a + 1).unwrap_or(0),
        );
    };
    let days: Vec<SummedTally> = mixed
        .days
        .keys()
        .map(|d| {
            let q0 = Grain::Quarter.bucket(Grain::Day.start_ms(*d));
            tally(Grain::Day, *d, (q0..q0 + 96).map(&count).sum())
        })
        .collect();
    let quarters: Vec<SummedTally> = mixed
        .quarters
        .iter()
        .flat_map(|(x, y)| *x..=*y)
        .map(|q| tally(Grain::Quarter, q, count(q)))
        .collect();
    let mut netted = BTreeMap::new();
    for s in p.net(&mixed, &days, &quarters) {
        let period = p
            .period_of_bucket(s.place.grain, s.place.bucket)
            .expect("placed in its period");
        *netted.entry(period).or_insert(0) += s.value;
    }
    (reference, netted, mixed.buckets())
}

const ZONES: [&str; 9] = [
    "Asia/Kolkata",
    "America/New_York",
    "Europe/Paris",
    "Asia/Kathmandu",
    "Pacific/Chatham",
    "Australia/Lord_Howe",
    "Pacific/Kiritimati",
    "Pacific/Pago_Pago",
    "America/St_Johns",
];

const GRANULARITIES: [Granularity; 4] = [
    Granularity::Day,
    Granularity::Week,
    Granularity::Month,
    Granularity::Summary,
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Every quarter's count lands in its own period, whatever the plan read.
    #[test]
    fn a_mixed_plan_counts_as_the_quarters_do(
        z in 0..ZONES.len(),
        g in 0..GRANULARITIES.len(),
        from in 20_400i32..20_800,
        len in 0i32..45,
        seed in any::<u64>(),
    ) {
        let p = Periods::new(zone(ZONES[z]).expect("a zone"), GRANULARITIES[g], from, from + len);
        let count = |q: i32| -> i64 {
            let x = (q as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ seed;
            i64::try_from(x % 7).unwrap_or(0)
        };
        let (reference, netted, _) = both_ways(&p, count);
        prop_assert_eq!(reference, netted);
    }
}

/// Asia/Kolkata by day over 30 days: a day and 22 quarters a day (the 5:30 hours
/// of each UTC day after local midnight), at most the two ends' quarters more,
/// instead of 96 quarters a day; a summary reads the days and the two ends.
#[test]
fn a_month_in_kolkata_reads_a_quarter_of_the_buckets() {
    let kolkata = zone("Asia/Kolkata").expect("a zone");
    let p = Periods::new(kolkata, Granularity::Day, 20_760, 20_789);
    let (_, a, b) = p.plan();
    let quarters = usize::try_from(b - a + 1).expect("a range");
    assert_eq!(quarters, 30 * 96);
    let mixed = p.mixed().expect("a mixed plan");
    assert!(mixed.buckets() <= 31 * 23, "{}", mixed.buckets());
    let summary = Periods::new(kolkata, Granularity::Summary, 20_760, 20_789)
        .mixed()
        .expect("a mixed plan");
    assert!(summary.buckets() <= 31 + 96, "{}", summary.buckets());
    assert!(
        Periods::utc_days(20_760, 20_789).mixed().is_none(),
        "UTC reads days"
    );
    let hours = Periods::new(kolkata, Granularity::Hour, 20_760, 20_789);
    assert!(hours.mixed().is_none(), "hours read quarters");
}
