//! The tracking ids of an event whose consent string refused our processing, replaced
//! before anything is written by keyed hashes whose key changes every UTC day: copies
//! of one beacon within a day carry equal ids (so the edge's window and the
//! aggregator's dedup keys still drop them, and a session's events of one day still
//! make one funnel), while nothing links one day's ids to the next day's, or to the
//! shopper, without the deployment's secret (`RM_CONSENT_ID_KEY`). The day is the
//! edge's receive day (UTC), not the beacon's own timestamp, which its sender chooses.
//!
//! `anon-` + 32 hex digits: HMAC-SHA256 over the field's name and value, keyed with
//! HMAC-SHA256(secret, `rm-consent-day|YYYY-MM-DD`).

use chrono::NaiveDate;
use hmac::{Hmac, Mac};
use rm_schemas::InteractionEvent;
use sha2::Sha256;

/// Every pseudonym starts so (no id a beacon sends is read as one by mistake: the
/// prefix says where it came from).
pub const PREFIX: &str = "anon-";

/// The keyed hashes of one deployment.
#[derive(Clone)]
pub struct Pseudonyms {
    secret: Vec<u8>,
}

impl std::fmt::Debug for Pseudonyms {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Pseudonyms(..)")
    }
}

fn mac(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    // HMAC takes a key of any length: `new_from_slice` cannot fail for it.
    let Ok(mut m) = Hmac::<Sha256>::new_from_slice(key) else {
        return [0; 32];
    };
    for p in parts {
        m.update(p);
    }
    m.finalize().into_bytes().into()
}

impl Pseudonyms {
    /// Keyed with the deployment's `secret`.
    pub fn new(secret: &[u8]) -> Self {
        Self {
            secret: secret.to_vec(),
        }
    }

    /// The key of one UTC day.
    fn day_key(&self, day: NaiveDate) -> [u8; 32] {
        let label = format!("rm-consent-day|{}", day.format("%Y-%m-%d"));
        mac(&self.secret, &[label.as_bytes()])
    }

    /// The pseudonym of `value` in `field` on `day`.
    pub fn of(&self, day: NaiveDate, field: &str, value: &str) -> String {
        keyed(&self.day_key(day), field, value)
    }

    /// Replaces the event's tracking ids (session, customer, DTM token) by their
    /// pseudonyms of `day` (the day's key derived once).
    pub fn replace(&self, event: &mut InteractionEvent, day: NaiveDate) {
        let key = self.day_key(day);
        for (field, id) in [
            ("sessionId", &mut event.session_id),
            ("customerId", &mut event.customer_id),
            ("dtmToken", &mut event.dtm_token),
        ] {
            if let Some(v) = id.as_mut() {
                *v = keyed(&key, field, v);
            }
        }
    }
}

/// The pseudonym of `value` in `field` under a day's `key`.
fn keyed(key: &[u8; 32], field: &str, value: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let h = mac(key, &[field.as_bytes(), b"\0", value.as_bytes()]);
    let mut out = String::with_capacity(PREFIX.len() + 32);
    out.push_str(PREFIX);
    for b in &h[..16] {
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 0xF)]));
    }
    out
}
