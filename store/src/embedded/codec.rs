//! The embedded store's encoding: binary keys (postcard of the identifying fields,
//! after an 8-byte event time for facts) and values (postcard behind a one-byte tag;
//! JSON, the first format, still read). A test pins the bytes.
//!
//! Product and ad facts gained their traffic class, shopper and receive time (issue
//! 15) under tag [`FACT_V2`]; a value under tag [`POSTCARD`] is the layout before it,
//! read into a fact of valid traffic without receive time (so it counts as it did).
//! A view's row gained `served_repeat` (issue 26) under tag [`VIEW_V2`]; one under
//! tag [`POSTCARD`] is read as no repeat (as it counted). A served ad's state gained
//! the events its tallies count under tag [`SERVED_V2`]; one under [`POSTCARD`] is
//! read as remembering none.

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::model::ads::AdFact;
use crate::model::attribution::Touch;
use crate::model::funnel::{ViewFact, ViewRow};
use crate::model::products::ProductFact;
use crate::model::served::{Encoding, ServedAd};
use crate::StoreError;

/// An entity's key (a view's, a cart's): postcard of its fields (strings
/// length-prefixed, so two keys are equal only when every field is).
pub(super) fn key<T: Serialize + ?Sized>(k: &T) -> Vec<u8> {
    postcard::to_allocvec(k).unwrap_or_default()
}

/// Tag of a served ad's row: the ad id, then the state's own bytes
/// ([`ServedAd::to_bytes`]).
pub(super) const SERVED_V2: u8 = 4;

/// A served ad's row (ad id and state).
pub(super) fn served_val(ad_id: &str, state: &ServedAd) -> Vec<u8> {
    let mut v = postcard::to_extend(ad_id, vec![SERVED_V2]).unwrap_or_default();
    v.extend(state.to_bytes());
    v
}

/// A served ad's row, of either layout.
pub(super) fn parse_served(b: &[u8]) -> Result<(String, ServedAd), StoreError> {
    let (encoding, rest) = match b.split_first() {
        Some((&SERVED_V2, rest)) => (Encoding::V2, rest),
        Some((&POSTCARD, rest)) => (Encoding::V1, rest),
        _ => return Err(corrupt("a served ad's row of no known layout")),
    };
    let (ad_id, state): (String, &[u8]) = postcard::take_from_bytes(rest).map_err(corrupt)?;
    Ok((
        ad_id,
        ServedAd::from_bytes(state, encoding).map_err(corrupt)?,
    ))
}

/// First byte of a value in postcard; a JSON value (the first format, still read)
/// starts with `[` or `{`.
pub(super) const POSTCARD: u8 = 1;

pub(super) fn val<T: Serialize>(v: &T) -> Vec<u8> {
    postcard::to_extend(v, vec![POSTCARD]).unwrap_or_default()
}

/// Tag of a product or ad fact with its traffic class, shopper and receive time.
pub(super) const FACT_V2: u8 = 2;

/// A product or ad fact's value.
pub(super) fn fact_val<T: Serialize>(v: &T) -> Vec<u8> {
    postcard::to_extend(v, vec![FACT_V2]).unwrap_or_default()
}

/// A product fact as stored before traffic classes (tag [`POSTCARD`]).
#[derive(serde::Deserialize)]
struct ProductFactV1 {
    group: crate::model::products::ProductGroup,
    action: crate::model::products::ProductAction,
    dedup_key: u128,
    status: crate::model::status::AdIdStatus,
    time_ms: i64,
}

/// An ad fact as stored before traffic classes (tag [`POSTCARD`]).
#[derive(serde::Deserialize)]
struct AdFactV1 {
    campaign_id: String,
    ad_id: String,
    action: crate::model::ads::AdAction,
    dedup_key: u128,
    time_ms: i64,
    status: crate::model::status::AdIdStatus,
}

/// A product fact's value, in any of its layouts.
pub(crate) fn parse_product_fact(b: &[u8]) -> Result<ProductFact, StoreError> {
    match b.split_first() {
        Some((&FACT_V2, rest)) => postcard::from_bytes(rest).map_err(corrupt),
        Some((&POSTCARD, rest)) => {
            let p: ProductFactV1 = postcard::from_bytes(rest).map_err(corrupt)?;
            Ok(ProductFact {
                group: p.group,
                action: p.action,
                dedup_key: p.dedup_key,
                status: p.status,
                time_ms: p.time_ms,
                traffic: Default::default(),
                shopper: 0,
                received_ms: 0,
            })
        }
        _ => serde_json::from_slice(b).map_err(corrupt),
    }
}

/// An ad fact's value, in any of its layouts.
pub(crate) fn parse_ad_fact(b: &[u8]) -> Result<AdFact, StoreError> {
    match b.split_first() {
        Some((&FACT_V2, rest)) => postcard::from_bytes(rest).map_err(corrupt),
        Some((&POSTCARD, rest)) => {
            let a: AdFactV1 = postcard::from_bytes(rest).map_err(corrupt)?;
            Ok(AdFact {
                campaign_id: a.campaign_id,
                ad_id: a.ad_id,
                action: a.action,
                dedup_key: a.dedup_key,
                time_ms: a.time_ms,
                status: a.status,
                traffic: Default::default(),
                shopper: 0,
                received_ms: 0,
            })
        }
        _ => serde_json::from_slice(b).map_err(corrupt),
    }
}

pub(super) fn corrupt(e: impl std::fmt::Display) -> StoreError {
    StoreError::Refused(format!("corrupt store row: {e}"))
}

pub(super) fn parse<T: DeserializeOwned>(b: &[u8]) -> Result<T, StoreError> {
    match b.split_first() {
        Some((&POSTCARD, rest)) => postcard::from_bytes(rest).map_err(corrupt),
        _ => serde_json::from_slice(b).map_err(corrupt),
    }
}

/// The first 8 bytes of a fact's key: byte order is time order.
pub(super) fn time_prefix(ms: i64) -> [u8; 8] {
    ((ms as u64) ^ (1 << 63)).to_be_bytes()
}

/// A fact's key: its event time, then postcard of the rest of its identity.
pub(super) fn timed_key<T: Serialize>(ms: i64, rest: &T) -> Vec<u8> {
    postcard::to_extend(rest, time_prefix(ms).to_vec()).unwrap_or_default()
}

/// A product fact's key.
pub(super) fn product_key(p: &ProductFact) -> Vec<u8> {
    timed_key(
        p.time_ms,
        &(
            p.dedup_key,
            p.action,
            p.status,
            &p.group,
            p.traffic,
            p.received_ms,
        ),
    )
}

/// An ad fact's key.
pub(super) fn ad_key(a: &AdFact) -> Vec<u8> {
    timed_key(
        a.time_ms,
        &(
            &a.campaign_id,
            &a.ad_id,
            a.action,
            a.dedup_key,
            a.status,
            a.traffic,
            a.received_ms,
        ),
    )
}

/// A touch's key.
pub(super) fn touch_key(t: &Touch) -> Vec<u8> {
    timed_key(t.time_ms, &(t.shopper.as_str(), t.dedup_key))
}

/// A view's row: the derived `ViewRow`, then its facts.
pub(super) fn view_val(row: &ViewRow, facts: &[ViewFact]) -> Vec<u8> {
    postcard::to_extend(&(row, facts), vec![VIEW_V2]).unwrap_or_default()
}

/// Tag of a view's row with `served_repeat`.
pub(super) const VIEW_V2: u8 = 3;

/// A view's row as stored before `served_repeat` (tag [`POSTCARD`]).
#[derive(serde::Deserialize)]
struct ViewRowV1 {
    key: crate::model::funnel::ViewKey,
    campaign_id: String,
    day: i32,
    version: u32,
    milestones: [u8; 6],
    controls: [u32; 5],
    funnel_gaps: u32,
    repeated_milestones: u32,
    ad_id_status: crate::model::status::AdIdStatus,
}

/// The `ViewRow` of a view's row, without decoding its facts.
pub(super) fn parse_view_row(b: &[u8]) -> Result<(ViewRow, &[u8]), StoreError> {
    match b.split_first() {
        Some((&VIEW_V2, rest)) => postcard::take_from_bytes(rest).map_err(corrupt),
        Some((&POSTCARD, rest)) => {
            let (v, rest): (ViewRowV1, &[u8]) = postcard::take_from_bytes(rest).map_err(corrupt)?;
            let row = ViewRow {
                key: v.key,
                campaign_id: v.campaign_id,
                day: v.day,
                version: v.version,
                milestones: v.milestones,
                controls: v.controls,
                funnel_gaps: v.funnel_gaps,
                repeated_milestones: v.repeated_milestones,
                ad_id_status: v.ad_id_status,
                served_repeat: false,
            };
            Ok((row, rest))
        }
        _ => Err(corrupt("a view row is not postcard")),
    }
}

/// The facts of a view's row.
pub(super) fn parse_view_facts(b: &[u8]) -> Result<Vec<ViewFact>, StoreError> {
    let (_, rest) = parse_view_row(b)?;
    postcard::from_bytes(rest).map_err(corrupt)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::status::AdIdStatus;
    use rm_schemas::InteractionType;

    fn facts() -> Vec<ViewFact> {
        vec![
            ViewFact {
                dedup_key: 0x0123_4567_89ab_cdef_0123_4567_89ab_cdef,
                kind: InteractionType::VideoPlay,
                time_ms: 1_795_000_000_000,
                status: AdIdStatus::Verified,
            },
            ViewFact {
                dedup_key: 7,
                kind: InteractionType::VideoComplete,
                time_ms: 1_795_000_030_000,
                status: AdIdStatus::Verified,
            },
        ]
    }

    /// Rows written as JSON (the first format) still read; new rows are postcard,
    /// much smaller.
    #[test]
    fn values_read_in_both_formats() {
        let json = serde_json::to_vec(&facts()).expect("json");
        assert_eq!(parse::<Vec<ViewFact>>(&json).expect("json row"), facts());
        let bin = val(&facts());
        assert_eq!(bin[0], POSTCARD);
        assert!(
            bin.len() * 3 < json.len(),
            "{} vs {}",
            bin.len(),
            json.len()
        );
        assert_eq!(parse::<Vec<ViewFact>>(&bin).expect("postcard row"), facts());
        assert!(matches!(
            parse::<Vec<ViewFact>>(&[POSTCARD, 0xff]),
            Err(StoreError::Refused(_))
        ));
    }

    /// postcard writes enum variants by position: reordering `InteractionType` or
    /// `AdIdStatus` would misread stored rows, so the bytes are pinned.
    #[test]
    fn the_postcard_encoding_is_pinned() {
        let hex: String = val(&facts()[1..].to_vec())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(hex, PINNED);
    }

    /// A view row written before `served_repeat` (tag 1) reads as no repeat; one
    /// written now keeps it, and its facts follow the row either way.
    #[test]
    fn view_rows_of_both_layouts_read_back() {
        let mut row = ViewRow {
            key: crate::model::funnel::ViewKey {
                ad_id: "rm1.c.x".into(),
                video_id: "v".into(),
                tracking_id: "s".into(),
            },
            campaign_id: "c".into(),
            day: 20_000,
            version: 2,
            milestones: [1, 1, 0, 0, 0, 0],
            controls: [0, 1, 0, 0, 0],
            funnel_gaps: 0,
            repeated_milestones: 0,
            ad_id_status: Default::default(),
            served_repeat: true,
        };
        let now = view_val(&row, &facts());
        assert_eq!(now[0], VIEW_V2);
        let (back, rest) = parse_view_row(&now).expect("v2");
        assert_eq!(back, row);
        assert_eq!(
            postcard::from_bytes::<Vec<ViewFact>>(rest).expect("facts"),
            facts()
        );
        // The previous layout: the same fields without the last one, tag 1.
        let old = val(&(
            (
                &row.key,
                &row.campaign_id,
                row.day,
                row.version,
                row.milestones,
                row.controls,
                row.funnel_gaps,
                row.repeated_milestones,
                row.ad_id_status,
            ),
            facts(),
        ));
        assert_eq!(old[0], POSTCARD);
        row.served_repeat = false;
        assert_eq!(parse_view_facts(&old).expect("facts"), facts());
        assert_eq!(parse_view_row(&old).expect("v1").0, row);
    }

    /// Tag, one fact: dedup key 7, `videoComplete` (variant 5), the time (zigzag
    /// varint), `Verified` (variant 0).
    const PINNED: &str = "01010705e0ccb6e5bd6800";
}
