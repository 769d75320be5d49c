//! Tokens: `POST /v1/oauth2/token` (OAuth 2.0 client credentials with HTTP Basic
//! client authentication, RFC 6749 4.4; the grant itself is `crate::auth::token`),
//! the key set that verifies the tokens (`GET /.well-known/jwks.json`), and the list of
//! removed clients that verifiers outside the api read
//! (`GET /.well-known/revoked-clients.json`).

use http::Method;
use rm_service::Response;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::ok_json;
use crate::routes::{schema, Access, Call, Content, RequestBody, Route};
use crate::{auth, Api, ApiError};

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
            request: RequestBody::Form(auth::token::form_schema),
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
    let source = auth::peer_ip(&call.parts.extensions);
    Ok(auth::token::answer(&api.auth, &api.state, &call.parts.headers, &body, source).await)
}

/// `GET /.well-known/jwks.json`.
async fn jwks(api: &Api, _call: Call) -> Result<Response, ApiError> {
    ok_json(&api.auth.tokens.jwks())
}

/// `GET /.well-known/revoked-clients.json`: for edges verifying tokens themselves.
async fn revoked_clients(api: &Api, _call: Call) -> Result<Response, ApiError> {
    ok_json(&api.auth.revocations_document())
}
