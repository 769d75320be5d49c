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

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use super::status::AdIdStatus;
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
}

/// One row of the product report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
}

impl ProductReportRow {
    /// A row from a group, its counts and its worst ad id status.
    pub fn new(g: &ProductGroup, impressions: u64, clicks: u64, status: AdIdStatus) -> Self {
        Self {
            campaign_id: g.campaign_id.clone(),
            ad_id: g.ad_id.clone(),
            catalog_id: g.catalog_id.clone(),
            product_code: g.product_code.clone(),
            day: format_day(g.day),
            impressions,
            clicks,
            ctr: rate(clicks, impressions),
            ad_id_status: status,
        }
    }
}

/// Counts distinct facts per group, sorted by group.
pub fn report<'a>(facts: impl IntoIterator<Item = &'a ProductFact>) -> Vec<ProductReportRow> {
    // One fact per (dedup key, action): its group (equal in every copy) and best status.
    let mut distinct: HashMap<(u128, ProductAction), (&ProductGroup, AdIdStatus)> = HashMap::new();
    for f in facts {
        distinct
            .entry((f.dedup_key, f.action))
            .and_modify(|(g, s)| {
                *s = (*s).min(f.status);
                *g = (*g).min(&f.group);
            })
            .or_insert((&f.group, f.status));
    }
    let mut groups: BTreeMap<&ProductGroup, (u64, u64, AdIdStatus)> = BTreeMap::new();
    for ((_, action), (g, status)) in distinct {
        let c = groups.entry(g).or_default();
        match action {
            ProductAction::Impression => c.0 += 1,
            ProductAction::Click => c.1 += 1,
        }
        c.2 = c.2.max(status);
    }
    groups
        .into_iter()
        .map(|(g, (i, c, s))| ProductReportRow::new(g, i, c, s))
        .collect()
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
        }
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
        let r = report(&facts);
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
            let base = report(&facts);
            let mut again = facts.clone();
            again.extend(facts.iter().cloned());
            let n = again.len().max(1);
            again.rotate_left(seed % n);
            prop_assert_eq!(report(&again), base.clone());
            let distinct: HashSet<u128> = facts.iter().map(|f| f.dedup_key).collect();
            let total: u64 = base.iter().map(|r| r.impressions + r.clicks).sum();
            prop_assert_eq!(total as usize, distinct.len());
            prop_assert!(base.iter().all(|r| (0.0..=f64::INFINITY).contains(&r.ctr)));
        }
    }
}
