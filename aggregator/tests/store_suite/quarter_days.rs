//! ClickHouse stores compacted by the previous version (closed quarters in
//! `rollups_closed` only, no `rollups_days`), converted by the next compaction: the
//! closed quarters kept by day read the same answers as the quarters did, and the
//! reads by period rely on the day arrays.

use rm_store::clickhouse::ClickHouseStore;
use rm_store::model::tallies::{Grain, Group, Scope, SummedTally, TallyQuery};
use rm_store::{ReportStore, WriteStore};

use super::{database_client, drop_database, fresh_database, rollups};

/// A stream folded with compactions between batches (every day closed), then left
/// as the previous version left it (the day arrays' table dropped; connecting
/// creates it empty): reads take the quarters, as before. The next compaction keeps
/// every closed day's quarters by day and marks the store; the transcript (zoned
/// reports by hour and by day, pages, quarters against days) is the same. A day
/// array changed by hand then changes a read by period: the reads use them.
pub(crate) async fn quarters_of_the_previous_compactions_are_kept_by_day(url: &str) {
    let seed = 5;
    let config = fresh_database(url, "quarter_days");
    let store = ClickHouseStore::connect(&config).await.expect("connect");
    Box::pin(rollups::counted_with_compactions(&store, seed)).await;
    assert!(store.quarters_by_day().await.expect("read"), "kept by day");
    let client = database_client(url, &config.database);
    client
        .query("DROP TABLE rollups_days")
        .execute()
        .await
        .expect("as the previous version left it");
    drop(store);
    let store = ClickHouseStore::connect(&config).await.expect("connect");
    assert!(
        !store.quarters_by_day().await.expect("read"),
        "no day arrays: the quarters are read"
    );
    let before = Box::pin(rollups::transcript(&store, seed, false)).await;
    let whole = TallyQuery {
        group: Group::Whole,
        ..rollups::everything(Scope::Campaign, Grain::Quarter)
    };
    // Each place's sums over the whole range (a group's bucket is any of its own).
    let sums = |tallies: Vec<SummedTally>| -> Vec<(String, u16, i64)> {
        let mut out: Vec<_> = tallies
            .into_iter()
            .map(|s| (s.place.campaign_id.to_string(), s.metric.code(), s.value))
            .collect();
        out.sort();
        out
    };
    let sums_before = sums(store.tallies(&whole).await.expect("read").expect("counted"));
    store.compact_tallies(0).await.expect("compact");
    assert!(store.quarters_by_day().await.expect("read"), "converted");
    let arrays: u64 = client
        .query("SELECT count() FROM rollups_days WHERE scope = 0")
        .fetch_one()
        .await
        .expect("count");
    assert!(arrays > 0, "the campaigns' closed quarters are kept by day");
    let after = Box::pin(rollups::transcript(&store, seed, false)).await;
    assert_eq!(before, after, "the same answers from the day arrays");
    assert_eq!(
        sums(store.tallies(&whole).await.expect("read").expect("counted")),
        sums_before
    );
    // One campaign's day array, its first quarter raised by 1,000 in a newer row:
    // the sum over the whole range moves by as much.
    client
        .query(
            "INSERT INTO rollups_days SELECT campaign_id, scope, creative, catalog_id, \
             product_code, metric, day, arrayConcat([quarters[1] + 1000], \
             arraySlice(quarters, 2)), generation + 1 FROM rollups_days \
             WHERE scope = 0 AND metric = 0 ORDER BY day, campaign_id LIMIT 1",
        )
        .execute()
        .await
        .expect("change a day array");
    let total = |sums: &[(String, u16, i64)]| -> i64 {
        sums.iter().filter(|s| s.1 == 0).map(|s| s.2).sum()
    };
    let changed = sums(store.tallies(&whole).await.expect("read").expect("counted"));
    assert_eq!(total(&changed), total(&sums_before) + 1000);
    drop_database(url, &config.database).await;
}
