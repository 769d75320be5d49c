//! One-time conversion of the order lines of a store written before exact money: the
//! `orders` table (order id -> the order's lines, each with an `f64` revenue) becomes
//! `orders_v2` (the same key, lines with an exact [`Money`] revenue).
//!
//! An old revenue was an `f64` parsed from the order's JSON number and summed as one;
//! it becomes the decimal of its shortest text (`19.99`, `2.58`, `8` for `8.0`),
//! which is the number the retailer sent for every price of at most 15 significant
//! digits, in the deployment's default currency (USD,
//! `rm_schemas::money::DEFAULT_CURRENCY`: orders had no currency). Old rows are
//! postcard (tag byte 1) or JSON, as [`super::parse`] reads. Runs inside the
//! transaction that opens the store, like `migrate.rs`: the whole table is converted
//! and the old one deleted, or nothing changed and the next open tries again. A store
//! without an `orders` table is left alone.

use redb::{ReadableTable, TableDefinition, TableHandle, WriteTransaction};
use rm_schemas::money::{self, Money};

use super::{err, parse, val, StoreError, ORDERS};
use crate::model::attribution::OrderLine;

/// The table of the version before.
const OLD_ORDERS: TableDefinition<&str, &[u8]> = TableDefinition::new("orders");

/// An order line as the version before stored it.
#[derive(serde::Serialize, serde::Deserialize)]
pub(crate) struct OldOrderLine {
    pub(crate) order_id: String,
    pub(crate) line: u32,
    pub(crate) customer_id: String,
    pub(crate) session_id: String,
    pub(crate) time_ms: i64,
    pub(crate) catalog_id: String,
    pub(crate) product_code: String,
    pub(crate) quantity: u64,
    pub(crate) revenue: f64,
    pub(crate) ad_id: String,
    pub(crate) order_ad_ids: Vec<String>,
}

impl OldOrderLine {
    fn convert(self) -> Result<OrderLine, StoreError> {
        let revenue = Money::from_legacy_f64(self.revenue, money::DEFAULT_CURRENCY)
            .ok_or_else(|| super::corrupt(format!("order line revenue {}", self.revenue)))?;
        Ok(OrderLine {
            order_id: self.order_id,
            line: self.line,
            customer_id: self.customer_id,
            session_id: self.session_id,
            time_ms: self.time_ms,
            catalog_id: self.catalog_id,
            product_code: self.product_code,
            quantity: self.quantity,
            revenue,
            ad_id: self.ad_id,
            order_ad_ids: self.order_ad_ids,
        })
    }
}

/// Converts the old `orders` table, if present, into `orders_v2` and deletes it;
/// returns how many orders were converted.
pub(super) fn orders(w: &WriteTransaction) -> Result<u64, StoreError> {
    let present = w
        .list_tables()
        .map_err(err)?
        .any(|t| t.name() == OLD_ORDERS.name());
    if !present {
        return Ok(0);
    }
    let mut n = 0;
    {
        let old = w.open_table(OLD_ORDERS).map_err(err)?;
        let mut new = w.open_table(ORDERS).map_err(err)?;
        for row in old.iter().map_err(err)? {
            let (k, v) = row.map_err(err)?;
            let lines: Vec<OldOrderLine> = parse(v.value())?;
            let lines: Vec<OrderLine> = lines
                .into_iter()
                .map(OldOrderLine::convert)
                .collect::<Result<_, _>>()?;
            new.insert(k.value(), val(&lines).as_slice()).map_err(err)?;
            n += 1;
        }
    }
    w.delete_table(OLD_ORDERS).map_err(err)?;
    tracing::info!(
        orders = n,
        "converted the store's order lines to exact money"
    );
    Ok(n)
}
