//! Namespaces: the tenants of one deployment (a retailer, or a brand of one).
//!
//! Every OAuth client, orders API key, campaign, segment, product and order belongs
//! to one namespace. The rules every crate shares live here:
//!
//! - a namespace id is `[a-z0-9_-]{1,64}` ([`valid`]), so it travels unescaped in
//!   realised ad ids, keys and URLs;
//! - data written before namespaces existed belongs to [`DEFAULT`];
//! - ids that are unique only within a namespace (order ids, catalog products) are
//!   stored under a **scoped id** ([`scoped`]): the id itself in [`DEFAULT`], so
//!   everything written before keeps its key, else `<namespace>` + U+001F + the id.
//!   U+001F cannot occur in a namespace id, and the api refuses control characters
//!   in ids, so [`split`] inverts [`scoped`] exactly.

/// The namespace of everything written before namespaces, and of ids without one.
pub const DEFAULT: &str = "default";

/// Longest namespace id.
pub const MAX_LEN: usize = 64;

const SEP: char = '\u{1f}';

/// Whether `ns` is a valid namespace id: 1 to 64 of `a-z`, `0-9`, `_`, `-`.
pub fn valid(ns: &str) -> bool {
    (1..=MAX_LEN).contains(&ns.len())
        && ns
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

/// The stored form of `id` in namespace `ns` (see the module header).
pub fn scoped(ns: &str, id: &str) -> String {
    if ns == DEFAULT {
        id.to_owned()
    } else {
        format!("{ns}{SEP}{id}")
    }
}

/// The namespace and id of a scoped id ([`scoped`]'s inverse).
pub fn split(scoped: &str) -> (&str, &str) {
    match scoped.split_once(SEP) {
        Some((ns, id)) if valid(ns) => (ns, id),
        _ => (DEFAULT, scoped),
    }
}

/// The id part of a stored id, whatever scoped it (the scope of a cart line of an
/// unverified ad id is not a namespace): what a report shows.
pub fn bare(stored: &str) -> &str {
    stored.split_once(SEP).map_or(stored, |(_, id)| id)
}

/// The separator [`scoped`] puts between a namespace and an id.
pub const SEPARATOR: char = SEP;

/// Who is reading: an operator (an `admin` token) sees every namespace, anyone else
/// only their own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Viewer {
    /// Sees everything, including what belongs to no namespace.
    Operator,
    /// Sees only this namespace.
    Tenant(String),
}

impl Viewer {
    /// Whether the viewer may see something of namespace `ns` (`None`: of no
    /// namespace, such as an event whose ad id does not verify).
    pub fn sees(&self, ns: Option<&str>) -> bool {
        match self {
            Viewer::Operator => true,
            Viewer::Tenant(own) => ns == Some(own.as_str()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn ids_are_checked() {
        assert!(valid("acme") && valid("retailer_1-eu") && valid(DEFAULT));
        assert!(!valid("") && !valid("Acme") && !valid("a.b") && !valid("a/b"));
        assert!(!valid(&"x".repeat(MAX_LEN + 1)));
    }

    #[test]
    fn the_default_namespace_keeps_ids_as_they_were() {
        assert_eq!(scoped(DEFAULT, "order-1"), "order-1");
        assert_eq!(split("order-1"), (DEFAULT, "order-1"));
        assert_eq!(scoped("acme", "order-1"), "acme\u{1f}order-1");
        assert_eq!(split("acme\u{1f}order-1"), ("acme", "order-1"));
    }

    #[test]
    fn tenants_see_only_their_own() {
        let acme = Viewer::Tenant("acme".into());
        assert!(acme.sees(Some("acme")));
        assert!(!acme.sees(Some("brand")) && !acme.sees(None));
        assert!(Viewer::Operator.sees(None) && Viewer::Operator.sees(Some("brand")));
    }

    proptest! {
        #[test]
        fn split_inverts_scoped(ns in "[a-z0-9_-]{1,64}", id in "[^\u{0}-\u{1f}]{1,40}") {
            let s = scoped(&ns, &id);
            prop_assert_eq!(split(&s), (ns.as_str(), id.as_str()));
        }
    }
}
