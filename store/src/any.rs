//! The store a deployment uses, chosen by its settings ([`open`]), behind both traits.

use std::collections::HashSet;
use std::path::Path;

use crate::clickhouse::ClickHouseStore;
use crate::embedded::EmbeddedStore;
use crate::erase::EraseStore;
use crate::model::ads::AdReportRow;
use crate::model::ageing::Ageing;
use crate::model::attribution::{SalesReportRow, Touch, Windows};
use crate::model::campaigns::{CampaignSalesRow, CartAddsRow};
use crate::model::carts::lines::{CartLine, LinePlace};
use crate::model::carts::{CartCampaignRow, CartKey};
use crate::model::erasure::{Erased, Erasure};
use crate::model::funnel::{FunnelReportRow, ViewKey};
use crate::model::products::ProductReportRow;
use crate::model::retention::{Retired, Retirement};
use crate::model::tallies::sales::{OrderCredits, ShopperOrder};
use crate::model::tallies::{Place, PlaceTallies, SummedTally, TallyQuery};
use crate::write::{BatchWrite, EntitySets, FastMap, FastSet, PreparedWrite, WriteStore};
use crate::{Backend, ReportFilter, ReportStore, StoreConfig, StoreError};

/// The store a deployment uses, chosen by configuration. Cheap to clone.
#[derive(Clone)]
pub enum AnyStore {
    /// ClickHouse.
    ClickHouse(ClickHouseStore),
    /// The embedded store.
    Embedded(EmbeddedStore),
}

/// Opens the store the settings select: ClickHouse when a URL is set, else the
/// embedded store under `data_dir`.
pub async fn open(config: &StoreConfig, data_dir: &Path) -> Result<AnyStore, StoreError> {
    if config.clickhouse.url.is_some() {
        Ok(AnyStore::ClickHouse(
            ClickHouseStore::connect(&config.clickhouse).await?,
        ))
    } else {
        let path = EmbeddedStore::path(data_dir);
        let s = tokio::task::spawn_blocking(move || EmbeddedStore::open(&path))
            .await
            .map_err(|e| StoreError::Unavailable(e.to_string()))??;
        Ok(AnyStore::Embedded(s))
    }
}

impl AnyStore {
    /// Deletes every tally and counts the stored facts into them again, clicks with
    /// `window` (`retail-media rebuild`, after a rule or window change; the
    /// aggregators must be stopped).
    pub async fn rebuild_tallies(
        &self,
        window: crate::model::traffic::ClickWindow,
        w: &Windows,
    ) -> Result<(), StoreError> {
        match self {
            Self::ClickHouse(s) => s.rebuild_tallies(window, w).await,
            Self::Embedded(s) => s.rebuild_tallies(window, w).await,
        }
    }
}

macro_rules! dispatch {
    ($self:ident, $s:ident => $e:expr) => {
        match $self {
            AnyStore::ClickHouse($s) => $e,
            AnyStore::Embedded($s) => $e,
        }
    };
}

impl Backend for AnyStore {
    fn backend(&self) -> &'static str {
        dispatch!(self, s => s.backend())
    }
    fn readiness(&self) -> Result<(), String> {
        dispatch!(self, s => s.readiness())
    }
}

impl WriteStore for AnyStore {
    async fn load(
        &self,
        views: &FastSet<ViewKey>,
        carts: &FastSet<CartKey>,
        served: &FastSet<String>,
    ) -> Result<EntitySets, StoreError> {
        dispatch!(self, s => s.load(views, carts, served).await)
    }
    async fn load_tallies(
        &self,
        places: &FastSet<Place>,
    ) -> Result<FastMap<Place, PlaceTallies>, StoreError> {
        dispatch!(self, s => s.load_tallies(places).await)
    }
    async fn backfill_tallies(&self) -> Result<bool, StoreError> {
        dispatch!(self, s => s.backfill_tallies().await)
    }
    async fn known_orders(&self, ids: &HashSet<String>) -> Result<HashSet<String>, StoreError> {
        dispatch!(self, s => s.known_orders(ids).await)
    }
    async fn load_orders(
        &self,
        ids: &FastSet<String>,
    ) -> Result<FastMap<String, OrderCredits>, StoreError> {
        dispatch!(self, s => s.load_orders(ids).await)
    }
    async fn touches_of(
        &self,
        shoppers: &std::collections::BTreeSet<String>,
        from: i64,
        to: i64,
    ) -> Result<Vec<Touch>, StoreError> {
        dispatch!(self, s => s.touches_of(shoppers, from, to).await)
    }
    async fn orders_of(
        &self,
        shoppers: &std::collections::BTreeSet<String>,
        from: i64,
        to: i64,
    ) -> Result<Vec<ShopperOrder>, StoreError> {
        dispatch!(self, s => s.orders_of(shoppers, from, to).await)
    }
    async fn backfill_sales(&self, w: &Windows) -> Result<bool, StoreError> {
        dispatch!(self, s => s.backfill_sales(w).await)
    }

    async fn backfill_zones(&self) -> Result<bool, StoreError> {
        dispatch!(self, s => s.backfill_zones().await)
    }
    async fn compact_tallies_at(
        &self,
        now_ms: i64,
        margin_ms: i64,
    ) -> Result<Option<i32>, StoreError> {
        dispatch!(self, s => s.compact_tallies_at(now_ms, margin_ms).await)
    }
    async fn write(&self, batch: &BatchWrite) -> Result<(), StoreError> {
        dispatch!(self, s => s.write(batch).await)
    }
    fn prepare(&self, batch: BatchWrite) -> PreparedWrite {
        dispatch!(self, s => s.prepare(batch))
    }
    async fn write_prepared(&self, w: &PreparedWrite) -> Result<(), StoreError> {
        dispatch!(self, s => s.write_prepared(w).await)
    }
}

impl ReportStore for AnyStore {
    async fn funnel(&self, f: &ReportFilter) -> Result<Vec<FunnelReportRow>, StoreError> {
        dispatch!(self, s => s.funnel(f).await)
    }
    async fn products(&self, f: &ReportFilter) -> Result<Vec<ProductReportRow>, StoreError> {
        dispatch!(self, s => s.products(f).await)
    }
    async fn cart_lines(
        &self,
        f: &ReportFilter,
        from: Option<&LinePlace>,
        limit: usize,
    ) -> Result<Vec<CartLine>, StoreError> {
        dispatch!(self, s => s.cart_lines(f, from, limit).await)
    }
    async fn cart_campaigns(&self, f: &ReportFilter) -> Result<Vec<CartCampaignRow>, StoreError> {
        dispatch!(self, s => s.cart_campaigns(f).await)
    }
    async fn ads(&self, f: &ReportFilter) -> Result<Vec<AdReportRow>, StoreError> {
        dispatch!(self, s => s.ads(f).await)
    }
    async fn cart_adds(&self, f: &ReportFilter) -> Result<Vec<CartAddsRow>, StoreError> {
        dispatch!(self, s => s.cart_adds(f).await)
    }
    async fn campaign_sales(
        &self,
        f: &ReportFilter,
        w: &Windows,
    ) -> Result<Vec<CampaignSalesRow>, StoreError> {
        dispatch!(self, s => s.campaign_sales(f, w).await)
    }
    async fn sales(
        &self,
        f: &ReportFilter,
        w: &Windows,
    ) -> Result<Vec<SalesReportRow>, StoreError> {
        dispatch!(self, s => s.sales(f, w).await)
    }
    async fn tallies(&self, q: &TallyQuery) -> Result<Option<Vec<SummedTally>>, StoreError> {
        dispatch!(self, s => s.tallies(q).await)
    }
    async fn quarters_by_day(&self) -> Result<bool, StoreError> {
        dispatch!(self, s => s.quarters_by_day().await)
    }
}

impl EraseStore for AnyStore {
    async fn request_erasure(&self, e: &Erasure) -> Result<(), StoreError> {
        dispatch!(self, s => s.request_erasure(e).await)
    }
    async fn erasure(&self, request_id: &str) -> Result<Option<Erasure>, StoreError> {
        dispatch!(self, s => s.erasure(request_id).await)
    }
    async fn erasures_since(&self, since_ms: i64) -> Result<Vec<Erasure>, StoreError> {
        dispatch!(self, s => s.erasures_since(since_ms).await)
    }
    async fn erase(&self, e: &Erasure) -> Result<Erased, StoreError> {
        dispatch!(self, s => s.erase(e).await)
    }
    async fn finish_erasure(
        &self,
        e: &Erasure,
        done_ms: i64,
        erased: Erased,
    ) -> Result<(), StoreError> {
        dispatch!(self, s => s.finish_erasure(e, done_ms, erased).await)
    }
    async fn settle_erasures(&self, before_ms: i64) -> Result<usize, StoreError> {
        dispatch!(self, s => s.settle_erasures(before_ms).await)
    }
    async fn age(&self, a: &Ageing) -> Result<Erased, StoreError> {
        dispatch!(self, s => s.age(a).await)
    }
    async fn retire(&self, r: &Retirement) -> Result<Retired, StoreError> {
        dispatch!(self, s => s.retire(r).await)
    }
}
