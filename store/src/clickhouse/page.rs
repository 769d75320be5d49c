//! A page of places on ClickHouse ([`crate::model::tallies::page`]): the server
//! finds the page's first places (`DISTINCT` keys at or after the page's key, sorted,
//! `LIMIT`) in the parts a read reads (a compacted store's closed days from their
//! sums), and the read then takes the places between the page's first key and its
//! last, a condition of constant size whatever the page holds.
//!
//! Keys compare as the model's [`PlaceKey`] does: byte-wise, field by field (a
//! ClickHouse `String` compares as `memcmp`, as Rust's `String` does).

use clickhouse::query::Query;
use clickhouse::{Client, Row};
use serde::Deserialize;

use super::error::ch;
use super::query::{bind_tally_places, placeholders, tally_places};
use crate::model::tallies::page::{PlaceKey, PlacePage};
use crate::model::tallies::TallyQuery;
use crate::StoreError;

/// The key at or after the first bound key (7 values: [`bind_between`]).
pub(crate) const AT_LEAST: &str = "(campaign_id > ? OR (campaign_id = ? AND (creative > ? OR \
     (creative = ? AND (catalog_id > ? OR (catalog_id = ? AND product_code >= ?))))))";
/// The key at or before the second bound key (7 values).
pub(crate) const AT_MOST: &str = "(campaign_id < ? OR (campaign_id = ? AND (creative < ? OR \
     (creative = ? AND (catalog_id < ? OR (catalog_id = ? AND product_code <= ?))))))";

#[derive(Row, Deserialize)]
struct PlaceKeyCh {
    campaign_id: String,
    creative: String,
    catalog_id: String,
    product_code: String,
}

fn bind_key(query: Query, k: &PlaceKey) -> Query {
    query
        .bind(k.campaign_id.as_str())
        .bind(k.campaign_id.as_str())
        .bind(k.creative.as_str())
        .bind(k.creative.as_str())
        .bind(k.catalog_id.as_str())
        .bind(k.catalog_id.as_str())
        .bind(k.product_code.as_str())
}

/// Binds [`AT_LEAST`] `from` and [`AT_MOST`] `last`.
pub(crate) fn bind_between(query: Query, from: &PlaceKey, last: &PlaceKey) -> Query {
    bind_key(bind_key(query, from), last)
}

/// The first `page.places` places of `q` (campaigns of `list`, metrics `codes`) at or
/// after the page's key: of `rollups`, or of a compacted store's parts (`snapshot`:
/// its closed days' sums, far fewer rows than their partitions').
pub(crate) async fn first_places(
    client: &Client,
    q: &TallyQuery,
    list: &[&String],
    codes: &[u16],
    page: &PlacePage,
    snapshot: Option<super::compact::Snapshot>,
) -> Result<Vec<PlaceKey>, StoreError> {
    const KEYS: &str = "campaign_id, creative, catalog_id, product_code";
    let places = format!("{} AND {AT_LEAST}", tally_places(q, list));
    let cond = format!("{places} AND metric IN ({})", placeholders(codes.len()));
    let bind_places = |query: Query| bind_key(bind_tally_places(query, q, list), &page.from);
    let bind_cond = |query: Query| {
        let mut query = bind_places(query);
        for c in codes {
            query = query.bind(*c);
        }
        query
    };
    let parts = match snapshot {
        None => format!("SELECT DISTINCT {KEYS} FROM rollups WHERE {cond}"),
        Some(snap) => super::compact::places_sql(KEYS, &cond, &places, q.grain, snap),
    };
    let sql = format!(
        "SELECT {KEYS} FROM ({parts}) GROUP BY {KEYS} ORDER BY {KEYS} LIMIT {}",
        page.places.max(1)
    );
    let mut query = bind_cond(client.query(&sql));
    if let Some(snap) = snapshot {
        // Bound as `places_sql` names them: `cond` twice, then (flags found) `cond`
        // and `places`.
        query = bind_cond(query);
        if snap.flagged {
            query = bind_places(bind_cond(query));
        }
    }
    let rows: Vec<PlaceKeyCh> = query
        .fetch_all()
        .await
        .map_err(ch("read a page's places"))?;
    Ok(rows
        .into_iter()
        .map(|r| PlaceKey {
            campaign_id: r.campaign_id,
            creative: r.creative,
            catalog_id: r.catalog_id,
            product_code: r.product_code,
        })
        .collect())
}
