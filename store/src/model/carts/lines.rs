//! The carts report's lines, paged by key: each cart line's state at its **place**
//! in the report's order, the campaign and UTC day of its latest event, then its key
//! (tracking id, stored catalog, product). A line's place moves when a later event
//! of another campaign or day arrives; the stores keep one entry per line at its
//! place (the embedded store's `cart_lines` table, ClickHouse's `cart_lines`), so a
//! page is a range of places: a tenant's or a campaign's lines of a range of days are
//! contiguous, and a page reads its rows, never the report again.
//!
//! The carts report filters a line by the campaign, ad id, catalog and day of its
//! latest event ([`selects`]), so the place
//! holds what the filter needs ahead of the rest. A line's state is derived from its
//! event rows alone ([`CartLine::of`]), so the entry a store keeps for a line is a
//! function of the rows it stores for it: rewriting a line's rows (a batch, a
//! replay, an erasure, an ageing pass) rewrites its entry, and nothing else does.
//!
//! Pure: [`page`] is the reference both stores are tested against, and the reading
//! of stores whose lines are not indexed yet.

use rm_schemas::money;
use serde::{Deserialize, Serialize};

use super::{latest_versions, CartEventRow, CartFact, CartKey, CartStateRow, Transition};
use crate::model::status::AdIdStatus;
use crate::model::{day_of, format_day};
use crate::ReportFilter;

/// Where a cart line sits in the carts report: ordered by these fields in turn
/// (bytewise strings, as ClickHouse compares them).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct LinePlace {
    /// Campaign of the line's latest event.
    pub campaign_id: String,
    /// UTC day of the line's latest event.
    pub day: i32,
    /// The shopper's tracking id.
    pub tracking_id: String,
    /// The catalog as stored (scoped by the namespace of the line's ad id).
    pub catalog_id: String,
    /// Product.
    pub product_code: String,
}

impl LinePlace {
    /// The place of a line whose latest event is `latest`.
    pub fn of(key: &CartKey, latest: &CartFact) -> Self {
        Self {
            campaign_id: latest.campaign_id.clone(),
            day: day_of(latest.time_ms),
            tracking_id: key.tracking_id.clone(),
            catalog_id: key.catalog_id.clone(),
            product_code: key.product_code.clone(),
        }
    }

    /// The line's key.
    pub fn key(&self) -> CartKey {
        CartKey {
            tracking_id: self.tracking_id.clone(),
            catalog_id: self.catalog_id.clone(),
            product_code: self.product_code.clone(),
        }
    }

    /// The place as bytes that sort as the place does (each string with its zero
    /// bytes escaped and a terminator, the day as a big-endian offset binary).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(
            self.campaign_id.len()
                + self.tracking_id.len()
                + self.catalog_id.len()
                + self.product_code.len()
                + 12,
        );
        push_str(&mut out, &self.campaign_id);
        out.extend_from_slice(&((self.day as u32) ^ 0x8000_0000).to_be_bytes());
        push_str(&mut out, &self.tracking_id);
        push_str(&mut out, &self.catalog_id);
        push_str(&mut out, &self.product_code);
        out
    }
}

/// The bytes of the first place of `campaign` on `day` or later: every place of the
/// campaign from that day on sorts at or after them ([`LinePlace::to_bytes`]).
pub fn bytes_from(campaign: &str, day: i32) -> Vec<u8> {
    let mut out = Vec::with_capacity(campaign.len() + 6);
    push_str(&mut out, campaign);
    out.extend_from_slice(&((day as u32) ^ 0x8000_0000).to_be_bytes());
    out
}

/// Bytes after every place of `campaign` and before every place of a later one.
pub fn bytes_after(campaign: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(campaign.len() + 2);
    push_str(&mut out, campaign);
    out.pop();
    out.push(1);
    out
}

/// A string as bytes that sort as it does, followed by others: `0` is escaped as
/// `0 0xFF`, and `0 0` ends it (below any byte that may follow within a string).
fn push_str(out: &mut Vec<u8>, s: &str) {
    for b in s.bytes() {
        out.push(b);
        if b == 0 {
            out.push(0xFF);
        }
    }
    out.extend_from_slice(&[0, 0]);
}

/// The place of a line's latest fact (`None` for a line without facts).
pub fn place_of_facts(key: &CartKey, facts: &[CartFact]) -> Option<LinePlace> {
    facts
        .iter()
        .max_by_key(|f| (f.time_ms, f.dedup_key))
        .map(|f| LinePlace::of(key, f))
}

/// One cart line as the carts report reads it: its place and what its state row is
/// made of.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CartLine {
    /// Where it sits.
    pub place: LinePlace,
    /// Distinct events of the line (its rows' replace version).
    pub version: u32,
    /// Event time of its latest event, ms.
    pub last_ms: i64,
    /// Units now.
    pub units: u64,
    /// The value of the latest event that carried one, as sent.
    pub last_value: Option<f64>,
    /// Adds.
    pub adds: u64,
    /// Increments.
    pub increments: u64,
    /// Decrements.
    pub decrements: u64,
    /// Removals.
    pub removals: u64,
    /// Realised ad id of the latest event.
    pub ad_id: String,
    /// Worst ad id status among the line's events.
    pub status: AdIdStatus,
}

impl CartLine {
    /// The line of `key` from its distinct events in (time, dedup key) order (`None`
    /// without events).
    pub fn of(key: &CartKey, evs: &[&CartEventRow]) -> Option<Self> {
        let last = evs.last()?;
        let count = |t: Transition| evs.iter().filter(|e| e.transition == t).count() as u64;
        Some(Self {
            place: LinePlace::of(key, &last.fact),
            version: last.version,
            last_ms: last.fact.time_ms,
            units: last.fact.units,
            last_value: evs.iter().rev().find_map(|e| e.fact.value),
            adds: count(Transition::Add),
            increments: count(Transition::Increment),
            decrements: count(Transition::Decrement),
            removals: count(Transition::Removal),
            ad_id: last.fact.ad_id.clone(),
            status: evs.iter().map(|e| e.fact.status).max().unwrap_or_default(),
        })
    }

    /// The report's row.
    pub fn state(&self) -> CartStateRow {
        CartStateRow {
            tracking_id: self.place.tracking_id.clone(),
            catalog_id: rm_schemas::namespace::bare(&self.place.catalog_id).to_owned(),
            product_code: self.place.product_code.clone(),
            units: self.units,
            last_conversion_value: self
                .last_value
                .and_then(money::decimal_of_f64)
                .map(|v| money::stable(v, money::DEFAULT_CURRENCY)),
            currency: money::DEFAULT_CURRENCY,
            adds: self.adds,
            increments: self.increments,
            decrements: self.decrements,
            removals: self.removals,
            campaign_id: self.place.campaign_id.clone(),
            ad_id: self.ad_id.clone(),
            last_day: format_day(self.place.day),
            ad_id_status: self.status,
        }
    }
}

/// The lines of these rows (any order, any versions: each line's newest), in place
/// order.
pub fn lines<'a>(rows: impl IntoIterator<Item = &'a CartEventRow>) -> Vec<CartLine> {
    let mut out: Vec<CartLine> = latest_versions(rows)
        .iter()
        .filter_map(|(k, evs)| CartLine::of(k, evs))
        .collect();
    out.sort_by(|a, b| a.place.cmp(&b.place));
    out
}

/// The line of one line's stored rows (`None` when empty).
pub fn line_of_rows(rows: &[CartEventRow]) -> Option<CartLine> {
    lines(rows).into_iter().next()
}

/// Whether the carts report with filter `f` holds this line: the campaign (the
/// tenant's), ad id, catalog and day of its latest event.
pub fn selects(f: &ReportFilter, l: &CartLine) -> bool {
    f.matches(
        &l.place.campaign_id,
        Some(&l.ad_id),
        Some(&l.place.catalog_id),
        l.place.day,
    )
}

/// The first `limit` lines of `lines` (in place order) that `f` selects, from place
/// `from` on (inclusive; `None`: the first).
pub fn page(
    lines: impl IntoIterator<Item = CartLine>,
    f: &ReportFilter,
    from: Option<&LinePlace>,
    limit: usize,
) -> Vec<CartLine> {
    lines
        .into_iter()
        .filter(|l| from.is_none_or(|p| l.place >= *p) && selects(f, l))
        .take(limit)
        .collect()
}

#[cfg(test)]
mod tests;
