//! The lines' order as bytes, pages by key against the whole report, and a line's
//! state against the facts that made it.

use super::*;
use crate::model::carts::derive_cart;
use proptest::prelude::*;

fn fact(k: u128, t: i64, units: u64, value: Option<f64>, campaign: &str) -> CartFact {
    CartFact {
        dedup_key: k,
        time_ms: t,
        units,
        value,
        campaign_id: campaign.into(),
        ad_id: format!("ad-{campaign}"),
        status: AdIdStatus::Verified,
    }
}

fn key(t: &str, cat: &str, p: &str) -> CartKey {
    CartKey {
        tracking_id: t.into(),
        catalog_id: cat.into(),
        product_code: p.into(),
    }
}

#[test]
fn a_line_is_its_latest_events_place_and_its_transitions() {
    let k = key("s", "acme\u{1f}cat", "p");
    let day = crate::model::DAY_MS;
    let mut facts = vec![
        fact(1, 10, 1, Some(2.5), "c1"),
        fact(2, day + 5, 3, None, "c2"),
        fact(3, 20, 0, Some(1.0), "c1"),
    ];
    facts[1].status = AdIdStatus::Expired;
    let rows = derive_cart(&k, &facts);
    let line = line_of_rows(&rows).expect("a line");
    assert_eq!(
        line.place,
        LinePlace {
            campaign_id: "c2".into(),
            day: 1,
            tracking_id: "s".into(),
            catalog_id: "acme\u{1f}cat".into(),
            product_code: "p".into(),
        }
    );
    assert_eq!(Some(line.place.clone()), place_of_facts(&k, &facts));
    assert_eq!((line.adds, line.removals, line.units), (2, 1, 3));
    assert_eq!(line.version, 3);
    // The value is the latest event's that carried one; the status the worst.
    let s = line.state();
    assert_eq!(
        s.last_conversion_value.map(|v| v.to_string()),
        Some("1.00".into())
    );
    assert_eq!(s.ad_id_status, AdIdStatus::Expired);
    assert_eq!(s.catalog_id, "cat", "the report shows the bare catalog");
    assert_eq!(s.last_day, "1970-01-02");
    assert_eq!(crate::model::carts::states(&rows), vec![s]);
}

fn place() -> impl Strategy<Value = LinePlace> {
    let s = || "[a\u{0}\u{1}b\u{ff}]{0,3}";
    (s(), -3i32..3, s(), s(), s()).prop_map(|(c, day, t, cat, p)| LinePlace {
        campaign_id: c,
        day: day * 1_000_000,
        tracking_id: t,
        catalog_id: cat,
        product_code: p,
    })
}

fn line(place: LinePlace, ad: u8) -> CartLine {
    CartLine {
        place,
        version: 1,
        last_ms: 0,
        units: 1,
        last_value: None,
        adds: 1,
        increments: 0,
        decrements: 0,
        removals: 0,
        ad_id: format!("ad{}", ad % 3),
        status: AdIdStatus::Verified,
    }
}

proptest! {
    #[test]
    fn bytes_sort_as_places_do(a in place(), b in place()) {
        prop_assert_eq!(a.cmp(&b), a.to_bytes().cmp(&b.to_bytes()));
    }

    #[test]
    fn a_campaigns_days_are_one_range_of_bytes(a in place(), b in place()) {
        let bytes = b.to_bytes();
        let from = bytes_from(&a.campaign_id, a.day);
        let after = bytes_after(&a.campaign_id);
        prop_assert_eq!(
            bytes >= from,
            (&b.campaign_id, b.day) >= (&a.campaign_id, a.day),
            "from"
        );
        prop_assert_eq!(bytes >= after, b.campaign_id > a.campaign_id, "after");
    }

    #[test]
    fn pages_by_key_give_the_whole_report_once(
        places in proptest::collection::btree_set(place(), 0..40),
        ads in proptest::collection::vec(any::<u8>(), 40),
        size in 1usize..7,
        ad in proptest::option::of(0u8..3),
    ) {
        let all: Vec<CartLine> = places
            .into_iter()
            .zip(ads)
            .map(|(p, a)| line(p, a))
            .collect();
        let f = ReportFilter {
            ad_id: ad.map(|a| format!("ad{a}")),
            ..ReportFilter::default()
        };
        let whole = page(all.clone(), &f, None, usize::MAX);
        let mut paged = Vec::new();
        let mut from: Option<LinePlace> = None;
        loop {
            let mut got = page(all.clone(), &f, from.as_ref(), size + 1);
            let next = (got.len() > size).then(|| got.remove(size).place);
            paged.extend(got);
            match next {
                Some(p) => from = Some(p),
                None => break,
            }
        }
        prop_assert_eq!(paged, whole);
    }
}
