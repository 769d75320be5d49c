//! The rows of the ageing tests: one shopper's ([`OLD`]), of a given day.

use super::super::*;
use crate::model::ads::{AdAction, AdFact};
use crate::model::attribution::TouchKind;
use crate::model::carts::{CartFact, CartKey, Transition};
use crate::model::funnel::{ViewKey, ViewRow};
use crate::model::products::{ProductAction, ProductFact, ProductGroup};
use crate::model::traffic::shopper_hash;

/// The shopper's id.
pub(super) const OLD: &str = "shopper-1";
/// A day, ms.
pub(super) const DAY: i64 = crate::model::DAY_MS;

pub(super) fn view(video: &str, day: i32) -> (Vec<u8>, Vec<u8>) {
    let row = ViewRow {
        key: ViewKey {
            ad_id: "rm1.c.ad".into(),
            video_id: video.into(),
            tracking_id: OLD.into(),
        },
        campaign_id: "c".into(),
        day,
        version: 1,
        milestones: [1, 0, 0, 0, 0, 0],
        controls: [0; 5],
        funnel_gaps: 0,
        repeated_milestones: 0,
        ad_id_status: Default::default(),
        served_repeat: false,
    };
    let fact = ViewFact {
        dedup_key: 1,
        kind: rm_schemas::InteractionType::VideoPlay,
        time_ms: i64::from(day) * DAY,
        status: Default::default(),
    };
    (key(&row.key), view_val(&row, &[fact]))
}

pub(super) fn cart(product: &str, days: &[i64]) -> (Vec<u8>, Vec<u8>) {
    let k = CartKey {
        tracking_id: OLD.into(),
        catalog_id: "cat".into(),
        product_code: product.into(),
    };
    let rows: Vec<CartEventRow> = days
        .iter()
        .enumerate()
        .map(|(i, d)| CartEventRow {
            key: k.clone(),
            fact: CartFact {
                dedup_key: i as u128,
                time_ms: d * DAY,
                units: 1,
                value: None,
                campaign_id: "c".into(),
                ad_id: "rm1.c.ad".into(),
                status: Default::default(),
            },
            prev_units: 0,
            transition: Transition::Add,
            version: 1,
        })
        .collect();
    (key(&k), val(&rows))
}

pub(super) fn product(day: i64) -> ProductFact {
    ProductFact {
        group: ProductGroup {
            campaign_id: "c".into(),
            ad_id: "rm1.c.ad".into(),
            catalog_id: "cat".into(),
            product_code: "p".into(),
            day: 0,
        },
        action: ProductAction::Click,
        dedup_key: day as u128,
        status: Default::default(),
        time_ms: day * DAY,
        traffic: Default::default(),
        shopper: shopper_hash(OLD),
        received_ms: day * DAY,
    }
}

pub(super) fn ad(day: i64) -> AdFact {
    AdFact {
        campaign_id: "c".into(),
        ad_id: "rm1.c.ad".into(),
        action: AdAction::Click,
        dedup_key: day as u128,
        time_ms: day * DAY,
        status: Default::default(),
        traffic: Default::default(),
        shopper: shopper_hash(OLD),
        received_ms: day * DAY,
    }
}

pub(super) fn touch(day: i64) -> Touch {
    Touch {
        shopper: format!("customer:{OLD}"),
        dedup_key: day as u128,
        kind: TouchKind::ProductClick,
        ad_id: "rm1.c.ad".into(),
        campaign_id: "c".into(),
        catalog_id: "cat".into(),
        product_code: "p".into(),
        time_ms: day * DAY,
    }
}

pub(super) fn line(day: i64) -> OrderLine {
    OrderLine {
        order_id: format!("o-{day}"),
        line: 0,
        customer_id: OLD.into(),
        session_id: "session-1".into(),
        time_ms: day * DAY,
        catalog_id: "cat".into(),
        product_code: "p".into(),
        quantity: 1,
        revenue: rm_schemas::money::Money::parse("5.00", rm_schemas::money::DEFAULT_CURRENCY)
            .expect("money")
            .expect("amount"),
        ad_id: String::new(),
        order_ad_ids: vec![],
    }
}
