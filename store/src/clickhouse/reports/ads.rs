//! The ad report: copies of each ad fact resolved on the server, counted per group.

use crate::clickhouse::error::ch;
use crate::clickhouse::query::Conds;
use crate::clickhouse::rows::{corrupt, parse_status, AdAgg};
use crate::clickhouse::ClickHouseStore;
use crate::model::ads::{self, AdAction, AdCounts, AdGroup, AdReportRow};
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
        let sql = format!(
            "SELECT campaign_id, ad_id, first_day, action, best_status, count() FROM \
             (SELECT campaign_id, ad_id, action, dedup_key, \
              argMin(day, time_ms) AS first_day, min(ad_id_status) AS best_status \
              FROM ad_facts{} GROUP BY campaign_id, ad_id, action, dedup_key){} \
             GROUP BY campaign_id, ad_id, first_day, action, best_status",
            inner.clause(),
            outer.clause()
        );
        inner.args.extend(outer.args);
        let counts: Vec<AdAgg> = inner
            .bind(self.client().query(&sql))
            .fetch_all()
            .await
            .map_err(ch("ad report"))?;
        let mut groups: std::collections::BTreeMap<AdGroup, AdCounts> = Default::default();
        for c in counts {
            let action =
                AdAction::parse(&c.action).ok_or_else(|| corrupt("ad action", &c.action))?;
            let status = parse_status(c.status)?;
            let group = AdGroup {
                campaign_id: c.campaign_id,
                ad_id: c.ad_id,
                day: c.day,
            };
            groups
                .entry(group)
                .or_default()
                .add(action, status, c.facts);
        }
        Ok(ads::rows(groups))
    }
}
