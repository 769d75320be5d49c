//! The product report (impressions, clicks, CTR), counted by the server per group.

use crate::clickhouse::error::ch;
use crate::clickhouse::query::Conds;
use crate::clickhouse::rows::{parse_status, ProductAgg, CLICK, IMPRESSION};
use crate::clickhouse::ClickHouseStore;
use crate::model::products::{ProductGroup, ProductReportRow};
use crate::model::status::AdIdStatus;
use crate::{ReportFilter, StoreError};

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
        // One fact per dedup key and action (exact whether or not copies were merged
        // away), with the best status of its copies; the row's status is the worst.
        let sql = format!(
            "SELECT campaign_id, ad_id, catalog_id, product_code, day, \
             countIf(action = '{IMPRESSION}'), countIf(action = '{CLICK}'), max(best_status) \
             FROM (SELECT campaign_id, ad_id, catalog_id, product_code, day, action, dedup_key, \
                   min(ad_id_status) AS best_status FROM product_facts{} \
                   GROUP BY campaign_id, ad_id, catalog_id, product_code, day, action, dedup_key) \
             GROUP BY campaign_id, ad_id, catalog_id, product_code, day \
             ORDER BY campaign_id, ad_id, catalog_id, product_code, day",
            w.clause()
        );
        let groups: Vec<ProductAgg> = w
            .bind(self.client().query(&sql))
            .fetch_all()
            .await
            .map_err(ch("product report"))?;
        let mut rows: Vec<(ProductGroup, u64, u64, AdIdStatus)> = groups
            .into_iter()
            .map(|g| {
                let group = ProductGroup {
                    campaign_id: g.campaign_id,
                    ad_id: g.ad_id,
                    catalog_id: g.catalog_id,
                    product_code: g.product_code,
                    day: g.day,
                };
                Ok((
                    group,
                    g.impressions,
                    g.clicks,
                    parse_status(g.ad_id_status)?,
                ))
            })
            .collect::<Result<_, StoreError>>()?;
        rows.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(rows
            .iter()
            .map(|(g, i, c, st)| ProductReportRow::new(g, *i, *c, *st))
            .collect())
    }
}
