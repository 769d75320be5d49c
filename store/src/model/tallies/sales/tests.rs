//! Offers in any order give the read-time attribution; the counts are the sales
//! report's; amounts split and join exactly.

use super::*;
use crate::model::attribution::{sales_report, shopper, ShopperId, TouchKind};
use proptest::prelude::*;
use rm_schemas::money::{self, Money};

const HOUR: i64 = 3_600_000;
const ORDER_AT: i64 = 1_795_000_000_000;

fn line(order: &str, n: u32, product: &str, customer: &str, revenue: &str) -> OrderLine {
    OrderLine {
        order_id: order.into(),
        line: n,
        customer_id: customer.into(),
        session_id: String::new(),
        time_ms: ORDER_AT,
        catalog_id: "cat".into(),
        product_code: product.into(),
        quantity: 2,
        revenue: Money::parse(revenue, money::DEFAULT_CURRENCY)
            .expect("money")
            .expect("amount"),
        ad_id: String::new(),
        order_ad_ids: Vec::new(),
    }
}

fn touch(
    kind: TouchKind,
    campaign: &str,
    product: &str,
    customer: &str,
    hours: i64,
    key: u128,
) -> Touch {
    Touch {
        shopper: shopper(ShopperId::Customer, customer),
        dedup_key: key,
        kind,
        ad_id: format!("rm1.{campaign}.x"),
        campaign_id: campaign.into(),
        catalog_id: "cat".into(),
        product_code: product.into(),
        time_ms: ORDER_AT - hours * HOUR,
    }
}

fn kind() -> impl Strategy<Value = TouchKind> {
    prop_oneof![
        Just(TouchKind::ProductClick),
        Just(TouchKind::ProductImpression),
        Just(TouchKind::CreativeClick)
    ]
}

proptest! {
    /// Whatever order touches are offered in, with repeats, each line ends credited
    /// as `attribute` credits it over all of them, and the counts equal the sales
    /// report's rows.
    #[test]
    fn offers_in_any_order_give_the_read_time_credit(
        raw in proptest::collection::vec(
            (kind(), 0usize..3, 0usize..2, 0usize..2, -2i64..40, 0u128..6),
            0..14,
        ),
        order in proptest::collection::vec(any::<proptest::sample::Index>(), 0..30),
    ) {
        let campaigns = ["a", "b", "c"];
        let products = ["p1", "p2"];
        let customers = ["c1", "c2"];
        let touches: Vec<Touch> = raw
            .iter()
            .map(|(k, c, p, s, h, key)| {
                touch(*k, campaigns[*c], products[*p], customers[*s], *h, *key)
            })
            .collect();
        let lines = vec![
            line("o1", 0, "p1", "c1", "9.99"),
            line("o1", 1, "p2", "c1", "0.01"),
            line("o1", 2, "p1", "c1", "5"),
        ];
        let w = Windows::default();
        let mut state = OrderCredits::new(&lines);
        let offered: Vec<&Touch> = order
            .iter()
            .filter(|_| !touches.is_empty())
            .map(|i| &touches[i.index(touches.len())])
            .chain(&touches)
            .collect();
        for t in offered {
            state.offer(t, &w);
        }
        for l in &state.lines {
            let want = attribution::attribute(&l.line, &touches, &w)
                .map(|(t, c)| (t.campaign_id.clone(), t.dedup_key, c));
            let got = l.credit.as_ref().map(|(t, c)| (t.campaign_id.clone(), t.dedup_key, *c));
            prop_assert_eq!(got, want);
        }
        // The counts at the sales places are the report's rows.
        let report = sales_report(&lines, &touches, &w, |_, _| true);
        let counts = state.counts();
        let mut rows = 0;
        for r in &report {
            let p = sales_place(&r.campaign_id, &lines[0], r.currency);
            let p = Place { product_code: r.product_code.as_str().into(), ..p };
            let get = |f| counts.get(&(p.clone(), f)).copied().unwrap_or(0);
            prop_assert_eq!(get(SaleField::Orders), r.orders as i64);
            prop_assert_eq!(get(SaleField::Units), r.units as i64);
            prop_assert_eq!(
                join_amount(get(SaleField::RevenueWhole), get(SaleField::RevenueE8)),
                r.revenue.normalize()
            );
            prop_assert_eq!(get(SaleField::ClickAttributions), r.click_attributions as i64);
            prop_assert_eq!(get(SaleField::ViewAttributions), r.view_attributions as i64);
            rows += 1;
        }
        let sales_places: std::collections::BTreeSet<&Place> = counts
            .keys()
            .filter(|(p, _)| p.scope == Scope::Sales)
            .map(|(p, _)| p)
            .collect();
        prop_assert_eq!(sales_places.len(), rows);
        // Moves from nothing to the state, then to the state again, are the counts.
        prop_assert!(moves(&counts, &counts, 0).is_empty());
    }

    /// Amounts of up to eight decimals split into two integers and join back exactly.
    #[test]
    fn amounts_split_and_join_exactly(m in -10_i64.pow(17)..10_i64.pow(17), scale in 0u32..=8) {
        let d = Decimal::new(m, scale);
        let (whole, e8) = split_amount(d);
        prop_assert!((0..100_000_000).contains(&e8));
        prop_assert_eq!(join_amount(whole, e8), d.normalize());
    }
}

#[test]
fn an_offer_record_round_trips_and_is_keyed_by_the_bare_order_id() {
    let o = Offer {
        order_id: rm_schemas::namespace::scoped("acme", "o-1"),
        touch: touch(TouchKind::ProductClick, "a", "p1", "c1", 1, u128::MAX),
        to: "group-1".into(),
    };
    let bytes = o.to_bytes();
    assert!(bytes.starts_with(OFFER_PREFIX));
    assert_eq!(Offer::parse(&bytes), Some(o.clone()));
    assert_eq!(o.key(), b"o-1");
    assert_eq!(Offer::parse(b"{\"id\":\"o-1\"}"), None);
    assert_eq!(Offer::parse(b"{\"offer\":1}"), None);
}

#[test]
fn a_state_round_trips_and_its_campaign_rows_count_orders_once() {
    let lines = vec![
        line("o1", 0, "p1", "c1", "1.5"),
        line("o1", 1, "p2", "c1", "2.25"),
    ];
    let w = Windows::default();
    let mut s = OrderCredits::new(&lines);
    assert!(s.offer(&touch(TouchKind::ProductClick, "a", "p1", "c1", 1, 1), &w));
    assert!(s.offer(&touch(TouchKind::ProductClick, "a", "p2", "c1", 2, 2), &w));
    assert!(
        !s.offer(&touch(TouchKind::ProductClick, "a", "p2", "c1", 2, 2), &w),
        "a repeat"
    );
    assert!(
        !s.offer(&touch(TouchKind::ProductClick, "b", "p2", "c2", 0, 3), &w),
        "another shopper"
    );
    assert_eq!(s.version, 2);
    assert_eq!(OrderCredits::from_bytes(&s.to_bytes()).expect("state"), s);
    let counts = s.counts();
    let day = crate::model::day_of(ORDER_AT);
    let p = campaign_place("a", day, money::DEFAULT_CURRENCY);
    assert_eq!(
        counts.get(&(p.clone(), SaleField::Orders)),
        Some(&1),
        "one order, two lines"
    );
    assert_eq!(counts.get(&(p.clone(), SaleField::Units)), Some(&4));
    assert_eq!(
        join_amount(
            counts[&(p.clone(), SaleField::RevenueWhole)],
            counts[&(p, SaleField::RevenueE8)]
        ),
        Decimal::new(375, 2)
    );
    // Unattributed lines count at campaign "" in the sales rows, never the campaign's.
    let fresh = OrderCredits::new(&lines).counts();
    assert!(fresh
        .keys()
        .all(|(p, _)| p.scope == Scope::Sales && p.campaign_id.is_empty()));
    let m = moves(&fresh, &counts, 7);
    assert!(m.iter().all(|(k, _)| k.place.partition == 7));
    assert!(m
        .iter()
        .any(|(k, d)| k.place.campaign_id.is_empty() && *d < 0));
}

#[test]
fn offers_for_touches_go_to_orders_dated_after_them_within_the_windows() {
    let w = Windows::default();
    let t = touch(TouchKind::ProductClick, "a", "p1", "c1", 1, 1);
    let order = |ms: i64, id: &str| ShopperOrder {
        shopper: t.shopper.clone(),
        time_ms: ms,
        order_id: id.into(),
    };
    let orders = [
        order(ORDER_AT, "later"),
        order(t.time_ms - 1, "before"),
        order(t.time_ms + w.click_ms + 1, "beyond"),
    ];
    let offers = offers_for_touches(std::slice::from_ref(&t), &orders, &w);
    let ids: Vec<&str> = offers.iter().map(|o| o.order_id.as_str()).collect();
    assert_eq!(ids, ["later"]);
}
