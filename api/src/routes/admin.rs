//! The operator rows of the route table (scope `admin`): OAuth clients and orders
//! API keys on a running api (`crate::admin`), and the published list of removed
//! clients that token verifiers outside the api read.

use http::Method;

use super::{schema, Access, Content, RequestBody, Route};
use crate::handlers;
use rm_auth::client::Scope;

/// The operator routes.
pub(super) fn routes() -> Vec<Route> {
    let admin: &'static [Scope] = &[Scope::Admin];
    vec![
    Route {
        method: Method::GET,
        path: "/.well-known/revoked-clients.json",
        op: "RevokedClients",
        handler: |api, call| Box::pin(handlers::revoked_clients(api, call)),
        access: Access::Public,
        summary: "Removed clients (SHA-256 of each client id, and when), for verifiers of tokens outside the api",
        query: &[],
        request: RequestBody::None,
        ok: 200,
        response: Content::AnyJson,
        errors: &[],
    },
    Route {
        method: Method::POST,
        path: "/v1/admin/clients",
        op: "CreateClient",
        handler: |api, call| Box::pin(handlers::create_client(api, call)),
        access: Access::Bearer(admin),
        summary: "Create an OAuth client in a namespace (operators); its secret is shown once",
        query: &[],
        request: RequestBody::Json(schema::<crate::admin::NewClient>),
        ok: 201,
        response: Content::Json(schema::<crate::admin::CreatedClient>),
        errors: &[400, 401, 403, 409],
    },
    Route {
        method: Method::GET,
        path: "/v1/admin/clients",
        op: "ListClients",
        handler: |api, call| Box::pin(handlers::list_clients(api, call)),
        access: Access::Bearer(admin),
        summary: "List OAuth clients, without secrets (operators)",
        query: &[],
        request: RequestBody::None,
        ok: 200,
        response: Content::Json(schema::<crate::admin::ClientList>),
        errors: &[401, 403],
    },
    Route {
        method: Method::DELETE,
        path: "/v1/admin/clients/{clientId}",
        op: "RemoveClient",
        handler: |api, call| Box::pin(handlers::remove_client(api, call)),
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
        handler: |api, call| Box::pin(handlers::create_order_key(api, call)),
        access: Access::Bearer(admin),
        summary: "Create an orders API key for a namespace (operators); the key is shown once",
        query: &[],
        request: RequestBody::Json(schema::<crate::admin::NewOrderKey>),
        ok: 201,
        response: Content::Json(schema::<crate::admin::CreatedOrderKey>),
        errors: &[400, 401, 403],
    },
    Route {
        method: Method::DELETE,
        path: "/v1/admin/order-keys/{keyId}",
        op: "RemoveOrderKey",
        handler: |api, call| Box::pin(handlers::remove_order_key(api, call)),
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
