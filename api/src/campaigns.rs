//! Banner X campaign operations: create, read, approve or reject (`POST
//! /v3/bannerx-campaigns/{id}:approve`), and the catalog upsert the ads decide over
//! (`POST /v1/products`), all scope `campaigns`. A campaign and a product belong to
//! the namespace their `namespaceId` names, the caller's when left out; only an
//! operator may name another. Another namespace's campaign is answered as absent
//! (`crate::tenancy`).

use chrono::Utc;

use crate::error::{parse_json, ApiError};
use crate::openapi::{ProductsBody, ProductsUpserted};
use crate::state::State;
use crate::tenancy::Caller;
use rm_ads::model::campaign::{valid_campaign_id, ApproveBody, CampaignBody};

/// Most products in one upsert.
pub const MAX_PRODUCTS_PER_REQUEST: usize = 10_000;

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

/// `POST /v1/products`: each product in its `namespaceId` (the caller's when left out).
pub async fn upsert_products(
    state: &State,
    caller: &Caller,
    body: &[u8],
) -> Result<ProductsUpserted, ApiError> {
    let mut b: ProductsBody = parse_json(body)?;
    if b.products.len() > MAX_PRODUCTS_PER_REQUEST {
        return Err(ApiError::invalid(
            "products",
            format!("more than {MAX_PRODUCTS_PER_REQUEST} products in one request"),
        ));
    }
    for (i, p) in b.products.iter_mut().enumerate() {
        let field = format!("products[{i}]");
        p.namespace_id =
            caller.acting_in(Some(&p.namespace_id), &format!("{field}.namespaceId"))?;
        p.validate(&field)?;
    }
    state.put_products(&b.products).await?;
    Ok(ProductsUpserted {
        upserted: b.products.len() as u64,
    })
}
