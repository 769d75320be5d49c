//! Ads decisioning (`POST /v1/ads/generate`, scope `ads`, served by the api): decide
//! ads for a placement ([`index`]), mint a realised ad id per ad
//! (`rm_schemas::ad_id`), and build what a page or a player needs: impression and
//! click URLs on the edge, banner X fields, and for video banners a VAST 4.0 `adm`
//! with our tracking injected (`rm_vast`). It owns the campaign and catalog model
//! ([`model`]) the decisions are made over.
//!
//! The index is rebuilt in the background ([`AdsEngine::refresh`]): the campaign part
//! every `RM_API_ADS_REFRESH_SECS` and right after a campaign changes through this
//! instance; the product part when products change through this instance or every
//! [`PRODUCT_RELOAD_EVERY`] refreshes. Reading and decoding run on the blocking pool. Requests never wait for a rebuild.
//!
//! What this crate must not do: read the api's state or the report store, decode
//! HTTP bodies or answer HTTP. Its inputs come through [`Inputs`], which the api
//! implements over its state and the report store; its errors are [`AdsError`],
//! which the api turns into its answers.

pub mod candidates;
#[cfg(test)]
mod decide_proptests;
mod error;
pub mod index;
pub mod model;
pub mod request;
pub mod response;

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use chrono::Utc;

pub use error::AdsError;
use index::{AdsIndex, ProductIndex, Spend};
use model::campaign::BannerXCampaign;
use model::catalog::Product;
pub use request::AdsRequest;
pub use response::{AdsResponse, Serving};

/// Billable clicks of one campaign on one day, as the ads report counts them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DayClicks {
    /// The campaign.
    pub campaign_id: String,
    /// The day (UTC), `YYYY-MM-DD`.
    pub day: String,
    /// Billable clicks.
    pub clicks: u64,
}

/// What the index is rebuilt from. The api implements it over its state (campaigns,
/// catalogs) and the report store (billable clicks, counted with the reports' click
/// window), so this crate reads neither.
pub trait Inputs: Sync {
    /// Why a read failed.
    type Error: std::error::Error + Send + Sync + 'static;

    /// Every product of every catalog.
    fn products(&self) -> impl Future<Output = Result<Vec<Product>, Self::Error>> + Send;

    /// The campaigns' digest, with the campaigns unless the digest equals `known`.
    fn campaigns_if_changed(
        &self,
        known: Option<u64>,
    ) -> impl Future<Output = Result<(u64, Option<Vec<BannerXCampaign>>), Self::Error>> + Send;

    /// Billable ad clicks per day of the campaigns `campaign_ids` (and only theirs).
    fn billable_clicks(
        &self,
        campaign_ids: Vec<String>,
    ) -> impl Future<Output = Result<Vec<DayClicks>, Self::Error>> + Send;
}

fn inputs_error(e: impl std::error::Error + Send + Sync + 'static) -> AdsError {
    AdsError::Inputs(Box::new(e))
}

/// Every how many refreshes the products are re-read even without a local change
/// (changes made through another api instance): 60 x the 5 s default = 5 minutes.
pub const PRODUCT_RELOAD_EVERY: u64 = 60;

/// Every how many refreshes the index is rebuilt even when campaigns and spend are
/// unchanged (campaign time windows open and close): 12 x 5 s = 1 minute.
pub const REBUILD_EVERY: u64 = 12;

/// What the last rebuild was made of.
struct Basis {
    digest: u64,
    campaigns: Arc<Vec<BannerXCampaign>>,
    spend: HashMap<String, Spend>,
}

/// The live index and what rebuilds it.
pub struct AdsEngine {
    current: RwLock<Arc<AdsIndex>>,
    products_dirty: AtomicBool,
    campaigns_dirty: AtomicBool,
    refreshes: AtomicU64,
    basis: tokio::sync::Mutex<Option<Basis>>,
}

impl Default for AdsEngine {
    fn default() -> Self {
        Self::new()
    }
}

impl AdsEngine {
    /// An engine with an empty index (nothing serves until the first refresh).
    pub fn new() -> AdsEngine {
        AdsEngine {
            current: RwLock::new(Arc::new(AdsIndex::build(
                Arc::new(ProductIndex::default()),
                &[],
                &HashMap::new(),
                Utc::now(),
            ))),
            products_dirty: AtomicBool::new(true),
            campaigns_dirty: AtomicBool::new(true),
            refreshes: AtomicU64::new(0),
            basis: tokio::sync::Mutex::new(None),
        }
    }

    /// The index requests read.
    pub fn index(&self) -> Arc<AdsIndex> {
        Arc::clone(&self.current.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Marks products changed (the next refresh re-reads them).
    pub fn products_changed(&self) {
        self.products_dirty.store(true, Ordering::Release);
        self.campaigns_dirty.store(true, Ordering::Release);
    }

    /// Marks campaigns changed.
    pub fn campaigns_changed(&self) {
        self.campaigns_dirty.store(true, Ordering::Release);
    }

    /// Whether a refresh has work beyond its periodic one.
    pub fn dirty(&self) -> bool {
        self.campaigns_dirty.load(Ordering::Acquire)
    }

    /// Rebuilds the index from `inputs` (the api's state and report store).
    pub async fn refresh<I: Inputs>(&self, inputs: &I) -> Result<(), AdsError> {
        let n = self.refreshes.fetch_add(1, Ordering::AcqRel);
        let reload_products =
            self.products_dirty.swap(false, Ordering::AcqRel) || n % PRODUCT_RELOAD_EVERY == 0;
        self.campaigns_dirty.store(false, Ordering::Release);
        let products = if reload_products {
            let all = inputs.products().await.map_err(inputs_error)?;
            tokio::task::spawn_blocking(move || Arc::new(ProductIndex::build(all)))
                .await
                .map_err(AdsError::Rebuild)?
        } else {
            Arc::clone(self.index().products())
        };
        // Campaigns are decoded, and the index rebuilt, only when something changed
        // (or every REBUILD_EVERY refreshes): a rebuild over 10k campaigns costs tens
        // of milliseconds of a core that requests need.
        let mut basis = self.basis.lock().await;
        let known = basis.as_ref().map(|b| b.digest);
        let (digest, fresh) = inputs
            .campaigns_if_changed(known)
            .await
            .map_err(inputs_error)?;
        // `fresh` is `None` only when the digest equals the basis's, so the basis is there.
        let campaigns = match fresh {
            Some(c) => Arc::new(c),
            None => basis
                .as_ref()
                .map(|b| Arc::clone(&b.campaigns))
                .unwrap_or_default(),
        };
        let spend = spend(inputs, &campaigns).await;
        let unchanged = basis
            .as_ref()
            .is_some_and(|b| b.digest == digest && b.spend == spend);
        if unchanged && !reload_products && n % REBUILD_EVERY != 0 {
            return Ok(());
        }
        *basis = Some(Basis {
            digest,
            campaigns: Arc::clone(&campaigns),
            spend: spend.clone(),
        });
        drop(basis);
        // Building over 10k campaigns takes tens of ms: off the request workers.
        let ix = tokio::task::spawn_blocking(move || {
            AdsIndex::build(products, &campaigns, &spend, Utc::now())
        })
        .await
        .map_err(AdsError::Rebuild)?;
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(ix);
        Ok(())
    }
}

/// Spend per campaign with a spend limit: billable ad clicks ([`Inputs::billable_clicks`],
/// the ads report of the store, narrowed to those campaigns) times the campaign's `maxBid`, today and
/// in all, exact, in the campaign's currency (`rm_schemas::money::Money::times`). A store that cannot answer yields no
/// spend (campaigns keep serving; the failure is logged).
pub async fn spend<I: Inputs>(inputs: &I, campaigns: &[BannerXCampaign]) -> HashMap<String, Spend> {
    let limited: Vec<&BannerXCampaign> = campaigns
        .iter()
        .filter(|c| {
            let l = &c.strategy.auction.spend_limit;
            !l.daily.is_empty() || !l.total.is_empty()
        })
        .collect();
    if limited.is_empty() {
        return HashMap::new();
    }
    // Only the limited campaigns' rows (ClickHouse narrows its query to them), not
    // the whole ads report.
    let narrow = limited.iter().map(|c| c.id.clone()).collect();
    let rows = match inputs.billable_clicks(narrow).await {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(error = %e, "ads: spend unknown, the report store did not answer");
            return HashMap::new();
        }
    };
    let today = Utc::now().format("%Y-%m-%d").to_string();
    let mut clicks: HashMap<&str, (u64, u64)> = HashMap::new();
    for r in &rows {
        let e = clicks.entry(r.campaign_id.as_str()).or_default();
        e.1 += r.clicks;
        if r.day == today {
            e.0 += r.clicks;
        }
    }
    limited
        .iter()
        .map(|c| {
            let (t, all) = clicks.get(c.id.as_str()).copied().unwrap_or_default();
            // Beyond an exact decimal (never a real spend) counts as over every limit.
            let times = |n: u64| {
                c.max_bid()
                    .map_or(Ok(rm_schemas::money::Decimal::ZERO), |b| {
                        b.times(n).map(|s| s.amount)
                    })
                    .unwrap_or(rm_schemas::money::Decimal::MAX)
            };
            (
                c.id.clone(),
                Spend {
                    today: times(t),
                    total: times(all),
                },
            )
        })
        .collect()
}

/// Answers `POST /v1/ads/generate` for a caller of namespace `ns` (the api decodes
/// the body).
pub fn generate(
    engine: &AdsEngine,
    serving: &Serving,
    ns: &str,
    req: AdsRequest,
) -> Result<AdsResponse, AdsError> {
    let decided = req.validate()?;
    let ix = engine.index();
    let (ads, banners) = ix.decide_in(ns, &decided);
    let mut out = response::build(serving, &decided, &ads, &banners)?;
    for b in &mut out.banners {
        for c in &mut b.companion_products {
            if let Some(p) = ix.product(ns, &c.catalog_id, &c.product_code) {
                c.name.clone_from(&p.name);
            }
        }
    }
    Ok(out)
}
