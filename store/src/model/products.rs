//! Product performance per campaign, ad, catalog, product and day (spec rule 9).
//!
//! Facts are distinct `productImpression` and `productClick` events (by dedup key),
//! placed on the UTC day of their event time. Impressions and clicks are counts of
//! distinct facts, so re-firing the same impression or click changes nothing. A
//! product with impressions and no clicks has a row with 0 clicks and CTR 0; a
//! product with clicks and no impressions also has a row (CTR 0: undefined over zero
//! impressions, reported as 0 and visible as an integration problem).
//!
//! Each row's `adIdStatus` is the worst [`AdIdStatus`] of its distinct facts, a fact
//! taking the best status of its copies (see [`super::status`]).
//!
//! `impressions`, `clicks` and `ctr` count **valid** facts only; invalid ones (bots,
//! non-browsers, prefetches, unverified ad ids, clicks within the click window of the
//! shopper's last counted click on the same ad and product) are counted beside them
//! by reason, in `invalidImpressions` and `invalidClicks` ([`super::traffic`]).

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use super::status::AdIdStatus;
use super::traffic::{self, ClickFact, ClickWindow, InvalidCounts, TrafficClass};
use super::{format_day, rate};

/// Impression or click.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ProductAction {
    /// `productImpression`.
    Impression,
    /// `productClick`.
    Click,
}

/// The group a product fact counts in.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ProductGroup {
    /// Campaign of the ad.
    pub campaign_id: String,
    /// Realised ad id.
    pub ad_id: String,
    /// Catalog.
    pub catalog_id: String,
    /// Product.
    pub product_code: String,
    /// UTC day of the event.
    pub day: i32,
}

/// One distinct product event.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ProductFact {
    /// Where it counts.
    pub group: ProductGroup,
    /// Impression or click.
    pub action: ProductAction,
    /// Dedup key.
    pub dedup_key: u128,
    /// How the ad id verified for this copy.
    #[serde(default)]
    pub status: AdIdStatus,
    /// Event time, ms since the epoch (the embedded store's keys start with it, so a
    /// batch's facts append instead of landing all over the table).
    #[serde(default)]
    pub time_ms: i64,
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

/// One distinct product event: the best of its copies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DistinctProductFact<'a> {
    /// Where it counts (the least group among copies; equal in every copy).
    pub group: &'a ProductGroup,
    /// Impression or click.
    pub action: ProductAction,
    /// Dedup key.
    pub dedup_key: u128,
    /// Best status of its copies.
    pub status: AdIdStatus,
    /// Best traffic class of its copies.
    pub traffic: TrafficClass,
    /// The shopper.
    pub shopper: u64,
    /// Earliest receive time of its copies (0 when unknown).
    pub received_ms: i64,
    /// Event time of its earliest copy, ms (copies share their time: it is part of
    /// the dedup key).
    pub time_ms: i64,
}

/// One row of the product report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProductReportRow {
    /// Campaign.
    pub campaign_id: String,
    /// Realised ad id.
    pub ad_id: String,
    /// Catalog.
    pub catalog_id: String,
    /// Product.
    pub product_code: String,
    /// UTC day, `YYYY-MM-DD`.
    pub day: String,
    /// Distinct impressions.
    pub impressions: u64,
    /// Distinct clicks.
    pub clicks: u64,
    /// clicks / impressions (0 without impressions).
    pub ctr: f64,
    /// Worst ad id status of the row's events.
    pub ad_id_status: AdIdStatus,
    /// Invalid impressions by reason (not in `impressions`).
    #[serde(default)]
    pub invalid_impressions: InvalidCounts,
    /// Invalid clicks by reason (not in `clicks`).
    #[serde(default)]
    pub invalid_clicks: InvalidCounts,
}

/// The counts of one product row, as both stores produce them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProductCounts {
    /// Valid impressions.
    pub impressions: u64,
    /// Valid clicks.
    pub clicks: u64,
    /// Worst status seen.
    pub worst: AdIdStatus,
    /// Invalid impressions by reason.
    pub invalid_impressions: InvalidCounts,
    /// Invalid clicks by reason.
    pub invalid_clicks: InvalidCounts,
}

impl ProductReportRow {
    /// A row from a group and its counts.
    pub fn new(g: &ProductGroup, c: &ProductCounts) -> Self {
        Self {
            campaign_id: g.campaign_id.clone(),
            ad_id: g.ad_id.clone(),
            catalog_id: g.catalog_id.clone(),
            product_code: g.product_code.clone(),
            day: format_day(g.day),
            impressions: c.impressions,
            clicks: c.clicks,
            ctr: rate(c.clicks, c.impressions),
            ad_id_status: c.worst,
            invalid_impressions: c.invalid_impressions,
            invalid_clicks: c.invalid_clicks,
        }
    }
}

/// One distinct fact per (dedup key, action), from any number of copies in any order:
/// the least group (equal in every copy), the status and class of the best copy
/// ([`traffic::best_copy`]), the earliest receive time.
pub fn distinct<'a>(
    facts: impl IntoIterator<Item = &'a ProductFact>,
) -> Vec<DistinctProductFact<'a>> {
    let mut by_key: HashMap<(u128, ProductAction), DistinctProductFact<'a>> = HashMap::new();
    for f in facts {
        by_key
            .entry((f.dedup_key, f.action))
            .and_modify(|d| {
                (d.status, d.traffic) =
                    traffic::best_copy((d.status, d.traffic), (f.status, f.traffic));
                d.group = d.group.min(&f.group);
                d.shopper = d.shopper.max(f.shopper);
                d.received_ms = traffic::earliest(d.received_ms, f.received_ms);
                d.time_ms = d.time_ms.min(f.time_ms);
            })
            .or_insert(DistinctProductFact {
                group: &f.group,
                action: f.action,
                dedup_key: f.dedup_key,
                status: f.status,
                traffic: f.traffic,
                shopper: f.shopper,
                received_ms: f.received_ms,
                time_ms: f.time_ms,
            });
    }
    by_key.into_values().collect()
}

/// Rows of the report (sorted by group) from impressions already counted per group,
/// status and class, and the distinct clicks (group, shopper, dedup key, status,
/// class, receive time), which are windowed here. Both stores call this.
pub fn rows(
    impressions: impl IntoIterator<Item = (ProductGroup, AdIdStatus, TrafficClass, u64)>,
    clicks: Vec<ClickFact<ProductGroup>>,
    window: ClickWindow,
) -> Vec<ProductReportRow> {
    let mut groups: BTreeMap<ProductGroup, ProductCounts> = BTreeMap::new();
    for (g, status, class, n) in impressions {
        let c = groups.entry(g).or_default();
        match traffic::reason(class, status) {
            None => c.impressions += n,
            Some(why) => c.invalid_impressions.add(why, n),
        }
        if n > 0 {
            c.worst = c.worst.max(status);
        }
    }
    let verdicts = traffic::click_verdicts(&clicks, window);
    for (click, why) in clicks.into_iter().zip(verdicts) {
        let c = groups.entry(click.group).or_default();
        match why {
            None => c.clicks += 1,
            Some(why) => c.invalid_clicks.add(why, 1),
        }
        c.worst = c.worst.max(click.status);
    }
    groups
        .iter()
        .map(|(g, c)| ProductReportRow::new(g, c))
        .collect()
}

/// The product report of any number of copies of facts, in any order.
pub fn report<'a>(
    facts: impl IntoIterator<Item = &'a ProductFact>,
    window: ClickWindow,
) -> Vec<ProductReportRow> {
    let mut impressions: BTreeMap<(&ProductGroup, AdIdStatus, TrafficClass), u64> = BTreeMap::new();
    let mut clicks = Vec::new();
    for d in distinct(facts) {
        match d.action {
            ProductAction::Impression => {
                *impressions
                    .entry((d.group, d.status, d.traffic))
                    .or_default() += 1;
            }
            ProductAction::Click => clicks.push(ClickFact {
                group: d.group.clone(),
                shopper: d.shopper,
                dedup_key: d.dedup_key,
                status: d.status,
                traffic: d.traffic,
                received_ms: d.received_ms,
            }),
        }
    }
    rows(
        impressions
            .into_iter()
            .map(|((g, s, t), n)| (g.clone(), s, t, n)),
        clicks,
        window,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashSet;

    fn group(p: &str) -> ProductGroup {
        ProductGroup {
            campaign_id: "c".into(),
            ad_id: "a".into(),
            catalog_id: "cat".into(),
            product_code: p.into(),
            day: 20_000,
        }
    }

    fn fact(p: &str, action: ProductAction, k: u128) -> ProductFact {
        ProductFact {
            group: group(p),
            action,
            dedup_key: k,
            status: AdIdStatus::Verified,
            time_ms: 0,
            traffic: TrafficClass::Valid,
            shopper: 0,
            received_ms: 0,
        }
    }

    fn r(facts: &[ProductFact]) -> Vec<ProductReportRow> {
        report(facts, ClickWindow::default())
    }

    #[test]
    fn invalid_facts_are_counted_by_reason_beside_the_valid_ones() {
        let mut facts = vec![fact("p1", ProductAction::Impression, 1)];
        let mut bot = fact("p1", ProductAction::Impression, 2);
        bot.traffic = TrafficClass::KnownBot;
        let mut forged = fact("p1", ProductAction::Click, 3);
        forged.status = AdIdStatus::Foreign;
        facts.extend([bot, forged]);
        // 100 clicks by one shopper 1 ms apart, with their own timestamps (keys).
        for i in 0..100 {
            let mut c = fact("p1", ProductAction::Click, 1_000 + i);
            c.shopper = 7;
            c.received_ms = 1_795_000_000_000 + i as i64;
            facts.push(c);
        }
        // The same event again from a crawler: the best copy (the shopper's) wins.
        let mut copy = facts[0].clone();
        copy.traffic = TrafficClass::NonBrowser;
        facts.push(copy);
        let rows = r(&facts);
        assert_eq!(rows.len(), 1);
        let row = &rows[0];
        assert_eq!((row.impressions, row.clicks, row.ctr), (1, 1, 1.0));
        assert_eq!(row.invalid_impressions.known_bot, 1);
        assert_eq!(row.invalid_impressions.total(), 1);
        assert_eq!(row.invalid_clicks.unverified_ad_id, 1);
        assert_eq!(row.invalid_clicks.click_window, 99);
        assert_eq!(row.invalid_clicks.total(), 100);
        assert_eq!(row.ad_id_status, AdIdStatus::Foreign);
    }

    #[test]
    fn zero_click_products_have_rows_and_refires_do_not_count() {
        let facts = vec![
            fact("p1", ProductAction::Impression, 1),
            fact("p1", ProductAction::Impression, 1),
            fact("p1", ProductAction::Impression, 2),
            fact("p1", ProductAction::Click, 3),
            fact("p1", ProductAction::Click, 3),
            fact("p2", ProductAction::Impression, 4),
        ];
        let r = r(&facts);
        assert_eq!(r.len(), 2);
        assert_eq!(
            (
                r[0].product_code.as_str(),
                r[0].impressions,
                r[0].clicks,
                r[0].ctr
            ),
            ("p1", 2, 1, 0.5)
        );
        assert_eq!(
            (
                r[1].product_code.as_str(),
                r[1].impressions,
                r[1].clicks,
                r[1].ctr
            ),
            ("p2", 1, 0, 0.0)
        );
        assert_eq!(r[1].day, "2024-10-04");
    }

    proptest! {
        #[test]
        fn counts_are_distinct_facts_in_any_order(
            raw in proptest::collection::vec((0u8..4, any::<bool>(), 0u128..50), 0..100),
            seed in any::<usize>(),
        ) {
            let facts: Vec<ProductFact> = raw
                .iter()
                .map(|(p, click, k)| fact(&format!("p{p}"), if *click { ProductAction::Click } else { ProductAction::Impression }, *k * 8 + u128::from(*p) * 2 + u128::from(*click)))
                .collect();
            let base = r(&facts);
            let mut again = facts.clone();
            again.extend(facts.iter().cloned());
            let n = again.len().max(1);
            again.rotate_left(seed % n);
            prop_assert_eq!(r(&again), base.clone());
            let distinct: HashSet<u128> = facts.iter().map(|f| f.dedup_key).collect();
            let total: u64 = base.iter().map(|r| r.impressions + r.clicks).sum();
            prop_assert_eq!(total as usize, distinct.len());
            prop_assert!(base.iter().all(|r| (0.0..=f64::INFINITY).contains(&r.ctr)));
        }
    }
}
