//! Unit and property tests of the inspector's rule checks.

use proptest::prelude::*;

use super::*;
use crate::video_funnel::{Debounce, ViewWalk};

const T0: i64 = 1_795_000_000_000;

fn ts(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .expect("time")
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

struct Session {
    events: Vec<Observed>,
}

impl Session {
    fn new() -> Self {
        Self { events: Vec::new() }
    }

    fn push(&mut self, at: i64, params: &[(&'static str, &str)], outcome: Outcome) {
        let mut p: Vec<(&'static str, String)> =
            params.iter().map(|(k, v)| (*k, (*v).to_owned())).collect();
        p.push(("timestamp", ts(T0 + at)));
        p.push(("sessionId", "s-1".to_owned()));
        self.events.push(Observed {
            seq: self.events.len() as u64 + 1,
            received_at_ms: T0 + at + 5,
            endpoint: Endpoint::Interaction,
            params: p,
            outcome,
        });
    }

    fn video(&mut self, at: i64, kind: &str, video: &str) {
        self.push(
            at,
            &[
                ("adId", "ad-1"),
                ("interactionType", kind),
                ("videoId", video),
            ],
            Outcome::Accepted,
        );
    }

    fn cart(&mut self, at: i64, units: &str) {
        let outcome = if units.starts_with('-') {
            Outcome::Rejected {
                reason: RejectReason::InvalidUnits,
                field: "units".into(),
            }
        } else {
            Outcome::Accepted
        };
        self.push(
            at,
            &[
                ("adId", "ad-2"),
                ("interactionType", "cart"),
                ("catalogId", "c"),
                ("productCode", "p-1"),
                ("units", units),
            ],
            outcome,
        );
    }

    fn impression(&mut self, at: i64, outcome: Outcome) {
        self.push(
            at,
            &[
                ("adId", "ad-3"),
                ("interactionType", "productImpression"),
                ("catalogId", "c"),
                ("productCode", "p-9"),
            ],
            outcome,
        );
    }

    fn verdicts(&self) -> Vec<(u8, RuleVerdict)> {
        inspect(&self.events, Thresholds::default())
            .rules
            .iter()
            .map(|r| (r.rule, r.verdict))
            .collect()
    }

    fn rule(&self, n: u8) -> RuleCheck {
        inspect(&self.events, Thresholds::default())
            .rules
            .into_iter()
            .find(|r| r.rule == n)
            .expect("rule")
    }
}

fn full_watch(s: &mut Session, start: i64, video: &str) {
    for (i, k) in [
        "videoCreativeView",
        "videoPlay",
        "videoFirstQuartile",
        "videoMidpoint",
        "videoThirdQuartile",
        "videoComplete",
    ]
    .iter()
    .enumerate()
    {
        s.video(start + i as i64 * 2_500, k, video);
    }
}

#[test]
fn a_clean_integration_is_ok_everywhere() {
    let mut s = Session::new();
    full_watch(&mut s, 0, "v-1");
    s.video(3_000, "videoPause", "v-1");
    s.video(6_000, "videoResume", "v-1");
    for (i, u) in ["1", "2", "3", "0"].iter().enumerate() {
        s.cart(20_000 + i as i64 * 3_000, u);
    }
    s.impression(40_000, Outcome::Accepted);
    s.impression(60_000, Outcome::Accepted);
    assert_eq!(
        s.verdicts(),
        vec![
            (1, RuleVerdict::Ok),
            (2, RuleVerdict::Ok),
            (3, RuleVerdict::Ok),
            (9, RuleVerdict::Ok),
            (10, RuleVerdict::Ok)
        ]
    );
    let i = inspect(&s.events, Thresholds::default());
    assert_eq!(i.views.len(), 1);
    assert_eq!(i.views[0].sequence.len(), 8);
    assert_eq!(i.carts[0].units, vec!["1", "2", "3", "0"]);
}

#[test]
fn nothing_sent_is_not_applicable() {
    let s = Session::new();
    assert!(s
        .verdicts()
        .iter()
        .all(|(_, v)| *v == RuleVerdict::NotApplicable));
}

#[test]
fn midpoint_without_first_quartile_is_rule_1() {
    let mut s = Session::new();
    s.video(0, "videoCreativeView", "v-1");
    s.video(100, "videoPlay", "v-1");
    s.video(5_000, "videoMidpoint", "v-1");
    let r = s.rule(1);
    assert_eq!(r.verdict, RuleVerdict::Violated);
    assert!(r.findings[0].contains("videoMidpoint #3"), "{r:?}");
    assert!(
        r.findings[0].contains("without videoFirstQuartile"),
        "{r:?}"
    );
    assert!(r.findings[0].contains("seek"), "{r:?}");
}

#[test]
fn two_completes_and_complete_on_load_are_rule_1() {
    let mut s = Session::new();
    full_watch(&mut s, 0, "v-1");
    s.video(20_000, "videoComplete", "v-1");
    let r = s.rule(1);
    assert_eq!(r.verdict, RuleVerdict::Violated);
    assert!(
        r.findings[0].contains("two videoComplete (videoComplete #6 and videoComplete #7)"),
        "{r:?}"
    );
    let mut s = Session::new();
    s.video(0, "videoComplete", "v-2");
    assert!(s.rule(1).findings[0].contains("no videoPlay"));
}

#[test]
fn rapid_toggles_are_rule_2() {
    let mut s = Session::new();
    s.video(0, "videoPlay", "v-1");
    s.video(1_000, "videoPause", "v-1");
    s.video(1_120, "videoResume", "v-1");
    let r = s.rule(2);
    assert_eq!(r.verdict, RuleVerdict::Violated);
    assert!(r.findings[0].contains("120 ms apart"), "{r:?}");
}

#[test]
fn missing_video_id_and_split_tracking_ids_are_rule_3() {
    let mut s = Session::new();
    s.video(0, "videoPlay", "v-1");
    s.push(
        100,
        &[("adId", "ad-1"), ("interactionType", "videoPause")],
        Outcome::Rejected {
            reason: RejectReason::MissingParameter,
            field: "videoId".into(),
        },
    );
    s.push(
        200,
        &[
            ("adId", "ad-1"),
            ("interactionType", "videoFirstQuartile"),
            ("videoId", "v-1"),
            ("customerId", "c-1"),
        ],
        Outcome::Accepted,
    );
    let r = s.rule(3);
    assert_eq!(r.verdict, RuleVerdict::Violated);
    assert_eq!(r.findings.len(), 2, "{r:?}");
    assert!(r.findings[0].contains("videoPause #2 has no videoId"));
    assert!(r.findings[1].contains("different tracking ids"));
}

#[test]
fn rerendered_impressions_are_rule_9() {
    let mut s = Session::new();
    s.impression(0, Outcome::Accepted);
    s.impression(0, Outcome::Duplicate);
    s.impression(250, Outcome::Accepted);
    let r = s.rule(9);
    assert_eq!(r.verdict, RuleVerdict::Violated);
    assert_eq!(r.findings.len(), 2, "{r:?}");
    assert!(r.findings.iter().any(|f| f.contains("duplicate")));
    assert!(r.findings.iter().any(|f| f.contains("250 ms apart")));
}

#[test]
fn deltas_are_rule_10_even_when_refused() {
    let mut s = Session::new();
    for (i, u) in ["1", "1", "1", "-1"].iter().enumerate() {
        s.cart(i as i64 * 2_000, u);
    }
    let r = s.rule(10);
    assert_eq!(r.verdict, RuleVerdict::Violated);
    assert!(r.findings.iter().any(|f| f.contains("units=-1")), "{r:?}");
    assert!(
        r.findings.iter().any(|f| f.contains("both sent units=1")),
        "{r:?}"
    );
    assert!(r.summary.contains("1, 1, 1, -1"), "{r:?}");
}

fn clean_session(watches: usize, carts: usize, gap: i64) -> Session {
    let mut s = Session::new();
    let mut at = 0;
    for w in 0..watches {
        full_watch(&mut s, at, &format!("v-{w}"));
        at += 20_000;
    }
    for u in (1..=carts).chain([0]) {
        s.cart(at, &u.to_string());
        at += gap;
    }
    s.impression(at, Outcome::Accepted);
    s.impression(at + gap, Outcome::Accepted);
    s
}

proptest! {
    /// A clean integration, in any arrival order, is never flagged.
    #[test]
    fn clean_sessions_pass_in_any_arrival_order(
        watches in 0usize..4, carts in 1usize..6, gap in 1_000i64..10_000, seed in any::<u64>()
    ) {
        let mut s = clean_session(watches, carts, gap);
        // Shuffle arrival (seq stays each event's identity).
        let n = s.events.len();
        let mut x = seed | 1;
        for i in (1..n).rev() {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            s.events.swap(i, (x % (i as u64 + 1)) as usize);
        }
        for (_, v) in s.verdicts() {
            prop_assert_ne!(v, RuleVerdict::Violated);
        }
    }

    /// A second complete in a view is always rule 1, wherever it lands.
    #[test]
    fn any_repeated_complete_is_flagged(watches in 1usize..4, extra in 0i64..100_000) {
        let mut s = clean_session(watches, 1, 2_000);
        s.video(extra, "videoComplete", "v-0");
        prop_assert_eq!(s.rule(1).verdict, RuleVerdict::Violated);
    }

    /// Whatever the events, the checks never panic and findings are bounded.
    #[test]
    fn arbitrary_events_never_panic(raw in proptest::collection::vec(
        (0i64..50_000, 0usize..16, 0usize..3, "[-0-9a]{0,3}", 0u8..4), 0..60)
    ) {
        let mut s = Session::new();
        for (at, k, v, units, o) in raw {
            let kind = InteractionType::ALL[k.min(14)].as_str();
            let video = ["v-1", "v-2", ""][v];
            let outcome = match o {
                0 => Outcome::Accepted,
                1 => Outcome::Duplicate,
                2 => Outcome::NotRecorded,
                _ => Outcome::Rejected { reason: RejectReason::InvalidUnits, field: "units".into() },
            };
            s.push(at, &[("adId", "a"), ("interactionType", kind), ("videoId", video),
                ("catalogId", "c"), ("productCode", "p"), ("units", &units)], outcome);
        }
        let i = inspect(&s.events, Thresholds::default());
        prop_assert_eq!(i.rules.len(), 5);
        for r in &i.rules {
            prop_assert!(r.findings.len() <= MAX_FINDINGS);
        }
    }
}

/// The counts the funnel report derives from the same accepted video events (what
/// the aggregator's `derive_view` reads), in event-time order.
fn report_counts(s: &Session, debounce: Debounce) -> crate::video_funnel::FunnelCounts {
    let mut events: Vec<&Observed> = s.events.iter().filter(|e| e.accepted()).collect();
    events.sort_by_key(|e| (e.time_ms(), e.seq));
    let mut view = ViewWalk::new(debounce);
    for e in events {
        if let Some(k) = e.kind() {
            view.push(e.seq, k, e.time_ms());
        }
    }
    view.counts()
}

fn judged_with(s: &Session, debounce: Debounce) -> Inspection {
    inspect(
        &s.events,
        Thresholds {
            debounce,
            ..Thresholds::default()
        },
    )
}

#[test]
fn the_inspector_and_the_report_agree_on_the_debounce() {
    let mut s = Session::new();
    s.video(0, "videoPlay", "v-1");
    for at in [1_000, 1_500, 3_000, 7_000] {
        s.video(at, "videoPause", "v-1");
    }
    for (ms, pauses, gaps) in [
        (300, 4, vec![]),
        (1_000, 3, vec!["500 ms apart"]),
        (3_000, 2, vec!["500 ms apart", "1500 ms apart"]),
    ] {
        let d = Debounce::from_ms(ms);
        let r = judged_with(&s, d).rules.remove(1);
        assert_eq!(report_counts(&s, d).controls, [0, pauses, 0, 0, 0], "{ms}");
        assert_eq!(r.findings.len(), gaps.len(), "{ms}: {r:?}");
        for (f, gap) in r.findings.iter().zip(gaps) {
            assert!(f.contains(gap), "{ms}: {f}");
            assert!(f.contains(&format!("at least {ms} ms")), "{ms}: {f}");
        }
        let verdict = if pauses == 4 {
            RuleVerdict::Ok
        } else {
            RuleVerdict::Violated
        };
        assert_eq!(r.verdict, verdict, "{ms}");
    }
}

proptest! {
    /// At any debounce, whatever the report merges the inspector flags; with one kind
    /// of control, each merge is one finding. Each repeated milestone the report counts
    /// is one rule-1 finding.
    #[test]
    fn the_inspector_flags_what_the_report_merges(
        raw in proptest::collection::vec((0i64..20_000, 0usize..11), 0..18),
        one_kind in any::<bool>(),
        d in 0i64..5_000,
    ) {
        let mut s = Session::new();
        for (at, k) in raw {
            let k = if one_kind && k >= 6 { 7 } else { k };
            s.video(at, InteractionType::ALL[k].as_str(), "v-1");
        }
        let d = Debounce::from_ms(d);
        let judged = judged_with(&s, d);
        let counts = report_counts(&s, d);
        let sent = |pred: fn(InteractionType) -> bool| {
            s.events.iter().filter(|e| e.kind().is_some_and(pred)).count()
        };
        let merged = sent(InteractionType::is_video_control)
            - counts.controls.iter().sum::<u32>() as usize;
        let rule2 = &judged.rules[1];
        prop_assert!(merged == 0 || rule2.verdict == RuleVerdict::Violated, "{:?}", rule2);
        if one_kind {
            prop_assert_eq!(rule2.findings.len(), merged);
        }
        let repeats = judged.rules[0]
            .findings
            .iter()
            .filter(|f| f.contains(" repeats ") || f.contains("two videoComplete"))
            .count();
        prop_assert_eq!(repeats, counts.repeated_milestones as usize);
    }
}
