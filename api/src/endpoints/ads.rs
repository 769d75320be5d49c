//! Ad generation: `POST /v1/ads/generate` (scope `ads`), decided among the caller's
//! namespace's campaigns and catalogs only; product ads and banner X ads, video ones
//! with a VAST 4.0 `adm` carrying our tracking. The decision itself is `rm_ads`, over
//! the inputs the api reads for it (`crate::ads`); this module decodes the request and
//! answers.

use http::Method;
use rm_service::Response;

use rm_ads::{AdsRequest, AdsResponse};

use super::ok_json;
use crate::error::parse_json;
use crate::routes::{schema, Access, Call, Content, RequestBody, Route};
use crate::{Api, ApiError};
use rm_auth::client::Scope;

/// The ads route.
pub(crate) fn routes() -> Vec<Route> {
    vec![Route {
        method: Method::POST,
        path: "/v1/ads/generate",
        op: "GenerateAds",
        handler: |api, call| Box::pin(generate_ads(api, call)),
        access: Access::Bearer(&[Scope::Ads]),
        summary: "Generate ads for a placement: product ads and banner X ads (video ones with a VAST 4.0 adm)",
        query: &[],
        request: RequestBody::Json(schema::<AdsRequest>),
        ok: 200,
        response: Content::Json(schema::<AdsResponse>),
        errors: &[400, 401, 403],
    }]
}

/// `POST /v1/ads/generate`.
async fn generate_ads(api: &Api, call: Call) -> Result<Response, ApiError> {
    let caller = call.caller()?.clone();
    let req: AdsRequest = parse_json(&api.body(call.body).await?)?;
    ok_json(&rm_ads::generate(
        &api.ads,
        &api.serving,
        &caller.namespace,
        req,
    )?)
}
