//! The quick start's demo data set (`api/demo/demo.json`, compiled in), all in the
//! namespace [`NAMESPACE`] (`demo`): a client `demo-client`/`demo-secret` with the
//! partner scopes (ads, segments, campaigns, reports), an operator client
//! `demo-operator`/`demo-operator-secret` (scope `admin`: client and key management,
//! every namespace), the orders API key `demo-orders-key`, a catalog `demo-catalog` with categories, four campaigns (a
//! banner X video campaign with two video creatives, a banner, sponsored products,
//! one awaiting approval) and a segment.
//!
//! Loaded at start when `RM_API_DEMO` is on (by default only in `retail-media all`,
//! the quick start), without overwriting:
//! entries that exist (for instance a demo campaign someone approved or rejected)
//! are left as they are, and a demo client that was removed (its removal is recorded
//! as a revocation) is never added again. Turn it off, and remove the demo client and key with
//! `retail-media clients remove demo-client` / `retail-media keys remove demo-orders`,
//! before exposing the api.

use serde::Deserialize;

use crate::model::segment::Segment;
use crate::state::{State, StateError};
use rm_ads::model::campaign::BannerXCampaign;
use rm_ads::model::catalog::Product;
use rm_auth::client::{ApiKey, Client, Scope};
use rm_auth::secret;

/// The demo file.
pub const DEMO_JSON: &str = include_str!("../demo/demo.json");

/// The namespace of the demo data.
pub const NAMESPACE: &str = "demo";

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct DemoClient {
    id: String,
    secret: String,
    scopes: Vec<Scope>,
}

#[derive(Deserialize)]
struct DemoKey {
    name: String,
    key: String,
}

/// The demo data set.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Demo {
    clients: Vec<DemoClient>,
    api_keys: Vec<DemoKey>,
    /// Products.
    pub products: Vec<Product>,
    /// Campaigns.
    pub campaigns: Vec<BannerXCampaign>,
    segments: Vec<Segment>,
}

/// Parses the compiled-in demo file.
pub fn parse() -> Result<Demo, String> {
    serde_json::from_str(DEMO_JSON).map_err(|e| format!("api/demo/demo.json: {e}"))
}

/// Loads what is missing of the demo set into `state`; how many entries were added.
pub async fn load(state: &State) -> Result<usize, StateError> {
    let demo = parse().map_err(StateError::Backend)?;
    let mut added = 0;
    let now = chrono::Utc::now().to_rfc3339();
    // A demo client removed on purpose (its removal revoked its tokens) stays removed:
    // re-adding it at the next start would bring back a published secret, the
    // operator's among them.
    let removed: std::collections::HashSet<String> = state
        .revocations()
        .await?
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    for c in demo.clients {
        if removed.contains(&c.id) {
            tracing::info!(client = %c.id, "demo client was removed; not added again");
            continue;
        }
        if state.client(&c.id).await?.is_none() {
            let secret = c.secret.clone();
            let hash = tokio::task::spawn_blocking(move || secret::hash(&secret))
                .await
                .map_err(|e| StateError::Backend(e.to_string()))?;
            state
                .put_client(&Client {
                    id: c.id,
                    namespace: NAMESPACE.to_owned(),
                    secret_hash: hash,
                    scopes: c.scopes,
                    created: now.clone(),
                })
                .await?;
            added += 1;
        }
    }
    for k in demo.api_keys {
        let lookup = secret::lookup_digest(&k.key);
        if state.api_key(&lookup).await?.is_none() {
            let key = k.key.clone();
            let hash = tokio::task::spawn_blocking(move || secret::hash(&key))
                .await
                .map_err(|e| StateError::Backend(e.to_string()))?;
            state
                .put_api_key(&ApiKey {
                    key_id: k.name.clone(),
                    name: k.name,
                    namespace: NAMESPACE.to_owned(),
                    lookup,
                    key_hash: hash,
                    created: now.clone(),
                })
                .await?;
            added += 1;
        }
    }
    for mut p in demo.products {
        p.namespace_id = NAMESPACE.to_owned();
        if state
            .product(NAMESPACE, &p.catalog_id, &p.product_code)
            .await?
            .is_none()
        {
            state.put_product(&p).await?;
            added += 1;
        }
    }
    for mut c in demo.campaigns {
        c.update_time = Some(chrono::Utc::now());
        if state.create_campaign(&c).await? {
            added += 1;
        }
    }
    for mut s in demo.segments {
        s.namespace_id = NAMESPACE.to_owned();
        if state.create_segment(&s).await? {
            added += 1;
        }
    }
    Ok(added)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demo_data_is_valid() {
        let d = parse().unwrap();
        for c in &d.campaigns {
            c.validate().unwrap();
        }
        for (i, p) in d.products.iter().enumerate() {
            p.validate(&format!("products[{i}]")).unwrap();
        }
        let video = d.campaigns.iter().find(|c| c.id == "demo-video").unwrap();
        assert_eq!(video.banner_x_config.videos().len(), 2);
        // Companion products match the catalog (rule 11).
        for c in &d.campaigns {
            for k in &c.banner_x_config.companion_products {
                assert!(d
                    .products
                    .iter()
                    .any(|p| p.catalog_id == k.catalog_id && p.product_code == k.product_code));
            }
        }
    }

    #[tokio::test]
    async fn loading_twice_adds_nothing_the_second_time() {
        let dir = tempfile::tempdir().unwrap();
        let state = State::open_embedded(dir.path()).unwrap();
        assert!(load(&state).await.unwrap() > 10);
        assert_eq!(load(&state).await.unwrap(), 0);
        let c = state.client("demo-client").await.unwrap().unwrap();
        assert!(secret::verify("demo-secret", &c.secret_hash));
        assert_eq!(c.namespace, NAMESPACE);
        assert!(
            !c.scopes.contains(&Scope::Admin),
            "the partner client is no operator"
        );
        let op = state.client("demo-operator").await.unwrap().unwrap();
        assert_eq!(op.scopes, vec![Scope::Admin]);
        for c in state.campaigns().await.unwrap() {
            assert_eq!(c.namespace_id, NAMESPACE);
        }
        for p in state.products().await.unwrap() {
            assert_eq!(p.namespace_id, NAMESPACE);
        }
    }

    /// A removed demo client is not re-created at the next start (issue 23: the
    /// operator's published secret would come back with scope `admin`).
    #[tokio::test]
    async fn a_removed_demo_client_is_not_added_again() {
        let dir = tempfile::tempdir().unwrap();
        let state = State::open_embedded(dir.path()).unwrap();
        load(&state).await.unwrap();
        state
            .put_revocation("demo-operator", chrono::Utc::now().timestamp())
            .await
            .unwrap();
        state.remove_client("demo-operator").await.unwrap();
        assert_eq!(load(&state).await.unwrap(), 0);
        assert!(state.client("demo-operator").await.unwrap().is_none());
        assert!(state.client("demo-client").await.unwrap().is_some());
    }
}
