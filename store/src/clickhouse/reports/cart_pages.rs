//! The carts report's pages, read by key from `cart_lines`
//! ([`rm_schemas::tables::CART_LINES`], sorted by campaign, day, tracking id, catalog
//! and product): a page costs the lines it returns, not the campaign's lines in its
//! range nor a whole day of them.
//!
//! **What a page reads.** A campaign at a time, in key order. Per campaign, its rows
//! are counted by day (the sorting key's `day` alone; the first week of the range
//! first, the rest only when the page gets past it), and then each read takes either
//! whole days, until their rows make up the lines still wanted, or a slice of one
//! day's tracking ids: a day of several granules and several times the rows wanted
//! (at a hundred million events a campaign's day holds about 16,000 rows) is read
//! from the place reached through the tracking id of its `want`-th row on (found by
//! reading the tracking id column alone, in key order, without `FINAL`), so the
//! `FINAL` read that decides the lines reads a granule or so of the day in each part,
//! not the whole day (BENCHMARKS.md, session 37).
//!
//! **Why a page misses no line and repeats none.** The reads of a campaign cover its
//! key range from the page's place on without a gap: whole days `[a, b]`, or one
//! day's tracking ids from a lower bound (the page's place's own, inclusive, or the
//! last slice's upper one, exclusive) through an upper one, inclusive. Each read is
//! `FINAL` over conditions on the sorting key only, so the newest row of each place
//! decides (a place's rows share its key, so a slice never cuts between them), and
//! returns the range's lines in key order up to the lines wanted: when it returns
//! fewer, it read its whole range, and the next read starts after it. Counts and the
//! slice's bound are of rows (every version and removed line), never of lines, so
//! they only decide how much one read takes, never what a page returns: a read that
//! comes short of lines is followed by the next range.

use std::sync::atomic::Ordering;

use clickhouse::Row;
use serde::Deserialize;

use crate::clickhouse::error::ch;
use crate::clickhouse::query::{Arg, Conds};
use crate::clickhouse::rows::CartLineCh;
use crate::clickhouse::ClickHouseStore;
use crate::model::carts::lines::{self, CartLine, LinePlace};
use crate::{ReportFilter, StoreError};

/// Days of a campaign's lines counted by the first count of a page (the rest only if
/// the page reads past them).
const FIRST_COUNT_DAYS: i32 = 7;

/// Fewest rows of a day read in slices by default: below, a day is read whole (a
/// slice's read takes a granule of 1,024 rows of the day in every part anyway, and
/// its probe is a query more). [`ClickHouseStore::read_days_in_slices_above`] sets
/// it.
pub(crate) const SLICED_DAY_ROWS: u64 = 8_192;

/// Whether a day of `rows` rows is read in slices when `want` lines are wanted: it
/// holds more than `above` rows and several times the rows wanted; every day when
/// `above` is 0 (the store suite's, whose days are small).
fn sliced(above: u64, rows: u64, want: usize) -> bool {
    above == 0 || (rows > above && rows > 4 * want as u64)
}

/// Tracking ids of one day a read is bounded to.
#[derive(Debug, Clone, Default)]
struct Slice {
    /// The lower bound, and whether it is itself included.
    from: Option<(String, bool)>,
    /// The upper bound, included.
    through: Option<String>,
}

/// A row of the slice's probe.
#[derive(Row, Deserialize)]
struct TrackingIdCh {
    tracking_id: String,
}

impl ClickHouseStore {
    /// Reads the carts pages' days of more than `rows` rows in slices (default
    /// [`SLICED_DAY_ROWS`]; 0: every day, as the store suite reads its small days).
    pub fn read_days_in_slices_above(&self, rows: u64) {
        self.inner.sliced_day_rows.store(rows, Ordering::Relaxed);
    }

    /// The carts report's lines from place `from` on, at most `limit`: a range of
    /// `cart_lines`' sorting key (the filter's campaigns and days, from the place on)
    /// read `FINAL` with conditions on that key only, so the newest row of each
    /// place decides; then its `gone` rows, and lines of another ad id or catalog,
    /// are dropped. Before the aggregator indexed an earlier version's lines
    /// ([`Self::backfill_lines`]), every line is read from `cart_events` instead.
    pub(crate) async fn cart_lines_page(
        &self,
        f: &ReportFilter,
        from: Option<&LinePlace>,
        limit: usize,
    ) -> Result<Vec<CartLine>, StoreError> {
        if !self.lines_indexed().await? {
            let mut w = Conds::default();
            w.cart_catalog(f);
            let rows = self.cart_rows(w).await?;
            return Ok(lines::page(lines::lines(&rows), f, from, limit));
        }
        // The whole report in one read (a download without a page size).
        if limit == usize::MAX {
            return self
                .campaign_lines(f, None, from, &Slice::default(), limit)
                .await;
        }
        // A page: a campaign at a time, in key order (the filter's, or those of the
        // tenant's or every campaign with lines in the days).
        let campaigns: Vec<String> = match &f.campaign_id {
            Some(c) => vec![c.clone()],
            None => {
                let listed = self.line_days_listed().await?;
                self.line_campaigns(f, from, listed).await?
            }
        };
        let mut out = Vec::new();
        for c in campaigns
            .iter()
            .filter(|c| from.is_none_or(|p| c.as_str() >= p.campaign_id.as_str()))
        {
            if out.len() >= limit {
                break;
            }
            let from = from.filter(|p| p.campaign_id == *c);
            out.extend(self.campaign_page(f, c, from, limit - out.len()).await?);
        }
        Ok(out)
    }

    /// At most `limit` lines of campaign `c` that `f` selects, from `from` on, in
    /// key order: whole days while their rows stay within the lines wanted, a slice
    /// of a day's tracking ids otherwise (the module's header).
    async fn campaign_page(
        &self,
        f: &ReportFilter,
        c: &str,
        from: Option<&LinePlace>,
        limit: usize,
    ) -> Result<Vec<CartLine>, StoreError> {
        let first = [f.from_day, from.map(|p| p.day)]
            .into_iter()
            .flatten()
            .max();
        // The first week of days first (a page rarely reads past it).
        let week_end = first.map(|d| d.saturating_add(FIRST_COUNT_DAYS - 1));
        let counted_to = match (week_end, f.to_day) {
            (Some(w), Some(t)) => Some(w.min(t)),
            (w, t) => w.or(t),
        };
        let mut days = self.line_day_rows(c, first, counted_to).await?;
        let above = self.inner.sliced_day_rows.load(Ordering::Relaxed);
        let mut rest_counted = counted_to == f.to_day;
        // Within a sliced `days[at]`, where the next read starts: the page's place on
        // its own day, then after each slice read.
        let mut inside: Option<(String, bool)> = from
            .filter(|p| {
                days.first()
                    .is_some_and(|(d, rows)| *d == p.day && sliced(above, *rows, limit))
            })
            .map(|p| (p.tracking_id.clone(), true));
        let mut out = Vec::new();
        let mut at = 0;
        while out.len() < limit {
            if at == days.len() {
                if rest_counted {
                    break;
                }
                rest_counted = true;
                let after = counted_to.map(|d| d.saturating_add(1));
                days = self.line_day_rows(c, after, f.to_day).await?;
                at = 0;
                continue;
            }
            let want = limit - out.len();
            let (day, rows) = days[at];
            let one_day = ReportFilter {
                from_day: Some(day),
                to_day: Some(day),
                ..f.clone()
            };
            // The page's own place bounds the first read of its day.
            let place = from.filter(|p| p.day == day);
            if inside.is_some() || sliced(above, rows, want) {
                let through = self.slice_end(c, day, inside.as_ref(), want).await?;
                let slice = Slice {
                    from: inside.take(),
                    through: through.clone(),
                };
                let read = self
                    .campaign_lines(&one_day, Some(c), place, &slice, want)
                    .await?;
                out.extend(read);
                match through {
                    Some(t) => inside = Some((t, false)),
                    None => at += 1,
                }
                continue;
            }
            // Whole days from `at` whose rows make up the lines wanted (rows count
            // versions and removed lines: a read may come short, and the next days are
            // read then), up to a day read in slices.
            let mut end = at;
            let mut taken = 0u64;
            while end < days.len()
                && taken < want as u64
                && (end == at || !sliced(above, days[end].1, want))
            {
                taken += days[end].1;
                end += 1;
            }
            let window = ReportFilter {
                from_day: Some(day),
                to_day: Some(days[end - 1].0),
                ..f.clone()
            };
            let read = self
                .campaign_lines(&window, Some(c), place, &Slice::default(), want)
                .await?;
            out.extend(read);
            at = end;
        }
        Ok(out)
    }

    /// The rows of campaign `c`'s lines per day from `from` through `to` (either
    /// open), days in order.
    async fn line_day_rows(
        &self,
        c: &str,
        from: Option<i32>,
        to: Option<i32>,
    ) -> Result<Vec<(i32, u64)>, StoreError> {
        let mut key = Conds::default();
        key.str("campaign_id = ?", &Some(c.to_owned()));
        key.int("day >= ?", from.map(i64::from));
        key.int("day <= ?", to.map(i64::from));
        let sql = format!(
            "SELECT day, count() FROM cart_lines{} GROUP BY day ORDER BY day",
            key.clause()
        );
        key.bind(self.client().query(&sql))
            .fetch_all()
            .await
            .map_err(ch("cart report"))
    }

    /// The tracking id of the row `want` rows on from `from` (a bound and whether it
    /// is included; the day's start without it) among campaign `c`'s rows of `day`,
    /// in key order: a read through it holds more than `want` rows; `None` when the
    /// day has no more (read to its end). The tracking id column alone, without
    /// `FINAL`.
    async fn slice_end(
        &self,
        c: &str,
        day: i32,
        from: Option<&(String, bool)>,
        want: usize,
    ) -> Result<Option<String>, StoreError> {
        let mut key = Conds::default();
        key.str("campaign_id = ?", &Some(c.to_owned()));
        key.int("day = ?", Some(i64::from(day)));
        lower_bound(&mut key, from);
        let sql = format!(
            "SELECT tracking_id FROM cart_lines{} ORDER BY tracking_id LIMIT 1 OFFSET {want}",
            key.clause()
        );
        let row: Option<TrackingIdCh> = key
            .bind(self.client().query(&sql))
            .fetch_optional()
            .await
            .map_err(ch("cart report"))?;
        Ok(row.map(|r| r.tracking_id))
    }

    /// At most `limit` lines that `f` selects, of campaign `c` (`None`: of the
    /// filter's campaigns), from `from` on, within `slice` of a day's tracking ids,
    /// in key order.
    async fn campaign_lines(
        &self,
        f: &ReportFilter,
        c: Option<&str>,
        from: Option<&LinePlace>,
        slice: &Slice,
        limit: usize,
    ) -> Result<Vec<CartLine>, StoreError> {
        let mut key = Conds::default();
        match c {
            Some(c) => key.str("campaign_id = ?", &Some(c.to_owned())),
            None => key.campaign(f),
        }
        key.int("day >= ?", f.from_day.map(i64::from));
        key.int("day <= ?", f.to_day.map(i64::from));
        lower_bound(&mut key, slice.from.as_ref());
        key.str("tracking_id <= ?", &slice.through);
        if let Some(p) = from {
            key.sql.push(
                "(campaign_id, day, tracking_id, catalog_id, product_code) >= (?, ?, ?, ?, ?)"
                    .to_owned(),
            );
            key.args.extend([
                Arg::Str(p.campaign_id.clone()),
                Arg::Int(i64::from(p.day)),
                Arg::Str(p.tracking_id.clone()),
                Arg::Str(p.catalog_id.clone()),
                Arg::Str(p.product_code.clone()),
            ]);
        }
        let mut rest = Conds::default();
        rest.sql.push("gone = 0".to_owned());
        rest.str("ad_id = ?", &f.ad_id);
        rest.cart_catalog(f);
        let limit = match limit {
            usize::MAX => String::new(),
            n => format!(" LIMIT {n}"),
        };
        let sql = format!(
            "SELECT ?fields FROM (SELECT * FROM cart_lines FINAL{}){} \
             ORDER BY campaign_id, day, tracking_id, catalog_id, product_code{limit}",
            key.clause(),
            rest.clause()
        );
        let fail = ch("cart report");
        let q = rest.bind(key.bind(self.client().query(&sql)));
        let mut cursor = q.fetch::<CartLineCh>().map_err(&fail)?;
        let mut out = Vec::new();
        while let Some(r) = cursor.next().await.map_err(&fail)? {
            let line = r.to_line()?;
            // The tenant's campaigns and the days are the key's; checked again on
            // the line as the embedded store does.
            if lines::selects(f, &line) {
                out.push(line);
            }
        }
        Ok(out)
    }
}

/// The condition of a lower bound of tracking ids (and whether it is included).
fn lower_bound(key: &mut Conds, from: Option<&(String, bool)>) {
    if let Some((t, included)) = from {
        let cond = if *included {
            "tracking_id >= ?"
        } else {
            "tracking_id > ?"
        };
        key.str(cond, &Some(t.clone()));
    }
}
