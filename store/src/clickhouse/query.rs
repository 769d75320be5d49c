//! Building queries: `WHERE` conditions with their bound values, and `IN` lists of
//! bounded size.
//!
//! **A look-up by key names its `IN` list in `PREWHERE`** (the aggregator's loads of
//! served ads, views, carts, orders and shoppers' touches and orders, and the
//! erasure's): ClickHouse then reads the key column alone in the granules the
//! sorting key leaves, and the other columns only in granules holding a key. A
//! `WHERE` on a sorting-key column is not moved there by 18.16's optimizer, and a
//! batch's thousand random keys leave a granule in every part for each key: at 17M
//! touches, a look-up of 1,000 shoppers read 10.3M rows of every column (2.27 GiB,
//! 1.24 s) with `WHERE` and the same rows of the shopper column (392 MiB, 0.34 s)
//! with `PREWHERE`; an order states' look-up 99-137 -> 33 ms (`BENCHMARKS.md`,
//! session 35). A look-up by a tuple (carts' and views' facts) names its first
//! column's distinct values in `PREWHERE` and the tuples in `WHERE`: the tuple set is
//! then probed only for rows of a key's shopper or ad (carts: 117-132 -> 50-55 ms,
//! the same rows). Both servers (and a cluster's `Distributed` tables) take
//! `PREWHERE`.

use clickhouse::query::Query;

use super::rows::day_start_ms;
use crate::model::tallies::TallyQuery;
use crate::model::DAY_MS;
use crate::ReportFilter;

/// Most entity keys in one `IN` list.
pub const KEYS_PER_QUERY: usize = 1000;
/// Most bytes of key text in one `IN` list (escaping and quotes not counted).
pub const KEY_BYTES_PER_QUERY: usize = 128 * 1024;

/// A bound value.
pub(crate) enum Arg {
    Str(String),
    Int(i64),
}

/// `WHERE` conditions with their `?` values, in text order.
#[derive(Default)]
pub(crate) struct Conds {
    pub(crate) sql: Vec<String>,
    pub(crate) args: Vec<Arg>,
}

impl Conds {
    pub(crate) fn str(&mut self, cond: &str, v: &Option<String>) {
        if let Some(v) = v {
            self.sql.push(cond.to_owned());
            self.args.push(Arg::Str(v.clone()));
        }
    }

    pub(crate) fn int(&mut self, cond: &str, v: Option<i64>) {
        if let Some(v) = v {
            self.sql.push(cond.to_owned());
            self.args.push(Arg::Int(v));
        }
    }

    /// The filter's campaign, and its tenant's campaigns (`campaign_id IN (...)`;
    /// a tenant without campaigns selects nothing).
    pub(crate) fn campaign(&mut self, f: &ReportFilter) {
        self.str("campaign_id = ?", &f.campaign_id);
        if let Some(t) = &f.tenant {
            if t.campaigns.is_empty() {
                self.sql.push("0".to_owned());
            } else {
                self.sql.push(format!(
                    "campaign_id IN ({})",
                    placeholders(t.campaigns.len())
                ));
                self.args
                    .extend(t.campaigns.iter().map(|c| Arg::Str(c.clone())));
            }
        }
    }

    /// The filter's catalog, of cart lines (stored scoped by their ad id's
    /// namespace: `rm_schemas::namespace::scoped`).
    pub(crate) fn cart_catalog(&mut self, f: &ReportFilter) {
        if let Some(c) = &f.catalog_id {
            self.sql
                .push("(catalog_id = ? OR endsWith(catalog_id, ?))".to_owned());
            self.args.push(Arg::Str(c.clone()));
            self.args
                .push(Arg::Str(format!("{}{c}", rm_schemas::namespace::SEPARATOR)));
        }
    }

    /// Event times within the filter's days (`day_of(t)` in range, exactly).
    pub(crate) fn event_days(&mut self, f: &ReportFilter) {
        self.int("time_ms >= ?", f.from_day.map(day_start_ms));
        self.int("time_ms < ?", f.to_day.map(|d| day_start_ms(d) + DAY_MS));
    }

    /// Only carts with at least one event matching `sub` (an event of the carts'
    /// table matching the conditions).
    pub(crate) fn carts_having(&mut self, sub: Conds) {
        if sub.sql.is_empty() {
            return;
        }
        self.sql.push(format!(
            "(tracking_id, catalog_id, product_code) IN \
             (SELECT tracking_id, catalog_id, product_code FROM cart_events{})",
            sub.clause()
        ));
        self.args.extend(sub.args);
    }

    pub(crate) fn clause(&self) -> String {
        if self.sql.is_empty() {
            String::new()
        } else {
            format!(" WHERE {}", self.sql.join(" AND "))
        }
    }

    pub(crate) fn bind(self, mut q: Query) -> Query {
        for a in self.args {
            q = match a {
                Arg::Str(s) => q.bind(s),
                Arg::Int(i) => q.bind(i),
            };
        }
        q
    }
}

/// Splits keys into `IN` lists of bounded size.
pub(crate) fn chunks<'a, K: Ord + 'a>(
    keys: impl IntoIterator<Item = &'a K>,
    size: impl Fn(&K) -> usize,
) -> Vec<Vec<&'a K>> {
    let mut sorted: Vec<&K> = keys.into_iter().collect();
    sorted.sort();
    let mut out: Vec<Vec<&K>> = Vec::new();
    let mut bytes = 0;
    for k in sorted {
        let n = size(k) + 16;
        match out.last_mut() {
            Some(c) if c.len() < KEYS_PER_QUERY && bytes + n <= KEY_BYTES_PER_QUERY => {
                bytes += n;
                c.push(k);
            }
            _ => {
                bytes = n;
                out.push(vec![k]);
            }
        }
    }
    out
}

/// `?,?,...` for `n` values.
pub(crate) fn placeholders(n: usize) -> String {
    vec!["?"; n].join(",")
}

/// The `WHERE` condition of the places of `rollups` a tally query reads, for the
/// campaigns of `list` (one chunk of the query's; none: every campaign, or when the
/// query names campaigns, none but the marker's), its metrics aside; bound by
/// [`bind_tally_places`].
pub(crate) fn tally_places(q: &TallyQuery, list: &[&String]) -> String {
    let filters = place_filters(q, list);
    // Sub-ranges narrow the sorting key's `bucket`: the server reads their granules
    // only. As a list of the buckets while it is short (18.16 weighs an `OR` of a
    // Kolkata month's 30 hour ranges against every granule: 20 ms a query, a list of
    // their 60 buckets 1 ms), else as an `OR` of the ranges.
    let only = match (q.only.is_empty(), only_buckets(q)) {
        (true, _) => String::new(),
        (false, Some(list)) => format!(" AND bucket IN ({})", placeholders(list.len())),
        (false, None) => {
            let ranges = vec!["(bucket >= ? AND bucket <= ?)"; q.only.len()].join(" OR ");
            format!(" AND ({ranges})")
        }
    };
    format!("scope = ? AND grain = ? AND bucket >= ? AND bucket <= ?{only}{filters}")
}

/// The campaigns and catalog a tally query names, as a condition's tail (bound by
/// [`bind_place_filters`]).
fn place_filters(q: &TallyQuery, list: &[&String]) -> String {
    let campaigns = match (&q.campaigns, list.is_empty()) {
        (None, _) => String::new(),
        (Some(_), true) => " AND 0".to_owned(),
        (Some(_), false) => format!(" AND campaign_id IN ({})", placeholders(list.len())),
    };
    let catalog = if q.catalog_id.is_some() {
        " AND catalog_id = ?"
    } else {
        ""
    };
    format!("{campaigns}{catalog}")
}

/// Binds the values of [`place_filters`].
fn bind_place_filters(mut query: Query, q: &TallyQuery, list: &[&String]) -> Query {
    for c in list {
        query = query.bind(c.as_str());
    }
    if let Some(c) = &q.catalog_id {
        query = query.bind(c.as_str());
    }
    query
}

/// The `WHERE` condition of the rows of `rollups_days` (a place's quarters of a UTC
/// day) a quarter-hour tally query reads: its scope, the UTC days of its range, its
/// places as [`tally_places`] and its metrics (`codes`); bound by
/// [`bind_days_places`].
pub(crate) fn days_places(q: &TallyQuery, list: &[&String], codes: &[u16]) -> String {
    use crate::model::tallies::Grain;
    let (first, last) = (
        Grain::Quarter.day_of_bucket(q.from),
        Grain::Quarter.day_of_bucket(q.to),
    );
    let codes: Vec<String> = codes.iter().map(u16::to_string).collect();
    format!(
        "scope = {} AND day >= {first} AND day <= {last}{} AND metric IN ({})",
        q.scope as u8,
        place_filters(q, list),
        codes.join(",")
    )
}

/// Binds the values of [`days_places`].
pub(crate) fn bind_days_places(query: Query, q: &TallyQuery, list: &[&String]) -> Query {
    bind_place_filters(query, q, list)
}

/// Most buckets a tally query's sub-ranges name as a list (more: as ranges).
const ONLY_BUCKETS_LISTED: usize = 4096;

/// The buckets of a tally query's sub-ranges (`only`), when they are few enough to
/// list; the ranges are inclusive and may overlap.
fn only_buckets(q: &TallyQuery) -> Option<Vec<i32>> {
    let mut n = 0usize;
    for (a, b) in &q.only {
        let len = usize::try_from(i64::from(*b) - i64::from(*a) + 1).unwrap_or(0);
        n = n.saturating_add(len);
        if n > ONLY_BUCKETS_LISTED {
            return None;
        }
    }
    let mut list: Vec<i32> = q.only.iter().flat_map(|(a, b)| *a..=*b).collect();
    list.sort_unstable();
    list.dedup();
    // An empty list is no `IN ()` (not valid SQL): ranges that are all empty read
    // as ranges.
    (!list.is_empty()).then_some(list)
}

/// Binds the values of [`tally_places`].
pub(crate) fn bind_tally_places(mut query: Query, q: &TallyQuery, list: &[&String]) -> Query {
    query = query
        .bind(q.scope as u8)
        .bind(q.grain as u8)
        .bind(q.from)
        .bind(q.to);
    match only_buckets(q) {
        Some(list) => {
            for b in list {
                query = query.bind(b);
            }
        }
        None => {
            for (a, b) in &q.only {
                query = query.bind(*a).bind(*b);
            }
        }
    }
    bind_place_filters(query, q, list)
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn short_sub_ranges_are_a_list_of_their_buckets() {
        let q = |only: Vec<(i32, i32)>| TallyQuery {
            only,
            ..TallyQuery::spend(None)
        };
        let short = q(vec![(5, 5), (1, 2), (2, 3), (9, 8)]);
        assert_eq!(only_buckets(&short), Some(vec![1, 2, 3, 5]));
        assert!(tally_places(&short, &[]).ends_with(" AND bucket IN (?,?,?,?)"));
        assert_eq!(only_buckets(&q(Vec::new())), None);
        assert!(!tally_places(&q(Vec::new()), &[]).contains(" IN "));
        assert_eq!(only_buckets(&q(vec![(9, 8)])), None);
        let long = q(vec![(0, 4095), (5000, 5000)]);
        assert_eq!(only_buckets(&long), None);
        assert!(tally_places(&long, &[])
            .ends_with(" AND ((bucket >= ? AND bucket <= ?) OR (bucket >= ? AND bucket <= ?))"));
        assert_eq!(only_buckets(&q(vec![(i32::MIN, i32::MAX)])), None);
    }

    #[test]
    fn key_lists_are_bounded() {
        let keys: HashSet<String> = (0..2500).map(|i| format!("k{i:05}")).collect();
        let c = chunks(&keys, String::len);
        assert_eq!(
            c.iter().map(Vec::len).collect::<Vec<_>>(),
            vec![1000, 1000, 500]
        );
        let big: HashSet<String> = (0..10)
            .map(|i| format!("{i}{}", "x".repeat(40_000)))
            .collect();
        let c = chunks(&big, String::len);
        assert!(c
            .iter()
            .all(|c| c.iter().map(|k| k.len() + 16).sum::<usize>() <= KEY_BYTES_PER_QUERY));
        assert_eq!(c.iter().map(Vec::len).sum::<usize>(), 10);
        assert!(chunks(&HashSet::<String>::new(), String::len).is_empty());
    }
}
