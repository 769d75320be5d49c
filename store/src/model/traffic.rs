//! Invalid traffic and click windows in the reports (issue 15): what is billable.
//!
//! The edge classifies every beacon's traffic (`rm_schemas::agent`) and writes the
//! outcome into the record (`agent`, `prefetch`, `serverSide`). Each stored product
//! or ad fact keeps it as a [`TrafficClass`], and a distinct event is **valid** only
//! when its class is valid, its ad id verified, and, for a click, it is the first of
//! its click window. Anything else is **flagged, not deleted**: it stays in the store
//! and each report counts it beside the valid counts, by [`Invalid`] reason, in the
//! order the reasons are decided:
//!
//! `known_bot`, `non_browser`, `prefetch` (the edge's traffic class), then
//! `unverified_ad_id` (the ad id status, [`super::status`]), then what the aggregator
//! decided as the event arrived ([`super::served`]): `before_serve` (dated before its
//! ad was served), `product_not_in_ad` (a product its ad did not carry),
//! `served_ad_repeat` (the served ad already yielded its billable event of that kind),
//! then `click_window`.
//!
//! The aggregator's decisions are stored as traffic classes of their own (codes 4 to
//! 6), so a fact carries one class whoever decided it, and facts stored before them
//! read as they did.
//!
//! **Click windows.** A click by the same shopper on the same ad (and product) within
//! the window of the last click that counted is the same click, whatever its
//! timestamp ([`counted_clicks`]). The window runs on the edge's receive time (a
//! player cannot move it) and within one report group (so within one UTC day of the
//! event time: a day's counts never depend on another day's). It is a function of the
//! set of the group's distinct valid clicks, sorted by (receive time, dedup key), so
//! arrival order, replays, restarts and the number of edges cannot change it. A click
//! stored before receive times were kept (receive time 0) is not windowed: it counts
//! as it did.
//!
//! Copies of one event (same dedup key) may differ in class (the same URL fired by a
//! shopper's browser and by a crawler) and status; the fact takes the class and
//! status of its **best copy** ([`best_copy`]: a billable copy first, then by the
//! order of the reasons above), both from one copy, so no mix of copies is billable
//! when none of them was; and its earliest receive time.

use serde::{Deserialize, Serialize};

use super::status::AdIdStatus;
use rm_schemas::agent::InvalidReason;

/// Default click window: 30 s (`RM_CLICK_WINDOW_SECS`, read by the edge and the
/// reports alike).
pub const DEFAULT_CLICK_WINDOW_MS: i64 = 30_000;

/// The click window the reports apply, in milliseconds (0: off).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClickWindow(pub i64);

impl Default for ClickWindow {
    fn default() -> Self {
        Self(DEFAULT_CLICK_WINDOW_MS)
    }
}

impl ClickWindow {
    /// A window of `secs` seconds.
    pub fn secs(secs: u64) -> Self {
        Self(i64::try_from(secs.saturating_mul(1000)).unwrap_or(i64::MAX))
    }
}

/// How the edge classified a copy's traffic, best first; stored as its code
/// (ClickHouse `traffic UInt8`, 0 for rows written before classification).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
pub enum TrafficClass {
    /// A browser's (or a server-side insertion forwarding a browser's agent), or a
    /// record from before classification.
    #[default]
    Valid,
    /// A known bot or spider.
    KnownBot,
    /// An HTTP library, command-line client, or no agent.
    NonBrowser,
    /// A prefetch or prerender.
    Prefetch,
    /// Decided by the aggregator: the served ad had already yielded its billable
    /// event of this kind ([`super::served`]).
    Repeat,
    /// Decided by the aggregator: dated before its ad was served.
    BeforeServe,
    /// Decided by the aggregator: names a product its ad did not carry.
    NotInAd,
}

impl TrafficClass {
    /// Every class, best first (the index is the stored code).
    pub const ALL: [TrafficClass; 7] = [
        Self::Valid,
        Self::KnownBot,
        Self::NonBrowser,
        Self::Prefetch,
        Self::Repeat,
        Self::BeforeServe,
        Self::NotInAd,
    ];

    /// The class of a record's invalid reason (an unverified ad id is the status's
    /// business, not the traffic's).
    pub fn of(reason: Option<InvalidReason>) -> Self {
        match reason {
            Some(InvalidReason::KnownBot) => Self::KnownBot,
            Some(InvalidReason::NonBrowser) => Self::NonBrowser,
            Some(InvalidReason::Prefetch) => Self::Prefetch,
            Some(InvalidReason::UnverifiedAdId) | None => Self::Valid,
        }
    }

    /// The stored code.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// The class of a stored code (`None` when unknown).
    pub fn from_code(code: u8) -> Option<Self> {
        Self::ALL.get(usize::from(code)).copied()
    }
}

/// Why a distinct event is not billable, in the order decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Invalid {
    /// A known bot or spider.
    KnownBot,
    /// Not a browser.
    NonBrowser,
    /// A prefetch or prerender.
    Prefetch,
    /// The ad id did not verify.
    UnverifiedAdId,
    /// Dated before its ad was served.
    BeforeServe,
    /// A product its ad did not carry.
    ProductNotInAd,
    /// The served ad had already yielded its billable event of this kind.
    ServedAdRepeat,
    /// A click within the click window of a click that counted.
    ClickWindow,
}

impl Invalid {
    /// Every reason, in the order decided.
    pub const ALL: [Invalid; 8] = [
        Self::KnownBot,
        Self::NonBrowser,
        Self::Prefetch,
        Self::UnverifiedAdId,
        Self::BeforeServe,
        Self::ProductNotInAd,
        Self::ServedAdRepeat,
        Self::ClickWindow,
    ];
}

/// The reason a fact of this class and status is invalid before click windows
/// (`None`: valid).
pub fn reason(class: TrafficClass, status: AdIdStatus) -> Option<Invalid> {
    match class {
        TrafficClass::KnownBot => Some(Invalid::KnownBot),
        TrafficClass::NonBrowser => Some(Invalid::NonBrowser),
        TrafficClass::Prefetch => Some(Invalid::Prefetch),
        _ if !status.is_billable() => Some(Invalid::UnverifiedAdId),
        TrafficClass::BeforeServe => Some(Invalid::BeforeServe),
        TrafficClass::NotInAd => Some(Invalid::ProductNotInAd),
        TrafficClass::Repeat => Some(Invalid::ServedAdRepeat),
        TrafficClass::Valid => None,
    }
}

/// How good a copy is: 0 when billable, else the rank of its reason in the order
/// above (the traffic classes of the edge, then the ad id, then the aggregator's).
/// ClickHouse computes the same in SQL ([`BEST_COPY_SQL`]).
pub fn copy_rank(class: TrafficClass, status: AdIdStatus) -> u8 {
    match class {
        TrafficClass::KnownBot | TrafficClass::NonBrowser | TrafficClass::Prefetch => class.code(),
        _ if !status.is_billable() => 4,
        TrafficClass::Valid => 0,
        _ => class.code() + 1,
    }
}

/// The (status, class) of the better of two copies of one event ([`copy_rank`],
/// ties to the lesser codes): a set function of the copies, in any order.
pub fn best_copy(
    a: (AdIdStatus, TrafficClass),
    b: (AdIdStatus, TrafficClass),
) -> (AdIdStatus, TrafficClass) {
    let key = |c: (AdIdStatus, TrafficClass)| (copy_rank(c.1, c.0), c.1, c.0);
    if key(b) < key(a) {
        b
    } else {
        a
    }
}

/// [`best_copy`] over the copies of a group in ClickHouse: `min` of the copy's rank,
/// class and status packed into one number (`rank * 256 + traffic * 16 +
/// ad_id_status`); [`unpack_best_copy`] reads it back.
pub const BEST_COPY_SQL: &str = "min(multiIf(traffic BETWEEN 1 AND 3, traffic, \
     ad_id_status != 0, 4, traffic = 0, 0, traffic + 1) * 256 + traffic * 16 + ad_id_status)";

/// The (status code, traffic code) of a [`BEST_COPY_SQL`] value.
pub fn unpack_best_copy(packed: u64) -> (u8, u8) {
    ((packed % 16) as u8, ((packed / 16) % 16) as u8)
}

/// Invalid events of a report row, by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InvalidCounts {
    /// Known bots and spiders.
    pub known_bot: u64,
    /// HTTP libraries, command-line clients, no agent.
    pub non_browser: u64,
    /// Prefetches and prerenders.
    pub prefetch: u64,
    /// Ad ids that did not verify.
    pub unverified_ad_id: u64,
    /// Events dated before their ad was served.
    #[serde(default)]
    pub before_serve: u64,
    /// Product events naming a product their ad did not carry.
    #[serde(default)]
    pub product_not_in_ad: u64,
    /// Events of a served ad that had already yielded its billable one of the kind.
    #[serde(default)]
    pub served_ad_repeat: u64,
    /// Clicks within the click window of a counted click.
    pub click_window: u64,
}

impl InvalidCounts {
    /// Adds `n` events invalid for `why`.
    pub fn add(&mut self, why: Invalid, n: u64) {
        *match why {
            Invalid::KnownBot => &mut self.known_bot,
            Invalid::NonBrowser => &mut self.non_browser,
            Invalid::Prefetch => &mut self.prefetch,
            Invalid::UnverifiedAdId => &mut self.unverified_ad_id,
            Invalid::BeforeServe => &mut self.before_serve,
            Invalid::ProductNotInAd => &mut self.product_not_in_ad,
            Invalid::ServedAdRepeat => &mut self.served_ad_repeat,
            Invalid::ClickWindow => &mut self.click_window,
        } += n;
    }

    /// Every invalid event.
    pub fn total(&self) -> u64 {
        self.known_bot
            + self.non_browser
            + self.prefetch
            + self.unverified_ad_id
            + self.before_serve
            + self.product_not_in_ad
            + self.served_ad_repeat
            + self.click_window
    }

    /// Adds another row's counts.
    pub fn merge(&mut self, o: &InvalidCounts) {
        self.known_bot += o.known_bot;
        self.non_browser += o.non_browser;
        self.prefetch += o.prefetch;
        self.unverified_ad_id += o.unverified_ad_id;
        self.before_serve += o.before_serve;
        self.product_not_in_ad += o.product_not_in_ad;
        self.served_ad_repeat += o.served_ad_repeat;
        self.click_window += o.click_window;
    }
}

/// One distinct click as the click window sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WindowedClick<K> {
    /// The group and shopper the window runs in.
    pub key: K,
    /// The edge's receive time of its earliest copy, ms (0: unknown, not windowed).
    pub received_ms: i64,
    /// The click's dedup key (orders clicks received in the same millisecond).
    pub dedup_key: u128,
}

/// Which of the valid distinct `clicks` count, in the order given: per key, sorted by
/// (receive time, dedup key), a click counts when it comes `window` or more after the
/// last click of its key that counted; clicks without a receive time always count.
pub fn counted_clicks<K: Ord>(clicks: &[WindowedClick<K>], window: ClickWindow) -> Vec<bool> {
    let mut order: Vec<usize> = (0..clicks.len()).collect();
    order.sort_unstable_by(|&a, &b| {
        let (a, b) = (&clicks[a], &clicks[b]);
        (&a.key, a.received_ms, a.dedup_key).cmp(&(&b.key, b.received_ms, b.dedup_key))
    });
    let mut counted = vec![true; clicks.len()];
    let mut last: Option<(&K, i64)> = None;
    for i in order {
        let c = &clicks[i];
        if c.received_ms <= 0 || window.0 <= 0 {
            continue;
        }
        match last {
            Some((k, at)) if *k == c.key && c.received_ms - at < window.0 => counted[i] = false,
            _ => last = Some((&c.key, c.received_ms)),
        }
    }
    counted
}

/// The earlier of two receive times, 0 (unknown) only when both are.
pub fn earliest(a: i64, b: i64) -> i64 {
    match (a > 0, b > 0) {
        (true, true) => a.min(b),
        (true, false) => a,
        _ => b,
    }
}

/// One distinct click as the billable rules see it: its report group, shopper and
/// identity, and the best status, class and earliest receive time of its copies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClickFact<G> {
    /// The report group it counts in.
    pub group: G,
    /// The shopper ([`shopper_hash`]).
    pub shopper: u64,
    /// Dedup key.
    pub dedup_key: u128,
    /// Best ad id status of its copies.
    pub status: AdIdStatus,
    /// Best traffic class of its copies.
    pub traffic: TrafficClass,
    /// Earliest receive time of its copies (0 when unknown).
    pub received_ms: i64,
}

/// Why each distinct click is invalid, in the order given (`None`: it counts): its
/// traffic class and ad id status first ([`reason`]), then the click window among the
/// valid clicks of its group and shopper ([`counted_clicks`]). Both stores' product
/// and ad reports decide with this.
pub fn click_verdicts<G: Ord>(
    clicks: &[ClickFact<G>],
    window: ClickWindow,
) -> Vec<Option<Invalid>> {
    let valid: Vec<WindowedClick<(&G, u64)>> = clicks
        .iter()
        .filter(|c| reason(c.traffic, c.status).is_none())
        .map(|c| WindowedClick {
            key: (&c.group, c.shopper),
            received_ms: c.received_ms,
            dedup_key: c.dedup_key,
        })
        .collect();
    let mut counted = counted_clicks(&valid, window).into_iter();
    clicks
        .iter()
        .map(|c| match reason(c.traffic, c.status) {
            Some(why) => Some(why),
            None if counted.next().unwrap_or(true) => None,
            None => Some(Invalid::ClickWindow),
        })
        .collect()
}

/// A shopper's tracking id as the click window keys it (a 64-bit hash; the raw id is
/// not stored again beside every fact).
pub fn shopper_hash(tracking_id: &str) -> u64 {
    xxhash_rust::xxh3::xxh3_64(tracking_id.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn click(key: u8, received_ms: i64, dedup_key: u128) -> WindowedClick<u8> {
        WindowedClick {
            key,
            received_ms,
            dedup_key,
        }
    }

    #[test]
    fn a_hundred_clicks_a_millisecond_apart_count_once() {
        let clicks: Vec<_> = (0..100)
            .map(|i| click(1, 1_000_000 + i, u128::from(i as u8)))
            .collect();
        let c = counted_clicks(&clicks, ClickWindow::default());
        assert_eq!(c.iter().filter(|x| **x).count(), 1);
        assert!(c[0], "the first received counts");
    }

    #[test]
    fn the_window_restarts_after_a_counted_click_and_keys_are_apart() {
        let w = ClickWindow(30_000);
        let clicks = vec![
            click(1, 100_000, 1),
            click(1, 120_000, 2), // within 30 s of the first: same click
            click(1, 131_000, 3), // 31 s after the first counted: counts
            click(1, 150_000, 4), // within 30 s of the one at 131 s
            click(2, 120_000, 5), // another shopper or ad
            click(1, 0, 6),       // stored before receive times: counts as before
        ];
        assert_eq!(
            counted_clicks(&clicks, w),
            vec![true, false, true, false, true, true]
        );
        assert!(counted_clicks(&clicks, ClickWindow(0)).iter().all(|c| *c));
    }

    #[test]
    fn reasons_are_decided_in_order() {
        use AdIdStatus::*;
        assert_eq!(reason(TrafficClass::Valid, Verified), None);
        assert_eq!(
            reason(TrafficClass::Valid, Expired),
            Some(Invalid::UnverifiedAdId)
        );
        assert_eq!(
            reason(TrafficClass::KnownBot, Foreign),
            Some(Invalid::KnownBot)
        );
        assert_eq!(
            reason(TrafficClass::Prefetch, Verified),
            Some(Invalid::Prefetch)
        );
        for (i, c) in TrafficClass::ALL.into_iter().enumerate() {
            assert_eq!(usize::from(c.code()), i);
            assert_eq!(TrafficClass::from_code(c.code()), Some(c));
        }
        assert_eq!(TrafficClass::from_code(9), None);
        // The aggregator's decisions come after the ad id status.
        assert_eq!(
            reason(TrafficClass::Repeat, Verified),
            Some(Invalid::ServedAdRepeat)
        );
        assert_eq!(
            reason(TrafficClass::BeforeServe, Foreign),
            Some(Invalid::UnverifiedAdId)
        );
        assert_eq!(
            reason(TrafficClass::NotInAd, Verified),
            Some(Invalid::ProductNotInAd)
        );
        for r in InvalidReason::ALL {
            let class = TrafficClass::of(Some(r));
            assert_eq!(
                class == TrafficClass::Valid,
                r == InvalidReason::UnverifiedAdId
            );
        }
        let mut n = InvalidCounts::default();
        for why in Invalid::ALL {
            n.add(why, 2);
        }
        assert_eq!(n.total(), 16);
        let mut m = InvalidCounts::default();
        m.merge(&n);
        m.merge(&n);
        assert_eq!(m.total(), 32);
    }

    #[test]
    fn the_best_copy_is_one_copy_never_a_mix() {
        use AdIdStatus::*;
        let repeat = (Verified, TrafficClass::Repeat);
        let expired = (Expired, TrafficClass::Valid);
        // Neither copy is billable, and so is not their best.
        let best = best_copy(repeat, expired);
        assert!(reason(best.1, best.0).is_some(), "{best:?}");
        assert_eq!(best_copy(expired, repeat), best, "any order");
        let genuine = (Verified, TrafficClass::Valid);
        assert_eq!(best_copy(repeat, genuine), genuine);
        assert_eq!(
            best_copy((Verified, TrafficClass::KnownBot), genuine),
            genuine
        );
        // The SQL packing reads back the same pair.
        for class in TrafficClass::ALL {
            for status in AdIdStatus::ALL {
                let packed = u64::from(copy_rank(class, status)) * 256
                    + u64::from(class.code()) * 16
                    + u64::from(status.rank());
                assert_eq!(unpack_best_copy(packed), (status.rank(), class.code()));
            }
        }
    }

    proptest! {
        /// The clicks that count are a function of the set: any order, any repeat
        /// of the input (per position) gives the same verdicts; counted clicks of
        /// one key are at least a window apart, and every click not counted is
        /// within a window after a counted one of its key.
        #[test]
        fn windows_are_a_set_function_and_spaced(
            raw in proptest::collection::vec((0u8..3, 1i64..200_000, 0u128..1_000), 0..80),
            seed in any::<usize>(),
            window in 1i64..60_000,
        ) {
            let mut clicks: Vec<WindowedClick<u8>> = Vec::new();
            for (k, t, d) in raw {
                if !clicks.iter().any(|c| c.dedup_key == d) {
                    clicks.push(click(k, t, d));
                }
            }
            let w = ClickWindow(window);
            let base = counted_clicks(&clicks, w);
            let mut shuffled: Vec<(WindowedClick<u8>, bool)> =
                clicks.iter().cloned().zip(base.iter().copied()).collect();
            let n = shuffled.len().max(1);
            shuffled.rotate_left(seed % n);
            shuffled.reverse();
            let input: Vec<_> = shuffled.iter().map(|(c, _)| c.clone()).collect();
            let again = counted_clicks(&input, w);
            for ((_, before), after) in shuffled.iter().zip(&again) {
                prop_assert_eq!(before, after);
            }
            for k in 0u8..3 {
                let mut times: Vec<i64> = clicks.iter().zip(&base)
                    .filter(|(c, counted)| c.key == k && **counted)
                    .map(|(c, _)| c.received_ms)
                    .collect();
                times.sort_unstable();
                for pair in times.windows(2) {
                    prop_assert!(pair[1] - pair[0] >= window);
                }
                for (c, counted) in clicks.iter().zip(&base) {
                    if c.key == k && !counted {
                        prop_assert!(times.iter().any(|t| *t <= c.received_ms && c.received_ms - t < window));
                    }
                }
            }
        }
    }
}
