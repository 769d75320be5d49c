//! A store written by the version before exact money (`fixtures/store-before-money.redb`,
//! see its README) is converted at open: every order line's `f64` revenue becomes the
//! exact decimal the retailer sent, in USD, the sales report counts the same orders,
//! units and credits as the old version answered (`store-before-money.sales.json`),
//! and revenue is exact where the old sum was not (ten lines of 0.1: `"1.00"`, not
//! `0.9999999999999999`). The old table is gone and a second open changes nothing.

use std::path::PathBuf;

use redb::{ReadableDatabase, TableDefinition, TableHandle};
use rm_store::embedded::EmbeddedStore;
use rm_store::model::attribution::Windows;
use rm_store::{ReportFilter, ReportStore};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

#[tokio::test]
async fn order_lines_with_f64_revenue_are_converted_to_exact_money() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("store.redb");
    std::fs::copy(fixture("store-before-money.redb"), &path).expect("copy fixture");
    {
        let db = redb::Database::open(&path).expect("open old");
        let r = db.begin_read().expect("read");
        let names: Vec<String> = r
            .list_tables()
            .expect("tables")
            .map(|t| t.name().to_owned())
            .collect();
        assert!(names.iter().any(|n| n == "orders"), "{names:?}");
    }
    let store = EmbeddedStore::open(&path).expect("open converts");
    let rows = store
        .sales(&ReportFilter::default(), &Windows::default())
        .await
        .expect("sales");
    let got: Vec<serde_json::Value> = rows
        .iter()
        .map(|r| serde_json::to_value(r).expect("json"))
        .collect();
    let old: serde_json::Value = serde_json::from_slice(
        &std::fs::read(fixture("store-before-money.sales.json")).expect("old report"),
    )
    .expect("json");
    let old = old["rows"].as_array().expect("rows");
    assert_eq!(got.len(), old.len(), "{got:?}");
    for (new, old) in got.iter().zip(old) {
        for k in [
            "campaignId",
            "catalogId",
            "productCode",
            "day",
            "orders",
            "units",
            "clickAttributions",
            "viewAttributions",
        ] {
            assert_eq!(new[k], old[k], "{k}: {new} vs {old}");
        }
        assert_eq!(new["currency"], "USD", "old orders had no currency");
    }
    let revenue: Vec<(&str, &str)> = got
        .iter()
        .map(|r| {
            (
                r["productCode"].as_str().expect("product"),
                r["revenue"].as_str().expect("a decimal string"),
            )
        })
        .collect();
    assert_eq!(
        revenue,
        [
            ("cola-1l", "2.58"),
            ("crisps-salted", "1.00"),
            ("crisps-salted", "59.97")
        ]
    );
    assert_eq!(old[1]["revenue"], 0.9999999999999999, "the old f64 sum");
    drop(store);
    // The old table is gone; opening again converts nothing and reads the same.
    {
        let db = redb::Database::open(&path).expect("open new");
        let r = db.begin_read().expect("read");
        let names: Vec<String> = r
            .list_tables()
            .expect("tables")
            .map(|t| t.name().to_owned())
            .collect();
        assert!(!names.iter().any(|n| n == "orders"), "{names:?}");
        assert!(names.iter().any(|n| n == "orders_v2"), "{names:?}");
        let t = r
            .open_table(TableDefinition::<&str, &[u8]>::new("orders_v2"))
            .expect("orders_v2");
        assert_eq!(redb::ReadableTableMetadata::len(&t).expect("len"), 3);
    }
    let again = EmbeddedStore::open(&path).expect("reopen");
    let rows2 = again
        .sales(&ReportFilter::default(), &Windows::default())
        .await
        .expect("sales");
    assert_eq!(rows2, rows);
}
