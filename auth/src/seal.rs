//! Token signing seeds sealed at rest: whoever reads the api's state (the redb file,
//! a PostgreSQL dump or replica) gets no key that mints tokens.
//!
//! A seed is stored as `sealed1.<nonce>.<ciphertext>` (base64url): ChaCha20-Poly1305
//! with a 96-bit random nonce, the key id as associated data (a sealed seed moved to
//! another `kid` does not open). The sealing key is derived from the ad id keys
//! (`RM_AD_ID_KEYS`, or `data/ad-id.key`; `rm_schemas::ad_id::AdIdKeys::derived_keys`),
//! which every service of a deployment already holds: api instances sharing a
//! PostgreSQL state open each other's seeds with no new setting. The first ad id key
//! seals; every key opens, so a rotation that keeps the old key in the list keeps the
//! seeds readable (they are sealed again with the new first key at the next start).
//! A seed that no key opens stops the start with an error saying so.
//!
//! Seeds stored in clear by an earlier version are read as they are and sealed again
//! at start (`crate::jwt::Tokens::load`).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce};
use rm_schemas::ad_id::AdIdKeys;

/// Prefix of a sealed seed.
pub const SEALED: &str = "sealed1.";
/// The purpose the sealing keys are derived for.
const PURPOSE: &str = "token signing seed seal v1";

/// The keys seeds are sealed with (the first) and opened with (any).
#[derive(Clone)]
pub struct SeedSeal {
    keys: Vec<[u8; 32]>,
}

impl std::fmt::Debug for SeedSeal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SeedSeal({} keys)", self.keys.len())
    }
}

/// How a stored seed opened.
#[derive(Debug, PartialEq, Eq)]
pub enum Opened {
    /// Sealed with the first key: nothing to do.
    Current(Vec<u8>),
    /// In clear (an earlier version), or sealed with a key that is no longer the
    /// first: to be sealed again.
    Reseal(Vec<u8>),
}

/// Why a stored seed did not open.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SealError {
    /// No key opens it (the key that sealed it is not among the ad id keys), or it
    /// was tampered with.
    #[error("sealed with a key that is not among the ad id keys (RM_AD_ID_KEYS), or altered")]
    NoKeyOpens,
    /// Not base64url, or not the sealed form.
    #[error("malformed: {0}")]
    Malformed(String),
}

impl SeedSeal {
    /// The seal of a deployment's ad id keys.
    pub fn from_ad_keys(keys: &AdIdKeys) -> SeedSeal {
        SeedSeal {
            keys: keys.derived_keys(PURPOSE),
        }
    }

    /// `seed` sealed for key id `kid` with the first key.
    pub fn seal(&self, kid: &str, seed: &[u8]) -> String {
        let mut nonce = [0u8; 12];
        rand::fill(&mut nonce);
        let cipher = ChaCha20Poly1305::new(&Key::from(self.keys[0]));
        let sealed = cipher
            .encrypt(
                &Nonce::from(nonce),
                Payload {
                    msg: seed,
                    aad: kid.as_bytes(),
                },
            )
            .expect("ChaCha20-Poly1305 seals any seed");
        format!(
            "{SEALED}{}.{}",
            URL_SAFE_NO_PAD.encode(nonce),
            URL_SAFE_NO_PAD.encode(sealed)
        )
    }

    /// The seed of `stored` (sealed, or base64url in clear from an earlier version).
    pub fn open(&self, kid: &str, stored: &str) -> Result<Opened, SealError> {
        let b64 = |s: &str| {
            URL_SAFE_NO_PAD
                .decode(s)
                .map_err(|e| SealError::Malformed(e.to_string()))
        };
        let Some(rest) = stored.strip_prefix(SEALED) else {
            return Ok(Opened::Reseal(b64(stored)?));
        };
        let (nonce, sealed) = rest
            .split_once('.')
            .ok_or_else(|| SealError::Malformed("no nonce".into()))?;
        let (nonce, sealed) = (b64(nonce)?, b64(sealed)?);
        let nonce: [u8; 12] = nonce
            .try_into()
            .map_err(|_| SealError::Malformed("the nonce is not 12 bytes".into()))?;
        let nonce = Nonce::from(nonce);
        for (i, k) in self.keys.iter().enumerate() {
            let cipher = ChaCha20Poly1305::new(&Key::from(*k));
            let payload = Payload {
                msg: &sealed,
                aad: kid.as_bytes(),
            };
            if let Ok(seed) = cipher.decrypt(&nonce, payload) {
                return Ok(if i == 0 {
                    Opened::Current(seed)
                } else {
                    Opened::Reseal(seed)
                });
            }
        }
        Err(SealError::NoKeyOpens)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seal(keys: &[&[u8]]) -> SeedSeal {
        SeedSeal::from_ad_keys(&AdIdKeys::new(keys.iter().map(|k| k.to_vec()).collect()).unwrap())
    }

    #[test]
    fn a_sealed_seed_opens_with_its_kid_and_the_keys_only() {
        let s = seal(&[b"0123456789abcdef-one"]);
        let seed = [7u8; 32];
        let sealed = s.seal("k1", &seed);
        assert!(sealed.starts_with(SEALED));
        assert!(!sealed.contains(&URL_SAFE_NO_PAD.encode(seed)));
        assert_eq!(s.open("k1", &sealed), Ok(Opened::Current(seed.to_vec())));
        assert_eq!(
            s.open("k2", &sealed),
            Err(SealError::NoKeyOpens),
            "another kid"
        );
        let other = seal(&[b"0123456789abcdef-two"]);
        assert_eq!(other.open("k1", &sealed), Err(SealError::NoKeyOpens));
        // One flipped bit of the ciphertext.
        let mut bytes = sealed.clone().into_bytes();
        let at = bytes.len() - 3;
        bytes[at] = if bytes[at] == b'A' { b'B' } else { b'A' };
        let tampered = String::from_utf8(bytes).unwrap();
        assert_eq!(s.open("k1", &tampered), Err(SealError::NoKeyOpens));
        // Two seals of one seed differ (a fresh nonce each).
        assert_ne!(s.seal("k1", &seed), sealed);
    }

    #[test]
    fn a_clear_seed_or_one_sealed_with_an_older_key_is_to_be_sealed_again() {
        let old = seal(&[b"0123456789abcdef-old"]);
        let rotated = seal(&[b"0123456789abcdef-new", b"0123456789abcdef-old"]);
        let seed = [9u8; 32];
        let by_old = old.seal("k1", &seed);
        assert_eq!(
            rotated.open("k1", &by_old),
            Ok(Opened::Reseal(seed.to_vec()))
        );
        let clear = URL_SAFE_NO_PAD.encode(seed);
        assert_eq!(
            rotated.open("k1", &clear),
            Ok(Opened::Reseal(seed.to_vec()))
        );
        assert!(matches!(
            rotated.open("k1", "sealed1.nonce"),
            Err(SealError::Malformed(_))
        ));
    }
}
