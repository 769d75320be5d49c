//! The ad report, in one pass over `ad_facts`: the copies of each ad fact resolved on
//! the server (one fact per dedup key: the day of its earliest copy, the status and
//! class of its best copy, `traffic::BEST_COPY_SQL`, the earliest receive time), impressions counted there per group, clicks
//! returned one by one and windowed in Rust by the same function as the embedded
//! store's ([`ads::count`]).

use crate::clickhouse::error::ch;
use crate::clickhouse::query::Conds;
use crate::clickhouse::rows::{
    fact_counts, parse_dedup, parse_status, parse_traffic, FactCountCh, IMPRESSION,
};
use crate::clickhouse::ClickHouseStore;
use crate::model::ads::{self, AdAction, AdCounts, AdGroup, AdReportRow, ResolvedAdFact};
use crate::model::traffic::{self, BEST_COPY_SQL};
use crate::{ReportFilter, StoreError};

impl ClickHouseStore {
    pub(crate) async fn ad_report(&self, f: &ReportFilter) -> Result<Vec<AdReportRow>, StoreError> {
        // Campaign and ad are the same in every copy of a fact: filter the copies.
        let mut inner = Conds::default();
        inner.campaign(f);
        inner.str("ad_id = ?", &f.ad_id);
        // The day is the fact's (its earliest copy's): filter after resolving.
        let mut outer = Conds::default();
        outer.int("first_day >= ?", f.from_day.map(i64::from));
        outer.int("first_day <= ?", f.to_day.map(i64::from));
        let (select, group_by) = fact_counts(
            "campaign_id, ad_id, catalog_id, product_code",
            "first_day",
            "best_status",
            "best_traffic",
            "first_received",
        );
        let sql = format!(
            "{select} FROM (SELECT campaign_id, ad_id, '' AS catalog_id, '' AS product_code, \
             action, dedup_key, argMin(day, time_ms) AS first_day, \
             toUInt8({BEST_COPY_SQL} % 16) AS best_status, \
             toUInt8(intDiv({BEST_COPY_SQL}, 16) % 16) AS best_traffic, \
             max(shopper) AS shopper, \
             if(max(received_ms) = 0, 0, minIf(received_ms, received_ms > 0)) AS first_received \
             FROM ad_facts{} GROUP BY campaign_id, ad_id, action, dedup_key){}{group_by}",
            inner.clause(),
            outer.clause()
        );
        inner.args.extend(outer.args);
        let counts: Vec<FactCountCh> = inner
            .bind(self.client().query(&sql))
            .fetch_all()
            .await
            .map_err(ch("ad report"))?;
        let mut groups: std::collections::BTreeMap<AdGroup, AdCounts> = Default::default();
        let mut clicks = Vec::new();
        for c in counts {
            let group = AdGroup {
                campaign_id: c.campaign_id,
                ad_id: c.ad_id,
                day: c.day,
            };
            let (status, class) = (parse_status(c.status)?, parse_traffic(c.traffic)?);
            if c.action == IMPRESSION {
                let why = traffic::reason(class, status);
                groups
                    .entry(group)
                    .or_default()
                    .add(AdAction::Impression, status, why, c.facts);
            } else {
                clicks.push(ResolvedAdFact {
                    group,
                    action: AdAction::Click,
                    status,
                    traffic: class,
                    dedup_key: parse_dedup(&c.dedup_key)?,
                    shopper: c.shopper,
                    received_ms: c.received_ms,
                    time_ms: crate::model::tallies::Grain::Day.start_ms(c.day),
                });
            }
        }
        ads::count(&mut groups, clicks, f.click_window);
        Ok(ads::rows(groups))
    }
}
