//! The store's settings: which backend (ClickHouse when its URL is set) and the
//! attribution windows the sales reports read with. Read by every service that opens
//! the store (the aggregator writes, the api reads).

use crate::clickhouse::ClickHouseConfig;
use crate::model::attribution::{Windows, DEFAULT_CLICK_WINDOW_DAYS, DEFAULT_VIEW_WINDOW_DAYS};

/// The report store's settings.
#[derive(Debug, Clone, clap::Args)]
pub struct StoreConfig {
    /// Days before an order within which a click earns the sale (sales report).
    #[arg(
        id = "attribution_click_window_days",
        long = "attribution-click-window-days",
        env = "RM_ATTRIBUTION_CLICK_WINDOW_DAYS",
        default_value_t = DEFAULT_CLICK_WINDOW_DAYS
    )]
    pub attribution_click_window_days: i64,
    /// Days before an order within which an impression earns the sale, without a click.
    #[arg(
        id = "attribution_view_window_days",
        long = "attribution-view-window-days",
        env = "RM_ATTRIBUTION_VIEW_WINDOW_DAYS",
        default_value_t = DEFAULT_VIEW_WINDOW_DAYS
    )]
    pub attribution_view_window_days: i64,
    /// ClickHouse settings.
    #[command(flatten)]
    pub clickhouse: ClickHouseConfig,
}

impl StoreConfig {
    /// The attribution windows these settings describe (read by the sales reports).
    pub fn attribution(&self) -> Windows {
        Windows::days(
            self.attribution_click_window_days,
            self.attribution_view_window_days,
        )
    }
}
