//! The operator API (scope `admin`): OAuth clients and orders API keys managed on a
//! running api, in any namespace.
//!
//! | route | answer |
//! |---|---|
//! | `POST /v1/admin/clients` `{"clientId","namespaceId","scopes"}` | 201 `{"clientId","clientSecret","namespaceId","scopes"}`; 409 for a taken id |
//! | `GET /v1/admin/clients` | `{"clients":[{"clientId","namespaceId","scopes","created"}]}`, no secrets |
//! | `DELETE /v1/admin/clients/{clientId}` | `{}`; its tokens stop working (`crate::auth` revocation) |
//! | `POST /v1/admin/order-keys` `{"namespaceId"}` | 201 `{"keyId","apiKey","namespaceId"}` |
//! | `DELETE /v1/admin/order-keys/{keyId}` | `{}` |
//!
//! Secrets are generated here (32 random bytes, base64url), shown once in the 201,
//! and kept only as Argon2id hashes. Client ids and namespaces follow the one client
//! rule (`rm_auth::client`), as in the `clients` subcommand and the clients file.

use http::{Method, StatusCode};
use rm_auth::client::{self, ApiKey, Client, Scope};
use rm_auth::{secret, Auth};
use rm_service::Response;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{json_status, ok_json};
use crate::error::{parse_json, ApiError};
use crate::routes::{schema, Access, Call, Content, RequestBody, Route};
use crate::state::State;
use crate::Api;

/// The operator routes (scope `admin`).
pub(crate) fn routes() -> Vec<Route> {
    let admin: &'static [Scope] = &[Scope::Admin];
    vec![
        Route {
            method: Method::POST,
            path: "/v1/admin/clients",
            op: "CreateClient",
            handler: |api, call| Box::pin(post_client(api, call)),
            access: Access::Bearer(admin),
            summary: "Create an OAuth client in a namespace (operators); its secret is shown once",
            query: &[],
            request: RequestBody::Json(schema::<NewClient>),
            ok: 201,
            response: Content::Json(schema::<CreatedClient>),
            errors: &[400, 401, 403, 409],
        },
        Route {
            method: Method::GET,
            path: "/v1/admin/clients",
            op: "ListClients",
            handler: |api, call| Box::pin(get_clients(api, call)),
            access: Access::Bearer(admin),
            summary: "List OAuth clients, without secrets (operators)",
            query: &[],
            request: RequestBody::None,
            ok: 200,
            response: Content::Json(schema::<ClientList>),
            errors: &[401, 403],
        },
        Route {
            method: Method::DELETE,
            path: "/v1/admin/clients/{clientId}",
            op: "RemoveClient",
            handler: |api, call| Box::pin(delete_client(api, call)),
            access: Access::Bearer(admin),
            summary: "Remove an OAuth client; its tokens stop working within 10 s on every api instance (operators)",
            query: &[],
            request: RequestBody::None,
            ok: 200,
            response: Content::AnyJson,
            errors: &[401, 403, 404],
        },
        Route {
            method: Method::POST,
            path: "/v1/admin/order-keys",
            op: "CreateOrderKey",
            handler: |api, call| Box::pin(post_order_key(api, call)),
            access: Access::Bearer(admin),
            summary: "Create an orders API key for a namespace (operators); the key is shown once",
            query: &[],
            request: RequestBody::Json(schema::<NewOrderKey>),
            ok: 201,
            response: Content::Json(schema::<CreatedOrderKey>),
            errors: &[400, 401, 403],
        },
        Route {
            method: Method::DELETE,
            path: "/v1/admin/order-keys/{keyId}",
            op: "RemoveOrderKey",
            handler: |api, call| Box::pin(delete_order_key(api, call)),
            access: Access::Bearer(admin),
            summary: "Remove an orders API key (operators)",
            query: &[],
            request: RequestBody::None,
            ok: 200,
            response: Content::AnyJson,
            errors: &[401, 403, 404],
        },
    ]
}

/// `POST /v1/admin/clients`.
async fn post_client(api: &Api, call: Call) -> Result<Response, ApiError> {
    let body = api.body(call.body).await?;
    json_status(
        StatusCode::CREATED,
        &create_client(&api.state, &body).await?,
    )
}

/// `GET /v1/admin/clients`.
async fn get_clients(api: &Api, _call: Call) -> Result<Response, ApiError> {
    ok_json(&list_clients(&api.state).await?)
}

/// `DELETE /v1/admin/clients/{clientId}`.
async fn delete_client(api: &Api, call: Call) -> Result<Response, ApiError> {
    ok_json(&remove_client(&api.state, &api.auth, &call.id).await?)
}

/// `POST /v1/admin/order-keys`.
async fn post_order_key(api: &Api, call: Call) -> Result<Response, ApiError> {
    let body = api.body(call.body).await?;
    json_status(
        StatusCode::CREATED,
        &create_order_key(&api.state, &body).await?,
    )
}

/// `DELETE /v1/admin/order-keys/{keyId}`.
async fn delete_order_key(api: &Api, call: Call) -> Result<Response, ApiError> {
    ok_json(&remove_order_key(&api.state, &call.id).await?)
}

/// `POST /v1/admin/clients` body.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewClient {
    /// The `client_id`.
    pub client_id: String,
    /// Its namespace.
    pub namespace_id: String,
    /// Scopes its tokens may carry (`ads`, `segments`, `campaigns`, `reports`, `admin`).
    pub scopes: Vec<String>,
}

/// A client as created: the secret is shown this once.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreatedClient {
    /// The `client_id`.
    pub client_id: String,
    /// The secret (only its hash is kept).
    pub client_secret: String,
    /// Its namespace.
    pub namespace_id: String,
    /// Its scopes.
    pub scopes: Vec<Scope>,
}

/// A client as listed.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClientInfo {
    /// The `client_id`.
    pub client_id: String,
    /// Its namespace.
    pub namespace_id: String,
    /// Its scopes.
    pub scopes: Vec<Scope>,
    /// When it was created (RFC 3339).
    pub created: String,
}

/// `GET /v1/admin/clients` answer.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct ClientList {
    /// Every client, by id.
    pub clients: Vec<ClientInfo>,
}

/// `POST /v1/admin/order-keys` body.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewOrderKey {
    /// The namespace its orders go to.
    pub namespace_id: String,
}

/// An orders API key as created: the key is shown this once.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreatedOrderKey {
    /// Its id (for `DELETE /v1/admin/order-keys/{keyId}`).
    pub key_id: String,
    /// The key (only its hash is kept).
    pub api_key: String,
    /// Its namespace.
    pub namespace_id: String,
}

/// An empty JSON object, the answer of a removal.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Removed {}

/// The client rule's verdict on a namespace, as the body's `namespaceId`.
fn check_namespace(ns: &str) -> Result<(), ApiError> {
    client::check_namespace(ns).map_err(|e| ApiError::invalid("namespaceId", e.to_string()))
}

async fn hash(secret: String) -> Result<String, ApiError> {
    tokio::task::spawn_blocking(move || secret::hash(&secret))
        .await
        .map_err(|e| ApiError::Internal(format!("hashing: {e}")))
}

/// `POST /v1/admin/clients`.
pub async fn create_client(state: &State, body: &[u8]) -> Result<CreatedClient, ApiError> {
    let b: NewClient = parse_json(body)?;
    client::check_client_id(&b.client_id)
        .map_err(|e| ApiError::invalid("clientId", e.to_string()))?;
    check_namespace(&b.namespace_id)?;
    let scopes =
        Scope::parse_list(&b.scopes.join(" ")).map_err(|m| ApiError::invalid("scopes", m))?;
    if scopes.is_empty() {
        return Err(ApiError::invalid("scopes", "at least one scope"));
    }
    let client_secret = secret::generate();
    let client = Client {
        id: b.client_id,
        namespace: b.namespace_id,
        secret_hash: hash(client_secret.clone()).await?,
        scopes,
        created: chrono::Utc::now().to_rfc3339(),
    };
    if !state.create_client(&client).await? {
        return Err(ApiError::AlreadyExists(format!(
            "a client with id '{}' exists",
            client.id
        )));
    }
    tracing::info!(client = %client.id, namespace = %client.namespace, "client created");
    Ok(CreatedClient {
        client_id: client.id,
        client_secret,
        namespace_id: client.namespace,
        scopes: client.scopes,
    })
}

/// `GET /v1/admin/clients`.
pub async fn list_clients(state: &State) -> Result<ClientList, ApiError> {
    let mut clients: Vec<ClientInfo> = state
        .clients()
        .await?
        .into_iter()
        .map(|c| ClientInfo {
            client_id: c.id,
            namespace_id: c.namespace,
            scopes: c.scopes,
            created: c.created,
        })
        .collect();
    clients.sort_by(|a, b| a.client_id.cmp(&b.client_id));
    Ok(ClientList { clients })
}

/// `DELETE /v1/admin/clients/{clientId}`: removes it and revokes its tokens.
pub async fn remove_client(state: &State, auth: &Auth, id: &str) -> Result<Removed, ApiError> {
    let now = chrono::Utc::now().timestamp();
    // Revoked first: a failure in between leaves tokens refused, never a removed
    // client's tokens working.
    if state.client(id).await?.is_none() {
        return Err(ApiError::NotFound(format!("no client has id '{id}'")));
    }
    state.put_revocation(id, now).await?;
    auth.revoke(id, now);
    state.remove_client(id).await?;
    tracing::info!(client = %id, "client removed; its tokens are revoked");
    Ok(Removed {})
}

/// `POST /v1/admin/order-keys`.
pub async fn create_order_key(state: &State, body: &[u8]) -> Result<CreatedOrderKey, ApiError> {
    let b: NewOrderKey = parse_json(body)?;
    check_namespace(&b.namespace_id)?;
    let key_id = format!("ok-{}", uuid::Uuid::now_v7().simple());
    let api_key = format!("rmk_{}", secret::generate());
    let key = ApiKey {
        name: key_id.clone(),
        key_id: key_id.clone(),
        namespace: b.namespace_id,
        lookup: secret::lookup_digest(&api_key),
        key_hash: hash(api_key.clone()).await?,
        created: chrono::Utc::now().to_rfc3339(),
    };
    state.put_api_key(&key).await?;
    tracing::info!(key = %key_id, namespace = %key.namespace, "orders key created");
    Ok(CreatedOrderKey {
        key_id,
        api_key,
        namespace_id: key.namespace,
    })
}

/// `DELETE /v1/admin/order-keys/{keyId}`.
pub async fn remove_order_key(state: &State, key_id: &str) -> Result<Removed, ApiError> {
    if !state.remove_api_key_id(key_id).await? {
        return Err(ApiError::NotFound(format!(
            "no orders key has id '{key_id}'"
        )));
    }
    Ok(Removed {})
}
