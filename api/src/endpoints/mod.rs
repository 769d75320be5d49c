//! The api's endpoints, one module per resource: each holds its route rows (method,
//! path, access, documented bodies and statuses), its handlers and the body types they
//! serialise, side by side, so an endpoint is read and changed in one place and the
//! OpenAPI document (`crate::openapi`, built from these rows and types) cannot drift
//! from what the handler answers.
//!
//! | module | routes |
//! |---|---|
//! | [`tokens`] | `POST /v1/oauth2/token`, `GET /.well-known/jwks.json`, `GET /.well-known/revoked-clients.json` |
//! | [`segments`] | `POST /v1/segments`, `GET`/`PUT /v1/segments/{segment.id}` |
//! | [`campaigns`] | `POST /v3/bannerx-campaigns`, `GET /v3/bannerx-campaigns/{id}`, `POST /v3/bannerx-campaigns/{id}:approve` |
//! | [`catalog`] | `POST /v1/products` |
//! | [`ads`] | `POST /v1/ads/generate` |
//! | [`inspector`] | `GET /v1/debug/events` |
//! | [`orders`] | `POST /v1/orders` |
//! | [`shoppers`] | `DELETE /v1/shoppers/{trackingId}`, `GET /v1/shoppers/erasures/{requestId}` |
//! | [`admin`] | `/v1/admin/clients`, `/v1/admin/order-keys` (operators) |
//! | [`reports`] | `GET /v1/reports/*` (one row per [`crate::reports::ReportKind`]) |
//! | [`web`], [`sdk`] | the analyst page, `GET /openapi.json`, `GET /sdk/beacon.js` |
//!
//! A handler is `async fn(&Api, Call) -> Result<Response, ApiError>`: the router
//! (`crate::routes`) has checked the row's access rule; errors go back to it as
//! [`ApiError`], which turns them into responses in one place (`crate::error`).

use http::{header, HeaderValue, StatusCode};
use rm_service::{response, Response};
use serde::Serialize;

use crate::error::ApiError;
use crate::routes::Route;

pub mod admin;
pub mod ads;
pub mod campaigns;
pub mod catalog;
pub mod inspector;
pub mod orders;
pub mod reports;
pub mod sdk;
pub mod segments;
pub mod shoppers;
pub mod tokens;
pub mod web;

/// Every partner route (the ops routes `/healthz`, `/readyz`, `/metrics` are answered
/// before this table).
pub fn table() -> Vec<Route> {
    let mut t = Vec::new();
    t.extend(tokens::routes());
    t.extend(web::document_routes());
    t.extend(sdk::routes());
    t.extend(segments::routes());
    t.extend(campaigns::routes());
    t.extend(catalog::routes());
    t.extend(ads::routes());
    t.extend(inspector::routes());
    t.extend(orders::routes());
    t.extend(shoppers::routes());
    t.extend(admin::routes());
    t.extend(reports::routes());
    t.extend(web::routes());
    t
}

/// The strong entity tag of a served file's bytes, quoted: the first 128 bits of its
/// SHA-256 as 32 hex digits (`"<hex>"`), computed once per file by its caller.
pub(crate) fn strong_etag(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(bytes);
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("\"{hex}\"")
}

/// A 200 JSON answer.
pub(crate) fn ok_json<T: Serialize>(v: &T) -> Result<Response, ApiError> {
    json_status(StatusCode::OK, v)
}

/// A JSON answer with `status`; a 201 holds a secret shown once, so it is not stored
/// by caches (`Cache-Control: no-store`).
pub(crate) fn json_status<T: Serialize>(status: StatusCode, v: &T) -> Result<Response, ApiError> {
    let body = serde_json::to_vec(v).map_err(|e| ApiError::Internal(e.to_string()))?;
    let mut r = response::json(status, body);
    if status == StatusCode::CREATED {
        r.headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    Ok(r)
}
