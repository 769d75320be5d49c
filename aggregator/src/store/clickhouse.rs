//! The ClickHouse report store (being written).

use std::collections::HashSet;

use super::{ReportFilter, Store, StoreError};
use crate::aggregate::carts::{CartCampaignRow, CartKey, CartStateRow};
use crate::aggregate::funnel::{FunnelReportRow, ViewKey};
use crate::aggregate::products::ProductReportRow;
use crate::batch::{BatchWrite, EntitySets};

/// ClickHouse connection settings.
#[derive(Debug, Clone, clap::Args)]
pub struct ClickHouseConfig {
    /// ClickHouse HTTP URL; when set, ClickHouse is the report store.
    #[arg(long = "clickhouse-url", env = "RM_CLICKHOUSE_URL")]
    pub url: Option<String>,
    /// Database holding the report tables (created at start).
    #[arg(long = "clickhouse-database", env = "RM_CLICKHOUSE_DATABASE", default_value = "retail_media")]
    pub database: String,
    /// User.
    #[arg(long = "clickhouse-user", env = "RM_CLICKHOUSE_USER", default_value = "default")]
    pub user: String,
    /// Password.
    #[arg(long = "clickhouse-password", env = "RM_CLICKHOUSE_PASSWORD", default_value = "")]
    pub password: String,
}

/// The ClickHouse store.
#[derive(Clone)]
pub struct ClickHouseStore {
    _config: ClickHouseConfig,
}

impl ClickHouseStore {
    /// Connects and applies migrations.
    pub async fn connect(config: &ClickHouseConfig) -> Result<Self, StoreError> {
        Err(StoreError::Unavailable(format!("clickhouse store not built yet ({:?})", config.url)))
    }
}

impl Store for ClickHouseStore {
    async fn load(&self, _v: &HashSet<ViewKey>, _c: &HashSet<CartKey>) -> Result<EntitySets, StoreError> {
        Err(StoreError::Unavailable("not built".into()))
    }
    async fn write(&self, _b: &BatchWrite) -> Result<(), StoreError> {
        Err(StoreError::Unavailable("not built".into()))
    }
    async fn funnel(&self, _f: &ReportFilter) -> Result<Vec<FunnelReportRow>, StoreError> {
        Err(StoreError::Unavailable("not built".into()))
    }
    async fn products(&self, _f: &ReportFilter) -> Result<Vec<ProductReportRow>, StoreError> {
        Err(StoreError::Unavailable("not built".into()))
    }
    async fn carts(&self, _f: &ReportFilter) -> Result<Vec<CartStateRow>, StoreError> {
        Err(StoreError::Unavailable("not built".into()))
    }
    async fn cart_campaigns(&self, _f: &ReportFilter) -> Result<Vec<CartCampaignRow>, StoreError> {
        Err(StoreError::Unavailable("not built".into()))
    }
    fn readiness(&self) -> Result<(), String> {
        Err("not built".into())
    }
}
