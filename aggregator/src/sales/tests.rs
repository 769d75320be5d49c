//! The fold of orders and offers: a copy of an order changes nothing, an offer
//! moves a line's sales to the touch's campaign, a replay after a crash that wrote
//! the tallies but not the states counts nothing twice.

use super::*;
use rm_store::model::attribution::{shopper, ShopperId, TouchKind};
use rm_store::model::tallies::sales::SaleField;
use rm_store::model::tallies::Scope;

fn order(id: &str) -> OrderMsg {
    let json = format!(
        r#"{{"v":1,"receivedAt":"2026-11-20T10:00:00Z","id":"{id}","orderDate":"2026-11-20T10:00:00Z","catalogId":"cat","customerId":"c1","currency":"USD","orderItems":[{{"productCode":"p1","quantity":2,"totalOrderItemPriceAfterDiscounts":9.5}}]}}"#
    );
    OrderMsg::decode(json.as_bytes()).expect("an order record")
}

fn offer(id: &str, campaign: &str, hours_before: i64, key: u128) -> OrderMsg {
    let at = chrono::DateTime::parse_from_rfc3339("2026-11-20T10:00:00Z")
        .expect("t")
        .timestamp_millis();
    OrderMsg::Offer(Offer {
        order_id: id.into(),
        touch: Touch {
            shopper: shopper(ShopperId::Customer, "c1"),
            dedup_key: key,
            kind: TouchKind::ProductClick,
            ad_id: format!("rm1.{campaign}.x"),
            campaign_id: campaign.into(),
            catalog_id: "cat".into(),
            product_code: "p1".into(),
            time_ms: at - hours_before * 3_600_000,
        },
        to: String::new(),
    })
}

fn at(msgs: Vec<OrderMsg>) -> Vec<OrderIn> {
    msgs.into_iter()
        .enumerate()
        .map(|(i, msg)| OrderIn {
            msg,
            at: (3, i as i64),
        })
        .collect()
}

/// Orders per campaign at the sales places (every partition).
fn orders_of(tallies: &FastMap<Place, PlaceTallies>, campaign: &str) -> i64 {
    tallies
        .iter()
        .filter(|(p, _)| p.scope == Scope::Sales && p.campaign_id == campaign)
        .filter_map(|(_, t)| t.get(Metric::Sale(SaleField::Orders)))
        .map(|t| t.value)
        .sum()
}

#[test]
fn orders_count_once_and_offers_move_them_to_the_best_touch() {
    let w = Windows::default();
    let batch = at(vec![
        order("o-1"),
        order("o-1"),
        offer("o-1", "a", 5, 1),
        offer("o-1", "b", 2, 2),
        offer("o-1", "a", 5, 1),
        offer("o-9", "a", 1, 3),
    ]);
    let mut states = FastMap::default();
    let mut tallies = FastMap::default();
    let f = fold(&batch, &mut states, &mut tallies, &w);
    assert_eq!(
        (
            f.stats.new,
            f.stats.duplicates,
            f.stats.credited,
            f.stats.offers_kept,
            f.stats.orphans
        ),
        (1, 1, 2, 1, 1)
    );
    assert_eq!(f.lines.len(), 1);
    assert_eq!(f.orders.len(), 1, "the order and its copy: one lookup");
    assert_eq!(orders_of(&tallies, "b"), 1, "the later click wins");
    assert_eq!(orders_of(&tallies, "a"), 0);
    assert_eq!(orders_of(&tallies, ""), 0, "no longer unattributed");
    // The places a dry run names are the ones the fold moved.
    let dry = places(&batch, &FastMap::default(), &w);
    for p in tallies.keys().filter(|p| p.scope == Scope::Sales) {
        assert!(dry.contains(p), "{p:?}");
    }
}

#[test]
fn a_replay_after_the_tallies_were_written_counts_nothing_twice() {
    let w = Windows::default();
    let batch = at(vec![order("o-1"), offer("o-1", "a", 5, 1)]);
    let mut states = FastMap::default();
    let mut tallies = FastMap::default();
    fold(&batch, &mut states, &mut tallies, &w);
    // Crash: tallies stored, states not. The replay starts from no state.
    let mut states = FastMap::default();
    let again = fold(&batch, &mut states, &mut tallies, &w);
    assert!(
        again
            .tallies
            .iter()
            .all(|(k, _)| k.metric == Metric::Progress),
        "only progress may be rewritten: {:?}",
        again.tallies
    );
    assert_eq!(orders_of(&tallies, "a"), 1);
    assert_eq!(states.len(), 1, "the state is rebuilt as it was");
    // Both written: the order is a copy, the offer changes nothing.
    let third = fold(&batch, &mut states, &mut tallies, &w);
    assert_eq!(
        (
            third.stats.new,
            third.stats.duplicates,
            third.stats.credited
        ),
        (0, 1, 0)
    );
    assert_eq!(orders_of(&tallies, "a"), 1);
}

#[test]
fn lookups_span_the_windows() {
    let w = Windows::default();
    let mut states = FastMap::default();
    let mut tallies = FastMap::default();
    let f = fold(&at(vec![order("o-1")]), &mut states, &mut tallies, &w);
    let l = Lookups {
        orders: f.orders,
        touches: Vec::new(),
    };
    let (shoppers, from, to) = l.for_orders(&w).expect("a lookup");
    assert_eq!(shoppers.into_iter().collect::<Vec<_>>(), ["customer:c1"]);
    assert_eq!(to - from, w.click_ms);
    assert!(l.for_touches(&w).is_none());
}
