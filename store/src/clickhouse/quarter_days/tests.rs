//! The cuts of a day array: every group's start and the range's ends are cuts, and
//! the slices cover each day once; a read's parts and the order it binds them.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;

fn query(group: Group, from: i32, to: i32) -> TallyQuery {
    TallyQuery {
        grain: Grain::Quarter,
        from,
        to,
        group,
        ..TallyQuery::spend(None)
    }
}

/// The group of `bucket` (an oracle apart from `Group::of`).
fn group_of(g: Group, bucket: i32) -> i64 {
    match g {
        Group::Each => i64::from(bucket),
        Group::Whole => 0,
        Group::Every { width, shift } => {
            (i64::from(bucket) + i64::from(shift)).div_euclid(i64::from(width))
        }
    }
}

fn any_group() -> impl Strategy<Value = Group> {
    prop_oneof![
        Just(Group::Whole),
        (
            prop::sample::select(vec![1, 2, 4, 8, 12, 96, 672, 7, 5]),
            0..672i32
        )
            .prop_map(|(width, shift)| Group::Every {
                width,
                shift: shift % width
            }),
    ]
}

proptest! {
    /// Within any day of the range, two quarters between the same cuts are in the
    /// range together or not, and in one group: a slice's sum lands whole in its
    /// group.
    #[test]
    fn a_slice_lies_in_one_group_and_wholly_in_or_out_of_the_range(
        group in any_group(),
        from in 0..20_000i32,
        len in 0..3_000i32,
        day_pick in 0..40i32,
    ) {
        let to = from + len;
        let q = query(group, from, to);
        let cuts = cuts(&q).expect("cuts");
        prop_assert_eq!(cuts[0], 0);
        prop_assert!(cuts.windows(2).all(|w| w[0] < w[1]));
        prop_assert!(cuts.iter().all(|c| (0..PER_DAY).contains(c)));
        let day = from.div_euclid(PER_DAY) + day_pick % (len / PER_DAY + 2);
        for (i, c) in cuts.iter().enumerate() {
            let end = cuts.get(i + 1).copied().unwrap_or(PER_DAY);
            let first = day * PER_DAY + c;
            let inside = (from..=to).contains(&first);
            for b in first..day * PER_DAY + end {
                prop_assert_eq!((from..=to).contains(&b), inside, "bucket {}", b);
                prop_assert_eq!(group_of(group, b), group_of(group, first), "bucket {}", b);
            }
        }
    }
}

#[test]
fn quarters_apart_are_not_sliced() {
    assert_eq!(cuts(&query(Group::Each, 0, 95)), None);
}

#[test]
fn kolkata_by_hour_cuts_at_each_half_hour_past() {
    // Asia/Kolkata (+5:30, 22 quarters): a local hour starts at 2, 6, .. 94.
    let q = query(
        Group::Every {
            width: 4,
            shift: 22 % 4,
        },
        96 * 10 + 74,
        96 * 17 + 73,
    );
    let want: Vec<i32> = std::iter::once(0)
        .chain((0..24).map(|k| 2 + 4 * k))
        .collect();
    assert_eq!(cuts(&q), Some(want));
    // A summary cuts at its ends only.
    let q = query(Group::Whole, 96 * 10 + 74, 96 * 40 + 73);
    assert_eq!(cuts(&q), Some(vec![0, 74]));
}

#[test]
fn slices_are_differences_of_running_sums_where_they_end() {
    // A few cuts: an aggregate a slice.
    let (sums, diffs) = slices_sql(&[0, 2, 94]);
    assert_eq!(
        sums,
        "argMax(arrayCumSum(quarters)[2], generation) AS p0, \
         argMax(arrayCumSum(quarters)[94], generation) AS p1, \
         argMax(arrayCumSum(quarters)[96], generation) AS p2"
    );
    assert_eq!(diffs, "[p0, p1 - p0, p2 - p1]");
    // Many (by hour): the newest array's running sums once.
    let cuts: Vec<i32> = (0..24).map(|h| 4 * h).collect();
    let (sums, diffs) = slices_sql(&cuts);
    assert_eq!(sums, "arrayCumSum(argMax(quarters, generation)) AS c");
    assert!(
        diffs.starts_with("[c[4], c[8] - c[4], c[12] - c[8], "),
        "{diffs}"
    );
    assert!(diffs.ends_with(", c[96] - c[92]]"), "{diffs}");
    assert_eq!(diffs.matches("c[").count(), 1 + 2 * 23);
}

/// A place-day's array as [`read_sql`]'s slices query returns it: the sums of its
/// quarters between `cuts`.
fn sliced(campaign: &str, metric: u16, day: i32, quarters: &[i64], cuts: &[i32]) -> DaySlicesCh {
    let ends = cuts.iter().skip(1).copied().chain(std::iter::once(PER_DAY));
    let slices = cuts
        .iter()
        .zip(ends)
        .map(|(a, b)| {
            quarters[usize::try_from(*a).expect("cut")..usize::try_from(b).expect("cut")]
                .iter()
                .sum()
        })
        .collect();
    DaySlicesCh {
        campaign_id: campaign.into(),
        scope: 0,
        creative: Text::default(),
        catalog_id: Text::default(),
        product_code: Text::default(),
        metric,
        day,
        slices,
    }
}

proptest! {
    /// The slices taken apart and summed by group hold what the days' quarters of
    /// the range hold, group by group, each under a bucket of its group in the
    /// range: what summing the quarters on the server gives.
    #[test]
    fn slices_taken_apart_sum_as_the_quarters_by_group(
        group in any_group(),
        from_day in 10..14i32,
        from_at in 0..96i32,
        len in 0..500i32,
        days in proptest::collection::vec(
            (0u8..2, 0u16..2, proptest::collection::vec(0i64..3, 96)),
            1..6,
        ),
    ) {
        let (from, to) = (from_day * PER_DAY + from_at, from_day * PER_DAY + from_at + len);
        let q = query(group, from, to);
        let cuts = cuts(&q).expect("cuts");
        let slicing = Slicing { cuts: cuts.clone(), from, to, group };
        // Each generated place-day once (a place, metric and day), on days 10..16.
        let mut seen = std::collections::BTreeSet::new();
        let mut rows = Vec::new();
        let mut want: BTreeMap<(String, u16, i64), i64> = BTreeMap::new();
        for (i, (campaign, metric, quarters)) in days.iter().enumerate() {
            let day = 10 + i32::try_from(i).expect("few");
            let campaign = ["a", "b"][usize::from(*campaign)];
            if !seen.insert((campaign, *metric, day)) {
                continue;
            }
            rows.push(sliced(campaign, *metric, day, quarters, &cuts));
            for (at, v) in quarters.iter().enumerate() {
                let b = day * PER_DAY + i32::try_from(at).expect("96");
                if (from..=to).contains(&b) {
                    *want.entry((campaign.to_owned(), *metric, group_of(group, b))).or_default() += v;
                }
            }
        }
        want.retain(|_, v| *v != 0);
        let mut got: BTreeMap<(String, u16, i64), i64> = BTreeMap::new();
        for t in slicing.tallies(&rows).expect("tallies") {
            let b = t.place.bucket;
            prop_assert!((from..=to).contains(&b), "bucket {}", b);
            prop_assert_eq!(t.place.grain, Grain::Quarter);
            let key = (t.place.campaign_id.to_string(), t.metric.code(), group_of(group, b));
            prop_assert!(got.insert(key, t.value).is_none(), "one row a group");
        }
        prop_assert_eq!(got, want);
    }
}

#[test]
fn a_slices_row_of_another_cut_is_refused() {
    let slicing = Slicing {
        cuts: vec![0, 2],
        from: 0,
        to: 96 * 20,
        group: Group::Whole,
    };
    let mut row = sliced("a", 0, 10, &[1; 96], &[0, 2]);
    row.slices.push(4);
    assert!(slicing.tallies(&[row]).is_err());
}

/// The conditions `sql` names, in text order, as `C`, `P` and `D`.
fn named(sql: &str) -> String {
    ["(C)", "(D)", "(P)"]
        .iter()
        .flat_map(|m| sql.match_indices(m))
        .collect::<std::collections::BTreeMap<_, _>>()
        .values()
        .map(|m| &m[1..2])
        .collect()
}

/// The conditions each query of `read` names (its quarters', its slices'), each
/// checked equal to the binds returned beside it.
fn conditions(read: &DaysRead) -> [String; 2] {
    [&read.quarters, &read.slices].map(|(sql, binds)| {
        assert_eq!(named(sql), bound(binds), "{sql}");
        named(sql)
    })
}

/// The binds a read returns, as `C`, `P` and `D`.
fn bound(binds: &[Bind]) -> String {
    binds
        .iter()
        .map(|b| match b {
            Bind::Cond => 'C',
            Bind::Places => 'P',
            Bind::Days => 'D',
        })
        .collect()
}

#[test]
fn a_read_applies_to_whole_ranges_of_quarters_of_a_converted_store() {
    // Day 20 open from its first hour: no closed quarter of it.
    let snap = |days, flagged| Snapshot {
        open_hour: 480,
        dirty_from: 77,
        flagged,
        days,
    };
    let q = query(Group::Whole, 96 * 10, 96 * 21 - 1);
    assert!(read_sql(&q, "C", "P", "D", snap(false, false)).is_none());
    let quiet = read_sql(&q, "C", "P", "D", snap(true, false)).expect("a read");
    assert_eq!(conditions(&quiet), ["C", "D"]);
    let (quarters, slices) = (&quiet.quarters.0, &quiet.slices.0);
    assert!(!quarters.contains("rollups_late") && !slices.contains("rollups_late"));
    assert!(slices.contains("day <= 20"), "{slices}");
    // A summary: the quarters summed on the server, a row per place and metric.
    assert!(quarters.starts_with("SELECT 0 AS part, campaign_id, scope, grain, first AS bucket"));
    assert_eq!(quarters.matches("first AS bucket").count(), 1, "{quarters}");
    let flagged = read_sql(&q, "C", "P", "D", snap(true, true)).expect("a read");
    // C (the open quarters), C, P (the flagged place-days' quarters); D, P (the
    // arrays but the flagged place-days').
    assert_eq!(conditions(&flagged), ["CCP", "DP"]);
    let slices = &flagged.slices.0;
    assert!(slices.contains("NOT IN (SELECT"), "{slices}");
    // Day 20 closed up to 14:00: its array is cut there, its slices from there on
    // left to the partitions, and a flag before then takes the place-day from them.
    let afternoon = |flagged| Snapshot {
        open_hour: 480 + 14,
        ..snap(true, flagged)
    };
    let open = 4 * (480 + 14);
    let read = read_sql(&q, "C", "P", "D", afternoon(false)).expect("a read");
    assert!(
        read.quarters
            .0
            .contains(&format!("WHERE (C) AND bucket >= {open}")),
        "{:?}",
        read.quarters
    );
    assert_eq!(read.slicing.to, open - 1);
    assert_eq!(read.slicing.cuts, vec![0, 56]);
    assert!(
        read.slices.0.contains("[p0, p1 - p0] AS slices"),
        "{:?}",
        read.slices
    );
    let read = read_sql(&q, "C", "P", "D", afternoon(true)).expect("a read");
    assert!(
        read.quarters.0.contains(&format!("AND bucket < {open})")),
        "{:?}",
        read.quarters
    );
    let each = query(Group::Each, 96 * 10, 96 * 21 - 1);
    assert!(read_sql(&each, "C", "P", "D", snap(true, false)).is_none());
    // By hour in Kolkata: 25 slices a day (measured faster than the quarters' rows
    // once the arrays' read was on its own: BENCHMARKS.md); a group narrower than an
    // hour reads quarters.
    let by_hour = query(Group::Every { width: 4, shift: 2 }, 96 * 10, 96 * 21 - 1);
    let read = read_sql(&by_hour, "C", "P", "D", snap(true, false)).expect("by hour");
    // (their sums from the newest array's running sums, read once).
    assert_eq!(
        read.slices.0.matches("argMax(").count(),
        1,
        "{:?}",
        read.slices
    );
    assert_eq!(read.slices.0.matches("c[").count(), 1 + 2 * 24);
    assert_eq!(read.slicing.cuts.len(), 25);
    assert_eq!(read.quarters.0.matches("intDiv(bucket + 2, 4)").count(), 1);
    let half_hours = query(Group::Every { width: 2, shift: 0 }, 96 * 10, 96 * 21 - 1);
    assert!(read_sql(&half_hours, "C", "P", "D", snap(true, false)).is_none());
    let by_day = query(
        Group::Every {
            width: 96,
            shift: 22,
        },
        96 * 10,
        96 * 21 - 1,
    );
    assert!(read_sql(&by_day, "C", "P", "D", snap(true, false)).is_some());
    let hours = TallyQuery {
        grain: Grain::Hour,
        ..q.clone()
    };
    assert!(read_sql(&hours, "C", "P", "D", snap(true, false)).is_none());
}
