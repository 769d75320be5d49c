//! One handler per route of the table ([`crate::routes`]), each an
//! `async fn(&Api, Call) -> Result<Response, ApiError>`: it takes what its operation
//! needs from the request (the captured id, the body within its bound, the query),
//! calls the operation and answers, JSON unless the route serves files or reports.
//! The router has checked the route's access rule before; errors go back to it as
//! [`ApiError`], which turns them into responses in one place ([`crate::error`]).

use http::{header, HeaderValue, StatusCode};
use rm_service::{response, Response};
use serde::Serialize;

use crate::routes::Call;
use crate::{admin, ads, auth, campaigns, orders, reports, sdk, segments, web, Api, ApiError};

fn ok_json<T: Serialize>(v: &T) -> Result<Response, ApiError> {
    json_status(StatusCode::OK, v)
}

fn json_status<T: Serialize>(status: StatusCode, v: &T) -> Result<Response, ApiError> {
    let body = serde_json::to_vec(v).map_err(|e| ApiError::Internal(e.to_string()))?;
    let mut r = response::json(status, body);
    if status == StatusCode::CREATED {
        // The answer holds a secret shown once.
        r.headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    Ok(r)
}

/// `POST /v1/oauth2/token`.
pub(crate) async fn token(api: &Api, call: Call) -> Result<Response, ApiError> {
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
pub(crate) async fn jwks(api: &Api, _call: Call) -> Result<Response, ApiError> {
    ok_json(&api.auth.tokens.jwks())
}

/// `GET /.well-known/revoked-clients.json`: for edges verifying tokens themselves.
pub(crate) async fn revoked_clients(api: &Api, _call: Call) -> Result<Response, ApiError> {
    ok_json(&api.auth.revocations_document())
}

/// `GET /openapi.json`: the document built at start.
pub(crate) async fn openapi(api: &Api, _call: Call) -> Result<Response, ApiError> {
    Ok(response::json(StatusCode::OK, api.openapi.clone()))
}

/// `GET /sdk/beacon.js`.
pub(crate) async fn sdk(_api: &Api, call: Call) -> Result<Response, ApiError> {
    Ok(sdk::answer(&call.parts.method, &call.parts.headers))
}

/// The analyst page and its assets (the path picks which).
pub(crate) async fn web(_api: &Api, call: Call) -> Result<Response, ApiError> {
    let p = &call.parts;
    Ok(web::answer(p.uri.path(), &p.method, &p.headers))
}

/// `POST /v1/segments`.
pub(crate) async fn create_segment(api: &Api, call: Call) -> Result<Response, ApiError> {
    let caller = call.caller()?.clone();
    let body = api.body(call.body).await?;
    ok_json(&segments::create(&api.state, &caller, &body).await?)
}

/// `GET /v1/segments/{segment.id}`.
pub(crate) async fn get_segment(api: &Api, call: Call) -> Result<Response, ApiError> {
    ok_json(&segments::get(&api.state, call.caller()?, &call.id).await?)
}

/// `PUT /v1/segments/{segment.id}`.
pub(crate) async fn update_segment(api: &Api, call: Call) -> Result<Response, ApiError> {
    let caller = call.caller()?.clone();
    let body = api.body(call.body).await?;
    ok_json(&segments::update(&api.state, &caller, &call.id, &body).await?)
}

/// `POST /v3/bannerx-campaigns`.
pub(crate) async fn create_campaign(api: &Api, call: Call) -> Result<Response, ApiError> {
    let caller = call.caller()?.clone();
    let r = campaigns::create(&api.state, &caller, &api.body(call.body).await?).await?;
    api.ads.campaigns_changed();
    ok_json(&r)
}

/// `GET /v3/bannerx-campaigns/{id}`.
pub(crate) async fn get_campaign(api: &Api, call: Call) -> Result<Response, ApiError> {
    ok_json(&campaigns::get(&api.state, call.caller()?, &call.id).await?)
}

/// `POST /v3/bannerx-campaigns/{id}:approve`.
pub(crate) async fn approve_campaign(api: &Api, call: Call) -> Result<Response, ApiError> {
    let caller = call.caller()?.clone();
    let body = api.body(call.body).await?;
    let r = campaigns::approve(&api.state, &caller, &call.id, &body).await?;
    api.ads.campaigns_changed();
    ok_json(&r)
}

/// `POST /v1/products`.
pub(crate) async fn upsert_products(api: &Api, call: Call) -> Result<Response, ApiError> {
    let caller = call.caller()?.clone();
    let r = campaigns::upsert_products(&api.state, &caller, &api.body(call.body).await?).await?;
    api.ads.products_changed();
    ok_json(&r)
}

/// `POST /v1/ads/generate`: decided among the caller's namespace's campaigns and
/// catalogs only.
pub(crate) async fn generate_ads(api: &Api, call: Call) -> Result<Response, ApiError> {
    let caller = call.caller()?.clone();
    let body = api.body(call.body).await?;
    ok_json(&ads::generate(
        &api.ads,
        &api.serving,
        &caller.namespace,
        &body,
    )?)
}

/// `POST /v1/admin/clients`.
pub(crate) async fn create_client(api: &Api, call: Call) -> Result<Response, ApiError> {
    let body = api.body(call.body).await?;
    json_status(
        StatusCode::CREATED,
        &admin::create_client(&api.state, &body).await?,
    )
}

/// `GET /v1/admin/clients`.
pub(crate) async fn list_clients(api: &Api, _call: Call) -> Result<Response, ApiError> {
    ok_json(&admin::list_clients(&api.state).await?)
}

/// `DELETE /v1/admin/clients/{clientId}`.
pub(crate) async fn remove_client(api: &Api, call: Call) -> Result<Response, ApiError> {
    ok_json(&admin::remove_client(&api.state, &api.auth, &call.id).await?)
}

/// `POST /v1/admin/order-keys`.
pub(crate) async fn create_order_key(api: &Api, call: Call) -> Result<Response, ApiError> {
    let body = api.body(call.body).await?;
    json_status(
        StatusCode::CREATED,
        &admin::create_order_key(&api.state, &body).await?,
    )
}

/// `DELETE /v1/admin/order-keys/{keyId}`.
pub(crate) async fn remove_order_key(api: &Api, call: Call) -> Result<Response, ApiError> {
    ok_json(&admin::remove_order_key(&api.state, &call.id).await?)
}

/// `GET /v1/debug/events?trackingId=`: the edge's inspector, when it runs here,
/// answered by the edge's own route logic (`crate::InspectorFn`) for the caller the
/// router verified.
pub(crate) async fn debug_events(api: &Api, call: Call) -> Result<Response, ApiError> {
    let inspector = api.inspector.as_ref().ok_or_else(|| {
        ApiError::NotFound(
            "the inspector lives on the edge: run `retail-media all`, or set RM_INGEST_JWKS_URL on the edge and ask it there"
                .into(),
        )
    })?;
    let query = call.parts.uri.query().unwrap_or("");
    Ok(inspector(query, &call.caller()?.viewer()))
}

/// `POST /v1/orders` (the router has checked the API key): in the key's namespace.
pub(crate) async fn orders(api: &Api, call: Call) -> Result<Response, ApiError> {
    let log = api.log.as_deref().ok_or_else(|| {
        ApiError::Unavailable("this api instance has no event log for orders".into())
    })?;
    let ns = call.caller()?.namespace.clone();
    let body = api.body(call.body).await?;
    ok_json(&orders::take(&api.state, log, &ns, &body).await?)
}

/// The report routes (the path picks which), for the caller's namespace (an
/// operator's: the one `namespaceId` names, or every namespace without it). Campaign
/// costs (ROAS) and bids (spend) come from the campaign records.
pub(crate) async fn report(api: &Api, call: Call) -> Result<Response, ApiError> {
    let caller = call.caller()?;
    let path = call.parts.uri.path();
    let query = call.parts.uri.query().unwrap_or("");
    let requested = reports::namespace_param(query)?;
    let campaigns = api.state.campaigns().await?;
    let tenant = if caller.admin && requested.is_none() {
        None
    } else {
        let namespace = caller.acting_in(requested.as_deref(), "namespaceId")?;
        let ids = campaigns
            .iter()
            .filter(|c| c.namespace_id == namespace)
            .map(|c| c.id.clone())
            .collect();
        Some(rm_store::Tenant {
            namespace,
            campaigns: std::sync::Arc::new(ids),
        })
    };
    let mut costs = reports::KnownCosts::default();
    if path == "/v1/reports/sales" || path == "/v1/reports/campaigns" {
        for c in &campaigns {
            if let Some(k) = c.known_cost() {
                costs.cost.insert(c.id.clone(), k);
            }
            if let Some(b) = c.max_bid() {
                costs.max_bid.insert(c.id.clone(), b);
            }
        }
    }
    let headers = &call.parts.headers;
    let (store, w) = (&*api.store, &api.windows);
    Ok(reports::answer_for(store, &costs, w, tenant, path, query, headers).await)
}
