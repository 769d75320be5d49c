//! The erasure rules: a replacement carries nothing of the id, every swap leaves no
//! trace of it in its scope and nothing outside, a served ad's decisions survive it,
//! and the suppression recognises the id only where the erasure covers it.

use proptest::prelude::*;

use super::*;
use crate::model::traffic::shopper_hash;

fn erasure(id: &str, ns: Option<&str>) -> Erasure {
    Erasure::new(
        "0195d3c2-6f1e-7a00-8000-000000000001".into(),
        ns.map(str::to_owned),
        id,
        "client".into(),
        1_700_000_000_000,
        None,
    )
}

fn ad(ns: &str) -> String {
    if ns == "default" {
        "rm1.c.YmFubmVy.1900000000.bm9uY2U.c2ln".into()
    } else {
        format!("rm2.{ns}.c.YmFubmVy.1900000000.bm9uY2U.c2ln")
    }
}

#[test]
fn a_replacement_is_fixed_by_the_request_and_says_nothing_of_the_id() {
    let a = erasure("shopper-1", None);
    let b = erasure("shopper-2", None);
    assert_eq!(
        a.replacement, b.replacement,
        "it derives from the request only"
    );
    assert!(a.replacement.starts_with(REPLACEMENT_PREFIX));
    assert_eq!(a.replacement.len(), REPLACEMENT_PREFIX.len() + 32);
    assert_eq!(a.digest.len(), 64);
    assert_eq!(
        digest("abc"),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
        "SHA-256, as ClickHouse's SHA256 gives it"
    );
    let again = Erasure::new(
        "another".into(),
        None,
        "shopper-1",
        "c".into(),
        0,
        Some(a.replacement.clone()),
    );
    assert_eq!(again.replacement, a.replacement, "asking again reuses it");
}

proptest! {
    /// Touches and order lines: the id goes wherever the erasure covers the row, and
    /// nothing else changes.
    #[test]
    fn swaps_leave_no_trace_in_scope_and_touch_nothing_outside(
        id in "[a-z0-9-]{1,12}",
        other in "[a-z0-9-]{1,12}",
        row_ns in prop::sample::select(vec!["default", "acme", "zeta"]),
        erase_ns in prop::option::of(prop::sample::select(vec!["default", "acme"])),
    ) {
        prop_assume!(id != other);
        let e = erasure(&id, erase_ns);
        let covered = erase_ns.is_none_or(|ns| ns == row_ns);
        let mut t = Touch {
            shopper: attribution::shopper(ShopperId::Session, &id),
            dedup_key: 7,
            kind: attribution::TouchKind::ProductClick,
            ad_id: ad(row_ns),
            campaign_id: "c".into(),
            catalog_id: "cat".into(),
            product_code: "p".into(),
            time_ms: 1,
        };
        let before = t.clone();
        prop_assert_eq!(e.swap_touch(&mut t), covered);
        if covered {
            prop_assert_eq!(&t.shopper, &format!("session:{}", e.replacement));
            prop_assert_eq!(Touch { shopper: before.shopper.clone(), ..t.clone() }, before.clone());
        } else {
            prop_assert_eq!(&t, &before);
        }
        let mut foreign = Touch { shopper: attribution::shopper(ShopperId::Customer, &other), ..before.clone() };
        prop_assert!(!e.swap_touch(&mut foreign), "another shopper's touch stays");

        let mut line = OrderLine {
            order_id: rm_schemas::namespace::scoped(row_ns, "o-1"),
            line: 0,
            customer_id: id.clone(),
            session_id: other.clone(),
            time_ms: 1,
            catalog_id: "cat".into(),
            product_code: "p".into(),
            quantity: 1,
            revenue: rm_schemas::money::Money::zero(rm_schemas::money::DEFAULT_CURRENCY),
            ad_id: String::new(),
            order_ad_ids: Vec::new(),
        };
        prop_assert_eq!(e.swap_line(&mut line), covered);
        prop_assert_eq!(&line.session_id, &other, "another id of the line stays");
        if covered {
            prop_assert_eq!(&line.customer_id, &e.replacement);
        } else {
            prop_assert_eq!(&line.customer_id, &id);
        }
    }

    /// The suppression finds an erased id in the namespaces its erasure covers, and no
    /// other id.
    #[test]
    fn the_suppression_recognises_only_erased_ids_in_scope(
        ids in prop::collection::btree_set("[a-z0-9]{1,8}", 2..6),
        ns in prop::option::of(prop::sample::select(vec!["acme", "zeta"])),
    ) {
        let ids: Vec<String> = ids.into_iter().collect();
        let (erased, kept) = ids.split_at(1);
        let e = erasure(&erased[0], ns);
        let mut s = Suppression::default();
        prop_assert!(s.is_empty());
        s.add(&e);
        s.add(&e);
        prop_assert_eq!(s.len(), 1, "one erasure of an id and scope");
        for record_ns in ["acme", "zeta"] {
            let expected = ns.is_none_or(|n| n == record_ns);
            let mut v = Some(erased[0].clone());
            prop_assert_eq!(s.apply(&mut v, Some(record_ns)), expected);
            if expected {
                prop_assert_eq!(v.as_deref(), Some(e.replacement.as_str()));
            }
            let mut shopper = attribution::shopper(ShopperId::Customer, &erased[0]);
            prop_assert_eq!(s.apply_shopper(&mut shopper, Some(record_ns)), expected);
            if expected {
                prop_assert_eq!(shopper, format!("customer:{}", e.replacement));
            }
            for k in kept {
                let mut v = Some(k.clone());
                prop_assert!(!s.apply(&mut v, Some(record_ns)));
                prop_assert_eq!(v.as_deref(), Some(k.as_str()));
            }
        }
    }
}

/// A served ad keeps its decisions and version: the view its viewer took is still
/// theirs under the replacement's hash, and the shoppers seen count the same.
#[test]
fn a_served_ad_keeps_its_decisions_under_the_replacement() {
    let e = erasure("viewer-1", None);
    let mut s = ServedAd::default();
    let viewer = shopper_hash("viewer-1");
    assert!(!s.see(viewer));
    assert!(s.see(shopper_hash("viewer-2")));
    assert!(s.take_view("video", viewer, 0xabcd));
    let (version, shoppers) = (s.version(), s.shoppers());
    let ad_id = ad("default");
    assert!(e.swap_served(&ad_id, &mut s));
    assert_eq!((s.version(), s.shoppers()), (version, shoppers));
    assert_eq!(
        s.view_taken_by("video", viewer),
        None,
        "the old hash is gone"
    );
    assert_eq!(
        s.view_taken_by("video", e.new_hash()),
        Some(Some(0xabcd)),
        "the replacement took the view"
    );
    assert!(!s.see(e.new_hash()), "the replacement was already seen");
    assert!(!e.swap_served(&ad_id, &mut s), "nothing left to replace");
    let scoped = erasure("viewer-2", Some("acme"));
    assert!(
        !scoped.swap_served(&ad_id, &mut s),
        "another namespace's ad"
    );
}
