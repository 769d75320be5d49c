//! Client secrets and API keys at rest: Argon2id PHC strings (salted, slow), checked
//! in constant time by the argon2 crate; SHA-256 lookup digests for API keys, which
//! arrive without an id. Hashing runs on the blocking pool: it takes tens of
//! milliseconds on purpose.

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;
use sha2::{Digest, Sha256};

/// A PHC string for a secret nobody has, checked when the client is unknown so
/// that unknown and known clients take the same time.
const DECOY: &str = "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$J0m1s4mZ/3HLpKZNAdcSVT7VX3mbkY9BMV6Aq4n11xI";

/// Hashes `secret` with a fresh random salt.
pub fn hash(secret: &str) -> String {
    let salt = SaltString::generate(&mut argon2::password_hash::rand_core::OsRng);
    Argon2::default()
        .hash_password(secret.as_bytes(), &salt)
        .map(|h| h.to_string())
        .unwrap_or_default()
}

/// Whether `secret` matches the PHC string `phc` (false for a malformed string).
pub fn verify(secret: &str, phc: &str) -> bool {
    PasswordHash::new(phc)
        .map(|h| {
            Argon2::default()
                .verify_password(secret.as_bytes(), &h)
                .is_ok()
        })
        .unwrap_or(false)
}

/// Checks that `phc` is a PHC string (what a clients file must hold, never a secret).
pub fn check_phc(phc: &str) -> Result<(), argon2::password_hash::Error> {
    PasswordHash::new(phc).map(|_| ())
}

/// Spends the time of one verification on a decoy; always false.
pub fn verify_decoy(secret: &str) -> bool {
    let _ = verify(secret, DECOY);
    false
}

/// The lookup digest of an API key (hex SHA-256).
pub fn lookup_digest(key: &str) -> String {
    let d = Sha256::digest(key.as_bytes());
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// A new random secret: 32 bytes, base64url.
pub fn generate() -> String {
    use base64::Engine as _;
    let mut b = [0u8; 32];
    rand::fill(&mut b);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_then_verify() {
        let h = hash("s3cret");
        assert!(h.starts_with("$argon2id$"));
        assert!(verify("s3cret", &h));
        assert!(!verify("s3cret ", &h));
        assert!(!verify("s3cret", "not a phc"));
        assert_ne!(hash("s3cret"), h, "salted");
        assert!(!verify_decoy("x"));
        assert!(PasswordHash::new(DECOY).is_ok());
    }

    #[test]
    fn lookup_is_hex_sha256() {
        assert_eq!(
            lookup_digest("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(generate().len(), 43);
    }
}
