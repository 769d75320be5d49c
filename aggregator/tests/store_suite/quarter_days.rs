//! ClickHouse stores compacted by the previous version (closed quarters in
//! `rollups_closed` only, no `rollups_days`), converted by the next compaction: the
//! closed quarters kept by day read the same answers as the quarters did, and the
//! reads by period rely on the day arrays. And a day closed up to an hour of it: its
//! closed hours read from its array, the same answers.

use rm_store::clickhouse::ClickHouseStore;
use rm_store::model::tallies::{Grain, Group, Scope, SummedTally, TallyQuery};
use rm_store::{ReportStore, WriteStore};

use super::{database_client, drop_database, fresh_database, rollups, t, D0, TEN};

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
    // Each place's sums over the whole range (a group's bucket is any of its own; a
    // sum of 0 may be left out, `ReportStore::tallies`).
    let sums = |tallies: Vec<SummedTally>| -> Vec<(String, u16, i64)> {
        let mut out: Vec<_> = tallies
            .into_iter()
            .filter(|s| s.value != 0)
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
    let first_day: i32 = client
        .query("SELECT min(day) FROM rollups_days WHERE scope = 0 AND metric = 0")
        .fetch_one()
        .await
        .expect("a day array");
    raise_a_day_array(&client, first_day).await;
    let total = |sums: &[(String, u16, i64)]| -> i64 {
        sums.iter().filter(|s| s.1 == 0).map(|s| s.2).sum()
    };
    let changed = sums(store.tallies(&whole).await.expect("read").expect("counted"));
    assert_eq!(total(&changed), total(&sums_before) + 1000);
    drop_database(url, &config.database).await;
}

/// A stream folded without compactions, its flags then dropped (a store quiet since
/// its writes), compacted on a clock of 13:30 on `D0` (its ads are served from 10:00;
/// its late records are three days older): the days before are kept by day, `D0`'s
/// hours before 11:00 are closed rows and its array holds them (and no quarter
/// after), the rest of it is read from the partitions, and the reads (no flag since
/// the snapshot: none of the dirty parts) answer as before. A compaction at 14:00
/// closes 11:00 too, and then `D0`'s array changed by hand changes a read by
/// period: the reads use it.
pub(crate) async fn hours_closed_mid_day_read_as_their_partitions(url: &str) {
    const HOUR: i64 = 3_600_000;
    let seed = 9;
    let config = fresh_database(url, "closed_hours");
    let store = ClickHouseStore::connect(&config).await.expect("connect");
    Box::pin(rollups::counted_as_the_reports_count(&store, seed, false)).await;
    let before = Box::pin(rollups::transcript(&store, seed, false)).await;
    let client = database_client(url, &config.database);
    client
        .query("TRUNCATE TABLE rollups_late")
        .execute()
        .await
        .expect("no flag");
    let whole = TallyQuery {
        group: Group::Whole,
        ..rollups::everything(Scope::Campaign, Grain::Quarter)
    };
    let total = |tallies: Vec<SummedTally>| -> i64 {
        tallies
            .into_iter()
            .filter(|s| s.metric.code() == 0)
            .map(|s| s.value)
            .sum()
    };
    let total_before = total(store.tallies(&whole).await.expect("read").expect("counted"));
    let closed_quarters = |to_hour: i64| {
        let client = client.clone();
        async move {
            let n: u64 = client
                .query(
                    "SELECT count() FROM rollups_closed WHERE grain = 1 AND scope != 255 \
                     AND bucket >= ? AND bucket < ?",
                )
                .bind(i64::from(D0) * 96)
                .bind(to_hour * 4)
                .fetch_one()
                .await
                .expect("count");
            n
        }
    };
    let d0_hour = i64::from(D0) * 24;
    for (clock, open_hour) in [(TEN + 3 * HOUR + HOUR / 2, 11), (TEN + 4 * HOUR, 12)] {
        let open = store
            .compact_tallies_at(t(D0, clock), 0)
            .await
            .expect("compact");
        assert_eq!(open, Some(D0), "D0 stays open");
        assert!(store.quarters_by_day().await.expect("read"), "kept by day");
        assert!(
            closed_quarters(d0_hour + open_hour).await > 0,
            "D0's quarters before {open_hour}:00 are closed rows"
        );
        assert_eq!(
            closed_quarters(d0_hour + 24).await,
            closed_quarters(d0_hour + open_hour).await,
            "none after"
        );
        // D0's newest arrays: some quarter before the open hour counted, none after.
        let (before_open, after_open): (i64, i64) = client
            .query(
                "SELECT sum(arraySum(arraySlice(q, 1, ?))), \
                 sum(arraySum(arraySlice(q, ? + 1))) FROM (\
                 SELECT argMax(quarters, generation) AS q FROM rollups_days \
                 WHERE day = ? AND scope = 0 GROUP BY campaign_id, creative, catalog_id, \
                 product_code, metric)",
            )
            .bind(open_hour * 4)
            .bind(open_hour * 4)
            .bind(D0)
            .fetch_one()
            .await
            .expect("D0's arrays");
        assert!(before_open > 0, "D0's closed quarters are kept by day");
        assert_eq!(after_open, 0, "and its open ones are not");
        let after = Box::pin(rollups::transcript(&store, seed, false)).await;
        assert_eq!(before, after, "closed at {open_hour}:00: the same answers");
        assert_eq!(
            total(store.tallies(&whole).await.expect("read").expect("counted")),
            total_before
        );
    }
    // A campaign's array of D0, its first quarter raised by 1,000 in a newer row.
    raise_a_day_array(&client, D0).await;
    assert_eq!(
        total(store.tallies(&whole).await.expect("read").expect("counted")),
        total_before + 1000,
        "the open day's closed quarters are read from its array"
    );
    drop_database(url, &config.database).await;
}

/// Raises the first quarter of one campaign's newest array of `day` (its count of
/// metric 0) by 1,000, in a row of a newer generation.
async fn raise_a_day_array(client: &clickhouse::Client, day: i32) {
    client
        .query(
            "INSERT INTO rollups_days SELECT campaign_id, scope, creative, catalog_id, \
             product_code, metric, day, arrayConcat([quarters[1] + 1000], \
             arraySlice(quarters, 2)), generation + 1 FROM rollups_days \
             WHERE scope = 0 AND metric = 0 AND day = ? \
             ORDER BY generation DESC, campaign_id LIMIT 1",
        )
        .bind(day)
        .execute()
        .await
        .expect("change a day array");
}
