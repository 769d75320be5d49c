//! The product report (impressions, clicks, CTR), in one pass over `product_facts`:
//! the server makes one fact per dedup key and counts impressions per group, status
//! and traffic class, and returns clicks one by one; the click window and the
//! invalid reasons are decided in Rust by the same function as the embedded store's
//! ([`products::rows`]).

use crate::clickhouse::error::ch;
use crate::clickhouse::query::Conds;
use crate::clickhouse::rows::{
    fact_counts, parse_dedup, parse_status, parse_traffic, FactCountCh, IMPRESSION,
};
use crate::clickhouse::ClickHouseStore;
use crate::model::products::{self, ProductGroup, ProductReportRow};
use crate::model::traffic::{ClickFact, BEST_COPY_SQL};
use crate::{ReportFilter, StoreError};

const GROUP: &str = "campaign_id, ad_id, catalog_id, product_code";

impl ClickHouseStore {
    pub(crate) async fn product_report(
        &self,
        f: &ReportFilter,
    ) -> Result<Vec<ProductReportRow>, StoreError> {
        let mut w = Conds::default();
        w.campaign(f);
        w.str("ad_id = ?", &f.ad_id);
        w.str("catalog_id = ?", &f.catalog_id);
        w.int("day >= ?", f.from_day.map(i64::from));
        w.int("day <= ?", f.to_day.map(i64::from));
        let (select, group_by) =
            fact_counts(GROUP, "day", "best_status", "best_traffic", "received_ms");
        // One fact per dedup key and action, with the status and class of its best
        // copy (`BEST_COPY_SQL`) and the earliest receive time (0 only when every copy
        // lacks one).
        let sql = format!(
            "{select} FROM (SELECT {GROUP}, day, action, dedup_key, \
             toUInt8({BEST_COPY_SQL} % 16) AS best_status, \
             toUInt8(intDiv({BEST_COPY_SQL}, 16) % 16) AS best_traffic, max(shopper) AS shopper, \
             if(max(received_ms) = 0, 0, minIf(received_ms, received_ms > 0)) AS received_ms \
             FROM product_facts{} GROUP BY {GROUP}, day, action, dedup_key){group_by}",
            w.clause()
        );
        let counts: Vec<FactCountCh> = w
            .bind(self.client().query(&sql))
            .fetch_all()
            .await
            .map_err(ch("product report"))?;
        let mut impressions = Vec::new();
        let mut clicks = Vec::new();
        for c in counts {
            let group = ProductGroup {
                campaign_id: c.campaign_id,
                ad_id: c.ad_id,
                catalog_id: c.catalog_id,
                product_code: c.product_code,
                day: c.day,
            };
            let (status, traffic) = (parse_status(c.status)?, parse_traffic(c.traffic)?);
            if c.action == IMPRESSION {
                impressions.push((group, status, traffic, c.facts));
            } else {
                clicks.push(ClickFact {
                    group,
                    shopper: c.shopper,
                    dedup_key: parse_dedup(&c.dedup_key)?,
                    status,
                    traffic,
                    received_ms: c.received_ms,
                });
            }
        }
        Ok(products::rows(impressions, clicks, f.click_window))
    }
}
