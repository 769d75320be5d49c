//! The `POST /v1/ads/generate` request (spec: endpoint 4) and its validation.
//!
//! | member | rule |
//! |---|---|
//! | `customerId`, `sessionId` | at least one non-empty: it becomes the tracking id of every beacon URL served (`customerId` first) |
//! | `placement` | required, e.g. `category`; matched against campaigns' `placementId` (an empty `placementId` serves every placement) |
//! | `catalogId` | required; campaigns must list it in `catalogIds` |
//! | `productFilters` | optional array of arrays of `category:<path>`; at most 16 x 16 |
//! | `options.filterMode` | `OrAnd` (default: the outer array is OR, each inner array AND) or `AndOr` (outer AND, inner OR) |
//! | `maxNumberOfAds` | optional, 1 to [`MAX_ADS`] (default 10); bounds the product ads and, separately, the banner ads |
//!
//! The api decodes the JSON body (its `parse_json` names the member of a decoding
//! error); this only validates what decoded, failing with [`crate::AdsError::Invalid`].

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::model::check_id;
use crate::AdsError;

/// The largest `maxNumberOfAds`.
pub const MAX_ADS: u32 = 50;
/// `maxNumberOfAds` when absent.
pub const DEFAULT_ADS: u32 = 10;
/// Most filter groups, and most filters in a group.
pub const MAX_FILTERS: usize = 16;

/// How `productFilters` combine.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum FilterMode {
    /// Outer array OR, inner arrays AND (the default).
    #[default]
    OrAnd,
    /// Outer array AND, inner arrays OR.
    AndOr,
}

/// `options`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct Options {
    /// How filters combine.
    pub filter_mode: FilterMode,
}

/// The request body.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdsRequest {
    /// Customer id (tracking id; this or `sessionId` is required).
    #[serde(default)]
    pub customer_id: String,
    /// Session id (tracking id when no customer id).
    #[serde(default)]
    pub session_id: String,
    /// Placement, e.g. `category`.
    #[schemars(length(min = 1, max = 256))]
    pub placement: String,
    /// Catalog.
    #[schemars(length(min = 1, max = 256))]
    pub catalog_id: String,
    /// Filters: arrays of `category:<path>`.
    #[serde(default)]
    #[schemars(length(max = 16), inner(length(min = 1, max = 16)))]
    pub product_filters: Vec<Vec<String>>,
    /// Options.
    #[serde(default)]
    pub options: Options,
    /// Most ads of each kind (1 to 50, default 10).
    #[serde(default)]
    #[schemars(range(min = 1, max = 50))]
    pub max_number_of_ads: Option<u32>,
}

/// A validated request.
#[derive(Debug, Clone, PartialEq)]
pub struct Decided {
    /// `customerId` or `sessionId`.
    pub tracking_param: &'static str,
    /// Its value.
    pub tracking_id: String,
    /// Placement.
    pub placement: String,
    /// Catalog.
    pub catalog_id: String,
    /// Category paths per group, without `category:` and outer slashes.
    pub filters: Vec<Vec<String>>,
    /// Filter mode.
    pub mode: FilterMode,
    /// Most ads of each kind.
    pub max_ads: usize,
}

impl AdsRequest {
    /// Validates the request, naming the member at fault.
    pub fn validate(self) -> Result<Decided, AdsError> {
        let (tracking_param, tracking_id) = if !self.customer_id.is_empty() {
            check_id("customerId", &self.customer_id)?;
            ("customerId", self.customer_id)
        } else if !self.session_id.is_empty() {
            check_id("sessionId", &self.session_id)?;
            ("sessionId", self.session_id)
        } else {
            return Err(AdsError::invalid(
                "customerId",
                "customerId or sessionId is required (it becomes the tracking id of the ads' beacons)",
            ));
        };
        check_id("placement", &self.placement)?;
        check_id("catalogId", &self.catalog_id)?;
        if self.product_filters.len() > MAX_FILTERS {
            return Err(AdsError::invalid(
                "productFilters",
                format!("more than {MAX_FILTERS} filter groups"),
            ));
        }
        let mut filters = Vec::with_capacity(self.product_filters.len());
        for (i, group) in self.product_filters.iter().enumerate() {
            if group.len() > MAX_FILTERS {
                return Err(AdsError::invalid(
                    format!("productFilters[{i}]"),
                    format!("more than {MAX_FILTERS} filters"),
                ));
            }
            if group.is_empty() {
                return Err(AdsError::invalid(
                    format!("productFilters[{i}]"),
                    "is empty",
                ));
            }
            let mut paths = Vec::with_capacity(group.len());
            for (j, f) in group.iter().enumerate() {
                let path = f
                    .strip_prefix("category:")
                    .map(|p| p.trim_matches('/'))
                    .filter(|p| !p.is_empty() && !p.split('/').any(str::is_empty))
                    .ok_or_else(|| {
                        AdsError::invalid(
                            format!("productFilters[{i}][{j}]"),
                            format!("'{f}' is not of the form category:<path>, e.g. category:food/snacks"),
                        )
                    })?;
                paths.push(path.to_owned());
            }
            filters.push(paths);
        }
        let max_ads = match self.max_number_of_ads {
            None => DEFAULT_ADS,
            Some(n) if (1..=MAX_ADS).contains(&n) => n,
            Some(n) => {
                return Err(AdsError::invalid(
                    "maxNumberOfAds",
                    format!("{n} is outside 1..={MAX_ADS}"),
                ))
            }
        };
        Ok(Decided {
            tracking_param,
            tracking_id,
            placement: self.placement,
            catalog_id: self.catalog_id,
            filters,
            mode: self.options.filter_mode,
            max_ads: max_ads as usize,
        })
    }
}

/// Whether a product with `categories` passes `filters` under `mode`; `in_cat` says
/// whether the product is in a category path or below it.
pub fn passes(filters: &[Vec<String>], mode: FilterMode, in_cat: impl Fn(&str) -> bool) -> bool {
    if filters.is_empty() {
        return true;
    }
    match mode {
        FilterMode::OrAnd => filters.iter().any(|g| g.iter().all(|p| in_cat(p))),
        FilterMode::AndOr => filters.iter().all(|g| g.iter().any(|p| in_cat(p))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn filter_modes_are_inverse() {
        let f = vec![vec!["a".to_owned(), "b".to_owned()], vec!["c".to_owned()]];
        let cats = |have: &'static [&'static str]| move |p: &str| have.contains(&p);
        assert!(passes(&f, FilterMode::OrAnd, cats(&["c"])));
        assert!(!passes(&f, FilterMode::AndOr, cats(&["c"])));
        assert!(passes(&f, FilterMode::AndOr, cats(&["a", "c"])));
        assert!(!passes(&f, FilterMode::OrAnd, cats(&["a"])));
        assert!(passes(&[], FilterMode::AndOr, cats(&[])));
    }

    proptest! {
        #[test]
        fn or_and_with_singletons_is_and_or_of_one_group(paths in proptest::collection::vec("[a-c]", 1..5), have in proptest::collection::vec("[a-c]", 0..3)) {
            // [[x],[y],[z]] OrAnd = any; [[x,y,z]] AndOr = any: the same predicate.
            let singletons: Vec<Vec<String>> = paths.iter().map(|p| vec![p.clone()]).collect();
            let one = vec![paths.clone()];
            let in_cat = |p: &str| have.iter().any(|h| h == p);
            prop_assert_eq!(passes(&singletons, FilterMode::OrAnd, in_cat), passes(&one, FilterMode::AndOr, in_cat));
        }
    }
}
