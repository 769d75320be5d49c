//! The carts report's index (`cart_lines`): each cart line's slot (its row's in
//! `carts_v2`) under its place's bytes ([`LinePlace::to_bytes`]), so a page of the
//! report is a range of keys per campaign, each line then read by its slot ([`page`]).
//!
//! The value is the slot, not the line: the index's keys are random within a day
//! (tracking ids), so each batch's new lines land on pages all over today's range,
//! and redb rewrites every page a commit touches; eight-byte values keep those pages
//! few (aggbench, 300k records: the whole line as the value cost 0.8 µs a record of
//! 8.1, and doubled the store file). A line updated at the same place (the common
//! case) writes nothing here.
//!
//! An entry follows its line's row in `carts_v2`: every write
//! of a cart row goes through `entities.rs` (a batch's upsert, an erasure's or an
//! ageing pass's new key, a merge, a conversion at open), which calls [`follow`] with
//! the row it replaced and the row it wrote, in the same transaction. So the index
//! holds exactly one entry per stored line, at the place its row says, whatever
//! wrote the row. A store written before the index (its `cart_lines` empty while it
//! holds cart lines) is indexed once at open ([`index_if_missing`]).

use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition, WriteTransaction};

use super::{err, parse, Table, CART_ROWS};
use crate::model::carts::lines::{self, CartLine, LinePlace};
use crate::model::carts::CartEventRow;
use crate::{ReportFilter, StoreError};

/// Place bytes -> the line.
pub(super) const CART_LINES: Table = TableDefinition::new("cart_lines");

fn line_of(row: &[u8]) -> Result<Option<CartLine>, StoreError> {
    let rows: Vec<CartEventRow> = parse(row)?;
    Ok(lines::line_of_rows(&rows))
}

/// Moves the entry of the line at `slot` as its row goes from `old` to `new` (either
/// absent): nothing when its place did not change.
pub(super) fn follow(
    w: &WriteTransaction,
    slot: u64,
    old: Option<&[u8]>,
    new: Option<&[u8]>,
) -> Result<(), StoreError> {
    let old = old.map(line_of).transpose()?.flatten().map(|l| l.place);
    let new = new.map(line_of).transpose()?.flatten().map(|l| l.place);
    if old == new {
        return Ok(());
    }
    let mut t = w.open_table(CART_LINES).map_err(err)?;
    if let Some(old) = old {
        t.remove(old.to_bytes().as_slice()).map_err(err)?;
    }
    if let Some(new) = new {
        t.insert(new.to_bytes().as_slice(), slot.to_be_bytes().as_slice())
            .map_err(err)?;
    }
    Ok(())
}

/// Indexes every stored line when the index is empty (a store an earlier version
/// wrote; nothing when it holds no lines), in the transaction that opens the store.
pub(super) fn index_if_missing(w: &WriteTransaction) -> Result<(), StoreError> {
    let mut t = w.open_table(CART_LINES).map_err(err)?;
    if t.first().map_err(err)?.is_some() {
        return Ok(());
    }
    let rows = w.open_table(CART_ROWS).map_err(err)?;
    let mut n = 0;
    for row in rows.iter().map_err(err)? {
        let (slot, v) = row.map_err(err)?;
        if let Some(line) = line_of(v.value())? {
            t.insert(line.place.to_bytes().as_slice(), slot.value())
                .map_err(err)?;
            n += 1;
        }
    }
    if n > 0 {
        tracing::info!(
            lines = n,
            "indexed the stored cart lines for the carts report"
        );
    }
    Ok(())
}

/// The report's lines from place `from` on, at most `limit` ([`lines::page`]): the
/// key ranges of the filter's campaign (or the tenant's campaigns, or the whole
/// table for an operator) within its days, in place order.
pub(super) fn page(
    db: &Database,
    f: &ReportFilter,
    from: Option<&LinePlace>,
    limit: usize,
) -> Result<Vec<CartLine>, StoreError> {
    let r = db.begin_read().map_err(err)?;
    let t = Tables {
        index: r.open_table(CART_LINES).map_err(err)?,
        rows: r.open_table(CART_ROWS).map_err(err)?,
    };
    let mut out = Vec::new();
    let campaigns: Option<Vec<String>> = match (&f.campaign_id, &f.tenant) {
        (Some(c), _) => Some(vec![c.clone()]),
        (None, Some(tenant)) => Some(tenant.campaigns.iter().cloned().collect()),
        (None, None) => None,
    };
    let from_bytes = from.map(LinePlace::to_bytes);
    let start_at = |lower: Vec<u8>| match &from_bytes {
        Some(b) if *b > lower => b.clone(),
        _ => lower,
    };
    let first_day = f.from_day.unwrap_or(i32::MIN);
    match campaigns {
        Some(campaigns) => {
            for c in campaigns {
                if out.len() >= limit {
                    break;
                }
                let start = start_at(lines::bytes_from(&c, first_day));
                scan(&t, f, start, Some(lines::bytes_after(&c)), limit, &mut out)?;
            }
        }
        None => scan(&t, f, start_at(Vec::new()), None, limit, &mut out)?,
    }
    Ok(out)
}

/// The index and the rows its slots name.
struct Tables<T> {
    index: T,
    rows: T,
}

impl<T: ReadableTable<&'static [u8], &'static [u8]>> Tables<T> {
    /// The line of the row at `slot` (an index entry without its row is corrupt).
    fn line(&self, slot: &[u8]) -> Result<CartLine, StoreError> {
        let row = self.rows.get(slot).map_err(err)?;
        let row = row.ok_or_else(|| super::corrupt("a cart line's entry without its row"))?;
        line_of(row.value())?.ok_or_else(|| super::corrupt("an empty cart line"))
    }
}

/// Appends the lines `f` selects from `start` up to `end`, until `out` holds `limit`;
/// a line before the filter's first day skips to that day of its campaign, one after
/// its last day to the next campaign, so days outside the range are never read.
fn scan(
    t: &Tables<impl ReadableTable<&'static [u8], &'static [u8]>>,
    f: &ReportFilter,
    mut start: Vec<u8>,
    end: Option<Vec<u8>>,
    limit: usize,
    out: &mut Vec<CartLine>,
) -> Result<(), StoreError> {
    'seek: while out.len() < limit {
        let range = match &end {
            Some(e) if start >= *e => return Ok(()),
            Some(e) => t.index.range(start.as_slice()..e.as_slice()),
            None => t.index.range(start.as_slice()..),
        };
        for row in range.map_err(err)? {
            let (_, slot) = row.map_err(err)?;
            let line = t.line(slot.value())?;
            let p = &line.place;
            if f.from_day.is_some_and(|d| p.day < d) {
                start = lines::bytes_from(&p.campaign_id, f.from_day.unwrap_or(p.day));
                continue 'seek;
            }
            if f.to_day.is_some_and(|d| p.day > d) {
                start = lines::bytes_after(&p.campaign_id);
                continue 'seek;
            }
            if lines::selects(f, &line) {
                out.push(line);
                if out.len() >= limit {
                    return Ok(());
                }
            }
        }
        return Ok(());
    }
    Ok(())
}
