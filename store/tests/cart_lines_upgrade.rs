//! A store written by the version before the carts report's index keeps its carts
//! report: opened by this version, its cart lines are indexed (`cart_lines`), the
//! report reads the rows that version answered (in the new order: campaign and day
//! of each line's latest event, then the line's key), pages by key give it whole, and
//! a line written afterwards moves in the index to its new place.
//!
//! The fixture `fixtures/store-before-cart-lines.redb` was written by the binary of
//! 8ce2e5c through its edge and aggregator (`fixtures/make-store-before-cart-lines.sh`);
//! `fixtures/store-before-cart-lines.carts.json` is what that version's api answered
//! for the carts report.

use rm_store::embedded::EmbeddedStore;
use rm_store::model::carts::lines::LinePlace;
use rm_store::model::carts::{self, CartFact, CartKey, CartStateRow};
use rm_store::model::status::AdIdStatus;
use rm_store::{BatchWrite, FastSet, ReportFilter, ReportStore, Tenant, WriteStore};
use serde_json::Value;

const FIXTURE: &str = "tests/fixtures/store-before-cart-lines";

fn open_copy() -> (tempfile::TempDir, EmbeddedStore) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("store.redb");
    std::fs::copy(format!("{FIXTURE}.redb"), &path).expect("copy fixture");
    let store = EmbeddedStore::open(&path).expect("the old store opens");
    (dir, store)
}

fn by_key(mut rows: Vec<Value>) -> Vec<Value> {
    rows.sort_by_key(|r| {
        ["trackingId", "catalogId", "productCode"].map(|f| r[f].as_str().unwrap_or("").to_owned())
    });
    rows
}

fn json(rows: &[CartStateRow]) -> Vec<Value> {
    rows.iter()
        .map(|r| serde_json::to_value(r).expect("json"))
        .collect()
}

async fn by_pages(store: &EmbeddedStore, f: &ReportFilter) -> Vec<CartStateRow> {
    let mut rows = Vec::new();
    let mut from: Option<LinePlace> = None;
    loop {
        let (page, next) = rm_store::sums::cart_page(store, f, from.as_ref(), Some(1))
            .await
            .expect("page");
        assert!(page.len() <= 1);
        rows.extend(page);
        match next {
            Some(p) => from = Some(p),
            None => return rows,
        }
    }
}

#[tokio::test]
async fn the_previous_versions_carts_read_the_same_from_the_index() {
    let (_dir, store) = open_copy();
    let all = ReportFilter::default();
    let text = std::fs::read_to_string(format!("{FIXTURE}.carts.json")).expect("fixture");
    let old: Value = serde_json::from_str(&text).expect("json");
    let old = old["rows"].as_array().expect("rows").clone();
    assert_eq!(old.len(), 4, "the fixture's lines");

    let carts = store.carts(&all).await.expect("carts");
    assert_eq!(by_key(json(&carts)), by_key(old.clone()), "the same rows");
    // In place order: campaign, then day, then key.
    let order: Vec<(String, String, String)> = carts
        .iter()
        .map(|c| {
            (
                c.campaign_id.clone(),
                c.last_day.clone(),
                c.tracking_id.clone(),
            )
        })
        .collect();
    let mut sorted = order.clone();
    sorted.sort();
    assert_eq!(order, sorted);
    assert_eq!(by_pages(&store, &all).await, carts, "pages by key");

    // A tenant of one campaign reads its lines only: the line that moved to it
    // (s-2) and the one of yesterday (s-3).
    let video = ReportFilter {
        tenant: Some(Tenant {
            namespace: "demo".into(),
            campaigns: std::sync::Arc::new(["demo-video".to_owned()].into()),
        }),
        ..ReportFilter::default()
    };
    let theirs = by_pages(&store, &video).await;
    let ids: Vec<&str> = theirs.iter().map(|c| c.tracking_id.as_str()).collect();
    assert_eq!(ids, ["s-3", "s-2"], "yesterday's line first");

    // s-3's line changes after the upgrade: a later event of another campaign moves
    // it in the index (from demo-video yesterday to demo-products today).
    let key = CartKey {
        tracking_id: "s-3".into(),
        // Stored scoped by the namespace of the line's ad id.
        catalog_id: rm_schemas::namespace::scoped("demo", "demo-catalog"),
        product_code: "cola-1l".into(),
    };
    let keys: FastSet<CartKey> = [key.clone()].into_iter().collect();
    let sets = store
        .load(&FastSet::default(), &keys, &FastSet::default())
        .await
        .expect("load");
    let mut facts = sets.carts.get(&key).expect("s-3's line").clone();
    let latest = facts.last().expect("a fact").time_ms;
    carts::insert_fact(
        &mut facts,
        CartFact {
            dedup_key: 7,
            time_ms: latest + rm_store::model::DAY_MS,
            units: 4,
            value: Some(4.0),
            campaign_id: "demo-products".into(),
            ad_id: "rm2.demo.demo-products.later".into(),
            status: AdIdStatus::Verified,
        },
    );
    let write = BatchWrite {
        cart_rows: carts::derive_cart(&key, &facts),
        ..BatchWrite::default()
    };
    store.write(&write).await.expect("write");
    let theirs = by_pages(&store, &video).await;
    let ids: Vec<&str> = theirs.iter().map(|c| c.tracking_id.as_str()).collect();
    assert_eq!(ids, ["s-2"], "s-3's line left demo-video");
    let now = store.carts(&all).await.expect("carts");
    assert_eq!(now.len(), 4, "one entry per line");
    let s3 = now.iter().find(|c| c.tracking_id == "s-3").expect("s-3");
    assert_eq!((s3.campaign_id.as_str(), s3.units), ("demo-products", 4));
}
