//! A page of places on ClickHouse ([`crate::model::tallies::page`]): the server
//! finds the page's first places (`DISTINCT` keys of `rollups` at or after the page's
//! key, sorted, `LIMIT`), and the read then takes the places between the page's first
//! key and its last, a condition of constant size whatever the page holds. `rollups`
//! holds a row of every place ever counted (compaction copies, never moves), so its
//! places are every part's.
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
/// after the page's key.
pub(crate) async fn first_places(
    client: &Client,
    q: &TallyQuery,
    list: &[&String],
    codes: &[u16],
    page: &PlacePage,
) -> Result<Vec<PlaceKey>, StoreError> {
    let sql = format!(
        "SELECT DISTINCT campaign_id, creative, catalog_id, product_code FROM rollups \
         WHERE {} AND metric IN ({}) AND {AT_LEAST} \
         ORDER BY campaign_id, creative, catalog_id, product_code LIMIT {}",
        tally_places(q, list),
        placeholders(codes.len()),
        page.places.max(1)
    );
    let mut query = bind_tally_places(client.query(&sql), q, list);
    for c in codes {
        query = query.bind(*c);
    }
    let rows: Vec<PlaceKeyCh> = bind_key(query, &page.from)
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
