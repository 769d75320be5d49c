//! The consent rule against a model of it, on strings this test writes bit by bit as
//! the TCF v2 core segment lays them out (any purposes, vendors in either encoding,
//! restrictions); malformed strings are refused with their reason, never a panic.
//! (Strings made by the IAB's own encoder, and the specification's published
//! examples, are checked in `tests/it/consent_tcf.rs`.)

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use proptest::prelude::*;

use super::tc_string::{decode, Restriction, TcError};
use super::{Basis, ConsentPolicy, Decision, Refusal};

/// Writes big-endian bit fields.
#[derive(Default)]
struct Writer {
    bits: Vec<bool>,
}

impl Writer {
    fn put(&mut self, v: u64, n: usize) {
        for i in (0..n).rev() {
            self.bits.push((v >> i) & 1 == 1);
        }
    }

    fn vendors(&mut self, ids: &[u16], ranges: bool) {
        let max = ids.iter().copied().max().unwrap_or(0);
        self.put(u64::from(max), 16);
        self.put(u64::from(ranges), 1);
        if ranges {
            self.put(ids.len() as u64, 12);
            for &id in ids {
                self.put(0, 1);
                self.put(u64::from(id), 16);
            }
        } else {
            for id in 1..=max {
                self.put(u64::from(ids.contains(&id)), 1);
            }
        }
    }

    fn finish(self) -> String {
        let bytes: Vec<u8> = self
            .bits
            .chunks(8)
            .map(|c| {
                c.iter()
                    .enumerate()
                    .fold(0u8, |b, (i, &bit)| b | (u8::from(bit) << (7 - i)))
            })
            .collect();
        URL_SAFE_NO_PAD.encode(bytes)
    }
}

/// Consent choices of one string.
#[derive(Debug, Clone)]
struct Choices {
    purposes: Vec<u8>,
    purposes_li: Vec<u8>,
    vendors: Vec<u16>,
    vendors_li: Vec<u16>,
    ranges: bool,
    restriction: Option<(u8, u8)>,
}

fn encode(c: &Choices) -> String {
    let mut w = Writer::default();
    w.put(2, 6); // version
    w.put(17_000_000_000, 36); // created
    w.put(17_000_000_000, 36); // last updated
    w.put(10, 12); // CMP id
    w.put(1, 12); // CMP version
    w.put(0, 6); // consent screen
    w.put(4 * 64 + 13, 12); // "EN"
    w.put(140, 12); // vendor list version
    w.put(4, 6); // policy version
    w.put(0, 1); // service specific
    w.put(0, 1); // non-standard texts
    w.put(0, 12); // special features
    let mask = |ps: &[u8]| (1..=24u8).fold(0u64, |m, p| (m << 1) | u64::from(ps.contains(&p)));
    w.put(mask(&c.purposes), 24);
    w.put(mask(&c.purposes_li), 24);
    w.put(0, 1); // purpose one treatment
    w.put(4 * 64 + 13, 12); // publisher country
    w.vendors(&c.vendors, c.ranges);
    w.vendors(&c.vendors_li, !c.ranges);
    match c.restriction {
        None => w.put(0, 12),
        Some((purpose, kind)) => {
            w.put(1, 12);
            w.put(u64::from(purpose), 6);
            w.put(u64::from(kind), 2);
            w.put(1, 12);
            w.put(1, 1);
            w.put(1, 16);
            w.put(3000, 16);
        }
    }
    w.finish()
}

const VENDOR: u16 = 1234;

/// The rule, written out for one purpose at a time.
fn model(c: &Choices, needs: &[(u8, Basis)]) -> Decision {
    for &(p, basis) in needs {
        let restricted = c.restriction.filter(|&(rp, _)| rp == p).map(|(_, k)| k);
        let basis = match restricted {
            Some(0) => return Decision::Refused(Refusal::Restricted),
            Some(1) => Basis::Consent,
            Some(2) if ![1, 3, 4, 5, 6].contains(&p) => Basis::LegitimateInterest,
            _ => basis,
        };
        let ok = match basis {
            Basis::Consent => c.purposes.contains(&p) && c.vendors.contains(&VENDOR),
            Basis::LegitimateInterest => {
                c.purposes_li.contains(&p) && c.vendors_li.contains(&VENDOR)
            }
        };
        if !ok {
            return Decision::Refused(match basis {
                Basis::Consent => Refusal::NoConsent,
                Basis::LegitimateInterest => Refusal::NoLegitimateInterest,
            });
        }
    }
    Decision::Allowed
}

fn choices() -> impl Strategy<Value = Choices> {
    let purposes = proptest::collection::vec(1u8..=11, 0..6);
    let vendors = proptest::collection::vec(prop_oneof![Just(VENDOR), 1u16..2000], 0..6);
    (
        purposes.clone(),
        purposes,
        vendors.clone(),
        vendors,
        any::<bool>(),
        proptest::option::of((prop_oneof![Just(1u8), Just(7), Just(8)], 0u8..4)),
    )
        .prop_map(|(mut p, mut pl, mut v, mut vl, ranges, restriction)| {
            for list in [&mut p, &mut pl] {
                list.sort_unstable();
                list.dedup();
            }
            for list in [&mut v, &mut vl] {
                list.sort_unstable();
                list.dedup();
            }
            Choices {
                purposes: p,
                purposes_li: pl,
                vendors: v,
                vendors_li: vl,
                ranges,
                restriction,
            }
        })
}

proptest! {
    #[test]
    fn decisions_follow_the_rule(c in choices(), li in any::<bool>()) {
        let spec = if li { "1:consent,8:li" } else { "1:consent,7:consent" };
        let needs = if li {
            vec![(1, Basis::Consent), (8, Basis::LegitimateInterest)]
        } else {
            vec![(1, Basis::Consent), (7, Basis::Consent)]
        };
        let policy = ConsentPolicy::new(VENDOR, spec).expect("a policy");
        let s = encode(&c);
        let tc = decode(&s).expect("decodes");
        prop_assert_eq!(tc.vendor_consents.ids().collect::<Vec<_>>(), c.vendors.clone());
        prop_assert_eq!(tc.vendor_li.ids().collect::<Vec<_>>(), c.vendors_li.clone());
        for p in 1..=24u8 {
            prop_assert_eq!(tc.purpose_consent(p), c.purposes.contains(&p));
            prop_assert_eq!(tc.purpose_li(p), c.purposes_li.contains(&p));
        }
        prop_assert_eq!(policy.decide(&s), model(&c, &needs));
    }

    #[test]
    fn any_text_decides_without_panicking(s in ".{0,200}") {
        let policy = ConsentPolicy::new(VENDOR, "1:consent,7:consent").expect("a policy");
        let _ = policy.decide(&s);
    }

    #[test]
    fn a_string_cut_short_is_truncated_never_a_panic(c in choices(), cut in 1usize..40) {
        let s = encode(&c);
        let short = &s[..s.len().saturating_sub(cut).max(1)];
        if let Err(e) = decode(short) {
            prop_assert!(matches!(e, TcError::Truncated | TcError::Encoding | TcError::Range), "{e:?}");
        }
    }
}

#[test]
fn malformed_strings_are_refused_by_reason() {
    let policy = ConsentPolicy::new(VENDOR, "1:consent,7:consent").expect("a policy");
    let reason = |s: &str| match policy.decide(s) {
        Decision::Refused(r) => r.reason(),
        Decision::Allowed => "allowed",
    };
    assert_eq!(reason(""), "undecodable_encoding");
    assert_eq!(reason("not base64!"), "undecodable_encoding");
    // A TCF v1 string (version 1).
    assert_eq!(
        reason("BOEFEAyOEFEAyAHABDENAI4AAAB9vABAASA"),
        "undecodable_version"
    );
    assert_eq!(reason("CQuV9AAQuV9AAAKACAEN"), "undecodable_truncated");
    let mut w = Writer::default();
    w.put(2, 6);
    // Every field up to the vendors zero.
    for n in [36, 36, 12, 12, 6, 12, 12, 6, 1, 1, 12, 24, 24, 1, 12] {
        w.put(0, n);
    }
    // A range ending before it starts.
    w.put(10, 16);
    w.put(1, 1);
    w.put(1, 12);
    w.put(1, 1);
    w.put(9, 16);
    w.put(3, 16);
    assert_eq!(reason(&w.finish()), "undecodable_range");
}

#[test]
fn policies_follow_tcf_v2_2() {
    assert!(ConsentPolicy::new(VENDOR, "1:consent,7:consent").is_ok());
    assert!(
        ConsentPolicy::new(VENDOR, "1:li").is_err(),
        "purpose 1: consent only"
    );
    assert!(
        ConsentPolicy::new(VENDOR, "4:li").is_err(),
        "purposes 3 to 6: consent only"
    );
    assert!(ConsentPolicy::new(VENDOR, "12:consent").is_err());
    assert!(ConsentPolicy::new(VENDOR, "7:maybe").is_err());
    assert!(ConsentPolicy::new(VENDOR, "").is_err());
    assert!(ConsentPolicy::new(0, "1:consent").is_err());
    assert_eq!(Restriction::Undefined, Restriction::Undefined);
}

mod stage {
    use chrono::{DateTime, Utc};
    use rm_schemas::{InteractionEvent, InteractionType};

    use super::super::pseudonyms::{Pseudonyms, PREFIX};
    use super::super::{ConsentOutcome, ConsentPolicy, ConsentStage, Refusal};
    use super::{encode, Choices, VENDOR};

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).expect("time").to_utc()
    }

    fn event(consent: Option<String>) -> InteractionEvent {
        InteractionEvent {
            session_id: Some("s-1".into()),
            customer_id: Some("c-1".into()),
            dtm_token: None,
            iab_consent_string: consent,
            ..InteractionEvent::new(
                "rm2.demo.x",
                InteractionType::ProductClick,
                at("2026-11-27T10:00:00Z").fixed_offset(),
            )
        }
    }

    fn choices(vendors: Vec<u16>) -> Choices {
        Choices {
            purposes: vec![1, 7],
            purposes_li: Vec::new(),
            vendors,
            vendors_li: Vec::new(),
            ranges: false,
            restriction: None,
        }
    }

    #[test]
    fn ids_are_replaced_only_when_the_string_refuses() {
        let policy = ConsentPolicy::new(VENDOR, "1:consent,7:consent").expect("policy");
        let stage = ConsentStage::new(Some(policy), b"0123456789abcdef-secret");
        let now = at("2026-11-27T10:00:01Z");
        let mut allowed = event(Some(encode(&choices(vec![VENDOR]))));
        assert_eq!(stage.apply(&mut allowed, now), ConsentOutcome::Allowed);
        assert_eq!(allowed.customer_id.as_deref(), Some("c-1"));
        let mut absent = event(None);
        assert_eq!(stage.apply(&mut absent, now), ConsentOutcome::Absent);
        assert_eq!(absent.session_id.as_deref(), Some("s-1"));
        let mut refused = event(Some(encode(&choices(vec![7]))));
        let outcome = stage.apply(&mut refused, now);
        assert_eq!(outcome, ConsentOutcome::Refused(Refusal::NoConsent));
        assert!(outcome.anonymous());
        let (s, c) = (
            refused.session_id.expect("s"),
            refused.customer_id.expect("c"),
        );
        assert!(s.starts_with(PREFIX) && c.starts_with(PREFIX), "{s} {c}");
        assert!(!s.contains("s-1") && s != c);
        let mut garbage = event(Some("%%%".into()));
        assert_eq!(
            stage.apply(&mut garbage, now).label(),
            "undecodable_encoding"
        );
        assert!(garbage.customer_id.expect("c").starts_with(PREFIX));
        let off = ConsentStage::new(None, b"0123456789abcdef-secret");
        let mut kept = event(Some(encode(&choices(vec![7]))));
        assert_eq!(off.apply(&mut kept, now), ConsentOutcome::NotEvaluated);
        assert_eq!(kept.customer_id.as_deref(), Some("c-1"));
        for o in [
            ConsentOutcome::NotEvaluated,
            ConsentOutcome::Absent,
            ConsentOutcome::Allowed,
            ConsentOutcome::Refused(Refusal::Restricted),
        ] {
            assert!(ConsentOutcome::LABELS.contains(&o.label()));
        }
    }

    #[test]
    fn pseudonyms_hold_for_a_day_and_link_nothing_across_days() {
        let p = Pseudonyms::new(b"0123456789abcdef-secret");
        let d1 = at("2026-11-27T00:00:00Z").date_naive();
        let d2 = at("2026-11-28T00:00:00Z").date_naive();
        let a = p.of(d1, "customerId", "c-1");
        assert_eq!(a, p.of(d1, "customerId", "c-1"), "stable within the day");
        assert_ne!(a, p.of(d2, "customerId", "c-1"), "another the next day");
        assert_ne!(a, p.of(d1, "sessionId", "c-1"), "another per field");
        assert_ne!(a, p.of(d1, "customerId", "c-2"));
        let other = Pseudonyms::new(b"another deployment's secret");
        assert_ne!(a, other.of(d1, "customerId", "c-1"), "keyed");
        assert_eq!(a.len(), PREFIX.len() + 32);
    }
}
