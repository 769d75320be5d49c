//! The product catalog ads are decided over: products with their category paths.
//!
//! Category paths are `/`-separated, root first (`food/snacks/crisps`). A filter
//! `category:food/snacks` matches a product in that category or below it.
//!
//! No I/O (the api stores catalogs); validation fails with [`crate::AdsError::Invalid`].

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::check_id;
use crate::AdsError;

/// A product of a catalog.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct Product {
    /// The namespace the catalog belongs to: the upserting client's (an operator may
    /// name another). Catalog ids are unique within a namespace.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace_id: String,
    /// Catalog the product belongs to.
    pub catalog_id: String,
    /// Product code, unique in its catalog.
    pub product_code: String,
    /// Display name.
    pub name: String,
    /// Category paths, root first, `/`-separated.
    pub categories: Vec<String>,
    /// Seller.
    pub seller_id: String,
    /// Price (money string).
    pub price: String,
}

impl Product {
    /// Checks ids and category syntax.
    pub fn validate(&self, field: &str) -> Result<(), AdsError> {
        if !self.namespace_id.is_empty() && !rm_schemas::namespace::valid(&self.namespace_id) {
            return Err(AdsError::invalid(
                format!("{field}.namespaceId"),
                "not a namespace id ([a-z0-9_-], 1 to 64)",
            ));
        }
        check_id(&format!("{field}.catalogId"), &self.catalog_id)?;
        check_id(&format!("{field}.productCode"), &self.product_code)?;
        for (i, c) in self.categories.iter().enumerate() {
            if c.is_empty() || c.split('/').any(str::is_empty) {
                return Err(AdsError::invalid(
                    format!("{field}.categories[{i}]"),
                    format!("'{c}' is not a category path like a/b/c"),
                ));
            }
        }
        Ok(())
    }

    /// Whether the product is in `path` or below it.
    pub fn in_category(&self, path: &str) -> bool {
        let path = path.trim_matches('/');
        self.categories.iter().any(|c| {
            c == path
                || (c.len() > path.len() && c.starts_with(path) && c.as_bytes()[path.len()] == b'/')
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn category_prefix_matches_whole_segments() {
        let p = Product {
            categories: vec!["food/snacks/crisps".into()],
            ..Default::default()
        };
        assert!(p.in_category("food"));
        assert!(p.in_category("food/snacks"));
        assert!(p.in_category("food/snacks/crisps"));
        assert!(!p.in_category("food/snack"));
        assert!(!p.in_category("drinks"));
    }
}
