//! What no store can hold yet, so the loop does not look it up: served ads (their
//! states and their views' facts) and tallies' places.
//!
//! A batch looks up the state of every served ad it touches that the cache does not
//! hold, the facts of every such video view (`WriteStore::load`) and the tallies of
//! every such place. Under live traffic nearly all of those ads were served since
//! the aggregator started, and a place of a quarter hour, an hour or a day is new
//! once in each: no one has written them. On ClickHouse the served ads' look-ups of
//! a loop filling a store took 101 s of its 171 s of load queries, the views' 32 s
//! and the tallies' 16 (a query log, `BENCHMARKS.md`), answering next to nothing.
//! This module tells which cannot be in the store, from the log's order and the
//! times the records name.
//!
//! **Why a skipped ad has nothing stored.** Records are keyed by ad id (but for
//! cart events, keyed by shopper, which decide nothing here), so all the records of
//! an ad are in one log partition P, and so is everything stored under the ad (its
//! state, its views). Once the loop has read P's stored progress (the
//! offset of the last record any writer folded, written no later than the states
//! that batch decided; [`rm_store::model::tallies`]) and folds a record H above it,
//! everything stored of an ad of P came from a record at or below that offset,
//! appended to the log before H. An edge appends a record within its write
//! deadline and the log's timeout of receiving it (seconds), so every record
//! appended before H was received before `received(H) + MARGIN`; an ad is served
//! (its expiry minus the ads' lifetime) before any record of it is received. So an
//! ad of P whose id expires after `received(H) + MARGIN + lifetime`
//! ([`FreshAds::after`]) had no record below H: no one stored anything of it before
//! the loop's cache started, and the cache holds all the loop stored of it since,
//! but for the ads it dropped, whose latest expiry is [`FreshAds::dropped`]. An ad
//! expiring after both is new. The margin also absorbs the api's clock being apart
//! from the edges', and a lifetime set lower on the aggregator than on the api
//! (`RM_API_AD_TTL_SECS`: give both the same) by less than an hour.
//!
//! **Why a skipped place has no tally.** A tally of partition P (events, views
//! and cart lines; sales are the orders topic's partitions, always looked up) is
//! moved only by records of P, at the bucket of an event's own time (or of an
//! earlier copy's), and an event is dated at most the clock allowance
//! (`RM_FUTURE_SKEW_HOURS`) after its receipt. So a place of P whose bucket begins
//! after `received(H) + MARGIN + allowance` ([`FreshAds::is_new_place`]) was moved
//! by no record below H; the cache holds every place the loop moved since, but for
//! those it dropped, the latest of whose beginnings it keeps.
//!
//! What else could store such an ad or tally is handled where it happens: another writer of
//! P (a consumer that lost it) writes its progress before its states, and the next
//! fold that reads that progress drops the cache with this, as after a rebalance,
//! an erasure or an ageing pass ([`crate::pipeline`]); a store whose partition has
//! no progress yet (new, or the log's offsets restarted below it) sets no bound. An
//! id that names no expiry (not one of ours) is always looked up.

use rm_schemas::EventRecord;
use rm_store::model::served::expiry_of;
use rm_store::model::tallies::{Place, Scope};
use rm_store::FastMap;
use rm_store::FastSet;

use crate::batch::Position;

/// Bound on how long after receiving a record an edge appends it (its write
/// deadline and the log's message timeout are seconds), with the clocks of the
/// edges and the api apart: an hour. The cost of a larger one is only that the
/// first hour of ads after a start is looked up, as before.
pub const MARGIN_MS: i64 = 3_600_000;

/// Per log partition, from when on what the cache does not hold is new.
#[derive(Debug, Default, Clone)]
pub struct FreshAds {
    /// Per partition: the receipt (ms) of the first record folded above the
    /// progress stored when the cache started, plus [`MARGIN_MS`]: every record
    /// any writer folded before was received earlier.
    received: FastMap<i32, i64>,
    /// The latest expiry (Unix seconds) of an ad whose state or views the cache
    /// dropped.
    dropped: i64,
    /// The latest bucket start (ms) of a tally the cache dropped.
    dropped_place_ms: i64,
}

impl FreshAds {
    /// The expiry (Unix seconds) after which an ad of `partition` is new (ads
    /// served `ttl_ms` before their expiry), once the partition has its bound.
    pub fn after(&self, partition: i32, ttl_ms: i64) -> Option<i64> {
        let ms = self.received.get(&partition)?.saturating_add(ttl_ms.max(0));
        Some(ms.div_euclid(1000) + 1)
    }

    /// The ad ids of the batch's records that are new, were the cache not to hold
    /// them: no store can hold their state, their views' facts or anything else
    /// keyed by them.
    pub fn new_ads<'a>(
        &self,
        records: &'a [EventRecord],
        positions: &[Position],
        ttl_ms: i64,
    ) -> FastSet<&'a str> {
        let mut new = FastSet::default();
        if self.received.is_empty() {
            return new;
        }
        let mut seen: FastSet<&str> = FastSet::default();
        for (r, (partition, _)) in records.iter().zip(positions) {
            let Some(after) = self.after(*partition, ttl_ms) else {
                continue;
            };
            let id = r.event.ad_id.as_str();
            // A cart event is keyed by its shopper: its partition is not its ad's.
            if r.partition_key() != id.as_bytes() {
                continue;
            }
            if seen.insert(id) && expiry_of(id).is_some_and(|e| e > after.max(self.dropped)) {
                new.insert(id);
            }
        }
        new
    }

    /// Whether no store can hold a tally at `place` yet: a count of events, views or
    /// cart lines (the scopes a log partition of events moves) whose bucket begins
    /// after every event the partition's records before the bound can be dated
    /// (received before it, dated at most `skew_ms` after receipt), and after every
    /// tally the cache dropped.
    pub fn is_new_place(&self, place: &Place, skew_ms: i64) -> bool {
        if matches!(place.scope, Scope::Sales | Scope::CampaignSales) {
            return false;
        }
        let Some(received) = self.received.get(&place.partition) else {
            return false;
        };
        let start = place.grain.start_ms(place.bucket);
        start > received.saturating_add(skew_ms.max(0)) && start > self.dropped_place_ms
    }

    /// Sets the bound of each partition that has none, from this batch's records
    /// above the partition's stored progress (`stored(partition)`: the offset, `None`
    /// when the store has none).
    pub fn establish(
        &mut self,
        records: &[EventRecord],
        positions: &[Position],
        stored: impl Fn(i32) -> Option<i64>,
    ) {
        // The first record above the stored progress, per partition: (offset, received).
        let mut first: FastMap<i32, (i64, i64)> = FastMap::default();
        for (r, &(partition, offset)) in records.iter().zip(positions) {
            if self.received.contains_key(&partition) {
                continue;
            }
            let Some(progress) = stored(partition) else {
                continue;
            };
            if offset <= progress {
                continue;
            }
            let received = r.received_at.timestamp_millis();
            let e = first.entry(partition).or_insert((offset, received));
            if offset < e.0 {
                *e = (offset, received);
            }
        }
        for (partition, (_, received)) in first {
            self.received
                .insert(partition, received.saturating_add(MARGIN_MS));
        }
    }

    /// The cache dropped what it held of these ads (their states, their views):
    /// none of them is new from now on.
    pub fn drop_states<'a>(&mut self, ads: impl IntoIterator<Item = &'a String>) {
        for id in ads {
            if let Some(e) = expiry_of(id) {
                self.dropped = self.dropped.max(e);
            }
        }
    }

    /// The cache dropped these tallies: none of their places is new from now on.
    pub fn drop_places<'a>(&mut self, places: impl IntoIterator<Item = &'a Place>) {
        for p in places {
            self.dropped_place_ms = self.dropped_place_ms.max(p.grain.start_ms(p.bucket));
        }
    }
}

#[cfg(test)]
mod tests;
