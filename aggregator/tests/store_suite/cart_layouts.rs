//! ClickHouse stores of the previous version's carts tables, converted by this one:
//! the campaign days of the carts report's lines listed at the aggregator's start
//! (`cart_line_days`), and `cart_lines` rebuilt in granules of 1,024 rows. Each reads
//! the same pages before and after.

use rm_store::clickhouse::ClickHouseStore;
use rm_store::model::carts::CartStateRow;
use rm_store::{ReportStore, WriteStore};

use super::{
    all, cart_lines, database_client, delete_rows, drop_database, fresh_database, rollups,
};

/// A store of the previous version (its carts report's lines indexed, their campaign
/// days not listed: no `cart_line_days`) pages the report from the lines themselves,
/// then the same from the days the aggregator's start lists. The pages rely on the
/// list: a campaign whose days are taken out of it is missing from them.
pub(crate) async fn line_days_of_the_previous_version_are_listed(url: &str) {
    let config = fresh_database(url, "line_days");
    let store = ClickHouseStore::connect(&config).await.expect("connect");
    rollups::counted_as_the_reports_count(&store, 1, false).await;
    let client = database_client(url, &config.database);
    let count = |sql: &'static str| {
        let client = client.clone();
        async move { client.query(sql).fetch_one::<u64>().await.expect(sql) }
    };
    let listed = "SELECT count() FROM cart_line_days WHERE day > -2147483648";
    assert!(count(listed).await > 0, "listed as the lines are written");
    let written = cart_lines::as_folded(&store, 1).await;
    // As the previous version left it.
    client
        .query("DROP TABLE cart_line_days")
        .execute()
        .await
        .expect("drop");
    let store = ClickHouseStore::connect(&config)
        .await
        .expect("connect again");
    assert_eq!(
        count("SELECT count() FROM cart_line_days").await,
        0,
        "a store with cart events is not marked at connect"
    );
    let before = cart_lines::as_folded(&store, 1).await;
    assert!(store.backfill_tallies().await.expect("backfill"), "listed");
    assert!(count(listed).await > 0);
    let after = cart_lines::as_folded(&store, 1).await;
    assert_eq!(before, written, "from the lines");
    assert_eq!(after, written, "from the listed days");
    // A campaign taken out of the list is out of the pages.
    let whole = store.carts(&all()).await.expect("carts");
    let lines = store
        .cart_lines(&all(), None, usize::MAX)
        .await
        .expect("lines");
    let gone = lines[0].place.campaign_id.clone();
    delete_rows(
        &client,
        "cart_line_days",
        &format!("campaign_id = '{gone}' AND day > -2147483648"),
    )
    .await;
    let kept: Vec<CartStateRow> = whole
        .iter()
        .zip(&lines)
        .filter(|(_, l)| l.place.campaign_id != gone)
        .map(|(r, _)| r.clone())
        .collect();
    assert!(kept.len() < whole.len());
    assert_eq!(cart_lines::by_pages(&store, &all(), 3).await, kept);
    drop_database(url, &config.database).await;
}

/// `cart_lines` as the previous version created it (the default 8,192 rows a
/// granule).
const PREVIOUS_CART_LINES: &str = "CREATE TABLE cart_lines (
    campaign_id String,
    day Int32,
    tracking_id String,
    catalog_id String,
    product_code String,
    version UInt32,
    gone UInt8,
    last_ms Int64,
    units UInt64,
    last_value Nullable(Float64),
    adds UInt64,
    increments UInt64,
    decrements UInt64,
    removals UInt64,
    ad_id String,
    ad_id_status UInt8
) ENGINE = ReplacingMergeTree(version)
ORDER BY (campaign_id, day, tracking_id, catalog_id, product_code)";

/// A store whose `cart_lines` the previous version created (granules of 8,192 rows)
/// pages its carts report as written, and the same after the aggregator's start
/// rebuilt the table with granules of 1,024, every row copied.
pub(crate) async fn lines_of_the_previous_granules_are_rebuilt(url: &str) {
    let config = fresh_database(url, "granules");
    let store = ClickHouseStore::connect(&config).await.expect("connect");
    rollups::counted_as_the_reports_count(&store, 1, false).await;
    let written = cart_lines::as_folded(&store, 1).await;
    let client = database_client(url, &config.database);
    let count = |sql: &'static str| {
        let client = client.clone();
        async move { client.query(sql).fetch_one::<u64>().await.expect(sql) }
    };
    let granules = || {
        let client = client.clone();
        async move {
            client
                .query(
                    "SELECT engine_full FROM system.tables \
                     WHERE database = currentDatabase() AND name = 'cart_lines'",
                )
                .fetch_one::<String>()
                .await
                .expect("engine")
        }
    };
    assert!(granules().await.contains("index_granularity = 1024"));
    // (The conversion copies the rows twice: equal rows of one version are one.)
    let rows = count("SELECT count() FROM cart_lines FINAL").await;
    // As the previous version left it.
    for sql in [
        "RENAME TABLE cart_lines TO cart_lines_now",
        PREVIOUS_CART_LINES,
        "INSERT INTO cart_lines SELECT * FROM cart_lines_now",
        "DROP TABLE cart_lines_now",
    ] {
        client.query(sql).execute().await.expect(sql);
    }
    let store = ClickHouseStore::connect(&config)
        .await
        .expect("connect again");
    assert!(granules().await.contains("index_granularity = 8192"));
    assert_eq!(cart_lines::as_folded(&store, 1).await, written, "before");
    store.backfill_tallies().await.expect("backfill");
    assert!(granules().await.contains("index_granularity = 1024"));
    assert_eq!(count("SELECT count() FROM cart_lines FINAL").await, rows);
    assert_eq!(cart_lines::as_folded(&store, 1).await, written, "after");
    drop_database(url, &config.database).await;
}
