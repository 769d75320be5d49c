//! Unit and property tests of the video funnel and control debounce rules.

use proptest::prelude::*;

use super::*;
use InteractionType as T;

/// Walks `events` (id = place in the slice) in the order given.
fn walk(events: &[(T, i64)], debounce: Debounce) -> (Vec<Step<usize>>, FunnelCounts) {
    let mut w = ViewWalk::new(debounce);
    let steps = events
        .iter()
        .enumerate()
        .map(|(i, (k, t))| w.push(i, *k, *t))
        .collect();
    (steps, w.counts())
}

fn order(step: &Step<usize>) -> Option<Order<usize>> {
    match step {
        Step::Milestone { order, .. } => Some(*order),
        _ => None,
    }
}

fn set(indices: &[usize]) -> MilestoneSet {
    indices
        .iter()
        .fold(MilestoneSet::default(), |s, i| s.with(*i))
}

#[test]
fn a_full_watch_is_in_order_and_reaches_every_milestone() {
    let watch: Vec<(T, i64)> = MILESTONES
        .iter()
        .enumerate()
        .map(|(i, m)| (*m, i as i64 * 2_500))
        .collect();
    let (steps, counts) = walk(&watch, Debounce::DEFAULT);
    assert!(steps.iter().all(|s| order(s) == Some(Order::InOrder)));
    assert_eq!(counts.reached.flags(), [1; 6]);
    assert_eq!((counts.funnel_gaps, counts.repeated_milestones), (0, 0));
}

#[test]
fn a_loop_repeats_the_complete_and_counts_it_once() {
    let mut events: Vec<(T, i64)> = MILESTONES.iter().map(|m| (*m, 0)).collect();
    events.push((T::VideoComplete, 900));
    let (steps, counts) = walk(&events, Debounce::DEFAULT);
    assert_eq!(order(&steps[6]), Some(Order::Repeat { first: 5 }));
    assert_eq!(counts.reached.flags(), [1; 6]);
    assert_eq!(counts.repeated_milestones, 1);
}

#[test]
fn a_seek_skips_milestones_and_leaves_a_gap() {
    let (steps, counts) = walk(
        &[
            (T::VideoCreativeView, 0),
            (T::VideoPlay, 1),
            (T::VideoMidpoint, 2),
        ],
        Debounce::DEFAULT,
    );
    assert_eq!(
        order(&steps[2]),
        Some(Order::Skipped { missing: set(&[2]) })
    );
    assert_eq!(counts.reached.flags(), [1, 1, 0, 1, 0, 0]);
    assert_eq!(counts.funnel_gaps, 1);
}

#[test]
fn a_milestone_after_a_later_one_is_out_of_order() {
    let (steps, counts) = walk(
        &[
            (T::VideoPlay, 0),
            (T::VideoMidpoint, 1),
            (T::VideoThirdQuartile, 2),
            (T::VideoFirstQuartile, 3),
        ],
        Debounce::DEFAULT,
    );
    assert_eq!(order(&steps[3]), Some(Order::AfterLater { later: 1 }));
    // The set has every milestone from play to the third quartile: the only gap is
    // the play without a creativeView.
    assert_eq!(counts.funnel_gaps, 1);
}

#[test]
fn a_complete_on_load_has_no_play_before_it() {
    let (steps, counts) = walk(&[(T::VideoComplete, 0)], Debounce::DEFAULT);
    assert_eq!(order(&steps[0]), Some(Order::CompleteWithoutPlay));
    let (steps, _) = walk(
        &[(T::VideoPlay, 0), (T::VideoComplete, 1)],
        Debounce::DEFAULT,
    );
    assert_eq!(
        order(&steps[1]),
        Some(Order::Skipped {
            missing: set(&[2, 3, 4])
        })
    );
    assert_eq!(counts.funnel_gaps, 1);
}

#[test]
fn a_play_without_creative_view_is_in_order_but_a_gap_of_the_set() {
    let (steps, counts) = walk(
        &[(T::VideoPlay, 0), (T::VideoFirstQuartile, 1)],
        Debounce::DEFAULT,
    );
    assert!(steps.iter().all(|s| order(s) == Some(Order::InOrder)));
    assert_eq!(counts.funnel_gaps, 1);
}

#[test]
fn repeats_of_one_control_merge_and_close_controls_are_toggles() {
    let (steps, counts) = walk(
        &[
            (T::VideoMute, 0),
            (T::VideoPause, 0),
            (T::VideoUnmute, 100),
            (T::VideoPause, 200),
            (T::VideoPause, 400),
            (T::VideoPause, 5_000),
        ],
        Debounce::DEFAULT,
    );
    assert_eq!(counts.controls, [0, 2, 0, 1, 1]);
    assert_eq!(counts.reached, MilestoneSet::default());
    let judged: Vec<(bool, Option<Toggle<usize>>)> = steps
        .iter()
        .map(|s| match s {
            Step::Control { merged, toggle, .. } => (*merged, *toggle),
            _ => panic!("{s:?}"),
        })
        .collect();
    let toggle = |previous, gap_ms| Some(Toggle { previous, gap_ms });
    assert_eq!(
        judged,
        vec![
            (false, None),
            (false, toggle(0, 0)),
            (false, toggle(1, 100)),
            (true, toggle(2, 100)),
            (true, toggle(3, 200)),
            (false, None),
        ]
    );
}

#[test]
fn the_debounce_is_a_strict_bound_and_never_negative() {
    let d = Debounce::from_ms(300);
    assert!(d.is_rapid(0, 299));
    assert!(!d.is_rapid(0, 300));
    assert_eq!(Debounce::from_ms(-5), Debounce::from_ms(0));
    assert!(!Debounce::from_ms(0).is_rapid(7, 7));
    assert_eq!(Debounce::default().ms(), DEFAULT_DEBOUNCE_MS);
    assert!(!d.is_rapid(i64::MIN, i64::MAX));
}

#[test]
fn milestone_sets_hold_indices_in_funnel_order() {
    let s = set(&[4, 1, 9]);
    assert_eq!((s.len(), s.is_empty()), (2, false));
    assert_eq!(
        s.iter().collect::<Vec<_>>(),
        vec![T::VideoPlay, T::VideoThirdQuartile]
    );
    assert_eq!(s.flags(), [0, 1, 0, 0, 1, 0]);
    assert!(!s.contains(9));
    for (i, m) in MILESTONES.iter().enumerate() {
        assert_eq!(milestone_index(*m), Some(i));
        assert_eq!(control_index(*m), None);
    }
    for (i, c) in CONTROLS.iter().enumerate() {
        assert_eq!(control_index(*c), Some(i));
        assert!(c.is_video_control());
    }
}

/// Video events and a few others, at times with many ties.
fn arb_events() -> impl Strategy<Value = Vec<(T, i64)>> {
    proptest::collection::vec((0usize..13, 0i64..6_000), 0..40).prop_map(|v| {
        v.into_iter()
            .map(|(k, t)| (InteractionType::ALL[k], t))
            .collect()
    })
}

fn in_time_order(mut events: Vec<(T, i64)>) -> Vec<(T, i64)> {
    events.sort_by_key(|(_, t)| *t);
    events
}

fn shuffled<X>(mut v: Vec<X>, seed: u64) -> Vec<X> {
    let mut x = seed | 1;
    for i in (1..v.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.swap(i, (x % (i as u64 + 1)) as usize);
    }
    v
}

proptest! {
    /// The counts are a function of the view's events: arrival order and the order of
    /// events with the same time change nothing.
    #[test]
    fn counts_do_not_depend_on_arrival_or_ties(
        events in arb_events(), seed in any::<u64>(), d in 0i64..3_000
    ) {
        let d = Debounce::from_ms(d);
        let a = walk(&in_time_order(events.clone()), d).1;
        let b = walk(&in_time_order(shuffled(events, seed)), d).1;
        prop_assert_eq!(a, b);
    }

    /// A longer debounce merges and flags at least what a shorter one does, and a
    /// zero debounce merges nothing.
    #[test]
    fn the_debounce_is_monotone(events in arb_events(), d1 in 0i64..3_000, extra in 0i64..3_000) {
        let events = in_time_order(events);
        let (short, short_counts) = walk(&events, Debounce::from_ms(d1));
        let (long, long_counts) = walk(&events, Debounce::from_ms(d1 + extra));
        for (s, l) in short.iter().zip(&long) {
            if let (
                Step::Control { merged: ms, toggle: ts, .. },
                Step::Control { merged: ml, toggle: tl, .. },
            ) = (s, l) {
                prop_assert!(!ms || *ml);
                prop_assert!(ts.is_none() || tl.is_some());
            } else {
                prop_assert_eq!(s, l);
            }
        }
        for (s, l) in short_counts.controls.iter().zip(long_counts.controls) {
            prop_assert!(l <= *s);
        }
        let (zero, zero_counts) = walk(&events, Debounce::from_ms(0));
        for (c, control) in CONTROLS.iter().enumerate() {
            let sent = events.iter().filter(|(k, _)| k == control).count() as u32;
            prop_assert_eq!(zero_counts.controls[c], sent);
            prop_assert_eq!(u32::from(sent > 0), u32::from(short_counts.controls[c] > 0));
        }
        let judged_as_rapid =
            |s: &Step<usize>| matches!(s, Step::Control { merged: true, .. } | Step::Control { toggle: Some(_), .. });
        prop_assert!(!zero.iter().any(judged_as_rapid));
    }

    /// Whatever the report merges, the inspector flags: a merged control is always a
    /// rapid toggle.
    #[test]
    fn a_merged_control_is_a_toggle(events in arb_events(), d in 0i64..3_000) {
        let (steps, _) = walk(&in_time_order(events), Debounce::from_ms(d));
        for s in steps {
            if let Step::Control { merged: true, toggle, .. } = s {
                prop_assert!(toggle.is_some_and(|t| t.gap_ms < d));
            }
        }
    }

    /// Each milestone counts once: its first occurrence is judged for order, every
    /// later one is a repeat of it.
    #[test]
    fn milestones_count_once(events in arb_events()) {
        let events = in_time_order(events);
        let (steps, counts) = walk(&events, Debounce::DEFAULT);
        let mut firsts = [None; 6];
        for (i, s) in steps.iter().enumerate() {
            if let Step::Milestone { index, order } = s {
                match (firsts[*index], order) {
                    (Some(f), Order::Repeat { first }) => prop_assert_eq!(f, *first),
                    (None, Order::Repeat { .. }) | (Some(_), _) => {
                        prop_assert!(false, "event {} judged {:?}", i, order);
                    }
                    (None, _) => firsts[*index] = Some(i),
                }
            }
        }
        let sent = events.iter().filter(|(k, _)| milestone_index(*k).is_some()).count();
        prop_assert_eq!(counts.reached.len() + counts.repeated_milestones as usize, sent);
        prop_assert!(counts.funnel_gaps as usize <= counts.reached.len());
    }

    /// Milestones sent in funnel order from the first, once each, are all in order and
    /// leave no gap, whatever controls come between them.
    #[test]
    fn a_watch_in_funnel_order_is_clean(
        reached in 1usize..7, controls in proptest::collection::vec((0usize..5, 0i64..30_000), 0..10)
    ) {
        let mut events: Vec<(T, i64)> =
            (0..reached).map(|i| (MILESTONES[i], i as i64 * 2_500)).collect();
        events.extend(controls.into_iter().map(|(c, t)| (CONTROLS[c], t)));
        let (steps, counts) = walk(&in_time_order(events), Debounce::DEFAULT);
        for s in &steps {
            prop_assert!(order(s).is_none_or(|o| o == Order::InOrder), "{:?}", s);
        }
        prop_assert_eq!(counts.reached.len(), reached);
        prop_assert_eq!((counts.funnel_gaps, counts.repeated_milestones), (0, 0));
    }
}
