//! Pages by key (issue 26): a report read a page at a time asks its store for the
//! tallies of the first `places` places at or after a place key ([`PlacePage`]), so
//! a page costs the rows it returns, never the whole report again. A report's rows are
//! ordered by place (campaign, creative, catalog, product), then period, so the next
//! page starts at the place of the first row not given, skipping that place's rows
//! already given ([`PageCursor`]).
//!
//! [`PlacePage::select`] is the rule both backends follow: the embedded store applies
//! it to what it scans (stopping at the first campaign past a full page); ClickHouse
//! finds the page's last place on the server and reads the places between.
//!
//! A place gives at most a row per period of the report, and most places give them
//! all, so a page asks first for the places a full page needs at that many rows each
//! ([`first_places`]), and again for more only while the rows found fall short
//! ([`more_places`]): at most one place more than the page has rows, which is enough
//! however few rows each place gives.

use serde::{Deserialize, Serialize};

use super::{Place, SummedTally};

/// A place's key in report order (its scope, grain and bucket aside).
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PlaceKey {
    /// The campaign.
    pub campaign_id: String,
    /// The creative (empty at campaign scope).
    pub creative: String,
    /// The catalog (product events).
    pub catalog_id: String,
    /// The product (product events).
    pub product_code: String,
}

impl PlaceKey {
    /// The key of `p`.
    pub fn of(p: &Place) -> Self {
        Self {
            campaign_id: p.campaign_id.to_string(),
            creative: p.creative.to_string(),
            catalog_id: p.catalog_id.to_string(),
            product_code: p.product_code.to_string(),
        }
    }
}

/// The first `places` places at or after `from`, of those with tallies a query
/// reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacePage {
    /// The first key of the page (inclusive; the default key is before every other).
    pub from: PlaceKey,
    /// At most this many places (at least 1).
    pub places: usize,
}

impl PlacePage {
    /// Keeps the tallies of the page's places from `rows`, in their order.
    pub fn select(&self, rows: Vec<SummedTally>) -> Vec<SummedTally> {
        let Some(last) = self.last(rows.iter().map(|s| PlaceKey::of(&s.place))) else {
            return Vec::new();
        };
        rows.into_iter()
            .filter(|s| {
                let k = PlaceKey::of(&s.place);
                k >= self.from && k <= last
            })
            .collect()
    }

    /// The page's last place among `keys` (any order, repeats allowed): the
    /// `places`-th smallest distinct key at or after `from`, or the greatest when there
    /// are fewer; `None` when none is at or after `from`.
    pub fn last(&self, keys: impl IntoIterator<Item = PlaceKey>) -> Option<PlaceKey> {
        let mut distinct: Vec<PlaceKey> = keys.into_iter().filter(|k| k >= &self.from).collect();
        distinct.sort_unstable();
        distinct.dedup();
        distinct.truncate(self.places.max(1));
        distinct.pop()
    }
}

/// How many places a page of `size` rows (at least 1), starting `skip` rows into its
/// first place, reads first when a place holds at most `per_place` rows (the
/// report's periods): enough for a full page when every place holds them all, and one
/// more. A page of 1,000 rows of a day-by-day report over 30 days reads 35 places
/// (36 starting inside a place), not 1,001.
pub fn first_places(size: usize, skip: usize, per_place: usize) -> usize {
    let size = size.max(1);
    (size + skip)
        .div_ceil(per_place.max(1))
        .saturating_add(1)
        .min(size + 1)
}

/// After a read that asked for `asked` places found `found` of them making `rows`
/// rows: `None` when it holds the page (its rows fill it, or the store holds no more
/// places, or it asked for one more place than the page has rows, which is enough
/// however few rows a place holds), else how many places to ask for instead: twice as
/// many at least, or as many as the rows the read found per place call for.
pub fn more_places(
    size: usize,
    skip: usize,
    asked: usize,
    found: usize,
    rows: usize,
) -> Option<usize> {
    let size = size.max(1);
    if found < asked || asked > size || rows >= size + skip {
        return None;
    }
    let per_place = (rows / found.max(1)).max(1);
    let wanted = (size + skip).div_ceil(per_place).saturating_add(1);
    Some(wanted.max(asked.saturating_mul(2)).min(size + 1))
}

/// How many distinct places `summed` holds (a page with fewer than it asked for is the
/// report's last).
pub fn places_in(summed: &[SummedTally]) -> usize {
    let mut keys: Vec<PlaceKey> = summed.iter().map(|s| PlaceKey::of(&s.place)).collect();
    keys.sort_unstable();
    keys.dedup();
    keys.len()
}

/// Where a page starts: at `place`, after its first `skip` rows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageCursor {
    /// The place of the page's first row.
    pub place: PlaceKey,
    /// That place's rows the previous pages gave.
    pub skip: usize,
}

/// What a page's tallies held: their greatest place, and whether the store may hold
/// more places after it (it returned as many as the page asked for).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageRead {
    /// The greatest place the page's tallies hold.
    pub last: Option<PlaceKey>,
    /// Whether places may follow `last`.
    pub more: bool,
}

impl PageRead {
    /// What `summed`, read for `page`, holds.
    pub fn of(summed: &[SummedTally], page: &PlacePage) -> Self {
        let last = summed.iter().map(|s| PlaceKey::of(&s.place)).max();
        Self {
            last,
            more: places_in(summed) >= page.places,
        }
    }
}

/// One page of rows ordered by place (each row's [`PlaceKey`] from `key`), read from
/// the tallies of a [`PlacePage`] at `cursor` (`read` says what they held): the rows
/// at `cursor`, at most `size`, and the cursor of the next page (`None` on the last).
/// Ask for at least two places a page: a page whose places have no row then still
/// moves past them.
pub fn cut<R>(
    rows: Vec<R>,
    key: impl Fn(&R) -> PlaceKey,
    cursor: &PageCursor,
    size: usize,
    read: &PageRead,
) -> (Vec<R>, Option<PageCursor>) {
    let mut skipped = 0;
    let mut page: Vec<R> = Vec::with_capacity(size.min(rows.len()));
    // The place of the last row given, and how many of its rows are given in all.
    let mut last: Option<(PlaceKey, usize)> = None;
    for r in rows {
        let k = key(&r);
        if k == cursor.place && skipped < cursor.skip {
            skipped += 1;
            continue;
        }
        if page.len() == size {
            let skip = match &last {
                Some((l, n)) if *l == k => *n,
                _ => 0,
            };
            return (page, Some(PageCursor { place: k, skip }));
        }
        last = match last {
            Some((l, n)) if l == k => Some((l, n + 1)),
            _ => {
                let before = if k == cursor.place { cursor.skip } else { 0 };
                Some((k, before + 1))
            }
        };
        page.push(r);
    }
    // Every row of the page's places is given: the next page starts at its last place
    // (past the rows given), unless the store had no more.
    let next = read.more.then(|| {
        let place = read.last.clone().unwrap_or_else(|| cursor.place.clone());
        let skip = match last {
            Some((l, n)) if l == place => n,
            _ if place == cursor.place => cursor.skip,
            _ => 0,
        };
        PageCursor { place, skip }
    });
    (page, next)
}

#[cfg(test)]
mod tests;
