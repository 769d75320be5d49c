//! The cart reports but the carts report's pages ([`super::cart_pages`]): from the
//! newest derived cart rows, narrowed on the server and rolled up with the model's
//! pure functions.

use crate::clickhouse::error::ch;
use crate::clickhouse::query::Conds;
use crate::clickhouse::rows::CartEventCh;
use crate::clickhouse::ClickHouseStore;
use crate::model::campaigns::CartAddsRow;
use crate::model::carts::{self, CartCampaignRow, CartEventRow};
use crate::read::cart_campaign_rows;
use crate::{ReportFilter, StoreError};

impl ClickHouseStore {
    /// The newest derived rows of the carts matching `w`.
    pub(crate) async fn cart_rows(&self, w: Conds) -> Result<Vec<CartEventRow>, StoreError> {
        let fail = ch("cart report");
        let sql = format!("SELECT ?fields FROM cart_events FINAL{}", w.clause());
        let mut cursor = w
            .bind(self.client().query(&sql))
            .fetch::<CartEventCh<'_>>()
            .map_err(&fail)?;
        let mut rows = Vec::new();
        while let Some(r) = cursor.next().await.map_err(&fail)? {
            rows.push(r.to_row()?);
        }
        Ok(rows)
    }

    pub(crate) async fn cart_campaign_report(
        &self,
        f: &ReportFilter,
    ) -> Result<Vec<CartCampaignRow>, StoreError> {
        // Events of the filter's days (by their own time), of carts of the catalog.
        let mut w = Conds::default();
        w.cart_catalog(f);
        w.event_days(f);
        // A campaign's rows come only from carts with an event of that campaign in
        // those days; the ad filter does not apply to this report.
        if f.campaign_id.is_some() {
            let mut sub = Conds::default();
            sub.campaign(f);
            sub.event_days(f);
            sub.cart_catalog(f);
            w.carts_having(sub);
        }
        let rows = self.cart_rows(w).await?;
        Ok(cart_campaign_rows(&rows, f))
    }

    pub(crate) async fn cart_adds_report(
        &self,
        f: &ReportFilter,
    ) -> Result<Vec<CartAddsRow>, StoreError> {
        // The add rows of the filter's campaign, catalog and days (each row carries the
        // transition derived from its whole cart, so no other row is needed).
        let mut w = Conds::default();
        w.cart_catalog(f);
        w.campaign(f);
        w.event_days(f);
        w.sql.push("transition = 'add'".into());
        let rows = self.cart_rows(w).await?;
        Ok(carts::campaign_day_adds(&rows))
    }
}
