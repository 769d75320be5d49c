//! The embedded store's reports: table scans rolled up with the same pure functions
//! as the tests ([`crate::model`]); the sales reports read orders, then the touches
//! of their shoppers in one time range.

use std::collections::HashSet;

use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};
use serde::de::DeserializeOwned;

use super::codec::{parse_view_row, time_prefix};
use super::entities::{CARTS, VIEWS};
use super::{err, parse, EmbeddedStore, AD_FACTS, ORDERS, PRODUCT_FACTS, TOUCHES};
use crate::model::ads::{self, AdFact, AdReportRow};
use crate::model::attribution::{self, OrderLine, SalesReportRow, Touch, Windows};
use crate::model::campaigns::{CampaignSalesRow, CartAddsRow};
use crate::model::carts::{self, CartCampaignRow, CartEventRow, CartStateRow};
use crate::model::funnel::{self, FunnelReportRow, ViewRow};
use crate::model::products::{self, ProductFact, ProductReportRow};
use crate::read::{
    campaign_sales_rows, cart_campaign_rows, cart_state_rows, sales_rows, ReportStore,
};
use crate::{ReportFilter, StoreError};

impl EmbeddedStore {
    /// Every row's value of `table`, parsed.
    fn scan<K: redb::Key + 'static, T: DeserializeOwned>(
        db: &Database,
        table: TableDefinition<K, &[u8]>,
    ) -> Result<Vec<T>, StoreError> {
        Self::scan_with(db, table, parse)
    }

    /// Every row's value of `table`, read by `f`.
    fn scan_with<K: redb::Key + 'static, T>(
        db: &Database,
        table: TableDefinition<K, &[u8]>,
        f: impl Fn(&[u8]) -> Result<T, StoreError>,
    ) -> Result<Vec<T>, StoreError> {
        let r = db.begin_read().map_err(err)?;
        let t = r.open_table(table).map_err(err)?;
        let mut out = Vec::new();
        for row in t.iter().map_err(err)? {
            let (_, v) = row.map_err(err)?;
            out.push(f(v.value())?);
        }
        Ok(out)
    }

    fn cart_rows(db: &Database, f: &ReportFilter) -> Result<Vec<CartEventRow>, StoreError> {
        let carts: Vec<Vec<CartEventRow>> = Self::scan(db, CARTS.rows)?;
        Ok(carts
            .into_iter()
            .filter(|rows| {
                rows.first().is_none_or(|r| {
                    f.catalog_id
                        .as_deref()
                        .is_none_or(|c| c == r.key.catalog_id)
                })
            })
            .flatten()
            .collect())
    }
    /// The order lines of the filter's days and catalog and the touches of their
    /// shoppers in the span the windows allow.
    fn sales_inputs(
        db: &Database,
        f: &ReportFilter,
        w: &Windows,
    ) -> Result<(Vec<OrderLine>, Vec<Touch>), StoreError> {
        let orders: Vec<Vec<OrderLine>> = Self::scan(db, ORDERS)?;
        let lines: Vec<OrderLine> = orders
            .into_iter()
            .flatten()
            .filter(|l| f.selects_line(l))
            .collect();
        let Some((from, to)) = attribution::touch_range(&lines, w) else {
            return Ok((Vec::new(), Vec::new()));
        };
        let shoppers: HashSet<String> = lines.iter().flat_map(OrderLine::shoppers).collect();
        let r = db.begin_read().map_err(err)?;
        let t = r.open_table(TOUCHES).map_err(err)?;
        let (lo, hi) = (time_prefix(from), time_prefix(to.saturating_add(1)));
        let mut touches = Vec::new();
        for row in t.range(lo.as_slice()..hi.as_slice()).map_err(err)? {
            let (_, v) = row.map_err(err)?;
            let touch: Touch = parse(v.value())?;
            if shoppers.contains(&touch.shopper) {
                touches.push(touch);
            }
        }
        Ok((lines, touches))
    }

    /// The ad report: copies of the filter's campaign and ad, resolved, then days.
    fn ad_rows(db: &Database, f: &ReportFilter) -> Result<Vec<AdReportRow>, StoreError> {
        let copies: Vec<AdFact> = Self::scan(db, AD_FACTS)?;
        let kept = copies.iter().filter(|c| {
            f.campaign_id.as_deref().is_none_or(|x| x == c.campaign_id)
                && f.ad_id.as_deref().is_none_or(|x| x == c.ad_id)
        });
        Ok(ads::report(ads::resolve(kept), |g| {
            f.matches(&g.campaign_id, Some(&g.ad_id), None, g.day)
        }))
    }
}

impl ReportStore for EmbeddedStore {
    async fn funnel(&self, f: &ReportFilter) -> Result<Vec<FunnelReportRow>, StoreError> {
        let f = f.clone();
        self.blocking(move |db| {
            // The `ViewRow`s alone; the facts after them stay undecoded.
            let views = Self::scan_with(db, VIEWS.rows, |v| Ok(parse_view_row(v)?.0))?;
            let kept: Vec<&ViewRow> = views
                .iter()
                .filter(|v| f.matches(&v.campaign_id, Some(&v.key.ad_id), None, v.day))
                .collect();
            let ads = Self::ad_rows(db, &f)?;
            Ok(funnel::with_impressions(funnel::report(kept), &ads))
        })
        .await
    }

    async fn ads(&self, f: &ReportFilter) -> Result<Vec<AdReportRow>, StoreError> {
        let f = f.clone();
        self.blocking(move |db| Self::ad_rows(db, &f)).await
    }

    async fn cart_adds(&self, f: &ReportFilter) -> Result<Vec<CartAddsRow>, StoreError> {
        let f = f.clone();
        self.blocking(move |db| {
            let rows = Self::cart_rows(db, &f)?;
            Ok(carts::campaign_day_adds(&rows)
                .into_iter()
                .filter(|r| {
                    let day = crate::model::parse_day(&r.day).unwrap_or(0);
                    f.matches(&r.campaign_id, None, None, day)
                })
                .collect())
        })
        .await
    }

    async fn campaign_sales(
        &self,
        f: &ReportFilter,
        w: &Windows,
    ) -> Result<Vec<CampaignSalesRow>, StoreError> {
        let (f, w) = (f.clone(), *w);
        self.blocking(move |db| {
            let (lines, touches) = Self::sales_inputs(db, &f, &w)?;
            Ok(campaign_sales_rows(&lines, &touches, &f, &w))
        })
        .await
    }

    async fn products(&self, f: &ReportFilter) -> Result<Vec<ProductReportRow>, StoreError> {
        let f = f.clone();
        self.blocking(move |db| {
            let facts: Vec<ProductFact> = Self::scan(db, PRODUCT_FACTS)?;
            let kept = facts.iter().filter(|p| {
                let g = &p.group;
                f.matches(&g.campaign_id, Some(&g.ad_id), Some(&g.catalog_id), g.day)
            });
            Ok(products::report(kept))
        })
        .await
    }

    async fn carts(&self, f: &ReportFilter) -> Result<Vec<CartStateRow>, StoreError> {
        let f = f.clone();
        self.blocking(move |db| {
            let rows = Self::cart_rows(db, &f)?;
            Ok(cart_state_rows(&rows, &f))
        })
        .await
    }

    async fn cart_campaigns(&self, f: &ReportFilter) -> Result<Vec<CartCampaignRow>, StoreError> {
        let f = f.clone();
        self.blocking(move |db| {
            let rows = Self::cart_rows(db, &f)?;
            let kept: Vec<CartEventRow> = rows
                .into_iter()
                .filter(|r| {
                    let day = crate::model::day_of(r.fact.time_ms);
                    f.from_day.is_none_or(|d| day >= d) && f.to_day.is_none_or(|d| day <= d)
                })
                .collect();
            Ok(cart_campaign_rows(&kept, &f))
        })
        .await
    }

    async fn sales(
        &self,
        f: &ReportFilter,
        w: &Windows,
    ) -> Result<Vec<SalesReportRow>, StoreError> {
        let (f, w) = (f.clone(), *w);
        self.blocking(move |db| {
            let (lines, touches) = Self::sales_inputs(db, &f, &w)?;
            Ok(sales_rows(&lines, &touches, &f, &w))
        })
        .await
    }
}
