//! One served ad, one billable impression and one billable click per thing it
//! carries (issue 26): what the aggregator decides as each event of a realised ad id
//! arrives, and the small state it keeps per ad id to decide it.
//!
//! A realised ad id is one decision of the ad server: one ad, served once, to one
//! place. So whatever tracking ids, timestamps or other parameters its beacons name,
//! it yields at most **one billable event per [`Unit`]**: one ad impression and one
//! ad click (the creative it carries), one product impression and one product click
//! per product (a product ad's product, a banner's companion products), and one video
//! view per video creative (the first viewer's; another tracking id's view of the same
//! served ad is its repeat, counted beside the funnel). The first
//! eligible event of a unit to arrive takes it ([`ServedAd::take`]); every other
//! distinct event of the unit is invalid as `served_ad_repeat`. A copy of the event
//! that took it (same dedup key) stays billable, so a replay decides the same way.
//!
//! Two rules need no state ([`stateless`]): an event dated before its ad was served
//! (its expiry minus the ads' lifetime `RM_API_AD_TTL_SECS`, less the future-skew
//! allowance) is `before_serve`, and a product event naming a product its product ad
//! did not carry is `product_not_in_ad` (the ad id says which one:
//! `rm_schemas::ad_id::AdId::carries_product`). Neither takes a unit, and neither (nor
//! a repeat) ever becomes an attribution touch.
//!
//! **Only eligible events take a unit:** valid traffic whose ad id verified and that
//! the stateless rules let through. A bot's, an unverified or a prefetched copy keeps
//! its own reason and leaves the unit to the first genuine one.
//!
//! **Exactly once.** The state is a function of the sequence of events the ad id's
//! partition delivered (records are keyed by ad id, `EventRecord::partition_key`), and
//! it is stored with the batch that changed it; a batch replayed after a crash finds
//! every unit it took already taken by the same dedup keys, so it decides the same.
//!
//! **Bounded.** At most [`MAX_UNITS`] units (further ones are repeats: no real ad
//! carries that many products) and [`MAX_SHOPPERS`] shopper hashes (the rest only
//! counted) per ad id: a few hundred bytes, kept while the ad id can still be
//! billable.

use serde::{Deserialize, Serialize};

use super::traffic::TrafficClass;

/// Most units one served ad may yield; the rest are repeats.
pub const MAX_UNITS: usize = 64;
/// Most shoppers remembered per served ad (more are only counted).
pub const MAX_SHOPPERS: usize = 8;

/// What a served ad can yield one billable event of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Unit<'a> {
    /// The ad's impression (`adImpression`).
    AdImpression,
    /// The ad's click (`adClick`).
    AdClick,
    /// A product's impression (`productImpression`): catalog and product.
    ProductImpression(&'a str, &'a str),
    /// A product's click (`productClick`): catalog and product.
    ProductClick(&'a str, &'a str),
    /// A video view of a creative (`videoId`): taken by the first view (a tracking
    /// id, [`view_identity`]) with an eligible event.
    View(&'a str),
}

/// The identity a view takes its [`Unit::View`] with: its viewer, the tracking id's
/// [`super::traffic::shopper_hash`].
pub fn view_identity(viewer: u64) -> u128 {
    u128::from(viewer)
}

impl Unit<'_> {
    fn kind(&self) -> u8 {
        match self {
            Self::AdImpression => 0,
            Self::AdClick => 1,
            Self::ProductImpression(..) => 2,
            Self::ProductClick(..) => 3,
            Self::View(_) => 4,
        }
    }

    fn same(&self, t: &Taken) -> bool {
        if t.kind != self.kind() {
            return false;
        }
        match self {
            Self::AdImpression | Self::AdClick => true,
            Self::ProductImpression(c, p) | Self::ProductClick(c, p) => {
                t.catalog == *c && t.product == *p
            }
            Self::View(video) => t.product == *video,
        }
    }
}

/// What an eligible event did to its unit ([`ServedAd::claim`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Take {
    /// It took the unit: the served ad's billable event of it.
    New,
    /// A copy of the event that took the unit (same dedup key): still billable.
    Copy,
    /// Another event took the unit (or the ad has no room for more): a repeat.
    Repeat,
}

/// A unit and the event that took it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Taken {
    kind: u8,
    catalog: String,
    product: String,
    dedup_key: u128,
}

/// What the aggregator keeps per realised ad id.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServedAd {
    /// Units taken, in the order they were.
    taken: Vec<Taken>,
    /// Distinct shoppers seen (hashes), at most [`MAX_SHOPPERS`].
    shoppers: Vec<u64>,
    /// Further distinct shoppers, not remembered (an estimate from then on).
    more_shoppers: u32,
}

impl ServedAd {
    /// Whether the event `dedup_key` of `unit` is the served ad's billable one: the
    /// first to ask takes the unit, and so does any copy of it later; every other is a
    /// repeat. Call it for eligible events only (see the module header).
    pub fn take(&mut self, unit: Unit<'_>, dedup_key: u128) -> bool {
        self.claim(unit, dedup_key) != Take::Repeat
    }

    /// As [`Self::take`], saying whether the event took the unit now, is a copy of
    /// the one that took it earlier, or is a repeat (what moves a tally is the first).
    pub fn claim(&mut self, unit: Unit<'_>, dedup_key: u128) -> Take {
        if let Some(t) = self.taken.iter().find(|t| unit.same(t)) {
            return if t.dedup_key == dedup_key {
                Take::Copy
            } else {
                Take::Repeat
            };
        }
        if self.taken.len() >= MAX_UNITS {
            return Take::Repeat;
        }
        let (catalog, product) = match unit {
            Unit::AdImpression | Unit::AdClick => ("", ""),
            Unit::ProductImpression(c, p) | Unit::ProductClick(c, p) => (c, p),
            Unit::View(video) => ("", video),
        };
        self.taken.push(Taken {
            kind: unit.kind(),
            catalog: catalog.to_owned(),
            product: product.to_owned(),
            dedup_key,
        });
        Take::New
    }

    /// Whether another event than `dedup_key` took `unit` (without taking it): how a
    /// copy that may not take a unit (its ad id did not verify) is judged, so that no
    /// mix of copies of one event makes it billable beside the unit's event.
    pub fn taken_by_another(&self, unit: Unit<'_>, dedup_key: u128) -> bool {
        self.taken
            .iter()
            .any(|t| unit.same(t) && t.dedup_key != dedup_key)
    }

    /// Notes a shopper (a tracking id's hash, 0 for none); true when it makes the ad
    /// id's second distinct shopper, the moment it shows it was shown to more than one
    /// (a page that caches ad responses across shoppers, or someone replaying it).
    pub fn see(&mut self, shopper: u64) -> bool {
        if shopper == 0 || self.shoppers.contains(&shopper) {
            return false;
        }
        if self.shoppers.len() < MAX_SHOPPERS {
            self.shoppers.push(shopper);
            return self.shoppers.len() == 2;
        }
        self.more_shoppers = self.more_shoppers.saturating_add(1);
        false
    }

    /// Distinct shoppers seen (exact up to [`MAX_SHOPPERS`]).
    pub fn shoppers(&self) -> usize {
        self.shoppers.len() + self.more_shoppers as usize
    }

    /// Units taken.
    pub fn units(&self) -> usize {
        self.taken.len()
    }

    /// A version that grows with every change (the state only ever grows), for a
    /// store that keeps the newest of several rows.
    pub fn version(&self) -> u64 {
        ((self.taken.len() as u64) << 40) + self.shoppers() as u64
    }
}

/// Whether the served ad `ad_id` expired before `before` (Unix seconds): its state
/// may be forgotten. An id that is not ours (no expiry) never expires.
pub fn expired_before(ad_id: &str, before: i64) -> bool {
    expiry_of(ad_id).is_some_and(|e| e < before)
}

/// The expiry (Unix seconds) an ad id names, when it is shaped like ours.
pub fn expiry_of(ad_id: &str) -> Option<i64> {
    rm_schemas::ad_id::parse(ad_id).map(|a| a.expires_at)
}

/// The ad lifetime and clock allowance the stateless rules use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServeRules {
    /// The ads' lifetime (`RM_API_AD_TTL_SECS`), ms.
    pub ad_ttl_ms: i64,
    /// How far a client clock may be off (the aggregator's future skew), ms.
    pub skew_ms: i64,
}

/// The stateless verdict on an event of ad `ad` (its parsed id, `None` when not one
/// of ours) dated `time_ms`, naming `product` for a product event: `BeforeServe`,
/// `NotInAd`, or `None` when neither applies.
pub fn stateless(
    ad: Option<&rm_schemas::ad_id::AdId>,
    time_ms: i64,
    product: Option<&str>,
    rules: ServeRules,
) -> Option<TrafficClass> {
    let ad = ad?;
    let served_ms = ad.served_at(rules.ad_ttl_ms / 1000).saturating_mul(1000);
    if time_ms < served_ms.saturating_sub(rules.skew_ms.max(0)) {
        return Some(TrafficClass::BeforeServe);
    }
    match product.map(|p| ad.carries_product(p)) {
        Some(Some(false)) => Some(TrafficClass::NotInAd),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
