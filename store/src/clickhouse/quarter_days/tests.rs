//! The cuts of a day array: every group's start and the range's ends are cuts, and
//! the slices cover each day once; a read's parts and the order it binds them.

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
    let (sums, tuples) = slices_sql(&[0, 2, 94]);
    assert_eq!(
        sums,
        "argMax(arrayCumSum(quarters)[2], generation) AS p0, \
         argMax(arrayCumSum(quarters)[94], generation) AS p1, \
         argMax(arrayCumSum(quarters)[96], generation) AS p2"
    );
    assert_eq!(
        tuples,
        "[(toInt32(0), p0), (toInt32(2), p1 - p0), (toInt32(94), p2 - p1)]"
    );
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
    let (quiet, binds) = read_sql(&q, "C", "P", "D", snap(true, false)).expect("a read");
    assert_eq!(named(&quiet), "CD");
    assert_eq!(bound(&binds), "CD");
    assert!(!quiet.contains("rollups_late") && quiet.contains("day <= 20"));
    let (flagged, binds) = read_sql(&q, "C", "P", "D", snap(true, true)).expect("a read");
    // C, D, P (the arrays' exclusion), C, P (the partitions).
    assert_eq!(named(&flagged), "CDPCP");
    assert_eq!(bound(&binds), "CDPCP");
    // Day 20 closed up to 14:00: its array is cut there, its slices from there on
    // left to the partitions, and a flag before then takes the place-day from them.
    let afternoon = |flagged| Snapshot {
        open_hour: 480 + 14,
        ..snap(true, flagged)
    };
    let open = 4 * (480 + 14);
    let (quiet, binds) = read_sql(&q, "C", "P", "D", afternoon(false)).expect("a read");
    assert_eq!(bound(&binds), "CD");
    assert!(
        quiet.contains(&format!("WHERE (C) AND bucket >= {open}")),
        "{quiet}"
    );
    assert!(
        quiet.contains(&format!("bucket <= {}", open - 1)),
        "{quiet}"
    );
    assert!(quiet.contains("(toInt32(56), p1 - p0)"), "{quiet}");
    let (flagged, binds) = read_sql(&q, "C", "P", "D", afternoon(true)).expect("a read");
    assert_eq!(named(&flagged), "CDPCP");
    assert_eq!(bound(&binds), "CDPCP");
    assert!(
        flagged.contains(&format!("AND bucket < {open})")),
        "{flagged}"
    );
    let each = query(Group::Each, 96 * 10, 96 * 21 - 1);
    assert!(read_sql(&each, "C", "P", "D", snap(true, false)).is_none());
    // By hour in Kolkata: 25 slices a day (measured faster than the quarters' rows
    // once the arrays' read was on its own: BENCHMARKS.md); a group narrower than an
    // hour reads quarters.
    let by_hour = query(Group::Every { width: 4, shift: 2 }, 96 * 10, 96 * 21 - 1);
    let (sql, _) = read_sql(&by_hour, "C", "P", "D", snap(true, false)).expect("by hour");
    assert_eq!(sql.matches("argMax(arrayCumSum").count(), 25);
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
