//! OAuth clients and order API keys as stored: ids, namespaces, slow salted hashes,
//! scopes. Plain secrets never reach this type. Records written before namespaces
//! read as namespace `default` (and are rewritten so by the api's `state::migrate`).
//!
//! **The client rule**, one for every way a client is made (the admin API, the
//! `clients` subcommand, the clients file): a client id is 1 to [`MAX_CLIENT_ID_LEN`]
//! bytes without control characters or `:` (HTTP Basic splits at the first `:`)
//! ([`check_client_id`]); a namespace id is `rm_schemas::namespace::valid`
//! ([`check_namespace`], also for order API keys).

use serde::{Deserialize, Serialize};

use crate::error::AuthError;

/// Longest accepted client id, in bytes.
pub const MAX_CLIENT_ID_LEN: usize = 256;

/// Checks a client id against the client rule (see the module header).
pub fn check_client_id(id: &str) -> Result<(), AuthError> {
    let refuse = |m| Err(AuthError::InvalidClientId(m));
    if id.is_empty() {
        return refuse("must not be empty");
    }
    if id.len() > MAX_CLIENT_ID_LEN {
        return refuse("longer than 256 bytes");
    }
    if id.chars().any(char::is_control) {
        return refuse("contains control characters");
    }
    if id.contains(':') {
        // HTTP Basic splits at the first ':'.
        return refuse("must not contain ':'");
    }
    Ok(())
}

/// Checks a client's (or an order API key's) namespace id: `[a-z0-9_-]{1,64}`.
pub fn check_namespace(ns: &str) -> Result<(), AuthError> {
    if rm_schemas::namespace::valid(ns) {
        Ok(())
    } else {
        Err(AuthError::InvalidNamespace)
    }
}

/// A scope a token can carry.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// `POST /v1/ads/generate`.
    Ads,
    /// Segment reads and updates.
    Segments,
    /// Campaign reads and approval.
    Campaigns,
    /// Campaign reports and the event inspector.
    Reports,
    /// Erasing a shopper's identifiers (`DELETE /v1/shoppers/{trackingId}`) and
    /// reading those erasures.
    Shoppers,
    /// An operator: every namespace, and client and key management.
    Admin,
}

impl Scope {
    /// Every scope.
    pub const ALL: [Scope; 6] = [
        Scope::Ads,
        Scope::Segments,
        Scope::Campaigns,
        Scope::Reports,
        Scope::Shoppers,
        Scope::Admin,
    ];

    /// The scope's name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Scope::Ads => "ads",
            Scope::Segments => "segments",
            Scope::Campaigns => "campaigns",
            Scope::Reports => "reports",
            Scope::Shoppers => "shoppers",
            Scope::Admin => "admin",
        }
    }

    /// The scope named `s`.
    pub fn parse(s: &str) -> Option<Scope> {
        Self::ALL.into_iter().find(|x| x.as_str() == s)
    }

    /// Parses a list separated by spaces, commas or `+`.
    pub fn parse_list(s: &str) -> Result<Vec<Scope>, String> {
        let mut out: Vec<Scope> = Vec::new();
        for part in s.split([' ', ',', '+']).filter(|p| !p.is_empty()) {
            let scope = Scope::parse(part).ok_or_else(|| {
                format!("unknown scope '{part}' (known: ads, segments, campaigns, reports, shoppers, admin)")
            })?;
            if !out.contains(&scope) {
                out.push(scope);
            }
        }
        out.sort();
        Ok(out)
    }
}

fn default_namespace() -> String {
    rm_schemas::namespace::DEFAULT.to_owned()
}

/// An OAuth client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Client {
    /// `client_id`.
    pub id: String,
    /// The namespace the client acts in (its tokens' `ns` claim).
    #[serde(default = "default_namespace")]
    pub namespace: String,
    /// Argon2id PHC string of the secret.
    pub secret_hash: String,
    /// Scopes its tokens carry.
    pub scopes: Vec<Scope>,
    /// When it was created (RFC 3339).
    pub created: String,
}

/// An order API key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApiKey {
    /// A name for the key (shown by `list`, never secret).
    pub name: String,
    /// The key's public id (`DELETE /v1/admin/order-keys/{keyId}`); the name for
    /// keys created before namespaces.
    #[serde(default)]
    pub key_id: String,
    /// The namespace its orders are stored in.
    #[serde(default = "default_namespace")]
    pub namespace: String,
    /// SHA-256 of the key, hex: the lookup index.
    pub lookup: String,
    /// Argon2id PHC string of the key: the check.
    pub key_hash: String,
    /// When it was created (RFC 3339).
    pub created: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scope_lists() {
        assert_eq!(
            Scope::parse_list("reports ads,ads+admin").unwrap(),
            vec![Scope::Ads, Scope::Reports, Scope::Admin]
        );
        assert!(Scope::parse_list("ads root").is_err());
        assert!(Scope::parse_list("").unwrap().is_empty());
    }

    #[test]
    fn the_client_rule() {
        assert!(check_client_id("partner-a").is_ok());
        for bad in ["", "a:b", "a\nb", &"x".repeat(MAX_CLIENT_ID_LEN + 1)] {
            assert!(check_client_id(bad).is_err(), "{bad:?}");
        }
        assert!(check_client_id(&"x".repeat(MAX_CLIENT_ID_LEN)).is_ok());
        assert!(check_namespace("acme").is_ok());
        assert_eq!(
            check_namespace("Acme").unwrap_err().to_string(),
            "must match [a-z0-9_-]{1,64}"
        );
    }
}
