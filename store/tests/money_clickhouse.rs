//! An `order_lines` table of the version before exact money, created here with the
//! DDL that shipped (revenue only as `Float64`) and holding rows as that version
//! wrote them, read by this version on ClickHouse 18.16 and on the newest server:
//! connecting adds `revenue_exact` and `currency`, and the sales report reads each
//! old line as the decimal of its `Float64` in USD, summed exactly (19.99 x 3 is
//! `"59.97"`, ten lines of 0.1 are `"1.00"`). A line written afterwards in EUR
//! keeps its currency and is a row of its own. Skipped without the servers (see
//! `deploy/local/up.sh`) unless `RM_REQUIRE_SERVICES=1`.

use rm_schemas::money::{Currency, Decimal, Money};
use rm_store::clickhouse::{ClickHouseConfig, ClickHouseStore};
use rm_store::model::attribution::{OrderLine, Windows};
use rm_store::{BatchWrite, ReportFilter, ReportStore, WriteStore};

mod servers;
use servers::server_url;

/// `order_lines` as the version before exact money created it.
const OLD_ORDER_LINES: &str = "CREATE TABLE order_lines (
    order_id String,
    line UInt32,
    customer_id String,
    session_id String,
    time_ms Int64,
    catalog_id String,
    product_code String,
    quantity UInt64,
    revenue Float64,
    ad_id String,
    order_ad_ids Array(String)
) ENGINE = ReplacingMergeTree
ORDER BY (order_id, line)";

/// 2026-11-18 10:00 UTC.
const AT: i64 = 1_795_000_000_000;

async fn old_rows_read_exactly(url: String) {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_nanos();
    let database = format!("rm_money_{}_{nanos}", std::process::id());
    let server = clickhouse::Client::default()
        .with_url(&url)
        .with_validation(false);
    server
        .query(&format!("CREATE DATABASE {database}"))
        .execute()
        .await
        .expect("create database");
    let db = server.clone().with_database(&database);
    db.query(OLD_ORDER_LINES)
        .execute()
        .await
        .expect("old table");
    let mut values = Vec::new();
    for i in 0..3 {
        values.push(format!(
            "('o-m1', {i}, 'c-1', '', {AT}, 'cat', 'p1', 1, 19.99, '', [])"
        ));
    }
    for i in 0..10 {
        values.push(format!(
            "('o-m2', {i}, 'c-2', '', {AT}, 'cat', 'p2', 1, 0.1, '', [])"
        ));
    }
    db.query(&format!(
        "INSERT INTO order_lines VALUES {}",
        values.join(", ")
    ))
    .execute()
    .await
    .expect("old rows");

    let config = ClickHouseConfig {
        url: Some(url.clone()),
        database: database.clone(),
        user: "default".into(),
        password: String::new(),
    };
    let store = ClickHouseStore::connect(&config)
        .await
        .expect("connect adds the money columns");
    let revenue =
        |rows: &[rm_store::model::attribution::SalesReportRow]| -> Vec<(String, String, String)> {
            rows.iter()
                .map(|r| {
                    (
                        r.product_code.clone(),
                        r.currency.to_string(),
                        serde_json::to_value(r).expect("json")["revenue"]
                            .as_str()
                            .expect("a decimal string")
                            .to_owned(),
                    )
                })
                .collect()
        };
    let (f, w) = (ReportFilter::default(), Windows::default());
    let rows = store.sales(&f, &w).await.expect("sales");
    assert_eq!(
        revenue(&rows),
        [
            ("p1".into(), "USD".into(), "59.97".into()),
            ("p2".into(), "USD".into(), "1.00".into()),
        ]
    );

    // A line written by this version keeps its exact amount and currency.
    let eur = Currency::from_code("EUR").expect("eur");
    let line = OrderLine {
        order_id: "o-m3".into(),
        line: 0,
        customer_id: "c-3".into(),
        session_id: String::new(),
        time_ms: AT,
        catalog_id: "cat".into(),
        product_code: "p1".into(),
        quantity: 1,
        revenue: Money::new(Decimal::from_str_exact("0.123").expect("decimal"), eur),
        ad_id: String::new(),
        order_ad_ids: Vec::new(),
    };
    store
        .write(&BatchWrite {
            order_lines: vec![line],
            ..BatchWrite::default()
        })
        .await
        .expect("write");
    let rows = store.sales(&f, &w).await.expect("sales");
    assert_eq!(
        revenue(&rows),
        [
            ("p1".into(), "EUR".into(), "0.123".into()),
            ("p1".into(), "USD".into(), "59.97".into()),
            ("p2".into(), "USD".into(), "1.00".into()),
        ]
    );
    server
        .query(&format!("DROP DATABASE {database}"))
        .execute()
        .await
        .expect("drop database");
}

#[tokio::test]
async fn clickhouse_18_16() {
    if let Some(url) = server_url("RM_CLICKHOUSE_URL") {
        old_rows_read_exactly(url).await;
    }
}

#[tokio::test]
async fn clickhouse_newest() {
    if let Some(url) = server_url("RM_CLICKHOUSE_NEWEST_URL") {
        old_rows_read_exactly(url).await;
    }
}
