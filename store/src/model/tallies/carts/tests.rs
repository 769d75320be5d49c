//! Cart lines' tallies: moves against the facts' rollup.

use proptest::prelude::*;

use super::*;
use crate::model::carts::{campaign_rollup, derive_cart, insert_fact};
use crate::model::status::AdIdStatus;
use crate::model::tallies::SummedTally;

fn line() -> CartKey {
    CartKey {
        tracking_id: "shopper".into(),
        catalog_id: rm_schemas::namespace::scoped("acme", "catalog"),
        product_code: "sku".into(),
    }
}

fn fact(t: i64, units: u64, campaign: &str) -> CartFact {
    CartFact {
        dedup_key: t as u128,
        time_ms: t,
        units,
        value: None,
        campaign_id: campaign.into(),
        ad_id: "ad".into(),
        status: AdIdStatus::Verified,
    }
}

#[test]
fn a_late_event_turns_an_add_into_an_increment() {
    let day = 86_400_000;
    // Adds are kept per quarter hour: the first of day 1 is 96.
    let added = |a: &Adds, c: &str| a.get(&(c.into(), 96)).map(|v| v[0..2].to_vec());
    let before = adds(&[fact(day + 10, 2, "a")]);
    assert_eq!(added(&before, "a"), Some(vec![1, 0]));
    // An add of campaign b earlier the same line: a's event is an increment now.
    let after = adds(&[fact(day + 5, 1, "b"), fact(day + 10, 2, "a")]);
    let m = moves(&line(), &before, &after, 0);
    let by = |grain: Grain| -> Vec<(&str, i64)> {
        m.iter()
            .filter(|(k, _)| k.metric == Metric::Cart(CartField::Added) && k.place.grain == grain)
            .map(|(k, d)| (k.place.campaign_id.as_str(), *d))
            .collect()
    };
    assert_eq!(by(Grain::Day), vec![("a", -1), ("b", 1)]);
    assert_eq!(
        by(Grain::Quarter),
        vec![("a", -1), ("b", 1)],
        "and their quarter hours"
    );
    // a's event now adds one unit (2 - 1), not two.
    let units: Vec<(&str, i64)> = m
        .iter()
        .filter(|(k, _)| k.metric == Metric::Cart(CartField::UnitsAdded))
        .map(|(k, d)| (k.place.campaign_id.as_str(), *d))
        .collect();
    assert_eq!(units, vec![("a", -1), ("b", 1)]);
    assert!(moves(&line(), &after, &after, 0).is_empty());
    let mut unverified = fact(day + 20, 1, "a");
    unverified.status = AdIdStatus::Foreign;
    let removed_then_added = adds(&[fact(day + 10, 2, "a"), fact(day + 15, 0, "a"), unverified]);
    assert_eq!(added(&removed_then_added, "a"), Some(vec![1, 1]));
}

#[test]
fn the_value_moves_with_the_latest_event() {
    let mut first = fact(10, 1, "a");
    first.value = Some(7.5);
    let mut later = fact(20, 2, "b");
    later.value = Some(0.1);
    let before = adds(std::slice::from_ref(&first));
    let after = adds(&[first, later]);
    let m = moves(&line(), &before, &after, 3);
    let value = |c: &str, f: CartField| {
        m.iter()
            .find(|(k, _)| k.place.campaign_id == c && k.metric == Metric::Cart(f))
            .map(|(k, d)| {
                assert_eq!(k.place.scope, Scope::CartProduct);
                assert_eq!(k.place.catalog_id, line().catalog_id);
                assert_eq!(k.place.partition, 3);
                *d
            })
    };
    assert_eq!(value("a", CartField::ValueWhole), Some(-7));
    assert_eq!(value("a", CartField::ValueE8), Some(-50_000_000));
    assert_eq!(value("b", CartField::ValueWhole), None);
    assert_eq!(value("b", CartField::ValueE8), Some(10_000_000));
}

/// Sums moves into the summed tallies a reader gets.
fn summed(counts: &BTreeMap<TallyKey, i64>) -> Vec<SummedTally> {
    counts
        .iter()
        .map(|(k, v)| SummedTally {
            place: Place {
                partition: 0,
                ..k.place.clone()
            },
            metric: k.metric,
            value: *v,
        })
        .collect()
}

fn arb_fact() -> impl Strategy<Value = (i64, u64, Option<u8>, bool, bool)> {
    (
        0i64..(3 * 86_400_000),
        0u64..4,
        prop::option::of(0u8..4),
        any::<bool>(),
        prop::bool::weighted(0.8),
    )
}

proptest! {
    /// A line's events arriving in any order, with copies, move the tallies to what
    /// the facts' rollup (the report the tallies replace) counts of the whole line.
    #[test]
    fn moves_in_any_order_sum_to_the_facts_rollup(
        raw in prop::collection::vec(arb_fact(), 1..9),
        order in prop::collection::vec(any::<prop::sample::Index>(), 0..20),
    ) {
        let values = [2.5, 0.1, 19.99, 1e6 + 0.01];
        let facts: Vec<CartFact> = raw
            .iter()
            .enumerate()
            .map(|(i, (t, units, value, b, verified))| CartFact {
                dedup_key: i as u128,
                time_ms: *t,
                units: *units,
                value: value.map(|v| values[usize::from(v)]),
                campaign_id: if *b { "b".into() } else { "a".into() },
                ad_id: "ad".into(),
                status: if *verified { AdIdStatus::Verified } else { AdIdStatus::Foreign },
            })
            .collect();
        // Arrival: every fact once in a shuffled order, then some copies.
        let mut arrival: Vec<&CartFact> = facts.iter().collect();
        for (i, ix) in order.iter().enumerate() {
            let j = ix.index(arrival.len());
            arrival.swap(i % facts.len(), j);
        }
        let copies: Vec<&CartFact> = order.iter().map(|ix| ix.get(&facts)).collect();
        arrival.extend(copies);
        let mut stored: Vec<CartFact> = Vec::new();
        let mut counted = Adds::new();
        let mut counts: BTreeMap<TallyKey, i64> = BTreeMap::new();
        for f in arrival {
            insert_fact(&mut stored, f.clone());
            let now = adds(&stored);
            for (k, d) in moves(&line(), &counted, &now, 0) {
                *counts.entry(k).or_default() += d;
            }
            counted = now;
        }
        let want = campaign_rollup(&derive_cart(&line(), &facts));
        prop_assert_eq!(campaign_rows(&summed(&counts), |_| true), want);
        // The backfill counts the stored line the same way.
        let backfilled: BTreeMap<TallyKey, i64> = backfill_rows(&derive_cart(&line(), &facts))
            .into_iter()
            .filter(|(k, _)| k.metric.is_count())
            .map(|(k, t)| (k, t.value))
            .collect();
        let product: BTreeMap<TallyKey, i64> = counts
            .iter()
            .filter(|(k, v)| k.place.scope == Scope::CartProduct && **v != 0)
            .map(|(k, v)| (TallyKey { place: Place { partition: BACKFILL_PARTITION, ..k.place.clone() }, metric: k.metric }, *v))
            .collect();
        prop_assert_eq!(backfilled, product);
    }
}
