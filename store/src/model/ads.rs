//! Ad-level impressions and clicks per campaign, realised ad id and day (issue 7).
//!
//! Facts are the `adImpression` and `adClick` events of the edge's impression and
//! click endpoints. A fact is identified by its dedup key, and the edge makes an
//! impression's key (adId, tracking id) without its timestamp, so an impression
//! re-fired on every re-render, at any time, is one fact: **an impression counts once
//! per realised ad id and shopper**. A click's key keeps its timestamp: a click
//! re-fired identically counts once, a new click counts again (a click re-fired with a
//! new time within the click window never reaches the log: the edge's click window).
//!
//! The store keeps every distinct **copy** of a fact (its event time and its
//! [`AdIdStatus`] may differ between copies of an impression) and [`resolve`] makes
//! one fact of them: placed on the day of its **earliest** copy, with the status and
//! class of its **best** copy ([`traffic::best_copy`]: valid when first received
//! stays billable). Both are set
//! functions, so arrival order, replays and crashes cannot move a count.
//!
//! A fact that is not valid ([`super::traffic`]: a bot, a non-browser, a prefetch,
//! an ad id that did not verify, a click within the click window of the shopper's last
//! counted click on the ad) is **not billable**: it is counted by reason in
//! `invalidImpressions` / `invalidClicks` (and in total in `notBillableImpressions` /
//! `notBillableClicks`), never in `impressions` / `clicks` / `ctr`. The row's
//! `adIdStatus` is the worst status among its facts ([`super::status`]).

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use super::status::AdIdStatus;
use super::traffic::{self, ClickFact, ClickWindow, Invalid, InvalidCounts, TrafficClass};
use super::{day_of, format_day, rate};

/// Impression or click.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum AdAction {
    /// `adImpression`.
    Impression,
    /// `adClick`.
    Click,
}

impl AdAction {
    /// Stable name, as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Impression => "impression",
            Self::Click => "click",
        }
    }

    /// Reads a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        [Self::Impression, Self::Click]
            .into_iter()
            .find(|a| a.as_str() == s)
    }
}

/// One copy of a distinct ad event, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AdFact {
    /// Campaign of the ad.
    pub campaign_id: String,
    /// Realised ad id.
    pub ad_id: String,
    /// Impression or click.
    pub action: AdAction,
    /// Dedup key (the fact's identity).
    pub dedup_key: u128,
    /// Event time of this copy, ms since the epoch.
    pub time_ms: i64,
    /// How the ad id verified for this copy.
    #[serde(default)]
    pub status: AdIdStatus,
    /// How the edge classified this copy's traffic.
    #[serde(default)]
    pub traffic: TrafficClass,
    /// The shopper ([`traffic::shopper_hash`] of the tracking id; 0 when unknown).
    #[serde(default)]
    pub shopper: u64,
    /// The edge's receive time of this copy, ms (0 when unknown: stored before).
    #[serde(default)]
    pub received_ms: i64,
}

/// The group a fact counts in.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AdGroup {
    /// Campaign.
    pub campaign_id: String,
    /// Realised ad id.
    pub ad_id: String,
    /// UTC day.
    pub day: i32,
}

/// A fact made of its copies: day of the earliest, best status and class, earliest
/// receive time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedAdFact {
    /// Where it counts.
    pub group: AdGroup,
    /// Impression or click.
    pub action: AdAction,
    /// Best status of its copies.
    pub status: AdIdStatus,
    /// Best traffic class of its copies.
    pub traffic: TrafficClass,
    /// Dedup key.
    pub dedup_key: u128,
    /// The shopper.
    pub shopper: u64,
    /// Earliest receive time of its copies (0 when unknown).
    pub received_ms: i64,
    /// Event time of its earliest copy, ms.
    pub time_ms: i64,
}

/// One fact per (action, dedup key) from any number of copies in any order.
pub fn resolve<'a>(copies: impl IntoIterator<Item = &'a AdFact>) -> Vec<ResolvedAdFact> {
    struct Best<'a> {
        first: &'a AdFact,
        status: AdIdStatus,
        traffic: TrafficClass,
        shopper: u64,
        received_ms: i64,
    }
    let mut by_key: HashMap<(AdAction, u128), Best<'_>> = HashMap::new();
    for c in copies {
        by_key
            .entry((c.action, c.dedup_key))
            .and_modify(|b| {
                // Earliest copy wins the time; ties by ad id so the choice is a set function.
                if (c.time_ms, &c.ad_id) < (b.first.time_ms, &b.first.ad_id) {
                    b.first = c;
                }
                (b.status, b.traffic) =
                    traffic::best_copy((b.status, b.traffic), (c.status, c.traffic));
                b.shopper = b.shopper.max(c.shopper);
                b.received_ms = traffic::earliest(b.received_ms, c.received_ms);
            })
            .or_insert(Best {
                first: c,
                status: c.status,
                traffic: c.traffic,
                shopper: c.shopper,
                received_ms: c.received_ms,
            });
    }
    by_key
        .into_iter()
        .map(|((action, dedup_key), b)| ResolvedAdFact {
            group: AdGroup {
                campaign_id: b.first.campaign_id.clone(),
                ad_id: b.first.ad_id.clone(),
                day: day_of(b.first.time_ms),
            },
            action,
            status: b.status,
            traffic: b.traffic,
            dedup_key,
            shopper: b.shopper,
            received_ms: b.received_ms,
            time_ms: b.first.time_ms,
        })
        .collect()
}

/// One row of the ad report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdReportRow {
    /// Campaign.
    pub campaign_id: String,
    /// Realised ad id.
    pub ad_id: String,
    /// UTC day, `YYYY-MM-DD`.
    pub day: String,
    /// Billable impressions (distinct, ad id verified).
    pub impressions: u64,
    /// Billable clicks (distinct, ad id verified).
    pub clicks: u64,
    /// clicks / impressions, billable only (0 without impressions).
    pub ctr: f64,
    /// Impressions that are not billable (every invalid reason).
    pub not_billable_impressions: u64,
    /// Clicks that are not billable (every invalid reason).
    pub not_billable_clicks: u64,
    /// The worst status among the row's events.
    pub ad_id_status: AdIdStatus,
    /// Invalid impressions by reason.
    #[serde(default)]
    pub invalid_impressions: InvalidCounts,
    /// Invalid clicks by reason.
    #[serde(default)]
    pub invalid_clicks: InvalidCounts,
}

/// Counts of one group, by action and status, as both stores produce them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AdCounts {
    /// Billable impressions.
    pub impressions: u64,
    /// Billable clicks.
    pub clicks: u64,
    /// Not billable impressions.
    pub not_billable_impressions: u64,
    /// Not billable clicks.
    pub not_billable_clicks: u64,
    /// Worst status seen.
    pub worst: AdIdStatus,
    /// Invalid impressions by reason.
    pub invalid_impressions: InvalidCounts,
    /// Invalid clicks by reason.
    pub invalid_clicks: InvalidCounts,
}

impl AdCounts {
    /// Adds `n` facts of `action` with `status`, invalid for `why` (`None`: valid).
    pub fn add(&mut self, action: AdAction, status: AdIdStatus, why: Option<Invalid>, n: u64) {
        match (action, why) {
            (AdAction::Impression, None) => self.impressions += n,
            (AdAction::Click, None) => self.clicks += n,
            (AdAction::Impression, Some(why)) => {
                self.not_billable_impressions += n;
                self.invalid_impressions.add(why, n);
            }
            (AdAction::Click, Some(why)) => {
                self.not_billable_clicks += n;
                self.invalid_clicks.add(why, n);
            }
        }
        if n > 0 {
            self.worst = self.worst.max(status);
        }
    }
}

/// Adds resolved facts to `groups`: impressions as they are, clicks through the click
/// window (per group and shopper). Both stores call this with the facts they resolved
/// one by one (the embedded store all of them, ClickHouse the clicks).
pub fn count(
    groups: &mut BTreeMap<AdGroup, AdCounts>,
    facts: Vec<ResolvedAdFact>,
    window: ClickWindow,
) {
    let mut clicks = Vec::new();
    for f in facts {
        match f.action {
            AdAction::Impression => {
                let why = traffic::reason(f.traffic, f.status);
                groups
                    .entry(f.group)
                    .or_default()
                    .add(f.action, f.status, why, 1);
            }
            AdAction::Click => clicks.push(ClickFact {
                group: f.group,
                shopper: f.shopper,
                dedup_key: f.dedup_key,
                status: f.status,
                traffic: f.traffic,
                received_ms: f.received_ms,
            }),
        }
    }
    let verdicts = traffic::click_verdicts(&clicks, window);
    for (c, why) in clicks.into_iter().zip(verdicts) {
        groups
            .entry(c.group)
            .or_default()
            .add(AdAction::Click, c.status, why, 1);
    }
}

/// Report rows from counts per group, sorted by group.
pub fn rows(groups: BTreeMap<AdGroup, AdCounts>) -> Vec<AdReportRow> {
    groups
        .into_iter()
        .map(|(g, c)| AdReportRow {
            campaign_id: g.campaign_id,
            ad_id: g.ad_id,
            day: format_day(g.day),
            impressions: c.impressions,
            clicks: c.clicks,
            ctr: rate(c.clicks, c.impressions),
            not_billable_impressions: c.not_billable_impressions,
            not_billable_clicks: c.not_billable_clicks,
            ad_id_status: c.worst,
            invalid_impressions: c.invalid_impressions,
            invalid_clicks: c.invalid_clicks,
        })
        .collect()
}

/// The ad report of resolved facts that pass `keep` (on their group).
pub fn report(
    facts: impl IntoIterator<Item = ResolvedAdFact>,
    keep: impl Fn(&AdGroup) -> bool,
    window: ClickWindow,
) -> Vec<AdReportRow> {
    let mut groups: BTreeMap<AdGroup, AdCounts> = BTreeMap::new();
    let kept = facts.into_iter().filter(|f| keep(&f.group)).collect();
    count(&mut groups, kept, window);
    rows(groups)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const T0: i64 = 1_795_000_000_000; // 2026-11-18

    fn copy(action: AdAction, key: u128, time_ms: i64, status: AdIdStatus) -> AdFact {
        AdFact {
            campaign_id: "c".into(),
            ad_id: "rm1.c.ad".into(),
            action,
            dedup_key: key,
            time_ms,
            status,
            traffic: TrafficClass::Valid,
            shopper: 0,
            received_ms: 0,
        }
    }

    fn all(copies: &[AdFact]) -> Vec<AdReportRow> {
        report(resolve(copies), |_| true, ClickWindow::default())
    }

    #[test]
    fn clicks_within_the_window_and_invalid_traffic_are_not_billable() {
        let mut copies: Vec<AdFact> = (0..100)
            .map(|i| {
                let mut c = copy(
                    AdAction::Click,
                    100 + i,
                    T0 + i as i64,
                    AdIdStatus::Verified,
                );
                c.shopper = 1;
                c.received_ms = T0 + 1_000 + i as i64;
                c
            })
            .collect();
        let mut other = copy(AdAction::Click, 7, T0, AdIdStatus::Verified);
        other.shopper = 2;
        other.received_ms = T0 + 1_000;
        let mut bot = copy(AdAction::Impression, 8, T0, AdIdStatus::Verified);
        bot.traffic = TrafficClass::KnownBot;
        let mut prefetch = copy(AdAction::Click, 9, T0, AdIdStatus::Expired);
        prefetch.traffic = TrafficClass::Prefetch;
        copies.extend([other, bot, prefetch]);
        let r = all(&copies);
        assert_eq!(r.len(), 1);
        let row = &r[0];
        assert_eq!((row.impressions, row.clicks), (0, 2));
        assert_eq!(row.invalid_clicks.click_window, 99);
        assert_eq!(row.invalid_clicks.prefetch, 1, "the first reason decides");
        assert_eq!(row.invalid_impressions.known_bot, 1);
        assert_eq!(row.not_billable_clicks, row.invalid_clicks.total());
        assert_eq!(row.not_billable_impressions, 1);
    }

    #[test]
    fn an_impression_refired_on_later_days_counts_once_on_its_first_day() {
        use AdIdStatus::*;
        let copies = vec![
            copy(AdAction::Impression, 1, T0 + 86_400_000, Expired),
            copy(AdAction::Impression, 1, T0, Verified),
            copy(AdAction::Impression, 1, T0 + 5, Verified),
            copy(AdAction::Click, 2, T0 + 10, Verified),
            copy(AdAction::Click, 3, T0 + 20, Foreign),
        ];
        let r = all(&copies);
        assert_eq!(r.len(), 1);
        let row = &r[0];
        assert_eq!(row.day, "2026-11-18");
        assert_eq!((row.impressions, row.clicks, row.ctr), (1, 1, 1.0));
        assert_eq!(
            (row.not_billable_impressions, row.not_billable_clicks),
            (0, 1)
        );
        assert_eq!(row.ad_id_status, Foreign);
    }

    fn arb_copies() -> impl Strategy<Value = Vec<AdFact>> {
        proptest::collection::vec(
            (any::<bool>(), 0u128..12, 0i64..3 * 86_400_000, 0u8..4),
            0..60,
        )
        .prop_map(|v| {
            v.into_iter()
                .map(|(click, k, t, s)| {
                    let action = if click {
                        AdAction::Click
                    } else {
                        AdAction::Impression
                    };
                    let status = AdIdStatus::from_rank(s).unwrap_or_default();
                    copy(action, k, T0 + t, status)
                })
                .collect()
        })
    }

    proptest! {
        /// Re-firing (more copies of the same keys, at any time) and any order of
        /// arrival change nothing; every distinct fact counts exactly once.
        #[test]
        fn impressions_count_once_per_key_in_any_order(
            copies in arb_copies(),
            refires in proptest::collection::vec((0usize..60, 0i64..86_400_000), 0..20),
            seed in any::<usize>(),
        ) {
            let base = all(&copies);
            let mut again = copies.clone();
            for (i, later) in refires {
                if let Some(c) = copies.get(i) {
                    // A re-fire: same key, later, possibly after the ad expired.
                    let mut c = c.clone();
                    c.time_ms += later;
                    c.status = c.status.max(AdIdStatus::Expired);
                    again.push(c);
                }
            }
            let n = again.len().max(1);
            again.rotate_left(seed % n);
            again.reverse();
            prop_assert_eq!(all(&again), base.clone());
            let distinct: std::collections::HashSet<(AdAction, u128)> =
                copies.iter().map(|c| (c.action, c.dedup_key)).collect();
            let total: u64 = base
                .iter()
                .map(|r| r.impressions + r.clicks + r.not_billable_impressions + r.not_billable_clicks)
                .sum();
            prop_assert_eq!(total as usize, distinct.len());
        }

        /// Not-billable facts never reach the billable counts, and billable ones are
        /// exactly the facts with a verified copy.
        #[test]
        fn not_billable_is_never_mixed_in(copies in arb_copies()) {
            let rows = all(&copies);
            let mut best: HashMap<(AdAction, u128), AdIdStatus> = HashMap::new();
            for c in &copies {
                let s = best.entry((c.action, c.dedup_key)).or_insert(c.status);
                *s = (*s).min(c.status);
            }
            let count = |a: AdAction, billable: bool| {
                best.iter().filter(|((x, _), s)| *x == a && s.is_billable() == billable).count() as u64
            };
            let sum = |f: fn(&AdReportRow) -> u64| rows.iter().map(f).sum::<u64>();
            prop_assert_eq!(sum(|r| r.impressions), count(AdAction::Impression, true));
            prop_assert_eq!(sum(|r| r.clicks), count(AdAction::Click, true));
            prop_assert_eq!(sum(|r| r.not_billable_impressions), count(AdAction::Impression, false));
            prop_assert_eq!(sum(|r| r.not_billable_clicks), count(AdAction::Click, false));
            for r in &rows {
                prop_assert_eq!(r.ctr, rate(r.clicks, r.impressions));
                let unverified = r.not_billable_impressions + r.not_billable_clicks > 0;
                prop_assert_eq!(r.ad_id_status != AdIdStatus::Verified, unverified);
            }
        }
    }
}
