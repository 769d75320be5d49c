//! The ageing rules: a pseudonym is the documented keyed hash (the values ClickHouse
//! computes in SQL), a pass is idempotent, keeps what is already not a shopper's id,
//! and without the key nothing links a pseudonym to its id.

use proptest::prelude::*;

use super::*;
use crate::model::erasure;

fn pass() -> Ageing {
    Ageing::new(AgeingKey::new(b"test-secret"), 1_700_000_000_000)
}

/// Known answers, computed apart (Python's `hashlib`) from the construction the
/// module header states: the SQL of the ClickHouse store computes the same.
#[test]
fn pseudonyms_are_the_documented_keyed_hashes() {
    let a = pass();
    assert_eq!(
        a.key_text(),
        "93c619137663e076cc7dc777ae0aca7eade9ed94280081950dba6a5030dd1fcc"
    );
    assert_eq!(
        a.pseudonym("shopper-1"),
        "aged-f7aa0aa69de3122f808f7c65a3d8602c"
    );
    assert_eq!(a.hash(12345), 13_819_394_052_483_396_004);
    assert_eq!(a.hash(0), 0, "no shopper stays no shopper");
    assert_eq!(a.before_day(), 19_675);
}

#[test]
fn what_is_already_not_a_shoppers_id_is_kept() {
    let a = pass();
    let replacement = erasure::replacement("0195d3c2-6f1e-7a00-8000-000000000001");
    for id in [
        String::new(),
        a.pseudonym("x"),
        replacement,
        "anon-0123456789abcdef0123456789abcdef".to_owned(),
    ] {
        assert!(kept(&id), "{id}");
        let mut v = id.clone();
        assert!(!a.age(&mut v));
        assert_eq!(v, id);
    }
    // Look-alikes are shoppers' ids like any other.
    for id in [
        "aged-",
        "aged-0123456789abcdef0123456789abcde",
        "aged-0123456789ABCDEF0123456789ABCDEF",
        "aged-0123456789abcdef0123456789abcdef0",
        "xaged-0123456789abcdef0123456789abcdef",
        "gone-0123456789abcdef0123456789abcdef",
    ] {
        assert!(!kept(id), "{id}");
    }
}

#[test]
fn shoppers_keep_their_kind() {
    let a = pass();
    let mut s = "customer:c-1".to_owned();
    assert!(a.age_shopper(&mut s));
    assert_eq!(s, format!("customer:{}", a.pseudonym("c-1")));
    assert!(!a.age_shopper(&mut s), "a second pass changes nothing");
    assert!(Ageing::keeps_shopper(&s));
    assert!(!Ageing::keeps_shopper("session:s-1"));
    assert_eq!(
        a.aged_shopper("session:s-1"),
        Some(format!("session:{}", a.pseudonym("s-1")))
    );
    assert_eq!(a.aged_shopper("other:s-1"), None, "not a shopper");
}

#[test]
fn an_order_ages_its_lines_and_its_credits_touches() {
    use crate::model::attribution::{OrderLine, Touch, TouchKind};
    use crate::model::tallies::sales::OrderCredits;
    let a = pass();
    let line = OrderLine {
        order_id: "o-1".into(),
        line: 0,
        customer_id: "c-1".into(),
        session_id: String::new(),
        time_ms: 1,
        catalog_id: "cat".into(),
        product_code: "p".into(),
        quantity: 1,
        revenue: rm_schemas::money::Money::parse("5.00", rm_schemas::money::DEFAULT_CURRENCY)
            .expect("money")
            .expect("amount"),
        ad_id: String::new(),
        order_ad_ids: vec![],
    };
    let mut o = OrderCredits::new(std::slice::from_ref(&line));
    let touch = Touch {
        shopper: "customer:c-1".into(),
        dedup_key: 7,
        kind: TouchKind::ProductClick,
        ad_id: "rm1.x".into(),
        campaign_id: "camp".into(),
        catalog_id: "cat".into(),
        product_code: "p".into(),
        time_ms: 0,
    };
    o.lines[0].credit = Some((touch, crate::model::attribution::Credit::Click));
    assert!(a.age_order(&mut o));
    let text = format!("{o:?}");
    assert!(!text.contains("c-1"), "{text}");
    assert!(!a.age_order(&mut o), "idempotent");
}

proptest! {
    /// Ageing twice is ageing once; an aged id is kept; two ids never share a
    /// pseudonym (here), and another key gives another one.
    #[test]
    fn ageing_is_idempotent_and_keyed(id in "[ -~]{1,40}", other in "[ -~]{1,40}") {
        let a = pass();
        let mut once = id.clone();
        let changed = a.age(&mut once);
        prop_assert_eq!(changed, !kept(&id));
        let mut twice = once.clone();
        prop_assert!(!a.age(&mut twice));
        prop_assert_eq!(&twice, &once);
        prop_assert!(kept(&once));
        if changed {
            // (A short id may be among 32 hex digits by chance.)
            if id.len() >= 8 {
                prop_assert!(!once.contains(&id));
            }
            let b = Ageing::new(AgeingKey::new(b"another-secret"), 0);
            prop_assert_ne!(b.pseudonym(&id), once.clone());
        }
        if id != other {
            prop_assert_ne!(a.pseudonym(&id), a.pseudonym(&other));
        }
    }
}
