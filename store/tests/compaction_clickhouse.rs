//! A compaction sums counts only: on a fresh store (whose markers are written at
//! connect, on day 0, a day every compaction closes) the markers and the log
//! partitions' progress stay in `rollups` alone, and `rollups_closed` holds the
//! snapshot row and nothing else. (Before, the markers coded 249..252 were summed
//! into closed rows no read wanted.) Skipped without the servers (see
//! `deploy/local/up.sh`) unless `RM_REQUIRE_SERVICES=1`.

use rm_store::clickhouse::{ClickHouseConfig, ClickHouseStore};
use rm_store::model::tallies::Metric;
use rm_store::WriteStore;

mod servers;
use servers::server_url;

async fn markers_are_not_summed(url: String) {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_nanos();
    let database = format!("rm_compaction_{}_{nanos}", std::process::id());
    let config = ClickHouseConfig {
        url: Some(url.clone()),
        database: database.clone(),
        user: "default".into(),
        password: String::new(),
    };
    let store = ClickHouseStore::connect(&config).await.expect("connect");
    store.compact_tallies(0).await.expect("compact");
    let db = clickhouse::Client::default()
        .with_url(&url)
        .with_database(&database)
        .with_validation(false);
    let markers: Vec<u16> = db
        .query("SELECT metric FROM rollups WHERE metric >= ? ORDER BY metric")
        .bind(Metric::FIRST_NOT_COUNT)
        .fetch_all()
        .await
        .expect("markers");
    assert!(
        markers.contains(&Metric::ZonesBackfilled.code()),
        "a fresh store is marked at connect: {markers:?}"
    );
    let closed: Vec<(u8, u16)> = db
        .query("SELECT scope, metric FROM rollups_closed ORDER BY scope, metric")
        .fetch_all()
        .await
        .expect("closed rows");
    // The snapshot row keeps its first open hour's hour of the day as its metric.
    assert_eq!(closed.len(), 1, "only the snapshot row: {closed:?}");
    assert!(closed[0].0 == 255 && closed[0].1 < 24, "{closed:?}");
    db.query(&format!("DROP DATABASE {database}"))
        .execute()
        .await
        .expect("drop database");
}

#[tokio::test]
async fn clickhouse_18_16() {
    if let Some(url) = server_url("RM_CLICKHOUSE_URL") {
        markers_are_not_summed(url).await;
    }
}

#[tokio::test]
async fn clickhouse_newest() {
    if let Some(url) = server_url("RM_CLICKHOUSE_NEWEST_URL") {
        markers_are_not_summed(url).await;
    }
}
