//! Bearer tokens on the edge's own port (`GET /v1/debug/events` when the edge runs
//! alone): the api's JWK set, fetched from `RM_INGEST_JWKS_URL` with hyper's client
//! and cached, and the api's list of removed clients beside it; the token itself is
//! verified by `rm_auth`'s one verifier and claims rule (`rm_auth::verify`), the same
//! the api applies: `alg` `EdDSA` with a `kid` of the set (`kty` `OKP`, `crv`
//! `Ed25519`), the configured issuer and audience, `exp` and `nbf` with 30 s leeway,
//! every claim present and a valid `ns`, not issued before its client was removed,
//! and a `scope` holding `reports` or `admin`.
//!
//! The set is cached for five minutes and fetched again early when a token names an
//! unknown `kid` (at most once every ten seconds). The removed clients
//! (`revoked-clients.json`: SHA-256 of each id and the time) are reread every ten
//! seconds. A tenant's token (`reports`) sees its namespace only (the `ns` claim);
//! `admin` is an operator.
//!
//! **Transport.** Whoever can change the key set mints operator tokens, so the set is
//! fetched over `https://` (rustls; the server's certificate checked against
//! `RM_INGEST_JWKS_CA_FILE`, a PEM bundle, or the system's bundle) or, only on
//! loopback, `http://` (an api in the same host or pod). Any other `http://` URL is
//! refused at start.
//!
//! **Fail closed.** A token is refused (503, as when no key set could be read) while
//! the list of removed clients has not been read for [`REVOCATIONS_STALE_AFTER`]
//! (never read counts as stale): a removed client's token must not outlive its
//! removal because the list could not be fetched.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use rm_auth::verify::{self, DecodingKey, KeySet, Verifier};
use rm_auth::{AuthError, Scope};
use rm_schemas::namespace::Viewer;
use serde::Deserialize;

const CACHE_FOR: Duration = Duration::from_secs(300);
const REFETCH_AFTER: Duration = Duration::from_secs(10);
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
const MAX_JWKS_BYTES: usize = 256 * 1024;
/// How often the list of removed clients is reread (well under the 60 s a removed
/// client's token may keep working).
const REVOCATIONS_EVERY: Duration = Duration::from_secs(10);
/// How long the list of removed clients may go unread before tokens are refused.
pub const REVOCATIONS_STALE_AFTER: Duration = Duration::from_secs(60);
/// The system's CA bundle, where `RM_INGEST_JWKS_CA_FILE` is unset (Debian's, then
/// Red Hat's; `SSL_CERT_FILE` first).
const SYSTEM_BUNDLES: [&str; 2] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
];

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
    /// Last fetch attempt (a failed one waits [`REVOCATIONS_EVERY`] too).
    fetched: Option<Instant>,
    /// Last fetch that read the list.
    read: Option<Instant>,
}

struct Cache {
    keys: Vec<(Option<String>, DecodingKey)>,
    fetched: Option<Instant>,
}

/// The fetched keys and removed clients, as the verifier reads them.
struct Fetched<'a> {
    keys: &'a [(Option<String>, DecodingKey)],
    revoked: &'a std::collections::HashMap<String, i64>,
}

impl KeySet for Fetched<'_> {
    fn key(&self, kid: &str) -> Option<&DecodingKey> {
        self.keys
            .iter()
            .find(|(k, _)| k.as_deref() == Some(kid))
            .map(|(_, d)| d)
    }
    fn revoked_at(&self, client_id: &str) -> Option<i64> {
        // The api publishes the SHA-256 of each removed client id.
        self.revoked
            .get(&rm_auth::secret::lookup_digest(client_id))
            .copied()
    }
}

/// Verifies bearer tokens against a remote JWK set.
pub struct BearerVerifier {
    url: hyper::Uri,
    verifier: Verifier,
    client: Client<HttpsConnector<HttpConnector>, Empty<Bytes>>,
    cache: tokio::sync::Mutex<Cache>,
    revoked_url: hyper::Uri,
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
            verify::ed25519_key(&x).map(|d| (k.kid, d))
        })
        .collect())
}

/// True when `host` (a URL's) names this machine.
fn loopback(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The roots server certificates are checked against: the PEM bundle at `ca_file`,
/// else the system's.
fn roots(ca_file: Option<&Path>) -> Result<rustls::RootCertStore, String> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::CertificateDer;
    let from_env = std::env::var_os("SSL_CERT_FILE").map(std::path::PathBuf::from);
    let path = match ca_file {
        Some(p) => p.to_path_buf(),
        None => from_env
            .into_iter()
            .chain(SYSTEM_BUNDLES.iter().map(std::path::PathBuf::from))
            .find(|p| p.is_file())
            .ok_or("no system CA bundle found; set RM_INGEST_JWKS_CA_FILE")?,
    };
    let mut roots = rustls::RootCertStore::empty();
    let certs = CertificateDer::pem_file_iter(&path)
        .map_err(|e| format!("RM_INGEST_JWKS_CA_FILE {}: {e}", path.display()))?;
    for cert in certs {
        let cert = cert.map_err(|e| format!("{}: {e}", path.display()))?;
        roots
            .add(cert)
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    if roots.is_empty() {
        return Err(format!("{} holds no certificate", path.display()));
    }
    Ok(roots)
}

impl BearerVerifier {
    /// A verifier of tokens from `issuer` for `audience`, keys at `url` (https, or
    /// http on loopback), server certificates checked against `ca_file` (PEM) or the
    /// system's bundle.
    pub fn new(
        url: &str,
        issuer: &str,
        audience: &str,
        ca_file: Option<&Path>,
    ) -> Result<Self, String> {
        let uri: hyper::Uri = url
            .parse()
            .map_err(|e| format!("RM_INGEST_JWKS_URL '{url}' is not a URL: {e}"))?;
        let host = uri.host().unwrap_or("");
        let roots = match uri.scheme_str() {
            Some("https") => roots(ca_file)?,
            Some("http") if loopback(host) => rustls::RootCertStore::empty(),
            _ => {
                return Err(format!(
                    "RM_INGEST_JWKS_URL '{url}' must be an https:// URL (http:// only on loopback): whoever can change the key set mints tokens"
                ))
            }
        };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        // An https set is never fetched in clear (the removed clients' list beside it
        // neither); http is the loopback case only.
        let builder = hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(tls);
        let builder = if uri.scheme_str() == Some("https") {
            builder.https_only()
        } else {
            builder.https_or_http()
        };
        let connector = builder.enable_http1().build();
        // The api publishes removed clients beside its key set.
        let revoked_url = match url.strip_suffix("jwks.json") {
            Some(base) => format!("{base}revoked-clients.json"),
            None => format!(
                "{}://{}/.well-known/revoked-clients.json",
                uri.scheme_str().unwrap_or("https"),
                uri.authority().map_or("", |a| a.as_str())
            ),
        }
        .parse()
        .map_err(|e| format!("RM_INGEST_JWKS_URL '{url}': {e}"))?;
        Ok(Self {
            revoked_url,
            revoked: tokio::sync::Mutex::new(Revoked::default()),
            url: uri,
            verifier: Verifier::new(issuer, audience),
            client: Client::builder(TokioExecutor::new()).build(connector),
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

    /// The api's list of removed clients, reread every [`REVOCATIONS_EVERY`]. A
    /// list that cannot be read keeps the last one, with a warning, until
    /// [`REVOCATIONS_STALE_AFTER`] (see [`Self::check`]).
    async fn revoked(&self) -> tokio::sync::MutexGuard<'_, Revoked> {
        let mut r = self.revoked.lock().await;
        if r.fetched.is_none_or(|t| t.elapsed() > REVOCATIONS_EVERY) {
            let doc = self
                .get_doc(&self.revoked_url, "revoked clients list")
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
                    r.read = Some(Instant::now());
                }
                Err(e) => tracing::warn!(error = %e, "revoked clients: keeping the last list"),
            }
            r.fetched = Some(Instant::now());
        }
        r
    }

    /// The key set (a copy: no lock is held past this), fetched when it is stale or
    /// does not know `kid`.
    async fn keys(&self, kid: &str) -> Result<Vec<(Option<String>, DecodingKey)>, AuthError> {
        let mut c = self.cache.lock().await;
        let known = c.keys.iter().any(|(k, _)| k.as_deref() == Some(kid));
        let age = c.fetched.map(|t| t.elapsed());
        let stale = age.is_none_or(|a| a > CACHE_FOR);
        let unknown = !known && age.is_none_or(|a| a > REFETCH_AFTER);
        if stale || unknown {
            match self.fetch().await {
                Ok(keys) => {
                    c.keys = keys;
                    c.fetched = Some(Instant::now());
                }
                // A stale set still verifies until a fetch works again.
                Err(e) if c.fetched.is_none() => return Err(AuthError::KeysUnavailable(e)),
                Err(e) => tracing::warn!(error = %e, "jwks refresh failed; using the cached set"),
            }
        }
        Ok(c.keys.clone())
    }

    /// Lets a request in when its `Authorization` header holds a token that passes
    /// the one rule (`rm_auth::verify`) with `scope` or `admin`; who it is:
    /// an operator (`admin`) or the tenant of the token's namespace (`ns` claim).
    pub async fn check(
        &self,
        authorization: Option<&http::HeaderValue>,
        scope: Scope,
    ) -> Result<Viewer, AuthError> {
        let token = verify::bearer_token(authorization)?;
        // The header rule first: a token that cannot verify costs no fetch.
        let kid = verify::key_id(token)?;
        let keys = self.keys(&kid).await?;
        let revoked = self.revoked().await;
        if revoked
            .read
            .is_none_or(|t| t.elapsed() > REVOCATIONS_STALE_AFTER)
        {
            return Err(AuthError::KeysUnavailable(format!(
                "the api's list of removed clients could not be read for {} s; tokens are refused until it can",
                REVOCATIONS_STALE_AFTER.as_secs()
            )));
        }
        let fetched = Fetched {
            keys: &keys,
            revoked: &revoked.at,
        };
        let who = self.verifier.authorize(token, &fetched, &[scope])?;
        Ok(if who.admin {
            Viewer::Operator
        } else {
            Viewer::Tenant(who.namespace)
        })
    }
}

#[cfg(test)]
mod tests;
