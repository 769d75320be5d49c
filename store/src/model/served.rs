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

use super::status::AdIdStatus;
use super::tallies::moves::Judged;
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
    /// id) with an eligible event ([`ServedAd::take_view`]).
    View(&'a str),
}

/// What a view's [`Unit::View`] keeps of who took it: the viewer (the tracking id's
/// [`super::traffic::shopper_hash`]) in the low 64 bits, the low 64 bits of the
/// dedup key of the event that took it above (0 in states written before it was
/// kept).
fn view_taker(viewer: u64, event: u128) -> u128 {
    (u128::from(event as u64) << 64) | u128::from(viewer)
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
    /// The distinct events of the ad id counted into tallies, as they count
    /// ([`Self::judge`]), at most [`MAX_SEEN`].
    seen: Vec<Seen>,
    /// Further distinct events, counted without being remembered.
    unremembered: u32,
    /// Changes made to the state since it was new: its version.
    revision: u64,
}

/// Most distinct events remembered per served ad (a real one has a few: an
/// impression, a click, a product's impressions and clicks per viewing).
pub const MAX_SEEN: usize = 128;

/// A distinct event the tallies count, as it counts (see [`Judged`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct Seen {
    /// The dedup key's low 64 bits (the key is a hash: the ad id's events never share
    /// them by chance in practice, and two that did would count as one).
    key: u64,
    /// Its earliest copy's time, ms.
    time_ms: i64,
    /// Its best copy's status (rank) and class (code).
    status: u8,
    class: u8,
}

impl Seen {
    fn of(key: u64, j: Judged) -> Self {
        Seen {
            key,
            time_ms: j.time_ms,
            status: j.status.rank(),
            class: j.class.code(),
        }
    }

    fn judged(self) -> Judged {
        Judged {
            status: AdIdStatus::from_rank(self.status).unwrap_or(AdIdStatus::Foreign),
            class: TrafficClass::from_code(self.class).unwrap_or(TrafficClass::Repeat),
            time_ms: self.time_ms,
        }
    }
}

/// The state as stored before tallies (no events remembered), still read.
#[derive(Deserialize)]
struct ServedAdV1 {
    taken: Vec<Taken>,
    shoppers: Vec<u64>,
    more_shoppers: u32,
}

impl From<ServedAdV1> for ServedAd {
    fn from(v: ServedAdV1) -> Self {
        let mut s = ServedAd {
            taken: v.taken,
            shoppers: v.shoppers,
            more_shoppers: v.more_shoppers,
            ..ServedAd::default()
        };
        // Above every version that state had, so the newer rows win in ClickHouse.
        s.revision = ((s.taken.len() as u64) << 40) + s.shoppers() as u64;
        s
    }
}

/// How a served ad's state was encoded ([`ServedAd::to_bytes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// Before tallies (no events remembered).
    V1,
    /// With the events the tallies count.
    V2,
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
        self.changed();
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

    /// Takes the view of `video` for `viewer` with its eligible event `event` (the
    /// first viewer's view takes it, with its first eligible event); true when this
    /// viewer's view holds it, now or from before.
    pub fn take_view(&mut self, video: &str, viewer: u64, event: u128) -> bool {
        let unit = Unit::View(video);
        if let Some(t) = self.taken.iter().find(|t| unit.same(t)) {
            return t.dedup_key as u64 == viewer;
        }
        if self.taken.len() >= MAX_UNITS {
            return false;
        }
        self.taken.push(Taken {
            kind: unit.kind(),
            catalog: String::new(),
            product: video.to_owned(),
            dedup_key: view_taker(viewer, event),
        });
        self.changed();
        true
    }

    /// Whether `viewer`'s view of `video` took it, and with which event: `Some(Some(e))`
    /// the low 64 bits of its dedup key, `Some(None)` taken before that was kept,
    /// `None` not this viewer's. A view counts from the moment its set holds that
    /// event, so a view's row depends on its own events alone, whatever was stored
    /// first after a crash.
    pub fn view_taken_by(&self, video: &str, viewer: u64) -> Option<Option<u64>> {
        let t = self.taken.iter().find(|t| Unit::View(video).same(t))?;
        (t.dedup_key as u64 == viewer).then(|| {
            let event = (t.dedup_key >> 64) as u64;
            (event != 0).then_some(event)
        })
    }

    /// Notes a shopper (a tracking id's hash, 0 for none); true when it makes the ad
    /// id's second distinct shopper, the moment it shows it was shown to more than one
    /// (a page that caches ad responses across shoppers, or someone replaying it).
    pub fn see(&mut self, shopper: u64) -> bool {
        if shopper == 0 || self.shoppers.contains(&shopper) {
            return false;
        }
        self.changed();
        if self.shoppers.len() < MAX_SHOPPERS {
            self.shoppers.push(shopper);
            return self.shoppers.len() == 2;
        }
        self.more_shoppers = self.more_shoppers.saturating_add(1);
        false
    }

    /// Replaces a shopper's hash by another wherever the state keeps it (the shoppers
    /// seen, a view's taker), leaving its version as it was: an erasure
    /// (`super::erasure`) changes no decision. True when it replaced anything.
    pub fn replace_shopper(&mut self, old: u64, new: u64) -> bool {
        if old == 0 || old == new {
            return false;
        }
        let mut changed = false;
        for s in &mut self.shoppers {
            if *s == old {
                *s = new;
                changed = true;
            }
        }
        for t in &mut self.taken {
            if t.kind == Unit::View("").kind() && t.dedup_key as u64 == old {
                t.dedup_key = view_taker(new, t.dedup_key >> 64);
                changed = true;
            }
        }
        changed
    }

    /// Distinct shoppers seen (exact up to [`MAX_SHOPPERS`]).
    pub fn shoppers(&self) -> usize {
        self.shoppers.len() + self.more_shoppers as usize
    }

    /// Units taken.
    pub fn units(&self) -> usize {
        self.taken.len()
    }

    /// A version that grows with every change, for a store that keeps the newest of
    /// several rows.
    pub fn version(&self) -> u64 {
        self.revision
    }

    /// Notes that the state changed (its version grows).
    fn changed(&mut self) {
        self.revision += 1;
    }

    /// Judges a copy of a distinct event of the ad id (`dedup_key`) that counts as
    /// `j` on its own: `Some((None, j))` when the event is new (count it),
    /// `Some((Some(old), now))` when it counted as `old` and this copy makes it count
    /// as `now` (move it: [`Judged::with_copy`]), `None` when the copy changes
    /// nothing. Beyond [`MAX_SEEN`] remembered events every event is new.
    pub fn judge(&mut self, dedup_key: u128, j: Judged) -> Option<(Option<Judged>, Judged)> {
        let key = dedup_key as u64;
        if let Some(seen) = self.seen.iter_mut().find(|s| s.key == key) {
            let old = seen.judged();
            let now = old.with_copy(j);
            if now == old {
                return None;
            }
            *seen = Seen::of(key, now);
            self.changed();
            return Some((Some(old), now));
        }
        self.remember(key, j);
        Some((None, j))
    }

    /// How the event `dedup_key` counts, when remembered.
    pub fn counted(&self, dedup_key: u128) -> Option<Judged> {
        let key = dedup_key as u64;
        self.seen.iter().find(|s| s.key == key).map(|s| s.judged())
    }

    /// Remembers the event `dedup_key` as counted (`j`) without counting it: the
    /// billable event of a unit taken before the state remembered events (a store
    /// written before tallies), which the backfill counted.
    pub fn counted_before(&mut self, dedup_key: u128, j: Judged) {
        self.remember(dedup_key as u64, j);
    }

    fn remember(&mut self, key: u64, j: Judged) {
        if self.seen.len() < MAX_SEEN {
            self.seen.push(Seen::of(key, j));
        } else {
            self.unremembered = self.unremembered.saturating_add(1);
        }
        self.changed();
    }

    /// Distinct events counted without being remembered (beyond [`MAX_SEEN`]): a
    /// copy of one of them would count again.
    pub fn unremembered(&self) -> u32 {
        self.unremembered
    }

    /// The state's bytes as stored ([`Encoding::V2`]).
    pub fn to_bytes(&self) -> Vec<u8> {
        postcard::to_allocvec(self).unwrap_or_default()
    }

    /// A state stored in `encoding`.
    pub fn from_bytes(bytes: &[u8], encoding: Encoding) -> Result<Self, postcard::Error> {
        match encoding {
            Encoding::V1 => postcard::from_bytes::<ServedAdV1>(bytes).map(Self::from),
            Encoding::V2 => postcard::from_bytes(bytes),
        }
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
