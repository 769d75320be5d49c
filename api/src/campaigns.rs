//! Banner X campaign operations: create and read (scope `admin`), approve or reject
//! (`POST /v3/bannerx-campaigns/{id}:approve`, scope `campaigns`), and the catalog
//! upsert the ads decide over (`POST /v1/products`, scope `admin`).

use chrono::Utc;

use crate::error::{parse_json, ApiError};
use crate::model::campaign::{valid_campaign_id, ApproveBody, CampaignBody};
use crate::openapi::{ProductsBody, ProductsUpserted};
use crate::state::State;

/// Most products in one upsert.
pub const MAX_PRODUCTS_PER_REQUEST: usize = 10_000;

/// `POST /v3/bannerx-campaigns`: 409 when the id is taken; the approval starts as
/// given (pending by default); `updateTime` is set now.
pub async fn create(state: &State, body: &[u8]) -> Result<CampaignBody, ApiError> {
    let mut b: CampaignBody = parse_json(body)?;
    let c = &mut b.banner_x_campaign;
    if c.id.is_empty() {
        c.id = uuid::Uuid::now_v7().simple().to_string();
    }
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

/// `GET /v3/bannerx-campaigns/{id}`.
pub async fn get(state: &State, id: &str) -> Result<CampaignBody, ApiError> {
    if !valid_campaign_id(id) {
        return Err(not_found(id));
    }
    let c = state.campaign(id).await?.ok_or_else(|| not_found(id))?;
    Ok(CampaignBody {
        banner_x_campaign: c,
    })
}

/// `POST /v3/bannerx-campaigns/{id}:approve`.
pub async fn approve(state: &State, id: &str, body: &[u8]) -> Result<CampaignBody, ApiError> {
    let b: ApproveBody = parse_json(body)?;
    if !valid_campaign_id(id) {
        return Err(not_found(id));
    }
    let mut c = state.campaign(id).await?.ok_or_else(|| not_found(id))?;
    c.approve(b.approval, Utc::now())?;
    state.put_campaign(&c).await?;
    Ok(CampaignBody {
        banner_x_campaign: c,
    })
}

/// `POST /v1/products`.
pub async fn upsert_products(state: &State, body: &[u8]) -> Result<ProductsUpserted, ApiError> {
    let b: ProductsBody = parse_json(body)?;
    if b.products.len() > MAX_PRODUCTS_PER_REQUEST {
        return Err(ApiError::invalid(
            "products",
            format!("more than {MAX_PRODUCTS_PER_REQUEST} products in one request"),
        ));
    }
    for (i, p) in b.products.iter().enumerate() {
        p.validate(&format!("products[{i}]"))?;
    }
    state.put_products(&b.products).await?;
    Ok(ProductsUpserted {
        upserted: b.products.len() as u64,
    })
}
