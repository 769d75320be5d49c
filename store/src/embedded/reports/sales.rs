//! The sales reports: the orders of the filter (a scan), then the touches in the time
//! range the attribution windows allow before them (one key range), kept for the
//! orders' shoppers and attributed with [`crate::read`]'s shared functions.

use std::collections::HashSet;

use redb::{Database, ReadableDatabase};

use super::scan;
use crate::embedded::codec::time_prefix;
use crate::embedded::{err, parse, ORDERS, TOUCHES};
use crate::model::attribution::{self, OrderLine, SalesReportRow, Touch, Windows};
use crate::model::campaigns::CampaignSalesRow;
use crate::read::{campaign_sales_rows, sales_rows};
use crate::{ReportFilter, StoreError};

/// The order lines of the filter's days and catalog and the touches of their
/// shoppers in the span the windows allow.
fn inputs(
    db: &Database,
    f: &ReportFilter,
    w: &Windows,
) -> Result<(Vec<OrderLine>, Vec<Touch>), StoreError> {
    let orders: Vec<Vec<OrderLine>> = scan(db, ORDERS)?;
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

/// Sales per credited campaign, catalog, product and day.
pub(super) fn sales(
    db: &Database,
    f: &ReportFilter,
    w: &Windows,
) -> Result<Vec<SalesReportRow>, StoreError> {
    let (lines, touches) = inputs(db, f, w)?;
    Ok(sales_rows(&lines, &touches, f, w))
}

/// Attributed sales per campaign and day.
pub(super) fn campaign_sales(
    db: &Database,
    f: &ReportFilter,
    w: &Windows,
) -> Result<Vec<CampaignSalesRow>, StoreError> {
    let (lines, touches) = inputs(db, f, w)?;
    Ok(campaign_sales_rows(&lines, &touches, f, w))
}
