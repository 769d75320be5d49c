//! Realised ad ids (the spec's `partnerAdId`, sent back as `adId` on every beacon):
//! self-describing and tamper-evident.
//!
//! ```text
//! rm1.<campaignId>.<creative>.<expiry>.<nonce>.<signature>               namespace `default`
//! rm2.<namespace>.<campaignId>.<creative>.<expiry>.<nonce>.<signature>   any other namespace
//! ```
//!
//! - `namespace`: the campaign's namespace (`crate::namespace::valid`). Ads of the
//!   `default` namespace keep the `rm1` form, so ids served before namespaces read
//!   the same; the namespace of an event is that of its ad id once the id verifies.
//! - `campaignId`: `[A-Za-z0-9_-]{1,64}` (campaign ids are restricted to that set).
//! - `creative`: what was served: base64url (no padding) of the creative's id (for
//!   product ads `p:` and the product code's first 48 characters, see
//!   [`product_creative`]; ids minted before that carry the bare code; the first
//!   video's UniversalAdId or `banner` for banner X ads), at most 96 bytes before
//!   encoding.
//! - `expiry`: Unix seconds after which the ad is no longer billable.
//! - `nonce`: 12 random bytes, base64url: every served ad id is unique.
//! - `signature`: the first 16 bytes of HMAC-SHA256 over everything before it
//!   (the prefix included), base64url.
//!
//! Every part is URL-safe and free of `.`, so the id travels in a query string and a
//! VAST URL unchanged. Anyone can read the campaign from an id ([`parse`]); only a
//! holder of the key can mint one or tell that it is genuine ([`AdIdKeys::verify`]).
//! Keys rotate: the first key signs, every key verifies.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

/// Prefix and version of realised ad ids of the `default` namespace.
pub const PREFIX: &str = "rm1.";
/// Prefix and version of realised ad ids naming their namespace.
pub const PREFIX_NS: &str = "rm2.";
/// Longest creative id, in bytes.
pub const MAX_CREATIVE_BYTES: usize = 96;
const SIG_BYTES: usize = 16;

/// The readable parts of a realised ad id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdId {
    /// The campaign's namespace (`default` for `rm1` ids).
    pub namespace: String,
    /// The campaign.
    pub campaign_id: String,
    /// The creative (product code, video id, or `banner`).
    pub creative: String,
    /// Unix seconds of expiry.
    pub expires_at: i64,
}

/// What verification found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Signed by one of our keys and not expired.
    Valid,
    /// Signed by one of our keys, but past its expiry.
    Expired,
    /// Shaped like ours, but the signature does not verify.
    BadSignature,
    /// Not one of our ids at all.
    Foreign,
}

impl Verdict {
    /// A label for metrics and reports.
    pub const fn as_str(self) -> &'static str {
        match self {
            Verdict::Valid => "valid",
            Verdict::Expired => "expired",
            Verdict::BadSignature => "bad_signature",
            Verdict::Foreign => "foreign",
        }
    }
}

/// Whether `id` is a valid campaign id for ad ids.
pub fn valid_campaign_id(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Splits an id into its namespace and five parts (campaign, creative, expiry,
/// nonce, signature), checking only the shape.
fn parts(id: &str) -> Option<(&str, [&str; 5])> {
    let (ns, rest) = match id.strip_prefix(PREFIX) {
        Some(rest) => (crate::namespace::DEFAULT, rest),
        None => {
            let (ns, rest) = id.strip_prefix(PREFIX_NS)?.split_once('.')?;
            if !crate::namespace::valid(ns) || ns == crate::namespace::DEFAULT {
                return None;
            }
            (ns, rest)
        }
    };
    let mut it = rest.split('.');
    let p = [it.next()?, it.next()?, it.next()?, it.next()?, it.next()?];
    if it.next().is_some() || !valid_campaign_id(p[0]) {
        return None;
    }
    Some((ns, p))
}

/// Reads the parts of a realised ad id without verifying it; `None` when it is not
/// shaped like one of ours.
pub fn parse(id: &str) -> Option<AdId> {
    let (ns, [campaign, creative, expiry, _nonce, _sig]) = parts(id)?;
    let creative = URL_SAFE_NO_PAD.decode(creative).ok()?;
    Some(AdId {
        namespace: ns.to_owned(),
        campaign_id: campaign.to_owned(),
        creative: String::from_utf8(creative).ok()?,
        expires_at: expiry.parse().ok()?,
    })
}

/// Default lifetime of a served ad, seconds (`RM_API_AD_TTL_SECS`): the api mints ids
/// with it and the aggregator judges when an ad was served by it.
pub const DEFAULT_TTL_SECS: i64 = 3600;

/// What marks a product ad's creative: [`product_creative`].
pub const PRODUCT_CREATIVE: &str = "p:";
/// Characters of a product code a product ad's creative keeps.
pub const PRODUCT_CREATIVE_CHARS: usize = 48;

/// The creative of a product ad for `product_code`: [`PRODUCT_CREATIVE`] and the
/// code's first [`PRODUCT_CREATIVE_CHARS`] characters, so anyone reading the id
/// knows the one product it carries ([`AdId::carries_product`]).
pub fn product_creative(product_code: &str) -> String {
    let code: String = product_code.chars().take(PRODUCT_CREATIVE_CHARS).collect();
    format!("{PRODUCT_CREATIVE}{code}")
}

impl AdId {
    /// Whether this ad carries `product_code`: `Some(false)` only for a product ad
    /// (its creative made by [`product_creative`]) of another product; `None` when the
    /// id does not say (a banner's companion products, a video, an id minted before
    /// product ads were marked).
    pub fn carries_product(&self, product_code: &str) -> Option<bool> {
        let code = self.creative.strip_prefix(PRODUCT_CREATIVE)?;
        Some(
            product_code
                .chars()
                .take(PRODUCT_CREATIVE_CHARS)
                .eq(code.chars()),
        )
    }

    /// Unix seconds at which the ad was served, given the lifetime it was minted with.
    pub fn served_at(&self, ttl_secs: i64) -> i64 {
        self.expires_at.saturating_sub(ttl_secs.max(0))
    }
}

/// The campaign of an ad id ("" when it is not one of ours).
pub fn campaign_of(id: &str) -> &str {
    parts(id).map_or("", |(_, p)| p[0])
}

/// What every realised ad id of `namespace` starts with: [`PREFIX`] for `default`'s,
/// [`PREFIX_NS`], the namespace and a dot for the others'.
pub fn namespace_prefix(namespace: &str) -> String {
    if namespace == crate::namespace::DEFAULT {
        PREFIX.to_owned()
    } else {
        format!("{PREFIX_NS}{namespace}.")
    }
}

/// The namespace an ad id names, unverified (`None` when it is not one of ours):
/// trust it only for an id that [`AdIdKeys::verify`] found genuine.
pub fn namespace_of(id: &str) -> Option<&str> {
    parts(id).map(|(ns, _)| ns)
}

/// The signing and verification keys.
#[derive(Clone)]
pub struct AdIdKeys {
    keys: Vec<Vec<u8>>,
}

impl std::fmt::Debug for AdIdKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AdIdKeys({} keys)", self.keys.len())
    }
}

/// Why keys could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("ad id keys: {0}")]
pub struct KeyError(pub String);

impl AdIdKeys {
    /// Keys from raw bytes; the first signs. Each must be at least 16 bytes.
    pub fn new(keys: Vec<Vec<u8>>) -> Result<AdIdKeys, KeyError> {
        if keys.is_empty() {
            return Err(KeyError("at least one key is needed".into()));
        }
        if keys.iter().any(|k| k.len() < 16) {
            return Err(KeyError("every key must be at least 16 bytes".into()));
        }
        Ok(AdIdKeys { keys })
    }

    /// Keys from a comma-separated list of base64url (or standard base64) strings.
    pub fn from_list(list: &str) -> Result<AdIdKeys, KeyError> {
        let keys = list
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| {
                URL_SAFE_NO_PAD
                    .decode(s.trim_end_matches('='))
                    .or_else(|_| base64::engine::general_purpose::STANDARD.decode(s))
                    .map_err(|e| KeyError(format!("a key is not base64: {e}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        AdIdKeys::new(keys)
    }

    /// A new random key, base64url (for settings and first starts).
    pub fn generate_key() -> String {
        let mut k = [0u8; 32];
        rand_fill(&mut k);
        URL_SAFE_NO_PAD.encode(k)
    }

    fn mac(key: &[u8], msg: &[u8]) -> [u8; SIG_BYTES] {
        let mut out = [0u8; SIG_BYTES];
        // HMAC takes keys of any length.
        if let Ok(mut m) = Hmac::<Sha256>::new_from_slice(key) {
            m.update(msg);
            out.copy_from_slice(&m.finalize().into_bytes()[..SIG_BYTES]);
        }
        out
    }

    /// Mints an id of the `default` namespace ([`Self::mint_in`]).
    pub fn mint(&self, campaign_id: &str, creative: &str, expires_at: i64) -> Option<String> {
        self.mint_in(crate::namespace::DEFAULT, campaign_id, creative, expires_at)
    }

    /// Mints an id for `campaign_id` of namespace `ns` and `creative`, expiring at
    /// `expires_at`. `None` when the namespace, campaign id or creative is out of
    /// bounds.
    pub fn mint_in(
        &self,
        ns: &str,
        campaign_id: &str,
        creative: &str,
        expires_at: i64,
    ) -> Option<String> {
        if !crate::namespace::valid(ns)
            || !valid_campaign_id(campaign_id)
            || creative.len() > MAX_CREATIVE_BYTES
        {
            return None;
        }
        let mut nonce = [0u8; 12];
        rand_fill(&mut nonce);
        let prefix = if ns == crate::namespace::DEFAULT {
            PREFIX.to_owned()
        } else {
            format!("{PREFIX_NS}{ns}.")
        };
        let body = format!(
            "{prefix}{campaign_id}.{}.{expires_at}.{}",
            URL_SAFE_NO_PAD.encode(creative),
            URL_SAFE_NO_PAD.encode(nonce)
        );
        let sig = Self::mac(&self.keys[0], body.as_bytes());
        Some(format!("{body}.{}", URL_SAFE_NO_PAD.encode(sig)))
    }

    /// Verifies `id` at `now` (Unix seconds).
    pub fn verify(&self, id: &str, now: i64) -> Verdict {
        let Some((_, p)) = parts(id) else {
            return Verdict::Foreign;
        };
        let Some(info) = parse(id) else {
            return Verdict::Foreign;
        };
        let body_len = id.len() - p[4].len() - 1;
        let Ok(sig) = URL_SAFE_NO_PAD.decode(p[4]) else {
            return Verdict::BadSignature;
        };
        let genuine = self.keys.iter().any(|k| {
            let expect = Self::mac(k, &id.as_bytes()[..body_len]);
            constant_time_eq(&expect, &sig)
        });
        match (genuine, info.expires_at >= now) {
            (false, _) => Verdict::BadSignature,
            (true, true) => Verdict::Valid,
            (true, false) => Verdict::Expired,
        }
    }

    /// A 32-byte key for `purpose` derived from each key (HMAC-SHA256 of the purpose),
    /// the signing key's first: what other secrets are sealed with, so every service
    /// holding the ad id keys can open them and a rotation keeps the old ones readable.
    pub fn derived_keys(&self, purpose: &str) -> Vec<[u8; 32]> {
        self.keys
            .iter()
            .filter_map(|k| {
                let mut m = Hmac::<Sha256>::new_from_slice(k).ok()?;
                m.update(b"rm derived key\0");
                m.update(purpose.as_bytes());
                Some(m.finalize().into_bytes().into())
            })
            .collect()
    }

    /// Signs an arbitrary value (a click destination), base64url.
    pub fn sign_value(&self, scope: &str, value: &str) -> String {
        let msg = format!("{scope}\u{0}{value}");
        URL_SAFE_NO_PAD.encode(Self::mac(&self.keys[0], msg.as_bytes()))
    }

    /// Whether `sig` is a signature of `value` under `scope` by any key.
    pub fn verify_value(&self, scope: &str, value: &str, sig: &str) -> bool {
        let Ok(sig) = URL_SAFE_NO_PAD.decode(sig) else {
            return false;
        };
        let msg = format!("{scope}\u{0}{value}");
        self.keys
            .iter()
            .any(|k| constant_time_eq(&Self::mac(k, msg.as_bytes()), &sig))
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn rand_fill(buf: &mut [u8]) {
    // UUIDv4 comes from the OS generator (uuid's fast-rng); two of them give 32 bytes.
    let mut filled = 0;
    while filled < buf.len() {
        let u = uuid::Uuid::new_v4();
        let b = u.as_bytes();
        let n = (buf.len() - filled).min(b.len());
        buf[filled..filled + n].copy_from_slice(&b[..n]);
        filled += n;
    }
}

/// Why an `adId` did not verify (the non-valid [`Verdict`]s).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnverifiedAdId {
    /// Signed by us, past its expiry.
    Expired,
    /// Shaped like ours, but the signature does not verify.
    BadSignature,
    /// Not one of our ids.
    Foreign,
}

impl UnverifiedAdId {
    /// Every value, for pre-registering metric series.
    pub const ALL: [UnverifiedAdId; 3] = [Self::Expired, Self::BadSignature, Self::Foreign];

    /// The verdict's marker; `None` for a valid id.
    pub const fn of(v: Verdict) -> Option<Self> {
        match v {
            Verdict::Valid => None,
            Verdict::Expired => Some(Self::Expired),
            Verdict::BadSignature => Some(Self::BadSignature),
            Verdict::Foreign => Some(Self::Foreign),
        }
    }

    /// The wire name (also the `verdict` metric label).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Expired => "expired",
            Self::BadSignature => "bad_signature",
            Self::Foreign => "foreign",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn keys() -> AdIdKeys {
        AdIdKeys::new(vec![b"0123456789abcdef-key-one".to_vec()]).unwrap()
    }

    #[test]
    fn a_product_ad_names_the_one_product_it_carries() {
        let k = keys();
        let long = "x".repeat(60);
        for code in ["crisps salted/150g", "p:odd", long.as_str()] {
            let id = k.mint("c", &product_creative(code), 2_000).unwrap();
            let ad = parse(&id).unwrap();
            assert_eq!(ad.carries_product(code), Some(true), "{code}");
            assert_eq!(ad.carries_product("another"), Some(false), "{code}");
        }
        // A longer code with the same first 48 characters cannot be told apart.
        let ad = parse(&k.mint("c", &product_creative(&long), 2_000).unwrap()).unwrap();
        assert_eq!(ad.carries_product(&"x".repeat(49)), Some(true));
        // Banners, videos and ids minted before the marker do not say.
        for creative in ["banner", "video-1", "crisps salted/150g"] {
            let ad = parse(&k.mint("c", creative, 2_000).unwrap()).unwrap();
            assert_eq!(ad.carries_product("crisps salted/150g"), None, "{creative}");
        }
        assert_eq!(ad.served_at(3_600), 2_000 - 3_600);
        assert_eq!(ad.served_at(-5), 2_000);
    }

    #[test]
    fn minted_ids_read_back_and_verify() {
        let k = keys();
        let id = k.mint("camp-1", "crisps salted/150g", 2_000).unwrap();
        assert!(id.starts_with("rm1.camp-1."));
        assert_eq!(
            parse(&id).unwrap(),
            AdId {
                namespace: "default".into(),
                campaign_id: "camp-1".into(),
                creative: "crisps salted/150g".into(),
                expires_at: 2_000
            }
        );
        assert_eq!(campaign_of(&id), "camp-1");
        assert_eq!(k.verify(&id, 1_000), Verdict::Valid);
        assert_eq!(k.verify(&id, 2_001), Verdict::Expired);
        assert_ne!(id, k.mint("camp-1", "crisps salted/150g", 2_000).unwrap());
    }

    #[test]
    fn tampering_and_foreign_ids_are_caught() {
        let k = keys();
        let id = k.mint("camp-1", "p", 2_000).unwrap();
        let other_campaign = id.replacen("camp-1", "camp-2", 1);
        assert_eq!(k.verify(&other_campaign, 0), Verdict::BadSignature);
        let later = id.replacen(".2000.", ".9000.", 1);
        assert_eq!(k.verify(&later, 0), Verdict::BadSignature);
        assert_eq!(k.verify("ad-1", 0), Verdict::Foreign);
        assert_eq!(k.verify("rm1.camp.x", 0), Verdict::Foreign);
        assert_eq!(campaign_of("ad-1"), "");
        let other = AdIdKeys::new(vec![b"another key, 16+ bytes".to_vec()]).unwrap();
        assert_eq!(other.verify(&id, 0), Verdict::BadSignature);
        let rotated = AdIdKeys::new(vec![
            b"another key, 16+ bytes".to_vec(),
            b"0123456789abcdef-key-one".to_vec(),
        ])
        .unwrap();
        assert_eq!(rotated.verify(&id, 0), Verdict::Valid);
    }

    #[test]
    fn ids_name_their_namespace_and_it_is_signed() {
        let k = keys();
        let id = k.mint_in("acme", "camp-1", "p", 2_000).unwrap();
        assert!(id.starts_with("rm2.acme.camp-1."), "{id}");
        assert_eq!(namespace_of(&id), Some("acme"));
        assert_eq!(campaign_of(&id), "camp-1");
        assert_eq!(parse(&id).unwrap().namespace, "acme");
        assert_eq!(k.verify(&id, 0), Verdict::Valid);
        let moved = id.replacen("rm2.acme.", "rm2.other.", 1);
        assert_eq!(namespace_of(&moved), Some("other"));
        assert_eq!(k.verify(&moved, 0), Verdict::BadSignature);
        let old = k.mint("camp-1", "p", 2_000).unwrap();
        assert_eq!(namespace_of(&old), Some("default"));
        assert_eq!(
            k.mint_in("default", "c", "p", 1).unwrap().get(..4),
            Some("rm1.")
        );
        assert!(k.mint_in("Bad.NS", "c", "p", 1).is_none());
        assert_eq!(
            namespace_of("rm2.default.c.x.1.n.s"),
            None,
            "default is never rm2"
        );
        assert_eq!(namespace_of("ad-1"), None);
    }

    #[test]
    fn values_are_signed_per_scope() {
        let k = keys();
        let s = k.sign_value("click", "https://shop.example/x");
        assert!(k.verify_value("click", "https://shop.example/x", &s));
        assert!(!k.verify_value("click", "https://evil.example/x", &s));
        assert!(!k.verify_value("other", "https://shop.example/x", &s));
        assert!(!k.verify_value("click", "https://shop.example/x", "!!"));
    }

    #[test]
    fn keys_parse_from_settings() {
        let key = AdIdKeys::generate_key();
        assert!(AdIdKeys::from_list(&format!("{key}, {key}")).is_ok());
        assert!(AdIdKeys::from_list("").is_err());
        assert!(AdIdKeys::from_list("c2hvcnQ").is_err());
        assert!(AdIdKeys::from_list("***").is_err());
    }

    proptest! {
        #[test]
        fn any_creative_round_trips(campaign in "[A-Za-z0-9_-]{1,64}", creative in "\\PC{0,24}", exp in 0i64..4_000_000_000) {
            let k = keys();
            let id = k.mint(&campaign, &creative, exp).unwrap();
            prop_assert!(id.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)));
            let p = parse(&id).unwrap();
            prop_assert_eq!(p.campaign_id, campaign);
            prop_assert_eq!(p.creative, creative);
            prop_assert_eq!(k.verify(&id, exp), Verdict::Valid);
        }

        #[test]
        fn namespaced_ids_round_trip(ns in "[a-z0-9_-]{1,64}", campaign in "[A-Za-z0-9_-]{1,64}", exp in 0i64..4_000_000_000) {
            let k = keys();
            let id = k.mint_in(&ns, &campaign, "p", exp).unwrap();
            let p = parse(&id).unwrap();
            prop_assert_eq!(p.namespace, ns);
            prop_assert_eq!(p.campaign_id, campaign);
            prop_assert_eq!(k.verify(&id, exp), Verdict::Valid);
        }

        #[test]
        fn verify_never_panics(s in "\\PC{0,80}") {
            let _ = keys().verify(&s, 0);
            let _ = parse(&s);
        }
    }
}
