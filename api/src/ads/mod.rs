//! `POST /v1/ads/generate` (scope `ads`): decide ads for a placement ([`index`]),
//! mint a realised ad id per ad (`rm_schemas::ad_id`), and build what a page or a
//! player needs: impression and click URLs on the edge, banner X fields, and for
//! video banners a VAST 4.0 `adm` with our tracking injected (`rm_vast`).
//!
//! The index is rebuilt in the background ([`AdsEngine::refresh`]): the campaign part
//! every `RM_API_ADS_REFRESH_SECS` and right after a campaign changes through this
//! instance; the product part when products change through this instance or every
//! [`PRODUCT_RELOAD_EVERY`] refreshes. Reading and decoding run on the blocking pool. Requests never wait for a rebuild.

pub mod candidates;
#[cfg(test)]
mod decide_proptests;
pub mod index;
pub mod request;
pub mod response;

use rm_store::model::traffic::ClickWindow;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use chrono::Utc;
use rm_store::{AnyStore, ReportFilter, ReportStore};

use crate::error::{parse_json, ApiError};
use crate::state::State;
use index::{AdsIndex, ProductIndex, Spend};
pub use request::AdsRequest;
pub use response::{AdsResponse, Serving};

/// Every how many refreshes the products are re-read even without a local change
/// (changes made through another api instance): 60 x the 5 s default = 5 minutes.
pub const PRODUCT_RELOAD_EVERY: u64 = 60;

/// Every how many refreshes the index is rebuilt even when campaigns and spend are
/// unchanged (campaign time windows open and close): 12 x 5 s = 1 minute.
pub const REBUILD_EVERY: u64 = 12;

/// What the last rebuild was made of.
struct Basis {
    digest: u64,
    campaigns: Arc<Vec<crate::model::campaign::BannerXCampaign>>,
    spend: HashMap<String, Spend>,
}

/// The live index and what rebuilds it.
pub struct AdsEngine {
    current: RwLock<Arc<AdsIndex>>,
    products_dirty: AtomicBool,
    campaigns_dirty: AtomicBool,
    refreshes: AtomicU64,
    basis: tokio::sync::Mutex<Option<Basis>>,
    /// The click window spend is counted with (the reports').
    click_window: ClickWindow,
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
            click_window: ClickWindow::default(),
        }
    }

    /// The engine counting spend with `window`, as the reports do.
    pub fn with_click_window(mut self, window: ClickWindow) -> AdsEngine {
        self.click_window = window;
        self
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

    /// Rebuilds the index from the state and the report store.
    pub async fn refresh(&self, state: &State, store: &AnyStore) -> Result<(), ApiError> {
        let n = self.refreshes.fetch_add(1, Ordering::AcqRel);
        let reload_products =
            self.products_dirty.swap(false, Ordering::AcqRel) || n % PRODUCT_RELOAD_EVERY == 0;
        self.campaigns_dirty.store(false, Ordering::Release);
        let products = if reload_products {
            let all = state.products().await?;
            tokio::task::spawn_blocking(move || Arc::new(ProductIndex::build(all)))
                .await
                .map_err(|e| ApiError::Internal(e.to_string()))?
        } else {
            Arc::clone(self.index().products())
        };
        // Campaigns are decoded, and the index rebuilt, only when something changed
        // (or every REBUILD_EVERY refreshes): a rebuild over 10k campaigns costs tens
        // of milliseconds of a core that requests need.
        let mut basis = self.basis.lock().await;
        let known = basis.as_ref().map(|b| b.digest);
        let (digest, fresh) = state.campaigns_if_changed(known).await?;
        // `fresh` is `None` only when the digest equals the basis's, so the basis is there.
        let campaigns = match fresh {
            Some(c) => Arc::new(c),
            None => basis
                .as_ref()
                .map(|b| Arc::clone(&b.campaigns))
                .unwrap_or_default(),
        };
        let spend = spend(store, &campaigns, self.click_window).await;
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
        .map_err(|e| ApiError::Internal(e.to_string()))?;
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(ix);
        Ok(())
    }
}

/// Spend per campaign with a spend limit: billable ad clicks (the ads report of
/// the store, narrowed to those campaigns) times the campaign's `maxBid`, today and
/// in all, exact, in the campaign's currency (`rm_schemas::money::Money::times`). A store that cannot answer yields no
/// spend (campaigns keep serving; the failure is logged).
pub async fn spend(
    store: &AnyStore,
    campaigns: &[crate::model::campaign::BannerXCampaign],
    click_window: ClickWindow,
) -> HashMap<String, Spend> {
    let limited: Vec<&crate::model::campaign::BannerXCampaign> = campaigns
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
    let narrow = ReportFilter {
        tenant: Some(rm_store::Tenant {
            namespace: String::new(),
            campaigns: Arc::new(limited.iter().map(|c| c.id.clone()).collect()),
        }),
        click_window,
        ..ReportFilter::default()
    };
    let rows = match store.ads(&narrow).await {
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

/// Answers `POST /v1/ads/generate` for a caller of namespace `ns`.
pub fn generate(
    engine: &AdsEngine,
    serving: &Serving,
    ns: &str,
    body: &[u8],
) -> Result<AdsResponse, ApiError> {
    let req: AdsRequest = parse_json(body)?;
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
