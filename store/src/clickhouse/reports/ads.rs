//! The ad report: copies of each ad fact resolved on the server (one fact per dedup
//! key: the day of its earliest copy, the best status and class, the earliest receive
//! time); impressions counted there per group, clicks read one by one and windowed in
//! Rust by the same function as the embedded store's ([`ads::count`]).

use crate::clickhouse::error::ch;
use crate::clickhouse::query::Conds;
use crate::clickhouse::rows::{parse_dedup, parse_status, parse_traffic, AdAgg, ClickCh};
use crate::clickhouse::ClickHouseStore;
use crate::model::ads::{self, AdAction, AdCounts, AdGroup, AdReportRow, ResolvedAdFact};
use crate::model::traffic;
use crate::{ReportFilter, StoreError};

impl ClickHouseStore {
    pub(crate) async fn ad_report(&self, f: &ReportFilter) -> Result<Vec<AdReportRow>, StoreError> {
        let counts: Vec<AdAgg> = self
            .resolved_query(
                f,
                "SELECT campaign_id, ad_id, first_day, best_status, best_traffic, count()",
                "impression",
                " GROUP BY campaign_id, ad_id, first_day, best_status, best_traffic",
            )
            .fetch_all()
            .await
            .map_err(ch("ad report"))?;
        let clicks: Vec<ClickCh> = self
            .resolved_query(
                f,
                "SELECT campaign_id, ad_id, '' AS catalog_id, '' AS product_code, first_day, \
                 dedup_key, best_status, best_traffic, shopper, first_received",
                "click",
                "",
            )
            .fetch_all()
            .await
            .map_err(ch("ad report clicks"))?;
        let mut groups: std::collections::BTreeMap<AdGroup, AdCounts> = Default::default();
        for c in counts {
            let status = parse_status(c.status)?;
            let why = traffic::reason(parse_traffic(c.traffic)?, status);
            let group = AdGroup {
                campaign_id: c.campaign_id,
                ad_id: c.ad_id,
                day: c.day,
            };
            groups
                .entry(group)
                .or_default()
                .add(AdAction::Impression, status, why, c.facts);
        }
        let clicks = clicks
            .into_iter()
            .map(|c| {
                Ok(ResolvedAdFact {
                    group: AdGroup {
                        campaign_id: c.campaign_id,
                        ad_id: c.ad_id,
                        day: c.day,
                    },
                    action: AdAction::Click,
                    status: parse_status(c.status)?,
                    traffic: parse_traffic(c.traffic)?,
                    dedup_key: parse_dedup(&c.dedup_key)?,
                    shopper: c.shopper,
                    received_ms: c.received_ms,
                })
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        ads::count(&mut groups, clicks, f.click_window);
        Ok(ads::rows(groups))
    }

    /// `select` over the resolved facts of `action` that the filter selects, then
    /// `tail`.
    fn resolved_query(
        &self,
        f: &ReportFilter,
        select: &str,
        action: &str,
        tail: &str,
    ) -> clickhouse::query::Query {
        // Campaign and ad are the same in every copy of a fact: filter the copies.
        let mut inner = Conds::default();
        inner.campaign(f);
        inner.str("ad_id = ?", &f.ad_id);
        // The day is the fact's (its earliest copy's): filter after resolving.
        let mut outer = Conds::default();
        outer.sql.push(format!("action = '{action}'"));
        outer.int("first_day >= ?", f.from_day.map(i64::from));
        outer.int("first_day <= ?", f.to_day.map(i64::from));
        let sql = format!(
            "{select} FROM (SELECT campaign_id, ad_id, action, dedup_key, \
             argMin(day, time_ms) AS first_day, min(ad_id_status) AS best_status, \
             min(traffic) AS best_traffic, max(shopper) AS shopper, \
             if(max(received_ms) = 0, 0, minIf(received_ms, received_ms > 0)) AS first_received \
             FROM ad_facts{} GROUP BY campaign_id, ad_id, action, dedup_key){}{tail}",
            inner.clause(),
            outer.clause()
        );
        inner.args.extend(outer.args);
        inner.bind(self.client().query(&sql))
    }
}
