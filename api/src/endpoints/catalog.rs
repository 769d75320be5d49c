//! The catalog the ads decide over: `POST /v1/products` (scope `campaigns`) adds or
//! replaces products, each in the namespace its `namespaceId` names (the caller's when
//! left out; only an operator may name another), and tells the ads index to rebuild.

use http::Method;
use rm_service::Response;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ok_json;
use crate::error::{parse_json, ApiError};
use crate::routes::{schema, Access, Call, Content, RequestBody, Route};
use crate::state::State;
use crate::tenancy::Caller;
use crate::Api;
use rm_ads::model::catalog::Product;
use rm_auth::client::Scope;

/// Most products in one upsert.
pub const MAX_PRODUCTS_PER_REQUEST: usize = 10_000;

/// `POST /v1/products` body.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProductsBody {
    /// Products to add or replace (at most 10,000 per request).
    pub products: Vec<Product>,
}

/// `POST /v1/products` answer.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct ProductsUpserted {
    /// How many products were written.
    pub upserted: u64,
}

/// The catalog route.
pub(crate) fn routes() -> Vec<Route> {
    vec![Route {
        method: Method::POST,
        path: "/v1/products",
        op: "UpsertProducts",
        handler: |api, call| Box::pin(upsert(api, call)),
        access: Access::Bearer(&[Scope::Campaigns]),
        summary: "Add or replace catalog products",
        query: &[],
        request: RequestBody::Json(schema::<ProductsBody>),
        ok: 200,
        response: Content::Json(schema::<ProductsUpserted>),
        errors: &[400, 401, 403],
    }]
}

/// `POST /v1/products`.
async fn upsert(api: &Api, call: Call) -> Result<Response, ApiError> {
    let caller = call.caller()?.clone();
    let r = upsert_products(&api.state, &caller, &api.body(call.body).await?).await?;
    api.ads.products_changed();
    ok_json(&r)
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
