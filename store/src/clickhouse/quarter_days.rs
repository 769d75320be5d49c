//! A closed day's quarter hours as one row (issue 26): `rollups_days`
//! ([`rm_schemas::tables::ROLLUPS_DAYS`]), what keeps a report by hour, day or week
//! in a zone (or a summary) at the rows of its days, not of their hours and quarters.
//!
//! A report by day in Asia/Kolkata (+5:30) reads, for each UTC day, the day, the
//! five hours and the two quarters that leave it for the next local day
//! (`crate::model::periods::mixed`): eight closed rows a place and day, in three
//! queries. Here a place's closed quarters of a UTC day are one row, their 96 sums
//! in an array; a read cuts each day's array where the report's periods (and its
//! range) start, takes the slices' sums on the server ([`slices_sql`]: a row per
//! place-day, the sums in an array) and the reader groups them as the server groups
//! quarters ([`Slicing::tallies`]), beside one query of the quarters read from the
//! partitions. Every group boundary of
//! `Group::Every { width, shift }` falls where `(bucket + shift)` is a multiple of
//! the width, so of `gcd(width, 96)` too: the same offsets of every UTC day
//! ([`cuts`]; extra cuts only make finer slices of the same sums). A report by hour
//! in Kolkata cuts a day 25 times: the arrays cost the same at any volume, the
//! quarters' rows fill up as a store grows, and read as a row per place-day the
//! campaigns' week by Kolkata hour at 10M takes 113-123 ms against 181-208 as a row
//! per slice grouped on the server (`BENCHMARKS.md`).
//!
//! **Why it stays exact.** The compaction writes a place's day array from its closed
//! quarters after it sums them (`compact.rs`): for each day it closes, and for the
//! place-days of the places it sums again because they were flagged. So an array is
//! the sum its closed rows hold, written before the snapshot that makes its day
//! closed, and it changes when they do. A read takes a place-day either wholly from
//! its array or, when any quarter of it was flagged since the snapshot's `D`, wholly
//! from the partitions' rows in `rollups` ([`read_sql`]): the argument of the closed
//! rows' (`compact.rs`) applies to the array as one closed place.
//!
//! The open day (the snapshot's first open hour's) has an array too, of its closed
//! hours' quarters (zeros after them), written again by each compaction; a read cuts
//! it where the snapshot's first open hour starts and reads the quarters from there
//! from the partitions. A reader of an older snapshot may find a newer array: its
//! quarters before that reader's open hour are the same closed sums (the argument
//! above), and the ones after are not read.
//!
//! **Stores compacted before.** The table is new with this version. A compaction
//! finds no marker row (`scope` 255), writes the arrays of every day that has
//! closed quarters, then the marker ([`ClickHouseStore::convert_quarter_days`]);
//! until the marker is read with a snapshot, reads take the quarters as before.

use clickhouse::Row;
use serde::{Deserialize, Serialize};

use super::compact::Snapshot;
use super::error::ch;
use super::rows::{corrupt, insert_rows, metric_of, scope_of};
use super::tallies::{grouped, PLACE, SUMMED};
use super::ClickHouseStore;
use crate::model::tallies::{
    Grain, Group, Metric, Place, SummedTally, TallyQuery, Text, QUARTERS_PER_DAY,
};
use crate::model::FastMap;
use crate::StoreError;

/// The `scope` of the marker row: every closed day's quarters are kept.
pub(crate) const MARKER_SCOPE: u8 = 255;

/// Quarters in a UTC day.
const PER_DAY: i32 = QUARTERS_PER_DAY;

/// The place of a day array, without the bucket (its `day`).
const DAY_PLACE: &str = "campaign_id, scope, creative, catalog_id, product_code";

/// A place's UTC day of a quarter bucket (floored).
const DAY_OF_BUCKET: &str = "toInt32(floor(bucket / 96))";

/// The marker row.
#[derive(Row, Serialize)]
struct MarkerCh {
    campaign_id: String,
    scope: u8,
    creative: String,
    catalog_id: String,
    product_code: String,
    metric: u16,
    day: i32,
    quarters: Vec<i64>,
    generation: u64,
}

/// The offsets in a UTC day (ascending, from 0) where a read of `q` cuts each day's
/// quarters: every group's first quarter and the range's ends fall on one. `None`
/// where a read of `q` wants each quarter apart (nothing to slice).
pub(crate) fn cuts(q: &TallyQuery) -> Option<Vec<i32>> {
    let (step, shift) = match q.group {
        Group::Whole => (PER_DAY, 0),
        Group::Every { width, shift } if width > 0 => (gcd(width, PER_DAY), shift),
        Group::Each | Group::Every { .. } => return None,
    };
    let mut cuts: Vec<i32> = (0..PER_DAY)
        .filter(|s| (s + shift).rem_euclid(step) == 0)
        .collect();
    cuts.push(0);
    cuts.push(q.from.rem_euclid(PER_DAY));
    cuts.push(q.to.saturating_add(1).rem_euclid(PER_DAY));
    cuts.sort_unstable();
    cuts.dedup();
    Some(cuts)
}

fn gcd(a: i32, b: i32) -> i32 {
    let (mut a, mut b) = (a.abs(), b.abs());
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a.max(1)
}

/// Cuts of a day beyond which the slices are taken from the newest array's running
/// sums rather than each read with an `argMax` of its own (see [`slices_sql`]).
const ARRAY_FROM_CUTS: usize = 8;

/// Each slice of a place-day's newest array between `cuts` (the first is 0): the
/// aggregates of a place-day, and the array of the slices' sums in the order of
/// `cuts` (one row a place-day: the reader takes the slices apart,
/// [`Slicing::tallies`]). Each sum is a difference of the day's running sums where
/// its slice ends, taken one of two ways, each the cheaper on 18.16 where it is used
/// (`BENCHMARKS.md`, session 33: the 10M bench store):
/// - a few cuts (a report by day or week, a summary): an `argMax` of each running
///   sum where a slice ends (`p0`, `p1`, ...). `argMax` takes an array slowly (about
///   a microsecond more a row than a number), and the Kolkata campaign summary's
///   thirty days of rows took 115-126 ms with one against 72-89 without;
/// - more than [`ARRAY_FROM_CUTS`] (a report by hour: 25 cuts in Kolkata): the newest
///   array's running sums once (`c`), each sum an element of it: the week by Kolkata
///   hour's query took 20 ms where 26 aggregates a row took 28.
fn slices_sql(cuts: &[i32]) -> (String, String) {
    let by_array = cuts.len() > ARRAY_FROM_CUTS;
    let mut sums = Vec::with_capacity(cuts.len());
    let mut diffs = Vec::with_capacity(cuts.len());
    let mut before: Option<String> = None;
    for i in 0..cuts.len() {
        let end = cuts.get(i + 1).copied().unwrap_or(PER_DAY);
        let at = if by_array {
            format!("c[{end}]")
        } else {
            sums.push(format!(
                "argMax(arrayCumSum(quarters)[{end}], generation) AS p{i}"
            ));
            format!("p{i}")
        };
        diffs.push(match &before {
            None => at.clone(),
            Some(b) => format!("{at} - {b}"),
        });
        before = Some(at);
    }
    let sums = if by_array {
        "arrayCumSum(argMax(quarters, generation)) AS c".to_owned()
    } else {
        sums.join(", ")
    };
    (sums, format!("[{}]", diffs.join(", ")))
}

/// A place-day's slices, as [`DaysRead::slices`] reads them.
#[derive(Debug, Row, Deserialize)]
pub(crate) struct DaySlicesCh {
    campaign_id: Text,
    scope: u8,
    creative: Text,
    catalog_id: Text,
    product_code: Text,
    metric: u16,
    day: i32,
    slices: Vec<i64>,
}

/// How the reader takes a read's day slices apart: where each slice starts in its
/// day, the range, and the query's groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Slicing {
    cuts: Vec<i32>,
    from: i32,
    to: i32,
    group: Group,
}

impl Slicing {
    /// The quarter tallies of `rows`' slices: each slice of the range under its first
    /// bucket, summed with the others of its place, metric and group (under the
    /// least first bucket among them), as the server sums quarters
    /// ([`super::tallies`]); slices and groups that sum to nothing left out (a reader
    /// takes a missing tally as 0).
    pub(crate) fn tallies(&self, rows: &[DaySlicesCh]) -> Result<Vec<SummedTally>, StoreError> {
        type Key<'r> = (&'r str, u8, &'r str, &'r str, &'r str, u16, i64);
        let mut groups: FastMap<Key<'_>, (i32, i64)> = FastMap::default();
        for r in rows {
            if r.slices.len() != self.cuts.len() {
                return Err(corrupt("day slices", &r.slices.len().to_string()));
            }
            for (cut, value) in self.cuts.iter().zip(&r.slices) {
                let bucket = r.day.saturating_mul(PER_DAY).saturating_add(*cut);
                if *value == 0 || bucket < self.from || bucket > self.to {
                    continue;
                }
                let group = self.group.of(bucket);
                let key = (
                    r.campaign_id.as_str(),
                    r.scope,
                    r.creative.as_str(),
                    r.catalog_id.as_str(),
                    r.product_code.as_str(),
                    r.metric,
                    group,
                );
                let at = groups.entry(key).or_insert((bucket, 0));
                at.0 = at.0.min(bucket);
                at.1 += value;
            }
        }
        groups
            .into_iter()
            .filter(|(_, (_, value))| *value != 0)
            .map(
                |((campaign, scope, creative, catalog, product, metric, _), (bucket, value))| {
                    Ok(SummedTally {
                        place: Place {
                            campaign_id: campaign.into(),
                            scope: scope_of(scope)?,
                            grain: Grain::Quarter,
                            bucket,
                            creative: creative.into(),
                            catalog_id: catalog.into(),
                            product_code: product.into(),
                            partition: 0,
                        },
                        metric: metric_of(metric)?,
                        value,
                    })
                },
            )
            .collect()
    }
}

/// A read of a compacted store's quarter hours by slices of their days' arrays
/// ([`read_sql`]): two queries, read at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DaysRead {
    /// The quarters read from the partitions (the open ones, and those of place-days
    /// flagged since the snapshot), summed by the query's groups on the server
    /// ([`grouped`]), rows of `PartTallyCh`; and the conditions it names, in order.
    pub(crate) quarters: (String, Vec<Bind>),
    /// The day arrays' slices, a row per place-day ([`DaySlicesCh`]), and the
    /// conditions it names.
    pub(crate) slices: (String, Vec<Bind>),
    /// How the reader takes the slices apart.
    pub(crate) slicing: Slicing,
}

/// A condition a read's SQL names, in the order it names them (the caller binds each
/// one's values).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bind {
    /// The places and metrics in `rollups` and `rollups_closed`.
    Cond,
    /// The places, in `rollups_late`.
    Places,
    /// The place-days in `rollups_days`.
    Days,
}

/// The read of a compacted store's quarter hours by slices of their closed days
/// (see the header), or `None` where it does not apply: not quarters, a read of
/// sub-ranges or a page, groups narrower than an hour (`Group::spans_hours`: up to
/// 96 slices a day), or a store whose days are not all kept as arrays. `cond`
/// selects the query's places and metrics in `rollups`, `places` its places (for the
/// flags), `days` its rows of `rollups_days`. The open day's array holds its closed
/// hours' quarters: it is cut where the snapshot's first open hour starts too, and
/// its slices from there on are left to the open part.
///
/// The slices come as a row per place-day with an array of their sums, taken apart
/// by the reader ([`Slicing::tallies`]): one row a slice (`arrayJoin`) grouped on
/// the server cost 18.16 four to five times as long, copying each row's four texts
/// to every slice and grouping the copies by them (measured: BENCHMARKS.md).
pub(crate) fn read_sql(
    q: &TallyQuery,
    cond: &str,
    places: &str,
    days: &str,
    snapshot: Snapshot,
) -> Option<DaysRead> {
    if q.grain != Grain::Quarter
        || !q.only.is_empty()
        || q.page.is_some()
        || !snapshot.days
        || !q.group.spans_hours()
    {
        return None;
    }
    let open = Grain::Quarter.first_of_hour(snapshot.open_hour);
    let mut cuts = cuts(q)?;
    cuts.push(open.rem_euclid(PER_DAY));
    cuts.sort_unstable();
    cuts.dedup();
    let (sums, diffs) = slices_sql(&cuts);
    let open_day = snapshot.open_day();
    let flagged_days = format!(
        "SELECT {DAY_PLACE}, {DAY_OF_BUCKET} FROM rollups_late WHERE written >= {} \
         AND ({places}) AND bucket < {open}",
        snapshot.dirty_from
    );
    let mut quarters = format!(
        "SELECT 0 AS part, {SUMMED}, metric, toInt64(sum(v)) AS value FROM (\
         SELECT {PLACE}, metric, argMax(value, stamp) AS v FROM rollups \
         WHERE ({cond}) AND bucket >= {open} \
         GROUP BY {PLACE}, metric) GROUP BY {SUMMED}, metric"
    );
    let mut quarter_binds = vec![Bind::Cond];
    let mut not_flagged = String::new();
    let mut slice_binds = vec![Bind::Days];
    if snapshot.flagged {
        quarters.push_str(&format!(
            " UNION ALL \
             SELECT 2 AS part, {SUMMED}, metric, toInt64(sum(v)) AS value FROM (\
             SELECT {PLACE}, metric, argMax(value, stamp) AS v FROM rollups \
             WHERE ({cond}) AND bucket < {open} \
             AND ({DAY_PLACE}, {DAY_OF_BUCKET}) IN ({flagged_days}) \
             GROUP BY {PLACE}, metric) GROUP BY {SUMMED}, metric"
        ));
        quarter_binds.extend([Bind::Cond, Bind::Places]);
        not_flagged = format!(" AND ({DAY_PLACE}, day) NOT IN ({flagged_days})");
        slice_binds.push(Bind::Places);
    }
    let slices = format!(
        "SELECT {DAY_PLACE}, metric, day, {diffs} AS slices FROM (\
         SELECT {DAY_PLACE}, metric, day, {sums} \
         FROM rollups_days WHERE ({days}) AND day <= {open_day}{not_flagged} \
         GROUP BY {DAY_PLACE}, metric, day)"
    );
    Some(DaysRead {
        quarters: (grouped(q, quarters), quarter_binds),
        slices: (slices, slice_binds),
        slicing: Slicing {
            cuts,
            from: q.from,
            to: q.to.min(open.saturating_sub(1)),
            group: q.group,
        },
    })
}

impl ClickHouseStore {
    /// Writes the day arrays of the closed quarters `cond` selects in
    /// `rollups_closed` (whole place-days: `cond` names days, or places and days), as
    /// of `generation`.
    async fn write_quarter_days(&self, cond: &str, generation: u64) -> Result<(), StoreError> {
        let sql = format!(
            "INSERT INTO rollups_days ({DAY_PLACE}, metric, day, quarters, generation) \
             SELECT {DAY_PLACE}, metric, d, sumForEach(arrayConcat(\
             arrayResize(emptyArrayInt64(), o, toInt64(0)), [v], \
             arrayResize(emptyArrayInt64(), {last} - o, toInt64(0)))), toUInt64(?) FROM (\
             SELECT {DAY_PLACE}, metric, {DAY_OF_BUCKET} AS d, \
             toUInt64(bucket - d * {PER_DAY}) AS o, argMax(value, generation) AS v \
             FROM rollups_closed WHERE grain = {grain} AND scope != {MARKER_SCOPE} \
             AND metric < {counts_end} AND ({cond}) \
             GROUP BY {DAY_PLACE}, metric, bucket) \
             GROUP BY {DAY_PLACE}, metric, d",
            last = PER_DAY - 1,
            grain = Grain::Quarter as u8,
            counts_end = Metric::FIRST_NOT_COUNT,
        );
        self.client()
            .query(&sql)
            .bind(generation)
            .execute()
            .await
            .map_err(ch("keep the closed quarters by day"))
    }

    /// Writes the day arrays of the closed quarters `from..to` (buckets; whole days,
    /// or the open day up to its first open hour).
    async fn write_quarters_between(
        &self,
        from: i32,
        to: i32,
        generation: u64,
    ) -> Result<(), StoreError> {
        self.write_quarter_days(&format!("bucket >= {from} AND bucket < {to}"), generation)
            .await
    }

    /// Writes the day arrays of UTC `day`'s closed quarters (after the compaction
    /// summed the day).
    async fn quarter_days_of_day(&self, day: i32, generation: u64) -> Result<(), StoreError> {
        let g = Grain::Quarter;
        self.write_quarters_between(
            g.first_of_day(day),
            g.first_of_day(day.saturating_add(1)),
            generation,
        )
        .await
    }

    /// Writes the day arrays of a compaction that moved the first open hour from
    /// `from` to `to` (after it summed their closed quarters): of each day that
    /// closed (every quarter of it a closed row, the ones flagged since the last
    /// snapshot summed again), then of the open day as far as it is closed, written
    /// again by every compaction.
    pub(crate) async fn quarter_days_closing(
        &self,
        from: i32,
        to: i32,
        generation: u64,
    ) -> Result<(), StoreError> {
        let day = |hour: i32| Grain::Day.first_of_hour(hour);
        for closed in self.days_with_closed_quarters(day(from), day(to)).await? {
            self.quarter_days_of_day(closed, generation).await?;
        }
        let g = Grain::Quarter;
        let (first, open) = (g.first_of_day(day(to)), g.first_of_hour(to));
        if open > first {
            self.write_quarters_between(first, open, generation).await?;
        }
        Ok(())
    }

    /// The UTC days in `from..to` with closed quarters (rows of `rollups_closed`;
    /// the snapshot row is of days), in order.
    async fn days_with_closed_quarters(&self, from: i32, to: i32) -> Result<Vec<i32>, StoreError> {
        let g = Grain::Quarter;
        self.client()
            .query(&format!(
                "SELECT DISTINCT {DAY_OF_BUCKET} AS day FROM rollups_closed \
                 WHERE grain = {grain} AND bucket >= {first} AND bucket < {end} ORDER BY day",
                grain = g as u8,
                first = g.first_of_day(from),
                end = g.first_of_day(to),
            ))
            .fetch_all()
            .await
            .map_err(ch("list the days to keep by day"))
    }

    /// Writes again the day arrays of the place-days with a quarter flagged since
    /// `since` before `open_day` (after the compaction summed those places again).
    pub(crate) async fn quarter_days_of_flagged(
        &self,
        since: i64,
        open_day: i32,
        generation: u64,
    ) -> Result<(), StoreError> {
        let cond = format!(
            "({DAY_PLACE}, {DAY_OF_BUCKET}) IN (SELECT {DAY_PLACE}, {DAY_OF_BUCKET} \
             FROM rollups_late WHERE written >= {since} AND grain = {grain} \
             AND bucket < {open})",
            grain = Grain::Quarter as u8,
            open = Grain::Quarter.first_of_day(open_day),
        );
        self.write_quarter_days(&cond, generation).await
    }

    /// A store compacted before this version (no marker): writes the day arrays of
    /// every day with closed quarters, a day at a time, then the marker. Returns
    /// whether it converted.
    pub(crate) async fn convert_quarter_days(&self, generation: u64) -> Result<bool, StoreError> {
        let fail = ch("keep the closed quarters by day");
        let marked: u64 = self
            .client()
            .query(&format!(
                "SELECT count() FROM rollups_days WHERE scope = {MARKER_SCOPE}"
            ))
            .fetch_one()
            .await
            .map_err(&fail)?;
        if marked > 0 {
            return Ok(false);
        }
        let days = self.days_with_closed_quarters(i32::MIN, i32::MAX).await?;
        for day in &days {
            self.quarter_days_of_day(*day, generation).await?;
        }
        let marker = MarkerCh {
            campaign_id: String::new(),
            scope: MARKER_SCOPE,
            creative: String::new(),
            catalog_id: String::new(),
            product_code: String::new(),
            metric: 0,
            day: 0,
            quarters: Vec::new(),
            generation,
        };
        insert_rows::<MarkerCh>(self.client(), "rollups_days", &[marker]).await?;
        if !days.is_empty() {
            tracing::info!(
                days = days.len(),
                "kept the closed quarter hours of the store's earlier compactions by day"
            );
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests;
