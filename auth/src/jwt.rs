//! Access tokens: JWTs signed with Ed25519 (`alg: EdDSA`), each with a `kid`.
//!
//! Claims: `iss`, `sub` (the client id), `aud`, `iat`, `nbf`, `exp`, `jti` (a UUIDv7)
//! and `scope` (space-separated, RFC 8693 style), plus `client_id` and `ns`, the
//! client's namespace (`rm_schemas::namespace`), so every verifier scopes a request
//! without a lookup. They are verified by the one rule of [`crate::verify`] (here
//! against our own keys): a token without `ns` (issued before namespaces) is refused.
//!
//! Keys live in the api's state ([`AuthStore`]), so every instance signs with the
//! same key and `/.well-known/jwks.json` lists each one (OKP, Ed25519) for other
//! verifiers. The newest key signs; older keys keep verifying the tokens they signed.
//! Their seeds are stored sealed ([`crate::seal`]); seeds found in clear (an earlier
//! version's state) are sealed at load.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use ed25519_dalek::pkcs8::EncodePrivateKey;
use ed25519_dalek::SigningKey;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header};

use crate::client::Scope;
use crate::error::AuthError;
use crate::seal::{Opened, SeedSeal};
use crate::store::AuthStore;
use crate::verify::{KeySet, Verifier};

pub use crate::store::StoredSigningKey;
pub use crate::verify::Claims;

struct Key {
    kid: String,
    encoding: EncodingKey,
    decoding: DecodingKey,
    public_b64: String,
}

/// Signs tokens, and verifies them with our keys.
pub struct Tokens {
    keys: Vec<Key>,
    issuer: String,
    audience: String,
    verifier: Verifier,
    ttl_secs: u64,
    resealed: usize,
}

/// Our keys without revocations (those are the caller's: `crate::Auth`).
impl KeySet for Tokens {
    fn key(&self, kid: &str) -> Option<&DecodingKey> {
        self.decoding_key(kid)
    }
    fn revoked_at(&self, _client_id: &str) -> Option<i64> {
        None
    }
}

fn key_from_seed(kid: &str, seed: Vec<u8>) -> Result<Key, AuthError> {
    let bad = |message: String| AuthError::SigningKey {
        kid: kid.to_owned(),
        message,
    };
    let seed: [u8; 32] = seed
        .try_into()
        .map_err(|_| bad("seed is not 32 bytes".to_owned()))?;
    let sk = SigningKey::from_bytes(&seed);
    let der = sk.to_pkcs8_der().map_err(|e| bad(e.to_string()))?;
    let public = sk.verifying_key().to_bytes();
    Ok(Key {
        kid: kid.to_owned(),
        encoding: EncodingKey::from_ed_der(der.as_bytes()),
        decoding: DecodingKey::from_ed_der(&public),
        public_b64: URL_SAFE_NO_PAD.encode(public),
    })
}

impl Tokens {
    /// Loads the signing keys from `store`, creating the first one when there is none.
    ///
    /// The first key always has the `kid` `k1`: api instances that start together on
    /// an empty shared state all try to add it, exactly one wins (`insert_new`), and
    /// each rereads, so all of them sign with, and verify, the same key.
    ///
    /// Seeds are opened with `seal`; one in clear, or sealed with an ad id key that is
    /// no longer the first, is sealed again and written back ([`Self::resealed`]
    /// counts them); one that no key opens is an error naming its `kid`.
    pub async fn load<S: AuthStore>(
        store: &S,
        seal: &SeedSeal,
        issuer: &str,
        audience: &str,
        ttl_secs: u64,
    ) -> Result<Tokens, AuthError> {
        let mut stored = store.signing_keys().await.map_err(AuthError::store)?;
        if stored.is_empty() {
            let mut seed = [0u8; 32];
            rand::fill(&mut seed);
            let now = chrono::Utc::now();
            let k = StoredSigningKey {
                kid: "k1".to_owned(),
                seed: seal.seal("k1", &seed),
                created: now.to_rfc3339(),
            };
            store.add_signing_key(&k).await.map_err(AuthError::store)?;
            // Another instance may have won the race for `k1`: reread.
            stored = store.signing_keys().await.map_err(AuthError::store)?;
        }
        stored.sort_by(|a, b| b.created.cmp(&a.created).then(b.kid.cmp(&a.kid)));
        let mut keys = Vec::with_capacity(stored.len());
        let mut resealed = 0;
        for k in &stored {
            let seed = match seal.open(&k.kid, &k.seed) {
                Ok(Opened::Current(seed)) => seed,
                Ok(Opened::Reseal(seed)) => {
                    let sealed = StoredSigningKey {
                        seed: seal.seal(&k.kid, &seed),
                        ..k.clone()
                    };
                    store
                        .replace_signing_key(&sealed)
                        .await
                        .map_err(AuthError::store)?;
                    resealed += 1;
                    seed
                }
                Err(e) => {
                    return Err(AuthError::SigningKey {
                        kid: k.kid.clone(),
                        message: e.to_string(),
                    })
                }
            };
            keys.push(key_from_seed(&k.kid, seed)?);
        }
        Ok(Tokens {
            keys,
            issuer: issuer.to_owned(),
            audience: audience.to_owned(),
            verifier: Verifier::new(issuer, audience),
            ttl_secs,
            resealed,
        })
    }

    /// Seeds sealed again at load: found in clear, or sealed with an older key.
    pub fn resealed(&self) -> usize {
        self.resealed
    }

    /// The verifier of our issuer and audience.
    pub fn verifier(&self) -> &Verifier {
        &self.verifier
    }

    /// The public key of `kid`, if it is one of ours.
    pub fn decoding_key(&self, kid: &str) -> Option<&DecodingKey> {
        self.keys.iter().find(|k| k.kid == kid).map(|k| &k.decoding)
    }

    /// Token lifetime in seconds.
    pub fn ttl_secs(&self) -> u64 {
        self.ttl_secs
    }

    /// Issues a token for `client_id` of namespace `ns` with `scopes`.
    pub fn issue(&self, client_id: &str, ns: &str, scopes: &[Scope]) -> Result<String, AuthError> {
        let key = self
            .keys
            .first()
            .ok_or_else(|| AuthError::Signing("no signing key".to_owned()))?;
        let now = chrono::Utc::now().timestamp();
        let claims = Claims {
            iss: self.issuer.clone(),
            sub: client_id.to_owned(),
            aud: self.audience.clone(),
            iat: now,
            nbf: now,
            exp: now + i64::try_from(self.ttl_secs).unwrap_or(i64::MAX / 2),
            jti: uuid::Uuid::now_v7().to_string(),
            scope: scopes
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(" "),
            client_id: client_id.to_owned(),
            ns: ns.to_owned(),
        };
        let mut header = Header::new(Algorithm::EdDSA);
        header.kid = Some(key.kid.clone());
        header.typ = Some("at+jwt".to_owned());
        jsonwebtoken::encode(&header, &claims, &key.encoding)
            .map_err(|e| AuthError::Signing(e.to_string()))
    }

    /// Verifies `token` by the one rule ([`crate::verify`]) against our keys (no
    /// revocations: `crate::Auth::bearer` adds them).
    pub fn verify(&self, token: &str) -> Result<Claims, AuthError> {
        self.verifier.verify(token, self)
    }

    /// The JWK set of the public keys.
    pub fn jwks(&self) -> serde_json::Value {
        serde_json::json!({
            "keys": self.keys.iter().map(|k| serde_json::json!({
                "kty": "OKP",
                "crv": "Ed25519",
                "x": k.public_b64,
                "kid": k.kid,
                "alg": "EdDSA",
                "use": "sig",
            })).collect::<Vec<_>>()
        })
    }

    /// The public key of `kid`, raw (for tests that forge tokens).
    pub fn public_key(&self, kid: &str) -> Option<Vec<u8>> {
        self.keys
            .iter()
            .find(|k| k.kid == kid)
            .and_then(|k| URL_SAFE_NO_PAD.decode(&k.public_b64).ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::store::tests::MemStore;

    async fn tokens(store: &MemStore, issuer: &str) -> ((), Tokens) {
        let t = Tokens::load(store, &test_seal(), issuer, "aud-1", 60)
            .await
            .unwrap();
        ((), t)
    }

    fn test_seal() -> SeedSeal {
        SeedSeal::from_ad_keys(
            &rm_schemas::ad_id::AdIdKeys::new(vec![b"0123456789abcdef-seal".to_vec()]).unwrap(),
        )
    }

    /// A state an earlier version wrote holds its seed in clear: the same key loads,
    /// and the state then holds it sealed only.
    #[tokio::test]
    async fn a_seed_stored_in_clear_is_sealed_at_load_and_signs_as_before() {
        let store = MemStore::default();
        let seed = [5u8; 32];
        let clear = URL_SAFE_NO_PAD.encode(seed);
        store
            .add_signing_key(&StoredSigningKey {
                kid: "k1".into(),
                seed: clear.clone(),
                created: "2026-01-01T00:00:00Z".into(),
            })
            .await
            .unwrap();
        let before = SigningKey::from_bytes(&seed)
            .verifying_key()
            .to_bytes()
            .to_vec();
        let t = Tokens::load(&store, &test_seal(), "iss", "aud", 60)
            .await
            .unwrap();
        assert_eq!(t.resealed(), 1);
        assert_eq!(t.public_key("k1"), Some(before));
        let now = store.signing_keys().await.unwrap();
        assert!(now[0].seed.starts_with(crate::seal::SEALED), "{now:?}");
        assert!(!now[0].seed.contains(&clear));
        // The next load finds it sealed, and a state sealed under other keys stops it.
        let again = Tokens::load(&store, &test_seal(), "iss", "aud", 60)
            .await
            .unwrap();
        assert_eq!(again.resealed(), 0);
        let other = SeedSeal::from_ad_keys(
            &rm_schemas::ad_id::AdIdKeys::new(vec![b"0123456789abcdef-othr".to_vec()]).unwrap(),
        );
        let e = Tokens::load(&store, &other, "iss", "aud", 60)
            .await
            .err()
            .unwrap();
        assert!(e.to_string().contains("k1"), "{e}");
    }

    fn b64(v: &serde_json::Value) -> String {
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(v).unwrap())
    }

    #[tokio::test]
    async fn issued_tokens_verify_and_carry_claims() {
        let dir = MemStore::default();
        let (_s, t) = tokens(&dir, "iss-1").await;
        let tok = t
            .issue("c1", "acme", &[Scope::Ads, Scope::Reports])
            .unwrap();
        let c = t.verify(&tok).unwrap();
        assert_eq!(c.sub, "c1");
        assert_eq!(c.ns, "acme");
        assert_eq!(c.scopes(), vec![Scope::Ads, Scope::Reports]);
        assert_eq!(c.exp - c.iat, 60);
        let jwks = t.jwks();
        assert_eq!(jwks["keys"][0]["kty"], "OKP");
    }

    #[tokio::test]
    async fn keys_persist_across_loads() {
        let dir = MemStore::default();
        let tok = {
            let (_s, t) = tokens(&dir, "iss-1").await;
            t.issue("c1", "acme", &[Scope::Ads]).unwrap()
        };
        let (_s, t) = tokens(&dir, "iss-1").await;
        assert!(t.verify(&tok).is_ok());
    }

    #[tokio::test]
    async fn forged_and_foreign_tokens_are_refused() {
        let dir = MemStore::default();
        let (_s, t) = tokens(&dir, "iss-1").await;
        let good = t.issue("c1", "acme", &[Scope::Admin]).unwrap();
        let parts: Vec<&str> = good.split('.').collect();
        let kid = t.keys[0].kid.clone();
        let payload = parts[1];

        // alg: none, no signature.
        let none = format!(
            "{}.{payload}.",
            b64(&serde_json::json!({"alg":"none","typ":"JWT","kid":kid}))
        );
        assert!(t.verify(&none).is_err());

        // HS256 with the public key as the HMAC secret.
        let public = t.public_key(&kid).unwrap();
        let mut h = Header::new(Algorithm::HS256);
        h.kid = Some(kid.clone());
        let claims = t.verify(&good).unwrap();
        let hs = jsonwebtoken::encode(&h, &claims, &EncodingKey::from_secret(&public)).unwrap();
        assert!(t.verify(&hs).is_err());
        let hs_b64 = jsonwebtoken::encode(
            &h,
            &claims,
            &EncodingKey::from_secret(t.keys[0].public_b64.as_bytes()),
        )
        .unwrap();
        assert!(t.verify(&hs_b64).is_err());

        // Tampered payload.
        let mut c2 = claims.clone();
        c2.sub = "someone-else".into();
        let tampered = format!(
            "{}.{}.{}",
            parts[0],
            b64(&serde_json::to_value(&c2).unwrap()),
            parts[2]
        );
        assert!(t.verify(&tampered).is_err());

        // Another issuer, with its own key under the same kid name.
        let dir2 = MemStore::default();
        let (_s2, other) = tokens(&dir2, "iss-2").await;
        let foreign = other.issue("c1", "acme", &[Scope::Admin]).unwrap();
        assert!(t.verify(&foreign).is_err());

        // Expired.
        let mut old = claims.clone();
        old.exp = chrono::Utc::now().timestamp() - 3600;
        let mut hd = Header::new(Algorithm::EdDSA);
        hd.kid = Some(kid.clone());
        let expired = jsonwebtoken::encode(&hd, &old, &t.keys[0].encoding).unwrap();
        assert_eq!(
            t.verify(&expired).unwrap_err().to_string(),
            "the token has expired"
        );

        // Wrong audience.
        let mut aud = claims;
        aud.aud = "elsewhere".into();
        let wrong_aud = jsonwebtoken::encode(&hd, &aud, &t.keys[0].encoding).unwrap();
        assert!(t.verify(&wrong_aud).is_err());

        // A token of the version before namespaces (no `ns` claim), validly signed.
        let mut v = serde_json::to_value(t.verify(&good).unwrap()).unwrap();
        v.as_object_mut().unwrap().remove("ns");
        let no_ns = jsonwebtoken::encode(&hd, &v, &t.keys[0].encoding).unwrap();
        assert!(t.verify(&no_ns).is_err(), "a token without a namespace");

        assert!(t.verify("garbage").is_err());
        assert!(t.verify("").is_err());
    }
}
