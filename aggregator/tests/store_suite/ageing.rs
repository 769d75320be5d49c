//! Identifiers aged past their retention (`rm_store::EraseStore::age`), on every
//! backend: after a store holds a stream's events and orders, a pass over rows older
//! than the stream's earliest (some are dated three days early) changes nothing; a pass over all of them replaces
//! every shopper id by its keyed pseudonym (and every fact's shopper hash by its
//! keyed hash) in every table that keeps one, every report reads as before (the carts
//! report naming the pseudonyms), and a second pass changes nothing. An erasure then
//! reaches the aged rows through the id's aged form. The backend's test searches
//! every table for the raw ids.

use rm_aggregator::ageing::aged_erasure;
use rm_store::model::ageing::{Ageing, AgeingKey};
use rm_store::model::erasure::Erasure;
use rm_store::model::DAY_MS;

use super::erasure::{reports, same, Erasing, ERASED};

/// The stream's shoppers (its session ids).
pub(crate) const SHOPPERS: [&str; 3] = ["s-0", "s-1", "s-2"];

/// The key of the test's passes.
pub(crate) fn key() -> AgeingKey {
    AgeingKey::new(b"store-suite-identifier-key")
}

/// Ages the stream's rows; returns the pass, for the backend's search.
pub(crate) async fn aged_past_retention(store: &impl Erasing) -> Ageing {
    super::offers::attributed_as_the_reports_attribute(store, 3).await;
    let before = reports(store).await;

    let none = store
        .age(&Ageing::new(key(), i64::from(super::D0 - 5) * DAY_MS))
        .await
        .expect("age nothing");
    assert_eq!(none.total(), 0, "nothing is that old: {none:?}");
    same(&reports(store).await, &before, "a pass over nothing");

    let a = Ageing::new(key(), chrono::Utc::now().timestamp_millis() + DAY_MS);
    let aged = store.age(&a).await.expect("age");
    for (what, n) in [
        ("views", aged.views),
        ("view facts", aged.view_facts),
        ("product facts", aged.product_facts),
        ("ad facts", aged.ad_facts),
        ("cart events", aged.cart_events),
        ("touches", aged.touches),
        ("order lines", aged.order_lines),
        ("order states", aged.order_states),
        ("orders by shopper", aged.order_shoppers),
    ] {
        assert!(n > 0, "the stream stores shoppers' {what}: {aged:?}");
    }
    assert_eq!(aged.served_ads, 0, "served ads are forgotten, not aged");

    // Counts stay; the carts report names each shopper's pseudonym.
    let after = reports(store).await;
    let renamed: Vec<String> = before
        .iter()
        .map(|l| {
            SHOPPERS.iter().fold(l.clone(), |l, id| {
                l.replace(&format!("\"{id}\""), &format!("\"{}\"", a.pseudonym(id)))
            })
        })
        .collect();
    same(&after, &renamed, "every report reads as before");
    assert!(
        after.iter().any(|l| l.contains(&a.pseudonym(ERASED))),
        "the carts report shows the pseudonym, as both stores compute it"
    );

    let again = store.age(&a).await.expect("age again");
    assert_eq!(again.total(), 0, "a second pass finds nothing: {again:?}");
    same(&reports(store).await, &after, "a second pass");
    a
}

/// After [`aged_past_retention`]: an erasure of one shopper reaches its aged rows
/// through the id's aged form, and leaves neither.
pub(crate) async fn erased_after_ageing(store: &impl Erasing, a: &Ageing) -> Erasure {
    let now = chrono::Utc::now().timestamp_millis();
    let e = Erasure::new(
        uuid::Uuid::now_v7().to_string(),
        None,
        ERASED,
        "privacy-desk".into(),
        now,
        None,
    );
    store.request_erasure(&e).await.expect("record");
    let raw = store.erase(&e).await.expect("erase the id");
    assert_eq!(raw.total(), 0, "no row keeps the raw id: {raw:?}");
    let aged = aged_erasure(&e, key()).expect("holds its id");
    assert_eq!(aged.tracking_id, a.pseudonym(ERASED));
    let erased = store.erase(&aged).await.expect("erase the aged id");
    for (what, n) in [
        ("views", erased.views),
        ("product facts", erased.product_facts),
        ("cart events", erased.cart_events),
        ("touches", erased.touches),
        ("order lines", erased.order_lines),
    ] {
        assert!(n > 0, "the aged id's {what}: {erased:?}");
    }
    e
}
