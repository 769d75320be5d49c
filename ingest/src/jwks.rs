//! Bearer tokens on the edge's own port (`GET /v1/debug/events` when the edge runs
//! alone): verified against the api's JWK set, fetched from `RM_INGEST_JWKS_URL`
//! with hyper's client and cached.
//!
//! Accepted: `alg` `EdDSA` only, a key of the set (`kty` `OKP`, `crv` `Ed25519`,
//! matched by `kid` when the token has one), the configured issuer and audience, not
//! expired (30 s leeway), and a `scope` claim (space-separated) holding `reports` or
//! `admin`. The set is cached for five minutes and fetched again early when a token
//! names an unknown `kid` (at most once every ten seconds). A token of a client the
//! api removed is refused: the api publishes removed clients beside the set
//! (`revoked-clients.json`: SHA-256 of each id and the time), reread every ten
//! seconds. A tenant's token (`reports`) sees its namespace only (the `ns` claim);
//! `admin` is an operator.

use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use rm_schemas::namespace::Viewer;
use serde::Deserialize;

const CACHE_FOR: Duration = Duration::from_secs(300);
const REFETCH_AFTER: Duration = Duration::from_secs(10);
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
const MAX_JWKS_BYTES: usize = 256 * 1024;
/// How often the list of removed clients is reread (well under the 60 s a removed
/// client's token may keep working).
const REVOCATIONS_EVERY: Duration = Duration::from_secs(10);

/// Why a request is not let in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Denied {
    /// No or unusable credentials: 401.
    Unauthenticated(String),
    /// A valid token without the scope: 403.
    Forbidden(String),
    /// The key set could not be fetched: 503.
    Unavailable(String),
}

#[derive(Deserialize)]
struct Jwk {
    kty: Option<String>,
    crv: Option<String>,
    x: Option<String>,
    kid: Option<String>,
}

#[derive(Deserialize)]
struct Jwks {
    keys: Vec<Jwk>,
}

#[derive(Deserialize)]
struct Claims {
    #[serde(default)]
    scope: String,
    /// The client's namespace (tokens of this version always carry it).
    #[serde(default)]
    ns: Option<String>,
    /// The client id.
    #[serde(default)]
    sub: String,
    /// Issued at (Unix seconds).
    #[serde(default)]
    iat: i64,
}

/// `/.well-known/revoked-clients.json`: SHA-256 (hex) of each removed client id, and
/// the Unix seconds of its removal.
#[derive(Deserialize)]
struct RevokedDoc {
    revoked: Vec<RevokedEntry>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RevokedEntry {
    client_id_sha256: String,
    revoked_at: i64,
}

#[derive(Default)]
struct Revoked {
    at: std::collections::HashMap<String, i64>,
    fetched: Option<Instant>,
}

struct Cache {
    keys: Vec<(Option<String>, DecodingKey)>,
    fetched: Option<Instant>,
}

/// Verifies bearer tokens against a remote JWK set.
pub struct BearerVerifier {
    url: hyper::Uri,
    issuer: String,
    audience: String,
    client: Client<HttpConnector, Empty<Bytes>>,
    cache: tokio::sync::Mutex<Cache>,
    revoked_url: Option<hyper::Uri>,
    revoked: tokio::sync::Mutex<Revoked>,
}

/// The Ed25519 keys of a JWK set document.
fn keys_of(doc: &[u8]) -> Result<Vec<(Option<String>, DecodingKey)>, String> {
    let set: Jwks =
        serde_json::from_slice(doc).map_err(|e| format!("the JWK set is not JSON: {e}"))?;
    Ok(set
        .keys
        .into_iter()
        .filter(|k| k.kty.as_deref() == Some("OKP") && k.crv.as_deref() == Some("Ed25519"))
        .filter_map(|k| {
            let x = k.x?;
            DecodingKey::from_ed_components(&x).ok().map(|d| (k.kid, d))
        })
        .collect())
}

impl BearerVerifier {
    /// A verifier of tokens from `issuer` for `audience`, keys at `url`.
    pub fn new(url: &str, issuer: &str, audience: &str) -> Result<Self, String> {
        let uri: hyper::Uri = url
            .parse()
            .map_err(|e| format!("RM_INGEST_JWKS_URL '{url}' is not a URL: {e}"))?;
        if uri.scheme_str() != Some("http") {
            return Err(format!(
                "RM_INGEST_JWKS_URL '{url}' must be an http:// URL (put TLS in front of the api's internal address, or run the inspector on the api)"
            ));
        }
        // The api publishes removed clients beside its key set.
        let revoked_url = url
            .strip_suffix("jwks.json")
            .and_then(|base| format!("{base}revoked-clients.json").parse().ok());
        Ok(Self {
            revoked_url,
            revoked: tokio::sync::Mutex::new(Revoked::default()),
            url: uri,
            issuer: issuer.to_owned(),
            audience: audience.to_owned(),
            client: Client::builder(TokioExecutor::new()).build_http(),
            cache: tokio::sync::Mutex::new(Cache {
                keys: Vec::new(),
                fetched: None,
            }),
        })
    }

    async fn get_doc(&self, url: &hyper::Uri, what: &str) -> Result<Bytes, String> {
        let get = self.client.get(url.clone());
        let resp = tokio::time::timeout(FETCH_TIMEOUT, get)
            .await
            .map_err(|_| format!("the {what} did not answer in time"))?
            .map_err(|e| format!("the {what} could not be fetched: {e}"))?;
        if !resp.status().is_success() {
            return Err(format!("the {what} answered {}", resp.status()));
        }
        Ok(Limited::new(resp.into_body(), MAX_JWKS_BYTES)
            .collect()
            .await
            .map_err(|e| format!("the {what} could not be read: {e}"))?
            .to_bytes())
    }

    async fn fetch(&self) -> Result<Vec<(Option<String>, DecodingKey)>, String> {
        keys_of(&self.get_doc(&self.url, "JWK set").await?)
    }

    /// When the client `sub` was removed, from the api's list, reread every
    /// [`REVOCATIONS_EVERY`]. A list that cannot be read keeps the last one (and,
    /// never read, counts as empty: the api may predate it), with a warning.
    async fn revoked_at(&self, sub: &str) -> Option<i64> {
        let url = self.revoked_url.as_ref()?;
        let mut r = self.revoked.lock().await;
        if r.fetched.is_none_or(|t| t.elapsed() > REVOCATIONS_EVERY) {
            let doc = self
                .get_doc(url, "revoked clients list")
                .await
                .and_then(|b| {
                    serde_json::from_slice::<RevokedDoc>(&b)
                        .map_err(|e| format!("the revoked clients list is not valid: {e}"))
                });
            match doc {
                Ok(d) => {
                    r.at = d
                        .revoked
                        .into_iter()
                        .map(|e| (e.client_id_sha256, e.revoked_at))
                        .collect();
                }
                Err(e) => tracing::warn!(error = %e, "revoked clients: keeping the last list"),
            }
            r.fetched = Some(Instant::now());
        }
        use sha2::Digest as _;
        let digest: String = sha2::Sha256::digest(sub.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        r.at.get(&digest).copied()
    }

    /// The key for `kid`, fetching the set when it is stale or does not know `kid`.
    async fn key(&self, kid: Option<&str>) -> Result<Option<DecodingKey>, Denied> {
        let mut c = self.cache.lock().await;
        let find = |c: &Cache| {
            c.keys
                .iter()
                .find(|(k, _)| kid.is_none() || k.as_deref() == kid)
                .map(|(_, d)| d.clone())
        };
        let age = c.fetched.map(|t| t.elapsed());
        let stale = age.is_none_or(|a| a > CACHE_FOR);
        let unknown = find(&c).is_none() && age.is_none_or(|a| a > REFETCH_AFTER);
        if stale || unknown {
            match self.fetch().await {
                Ok(keys) => {
                    c.keys = keys;
                    c.fetched = Some(Instant::now());
                }
                // A stale set still verifies until a fetch works again.
                Err(e) if c.fetched.is_none() => return Err(Denied::Unavailable(e)),
                Err(e) => tracing::warn!(error = %e, "jwks refresh failed; using the cached set"),
            }
        }
        Ok(find(&c))
    }

    /// Lets a request in when its `Authorization` header holds a valid token with
    /// scope `reports` or `admin`; who it is: an operator (`admin`) or the tenant of
    /// the token's namespace (`ns` claim).
    pub async fn check(&self, authorization: Option<&str>) -> Result<Viewer, Denied> {
        let unauth = |m: &str| Denied::Unauthenticated(m.to_owned());
        let token = authorization
            .and_then(|h| {
                h.strip_prefix("Bearer ")
                    .or_else(|| h.strip_prefix("bearer "))
            })
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| {
                unauth("send Authorization: Bearer <token> (a token with scope reports)")
            })?;
        let header = jsonwebtoken::decode_header(token)
            .map_err(|_| unauth("the token is not a well-formed JWT"))?;
        if header.alg != Algorithm::EdDSA {
            return Err(unauth("the token's alg is not EdDSA"));
        }
        let key = self
            .key(header.kid.as_deref())
            .await?
            .ok_or_else(|| unauth("the token's key is not in the api's JWK set"))?;
        let mut v = Validation::new(Algorithm::EdDSA);
        v.set_issuer(&[&self.issuer]);
        v.set_audience(&[&self.audience]);
        v.set_required_spec_claims(&["exp", "iss", "aud"]);
        v.leeway = 30;
        let claims = jsonwebtoken::decode::<Claims>(token, &key, &v)
            .map_err(|e| {
                use jsonwebtoken::errors::ErrorKind as K;
                unauth(match e.kind() {
                    K::ExpiredSignature => "the token has expired",
                    K::InvalidIssuer => "the token is from another issuer",
                    K::InvalidAudience => "the token is for another audience",
                    K::InvalidSignature => "the token's signature does not verify",
                    _ => "the token is not valid",
                })
            })?
            .claims;
        if self
            .revoked_at(&claims.sub)
            .await
            .is_some_and(|at| claims.iat <= at)
        {
            return Err(unauth("the token's client was removed"));
        }
        let scopes = || claims.scope.split(' ');
        if scopes().any(|s| s == "admin") {
            return Ok(Viewer::Operator);
        }
        if !scopes().any(|s| s == "reports") {
            return Err(Denied::Forbidden(
                "the token lacks scope reports (or admin)".to_owned(),
            ));
        }
        match claims.ns {
            Some(ns) if rm_schemas::namespace::valid(&ns) => Ok(Viewer::Tenant(ns)),
            _ => Err(unauth("the token names no namespace; get a new one")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_ed25519_keys_are_taken() {
        let doc = br#"{"keys":[
            {"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo","kid":"k1"},
            {"kty":"RSA","n":"abc","e":"AQAB","kid":"k2"},
            {"kty":"OKP","crv":"X25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}"#;
        let keys = keys_of(doc).expect("parse");
        assert_eq!(keys.len(), 1);
        assert_eq!(keys[0].0.as_deref(), Some("k1"));
        assert!(keys_of(b"nope").is_err());
    }

    #[test]
    fn only_http_urls_are_accepted() {
        assert!(
            BearerVerifier::new("http://127.0.0.1:8081/.well-known/jwks.json", "i", "a").is_ok()
        );
        assert!(BearerVerifier::new("https://api/jwks", "i", "a").is_err());
        assert!(BearerVerifier::new("not a url", "i", "a").is_err());
    }

    #[tokio::test]
    async fn missing_and_malformed_tokens_are_401() {
        let v = BearerVerifier::new("http://127.0.0.1:9/jwks", "i", "a").expect("verifier");
        assert!(matches!(
            v.check(None).await,
            Err(Denied::Unauthenticated(_))
        ));
        assert!(matches!(
            v.check(Some("Bearer x.y.z")).await,
            Err(Denied::Unauthenticated(_))
        ));
        // An HS256 token is refused before any key is fetched.
        let hs = "eyJhbGciOiJIUzI1NiJ9.eyJzY29wZSI6InJlcG9ydHMifQ.sig";
        assert!(matches!(
            v.check(Some(&format!("Bearer {hs}"))).await,
            Err(Denied::Unauthenticated(_))
        ));
    }
}
