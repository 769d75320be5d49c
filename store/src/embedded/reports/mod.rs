//! The embedded store's reports, one file per report family: table scans rolled up
//! with the same pure functions as the tests ([`crate::model`], [`crate::read`]).
//! Each report runs on the blocking pool in one read transaction per table.

mod ads;
mod carts;
mod funnel;
mod products;
mod sales;

use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};
use serde::de::DeserializeOwned;

use super::{err, parse, EmbeddedStore};
use crate::model::ads::AdReportRow;
use crate::model::attribution::{SalesReportRow, Windows};
use crate::model::campaigns::{CampaignSalesRow, CartAddsRow};
use crate::model::carts::lines::{CartLine, LinePlace};
use crate::model::carts::CartCampaignRow;
use crate::model::funnel::FunnelReportRow;
use crate::model::products::ProductReportRow;
use crate::model::tallies::{SummedTally, TallyQuery};
use crate::read::ReportStore;
use crate::{ReportFilter, StoreError};

/// Every row's value of `table`, parsed.
fn scan<K: redb::Key + 'static, T: DeserializeOwned>(
    db: &Database,
    table: TableDefinition<K, &[u8]>,
) -> Result<Vec<T>, StoreError> {
    scan_with(db, table, parse)
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

/// Every copy of every ad fact (the backfill of tallies).
pub(super) fn ad_facts(db: &Database) -> Result<Vec<crate::model::ads::AdFact>, StoreError> {
    scan_with(db, super::AD_FACTS, super::codec::parse_ad_fact)
}

/// Every product fact (the backfill of tallies).
pub(super) fn product_facts(
    db: &Database,
) -> Result<Vec<crate::model::products::ProductFact>, StoreError> {
    scan_with(db, super::PRODUCT_FACTS, super::codec::parse_product_fact)
}

/// Cart adds per campaign and UTC day, every campaign (the backfill of tallies).
pub(super) fn cart_adds(
    db: &Database,
) -> Result<Vec<crate::model::campaigns::CartAddsRow>, StoreError> {
    carts::adds(db, &crate::ReportFilter::default())
}

/// Every cart line's event rows (the backfill of the cart products' tallies).
pub(super) fn cart_rows(
    db: &Database,
) -> Result<Vec<crate::model::carts::CartEventRow>, StoreError> {
    carts::rows(db, &crate::ReportFilter::default())
}

/// Every view's row (the backfill of tallies).
pub(super) fn view_rows(db: &Database) -> Result<Vec<crate::model::funnel::ViewRow>, StoreError> {
    scan_with(db, super::entities::VIEWS.rows, |v| {
        Ok(super::codec::parse_view_row(v)?.0)
    })
}

impl ReportStore for EmbeddedStore {
    async fn funnel(&self, f: &ReportFilter) -> Result<Vec<FunnelReportRow>, StoreError> {
        let f = f.clone();
        self.blocking(move |db| funnel::report(db, &f)).await
    }

    async fn products(&self, f: &ReportFilter) -> Result<Vec<ProductReportRow>, StoreError> {
        let f = f.clone();
        self.blocking(move |db| products::report(db, &f)).await
    }

    async fn cart_lines(
        &self,
        f: &ReportFilter,
        from: Option<&LinePlace>,
        limit: usize,
    ) -> Result<Vec<CartLine>, StoreError> {
        let (f, from) = (f.clone(), from.cloned());
        self.blocking(move |db| super::cart_lines::page(db, &f, from.as_ref(), limit))
            .await
    }

    async fn cart_campaigns(&self, f: &ReportFilter) -> Result<Vec<CartCampaignRow>, StoreError> {
        let f = f.clone();
        self.blocking(move |db| carts::campaigns(db, &f)).await
    }

    async fn ads(&self, f: &ReportFilter) -> Result<Vec<AdReportRow>, StoreError> {
        let f = f.clone();
        self.blocking(move |db| ads::report(db, &f)).await
    }

    async fn cart_adds(&self, f: &ReportFilter) -> Result<Vec<CartAddsRow>, StoreError> {
        let f = f.clone();
        self.blocking(move |db| carts::adds(db, &f)).await
    }

    async fn campaign_sales(
        &self,
        f: &ReportFilter,
        w: &Windows,
    ) -> Result<Vec<CampaignSalesRow>, StoreError> {
        let (f, w) = (f.clone(), *w);
        self.blocking(move |db| sales::campaign_sales(db, &f, &w))
            .await
    }

    async fn sales(
        &self,
        f: &ReportFilter,
        w: &Windows,
    ) -> Result<Vec<SalesReportRow>, StoreError> {
        let (f, w) = (f.clone(), *w);
        self.blocking(move |db| sales::sales(db, &f, &w)).await
    }

    async fn tallies(&self, q: &TallyQuery) -> Result<Option<Vec<SummedTally>>, StoreError> {
        let q = q.clone();
        self.blocking(move |db| super::tallies::read(db, &q)).await
    }
}
