//! The rows of the ClickHouse tables as the client reads and writes them
//! (`RowBinary`), and their conversions to and from the model.

use clickhouse::Row;
use rm_schemas::money::{self, Currency, Money};
use rm_schemas::{DedupKey, InteractionType};
use serde::{Deserialize, Serialize};

use crate::model::attribution::{OrderLine, Touch, TouchKind};
use crate::model::carts::lines::{CartLine, LinePlace};
use crate::model::carts::{CartEventRow, CartFact, CartKey, Transition};
use crate::model::products::ProductAction;
use crate::model::status::AdIdStatus;
use crate::model::tallies::{
    Grain, Metric, Place, Scope, SummedTally, Tally, TallyKey, Text, BACKFILL_PARTITION,
};
use crate::model::traffic::TrafficClass;
use crate::model::DAY_MS;
use crate::StoreError;

/// Inserts `rows` into `table` with one `INSERT` (none when there are none).
pub(crate) async fn insert_rows<R: Row + clickhouse::RowWrite>(
    client: &clickhouse::Client,
    table: &'static str,
    rows: &[R::Value<'_>],
) -> Result<(), StoreError> {
    if rows.is_empty() {
        return Ok(());
    }
    let fail = super::error::ch(table);
    let mut insert = client.insert::<R>(table).await.map_err(&fail)?;
    for r in rows {
        insert.write(r).await.map_err(&fail)?;
    }
    insert.end().await.map_err(&fail)
}

pub(crate) const IMPRESSION: &str = "impression";
pub(crate) const CLICK: &str = "click";

pub(crate) fn corrupt(what: &str, value: &str) -> StoreError {
    StoreError::Refused(format!("corrupt store row: bad {what} {value:?}"))
}

pub(crate) fn dedup_hex(k: u128) -> String {
    format!("{k:032x}")
}

pub(crate) fn parse_dedup(s: &str) -> Result<u128, StoreError> {
    DedupKey::from_hex(s)
        .map(|k| k.0)
        .ok_or_else(|| corrupt("dedup key", s))
}

pub(crate) fn parse_kind(s: &str) -> Result<InteractionType, StoreError> {
    InteractionType::from_wire(s).ok_or_else(|| corrupt("interaction type", s))
}

pub(crate) fn parse_transition(s: &str) -> Result<Transition, StoreError> {
    [
        Transition::Add,
        Transition::Increment,
        Transition::Decrement,
        Transition::Removal,
        Transition::Unchanged,
    ]
    .into_iter()
    .find(|t| t.as_str() == s)
    .ok_or_else(|| corrupt("transition", s))
}

pub(crate) fn action_str(a: ProductAction) -> &'static str {
    match a {
        ProductAction::Impression => IMPRESSION,
        ProductAction::Click => CLICK,
    }
}

/// First millisecond of `day`.
pub(crate) fn day_start_ms(day: i32) -> i64 {
    i64::from(day) * DAY_MS
}

/// A stored ad id status rank.
pub(crate) fn parse_status(rank: u8) -> Result<AdIdStatus, StoreError> {
    AdIdStatus::from_rank(rank).ok_or_else(|| corrupt("ad id status", &rank.to_string()))
}

/// A row of `view_facts`.
#[derive(Row, Serialize, Deserialize)]
pub(crate) struct ViewFactCh<'a> {
    pub(crate) ad_id: &'a str,
    pub(crate) video_id: &'a str,
    pub(crate) tracking_id: &'a str,
    pub(crate) dedup_key: String,
    pub(crate) kind: &'a str,
    pub(crate) time_ms: i64,
    pub(crate) ad_id_status: u8,
}

/// A row of `served_ads` (the state as hex of its postcard bytes).
#[derive(Row, Serialize, Deserialize)]
pub(crate) struct ServedCh {
    pub(crate) ad_id: String,
    pub(crate) state: String,
    pub(crate) version: u64,
    pub(crate) expires_at: i64,
}

impl ServedCh {
    /// The row of one served ad's state.
    pub(crate) fn of(ad_id: &str, state: &crate::model::served::ServedAd) -> Self {
        Self {
            ad_id: ad_id.to_owned(),
            state: format!("{STATE_V2}{}", hex(&state.to_bytes())),
            version: state.version(),
            expires_at: crate::model::served::expiry_of(ad_id).unwrap_or(i64::MAX),
        }
    }

    /// The state a row holds.
    pub(crate) fn state(&self) -> Result<crate::model::served::ServedAd, StoreError> {
        use crate::model::served::{Encoding, ServedAd};
        let (s, encoding) = match self.state.strip_prefix(STATE_V2) {
            Some(rest) => (rest.as_bytes(), Encoding::V2),
            None => (self.state.as_bytes(), Encoding::V1),
        };
        let bytes = unhex(s).ok_or_else(|| corrupt("served ad state", &self.state))?;
        ServedAd::from_bytes(&bytes, encoding).map_err(|_| corrupt("served ad state", &self.state))
    }
}

/// Bytes as lowercase hex (a `String` column holds text only).
pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// The bytes of [`hex`]'s text; `None` when it is not.
pub(crate) fn unhex(s: &[u8]) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 {
        return None;
    }
    s.chunks(2)
        .map(|p| {
            std::str::from_utf8(p)
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        })
        .collect()
}

/// What starts a served ad's state written with the events its tallies count
/// ([`crate::model::served::Encoding::V2`]); the hex of an earlier one never does.
const STATE_V2: &str = "v2:";

/// A row of `ad_facts` (one copy of an ad event).
#[derive(Row, Serialize)]
pub(crate) struct AdFactCh<'a> {
    pub(crate) campaign_id: &'a str,
    pub(crate) ad_id: &'a str,
    pub(crate) action: &'a str,
    pub(crate) dedup_key: String,
    pub(crate) time_ms: i64,
    pub(crate) day: i32,
    pub(crate) ad_id_status: u8,
    pub(crate) traffic: u8,
    pub(crate) shopper: u64,
    pub(crate) received_ms: i64,
}

/// Distinct product or ad facts of a report, as the server returns them in one pass:
/// impressions counted per group, status and traffic class (`dedup_key` empty,
/// `shopper` and `received_ms` 0), clicks one row each (`facts` 1), since the click
/// window needs them one by one. Ad rows have empty catalog and product.
#[derive(Row, Deserialize)]
pub(crate) struct FactCountCh {
    pub(crate) campaign_id: String,
    pub(crate) ad_id: String,
    pub(crate) catalog_id: String,
    pub(crate) product_code: String,
    pub(crate) day: i32,
    pub(crate) action: String,
    pub(crate) dedup_key: String,
    pub(crate) status: u8,
    pub(crate) traffic: u8,
    pub(crate) shopper: u64,
    pub(crate) received_ms: i64,
    pub(crate) facts: u64,
}

/// The select list and grouping of a [`FactCountCh`] pass over distinct facts whose
/// day column is `day`, status `status`, class `traffic`, receive time `received`.
pub(crate) fn fact_counts(
    group: &str,
    day: &str,
    status: &str,
    traffic: &str,
    received: &str,
) -> (String, String) {
    (
        format!(
            "SELECT {group}, {day}, action, if(action = '{CLICK}', dedup_key, '') AS click_key, \
             {status}, {traffic}, if(action = '{CLICK}', shopper, toUInt64(0)) AS click_shopper, \
             if(action = '{CLICK}', {received}, toInt64(0)) AS click_received, count()"
        ),
        format!(
            " GROUP BY {group}, {day}, action, click_key, {status}, {traffic}, click_shopper, \
             click_received"
        ),
    )
}

/// A stored traffic class code.
pub(crate) fn parse_traffic(code: u8) -> Result<TrafficClass, StoreError> {
    TrafficClass::from_code(code).ok_or_else(|| corrupt("traffic class", &code.to_string()))
}

/// A column name of a table.
#[derive(Row, Deserialize)]
pub(crate) struct ColumnCh {
    pub(crate) name: String,
}

/// A row of `views`.
#[derive(Row, Serialize)]
pub(crate) struct ViewCh<'a> {
    pub(crate) ad_id: &'a str,
    pub(crate) video_id: &'a str,
    pub(crate) tracking_id: &'a str,
    pub(crate) campaign_id: &'a str,
    pub(crate) day: i32,
    pub(crate) version: u32,
    pub(crate) creative_view: u8,
    pub(crate) play: u8,
    pub(crate) first_quartile: u8,
    pub(crate) midpoint: u8,
    pub(crate) third_quartile: u8,
    pub(crate) complete: u8,
    pub(crate) skips: u32,
    pub(crate) pauses: u32,
    pub(crate) resumes: u32,
    pub(crate) mutes: u32,
    pub(crate) unmutes: u32,
    pub(crate) funnel_gaps: u32,
    pub(crate) repeated_milestones: u32,
    pub(crate) ad_id_status: u8,
    pub(crate) served_repeat: u8,
}

/// A row of `product_facts`.
#[derive(Row, Serialize)]
pub(crate) struct ProductFactCh<'a> {
    pub(crate) campaign_id: &'a str,
    pub(crate) ad_id: &'a str,
    pub(crate) catalog_id: &'a str,
    pub(crate) product_code: &'a str,
    pub(crate) day: i32,
    pub(crate) action: &'a str,
    pub(crate) dedup_key: String,
    pub(crate) ad_id_status: u8,
    pub(crate) traffic: u8,
    pub(crate) shopper: u64,
    pub(crate) received_ms: i64,
    pub(crate) time_ms: i64,
}

/// A row of `cart_events`.
#[derive(Row, Serialize, Deserialize)]
pub(crate) struct CartEventCh<'a> {
    pub(crate) tracking_id: &'a str,
    pub(crate) catalog_id: &'a str,
    pub(crate) product_code: &'a str,
    pub(crate) dedup_key: String,
    pub(crate) time_ms: i64,
    pub(crate) units: u64,
    pub(crate) value: Option<f64>,
    pub(crate) campaign_id: &'a str,
    pub(crate) ad_id: &'a str,
    pub(crate) prev_units: u64,
    pub(crate) transition: &'a str,
    pub(crate) version: u32,
    pub(crate) ad_id_status: u8,
}

impl CartEventCh<'_> {
    pub(crate) fn to_row(&self) -> Result<CartEventRow, StoreError> {
        Ok(CartEventRow {
            key: CartKey {
                tracking_id: self.tracking_id.to_owned(),
                catalog_id: self.catalog_id.to_owned(),
                product_code: self.product_code.to_owned(),
            },
            fact: CartFact {
                dedup_key: parse_dedup(&self.dedup_key)?,
                time_ms: self.time_ms,
                units: self.units,
                value: self.value,
                campaign_id: self.campaign_id.to_owned(),
                ad_id: self.ad_id.to_owned(),
                status: parse_status(self.ad_id_status)?,
            },
            prev_units: self.prev_units,
            transition: parse_transition(self.transition)?,
            version: self.version,
        })
    }
}

/// A row of `cart_lines` (`gone`: the line left this place).
#[derive(Row, Serialize, Deserialize)]
pub(crate) struct CartLineCh {
    pub(crate) campaign_id: String,
    pub(crate) day: i32,
    pub(crate) tracking_id: String,
    pub(crate) catalog_id: String,
    pub(crate) product_code: String,
    pub(crate) version: u32,
    pub(crate) gone: u8,
    pub(crate) last_ms: i64,
    pub(crate) units: u64,
    pub(crate) last_value: Option<f64>,
    pub(crate) adds: u64,
    pub(crate) increments: u64,
    pub(crate) decrements: u64,
    pub(crate) removals: u64,
    pub(crate) ad_id: String,
    pub(crate) ad_id_status: u8,
}

impl CartLineCh {
    /// The row of a line at its place.
    pub(crate) fn of(l: &CartLine) -> Self {
        Self {
            campaign_id: l.place.campaign_id.clone(),
            day: l.place.day,
            tracking_id: l.place.tracking_id.clone(),
            catalog_id: l.place.catalog_id.clone(),
            product_code: l.place.product_code.clone(),
            version: l.version,
            gone: 0,
            last_ms: l.last_ms,
            units: l.units,
            last_value: l.last_value,
            adds: l.adds,
            increments: l.increments,
            decrements: l.decrements,
            removals: l.removals,
            ad_id: l.ad_id.clone(),
            ad_id_status: l.status.rank(),
        }
    }

    /// The row that marks a line gone from `place`, at the line's new version.
    pub(crate) fn gone(place: &LinePlace, version: u32) -> Self {
        Self {
            campaign_id: place.campaign_id.clone(),
            day: place.day,
            tracking_id: place.tracking_id.clone(),
            catalog_id: place.catalog_id.clone(),
            product_code: place.product_code.clone(),
            version,
            gone: 1,
            last_ms: 0,
            units: 0,
            last_value: None,
            adds: 0,
            increments: 0,
            decrements: 0,
            removals: 0,
            ad_id: String::new(),
            ad_id_status: 0,
        }
    }

    pub(crate) fn to_line(&self) -> Result<CartLine, StoreError> {
        Ok(CartLine {
            place: LinePlace {
                campaign_id: self.campaign_id.clone(),
                day: self.day,
                tracking_id: self.tracking_id.clone(),
                catalog_id: self.catalog_id.clone(),
                product_code: self.product_code.clone(),
            },
            version: self.version,
            last_ms: self.last_ms,
            units: self.units,
            last_value: self.last_value,
            adds: self.adds,
            increments: self.increments,
            decrements: self.decrements,
            removals: self.removals,
            ad_id: self.ad_id.clone(),
            status: parse_status(self.ad_id_status)?,
        })
    }
}

/// A row of `order_lines`. `revenue_exact` and `currency` are `""` in rows written
/// before exact money: those read their `revenue` (`f64`) in USD, as before.
#[derive(Row, Serialize, Deserialize)]
pub(crate) struct OrderLineCh {
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
    pub(crate) revenue_exact: String,
    pub(crate) currency: String,
}

impl From<&OrderLine> for OrderLineCh {
    fn from(l: &OrderLine) -> Self {
        Self {
            order_id: l.order_id.clone(),
            line: l.line,
            customer_id: l.customer_id.clone(),
            session_id: l.session_id.clone(),
            time_ms: l.time_ms,
            catalog_id: l.catalog_id.clone(),
            product_code: l.product_code.clone(),
            quantity: l.quantity,
            // For dashboards only; reports read `revenue_exact`.
            revenue: l.revenue.amount.to_string().parse().unwrap_or(0.0),
            ad_id: l.ad_id.clone(),
            order_ad_ids: l.order_ad_ids.clone(),
            revenue_exact: l.revenue.amount.to_string(),
            currency: l.revenue.currency.code().to_owned(),
        }
    }
}

impl TryFrom<OrderLineCh> for OrderLine {
    type Error = StoreError;

    fn try_from(l: OrderLineCh) -> Result<Self, StoreError> {
        let currency = match l.currency.as_str() {
            "" => money::DEFAULT_CURRENCY,
            c => Currency::from_code(c).ok_or_else(|| corrupt("currency", c))?,
        };
        let revenue = if l.revenue_exact.is_empty() {
            Money::from_legacy_f64(l.revenue, currency)
                .ok_or_else(|| corrupt("revenue", &l.revenue.to_string()))?
        } else {
            rust_decimal::Decimal::from_str_exact(&l.revenue_exact)
                .map(|a| Money::new(a, currency))
                .map_err(|_| corrupt("revenue_exact", &l.revenue_exact))?
        };
        Ok(Self {
            order_id: l.order_id,
            line: l.line,
            customer_id: l.customer_id,
            session_id: l.session_id,
            time_ms: l.time_ms,
            catalog_id: l.catalog_id,
            product_code: l.product_code,
            quantity: l.quantity,
            revenue,
            ad_id: l.ad_id,
            order_ad_ids: l.order_ad_ids,
        })
    }
}

/// A row of `attribution_touches`.
#[derive(Row, Serialize, Deserialize)]
pub(crate) struct TouchCh {
    pub(crate) shopper: String,
    pub(crate) time_ms: i64,
    pub(crate) dedup_key: String,
    pub(crate) kind: String,
    pub(crate) ad_id: String,
    pub(crate) campaign_id: String,
    pub(crate) catalog_id: String,
    pub(crate) product_code: String,
}

impl TouchCh {
    pub(crate) fn into_touch(self) -> Result<Touch, StoreError> {
        Ok(Touch {
            dedup_key: parse_dedup(&self.dedup_key)?,
            kind: TouchKind::parse(&self.kind).ok_or_else(|| corrupt("touch kind", &self.kind))?,
            shopper: self.shopper,
            ad_id: self.ad_id,
            campaign_id: self.campaign_id,
            catalog_id: self.catalog_id,
            product_code: self.product_code,
            time_ms: self.time_ms,
        })
    }
}

/// An order id.
#[derive(Row, Deserialize)]
pub(crate) struct OrderIdCh {
    pub(crate) order_id: String,
}

/// A group of the funnel report, as the server sums it.
#[derive(Row, Deserialize)]
pub(crate) struct FunnelAgg {
    pub(crate) campaign_id: String,
    pub(crate) ad_id: String,
    pub(crate) video_id: String,
    pub(crate) day: i32,
    pub(crate) views: u64,
    pub(crate) creative_views: u64,
    pub(crate) plays: u64,
    pub(crate) first_quartiles: u64,
    pub(crate) midpoints: u64,
    pub(crate) third_quartiles: u64,
    pub(crate) completes: u64,
    pub(crate) skips: u64,
    pub(crate) pauses: u64,
    pub(crate) resumes: u64,
    pub(crate) mutes: u64,
    pub(crate) unmutes: u64,
    pub(crate) funnel_gaps: u64,
    pub(crate) repeated_milestones: u64,
    pub(crate) ad_id_status: u8,
    pub(crate) invalid_views: u64,
    pub(crate) invalid_plays: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dedup_keys_round_trip_as_fixed_width_hex() {
        for k in [0u128, 1, u128::MAX, 0xabc << 64] {
            let s = dedup_hex(k);
            assert_eq!(s.len(), 32);
            assert_eq!(parse_dedup(&s).expect("hex"), k);
        }
        assert!(
            dedup_hex(2) < dedup_hex(10),
            "string order is numeric order"
        );
        assert!(parse_dedup("xyz").is_err());
    }

    #[test]
    fn transitions_round_trip() {
        for t in [
            Transition::Add,
            Transition::Increment,
            Transition::Decrement,
            Transition::Removal,
            Transition::Unchanged,
        ] {
            assert_eq!(parse_transition(t.as_str()).expect("known"), t);
        }
    }
}

/// A row of `rollups` ([`crate::model::tallies`]); `stamp` is the record's offset
/// plus one (the engine's version column is unsigned; `0` is never written).
#[derive(Row, Serialize, Deserialize)]
pub(crate) struct TallyCh {
    pub(crate) campaign_id: String,
    pub(crate) scope: u8,
    pub(crate) grain: u8,
    pub(crate) bucket: i32,
    pub(crate) creative: String,
    pub(crate) catalog_id: String,
    pub(crate) product_code: String,
    pub(crate) log_partition: i32,
    pub(crate) metric: u16,
    pub(crate) value: i64,
    pub(crate) stamp: u64,
}

impl TallyCh {
    /// The row of one tally. A backfill's row is stamped `u64::MAX - value`, so of two
    /// backfills of one key the smaller count wins: aggregators started together on
    /// a store written before tallies may each count it, and one that already wrote
    /// its first batch would make a later backfill count that batch's events again
    /// (a backfill only grows with the facts it reads).
    pub(crate) fn of(k: &TallyKey, t: Tally) -> Self {
        let stamp = if k.place.partition == BACKFILL_PARTITION {
            u64::MAX - u64::try_from(t.value).unwrap_or(0)
        } else {
            u64::try_from(t.stamp.saturating_add(1)).unwrap_or(0)
        };
        let p = &k.place;
        Self {
            campaign_id: p.campaign_id.to_string(),
            scope: p.scope as u8,
            grain: p.grain as u8,
            bucket: p.bucket,
            creative: p.creative.to_string(),
            catalog_id: p.catalog_id.to_string(),
            product_code: p.product_code.to_string(),
            log_partition: p.partition,
            metric: k.metric.code(),
            value: t.value,
            stamp,
        }
    }

    /// The tally a row holds.
    pub(crate) fn tally(self) -> Result<(TallyKey, Tally), StoreError> {
        let metric = metric_of(self.metric)?;
        let scope = scope_of(self.scope)?;
        let grain = grain_of(self.grain)?;
        Ok((
            TallyKey {
                place: Place {
                    campaign_id: self.campaign_id.into(),
                    scope,
                    grain,
                    bucket: self.bucket,
                    creative: self.creative.into(),
                    catalog_id: self.catalog_id.into(),
                    product_code: self.product_code.into(),
                    partition: self.log_partition,
                },
                metric,
            },
            Tally {
                value: self.value,
                stamp: i64::try_from(self.stamp).unwrap_or(i64::MAX) - 1,
            },
        ))
    }
}

/// The scope of a stored code.
pub(crate) fn scope_of(code: u8) -> Result<Scope, StoreError> {
    Scope::from_code(code).ok_or_else(|| corrupt("scope", &code.to_string()))
}

/// The grain of a stored code.
fn grain_of(code: u8) -> Result<Grain, StoreError> {
    Grain::from_code(code).ok_or_else(|| corrupt("grain", &code.to_string()))
}

/// The metric of a stored code.
pub(crate) fn metric_of(code: u16) -> Result<Metric, StoreError> {
    Metric::from_code(code).ok_or_else(|| corrupt("metric", &code.to_string()))
}

/// A tally summed over partitions, as the server sums it, with the part of the
/// read that found it (`compact.rs`: open days, closed days, dirty places).
#[derive(Row, Deserialize)]
pub(crate) struct SummedTallyCh {
    pub(crate) part: u8,
    // The place's text read as it is kept ([`Text`]: inline up to 24 bytes), not
    // as heap strings moved into it: a report by hour reads 60,000 rows.
    pub(crate) campaign_id: Text,
    pub(crate) scope: u8,
    pub(crate) grain: u8,
    pub(crate) bucket: i32,
    pub(crate) creative: Text,
    pub(crate) catalog_id: Text,
    pub(crate) product_code: Text,
    pub(crate) metric: u16,
    pub(crate) value: i64,
}

impl SummedTallyCh {
    /// The summed tally a row holds (`None` for the backfill's marker).
    pub(crate) fn summed(self) -> Result<Option<SummedTally>, StoreError> {
        let metric = metric_of(self.metric)?;
        if matches!(
            metric,
            Metric::Backfilled
                | Metric::SalesBackfilled
                | Metric::CartsBackfilled
                | Metric::LinesBackfilled
                | Metric::ZonesBackfilled
                | Metric::HoursBackfilled
        ) {
            return Ok(None);
        }
        Ok(Some(SummedTally {
            place: Place {
                campaign_id: self.campaign_id,
                scope: scope_of(self.scope)?,
                grain: grain_of(self.grain)?,
                bucket: self.bucket,
                creative: self.creative,
                catalog_id: self.catalog_id,
                product_code: self.product_code,
                partition: 0,
            },
            metric,
            value: self.value,
        }))
    }
}
