//! Closed hours' rollups summed over the log partitions (issue 26): what keeps a
//! ClickHouse report's read at the rows of its answer, not at the rows times the log
//! partitions times the unmerged versions behind them.
//!
//! A tally is kept per log partition, as an absolute value each partition's single
//! writer owns (`crate::model::tallies`); the reads sum the partitions. A
//! compaction ([`ClickHouseStore::compact`]) sums, for the UTC hours that ended
//! [`CLOSE_AFTER_MS`] (two hours) before it started (closed hours: at 14:30 UTC,
//! those before 12:00), every place's partitions into one row of `rollups_closed`
//! (`argMax` of each partition's rows, summed; stamped with the compaction's time
//! as its `generation`): a bucket closes once every hour it spans has (a quarter
//! or an hour with its hour, a day with its last hour). It sums a UTC day at a time
//! (the first compaction of a long history would otherwise hold all its places in
//! one query's memory), then writes a snapshot row: the first open hour `W` and a
//! time `D` (the compaction's start less a margin). It deletes nothing: `rollups`
//! stays the truth, the closed rows are a cache of its sums. (Closed by whole days,
//! as the first versions did, today's open part was a row per place, quarter hour,
//! log partition and unmerged version for up to a day: most of a zoned report's
//! rows at ten million records.)
//!
//! **Why a read stays exact.** A closed hour can still change: a view's milestone,
//! a cart line's latest value, an order's credit or a better copy of an event may
//! land on an old bucket. So every write of a tally of a bucket that ended at least
//! [`FLAG_AFTER_MS`] (an hour) before the writer's clock (every bucket a compaction
//! may have closed, with an hour to spare: [`first_open_hour`],
//! [`first_unflagged_hour`]) first writes a *flag* of its place in `rollups_late`,
//! stamped with the writer's clock ([`ClickHouseStore::flag_late`]; `insert_tallies`
//! does it before the tallies, so no tally is ever visible without its flag). A read
//! ([`read_sql`]) takes, per place of its range, either
//! - the place's per-partition rows from `rollups`, when its bucket is open (not
//!   before `W`: [`Grain::first_of_hour`]) or it was flagged at or after `D`
//!   (dirty), or
//! - the place's closed row, otherwise.
//!
//! A closed place not flagged since `D` changed last before the compaction read it
//! (a change is flagged before its tally is written, and the margin covers the time
//! between the two writes and the writers' clock skew), so its closed row is its
//! current sum; a flagged one is summed from its partitions like an open one. The
//! next compaction sums the places flagged since the previous `D` again, so the
//! dirty set stays small. Compactions may run concurrently or crash anywhere: a
//! closed row is an absolute sum (a newer generation wins), and the snapshot is
//! written after every row it covers, so a read of the previous snapshot never
//! uses a row it does not cover: its `W` is older, and a place it reads as closed
//! changed after its `D` only if flagged.
//!
//! **A quiet store reads no flags.** Finding the dirty places costs a read two more
//! passes over its conditions (18.16: most of a zoned read's time). The snapshot's
//! read also counts the flags written since `D`; when there are none (no closed day
//! changed since the last compaction), a read leaves the dirty part out, then asks
//! again ([`ClickHouseStore::flagged_since`]) and reads once more with it if a flag
//! landed meanwhile: a tally the read saw was written after its flag, so the flag
//! was there when the read ended. (The dirty part itself reads the flags before the
//! rows, so this closes a window it leaves open.) The reads of the next second share
//! the snapshot read (a report in a zone reads six sets of tallies at once): an
//! older snapshot reads the same sums, as above, and the check after each read still
//! finds the flags it did not count.
//!
//! **Snapshots of earlier versions.** A snapshot row keeps `W`'s day in `bucket`
//! and its hour of that day in `metric` (0 in the rows of the versions that closed
//! whole days, and read as such): a reader of an earlier version reads the day and
//! takes the rest of it from the partitions, as it did; this version reads an
//! earlier one's snapshot as closing whole days.
//!
//! Both tables are new with this version: a store without them reads every day as
//! open until the first compaction. `retail-media rebuild` drops them with the
//! rollups. The embedded store keeps one log partition (the embedded log) and
//! overwrites tallies in place: nothing to compact there.

use std::time::{Duration, Instant};

use clickhouse::Row;
use serde::{Deserialize, Serialize};

use super::error::ch;
use super::rows::insert_rows;
use super::tallies::{PLACE, SUMMED};
use super::ClickHouseStore;
use crate::model::day_of;
use crate::model::tallies::{Grain, Metric, Tally, TallyKey, Text, HOUR_MS};
use crate::write::FastSet;
use crate::StoreError;

/// A UTC hour closes once it ended this long before a compaction starts (by the
/// compactor's clock): the last two or three hours stay open.
pub const CLOSE_AFTER_MS: i64 = 2 * HOUR_MS;

/// A writer flags its tallies of a bucket that ended this long before its clock:
/// every bucket a compaction may have closed ([`CLOSE_AFTER_MS`]), with an hour to
/// spare for the writers' and the compactor's clocks (kept within minutes of each
/// other) and for a writer's time between deciding and writing. Events up to an
/// hour late, the most of the late ones, are not flagged.
pub const FLAG_AFTER_MS: i64 = HOUR_MS;

/// The UTC hour (since the epoch) of an instant, within `i32`.
fn hour_of(ms: i64) -> i32 {
    Grain::Hour.bucket(ms)
}

/// The first hour a compaction started at `now_ms` leaves open.
pub fn first_open_hour(now_ms: i64) -> i32 {
    hour_of(now_ms.saturating_sub(CLOSE_AFTER_MS))
}

/// The first hour whose tallies a writer at `now_ms` writes without a flag: it flags
/// those of every bucket that ends by its start.
pub fn first_unflagged_hour(now_ms: i64) -> i32 {
    hour_of(now_ms.saturating_sub(FLAG_AFTER_MS))
}

/// The UTC day of hour `hour` (the open day of a snapshot whose first open hour it
/// is: the days before are closed).
fn day_of_hour(hour: i32) -> i32 {
    Grain::Day.first_of_hour(hour)
}

/// The `scope` of a snapshot row (no place has it).
const SNAPSHOT_SCOPE: u8 = 255;

/// A place flagged as moved on a day that may be closed.
#[derive(Row, Serialize)]
struct LateCh {
    written: i64,
    campaign_id: String,
    scope: u8,
    grain: u8,
    bucket: i32,
    creative: String,
    catalog_id: String,
    product_code: String,
}

/// A snapshot row.
#[derive(Row, Serialize, Deserialize)]
struct SnapshotCh {
    campaign_id: String,
    scope: u8,
    grain: u8,
    bucket: i32,
    creative: String,
    catalog_id: String,
    product_code: String,
    metric: u16,
    value: i64,
    generation: u64,
}

/// How long a snapshot read serves the reads after it: a report's reads (six at once
/// for a campaign summary in a zone) share one. An older snapshot reads the same sums
/// (see the header), and a flag it did not count is found by
/// [`ClickHouseStore::flagged_since`] after the read.
const SNAPSHOT_KEPT: Duration = Duration::from_secs(1);

/// The last snapshot read and when; the read in progress holds the lock, so the reads
/// that want one meanwhile wait for it instead of asking too.
pub(crate) type SnapshotCache = tokio::sync::Mutex<Option<(Instant, Option<Snapshot>)>>;

/// The latest snapshot as read.
#[derive(Row, Deserialize)]
struct LatestCh {
    n: u64,
    open_day: i32,
    open_hours: u16,
    dirty_from: i64,
    flags: u64,
    days: u64,
}

/// A compacted store's latest snapshot, as a read found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Snapshot {
    /// The first open hour (`W`, hours since the epoch).
    pub(crate) open_hour: i32,
    /// The time from which a closed place's flag makes it dirty (`D`).
    pub(crate) dirty_from: i64,
    /// Whether any place was flagged at or after `D` when the snapshot was read: a
    /// read without (the store is quiet since its last compaction) leaves out the
    /// dirty part, then checks that none was flagged meanwhile (`read_tallies`).
    pub(crate) flagged: bool,
    /// Whether every closed day's quarters are kept as day arrays
    /// (`super::quarter_days`): a store compacted by an earlier version has none
    /// until its next compaction.
    pub(crate) days: bool,
}

impl Snapshot {
    /// The first UTC day not wholly closed (the day of `W`).
    pub(crate) fn open_day(self) -> i32 {
        day_of_hour(self.open_hour)
    }
}

/// `each` grain's condition, joined by `OR`.
fn grains(each: impl Fn(Grain) -> String) -> String {
    Grain::ALL
        .into_iter()
        .map(each)
        .collect::<Vec<_>>()
        .join(" OR ")
}

/// Every grain's buckets closed by a first open hour `to` and not by `from`.
fn hours_sql(from: i32, to: i32) -> String {
    grains(|g| {
        format!(
            "(grain = {} AND bucket >= {} AND bucket < {})",
            g as u8,
            g.first_of_hour(from),
            g.first_of_hour(to)
        )
    })
}

/// The UTC day of a row's bucket, as [`Grain::day_of_bucket`] (floored, so a bucket
/// before 1970 is on its own day too).
fn grains_day_sql() -> String {
    let mut sql = String::from("multiIf(");
    for g in Grain::ALL {
        let per_day = g.per_day();
        sql.push_str(&format!(
            "grain = {}, toInt32(floor(bucket / {per_day})), ",
            g as u8
        ));
    }
    sql.push_str("bucket)");
    sql
}

/// Milliseconds since the epoch, now.
fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// A read's row: a summed tally and the part of the read that found it.
pub(crate) type PartTallyCh = super::rows::SummedTallyCh;

/// The part of a read that finds a place's open days' partitions.
const OPEN: u8 = 0;
/// The part of a read that finds a place's closed day's sum.
const CLOSED: u8 = 1;
/// The part of a read that finds a closed place's partitions, when it was flagged
/// since the snapshot (dirty).
const DIRTY: u8 = 2;

/// The read of a compacted store with `snapshot`, in one query (one view of the
/// tables; the caller adds the marker's branch): `cond` selects the query's places
/// and metrics, `places` its places (for the flags). Binds: `cond`, `cond`, then,
/// when the snapshot found flags, `cond`, `places`. Each row is tagged with its
/// part; [`merge`] keeps a closed place's sum unless it is dirty.
pub(crate) fn read_sql(cond: &str, places: &str, grain: Grain, snapshot: Snapshot) -> String {
    let open = grain.first_of_hour(snapshot.open_hour);
    let mut sql = format!(
        "SELECT {OPEN} AS part, {SUMMED}, metric, toInt64(sum(v)) AS value FROM (\
         SELECT {PLACE}, metric, argMax(value, stamp) AS v FROM rollups \
         WHERE ({cond}) AND bucket >= {open} \
         GROUP BY {PLACE}, metric) GROUP BY {SUMMED}, metric \
         UNION ALL \
         SELECT {CLOSED} AS part, {SUMMED}, metric, argMax(value, generation) AS value \
         FROM rollups_closed WHERE ({cond}) AND bucket < {open} GROUP BY {SUMMED}, metric"
    );
    if snapshot.flagged {
        sql.push_str(&format!(
            " UNION ALL \
             SELECT {DIRTY} AS part, {SUMMED}, metric, toInt64(sum(v)) AS value FROM (\
             SELECT {PLACE}, metric, argMax(value, stamp) AS v FROM rollups \
             WHERE ({cond}) AND bucket < {open} AND ({SUMMED}) IN (\
             SELECT {SUMMED} FROM rollups_late WHERE written >= {} \
             AND ({places}) AND bucket < {open}) \
             GROUP BY {PLACE}, metric) GROUP BY {SUMMED}, metric",
            snapshot.dirty_from
        ));
    }
    sql
}

/// The places (`keys`: columns of [`SUMMED`]) of a compacted store's read, part by
/// part as [`read_sql`] reads them (copies across parts; the caller groups): the open
/// days' from `rollups`, the closed days' sums, and (when the snapshot found flags)
/// the flagged places' rows. Binds as [`read_sql`].
pub(crate) fn places_sql(
    keys: &str,
    cond: &str,
    places: &str,
    grain: Grain,
    snapshot: Snapshot,
) -> String {
    let open = grain.first_of_hour(snapshot.open_hour);
    let mut sql = format!(
        "SELECT DISTINCT {keys} FROM rollups WHERE ({cond}) AND bucket >= {open} \
         UNION ALL \
         SELECT DISTINCT {keys} FROM rollups_closed WHERE ({cond}) AND bucket < {open}"
    );
    if snapshot.flagged {
        sql.push_str(&format!(
            " UNION ALL \
             SELECT DISTINCT {keys} FROM rollups WHERE ({cond}) AND bucket < {open} \
             AND ({SUMMED}) IN (SELECT {SUMMED} FROM rollups_late WHERE written >= {} \
             AND ({places}) AND bucket < {open})",
            snapshot.dirty_from
        ));
    }
    sql
}

/// The rows of a read: every open and dirty row, and the closed sums of the places
/// without a dirty row. A flagged place has partitions' rows (its flag precedes its
/// tallies; a flag whose tallies were never written leaves its sum as it was), and
/// a closed sum comes from those rows, so a place is wholly summed one way or the
/// other.
pub(crate) fn merge(rows: Vec<PartTallyCh>) -> Vec<PartTallyCh> {
    fn key(r: &PartTallyCh) -> (Text, u8, u8, i32, Text, Text, Text) {
        (
            r.campaign_id.clone(),
            r.scope,
            r.grain,
            r.bucket,
            r.creative.clone(),
            r.catalog_id.clone(),
            r.product_code.clone(),
        )
    }
    if !rows.iter().any(|r| r.part == DIRTY) {
        return rows;
    }
    let dirty: FastSet<_> = rows.iter().filter(|r| r.part == DIRTY).map(key).collect();
    rows.into_iter()
        .filter(|r| r.part != CLOSED || !dirty.contains(&key(r)))
        .collect()
}

impl ClickHouseStore {
    /// Flags the places of `rows` in buckets that ended an hour or more ago
    /// ([`first_unflagged_hour`], see the module header); the caller writes the
    /// tallies after this returns.
    pub(crate) async fn flag_late(&self, rows: &[(TallyKey, Tally)]) -> Result<(), StoreError> {
        let now = now_ms();
        let before = first_unflagged_hour(now);
        let mut seen: FastSet<(&str, u8, u8, i32, &str, &str, &str)> = FastSet::default();
        let mut flags = Vec::new();
        for (k, _) in rows {
            let p = &k.place;
            if !k.metric.is_count() || p.bucket >= p.grain.first_of_hour(before) {
                continue;
            }
            let key = (
                p.campaign_id.as_str(),
                p.scope as u8,
                p.grain as u8,
                p.bucket,
                p.creative.as_str(),
                p.catalog_id.as_str(),
                p.product_code.as_str(),
            );
            if seen.insert(key) {
                flags.push(LateCh {
                    written: now,
                    campaign_id: p.campaign_id.to_string(),
                    scope: key.1,
                    grain: key.2,
                    bucket: p.bucket,
                    creative: p.creative.to_string(),
                    catalog_id: p.catalog_id.to_string(),
                    product_code: p.product_code.to_string(),
                });
            }
        }
        insert_rows::<LateCh>(self.client(), "rollups_late", &flags).await
    }

    /// The latest snapshot for a read, `None` before any: as read in the last
    /// [`SNAPSHOT_KEPT`], or read now.
    pub(crate) async fn snapshot(&self) -> Result<Option<Snapshot>, StoreError> {
        let mut kept = self.inner.snapshot.lock().await;
        if let Some((at, snapshot)) = *kept {
            if at.elapsed() < SNAPSHOT_KEPT {
                return Ok(snapshot);
            }
        }
        let at = Instant::now();
        let snapshot = self.latest_snapshot().await?;
        *kept = Some((at, snapshot));
        Ok(snapshot)
    }

    /// Forgets the snapshot kept for reads (a compaction wrote a newer one, or the
    /// tables were cleared).
    async fn forget_snapshot(&self) {
        *self.inner.snapshot.lock().await = None;
    }

    /// The latest snapshot, `None` before any.
    async fn latest_snapshot(&self) -> Result<Option<Snapshot>, StoreError> {
        let r: LatestCh = self
            .client()
            .query(&format!(
                "SELECT count() AS n, argMax(bucket, generation) AS open_day, \
                 argMax(metric, generation) AS open_hours, \
                 argMax(value, generation) AS dirty_from, (SELECT count() FROM rollups_late \
                 WHERE written >= (SELECT argMax(value, generation) FROM rollups_closed \
                 WHERE scope = {SNAPSHOT_SCOPE})) AS flags, \
                 (SELECT count() FROM rollups_days WHERE scope = {days_scope}) AS days \
                 FROM rollups_closed WHERE scope = {SNAPSHOT_SCOPE}",
                days_scope = super::quarter_days::MARKER_SCOPE
            ))
            .fetch_one()
            .await
            .map_err(ch("read the rollups' snapshot"))?;
        Ok((r.n > 0).then_some(Snapshot {
            open_hour: Grain::Hour
                .first_of_day(r.open_day)
                .saturating_add(i32::from(r.open_hours.min(23))),
            dirty_from: r.dirty_from,
            flagged: r.flags > 0,
            days: r.days > 0,
        }))
    }

    /// Whether a place was flagged at or after `snapshot`'s `D` by now: after a read
    /// that left out the dirty part because none was when it began. A tally of a
    /// closed day written since `D` is written after its flag, so a read that saw one
    /// finished after its flag was written, and this, asked after the read, finds it.
    pub(crate) async fn flagged_since(&self, snapshot: Snapshot) -> Result<bool, StoreError> {
        let n: u64 = self
            .client()
            .query("SELECT count() FROM rollups_late WHERE written >= ?")
            .bind(snapshot.dirty_from)
            .fetch_one()
            .await
            .map_err(ch("read the rollups' flags"))?;
        Ok(n > 0)
    }

    /// Sums the closed hours' places (and the closed places flagged since the last
    /// snapshot) over their partitions into `rollups_closed`, then writes the
    /// snapshot (see the module header), as of `started` (ms since the epoch: the
    /// compactor's clock). `margin_ms`: how long a writer may take between a flag
    /// and its tallies, plus the writers' clock skew. Returns the first day still
    /// open.
    pub async fn compact(&self, started: i64, margin_ms: i64) -> Result<i32, StoreError> {
        let previous = self.latest_snapshot().await?;
        let (old_open, since) =
            previous.map_or((i32::MIN, i64::MIN), |s| (s.open_hour, s.dirty_from));
        let open = first_open_hour(started).max(old_open);
        let generation = u64::try_from(started).unwrap_or(0);
        // The places flagged since the last snapshot, of the buckets it had closed.
        let closed = grains(|g| {
            format!(
                "(grain = {} AND bucket < {})",
                g as u8,
                g.first_of_hour(old_open)
            )
        });
        let flagged = format!(
            "({SUMMED}) IN (SELECT {SUMMED} FROM rollups_late WHERE written >= {since} \
             AND ({closed}))"
        );
        // A store compacted by an earlier version: its closed quarters by day first.
        self.convert_quarter_days(generation).await?;
        if previous.is_some() {
            self.sum_closed(&flagged, generation).await?;
            self.quarter_days_of_flagged(since, day_of_hour(old_open), generation)
                .await?;
        }
        // The hours closing now, a UTC day at a time: one query over a long history
        // (the first compaction of a store) would hold every place of it in memory (a
        // month of ten million records took more than 18.16's 4 GB for a query).
        for day in self.days_with_tallies(old_open, open).await? {
            let first = Grain::Hour.first_of_day(day);
            let next = Grain::Hour.first_of_day(day.saturating_add(1));
            self.sum_closed(&hours_sql(old_open.max(first), open.min(next)), generation)
                .await?;
        }
        // Then their day arrays: the days closed now, and the open day's closed hours.
        self.quarter_days_closing(old_open, open, generation)
            .await?;
        let snapshot = SnapshotCh {
            campaign_id: String::new(),
            scope: SNAPSHOT_SCOPE,
            grain: 0,
            bucket: day_of_hour(open),
            creative: String::new(),
            catalog_id: String::new(),
            product_code: String::new(),
            metric: u16::try_from(open.rem_euclid(24)).unwrap_or(0),
            value: started.saturating_sub(margin_ms.max(0)),
            generation,
        };
        insert_rows::<SnapshotCh>(self.client(), "rollups_closed", &[snapshot]).await?;
        self.forget_snapshot().await;
        if previous.is_some() {
            self.drop_flags_before(day_of(since) - 1).await;
        }
        Ok(day_of_hour(open))
    }

    /// Sums the places `cond` selects (every count of theirs: not the markers nor the
    /// partitions' progress, [`Metric::FIRST_NOT_COUNT`]..) over their partitions into
    /// `rollups_closed`, as of `generation`.
    async fn sum_closed(&self, cond: &str, generation: u64) -> Result<(), StoreError> {
        let sql = format!(
            "INSERT INTO rollups_closed ({SUMMED}, metric, value, generation) \
             SELECT {SUMMED}, metric, toInt64(sum(v)), toUInt64(?) FROM (\
             SELECT {SUMMED}, log_partition, metric, argMax(value, stamp) AS v FROM rollups \
             WHERE metric < {counts_end} AND ({cond}) \
             GROUP BY {SUMMED}, log_partition, metric) \
             GROUP BY {SUMMED}, metric",
            counts_end = Metric::FIRST_NOT_COUNT
        );
        self.client()
            .query(&sql)
            .bind(generation)
            .execute()
            .await
            .map_err(ch("compact the rollups"))
    }

    /// The UTC days with a tally of any grain closed by a first open hour `to` and
    /// not by `from`, in order.
    async fn days_with_tallies(&self, from: i32, to: i32) -> Result<Vec<i32>, StoreError> {
        let (day, within) = (grains_day_sql(), hours_sql(from, to));
        self.client()
            .query(&format!(
                "SELECT DISTINCT {day} AS day FROM rollups WHERE metric < {counts_end} \
                 AND ({within}) ORDER BY day",
                counts_end = Metric::FIRST_NOT_COUNT
            ))
            .fetch_all()
            .await
            .map_err(ch("list the days to compact"))
    }

    /// Drops the flags written before `day` (UTC): older than the day before the
    /// previous snapshot's time, no compaction or read needs them (a read uses the
    /// snapshot it has just read). Best effort: a failure (a cluster's Distributed
    /// table takes no `DROP PARTITION`: drop them from `rollups_late_local` by hand)
    /// is logged, and the flags only cost space.
    async fn drop_flags_before(&self, day: i32) {
        let parts: Result<Vec<String>, _> = self
            .client()
            .query(
                "SELECT DISTINCT partition FROM system.parts \
                 WHERE database = currentDatabase() AND table = 'rollups_late' AND active",
            )
            .fetch_all()
            .await;
        let old: Vec<i64> = match parts {
            Ok(parts) => parts
                .iter()
                .filter_map(|p| p.parse::<i64>().ok())
                .filter(|d| *d < i64::from(day))
                .collect(),
            Err(e) => {
                tracing::warn!(error = %e, "could not list the late flags' days");
                return;
            }
        };
        for d in old {
            let drop = format!("ALTER TABLE rollups_late DROP PARTITION {d}");
            if let Err(e) = self.client().query(&drop).execute().await {
                tracing::warn!(error = %e, day = d, "could not drop a day of late flags");
            }
        }
    }

    /// Drops the compaction's tables and creates them empty (`retail-media rebuild`).
    pub(crate) async fn clear_compaction(&self) -> Result<(), StoreError> {
        for (table, ddl) in [
            ("rollups_closed", rm_schemas::tables::ROLLUPS_CLOSED),
            ("rollups_late", rm_schemas::tables::ROLLUPS_LATE),
            ("rollups_days", rm_schemas::tables::ROLLUPS_DAYS),
        ] {
            self.client()
                .query(&format!("DROP TABLE IF EXISTS {table}"))
                .execute()
                .await
                .map_err(ch("drop the compaction's tables"))?;
            self.client()
                .query_raw(ddl)
                .execute()
                .await
                .map_err(ch("create the compaction's tables"))?;
        }
        self.forget_snapshot().await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// 2026-11-28T00:00:00Z.
    const MIDNIGHT: i64 = 20_785 * 86_400_000;

    #[test]
    fn an_hour_is_flagged_an_hour_after_its_end_and_closed_after_two() {
        let h = hour_of(MIDNIGHT) + 14;
        let at = |hour: i64, ms: i64| MIDNIGHT + hour * HOUR_MS + ms;
        assert_eq!(first_unflagged_hour(at(14, HOUR_MS - 1)), h - 1);
        assert_eq!(first_unflagged_hour(at(15, 0)), h);
        assert_eq!(first_open_hour(at(16, -1)), h - 1);
        assert_eq!(first_open_hour(at(16, 0)), h);
        // 14:30: the quarters and hours before 12:00 are closed, today is not.
        let open = first_open_hour(at(14, 1_800_000));
        assert_eq!(Grain::Quarter.first_of_hour(open), 4 * (h - 2));
        assert_eq!(Grain::Hour.first_of_hour(open), h - 2);
        assert_eq!(Grain::Day.first_of_hour(open), day_of(MIDNIGHT));
        // Yesterday's last hour closes at 02:00, and yesterday with it.
        assert_eq!(
            Grain::Day.first_of_hour(first_open_hour(at(2, -1))),
            day_of(MIDNIGHT) - 1
        );
        assert_eq!(
            Grain::Day.first_of_hour(first_open_hour(at(2, 0))),
            day_of(MIDNIGHT)
        );
    }

    proptest! {
        /// Every bucket a compaction started at `c` closes is flagged by a writer
        /// whose clock reads up to an hour behind the compactor's when it writes (a
        /// writer ahead of it flags more), and the last two hours are never closed.
        #[test]
        fn a_closed_bucket_is_flagged_by_every_writer_within_the_margin(
            c in -10_000_000_000_000i64..10_000_000_000_000,
            behind in 0..=HOUR_MS,
            bucket in -100_000_000i32..100_000_000,
        ) {
            let (open, flagged) = (first_open_hour(c), first_unflagged_hour(c - behind));
            for g in Grain::ALL {
                if bucket < g.first_of_hour(open) {
                    prop_assert!(bucket < g.first_of_hour(flagged));
                    prop_assert!(g.start_ms(bucket.saturating_add(1)) <= c - 2 * HOUR_MS);
                }
            }
            prop_assert!(open <= hour_of(c) - 2 && open >= hour_of(c) - 3);
        }

        /// A bucket is before an hour exactly when all of it is.
        #[test]
        fn a_bucket_is_before_an_hour_when_it_ends_by_its_start(
            hour in -10_000_000i32..10_000_000,
            bucket in -100_000_000i32..100_000_000,
        ) {
            for g in Grain::ALL {
                let ends_by = g.start_ms(bucket) + (g.start_ms(1) - g.start_ms(0))
                    <= Grain::Hour.start_ms(hour);
                prop_assert_eq!(bucket < g.first_of_hour(hour), ends_by, "{:?}", g);
            }
        }
    }

    #[test]
    fn a_snapshot_hour_splits_into_its_day_and_hours() {
        let w = hour_of(MIDNIGHT) + 5;
        let sql = hours_sql(w - 30, w);
        // Quarters and hours of the thirty hours; of days, yesterday (its last hours
        // close now) and not today.
        assert!(
            sql.contains(&format!(
                "(grain = 1 AND bucket >= {} AND bucket < {})",
                4 * (w - 30),
                4 * w
            )),
            "{sql}"
        );
        assert!(
            sql.contains(&format!(
                "(grain = 2 AND bucket >= {} AND bucket < {w})",
                w - 30
            )),
            "{sql}"
        );
        let today = day_of(MIDNIGHT);
        assert!(
            sql.contains(&format!(
                "(grain = 0 AND bucket >= {} AND bucket < {today})",
                today - 2
            )),
            "{sql}"
        );
        assert_eq!(day_of_hour(w), today);
        assert_eq!(day_of_hour(hour_of(MIDNIGHT) - 1), today - 1);
    }

    #[test]
    fn quarters_and_days_of_buckets() {
        assert_eq!(Grain::Day.day_of_bucket(20_000), 20_000);
        assert_eq!(Grain::Quarter.day_of_bucket(96 * 3 + 95), 3);
        assert_eq!(Grain::Quarter.day_of_bucket(-1), -1);
        assert_eq!(Grain::Hour.day_of_bucket(24 * 3 + 23), 3);
        assert_eq!(Grain::Quarter.first_of_day(3), 288);
        assert_eq!(Grain::Hour.first_of_day(3), 72);
        assert_eq!(Grain::Quarter.first_of_day(i32::MIN), i32::MIN);
        assert_eq!(Grain::Quarter.first_of_day(i32::MAX), i32::MAX);
    }

    #[test]
    fn a_rows_day_is_its_bucket_floored_by_its_grains_buckets_a_day() {
        let sql = grains_day_sql();
        for (g, per_day) in [(0, 1), (1, 96), (2, 24)] {
            assert!(
                sql.contains(&format!("grain = {g}, toInt32(floor(bucket / {per_day}))")),
                "{sql}"
            );
        }
    }

    #[test]
    fn a_read_names_its_condition_three_times_and_its_places_once() {
        let snap = |flagged| Snapshot {
            open_hour: 72,
            dirty_from: 77,
            flagged,
            days: false,
        };
        let sql = read_sql("C", "P", Grain::Quarter, snap(true));
        assert_eq!(sql.matches("(C)").count(), 3);
        assert_eq!(sql.matches("(P)").count(), 1);
        assert!(sql.contains("bucket >= 288") && sql.contains("written >= 77"));
        assert!(read_sql("C", "P", Grain::Day, snap(true)).contains("bucket < 3"));
        // No flag since the snapshot: no dirty part, so neither its condition nor
        // the places.
        let quiet = read_sql("C", "P", Grain::Quarter, snap(false));
        assert_eq!(quiet.matches("(C)").count(), 2);
        assert!(!quiet.contains("(P)") && !quiet.contains("rollups_late"));
        let keys = places_sql("K", "C", "P", Grain::Hour, snap(false));
        assert_eq!(keys.matches("(C)").count(), 2);
        assert!(!keys.contains("rollups_late") && keys.contains("bucket >= 72"));
        let keys = places_sql("K", "C", "P", Grain::Hour, snap(true));
        assert_eq!(keys.matches("(C)").count(), 3);
        assert_eq!(keys.matches("(P)").count(), 1);
    }

    fn row(part: u8, campaign: &str, value: i64) -> PartTallyCh {
        PartTallyCh {
            part,
            campaign_id: campaign.into(),
            scope: 0,
            grain: 0,
            bucket: 1,
            creative: Text::default(),
            catalog_id: Text::default(),
            product_code: Text::default(),
            metric: 0,
            value,
        }
    }

    #[test]
    fn a_dirty_place_is_read_from_its_partitions_only() {
        let rows = vec![
            row(CLOSED, "a", 5),
            row(CLOSED, "b", 7),
            row(DIRTY, "b", 9),
            row(OPEN, "c", 1),
        ];
        let kept: Vec<(u8, Text, i64)> = merge(rows)
            .into_iter()
            .map(|r| (r.part, r.campaign_id, r.value))
            .collect();
        assert_eq!(
            kept,
            vec![
                (CLOSED, "a".into(), 5),
                (DIRTY, "b".into(), 9),
                (OPEN, "c".into(), 1)
            ]
        );
    }
}
