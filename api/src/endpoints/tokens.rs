//! Tokens: `POST /v1/oauth2/token`, the OAuth 2.0 client-credentials grant (RFC 6749
//! 4.4) with HTTP Basic client authentication (2.3.1); the key set that verifies the
//! tokens (`GET /.well-known/jwks.json`); and the list of removed clients that
//! verifiers outside the api read (`GET /.well-known/revoked-clients.json`). The
//! rules (signing, verifying, secrets, limits) are `rm_auth`'s; this module is the
//! endpoint: its rows, the grant, and the body types it writes.
//!
//!
//! | condition | status | body |
//! |---|---|---|
//! | issued | 200 | `{access_token, expires_in, token_type: "Bearer"}` (+ `scope`) |
//! | content type not `application/x-www-form-urlencoded` | 400 | `invalid_request` |
//! | body not a form, a parameter repeated, `grant_type` missing | 400 | `invalid_request` |
//! | credentials both in the header and the body | 400 | `invalid_request` |
//! | `grant_type` other than `client_credentials` | 400 | `unsupported_grant_type` |
//! | `scope` asks for more than the client holds | 400 | `invalid_scope` |
//! | no or malformed Basic header, unknown client, wrong secret | 401 + `WWW-Authenticate: Basic` | `invalid_client` |
//! | too many failures for this client id from this address, or from this address, within a minute; unknown client ids beyond the global budget | 429 + `Retry-After` | `slow_down` |
//! | the queue of secret checks is full, or the client directory is down | 503 + `Retry-After` | `temporarily_unavailable` |
//!
//! Unrecognised parameters are ignored (RFC 6749 3.2). Every answer carries
//! `Cache-Control: no-store` and `Pragma: no-cache`. The optional `scope` parameter
//! narrows the token to a subset of the client's scopes. The form and the Basic
//! credentials are decoded by `rm_schemas::percent` (`Rules::FORM`); error bodies are
//! built by `ApiError::OAuth` (`crate::error`). The limits (`rm_auth::limiter`) are
//! keyed by the connection's source address, so failures from elsewhere never refuse
//! a partner's own address. While the global budget of unknown ids is spent, an
//! unknown id gets 429 where a known one would get 401: client ids are not secrets
//! (RFC 6749 2.2), and each such answer counts against the asking address.

use std::borrow::Cow;
use std::collections::HashSet;
use std::net::IpAddr;
use std::time::Instant;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use rm_auth::hash_queue::{party, Busy};
use rm_auth::limiter::Refused;
use rm_auth::{Auth, Scope};
use rm_schemas::percent::{self, Rules};
use rm_service::{response, Response};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::ok_json;
use crate::auth::peer_ip;
pub use crate::error::TokenError;
use crate::metrics;
use crate::routes::{schema, Access, Call, Content, RequestBody, Route};
use crate::state::State;
use crate::{Api, ApiError};

/// The token endpoint's success body, as the grant writes it.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct TokenResponse {
    /// The JWT.
    pub access_token: String,
    /// Seconds until it expires.
    pub expires_in: u64,
    /// Always `Bearer`.
    pub token_type: String,
    /// Scopes granted, space-separated.
    #[serde(default)]
    pub scope: String,
    /// The namespace the token acts in (the client's).
    pub namespace_id: String,
}

/// A JWK set.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Jwks {
    /// The keys (OKP, Ed25519).
    pub keys: Vec<Map<String, Value>>,
}

/// The token routes.
pub(crate) fn routes() -> Vec<Route> {
    vec![
        Route {
            method: Method::POST,
            path: "/v1/oauth2/token",
            op: "Token",
            handler: |api, call| Box::pin(token(api, call)),
            access: Access::ClientBasic,
            summary: "Request an access token (OAuth 2.0 client credentials, HTTP Basic client authentication)",
            query: &[],
            request: RequestBody::Form(form_schema),
            ok: 200,
            response: Content::Json(schema::<TokenResponse>),
            errors: &[400, 401, 429],
        },
        Route {
            method: Method::GET,
            path: "/.well-known/jwks.json",
            op: "Jwks",
            handler: |api, call| Box::pin(jwks(api, call)),
            access: Access::Public,
            summary: "Public keys that verify access tokens (JWK set)",
            query: &[],
            request: RequestBody::None,
            ok: 200,
            response: Content::Json(schema::<Jwks>),
            errors: &[],
        },
        Route {
            method: Method::GET,
            path: "/.well-known/revoked-clients.json",
            op: "RevokedClients",
            handler: |api, call| Box::pin(revoked_clients(api, call)),
            access: Access::Public,
            summary: "Removed clients (SHA-256 of each client id, and when), for verifiers of tokens outside the api",
            query: &[],
            request: RequestBody::None,
            ok: 200,
            response: Content::AnyJson,
            errors: &[],
        },
    ]
}

/// `POST /v1/oauth2/token`.
async fn token(api: &Api, call: Call) -> Result<Response, ApiError> {
    // A body that cannot be read is an empty form: the grant answers invalid_request.
    // One that does not arrive in time ends the request like on every route.
    let body = match api.body(call.body).await {
        Err(e @ ApiError::BodyTimeout(_)) => return Err(e),
        read => read.unwrap_or_default(),
    };
    let source = peer_ip(&call.parts.extensions);
    Ok(answer(&api.auth, &api.state, &call.parts.headers, &body, source).await)
}

/// `GET /.well-known/jwks.json`.
async fn jwks(api: &Api, _call: Call) -> Result<Response, ApiError> {
    ok_json(&api.auth.tokens.jwks())
}

/// `GET /.well-known/revoked-clients.json`: for edges verifying tokens themselves.
async fn revoked_clients(api: &Api, _call: Call) -> Result<Response, ApiError> {
    ok_json(&api.auth.revocations_document())
}

/// The route.
pub const PATH: &str = "/v1/oauth2/token";

fn err(status: StatusCode, error: &'static str, description: impl Into<String>) -> TokenError {
    TokenError {
        status,
        error,
        description: description.into(),
        retry_after: None,
    }
}

fn invalid_request(d: impl Into<String>) -> TokenError {
    err(StatusCode::BAD_REQUEST, "invalid_request", d)
}

fn invalid_client(d: impl Into<String>) -> TokenError {
    err(StatusCode::UNAUTHORIZED, "invalid_client", d)
}

fn slow_down(r: Refused) -> TokenError {
    let mut e = err(StatusCode::TOO_MANY_REQUESTS, "slow_down", r.describe());
    e.retry_after = Some(r.retry_after);
    e
}

fn busy(_: Busy) -> TokenError {
    let mut e = err(
        StatusCode::SERVICE_UNAVAILABLE,
        "temporarily_unavailable",
        "too many client authentications in progress; retry in 1 s",
    );
    e.retry_after = Some(1);
    e
}

/// Decodes form-encoded text ([`Rules::FORM`]: `+` is a space, `%XX` a byte; a
/// malformed escape or bytes that are not UTF-8 are `None`).
fn form_decode(s: &str) -> Option<String> {
    percent::decode(s, Rules::FORM).ok().map(Cow::into_owned)
}

/// The form parameters of the body; repeated or malformed ones are errors.
pub fn parse_form(body: &[u8]) -> Result<Vec<(String, String)>, TokenError> {
    let text =
        std::str::from_utf8(body).map_err(|_| invalid_request("the body is not UTF-8 text"))?;
    let mut params: Vec<(String, String)> = Vec::new();
    // Names seen so far: a repeat is found in one lookup, so a large form with many
    // parameters costs time linear in its size, before any authentication.
    let mut seen: HashSet<String> = HashSet::new();
    for (k, v) in percent::pairs(text) {
        let k = form_decode(k)
            .ok_or_else(|| invalid_request("a parameter name is not form-urlencoded"))?;
        let v = form_decode(v)
            .ok_or_else(|| invalid_request(format!("parameter '{k}' is not form-urlencoded")))?;
        if !seen.insert(k.clone()) {
            return Err(invalid_request(format!("parameter '{k}' is repeated")));
        }
        params.push((k, v));
    }
    Ok(params)
}

/// `client_id` and `client_secret` from `Authorization: Basic`.
pub fn basic_credentials(headers: &HeaderMap) -> Result<(String, String), TokenError> {
    let v = headers
        .get(header::AUTHORIZATION)
        .ok_or_else(|| invalid_client("client authentication (HTTP Basic) is required"))?
        .to_str()
        .map_err(|_| invalid_client("malformed Authorization header"))?;
    let b64 = v
        .split_once(' ')
        .filter(|(s, _)| s.eq_ignore_ascii_case("basic"))
        .map(|(_, c)| c.trim())
        .ok_or_else(|| invalid_client("the Authorization scheme must be Basic"))?;
    let raw = STANDARD
        .decode(b64)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .ok_or_else(|| invalid_client("the Basic credentials are not base64 of id:secret"))?;
    let (id, secret) = raw
        .split_once(':')
        .ok_or_else(|| invalid_client("the Basic credentials are not id:secret"))?;
    let id = form_decode(id).ok_or_else(|| invalid_client("client_id is not form-urlencoded"))?;
    let secret = form_decode(secret)
        .ok_or_else(|| invalid_client("client_secret is not form-urlencoded"))?;
    if id.is_empty() {
        return Err(invalid_client("client_id is empty"));
    }
    Ok((id, secret))
}

fn is_form(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|m| {
            m.trim()
                .eq_ignore_ascii_case("application/x-www-form-urlencoded")
        })
}

/// Answers a token request that came from `source` ([`super::peer_ip`]).
pub async fn answer(
    auth: &Auth,
    state: &State,
    headers: &HeaderMap,
    body: &Bytes,
    source: IpAddr,
) -> Response {
    let (r, outcome) = match grant(auth, state, headers, body, source).await {
        Ok(ok) => (ok, "issued"),
        Err(e) => {
            let outcome = match e.error {
                "invalid_client" => "invalid_client",
                "unsupported_grant_type" => "unsupported_grant_type",
                "slow_down" => "rate_limited",
                "temporarily_unavailable" => "unavailable",
                _ => "invalid_request",
            };
            (ApiError::OAuth(e).response(), outcome)
        }
    };
    metrics::token_outcome(outcome);
    let mut r = r;
    let h = r.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(header::PRAGMA, HeaderValue::from_static("no-cache"));
    r
}

/// The form's OpenAPI schema.
pub fn form_schema() -> serde_json::Value {
    serde_json::json!({
        "type": "object",
        "required": ["grant_type"],
        "properties": {
            "grant_type": {"type": "string", "enum": ["client_credentials"]},
            "scope": {"type": "string"}
        }
    })
}

async fn grant(
    auth: &Auth,
    state: &State,
    headers: &HeaderMap,
    body: &Bytes,
    source: IpAddr,
) -> Result<Response, TokenError> {
    if !is_form(headers) {
        return Err(invalid_request(
            "Content-Type must be application/x-www-form-urlencoded",
        ));
    }
    let params = parse_form(body)?;
    let param = |name: &str| {
        params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    if param("client_secret").is_some() && headers.contains_key(header::AUTHORIZATION) {
        return Err(invalid_request(
            "client credentials in both the Authorization header and the body",
        ));
    }
    let grant_type = param("grant_type")
        .ok_or_else(|| invalid_request("grant_type is required (client_credentials)"))?;
    let (id, secret) = basic_credentials(headers)?;
    if grant_type != "client_credentials" {
        return Err(err(
            StatusCode::BAD_REQUEST,
            "unsupported_grant_type",
            format!("grant_type '{grant_type}' is not supported; use client_credentials"),
        ));
    }
    // A locked address or (client, address) pair costs no lookup and no hash.
    auth.limiter
        .check(Some(&id), source, Instant::now())
        .map_err(slow_down)?;
    let client = state.client(&id).await.map_err(|_| {
        let mut e = err(
            StatusCode::SERVICE_UNAVAILABLE,
            "temporarily_unavailable",
            "the client directory is unavailable",
        );
        e.retry_after = Some(1);
        e
    })?;
    let Some(client) = client else {
        // An unknown id spends the global budget; only with a unit of it does the
        // decoy hash run (so unknown and known ids take about as long).
        let now = Instant::now();
        if let Err(r) = auth.limiter.admit_unknown(now) {
            auth.limiter.failed(None, source, now);
            return Err(slow_down(r));
        }
        auth.check_secret(&[party::UNKNOWN], secret, None, false)
            .await
            .map_err(busy)?;
        auth.limiter.failed(None, source, Instant::now());
        return Err(invalid_client("unknown client or wrong secret"));
    };
    let priority = auth.limiter.recently_good(&id, source, Instant::now());
    let phc = Some(client.secret_hash.clone());
    let parties = [
        party::namespace(&client.namespace),
        party::client(&client.id),
    ];
    if !auth
        .check_secret(&[&parties[0], &parties[1]], secret, phc, priority)
        .await
        .map_err(busy)?
    {
        auth.limiter.failed(Some(&id), source, Instant::now());
        return Err(invalid_client("unknown client or wrong secret"));
    }
    auth.limiter.succeeded(&id, source, Instant::now());
    let scopes = match param("scope") {
        None => client.scopes.clone(),
        Some(asked) => {
            let asked = Scope::parse_list(asked)
                .map_err(|m| err(StatusCode::BAD_REQUEST, "invalid_scope", m))?;
            if let Some(extra) = asked.iter().find(|s| !client.scopes.contains(s)) {
                return Err(err(
                    StatusCode::BAD_REQUEST,
                    "invalid_scope",
                    format!("the client does not hold scope '{}'", extra.as_str()),
                ));
            }
            asked
        }
    };
    let token = auth
        .tokens
        .issue(&client.id, &client.namespace, &scopes)
        .map_err(|e| {
            tracing::error!(error = %e, "token signing failed");
            err(
                StatusCode::INTERNAL_SERVER_ERROR,
                "server_error",
                "the token could not be signed",
            )
        })?;
    let body = TokenResponse {
        access_token: token,
        expires_in: auth.tokens.ttl_secs(),
        token_type: "Bearer".to_owned(),
        scope: scopes
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join(" "),
        namespace_id: client.namespace.clone(),
    };
    let body = serde_json::to_vec(&body).map_err(|e| {
        tracing::error!(error = %e, "token answer not serialisable");
        err(
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            "the token could not be written",
        )
    })?;
    Ok(response::json(StatusCode::OK, body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn forms_decode_and_refuse_repeats() {
        assert_eq!(
            parse_form(b"grant_type=client_credentials&x=a+b%21").unwrap(),
            vec![
                ("grant_type".into(), "client_credentials".into()),
                ("x".into(), "a b!".into())
            ]
        );
        assert_eq!(parse_form(b"a=1&a=2").unwrap_err().error, "invalid_request");
        assert_eq!(parse_form(b"a=%zz").unwrap_err().error, "invalid_request");
        assert_eq!(parse_form(b"a=%ff").unwrap_err().error, "invalid_request");
    }

    /// A large form (100,000 distinct names, then a repeat of the first) is read in
    /// one pass and refused naming the repeated parameter.
    #[test]
    fn a_repeat_at_the_end_of_a_large_form_is_found() {
        let mut form: String = (0..100_000).map(|i| format!("p{i}=v&")).collect();
        form.push_str("p0=again");
        let e = parse_form(form.as_bytes()).unwrap_err();
        assert_eq!(e.error, "invalid_request");
        assert!(
            e.description.contains("'p0' is repeated"),
            "{}",
            e.description
        );
    }

    #[test]
    fn basic_credentials_are_form_decoded() {
        let mut h = HeaderMap::new();
        let enc = STANDARD.encode("my%3Aid:p%40ss+word");
        h.insert(
            header::AUTHORIZATION,
            format!("Basic {enc}").parse().unwrap(),
        );
        assert_eq!(
            basic_credentials(&h).unwrap(),
            ("my:id".to_owned(), "p@ss word".to_owned())
        );
        h.insert(header::AUTHORIZATION, "Basic !!!".parse().unwrap());
        assert_eq!(basic_credentials(&h).unwrap_err().error, "invalid_client");
        h.insert(header::AUTHORIZATION, "Bearer x".parse().unwrap());
        assert_eq!(basic_credentials(&h).unwrap_err().status, 401);
    }

    proptest! {
        #[test]
        fn form_parsing_never_panics(body in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = parse_form(&body);
        }

        #[test]
        fn form_parsing_inverts_percent_encoding(s in "\\PC{0,30}") {
            let enc: String = s.bytes().map(|b| format!("%{b:02X}")).collect();
            let params = parse_form(format!("k={enc}").as_bytes()).expect("decodes");
            prop_assert_eq!(params, vec![("k".to_owned(), s)]);
        }
    }
}
