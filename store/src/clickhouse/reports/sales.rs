//! The sales reports: the order lines of the filter and the touches of their
//! shoppers, attributed in Rust.

use std::collections::BTreeSet;

use crate::clickhouse::error::ch;
use crate::clickhouse::query::Conds;
use crate::clickhouse::rows::OrderLineCh;
use crate::clickhouse::ClickHouseStore;
use crate::model::attribution::{self, OrderLine, SalesReportRow, Touch, Windows};
use crate::model::campaigns::CampaignSalesRow;
use crate::read::{campaign_sales_rows, sales_rows};
use crate::{ReportFilter, StoreError};

impl ClickHouseStore {
    /// The order lines of the filter's days and catalog and the touches of their
    /// shoppers in the span the windows allow.
    pub(crate) async fn sales_inputs(
        &self,
        f: &ReportFilter,
        w: &Windows,
    ) -> Result<(Vec<OrderLine>, Vec<Touch>), StoreError> {
        let fail = ch("sales report");
        let mut c = Conds::default();
        c.str("catalog_id = ?", &f.catalog_id);
        c.event_days(f);
        let sql = format!("SELECT ?fields FROM order_lines{}", c.clause());
        let rows: Vec<OrderLineCh> = c
            .bind(self.client().query(&sql))
            .fetch_all()
            .await
            .map_err(&fail)?;
        let lines: Vec<OrderLine> = rows
            .into_iter()
            .map(OrderLine::try_from)
            .collect::<Result<_, _>>()?;
        let Some((from, to)) = attribution::touch_range(&lines, w) else {
            return Ok((Vec::new(), Vec::new()));
        };
        let shoppers: BTreeSet<String> = lines.iter().flat_map(OrderLine::shoppers).collect();
        let touches = self.shoppers_touches(&shoppers, from, to).await?;
        Ok((lines, touches))
    }

    pub(crate) async fn sales_report(
        &self,
        f: &ReportFilter,
        w: &Windows,
    ) -> Result<Vec<SalesReportRow>, StoreError> {
        let (lines, touches) = self.sales_inputs(f, w).await?;
        // Copies of lines and touches (not merged yet) are dropped by the rollup.
        Ok(sales_rows(&lines, &touches, f, w))
    }

    pub(crate) async fn campaign_sales_report(
        &self,
        f: &ReportFilter,
        w: &Windows,
    ) -> Result<Vec<CampaignSalesRow>, StoreError> {
        let (lines, touches) = self.sales_inputs(f, w).await?;
        Ok(campaign_sales_rows(&lines, &touches, f, w))
    }
}
