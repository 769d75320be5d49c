//! A mixed plan counts every quarter hour in the period it falls in, exactly as
//! summing every quarter does, with hours or without, in any zone (offsets of 30 and
//! 45 minutes, changes of offset, the date line), granularity and range; and it
//! reads far fewer buckets.

use std::collections::BTreeMap;

use chrono::NaiveDateTime;
use proptest::prelude::*;

use super::super::{zone, Granularity, Periods};
use super::Mixed;
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

/// The first and last quarter of the report's range.
fn quarters_of(p: &Periods) -> (i32, i32) {
    let (start, end) = p.span_ms();
    (Grain::Quarter.bucket(start), Grain::Quarter.bucket(end - 1))
}

/// Counts per period, by summing every quarter of the range (the reference) and by
/// the mixed plan's reads (with `hours` or not), netted; and the buckets the plan
/// reads. A day's and an hour's tallies are the sums of their quarters'.
fn both_ways(
    p: &Periods,
    hours: bool,
    count: impl Fn(i32) -> i64,
) -> (
    BTreeMap<NaiveDateTime, i64>,
    BTreeMap<NaiveDateTime, i64>,
    usize,
) {
    let (a, b) = quarters_of(p);
    let mut reference = BTreeMap::new();
    for q in a..=b {
        if let Some(period) = p.period_of_bucket(Grain::Quarter, q) {
            *reference.entry(period).or_insert(0) += count(q);
        }
    }
    reference.retain(|_, v| *v != 0);
    let Some(mixed) = p.mixed(hours) else {
        return (
            reference.clone(),
            reference,
            usize::try_from(b - a + 1).unwrap_or(0),
        );
    };
    let sum_of = |grain: Grain, bucket: i32| {
        let q0 = Grain::Quarter.bucket(grain.start_ms(bucket));
        let n = Grain::Quarter.per_day() / grain.per_day();
        tally(grain, bucket, (q0..q0 + n).map(&count).sum())
    };
    let days: Vec<SummedTally> = mixed.days.keys().map(|d| sum_of(Grain::Day, *d)).collect();
    let hour_tallies: Vec<SummedTally> = mixed
        .hour_ranges()
        .iter()
        .flat_map(|(x, y)| *x..=*y)
        .map(|h| sum_of(Grain::Hour, h))
        .collect();
    assert_eq!(
        hour_tallies.len(),
        mixed.hours.len(),
        "the ranges are the hours"
    );
    let quarters: Vec<SummedTally> = mixed
        .quarters
        .iter()
        .flat_map(|(x, y)| *x..=*y)
        .map(|q| tally(Grain::Quarter, q, count(q)))
        .collect();
    let mut netted = BTreeMap::new();
    for s in p.net(&mixed, &days, &hour_tallies, &quarters) {
        let period = p
            .period_of_bucket(s.place.grain, s.place.bucket)
            .expect("placed in its period");
        *netted.entry(period).or_insert(0) += s.value;
    }
    (reference, netted, mixed.buckets())
}

const ZONES: [&str; 10] = [
    "UTC",
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

const GRANULARITIES: [Granularity; 5] = [
    Granularity::Hour,
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
        let (a, b) = quarters_of(&p);
        let every = usize::try_from(b - a + 1).unwrap_or(0);
        let (reference, netted, without) = both_ways(&p, false, count);
        prop_assert_eq!(&reference, &netted);
        let (reference, netted, with) = both_ways(&p, true, count);
        prop_assert_eq!(&reference, &netted);
        prop_assert!(with <= without && without <= every, "{} {} {}", with, without, every);
    }
}

/// The buckets a plan reads: days, hours and quarters.
fn reads(m: &Mixed) -> (usize, usize, usize) {
    let q = m.buckets() - m.days.len() - m.hours.len();
    (m.days.len(), m.hours.len(), q)
}

/// Asia/Kolkata by day over 30 days (31 UTC days, 18:30 to 18:30): without hours a
/// day and 22 quarters a UTC day (the 5:30 after local midnight) instead of 96
/// quarters, the first UTC day's 22 quarters alone; with hours a day, 5 hours and 2
/// quarters, the first UTC day's 5 hours and 2 quarters alone, the last one's 5
/// hours out of the range taken out. A summary reads the days and the two ends.
#[test]
fn a_month_in_kolkata_by_day_reads_days_hours_and_few_quarters() {
    let kolkata = zone("Asia/Kolkata").expect("a zone");
    let p = Periods::new(kolkata, Granularity::Day, 20_760, 20_789);
    let (a, b) = quarters_of(&p);
    assert_eq!(b - a + 1, 30 * 96);
    let without = p.mixed(false).expect("a mixed plan");
    assert!(without.hours.is_empty());
    assert_eq!(reads(&without), (30, 0, 22 + 30 * 22));
    let with = p.mixed(true).expect("a mixed plan");
    assert_eq!(reads(&with), (30, 31 * 5, 31 * 2));
    assert_eq!(with.buckets(), 247);
    let out = with.hours.values().filter(|h| h.is_none()).count();
    assert_eq!(out, 5, "the last UTC day's hours after the range");
    let summary = Periods::new(kolkata, Granularity::Summary, 20_760, 20_789);
    let without = summary.mixed(false).expect("a mixed plan");
    assert_eq!(reads(&without), (30, 0, 22 + 22));
    let with = summary.mixed(true).expect("a mixed plan");
    assert_eq!(reads(&with), (30, 5 + 5, 2 + 2));
}

/// By hour, Europe/Paris (whole hours) reads one UTC hour per local hour; Kolkata
/// (+5:30) every quarter (a plan would save only a quarter of them); without hours
/// both read quarters.
#[test]
fn by_hour_a_zone_of_whole_hours_reads_hours() {
    let paris = zone("Europe/Paris").expect("a zone");
    let p = Periods::new(paris, Granularity::Hour, 20_760, 20_789);
    assert!(
        p.mixed(false).is_none(),
        "hours read quarters without hours"
    );
    let with = p.mixed(true).expect("a mixed plan");
    assert_eq!(reads(&with), (0, 30 * 24, 0));
    assert!(with.hours.values().all(Option::is_some));
    assert_eq!(with.hour_ranges().len(), 1, "one range of hours");
    let kolkata = zone("Asia/Kolkata").expect("a zone");
    let p = Periods::new(kolkata, Granularity::Hour, 20_760, 20_789);
    assert!(p.mixed(false).is_none());
    // 720 local hours at an hour and 2 quarters each would be 2,160 buckets (less
    // one a day for the whole UTC days: 2,132) of 2,880: not worth netting.
    assert!(p.mixed(true).is_none(), "every quarter read");
}

/// UTC reads days by day (with hours or not); by hour it reads hours when it can.
#[test]
fn utc_reads_days_or_hours() {
    for hours in [false, true] {
        assert!(Periods::utc_days(20_760, 20_789).mixed(hours).is_none());
    }
    let p = Periods::new(chrono_tz::Tz::UTC, Granularity::Hour, 20_760, 20_789);
    assert!(p.mixed(false).is_none());
    let with = p.mixed(true).expect("a mixed plan");
    assert_eq!(reads(&with), (0, 30 * 24, 0));
}
