//! One-time conversion of a store written by an earlier version: JSON keys, and a
//! view's facts and its derived row in two tables (`view_facts`, `views`).
//!
//! Every old row's value holds its key's fields (a view's facts are found through
//! the derived row's key, which is the same JSON key in both old tables), so the new
//! keys are recomputed from values. Old product facts carry no event time: they are
//! keyed at the start of their day (a copy of one re-read later lands beside it under
//! its real time; the product report counts one fact per dedup key and action, so
//! the counts stay the same). Runs inside the transaction that opens the store:
//! either the whole store is converted and the old tables deleted, or nothing changed
//! and the next open tries again. A store with no old tables is left alone.

use redb::{ReadableTable, TableDefinition, TableHandle, WriteTransaction};

use super::codec::{fact_val, parse_ad_fact};
use super::entities::{self, Index, CARTS, VIEWS};
use super::{ad_key, err, key, parse, product_key, touch_key, val, view_val, StoreError, Table};
use super::{AD_FACTS, PRODUCT_FACTS, TOUCHES};
use crate::model::ads::AdFact;
use crate::model::attribution::Touch;
use crate::model::carts::CartEventRow;
use crate::model::funnel::{ViewFact, ViewRow};
use crate::model::products::{ProductAction, ProductFact, ProductGroup};
use crate::model::status::AdIdStatus;
use crate::model::traffic::TrafficClass;
use crate::model::DAY_MS;

/// A product fact as the previous version stored it (no event time).
#[derive(serde::Serialize, serde::Deserialize)]
struct OldProductFact {
    group: ProductGroup,
    action: ProductAction,
    dedup_key: u128,
    #[serde(default)]
    status: AdIdStatus,
}

type Old = TableDefinition<'static, &'static str, &'static [u8]>;

pub(super) const OLD_VIEW_FACTS: Old = TableDefinition::new("view_facts");
pub(super) const OLD_VIEWS: Old = TableDefinition::new("views");
pub(super) const OLD_PRODUCT_FACTS: Old = TableDefinition::new("product_facts");
pub(super) const OLD_CARTS: Old = TableDefinition::new("carts");
pub(super) const OLD_TOUCHES: Old = TableDefinition::new("touches");
pub(super) const OLD_AD_FACTS: Old = TableDefinition::new("ad_facts");

/// Converts the old tables present in `w` into the new ones and deletes them;
/// returns how many rows were converted.
pub(super) fn from_json_keys(w: &WriteTransaction) -> Result<u64, StoreError> {
    let present: Vec<String> = w
        .list_tables()
        .map_err(err)?
        .map(|t| t.name().to_owned())
        .collect();
    let has = |t: Old| present.iter().any(|p| p == t.name());
    let mut converted = 0;
    if has(OLD_VIEWS) {
        let mut rows = Vec::new();
        {
            let facts_table = if has(OLD_VIEW_FACTS) {
                Some(w.open_table(OLD_VIEW_FACTS).map_err(err)?)
            } else {
                None
            };
            let old = w.open_table(OLD_VIEWS).map_err(err)?;
            for row in old.iter().map_err(err)? {
                let (k, v) = row.map_err(err)?;
                let view: ViewRow = parse(v.value())?;
                let stored = match &facts_table {
                    Some(t) => t.get(k.value()).map_err(err)?,
                    None => None,
                };
                let facts: Vec<ViewFact> = match stored {
                    Some(f) => parse(f.value())?,
                    None => Vec::new(),
                };
                rows.push((key(&view.key), view_val(&view, &facts)));
            }
        }
        converted += put_entities(w, VIEWS, rows)?;
    }
    if has(OLD_CARTS) {
        let mut rows = Vec::new();
        let old = w.open_table(OLD_CARTS).map_err(err)?;
        for row in old.iter().map_err(err)? {
            let (_, v) = row.map_err(err)?;
            let carts: Vec<CartEventRow> = parse(v.value())?;
            if let Some(first) = carts.first() {
                rows.push((key(&first.key), val(&carts)));
            }
        }
        drop(old);
        converted += put_entities(w, CARTS, rows)?;
    }
    converted += convert(
        w,
        &has,
        OLD_PRODUCT_FACTS,
        PRODUCT_FACTS,
        |p: OldProductFact| {
            let fact = ProductFact {
                time_ms: i64::from(p.group.day) * DAY_MS,
                group: p.group,
                action: p.action,
                dedup_key: p.dedup_key,
                status: p.status,
                traffic: TrafficClass::Valid,
                shopper: 0,
                received_ms: 0,
            };
            Some((product_key(&fact), fact_val(&fact)))
        },
    )?;
    converted += convert_with(
        w,
        &has,
        OLD_AD_FACTS,
        AD_FACTS,
        parse_ad_fact,
        |a: AdFact| Some((ad_key(&a), fact_val(&a))),
    )?;
    converted += convert(w, &has, OLD_TOUCHES, TOUCHES, |t: Touch| {
        Some((touch_key(&t), val(&t)))
    })?;
    for t in [
        OLD_VIEW_FACTS,
        OLD_VIEWS,
        OLD_PRODUCT_FACTS,
        OLD_CARTS,
        OLD_TOUCHES,
        OLD_AD_FACTS,
    ] {
        if has(t) {
            w.delete_table(t).map_err(err)?;
        }
    }
    if converted > 0 {
        tracing::info!(
            rows = converted,
            "converted the report store to binary keys"
        );
    }
    Ok(converted)
}

/// Stores converted views or carts as new entities, their index entries written at
/// once; returns how many.
fn put_entities(
    w: &WriteTransaction,
    kind: entities::Entities,
    mut rows: Vec<(Vec<u8>, Vec<u8>)>,
) -> Result<u64, StoreError> {
    rows.sort_unstable();
    let _ = entities::upsert(w, &Index::default(), kind, &rows, true)?;
    Ok(rows.len() as u64)
}

/// Rewrites every row of `old` (if present) into `new` as the key and value `convert_row`
/// makes of it (`None`: an empty row, dropped).
fn convert<T: serde::de::DeserializeOwned>(
    w: &WriteTransaction,
    has: &impl Fn(Old) -> bool,
    old: Old,
    new: Table,
    convert_row: impl Fn(T) -> Option<(Vec<u8>, Vec<u8>)>,
) -> Result<u64, StoreError> {
    convert_with(w, has, old, new, parse, convert_row)
}

/// [`convert`] with the old values read by `read`.
fn convert_with<T>(
    w: &WriteTransaction,
    has: &impl Fn(Old) -> bool,
    old: Old,
    new: Table,
    read: impl Fn(&[u8]) -> Result<T, StoreError>,
    convert_row: impl Fn(T) -> Option<(Vec<u8>, Vec<u8>)>,
) -> Result<u64, StoreError> {
    if !has(old) {
        return Ok(0);
    }
    let from = w.open_table(old).map_err(err)?;
    let mut to = w.open_table(new).map_err(err)?;
    let mut n = 0;
    for row in from.iter().map_err(err)? {
        let (_, v) = row.map_err(err)?;
        if let Some((k, v)) = convert_row(read(v.value())?) {
            to.insert(k.as_slice(), v.as_slice()).map_err(err)?;
            n += 1;
        }
    }
    Ok(n)
}
