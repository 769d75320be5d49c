//! The cart reports: the carts report's lines read by key from `cart_lines`; the
//! others from the newest derived cart rows, narrowed on the server and rolled up with
//! the model's pure functions.

use crate::clickhouse::error::ch;
use crate::clickhouse::query::{Arg, Conds};
use crate::clickhouse::rows::{CartEventCh, CartLineCh};
use crate::clickhouse::ClickHouseStore;
use crate::model::campaigns::CartAddsRow;
use crate::model::carts::lines::{self, CartLine, LinePlace};
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

    /// The carts report's lines from place `from` on, at most `limit`: a range of
    /// `cart_lines`' sorting key (the filter's campaigns and days, from the place on)
    /// read `FINAL` with conditions on that key only, so the newest row of each
    /// place decides; then its `gone` rows, and lines of another ad id or catalog,
    /// are dropped. Before the aggregator indexed an earlier version's lines
    /// ([`Self::backfill_lines`]), every line is read from `cart_events` instead.
    pub(crate) async fn cart_lines_page(
        &self,
        f: &ReportFilter,
        from: Option<&LinePlace>,
        limit: usize,
    ) -> Result<Vec<CartLine>, StoreError> {
        if !self.lines_indexed().await? {
            let mut w = Conds::default();
            w.cart_catalog(f);
            let rows = self.cart_rows(w).await?;
            return Ok(lines::page(lines::lines(&rows), f, from, limit));
        }
        // The whole report in one read (a download without a page size).
        if limit == usize::MAX {
            return self.campaign_lines(f, None, from, limit).await;
        }
        // A page: a campaign at a time, in key order (the filter's, or those of the
        // tenant's or every campaign with lines in the days), each read one
        // campaign's range of the sorting key, so a page costs the campaigns it
        // reaches, not every line.
        let campaigns: Vec<String> = match &f.campaign_id {
            Some(c) => vec![c.clone()],
            None => {
                let listed = self.line_days_listed().await?;
                self.line_campaigns(f, from, listed).await?
            }
        };
        let mut out = Vec::new();
        for c in campaigns
            .iter()
            .filter(|c| from.is_none_or(|p| c.as_str() >= p.campaign_id.as_str()))
        {
            if out.len() >= limit {
                break;
            }
            let from = from.filter(|p| p.campaign_id == *c);
            out.extend(self.campaign_page(f, c, from, limit - out.len()).await?);
        }
        Ok(out)
    }

    /// At most `limit` lines of campaign `c` that `f` selects, from `from` on, in
    /// key order, read a few days at a time: the lines' rows are counted by day
    /// first (the sorting key's `day` alone), and each read takes the days whose
    /// rows make up the lines still wanted (rows count every version and removed
    /// line, so a read may come short: the next days are read then). A page reads
    /// about its own lines `FINAL`, not every line of the campaign's range (a month of
    /// a campaign's lines at ten million events is about 24,000).
    async fn campaign_page(
        &self,
        f: &ReportFilter,
        c: &str,
        from: Option<&LinePlace>,
        limit: usize,
    ) -> Result<Vec<CartLine>, StoreError> {
        let first = [f.from_day, from.map(|p| p.day)]
            .into_iter()
            .flatten()
            .max();
        let mut key = Conds::default();
        key.str("campaign_id = ?", &Some(c.to_owned()));
        key.int("day >= ?", first.map(i64::from));
        key.int("day <= ?", f.to_day.map(i64::from));
        let sql = format!(
            "SELECT day, count() FROM cart_lines{} GROUP BY day ORDER BY day",
            key.clause()
        );
        let days: Vec<(i32, u64)> = key
            .bind(self.client().query(&sql))
            .fetch_all()
            .await
            .map_err(ch("cart report"))?;
        let mut out = Vec::new();
        let mut at = 0;
        while at < days.len() && out.len() < limit {
            let want = limit - out.len();
            // The days from `at` whose rows reach the lines wanted.
            let mut end = at;
            let mut rows = 0u64;
            while end < days.len() && rows < want as u64 {
                rows += days[end].1;
                end += 1;
            }
            let window = ReportFilter {
                from_day: Some(days[at].0),
                to_day: Some(days[end - 1].0),
                ..f.clone()
            };
            let from = from.filter(|p| p.day >= days[at].0);
            out.extend(self.campaign_lines(&window, Some(c), from, want).await?);
            at = end;
        }
        Ok(out)
    }

    /// At most `limit` lines that `f` selects, of campaign `c` (`None`: of the
    /// filter's campaigns), from `from` on, in key order.
    async fn campaign_lines(
        &self,
        f: &ReportFilter,
        c: Option<&str>,
        from: Option<&LinePlace>,
        limit: usize,
    ) -> Result<Vec<CartLine>, StoreError> {
        let mut key = Conds::default();
        match c {
            Some(c) => key.str("campaign_id = ?", &Some(c.to_owned())),
            None => key.campaign(f),
        }
        key.int("day >= ?", f.from_day.map(i64::from));
        key.int("day <= ?", f.to_day.map(i64::from));
        if let Some(p) = from {
            key.sql.push(
                "(campaign_id, day, tracking_id, catalog_id, product_code) >= (?, ?, ?, ?, ?)"
                    .to_owned(),
            );
            key.args.extend([
                Arg::Str(p.campaign_id.clone()),
                Arg::Int(i64::from(p.day)),
                Arg::Str(p.tracking_id.clone()),
                Arg::Str(p.catalog_id.clone()),
                Arg::Str(p.product_code.clone()),
            ]);
        }
        let mut rest = Conds::default();
        rest.sql.push("gone = 0".to_owned());
        rest.str("ad_id = ?", &f.ad_id);
        rest.cart_catalog(f);
        let limit = match limit {
            usize::MAX => String::new(),
            n => format!(" LIMIT {n}"),
        };
        let sql = format!(
            "SELECT ?fields FROM (SELECT * FROM cart_lines FINAL{}){} \
             ORDER BY campaign_id, day, tracking_id, catalog_id, product_code{limit}",
            key.clause(),
            rest.clause()
        );
        let fail = ch("cart report");
        let q = rest.bind(key.bind(self.client().query(&sql)));
        let mut cursor = q.fetch::<CartLineCh>().map_err(&fail)?;
        let mut out = Vec::new();
        while let Some(r) = cursor.next().await.map_err(&fail)? {
            let line = r.to_line()?;
            // The tenant's campaigns and the days are the key's; checked again on
            // the line as the embedded store does.
            if lines::selects(f, &line) {
                out.push(line);
            }
        }
        Ok(out)
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
