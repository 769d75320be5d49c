//! The product report (impressions, clicks, CTR): impressions counted by the server
//! per group, status and traffic class; clicks resolved one by one (one per dedup
//! key) and windowed in Rust by the same function as the embedded store's
//! ([`products::rows`]).

use crate::clickhouse::error::ch;
use crate::clickhouse::query::Conds;
use crate::clickhouse::rows::{
    parse_dedup, parse_status, parse_traffic, ClickCh, ProductAgg, CLICK, IMPRESSION,
};
use crate::clickhouse::ClickHouseStore;
use crate::model::products::{self, ProductGroup, ProductReportRow};
use crate::model::traffic::ClickFact;
use crate::{ReportFilter, StoreError};

/// One fact per dedup key and action with the best status and class of its copies
/// and the earliest receive time (0 only when every copy lacks one).
const DISTINCT: &str = "SELECT campaign_id, ad_id, catalog_id, product_code, day, action, \
     dedup_key, min(ad_id_status) AS status, min(traffic) AS traffic, max(shopper) AS shopper, \
     if(max(received_ms) = 0, 0, minIf(received_ms, received_ms > 0)) AS received_ms \
     FROM product_facts";

const DISTINCT_BY: &str =
    "GROUP BY campaign_id, ad_id, catalog_id, product_code, day, action, dedup_key";

impl ClickHouseStore {
    pub(crate) async fn product_report(
        &self,
        f: &ReportFilter,
    ) -> Result<Vec<ProductReportRow>, StoreError> {
        let conds = || {
            let mut w = Conds::default();
            w.campaign(f);
            w.str("ad_id = ?", &f.ad_id);
            w.str("catalog_id = ?", &f.catalog_id);
            w.int("day >= ?", f.from_day.map(i64::from));
            w.int("day <= ?", f.to_day.map(i64::from));
            w
        };
        let w = conds();
        let impressions_sql = format!(
            "SELECT campaign_id, ad_id, catalog_id, product_code, day, status, traffic, count() \
             FROM ({DISTINCT}{} {DISTINCT_BY}) WHERE action = '{IMPRESSION}' \
             GROUP BY campaign_id, ad_id, catalog_id, product_code, day, status, traffic",
            w.clause()
        );
        let impressions: Vec<ProductAgg> = w
            .bind(self.client().query(&impressions_sql))
            .fetch_all()
            .await
            .map_err(ch("product report"))?;
        let w = conds();
        let clicks_sql = format!(
            "SELECT campaign_id, ad_id, catalog_id, product_code, day, dedup_key, status, \
             traffic, shopper, received_ms FROM ({DISTINCT}{} {DISTINCT_BY}) \
             WHERE action = '{CLICK}'",
            w.clause()
        );
        let clicks: Vec<ClickCh> = w
            .bind(self.client().query(&clicks_sql))
            .fetch_all()
            .await
            .map_err(ch("product report clicks"))?;
        let group = |campaign_id, ad_id, catalog_id, product_code, day| ProductGroup {
            campaign_id,
            ad_id,
            catalog_id,
            product_code,
            day,
        };
        let impressions = impressions
            .into_iter()
            .map(|g| {
                Ok((
                    group(g.campaign_id, g.ad_id, g.catalog_id, g.product_code, g.day),
                    parse_status(g.status)?,
                    parse_traffic(g.traffic)?,
                    g.impressions,
                ))
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        let clicks = clicks
            .into_iter()
            .map(|c| {
                Ok(ClickFact {
                    group: group(c.campaign_id, c.ad_id, c.catalog_id, c.product_code, c.day),
                    shopper: c.shopper,
                    dedup_key: parse_dedup(&c.dedup_key)?,
                    status: parse_status(c.status)?,
                    traffic: parse_traffic(c.traffic)?,
                    received_ms: c.received_ms,
                })
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        Ok(products::rows(impressions, clicks, f.click_window))
    }
}
