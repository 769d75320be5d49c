//! Tallies (`rm_store::model::tallies`) on every backend: billable clicks decided as
//! they arrive, summed per campaign and day, equal to what the ads report counts from
//! the facts, through replays and a crash between the tallies' write and the served
//! ads' states; and a store written before tallies, counted into them once.

use std::collections::BTreeMap;

use rm_aggregator::batch::{fold_at, Policy, Position};
use rm_aggregator::pipeline::load_sets;
use rm_schemas::{EventRecord, InteractionEvent, InteractionType as T};
use rm_store::model::tallies::DayTally;
use rm_store::model::{format_day, parse_day};
use rm_store::BatchWrite;

use super::{all, records, t, Store, D0, D1, TEN};

const MIN: i64 = 60_000;

/// A served ad's click by shopper `session` at `ms`.
fn click(ad: &str, session: &str, ms: i64) -> InteractionEvent {
    InteractionEvent {
        session_id: Some(session.into()),
        ..super::event(T::AdClick, ad, ms)
    }
}

/// The log partition of served ad `i` (records are keyed by ad id), 3 partitions.
fn partition(i: usize) -> i32 {
    (i % 3) as i32
}

/// Six served ads of two campaigns, each clicked by several shoppers over two days,
/// their clicks re-fired; in two batches, each with its records' log positions.
fn batches() -> [(Vec<EventRecord>, Vec<Position>); 2] {
    let ads: Vec<String> = (0..6)
        .map(|i| format!("rm1.c{}.ad{i}", 1 + i % 2))
        .collect();
    let mut next = [0i64; 3];
    let mut out: [(Vec<EventRecord>, Vec<Position>); 2] = Default::default();
    for (i, ad) in ads.iter().enumerate() {
        // Ad 5's first click is on the second day.
        let first = if i == 5 {
            t(D1, TEN)
        } else {
            t(D0, TEN + i as i64 * MIN)
        };
        let events = [
            (0, click(ad, "s-a", first)),
            (0, click(ad, "s-b", first + MIN)),
            (1, click(ad, "s-a", first)),
            (1, click(ad, "s-c", t(D1, TEN + 30 * MIN))),
            (1, super::event(T::AdImpression, ad, first - MIN)),
        ];
        for (batch, e) in events {
            let p = partition(i);
            let pi = usize::try_from(p).expect("partition");
            out[batch].0.extend(records(vec![e]));
            out[batch].1.push((p, next[pi]));
            next[pi] += 1;
        }
    }
    out
}

/// The batch folded as the aggregator does after a restart (sets and tallies loaded).
async fn fold_loaded(store: &impl Store, batch: &(Vec<EventRecord>, Vec<Position>)) -> BatchWrite {
    let mut sets = load_sets(store, &batch.0, &batch.1).await.expect("load");
    fold_at(&batch.0, Some(&batch.1), &mut sets, &Policy::default()).0
}

/// Billable clicks per (campaign, day) as the ads report counts them.
async fn report_clicks(store: &impl Store) -> BTreeMap<(String, i32), i64> {
    let mut by = BTreeMap::new();
    for r in store.ads(&all()).await.expect("ads") {
        if r.clicks > 0 {
            *by.entry((r.campaign_id, parse_day(&r.day).expect("day")))
                .or_default() += i64::try_from(r.clicks).expect("clicks");
        }
    }
    by
}

fn as_map(rows: &[DayTally]) -> BTreeMap<(String, i32), i64> {
    rows.iter()
        .map(|d| ((d.campaign_id.clone(), d.day), d.value))
        .collect()
}

async fn clicks(store: &impl Store) -> Vec<DayTally> {
    rm_store::billable_clicks(store, None)
        .await
        .expect("tallies")
        .expect("counted")
}

fn set(campaigns: &[&str]) -> Option<std::collections::BTreeSet<String>> {
    Some(campaigns.iter().map(|c| (*c).to_owned()).collect())
}

/// The store reads as not counted into tallies (before its backfill).
async fn not_counted_yet(store: &impl Store) {
    let read = rm_store::billable_clicks(store, None).await;
    assert!(
        read.expect("tallies").is_none(),
        "not counted before the backfill"
    );
    let read = rm_store::billable_clicks(store, set(&[])).await;
    assert!(
        read.expect("tallies").is_none(),
        "not counted, whatever is asked"
    );
}

/// The suite; returns a transcript for comparing backends.
pub(crate) async fn suite(store: &impl Store) -> Vec<String> {
    assert!(
        !store.backfill_tallies().await.expect("backfill"),
        "a new store (no facts) is counted when opened"
    );
    assert!(clicks(store).await.is_empty());
    let read = rm_store::billable_clicks(store, set(&[])).await;
    assert_eq!(
        read.expect("tallies"),
        Some(Vec::new()),
        "counted, no campaign asked"
    );

    let [a, b] = batches();
    let w = fold_loaded(store, &a).await;
    assert!(!w.tallies.is_empty());
    store.write(&w).await.expect("write");
    store.write(&w).await.expect("write again");

    // A crash after batch b's tallies were written and before its served ads' states:
    // the replay decides as the first time and skips what the tallies hold.
    let crashed = fold_loaded(store, &b).await;
    store
        .write(&BatchWrite {
            tallies: crashed.tallies.clone(),
            ..BatchWrite::default()
        })
        .await
        .expect("write the tallies only");
    let replayed = fold_loaded(store, &b).await;
    assert!(
        replayed.tallies.is_empty(),
        "every click of b is at or below its stamp"
    );
    store.write(&replayed).await.expect("write the replay");
    // Stored, offsets not committed: replayed once more.
    let again = fold_loaded(store, &b).await;
    assert!(again.tallies.is_empty());
    store.write(&again).await.expect("write");
    // The whole log again from the start (a consumer group reset).
    for batch in [&a, &b] {
        let w = fold_loaded(store, batch).await;
        assert!(w.tallies.is_empty());
        store.write(&w).await.expect("write");
    }

    let got = clicks(store).await;
    // One billable click per served ad, on its first click's day.
    let want: BTreeMap<(String, i32), i64> = [
        (("c1".to_owned(), D0), 3),
        (("c2".to_owned(), D0), 2),
        (("c2".to_owned(), D1), 1),
    ]
    .into_iter()
    .collect();
    assert_eq!(as_map(&got), want);
    assert_eq!(
        as_map(&got),
        report_clicks(store).await,
        "tallies and the ads report agree"
    );
    let c2 = rm_store::billable_clicks(store, set(&["c2"]))
        .await
        .expect("tallies")
        .expect("counted");
    assert!(
        c2.iter().all(|d| d.campaign_id == "c2") && c2.len() == 2,
        "{c2:?}"
    );
    got.iter()
        .map(|d| format!("{} {} {}", d.campaign_id, format_day(d.day), d.value))
        .collect()
}

/// A store holding facts of a version without tallies (written with no positions:
/// nothing tallied, no marker) reads as not counted, then is counted once by the
/// backfill, to what the ads report counts, and its views to what the funnel report
/// counts.
pub(crate) async fn backfilled_as_the_report_counts(store: &impl Store) {
    not_counted_yet(store).await;
    let report = report_clicks(store).await;
    assert!(!report.is_empty(), "the suite's store has billable clicks");
    let funnel = super::rollups::views_of_reports(store).await;
    assert!(!funnel.is_empty(), "the suite's store has views");
    let cart_adds = super::rollups::cart_adds_of_reports(store).await;
    assert!(!cart_adds.is_empty(), "the suite's store has cart adds");
    assert!(store.backfill_tallies().await.expect("backfill"));
    assert_eq!(super::rollups::cart_adds_of_tallies(store).await, cart_adds);
    assert_eq!(as_map(&clicks(store).await), report);
    assert_eq!(
        super::rollups::views_of_tallies(store, rm_store::model::tallies::Scope::Video).await,
        funnel
    );
    assert!(!store.backfill_tallies().await.expect("once"));
    assert_eq!(as_map(&clicks(store).await), report);
}

/// Two aggregators' backfills of one store (replicas started together on ClickHouse,
/// the second reading after the first wrote a batch): the smaller count wins, the one
/// read before any new click was tallied.
pub(crate) async fn the_first_of_two_backfills_wins(store: &impl Store) {
    use rm_store::model::tallies::{Grain, Metric, Place, Scope, Tally, TallyKey};
    let key = |c: &str| TallyKey {
        place: Place {
            campaign_id: c.into(),
            scope: Scope::Campaign,
            grain: Grain::Day,
            bucket: D0,
            ..Place::marker()
        },
        metric: Metric::BILLABLE_CLICKS,
    };
    let backfill = |v: i64| BatchWrite {
        tallies: vec![
            (key("c9"), Tally { value: v, stamp: 0 }),
            (TallyKey::marker(), Tally { value: 1, stamp: 0 }),
        ],
        ..BatchWrite::default()
    };
    store.write(&backfill(5)).await.expect("first backfill");
    store.write(&backfill(7)).await.expect("second backfill");
    let got = rm_store::billable_clicks(store, set(&["c9"]))
        .await
        .expect("tallies")
        .expect("counted");
    assert_eq!(
        as_map(&got),
        [(("c9".to_owned(), D0), 5)].into_iter().collect()
    );
}
