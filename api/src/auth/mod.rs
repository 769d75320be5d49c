//! Authentication: the OAuth 2.0 token endpoint ([`token`]), bearer JWTs on every
//! other partner route ([`Auth::bearer`]), and the orders endpoint's HTTP Basic API
//! key ([`Auth::api_key`]). Secrets at rest are Argon2id hashes ([`secret`]).
//! Both give the request its [`Caller`] (client and namespace).
//!
//! **Revocation.** Removing a client (`DELETE /v1/admin/clients/{clientId}`) records
//! when it was removed; a token of that client issued at or before then is refused.
//! Each api instance rereads the list every [`REVOCATIONS_REFRESH`] (the instance
//! that removed the client knows at once), so a removed client's tokens stop working
//! everywhere within that time. `GET /.well-known/revoked-clients.json` publishes the
//! list (SHA-256 of each client id, and the time) for edges that verify tokens
//! through the JWK set.

pub mod hash_queue;
pub mod jwt;
pub mod limiter;
pub mod secret;
pub mod table;
pub mod token;

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use http::{header, HeaderMap};

use crate::error::ApiError;
use crate::model::client::{ApiKey, Scope};
use crate::state::{State, StateError};
use crate::tenancy::Caller;
use hash_queue::{Busy, HashQueue};
pub use jwt::{Claims, Tokens};
use limiter::{LimitSettings, Limiter};

/// How often each api instance rereads the revoked clients (well under the 60 s a
/// removed client's tokens may keep working).
pub const REVOCATIONS_REFRESH: Duration = Duration::from_secs(10);

/// Everything authentication needs.
pub struct Auth {
    /// Token signing and verification.
    pub tokens: Tokens,
    /// Failed authentications, per client and source address, per address, and the
    /// global budget of unknown credentials.
    pub limiter: Limiter,
    hashing: HashQueue,
    /// Removed clients: client id -> Unix seconds of removal.
    revoked: RwLock<HashMap<String, i64>>,
}

impl Auth {
    /// Wraps the token keys with the limiter and hashing queue of `limits`.
    pub fn new(tokens: Tokens, limits: &LimitSettings) -> Auth {
        Auth {
            tokens,
            limiter: Limiter::new(limits, Instant::now()),
            hashing: HashQueue::new(limits.hash_concurrency as usize, limits.hash_queue as usize),
            revoked: RwLock::new(HashMap::new()),
        }
    }

    /// Rereads the revoked clients from `state`.
    pub async fn refresh_revocations(&self, state: &State) -> Result<(), StateError> {
        let list = state.revocations().await?;
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

    /// When `client_id` was removed, if it was.
    fn revoked_at(&self, client_id: &str) -> Option<i64> {
        self.revoked
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(client_id)
            .copied()
    }

    /// Runs `secret` against `phc` (or a decoy when `None`) through the bounded
    /// hashing queue ([`hash_queue`]); [`Busy`] when the queue is full. `priority`
    /// (a pair that authenticated recently) may use the queue's reserve.
    pub async fn check_secret(
        &self,
        secret: String,
        phc: Option<String>,
        priority: bool,
    ) -> Result<bool, Busy> {
        self.hashing
            .run(priority, move || match phc {
                Some(phc) => secret::verify(&secret, &phc),
                None => secret::verify_decoy(&secret),
            })
            .await
    }

    /// Checks `Authorization: Bearer <JWT>` and that the token holds one of
    /// `accepted` (or `admin`): the caller. 401 for a missing, bad or revoked token,
    /// 403 for a missing scope.
    pub fn bearer(&self, headers: &HeaderMap, accepted: &[Scope]) -> Result<Caller, ApiError> {
        let value = headers
            .get(header::AUTHORIZATION)
            .ok_or_else(|| ApiError::NoCredentials("missing Authorization: Bearer token".into()))?
            .to_str()
            .map_err(|_| ApiError::Unauthenticated("malformed Authorization header".into()))?;
        let token = value
            .split_once(' ')
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, t)| t.trim())
            .filter(|t| !t.is_empty())
            .ok_or_else(|| {
                ApiError::Unauthenticated("Authorization must be 'Bearer <token>'".into())
            })?;
        let claims = self
            .tokens
            .verify(token)
            .map_err(|r| ApiError::Unauthenticated(r.0))?;
        if self
            .revoked_at(&claims.sub)
            .is_some_and(|at| claims.iat <= at)
        {
            return Err(ApiError::Unauthenticated(
                "the token's client was removed".into(),
            ));
        }
        let held = claims.scopes();
        let admin = held.contains(&Scope::Admin);
        if admin || accepted.iter().any(|s| held.contains(s)) {
            Ok(Caller {
                client_id: claims.sub,
                namespace: claims.ns,
                admin,
            })
        } else {
            let need: Vec<&str> = accepted.iter().map(|s| s.as_str()).collect();
            Err(ApiError::PermissionDenied(format!(
                "the token lacks the scope this operation needs ({})",
                need.join(" or ")
            )))
        }
    }

    /// Checks the orders API key: HTTP Basic with the key as user name and an empty
    /// password (`curl -u KEY:`), or the raw key after `Basic `. Returns the key's
    /// record (its namespace is where its orders go). 401 (with the orders realm's
    /// `Basic` challenge) for a missing or bad key; 429 while `source` (the peer
    /// address, [`peer_ip`]) has spent its failures or, for a key that does not
    /// exist, while the global budget of unknown credentials is spent; 503 when the
    /// hashing queue is full.
    pub async fn api_key(
        &self,
        state: &State,
        headers: &HeaderMap,
        source: IpAddr,
    ) -> Result<ApiKey, ApiError> {
        let unauth = |m: &str| ApiError::ApiKeyRejected(m.to_owned());
        let refused = |r: limiter::Refused| ApiError::ResourceExhausted(r.describe());
        // Checked before the header is read: a locked address costs nothing more.
        self.limiter
            .check(None, source, Instant::now())
            .map_err(refused)?;
        let value = headers
            .get(header::AUTHORIZATION)
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
            if let Some(stored) = state.api_key(&digest).await? {
                found = true;
                // The key's name in the limiter's table of recent successes.
                let pair = format!("\0key:{digest}");
                let priority = self.limiter.recently_good(&pair, source, Instant::now());
                let checked = self
                    .check_secret(key, Some(stored.key_hash.clone()), priority)
                    .await
                    .map_err(|Busy| {
                        ApiError::Unavailable(
                            "too many API key checks in progress; retry in 1 s".into(),
                        )
                    })?;
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
            self.limiter.admit_unknown(now).map_err(refused)?;
        }
        Err(unauth("the API key is not valid"))
    }
}

/// The source address of a request: the connection's peer as the accept loop
/// recorded it ([`rm_service::serve::PeerAddr`]); requests that did not come through
/// it share the unspecified address.
pub fn peer_ip(extensions: &http::Extensions) -> IpAddr {
    extensions
        .get::<rm_service::serve::PeerAddr>()
        .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |p| p.0.ip())
}

/// Shared handle.
pub type SharedAuth = Arc<Auth>;
