//! The campaign days of the carts report's lines (`cart_line_days`,
//! [`rm_schemas::tables::CART_LINE_DAYS`]): what a page of the carts report reads to
//! find the campaigns (and days) it reaches, a row per campaign and day, instead of
//! the campaign of every line of its range (`SELECT DISTINCT campaign_id FROM
//! cart_lines`, which at ten million records read half a million rows a page, and
//! grows with the lines).
//!
//! **Why a page misses no line.** Every `cart_lines` row this version writes at a
//! place comes with its campaign day, in the same batch write (`write.rs`); a
//! batch is replayed whole until it is committed, so a line visible in `cart_lines`
//! has its day listed once its batch's write returned. The lines an earlier version
//! wrote are listed once ([`ClickHouseStore::list_line_days`], at the aggregator's
//! start, from `cart_lines` itself), then the marker row is written; until it is
//! there the pages read the campaigns from `cart_lines` as before. A store with no
//! cart events is marked at connect.
//!
//! **Why an extra day is harmless.** A day whose lines all left it (their latest
//! event moved) or were removed (retention) stays listed: a page counts a listed
//! campaign's lines by day in `cart_lines` and reads the days that hold some, so an
//! empty one costs a count, never a wrong line.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;

use clickhouse::Row;
use serde::{Deserialize, Serialize};

use super::error::ch;
use super::query::Conds;
use super::rows::{insert_rows, CartLineCh};
use super::ClickHouseStore;
use crate::model::carts::lines::LinePlace;
use crate::{ReportFilter, StoreError};

/// The marker row's day (no place has it).
const MARKER_DAY: i32 = i32::MIN;

/// A row of `cart_line_days`.
#[derive(Row, Serialize, Deserialize, Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct LineDayCh {
    pub(crate) campaign_id: String,
    pub(crate) day: i32,
}

impl LineDayCh {
    /// The marker row.
    fn marker() -> Self {
        Self {
            campaign_id: String::new(),
            day: MARKER_DAY,
        }
    }

    /// The campaign days of the places `rows` write a line at (not those they mark
    /// gone), each once.
    pub(crate) fn of_lines(rows: &[CartLineCh]) -> Vec<Self> {
        rows.iter()
            .filter(|r| r.gone == 0)
            .map(|r| Self {
                campaign_id: r.campaign_id.clone(),
                day: r.day,
            })
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect()
    }
}

impl ClickHouseStore {
    /// Writes the campaign days of `rows` (a batch's `cart_lines` rows).
    pub(crate) async fn insert_line_days(&self, rows: &[CartLineCh]) -> Result<(), StoreError> {
        insert_rows::<LineDayCh>(self.client(), "cart_line_days", &LineDayCh::of_lines(rows)).await
    }

    /// Whether the marker row is stored (once seen, it stays).
    pub(crate) async fn line_days_listed(&self) -> Result<bool, StoreError> {
        if self.inner.line_days_listed.load(Ordering::Relaxed) {
            return Ok(true);
        }
        let n: u64 = self
            .client()
            .query("SELECT count() FROM cart_line_days WHERE campaign_id = '' AND day = ?")
            .bind(MARKER_DAY)
            .fetch_one()
            .await
            .map_err(ch("read the carts' days"))?;
        if n > 0 {
            self.inner.line_days_listed.store(true, Ordering::Relaxed);
        }
        Ok(n > 0)
    }

    /// Lists the campaign days of every stored line, then writes the marker (a crash
    /// in between lists them again at the next start: equal rows are one). Once: true
    /// when it listed them now.
    pub(crate) async fn list_line_days(&self) -> Result<bool, StoreError> {
        if self.line_days_listed().await? {
            return Ok(false);
        }
        self.client()
            .query(
                "INSERT INTO cart_line_days (campaign_id, day) \
                 SELECT DISTINCT campaign_id, day FROM cart_lines",
            )
            .execute()
            .await
            .map_err(ch("list the carts' days"))?;
        self.mark_line_days().await?;
        tracing::info!("listed the campaign days of the carts report's lines");
        Ok(true)
    }

    /// Writes the marker: every line's day is listed.
    pub(crate) async fn mark_line_days(&self) -> Result<(), StoreError> {
        insert_rows::<LineDayCh>(self.client(), "cart_line_days", &[LineDayCh::marker()]).await
    }

    /// The campaigns of `f` (its tenant's, or every one) with cart lines in its days,
    /// from `from`'s campaign on, in key order: from the list when `listed`, else
    /// (a store whose lines' days are not listed yet) from the lines themselves.
    pub(crate) async fn line_campaigns(
        &self,
        f: &ReportFilter,
        from: Option<&LinePlace>,
        listed: bool,
    ) -> Result<Vec<String>, StoreError> {
        let mut key = Conds::default();
        key.campaign(f);
        key.str("campaign_id >= ?", &from.map(|p| p.campaign_id.clone()));
        key.int("day >= ?", f.from_day.map(i64::from));
        key.int("day <= ?", f.to_day.map(i64::from));
        let table = if listed {
            key.int("day > ?", Some(i64::from(MARKER_DAY)));
            "cart_line_days"
        } else {
            "cart_lines"
        };
        let sql = format!(
            "SELECT DISTINCT campaign_id FROM {table}{} ORDER BY campaign_id",
            key.clause()
        );
        key.bind(self.client().query(&sql))
            .fetch_all::<String>()
            .await
            .map_err(ch("cart report"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(campaign: &str, day: i32, gone: u8) -> CartLineCh {
        CartLineCh {
            campaign_id: campaign.into(),
            day,
            tracking_id: "t".into(),
            catalog_id: "c".into(),
            product_code: "p".into(),
            version: 1,
            gone,
            last_ms: 0,
            units: 1,
            last_value: None,
            adds: 1,
            increments: 0,
            decrements: 0,
            removals: 0,
            ad_id: String::new(),
            ad_id_status: 0,
        }
    }

    #[test]
    fn a_batch_lists_each_day_of_its_lines_once_and_not_the_places_they_left() {
        let rows = [
            row("b", 3, 0),
            row("a", 5, 0),
            row("b", 3, 0),
            row("a", 4, 1),
            row("a", 5, 0),
        ];
        let days: Vec<(String, i32)> = LineDayCh::of_lines(&rows)
            .into_iter()
            .map(|d| (d.campaign_id, d.day))
            .collect();
        assert_eq!(days, [("a".to_owned(), 5), ("b".to_owned(), 3)]);
    }
}
