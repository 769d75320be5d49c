//! A set of tally places as `WHERE` conditions the rollups' sorting key narrows
//! (`scope, grain, bucket, campaign_id, ...`): per scope and grain, the distinct
//! values of each column (`bucket IN (...) AND campaign_id IN (...) AND ...`).
//!
//! The aggregator loads the stored tallies of every place a batch may move that it
//! has not cached (thousands per batch). Named one tuple at a time, at most a
//! thousand to a query, the places took a dozen sequential queries per batch, each
//! reading the whole table: a tuple `IN` does not narrow the sorting key on
//! ClickHouse 18.16. The distinct values of a batch's places are few (its buckets
//! are recent, its campaigns and products repeat), so their conditions are short,
//! name whole key ranges, and fit one or two queries. They select a superset of the
//! places (every combination of the values of a scope and grain): the caller keeps
//! the rows of the places it asked for. What is read beyond them is bounded by the
//! rows stored in the batch's buckets for its texts, not by the events behind the
//! store; a batch whose places span old and recent buckets (a late copy) reads the
//! old buckets' rows of the recent places' texts too (grouping by bucket as well
//! would bound that to each bucket's own texts, at a longer condition).

use std::collections::{BTreeMap, BTreeSet};

use super::query::{placeholders, Arg, Conds, KEY_BYTES_PER_QUERY};
use crate::model::tallies::Place;

/// The distinct values of one scope and grain's places.
#[derive(Default)]
struct Columns<'a> {
    buckets: BTreeSet<i32>,
    campaigns: BTreeSet<&'a str>,
    creatives: BTreeSet<&'a str>,
    catalogs: BTreeSet<&'a str>,
    products: BTreeSet<&'a str>,
    partitions: BTreeSet<i32>,
}

impl<'a> Columns<'a> {
    /// Adds a place's values: the bytes of those new to the set.
    fn add(&mut self, p: &'a Place) -> usize {
        let mut n = 0;
        let mut text = |set: &mut BTreeSet<&'a str>, v: &'a str| {
            if set.insert(v) {
                n += v.len() + 8;
            }
        };
        text(&mut self.campaigns, &p.campaign_id);
        text(&mut self.creatives, &p.creative);
        text(&mut self.catalogs, &p.catalog_id);
        text(&mut self.products, &p.product_code);
        n += 12 * usize::from(self.buckets.insert(p.bucket));
        n += 12 * usize::from(self.partitions.insert(p.partition));
        n
    }
}

/// The conditions that together select every place of `places` (and maybe others),
/// each within [`KEY_BYTES_PER_QUERY`] bytes of values: one query each.
pub(crate) fn conditions<'a>(places: impl IntoIterator<Item = &'a Place>) -> Vec<Conds> {
    chunks(places).into_iter().map(condition).collect()
}

/// The places split into chunks of at most about [`KEY_BYTES_PER_QUERY`] bytes of
/// distinct values, each chunk's places grouped by scope and grain.
fn chunks<'a>(places: impl IntoIterator<Item = &'a Place>) -> Vec<BTreeMap<(u8, u8), Columns<'a>>> {
    let mut sorted: Vec<&Place> = places.into_iter().collect();
    sorted.sort_by(|a, b| {
        (a.scope, a.grain, a.bucket, &a.campaign_id).cmp(&(
            b.scope,
            b.grain,
            b.bucket,
            &b.campaign_id,
        ))
    });
    let mut chunks: Vec<BTreeMap<(u8, u8), Columns<'_>>> = Vec::new();
    let mut bytes = 0;
    for p in sorted {
        if chunks.is_empty() || bytes > KEY_BYTES_PER_QUERY {
            chunks.push(BTreeMap::new());
            bytes = 0;
        }
        let chunk = chunks.last_mut().expect("a chunk");
        let key = (p.scope as u8, p.grain as u8);
        if !chunk.contains_key(&key) {
            bytes += 32;
        }
        bytes += chunk.entry(key).or_default().add(p);
    }
    chunks
}

/// One chunk's condition: an `OR` of its scopes and grains.
fn condition(groups: BTreeMap<(u8, u8), Columns<'_>>) -> Conds {
    let mut sql = Vec::new();
    let mut args = Vec::new();
    for ((scope, grain), c) in groups {
        sql.push(format!(
            "(scope = {scope} AND grain = {grain} AND bucket IN ({}) AND campaign_id IN ({}) \
             AND creative IN ({}) AND catalog_id IN ({}) AND product_code IN ({}) \
             AND log_partition IN ({}))",
            placeholders(c.buckets.len()),
            placeholders(c.campaigns.len()),
            placeholders(c.creatives.len()),
            placeholders(c.catalogs.len()),
            placeholders(c.products.len()),
            placeholders(c.partitions.len()),
        ));
        args.extend(c.buckets.iter().map(|b| Arg::Int(i64::from(*b))));
        for set in [&c.campaigns, &c.creatives, &c.catalogs, &c.products] {
            args.extend(set.iter().map(|s| Arg::Str((*s).to_owned())));
        }
        args.extend(c.partitions.iter().map(|p| Arg::Int(i64::from(*p))));
    }
    Conds {
        sql: vec![format!("({})", sql.join(" OR "))],
        args,
    }
}

#[cfg(test)]
mod tests;
