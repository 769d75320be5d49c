//! Cart state per tracking id, catalog and product (spec rule 10).
//!
//! `units` is the absolute count, never a delta. Sorting a cart's distinct events by
//! event time (ties by dedup key), each event moves the cart from the previous units
//! (0 before the first) to its own: `0 -> n>0` is an **add**, a rise an
//! **increment**, a fall to `m > 0` a **decrement**, a fall to 0 a **removal**, no
//! change nothing. The sequence 1, 2, 3, 0 is one add, two increments and one removal
//! whatever order it arrives in. The current units and value are those of the latest
//! event by event time (the value of the latest event that carried one).
//!
//! Each event's transition is attributed to the campaign of its own ad. Per campaign
//! and product: carts added (adds), units added (the sum of rises), and value (the
//! latest value of each cart whose latest event belongs to the campaign and still
//! holds units). Per campaign and day ([`campaign_day_adds`]): carts added, on the
//! day of the add event (for the campaign summary).
//!
//! A cart state row's `adIdStatus` is the worst [`AdIdStatus`] among the line's
//! events (see [`super::status`]). A cart line belongs to the namespace of its ad
//! id: its key's catalog is stored scoped by it (the aggregator's fold; an unverified
//! ad id's events go to a line of their own), and reports show the bare catalog. The
//! per-campaign rollups count the events of verified ad ids only, so a forged ad id
//! never adds a cart to a campaign.
//!
//! **Money.** A conversion value travels as an `f64` in the log and the stores (the
//! beacon's `conversionValue`; the record format is unchanged), and is read back as
//! the decimal of its shortest text (`rm_schemas::money::decimal_of_f64`: the value
//! sent, for any value of at most 15 significant digits). The reports show it and
//! sum it exactly, as decimal strings (`"7.50"`), with a `currency`: the beacon names
//! none, so it is the deployment's default (USD, `rm_schemas::money::DEFAULT_CURRENCY`).

pub mod lines;

use std::collections::BTreeMap;

use rm_schemas::money::{self, Currency, Decimal};
use serde::{Deserialize, Serialize};

use super::campaigns::CartAddsRow;
use super::status::AdIdStatus;
use super::{day_of, format_day};

/// Identifies a cart line.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct CartKey {
    /// The shopper's tracking id.
    pub tracking_id: String,
    /// Catalog.
    pub catalog_id: String,
    /// Product.
    pub product_code: String,
}

/// One distinct cart event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CartFact {
    /// Dedup key.
    pub dedup_key: u128,
    /// Event time, ms since the epoch.
    pub time_ms: i64,
    /// Absolute units after the change.
    pub units: u64,
    /// Conversion value, when sent.
    pub value: Option<f64>,
    /// Campaign of the ad.
    pub campaign_id: String,
    /// Realised ad id.
    pub ad_id: String,
    /// How the ad id verified (best of the event's copies).
    #[serde(default)]
    pub status: AdIdStatus,
}

/// What an event did to its cart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Transition {
    /// 0 to more.
    Add,
    /// A rise.
    Increment,
    /// A fall that keeps units.
    Decrement,
    /// A fall to 0.
    Removal,
    /// The same units again.
    Unchanged,
}

impl Transition {
    /// Classifies a move from `prev` to `units`.
    pub fn of(prev: u64, units: u64) -> Self {
        match (prev, units) {
            (p, u) if u == p => Self::Unchanged,
            (0, _) => Self::Add,
            (p, u) if u > p => Self::Increment,
            (_, 0) => Self::Removal,
            _ => Self::Decrement,
        }
    }

    /// Stable name, as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Add => "add",
            Self::Increment => "increment",
            Self::Decrement => "decrement",
            Self::Removal => "removal",
            Self::Unchanged => "unchanged",
        }
    }
}

/// One cart event with the transition it caused (derived, replaced when the cart's
/// event set grows).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CartEventRow {
    /// The cart.
    pub key: CartKey,
    /// The event.
    pub fact: CartFact,
    /// Units before this event.
    pub prev_units: u64,
    /// The transition.
    pub transition: Transition,
    /// Distinct events of the cart when derived (a replace version).
    pub version: u32,
}

/// Adds `fact` to a cart's set ([`super::insert_fact`]); false when it was already
/// there.
pub fn insert_fact(facts: &mut Vec<CartFact>, fact: CartFact) -> bool {
    super::insert_fact(facts, fact)
}

super::impl_fact!(CartFact);

/// Derives the transition of every event of one cart from its set of facts.
pub fn derive_cart(key: &CartKey, facts: &[CartFact]) -> Vec<CartEventRow> {
    let mut sorted: Vec<CartFact> = Vec::with_capacity(facts.len());
    for f in facts {
        insert_fact(&mut sorted, f.clone());
    }
    let version = sorted.len() as u32;
    let mut prev = 0;
    sorted
        .into_iter()
        .map(|fact| {
            let row = CartEventRow {
                key: key.clone(),
                prev_units: prev,
                transition: Transition::of(prev, fact.units),
                version,
                fact,
            };
            prev = row.fact.units;
            row
        })
        .collect()
}

/// The state of one cart line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CartStateRow {
    /// Tracking id.
    pub tracking_id: String,
    /// Catalog.
    pub catalog_id: String,
    /// Product.
    pub product_code: String,
    /// Units now (latest by event time).
    pub units: u64,
    /// Latest conversion value sent, if any, exact (a decimal string).
    #[serde(with = "money::optional_decimal_text")]
    pub last_conversion_value: Option<Decimal>,
    /// The currency of the value: the deployment's default (module header).
    pub currency: Currency,
    /// Adds.
    pub adds: u64,
    /// Increments.
    pub increments: u64,
    /// Decrements.
    pub decrements: u64,
    /// Removals.
    pub removals: u64,
    /// Campaign of the latest event.
    pub campaign_id: String,
    /// Realised ad id of the latest event.
    pub ad_id: String,
    /// UTC day of the latest event.
    pub last_day: String,
    /// Worst ad id status among the line's events.
    pub ad_id_status: AdIdStatus,
}

/// One row of the per-campaign cart rollup.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CartCampaignRow {
    /// Campaign.
    pub campaign_id: String,
    /// Catalog.
    pub catalog_id: String,
    /// Product.
    pub product_code: String,
    /// Adds caused by the campaign's ads.
    pub carts_added: u64,
    /// Units added (sum of rises) by the campaign's ads.
    pub units_added: u64,
    /// Latest value of carts still holding units whose latest event is the
    /// campaign's, summed exactly (a decimal string).
    #[serde(with = "money::decimal_text")]
    pub value: Decimal,
    /// The currency of `value` (module header).
    pub currency: Currency,
}

/// Cart states from derived event rows (any order; rows of older versions of a cart
/// are superseded by the newest version).
pub fn states<'a>(rows: impl IntoIterator<Item = &'a CartEventRow>) -> Vec<CartStateRow> {
    latest_versions(rows)
        .iter()
        .filter_map(|(k, evs)| state_of(k, evs))
        .collect()
}

/// Per campaign and product rollup from derived event rows.
pub fn campaign_rollup<'a>(
    rows: impl IntoIterator<Item = &'a CartEventRow>,
) -> Vec<CartCampaignRow> {
    let mut out: BTreeMap<(String, String, String), CartCampaignRow> = BTreeMap::new();
    for (key, evs) in latest_versions(rows) {
        // Only events of verified ad ids move a campaign's carts.
        for e in evs.iter().filter(|e| e.fact.status.is_billable()) {
            let r = entry(&mut out, &e.fact.campaign_id, &key);
            match e.transition {
                Transition::Add => {
                    r.carts_added += 1;
                    r.units_added += e.fact.units;
                }
                Transition::Increment => r.units_added += e.fact.units - e.prev_units,
                _ => {}
            }
        }
        let Some(s) = state_of(&key, &evs) else {
            continue;
        };
        if s.units > 0 && evs.last().is_some_and(|e| e.fact.status.is_billable()) {
            let r = entry(&mut out, &s.campaign_id, &key);
            let v = s.last_conversion_value.unwrap_or_default();
            r.value = super::attribution::add(r.value, v);
        }
    }
    out.into_values()
        .map(|r| CartCampaignRow {
            value: money::stable(r.value, r.currency),
            ..r
        })
        .collect()
}

/// Adds per campaign and day of the add event, from derived event rows (any order,
/// older versions superseded), sorted by campaign and day.
pub fn campaign_day_adds<'a>(rows: impl IntoIterator<Item = &'a CartEventRow>) -> Vec<CartAddsRow> {
    let mut out: BTreeMap<(String, i32), (u64, u64)> = BTreeMap::new();
    for evs in latest_versions(rows).values() {
        for e in evs.iter().filter(|e| e.transition == Transition::Add) {
            let n = out
                .entry((e.fact.campaign_id.clone(), day_of(e.fact.time_ms)))
                .or_default();
            if e.fact.status.is_billable() {
                n.0 += 1;
            } else {
                n.1 += 1;
            }
        }
    }
    out.into_iter()
        .map(|((campaign_id, day), (carts_added, invalid))| CartAddsRow {
            campaign_id,
            day: format_day(day),
            carts_added,
            invalid_carts_added: invalid,
        })
        .collect()
}

fn entry<'m>(
    out: &'m mut BTreeMap<(String, String, String), CartCampaignRow>,
    campaign: &str,
    key: &CartKey,
) -> &'m mut CartCampaignRow {
    let catalog = rm_schemas::namespace::bare(&key.catalog_id);
    out.entry((
        campaign.to_owned(),
        catalog.to_owned(),
        key.product_code.clone(),
    ))
    .or_insert_with(|| CartCampaignRow {
        campaign_id: campaign.to_owned(),
        catalog_id: catalog.to_owned(),
        product_code: key.product_code.clone(),
        carts_added: 0,
        units_added: 0,
        value: Decimal::ZERO,
        currency: money::DEFAULT_CURRENCY,
    })
}

fn latest_versions<'a>(
    rows: impl IntoIterator<Item = &'a CartEventRow>,
) -> BTreeMap<CartKey, Vec<&'a CartEventRow>> {
    let mut by_cart: BTreeMap<CartKey, Vec<&CartEventRow>> = BTreeMap::new();
    for r in rows {
        by_cart.entry(r.key.clone()).or_default().push(r);
    }
    for evs in by_cart.values_mut() {
        let newest = evs.iter().map(|e| e.version).max().unwrap_or(0);
        evs.retain(|e| e.version == newest);
        evs.sort_by_key(|e| (e.fact.time_ms, e.fact.dedup_key));
        evs.dedup_by_key(|e| e.fact.dedup_key);
    }
    by_cart
}

/// The state row of a line from its distinct events in (time, dedup key) order
/// (`None` without events).
fn state_of(key: &CartKey, evs: &[&CartEventRow]) -> Option<CartStateRow> {
    lines::CartLine::of(key, evs).map(|l| l.state())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn key() -> CartKey {
        CartKey {
            tracking_id: "s".into(),
            catalog_id: "cat".into(),
            product_code: "p".into(),
        }
    }

    fn fact(k: u128, t: i64, units: u64) -> CartFact {
        CartFact {
            dedup_key: k,
            time_ms: t,
            units,
            value: Some(units as f64 * 2.5),
            campaign_id: "c".into(),
            ad_id: "a".into(),
            status: AdIdStatus::Verified,
        }
    }

    #[test]
    fn one_two_three_zero_in_any_order() {
        let seq = [
            fact(1, 10, 1),
            fact(2, 20, 2),
            fact(3, 30, 3),
            fact(4, 40, 0),
        ];
        for perm in [[0, 1, 2, 3], [3, 2, 1, 0], [2, 0, 3, 1], [1, 3, 0, 2]] {
            let facts: Vec<CartFact> = perm.iter().map(|i| seq[*i].clone()).collect();
            let rows = derive_cart(&key(), &facts);
            let s = &states(&rows)[0];
            assert_eq!(
                (s.units, s.adds, s.increments, s.decrements, s.removals),
                (0, 1, 2, 0, 1),
                "{perm:?}"
            );
            assert_eq!(s.last_conversion_value, Some(Decimal::ZERO));
            let roll = campaign_rollup(&rows);
            assert_eq!(
                (roll[0].carts_added, roll[0].units_added, roll[0].value),
                (1, 3, Decimal::ZERO)
            );
        }
    }

    #[test]
    fn deltas_sent_instead_of_units_show_up_as_unchanged_and_decrements() {
        let rows = derive_cart(&key(), &[fact(1, 1, 1), fact(2, 2, 1), fact(3, 3, 1)]);
        let s = &states(&rows)[0];
        assert_eq!((s.units, s.adds, s.increments), (1, 1, 0));
        let roll = campaign_rollup(&rows);
        assert_eq!(
            (roll[0].carts_added, roll[0].units_added, roll[0].value),
            (1, 1, Decimal::new(25, 1))
        );
        assert_eq!(roll[0].value.to_string(), "2.50");
    }

    #[test]
    fn cart_values_sum_exactly() {
        // Ten carts each last worth 0.1: 1.00, where f64 sums to 0.9999999999999999.
        let rows: Vec<CartEventRow> = (0..10)
            .flat_map(|i| {
                let k = CartKey {
                    tracking_id: format!("s{i}"),
                    ..key()
                };
                let f = CartFact {
                    value: Some(0.1),
                    ..fact(1, 1, 1)
                };
                derive_cart(&k, &[f])
            })
            .collect();
        let roll = campaign_rollup(&rows);
        assert_eq!(roll.len(), 1);
        let json = serde_json::to_value(&roll[0]).expect("json");
        assert_eq!(
            (&json["value"], &json["currency"]),
            (&serde_json::json!("1.00"), &serde_json::json!("USD"))
        );
        let s = serde_json::to_value(&states(&rows)[0]).expect("json");
        assert_eq!(s["lastConversionValue"], "0.10");
    }

    #[test]
    fn older_versions_are_superseded() {
        let old = derive_cart(&key(), &[fact(1, 10, 2)]);
        let new = derive_cart(&key(), &[fact(1, 10, 2), fact(2, 5, 1)]);
        let all: Vec<CartEventRow> = old.into_iter().chain(new).collect();
        let s = &states(&all)[0];
        assert_eq!((s.units, s.adds, s.increments), (2, 1, 1));
    }

    proptest! {
        #[test]
        fn order_and_duplicates_do_not_matter(
            raw in proptest::collection::vec((0i64..1000, 0u64..6), 0..30),
            seed in any::<usize>(),
        ) {
            let facts: Vec<CartFact> = raw.iter().enumerate().map(|(i, (t, u))| fact(i as u128, *t, *u)).collect();
            let base = derive_cart(&key(), &facts);
            let mut again = facts.clone();
            again.extend(facts.iter().take(3).cloned());
            let n = again.len().max(1);
            again.rotate_left(seed % n);
            prop_assert_eq!(derive_cart(&key(), &again), base.clone());
            // Adds and removals alternate, so they differ by at most one.
            let s = states(&base);
            if let Some(s) = s.first() {
                prop_assert!(s.adds == s.removals || s.adds == s.removals + 1);
                prop_assert_eq!(s.units > 0, s.adds == s.removals + 1);
            }
        }
    }
}
