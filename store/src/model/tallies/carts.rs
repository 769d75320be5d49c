//! What a cart line adds to the tallies: its adds (an event that takes the line from
//! no units to some, [`crate::model::carts::Transition::Add`]), each at the campaign of
//! its event on the UTC day of its time, valid when its ad id verified (the campaign
//! summary's `cartsAdded`) or beside (`invalidCartsAdded`). A line is an entity: an
//! event arriving late can turn a later add into an increment, so each record moves
//! the difference between the line's adds before and after it ([`moves`]), stamped
//! like any tally. Pure: the aggregator's fold and the backfill both count through it.

use std::collections::BTreeMap;

use super::{Grain, Metric, Place, Scope, TallyKey};
use crate::model::carts::{CartFact, Transition};
use crate::model::day_of;

/// A count of a line's adds (stored: [`Metric::Cart`] codes are `192 + index in`
/// [`CartField::ALL`]; never reorder).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CartField {
    /// Adds by events whose ad id verified.
    Added,
    /// Adds by events whose ad id did not verify.
    InvalidAdded,
}

impl CartField {
    /// Every field, in code order.
    pub const ALL: [CartField; 2] = [Self::Added, Self::InvalidAdded];

    /// Its index in [`Self::ALL`].
    pub fn index(self) -> usize {
        Self::ALL.iter().position(|f| *f == self).unwrap_or(0)
    }
}

/// A line's adds per (campaign, UTC day): (valid, invalid).
pub type Adds = BTreeMap<(String, i32), [i64; 2]>;

/// The adds of a line's facts, kept in order by `insert_fact` (time, then key).
pub fn adds(facts: &[CartFact]) -> Adds {
    let mut out = Adds::new();
    let mut prev = 0;
    for f in facts {
        if Transition::of(prev, f.units) == Transition::Add {
            let field = if f.status.is_billable() {
                CartField::Added
            } else {
                CartField::InvalidAdded
            };
            out.entry((f.campaign_id.clone(), day_of(f.time_ms)))
                .or_default()[field.index()] += 1;
        }
        prev = f.units;
    }
    out
}

/// The place a line's add counts in: its campaign's, on UTC `day`, in log `partition`.
pub fn place(campaign: &str, day: i32, partition: i32) -> Place {
    Place {
        campaign_id: campaign.to_owned(),
        scope: Scope::Campaign,
        grain: Grain::Day,
        bucket: day,
        creative: String::new(),
        catalog_id: String::new(),
        product_code: String::new(),
        partition,
    }
}

/// The net moves of a line whose adds were `old` and now are `new`.
pub fn moves(old: &Adds, new: &Adds, partition: i32) -> Vec<(TallyKey, i64)> {
    let mut out = Vec::new();
    let zero = [0; 2];
    for key in old
        .keys()
        .chain(new.keys().filter(|k| !old.contains_key(*k)))
    {
        let (before, after) = (old.get(key).unwrap_or(&zero), new.get(key).unwrap_or(&zero));
        for f in CartField::ALL {
            let d = after[f.index()] - before[f.index()];
            if d != 0 {
                out.push((
                    TallyKey {
                        place: place(&key.0, key.1, partition),
                        metric: Metric::Cart(f),
                    },
                    d,
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::status::AdIdStatus;

    fn fact(t: i64, units: u64, campaign: &str) -> CartFact {
        CartFact {
            dedup_key: t as u128,
            time_ms: t,
            units,
            value: None,
            campaign_id: campaign.into(),
            ad_id: "ad".into(),
            status: AdIdStatus::Verified,
        }
    }

    #[test]
    fn a_late_event_turns_an_add_into_an_increment() {
        let day = 86_400_000;
        let before = adds(&[fact(day + 10, 2, "a")]);
        assert_eq!(before.get(&("a".into(), 1)), Some(&[1, 0]));
        // An add of campaign b earlier the same line: a's event is an increment now.
        let after = adds(&[fact(day + 5, 1, "b"), fact(day + 10, 2, "a")]);
        let m = moves(&before, &after, 0);
        let by: Vec<(&str, i64)> = m
            .iter()
            .map(|(k, d)| (k.place.campaign_id.as_str(), *d))
            .collect();
        assert_eq!(by, vec![("a", -1), ("b", 1)]);
        assert!(moves(&after, &after, 0).is_empty());
        let mut unverified = fact(day + 20, 1, "a");
        unverified.status = AdIdStatus::Foreign;
        let removed_then_added =
            adds(&[fact(day + 10, 2, "a"), fact(day + 15, 0, "a"), unverified]);
        assert_eq!(removed_then_added.get(&("a".into(), 1)), Some(&[1, 1]));
    }
}
