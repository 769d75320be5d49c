//! What a cart line adds to the tallies (issue 26). A line is an entity: an event
//! arriving late can turn a later add into an increment, or a line's latest event
//! into an earlier one, so each record moves the difference between the line's
//! contributions before and after it ([`moves`]), stamped like any tally. Pure: the
//! aggregator's fold and the backfill both count through it.
//!
//! A line's contributions, per campaign and quarter hour ([`Adds`]):
//! - at its campaign's places ([`place`], the campaign summary's `cartsAdded` and
//!   `invalidCartsAdded`): its adds (an event that takes the line from no units to
//!   some, [`crate::model::carts::Transition::Add`]) on the UTC day and in the quarter
//!   hour of the add (so the summary reads in any zone), valid when the event's ad id
//!   verified, else beside;
//! - at its campaign's product place ([`product_place`]: the line's scoped catalog
//!   and product, [`Scope::CartProduct`]; the carts-per-campaign report), the events
//!   of verified ad ids only, as [`crate::model::carts::campaign_rollup`] counts them:
//!   those events, their adds and the units they added (the sum of rises) on the days
//!   of the events; and the line's latest value (its latest event's campaign and day,
//!   when that event verified and leaves units in the cart), exactly as two integers
//!   (whole units and the 10^-8 remainder, [`sales::split_amount`]).
//!
//! So the report over a range that reaches today equals the facts' rollup; over a
//! range that ends earlier, a line's value counts on the day of its latest event (not
//! of its latest event in the range).

use std::collections::BTreeMap;

use super::hours::hour_of_quarter;
use super::{sales, Grain, Metric, Place, Scope, Tally, TallyKey, BACKFILL_PARTITION};
use crate::model::carts::{CartCampaignRow, CartEventRow, CartFact, CartKey, Transition};
use crate::model::day_of;

/// A count of cart lines (stored: [`Metric::Cart`] codes are `192 + index in`
/// [`CartField::ALL`]; never reorder).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CartField {
    /// Adds by events whose ad id verified (campaign place).
    Added,
    /// Adds by events whose ad id did not verify (campaign place).
    InvalidAdded,
    /// Events whose ad id verified (product place: a report row exists).
    Events,
    /// Adds by events whose ad id verified (product place).
    ProductAdded,
    /// Units added by events whose ad id verified: adds' units and increments' rises
    /// (product place).
    UnitsAdded,
    /// The whole units of the lines' latest values (product place).
    ValueWhole,
    /// The 10^-8 remainder of the lines' latest values (product place).
    ValueE8,
}

impl CartField {
    /// Every field, in code order.
    pub const ALL: [CartField; 7] = [
        Self::Added,
        Self::InvalidAdded,
        Self::Events,
        Self::ProductAdded,
        Self::UnitsAdded,
        Self::ValueWhole,
        Self::ValueE8,
    ];

    /// Its index in [`Self::ALL`].
    pub fn index(self) -> usize {
        Self::ALL.iter().position(|f| *f == self).unwrap_or(0)
    }

    /// Whether it counts at the line's product place (else its campaign's).
    pub fn is_product(self) -> bool {
        !matches!(self, Self::Added | Self::InvalidAdded)
    }
}

/// A line's contributions per (campaign, quarter hour), by [`CartField::index`].
pub type Adds = BTreeMap<(String, i32), [i64; 7]>;

/// The quarter hour of an instant.
fn quarter(time_ms: i64) -> i32 {
    Grain::Quarter.bucket(time_ms)
}

/// The UTC day of a quarter hour.
fn day_of_quarter(q: i32) -> i32 {
    day_of(Grain::Quarter.start_ms(q))
}

/// The contributions of a line's facts, kept in order by `insert_fact` (time, then
/// key).
pub fn adds(facts: &[CartFact]) -> Adds {
    let mut out = Adds::new();
    let mut prev = 0;
    for f in facts {
        let t = Transition::of(prev, f.units);
        let at = out
            .entry((f.campaign_id.clone(), quarter(f.time_ms)))
            .or_default();
        if f.status.is_billable() {
            at[CartField::Events.index()] += 1;
            match t {
                Transition::Add => {
                    at[CartField::Added.index()] += 1;
                    at[CartField::ProductAdded.index()] += 1;
                    at[CartField::UnitsAdded.index()] += units(f.units);
                }
                Transition::Increment => {
                    at[CartField::UnitsAdded.index()] += units(f.units) - units(prev);
                }
                _ => {}
            }
        } else if t == Transition::Add {
            at[CartField::InvalidAdded.index()] += 1;
        }
        prev = f.units;
    }
    if let Some(last) = facts
        .last()
        .filter(|l| l.units > 0 && l.status.is_billable())
    {
        let value = facts
            .iter()
            .rev()
            .find_map(|f| f.value)
            .and_then(rm_schemas::money::decimal_of_f64)
            .unwrap_or_default();
        let (whole, e8) = sales::split_amount(value);
        let at = out
            .entry((last.campaign_id.clone(), quarter(last.time_ms)))
            .or_default();
        at[CartField::ValueWhole.index()] += whole;
        at[CartField::ValueE8.index()] += e8;
    }
    out.retain(|_, v| v.iter().any(|n| *n != 0));
    out
}

fn units(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The place a line's adds count in: its campaign's, on UTC `day`, in log `partition`.
pub fn place(campaign: &str, day: i32, partition: i32) -> Place {
    place_at(campaign, Grain::Day, day, partition)
}

/// A campaign's place of `grain` and `bucket`, in log `partition`.
fn place_at(campaign: &str, grain: Grain, bucket: i32, partition: i32) -> Place {
    Place {
        campaign_id: campaign.into(),
        scope: Scope::Campaign,
        grain,
        bucket,
        creative: Default::default(),
        catalog_id: Default::default(),
        product_code: Default::default(),
        partition,
    }
}

/// The place a line's product counts in: its campaign's with the line's (scoped)
/// catalog and product, on UTC `day`, in log `partition`.
pub fn product_place(line: &CartKey, campaign: &str, day: i32, partition: i32) -> Place {
    Place {
        scope: Scope::CartProduct,
        catalog_id: line.catalog_id.as_str().into(),
        product_code: line.product_code.as_str().into(),
        ..place(campaign, day, partition)
    }
}

/// Every place a line's event of `campaign` at `time_ms` may move: its campaign's
/// day, quarter hour and hour, and its product's day.
pub fn places(line: &CartKey, campaign: &str, time_ms: i64, partition: i32) -> [Place; 4] {
    let day = day_of(time_ms);
    let q = quarter(time_ms);
    [
        place(campaign, day, partition),
        place_at(campaign, Grain::Quarter, q, partition),
        place_at(campaign, Grain::Hour, hour_of_quarter(q), partition),
        product_place(line, campaign, day, partition),
    ]
}

/// The net moves of `line` whose contributions were `old` and now are `new`, netted
/// per tally (two quarter hours of a day move the same day's tally).
pub fn moves(line: &CartKey, old: &Adds, new: &Adds, partition: i32) -> Vec<(TallyKey, i64)> {
    let mut out: BTreeMap<TallyKey, i64> = BTreeMap::new();
    let zero = [0; 7];
    for key in old
        .keys()
        .chain(new.keys().filter(|k| !old.contains_key(*k)))
    {
        let (before, after) = (old.get(key).unwrap_or(&zero), new.get(key).unwrap_or(&zero));
        let (campaign, q) = (&key.0, key.1);
        let day = day_of_quarter(q);
        for f in CartField::ALL {
            let d = after[f.index()] - before[f.index()];
            if d == 0 {
                continue;
            }
            let metric = Metric::Cart(f);
            if f.is_product() {
                let place = product_place(line, campaign, day, partition);
                *out.entry(TallyKey { place, metric }).or_default() += d;
            } else {
                for place in [
                    place(campaign, day, partition),
                    place_at(campaign, Grain::Quarter, q, partition),
                    place_at(campaign, Grain::Hour, hour_of_quarter(q), partition),
                ] {
                    *out.entry(TallyKey { place, metric }).or_default() += d;
                }
            }
        }
    }
    out.into_iter().filter(|(_, d)| *d != 0).collect()
}

/// The carts-per-campaign report's rows from summed product-place tallies, per
/// campaign, bare catalog and product (every day of the read summed), keeping the
/// places `keep` selects; a row exists where the campaign's verified events are.
pub fn campaign_rows(
    summed: &[super::SummedTally],
    keep: impl Fn(&Place) -> bool,
) -> Vec<CartCampaignRow> {
    let mut groups: BTreeMap<(String, String, String), [i64; 7]> = BTreeMap::new();
    for s in summed {
        let (Metric::Cart(f), Scope::CartProduct) = (s.metric, s.place.scope) else {
            continue;
        };
        if !keep(&s.place) {
            continue;
        }
        let p = &s.place;
        let key = (
            p.campaign_id.to_string(),
            rm_schemas::namespace::bare(&p.catalog_id).to_owned(),
            p.product_code.to_string(),
        );
        groups.entry(key).or_default()[f.index()] += s.value;
    }
    groups
        .into_iter()
        .filter(|(_, v)| v[CartField::Events.index()] > 0)
        .map(|((campaign_id, catalog_id, product_code), v)| {
            let count = |f: CartField| u64::try_from(v[f.index()]).unwrap_or(0);
            let currency = rm_schemas::money::DEFAULT_CURRENCY;
            CartCampaignRow {
                campaign_id,
                catalog_id,
                product_code,
                carts_added: count(CartField::ProductAdded),
                units_added: count(CartField::UnitsAdded),
                value: rm_schemas::money::stable(
                    sales::join_amount(
                        v[CartField::ValueWhole.index()],
                        v[CartField::ValueE8.index()],
                    ),
                    currency,
                ),
                currency,
            }
        })
        .collect()
}

/// The product-place counts of stored lines (each line's newest rows), under the
/// backfill's partition: what a store written before them needs (its writer adds
/// the marker, [`TallyKey::carts_marker`], after them).
pub fn backfill_rows(rows: &[CartEventRow]) -> Vec<(TallyKey, Tally)> {
    backfill_rows_of(rows, |p| p.scope == Scope::CartProduct)
}

/// The counts of stored lines (each line's newest rows) at the places `keep`
/// selects, under the backfill's partition.
pub fn backfill_rows_of(
    rows: &[CartEventRow],
    keep: impl Fn(&Place) -> bool,
) -> Vec<(TallyKey, Tally)> {
    let mut lines: BTreeMap<&CartKey, (u32, Vec<CartFact>)> = BTreeMap::new();
    for r in rows {
        let e = lines.entry(&r.key).or_insert((r.version, Vec::new()));
        if r.version > e.0 {
            *e = (r.version, Vec::new());
        }
        if r.version == e.0 {
            crate::model::carts::insert_fact(&mut e.1, r.fact.clone());
        }
    }
    let mut counts: BTreeMap<TallyKey, i64> = BTreeMap::new();
    for (line, (_, facts)) in lines {
        let moved = moves(line, &Adds::new(), &adds(&facts), BACKFILL_PARTITION);
        for (k, d) in moved {
            if keep(&k.place) {
                *counts.entry(k).or_default() += d;
            }
        }
    }
    super::zones::stamped(counts)
}

#[cfg(test)]
mod tests;
