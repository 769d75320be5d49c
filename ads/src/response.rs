//! The `POST /v1/ads/generate` answer: `{ads: [...], banners: [...]}`.
//!
//! Every ad carries `partnerAdId` (the realised ad id: unique per served ad, signed,
//! naming its campaign and creative; the `adId` of its beacons), `campaignId`,
//! `expiresAt`, and `impressionUrl` / `clickUrl` on the edge for integrators who fire
//! them directly (`[TIMESTAMP]` is theirs to fill in, as a VAST player would).
//! Product ads add `catalogId`, `productCode`, `sellerId` and the product's name.
//! Banners add every `bannerXConfig` field, their `companionProducts` resolved
//! against the catalog (rule 11), and, when the campaign has video creatives, `adm`:
//! a VAST 4.0 document with one `Creative` per video, `Impression` and
//! `ClickTracking` on the edge, and our tracking injected (rules 4-7). A banner's
//! `ctaLink` travels as a signed click destination, so the edge redirects to it and
//! to nothing else.
//!
//! Pure apart from the clock (`expiresAt`): no I/O; a failure (an ad id that cannot
//! be minted, a VAST document that cannot be built) is an [`crate::AdsError`], never an
//! HTTP answer.

use chrono::{DateTime, Utc};
use rm_schemas::ad_id::AdIdKeys;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::index::{BannerPick, ProductPick};
use super::request::Decided;
use crate::model::campaign::{BannerXConfig, ProductKey};
use crate::AdsError;
use rm_vast::{self as vast, TrackingContext, VideoAd, VideoCreative};

/// What serving needs besides the decision.
#[derive(Debug, Clone)]
pub struct Serving {
    /// Signs realised ad ids and click destinations.
    pub keys: AdIdKeys,
    /// Base URL of the edge, e.g. `http://127.0.0.1:8080`.
    pub beacon_base: String,
    /// Seconds a served ad stays billable.
    pub ad_ttl_secs: i64,
}

/// A product ad.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProductAd {
    /// Realised ad id: send it back as `adId` on beacons.
    pub partner_ad_id: String,
    /// The campaign.
    pub campaign_id: String,
    /// Catalog.
    pub catalog_id: String,
    /// Product.
    pub product_code: String,
    /// Seller.
    pub seller_id: String,
    /// Product name.
    pub name: String,
    /// Position, 1 first.
    pub position: u32,
    /// When the ad stops being billable.
    pub expires_at: DateTime<Utc>,
    /// Fire when the ad is viewable.
    pub impression_url: String,
    /// Fire (or navigate to) on click.
    pub click_url: String,
}

/// A companion product of a banner (rule 11).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Companion {
    /// Catalog.
    pub catalog_id: String,
    /// Product.
    pub product_code: String,
    /// Seller.
    pub seller_id: String,
    /// Product name from the catalog.
    pub name: String,
}

/// A banner X ad.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BannerAd {
    /// Realised ad id.
    pub partner_ad_id: String,
    /// The campaign.
    pub campaign_id: String,
    /// Position, 1 first.
    pub position: u32,
    /// When the ad stops being billable.
    pub expires_at: DateTime<Utc>,
    /// The banner's configuration.
    pub banner_x_config: BannerXConfig,
    /// Companion products with catalog data.
    pub companion_products: Vec<Companion>,
    /// VAST 4.0 document for video banners.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub adm: Option<String>,
    /// Fire when the banner is viewable.
    pub impression_url: String,
    /// Click URL: records the click, then redirects to `ctaLink` when it has one.
    pub click_url: String,
}

/// The answer.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct AdsResponse {
    /// Product ads.
    pub ads: Vec<ProductAd>,
    /// Banner X ads.
    pub banners: Vec<BannerAd>,
}

/// Percent-encodes a query value (RFC 3986 unreserved kept).
pub fn enc(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for b in v.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The scope of click destination signatures.
pub const CLICK_DEST_SCOPE: &str = "click-dest";

/// The signature of a click destination for one ad id.
pub fn dest_signature(keys: &AdIdKeys, ad_id: &str, dest: &str) -> String {
    keys.sign_value(CLICK_DEST_SCOPE, &format!("{ad_id}\n{dest}"))
}

fn edge_url(s: &Serving, what: &str, ad_id: &str, d: &Decided, extra: &str) -> String {
    format!(
        "{}/v1/events/ad/{what}?adId={}&{}={}&timestamp=[TIMESTAMP]{extra}",
        s.beacon_base.trim_end_matches('/'),
        enc(ad_id),
        d.tracking_param,
        enc(&d.tracking_id)
    )
}

/// Builds the answer for the decided ads.
pub fn build(
    s: &Serving,
    d: &Decided,
    ads: &[ProductPick],
    banners: &[BannerPick],
) -> Result<AdsResponse, AdsError> {
    let now = Utc::now();
    let expires_at = now + chrono::Duration::seconds(s.ad_ttl_secs);
    let exp = expires_at.timestamp();
    // The ad id names the campaign's namespace, so every later reader (the edge's
    // inspector, the aggregator's attribution) knows it once the id verifies.
    let mint = |c: &crate::model::campaign::BannerXCampaign, creative: &str| {
        let ns = if c.namespace_id.is_empty() {
            rm_schemas::namespace::DEFAULT
        } else {
            &c.namespace_id
        };
        s.keys
            .mint_in(ns, &c.id, creative, exp)
            .ok_or_else(|| AdsError::MintAdId {
                campaign: c.id.clone(),
            })
    };
    let mut out = AdsResponse {
        ads: Vec::with_capacity(ads.len()),
        banners: Vec::with_capacity(banners.len()),
    };
    for (i, a) in ads.iter().enumerate() {
        let creative = rm_schemas::ad_id::product_creative(&a.product.product_code);
        let id = mint(&a.campaign, &creative)?;
        out.ads.push(ProductAd {
            impression_url: edge_url(s, "impression", &id, d, ""),
            click_url: edge_url(s, "click", &id, d, ""),
            partner_ad_id: id,
            campaign_id: a.campaign.id.clone(),
            catalog_id: a.product.catalog_id.clone(),
            product_code: a.product.product_code.clone(),
            seller_id: a.product.seller_id.clone(),
            name: a.product.name.clone(),
            position: i as u32 + 1,
            expires_at,
        });
    }
    for (i, b) in banners.iter().enumerate() {
        let c = &b.campaign;
        let cfg = &c.banner_x_config;
        let videos = cfg.videos();
        let creative = videos
            .first()
            .map_or("banner", |v| v.ad_id_value())
            .chars()
            .take(48)
            .collect::<String>();
        let id = mint(c, &creative)?;
        let impression_url = edge_url(s, "impression", &id, d, "");
        let dest = cfg.cta_link.trim();
        let click_url = if dest.starts_with("https://") || dest.starts_with("http://") {
            let sig = dest_signature(&s.keys, &id, dest);
            edge_url(
                s,
                "click",
                &id,
                d,
                &format!("&dest={}&sig={}", enc(dest), enc(&sig)),
            )
        } else {
            edge_url(s, "click", &id, d, "")
        };
        let adm = if videos.is_empty() {
            None
        } else {
            let ad = VideoAd {
                ad_id: id.clone(),
                ad_system: "retail-media".into(),
                title: if c.name.is_empty() {
                    c.id.clone()
                } else {
                    c.name.clone()
                },
                impression_urls: vec![impression_url.clone()],
                click_tracking_urls: vec![edge_url(s, "click", &id, d, "")],
                creatives: videos
                    .iter()
                    .map(|v| VideoCreative {
                        universal_ad_id: v.ad_id_value().to_owned(),
                        id_registry: "retail-media".into(),
                        media_url: v.media_url.clone(),
                        mime_type: if v.mime_type.is_empty() {
                            "video/mp4".into()
                        } else {
                            v.mime_type.clone()
                        },
                        width: if v.width == 0 { 1280 } else { v.width },
                        height: if v.height == 0 { 720 } else { v.height },
                        duration_secs: v.duration_seconds.max(1),
                        click_through: (!dest.is_empty()).then(|| dest.to_owned()),
                    })
                    .collect(),
            };
            let ctx = TrackingContext {
                beacon_url: format!(
                    "{}/v1/events/ad/interaction",
                    s.beacon_base.trim_end_matches('/')
                ),
                ad_id: id.clone(),
                tracking_param: d.tracking_param,
                tracking_id: d.tracking_id.clone(),
                cachebusting: true,
            };
            Some(vast::serve(&ad, &ctx).map_err(|source| AdsError::Vast {
                campaign: c.id.clone(),
                source,
            })?)
        };
        out.banners.push(BannerAd {
            partner_ad_id: id,
            campaign_id: c.id.clone(),
            position: i as u32 + 1,
            expires_at,
            banner_x_config: cfg.clone(),
            companion_products: cfg
                .companion_products
                .iter()
                .map(|k: &ProductKey| Companion {
                    catalog_id: k.catalog_id.clone(),
                    product_code: k.product_code.clone(),
                    seller_id: k.seller_id.clone(),
                    name: String::new(),
                })
                .collect(),
            adm,
            impression_url,
            click_url,
        });
    }
    Ok(out)
}
