//! Authentication shared by the api and the edge: access tokens (signing, and the
//! one verifier with its one claims rule, [`verify`]), client secrets and API keys at
//! rest ([`secret`]), the failed-authentication limits ([`limiter`]) and the bounded
//! queue of secret checks ([`hash_queue`]), scopes and the client model with the one
//! client rule ([`client`]), and the one denial answer ([`denial`]: the 401/403 body
//! and `WWW-Authenticate` challenge both ports send).
//!
//! No HTTP routing and no state here: what authentication reads from the api's state
//! comes through [`AuthStore`], which the api's state implements; the edge gives the
//! verifier the keys it fetched ([`verify::KeySet`]). Errors are one enum,
//! [`AuthError`]; the api maps it to its own error in its one error-to-response place.
//!
//! **Revocation.** Removing a client records when it was removed; a token of that
//! client issued at or before then is refused ([`verify`]). Each api instance rereads
//! the list every [`REVOCATIONS_REFRESH`] (the instance that removed the client knows
//! at once), so a removed client's tokens stop working everywhere within that time.
//! The api publishes the list ([`Auth::revocations_document`]: SHA-256 of each client
//! id, and the time) for edges that verify tokens through the JWK set.

pub mod client;
pub mod denial;
mod error;
pub mod hash_queue;
pub mod jwt;
pub mod limiter;
pub mod seal;
pub mod secret;
mod store;
pub mod table;
pub mod verified;
pub mod verify;

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::RwLock;
use std::time::{Duration, Instant};

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use http::HeaderValue;

pub use client::{ApiKey, Client, Scope};
pub use error::AuthError;
use hash_queue::{party, Busy, HashQueue};
pub use jwt::{Claims, StoredSigningKey, Tokens};
use limiter::{LimitSettings, Limiter};
pub use store::AuthStore;
pub use verify::{Principal, Verifier};

/// How often each api instance rereads the revoked clients (well under the 60 s a
/// removed client's tokens may keep working).
pub const REVOCATIONS_REFRESH: Duration = Duration::from_secs(10);

/// Everything authentication on the api needs.
pub struct Auth {
    /// Token signing and verification.
    pub tokens: Tokens,
    /// Failed authentications, per client and source address, per address, and the
    /// global budget of unknown credentials.
    pub limiter: Limiter,
    hashing: HashQueue,
    /// Secret checks that succeeded lately, by digest ([`verified`]).
    verified: verified::Verified,
    /// Removed clients: client id -> Unix seconds of removal.
    revoked: RwLock<HashMap<String, i64>>,
}

/// The api's keys and removed clients, as the verifier reads them.
struct ApiKeys<'a> {
    tokens: &'a Tokens,
    revoked: &'a HashMap<String, i64>,
}

impl verify::KeySet for ApiKeys<'_> {
    fn key(&self, kid: &str) -> Option<&verify::DecodingKey> {
        self.tokens.decoding_key(kid)
    }
    fn revoked_at(&self, client_id: &str) -> Option<i64> {
        self.revoked.get(client_id).copied()
    }
}

impl Auth {
    /// Wraps the token keys with the limiter and hashing queue of `limits`.
    pub fn new(tokens: Tokens, limits: &LimitSettings) -> Auth {
        Auth {
            tokens,
            limiter: Limiter::new(limits, Instant::now()),
            hashing: HashQueue::new(limits.hash_concurrency as usize, limits.hash_queue as usize),
            verified: verified::Verified::default(),
            revoked: RwLock::new(HashMap::new()),
        }
    }

    /// Rereads the revoked clients from `store`.
    pub async fn refresh_revocations<S: AuthStore>(&self, store: &S) -> Result<(), AuthError> {
        let list = store.revocations().await.map_err(AuthError::store)?;
        *self.revoked.write().unwrap_or_else(|e| e.into_inner()) = list.into_iter().collect();
        Ok(())
    }

    /// Records here that `client_id` was removed at `at` (Unix seconds).
    pub fn revoke(&self, client_id: &str, at: i64) {
        self.revoked
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(client_id.to_owned(), at);
    }

    /// The published list of removed clients: the SHA-256 (hex) of each client id
    /// and the Unix seconds of its removal; tokens issued at or before then are void.
    pub fn revocations_document(&self) -> serde_json::Value {
        let revoked = self.revoked.read().unwrap_or_else(|e| e.into_inner());
        let mut list: Vec<(String, i64)> = revoked
            .iter()
            .map(|(id, at)| (secret::lookup_digest(id), *at))
            .collect();
        list.sort();
        serde_json::json!({
            "revoked": list
                .into_iter()
                .map(|(sha256, at)| serde_json::json!({"clientIdSha256": sha256, "revokedAt": at}))
                .collect::<Vec<_>>()
        })
    }

    /// Runs `secret` against `phc` (or a decoy when `None`) through the bounded
    /// hashing queue ([`hash_queue`]) as `parties` (the namespace and the client or
    /// key the check is for: each holds at most its share of the queue); [`Busy`]
    /// when the queue, or a party's share of it, is full. `priority` (a pair that
    /// authenticated recently) may use the queue's reserve. A secret that matched
    /// `phc` within the last minute is answered without hashing ([`verified`]).
    pub async fn check_secret(
        &self,
        parties: &[&str],
        secret: String,
        phc: Option<String>,
        priority: bool,
    ) -> Result<bool, Busy> {
        let Some(phc) = phc else {
            return self
                .hashing
                .run(parties, priority, move || secret::verify_decoy(&secret))
                .await;
        };
        let checked = self.verified.digest(&phc, &secret);
        if self.verified.knows(checked, Instant::now()) {
            return Ok(true);
        }
        let flight = self.verified.flight(checked);
        let ok = *flight
            .answer()
            .get_or_try_init(|| {
                let (phc, secret) = (phc.clone(), secret.clone());
                self.hashing
                    .run(parties, priority, move || secret::verify(&secret, &phc))
            })
            .await?;
        if ok {
            self.verified.remember(checked, Instant::now());
        }
        Ok(ok)
    }

    /// Checks `Authorization: Bearer <JWT>` (the header's value) with the one
    /// verifier ([`Verifier::authorize`]) against our keys and removed clients, and
    /// that the token holds one of `accepted` (or `admin`): who calls.
    pub fn bearer(
        &self,
        authorization: Option<&HeaderValue>,
        accepted: &[Scope],
    ) -> Result<Principal, AuthError> {
        let token = verify::bearer_token(authorization)?;
        let revoked = self.revoked.read().unwrap_or_else(|e| e.into_inner());
        let keys = ApiKeys {
            tokens: &self.tokens,
            revoked: &revoked,
        };
        self.tokens.verifier().authorize(token, &keys, accepted)
    }

    /// Checks the orders API key: HTTP Basic with the key as user name and an empty
    /// password (`curl -u KEY:`), or the raw key after `Basic `. Returns the key's
    /// record (its namespace is where its orders go). [`AuthError::ApiKeyRejected`]
    /// for a missing or bad key; [`AuthError::Limited`] while `source` (the peer
    /// address) has spent its failures or, for a key that does not exist, while the
    /// global budget of unknown credentials is spent; [`AuthError::Busy`] when the
    /// hashing queue is full.
    pub async fn api_key<S: AuthStore>(
        &self,
        store: &S,
        authorization: Option<&HeaderValue>,
        source: IpAddr,
    ) -> Result<ApiKey, AuthError> {
        let unauth = |m: &str| AuthError::ApiKeyRejected(m.to_owned());
        // Checked before the header is read: a locked address costs nothing more.
        self.limiter
            .check(None, source, Instant::now())
            .map_err(AuthError::Limited)?;
        let value = authorization
            .ok_or_else(|| unauth("missing Authorization: Basic with the API key"))?
            .to_str()
            .map_err(|_| unauth("malformed Authorization header"))?;
        let raw = value
            .split_once(' ')
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("basic"))
            .map(|(_, t)| t.trim())
            .filter(|t| !t.is_empty())
            .ok_or_else(|| unauth("Authorization must be 'Basic <API key>'"))?;
        let mut candidates = Vec::with_capacity(2);
        if let Some(user) = STANDARD
            .decode(raw)
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .and_then(|s| s.split_once(':').map(|(u, _)| u.to_owned()))
        {
            candidates.push(user);
        }
        candidates.push(raw.to_owned());
        let mut found = false;
        for key in candidates {
            if key.is_empty() {
                continue;
            }
            let digest = secret::lookup_digest(&key);
            if let Some(stored) = store.api_key(&digest).await.map_err(AuthError::store)? {
                found = true;
                // The key's name in the limiter's table of recent successes.
                let pair = format!("\0key:{digest}");
                let priority = self.limiter.recently_good(&pair, source, Instant::now());
                let ns = party::namespace(&stored.namespace);
                let checked = self
                    .check_secret(&[&ns, &pair], key, Some(stored.key_hash.clone()), priority)
                    .await
                    .map_err(|Busy| AuthError::Busy)?;
                if checked {
                    self.limiter.succeeded(&pair, source, Instant::now());
                    return Ok(stored);
                }
            }
        }
        let now = Instant::now();
        self.limiter.failed(None, source, now);
        if !found {
            // No such key: it spends the global budget of unknown credentials.
            self.limiter
                .admit_unknown(now)
                .map_err(AuthError::Limited)?;
        }
        Err(unauth("the API key is not valid"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::tests::MemStore;
    use jsonwebtoken::{Algorithm, EncodingKey, Header};

    fn value(token: &str) -> HeaderValue {
        HeaderValue::from_str(&format!("Bearer {token}")).unwrap()
    }

    /// The one rule as the api applies it: revocation, scope, `nbf` and `ns`.
    #[tokio::test]
    async fn bearer_applies_the_one_rule() {
        let store = MemStore::default();
        let seal = seal::SeedSeal::from_ad_keys(
            &rm_schemas::ad_id::AdIdKeys::new(vec![b"0123456789abcdef-seal".to_vec()]).unwrap(),
        );
        let tokens = Tokens::load(&store, &seal, "iss", "aud", 60).await.unwrap();
        let auth = Auth::new(tokens, &LimitSettings::default());
        let tok = auth.tokens.issue("c1", "acme", &[Scope::Reports]).unwrap();
        let who = auth.bearer(Some(&value(&tok)), &[Scope::Reports]).unwrap();
        assert_eq!(
            (who.client_id.as_str(), who.namespace.as_str()),
            ("c1", "acme")
        );
        assert!(!who.admin);
        assert!(matches!(
            auth.bearer(Some(&value(&tok)), &[Scope::Ads]),
            Err(AuthError::InsufficientScope(_))
        ));
        assert!(matches!(
            auth.bearer(None, &[Scope::Reports]),
            Err(AuthError::NoCredentials(_))
        ));

        // Signed by our key, but not valid yet, or naming no valid namespace.
        let claims = auth.tokens.verify(&tok).unwrap();
        let store_keys = store.keys.lock().unwrap().clone();
        let seed = &store_keys["k1"];
        let sk = {
            use ed25519_dalek::pkcs8::EncodePrivateKey;
            let seal::Opened::Current(b) = seal.open("k1", &seed.seed).unwrap() else {
                panic!("sealed with the first key")
            };
            let b: [u8; 32] = b.try_into().unwrap();
            let der = ed25519_dalek::SigningKey::from_bytes(&b)
                .to_pkcs8_der()
                .unwrap();
            EncodingKey::from_ed_der(der.as_bytes())
        };
        let mut h = Header::new(Algorithm::EdDSA);
        h.kid = Some("k1".into());
        let sign = |c: &Claims| jsonwebtoken::encode(&h, c, &sk).unwrap();
        let mut later = claims.clone();
        later.nbf += 3600;
        let e = auth.tokens.verify(&sign(&later)).unwrap_err();
        assert_eq!(e.to_string(), "the token is not valid yet");
        let mut bad_ns = claims.clone();
        bad_ns.ns = "Not A Namespace".into();
        assert!(auth.tokens.verify(&sign(&bad_ns)).is_err());
        let mut no_kid = Header::new(Algorithm::EdDSA);
        no_kid.kid = None;
        let t = jsonwebtoken::encode(&no_kid, &claims, &sk).unwrap();
        assert_eq!(
            auth.tokens.verify(&t).unwrap_err().to_string(),
            "the token has no kid"
        );

        // A removed client's tokens issued before the removal are refused.
        auth.revoke("c1", claims.iat);
        assert!(matches!(
            auth.bearer(Some(&value(&tok)), &[Scope::Reports]),
            Err(AuthError::InvalidToken(m)) if m == "the token's client was removed"
        ));
    }
}
