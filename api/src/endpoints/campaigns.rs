//! Banner X campaigns: create, read, approve or reject (`POST
//! /v3/bannerx-campaigns/{id}:approve`), scope `campaigns`. A campaign belongs to the
//! namespace its `namespaceId` names, the caller's when left out; only an operator may
//! name another. Another namespace's campaign is answered as absent
//! (`crate::tenancy`). Each change tells the ads index to rebuild.

use chrono::Utc;
use http::Method;
use rm_service::Response;

use super::ok_json;
use crate::error::{parse_json, ApiError};
use crate::routes::{schema, Access, Call, Content, RequestBody, Route};
use crate::state::State;
use crate::tenancy::Caller;
use crate::Api;
use rm_ads::model::campaign::{valid_campaign_id, ApproveBody, CampaignBody};
use rm_auth::client::Scope;

/// The campaign routes (scope `campaigns`).
pub(crate) fn routes() -> Vec<Route> {
    let camp: &'static [Scope] = &[Scope::Campaigns];
    vec![
        Route {
            method: Method::POST,
            path: "/v3/bannerx-campaigns",
            op: "CreateCampaign",
            handler: |api, call| Box::pin(create_campaign(api, call)),
            access: Access::Bearer(camp),
            summary: "Create a banner X campaign (in the caller's namespace, or the one an operator names)",
            query: &[],
            request: RequestBody::Json(schema::<CampaignBody>),
            ok: 200,
            response: Content::Json(schema::<CampaignBody>),
            errors: &[400, 401, 403, 409],
        },
        Route {
            method: Method::GET,
            path: "/v3/bannerx-campaigns/{id}",
            op: "GetCampaign",
            handler: |api, call| Box::pin(get_campaign(api, call)),
            access: Access::Bearer(camp),
            summary: "Read a banner X campaign",
            query: &[],
            request: RequestBody::None,
            ok: 200,
            response: Content::Json(schema::<CampaignBody>),
            errors: &[401, 403, 404],
        },
        Route {
            method: Method::POST,
            path: "/v3/bannerx-campaigns/{id}:approve",
            op: "ApproveCampaign",
            handler: |api, call| Box::pin(approve_campaign(api, call)),
            access: Access::Bearer(camp),
            summary: "Approve or reject a banner X campaign",
            query: &[],
            request: RequestBody::Json(schema::<ApproveBody>),
            ok: 200,
            response: Content::Json(schema::<CampaignBody>),
            errors: &[400, 401, 403, 404],
        },
    ]
}

/// `POST /v3/bannerx-campaigns`.
async fn create_campaign(api: &Api, call: Call) -> Result<Response, ApiError> {
    let caller = call.caller()?.clone();
    let r = create(&api.state, &caller, &api.body(call.body).await?).await?;
    api.ads.campaigns_changed();
    ok_json(&r)
}

/// `GET /v3/bannerx-campaigns/{id}`.
async fn get_campaign(api: &Api, call: Call) -> Result<Response, ApiError> {
    ok_json(&get(&api.state, call.caller()?, &call.id).await?)
}

/// `POST /v3/bannerx-campaigns/{id}:approve`.
async fn approve_campaign(api: &Api, call: Call) -> Result<Response, ApiError> {
    let caller = call.caller()?.clone();
    let body = api.body(call.body).await?;
    let r = approve(&api.state, &caller, &call.id, &body).await?;
    api.ads.campaigns_changed();
    ok_json(&r)
}

/// `POST /v3/bannerx-campaigns`: 409 when the id is taken; the approval starts as
/// given (pending by default); `updateTime` is set now.
pub async fn create(state: &State, caller: &Caller, body: &[u8]) -> Result<CampaignBody, ApiError> {
    let mut b: CampaignBody = parse_json(body)?;
    let c = &mut b.banner_x_campaign;
    if c.id.is_empty() {
        c.id = uuid::Uuid::now_v7().simple().to_string();
    }
    c.namespace_id = caller.acting_in(Some(&c.namespace_id), "bannerXCampaign.namespaceId")?;
    c.update_time = Some(Utc::now());
    c.validate()?;
    if !state.create_campaign(c).await? {
        return Err(ApiError::AlreadyExists(format!(
            "a campaign with id '{}' exists",
            c.id
        )));
    }
    Ok(b)
}

fn not_found(id: &str) -> ApiError {
    ApiError::NotFound(format!("no banner X campaign has id '{id}'"))
}

/// The campaign `id` when the caller may see it.
async fn visible(
    state: &State,
    caller: &Caller,
    id: &str,
) -> Result<rm_ads::model::campaign::BannerXCampaign, ApiError> {
    if !valid_campaign_id(id) {
        return Err(not_found(id));
    }
    let c = state.campaign(id).await?.ok_or_else(|| not_found(id))?;
    caller.own(&c.namespace_id, || not_found(id))?;
    Ok(c)
}

/// `GET /v3/bannerx-campaigns/{id}`.
pub async fn get(state: &State, caller: &Caller, id: &str) -> Result<CampaignBody, ApiError> {
    Ok(CampaignBody {
        banner_x_campaign: visible(state, caller, id).await?,
    })
}

/// `POST /v3/bannerx-campaigns/{id}:approve`.
pub async fn approve(
    state: &State,
    caller: &Caller,
    id: &str,
    body: &[u8],
) -> Result<CampaignBody, ApiError> {
    let b: ApproveBody = parse_json(body)?;
    let mut c = visible(state, caller, id).await?;
    c.approve(b.approval, Utc::now())?;
    state.put_campaign(&c).await?;
    Ok(CampaignBody {
        banner_x_campaign: c,
    })
}
