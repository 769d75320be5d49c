//! A validated ad-interaction event: the beacon's parameters as typed fields.
//!
//! Field names on the wire (query string, log record, JSON) are the spec's
//! camelCase parameter names. Optional fields absent on the beacon are `None` and are
//! left out of the record.

use chrono::{DateTime, FixedOffset};
use serde::{Deserialize, Serialize};

use crate::interaction::InteractionType;

/// Largest accepted `units` (a cart never holds more of one product).
pub const MAX_UNITS: u64 = 1_000_000;

/// A validated interaction event. Construct it with [`crate::parse_beacon`], which
/// guarantees the per-type requirements of the spec.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InteractionEvent {
    /// The realised ad identifier (`partnerAdId` of the served ad).
    pub ad_id: String,
    /// One of the 15 interaction types.
    pub interaction_type: InteractionType,
    /// Time of the interaction as the client sent it (ISO 8601 with offset).
    pub timestamp: DateTime<FixedOffset>,
    /// Tracking id: the session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Tracking id: the customer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub customer_id: Option<String>,
    /// Tracking id: a DTM token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dtm_token: Option<String>,
    /// The creative's `UniversalAdId` idValue (video events).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub video_id: Option<String>,
    /// Product code (product events and cart).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub product_code: Option<String>,
    /// Catalog id (product events and cart).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog_id: Option<String>,
    /// Creative element id (creativeClick).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creative_id: Option<String>,
    /// Absolute current units in the cart (cart).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub units: Option<u64>,
    /// Value of the cart line (cart, optional).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversion_value: Option<f64>,
    /// IAB TCF consent string, kept with the event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iab_consent_string: Option<String>,
}

impl InteractionEvent {
    /// An event of `interaction_type` on ad `ad_id` at `timestamp` with no other
    /// parameter (set the ones its type needs with struct update syntax).
    pub fn new(
        ad_id: impl Into<String>,
        interaction_type: InteractionType,
        timestamp: DateTime<FixedOffset>,
    ) -> Self {
        Self {
            ad_id: ad_id.into(),
            interaction_type,
            timestamp,
            session_id: None,
            customer_id: None,
            dtm_token: None,
            video_id: None,
            product_code: None,
            catalog_id: None,
            creative_id: None,
            units: None,
            conversion_value: None,
            iab_consent_string: None,
        }
    }

    /// The tracking id that identifies the shopper: the first present of
    /// `customerId`, `sessionId`, `dtmToken`.
    pub fn tracking_id(&self) -> &str {
        self.customer_id
            .as_deref()
            .or(self.session_id.as_deref())
            .or(self.dtm_token.as_deref())
            .unwrap_or_default()
    }
}
