//! The canonical form of an event and its 128-bit dedup key.
//!
//! **Identifying fields** are every beacon parameter except `iabConsentString`:
//! `interactionType`, `adId`, `timestamp`, `sessionId`, `customerId`, `dtmToken`,
//! `videoId`, `productCode`, `catalogId`, `creativeId`, `units`, `conversionValue`.
//! Together they say *what happened, to which ad, for whom, when*: a player that
//! re-fires a beacon (retry, replayed VAST tracking, a re-render) sends the same
//! values, while a genuinely new interaction differs in at least its time. The consent
//! string is left out because a consent platform may refresh it between a request and
//! its retry, and it does not describe the interaction. Unknown parameters (a
//! `[CACHEBUSTING]` value, `cb=...`) are never part of the event, so they cannot change
//! the key, and neither can parameter order.
//!
//! Canonical form: `v1;` then, for each identifying field present, in the order
//! above, `name:len:value;` (length-prefixed, so no value can forge a boundary).
//! `timestamp` is the UTC instant in nanoseconds since the epoch, so the same instant
//! written with another offset is the same event; `units` is decimal; a
//! `conversionValue` is Rust's shortest round-trip decimal with `-0` folded to `0`.
//! An `adImpression` (the impression endpoint) leaves `timestamp` out: an impression
//! counts once per realised ad id and tracking id, however often and whenever the
//! impression URL is fired (ad ids are unique per served ad). Every other type,
//! `adClick` included, keeps it: a click re-fired identically counts once, and a
//! click with a new time is another event (within the click window of an earlier one
//! by the same shopper, the edge answers it without writing it: [`click_key`]).
//! The key is XXH3-128 of that form (stable across versions and platforms), written as
//! 32 lower-case hex digits. Changing the form changes every key: bump `v1` if ever.
//!
//! **Click windows.** A click (`adClick`, `productClick`, `creativeClick`) also has a
//! [`click_key`]: the same form without `timestamp`, `units` and `conversionValue`,
//! naming the click by type, ad, tracking id and what was clicked (catalog and
//! product, or creative). Clicks of one click key within the click window are one
//! click, whatever their timestamps (`ingest`'s click window).

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::event::InteractionEvent;
use crate::interaction::InteractionType;

/// A 128-bit dedup key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DedupKey(pub u128);

fn push_field(out: &mut Vec<u8>, name: &str, value: &[u8]) {
    out.extend_from_slice(name.as_bytes());
    out.push(b':');
    push_display(out, value.len());
    out.push(b':');
    out.extend_from_slice(value);
    out.push(b';');
}

/// Appends `v`'s `Display` form (writing into a `Vec` cannot fail).
fn push_display(out: &mut Vec<u8>, v: impl fmt::Display) {
    use std::io::Write as _;
    let _ = write!(out, "{v}");
}

/// `push_field` of a value given by its `Display` form, formatted once in place.
fn push_field_display(out: &mut Vec<u8>, name: &str, v: impl fmt::Display) {
    let mut digits = [0u8; 64];
    let mut cursor = std::io::Cursor::new(&mut digits[..]);
    {
        use std::io::Write as _;
        if write!(cursor, "{v}").is_ok() {
            let n = cursor.position() as usize;
            push_field(out, name, &digits[..n]);
            return;
        }
    }
    // Longer than 64 bytes (no integer or float is): format into a String.
    push_field(out, name, v.to_string().as_bytes());
}

/// Writes the canonical form of an event (see the module header) into `out`.
pub fn write_canonical_form(e: &InteractionEvent, out: &mut Vec<u8>) {
    out.extend_from_slice(b"v1;");
    push_field(
        out,
        "interactionType",
        e.interaction_type.as_str().as_bytes(),
    );
    push_field(out, "adId", e.ad_id.as_bytes());
    if e.interaction_type != InteractionType::AdImpression {
        let nanos = e.timestamp.timestamp() as i128 * 1_000_000_000
            + i128::from(e.timestamp.timestamp_subsec_nanos());
        push_field_display(out, "timestamp", nanos);
    }
    let optional = [
        ("sessionId", &e.session_id),
        ("customerId", &e.customer_id),
        ("dtmToken", &e.dtm_token),
        ("videoId", &e.video_id),
        ("productCode", &e.product_code),
        ("catalogId", &e.catalog_id),
        ("creativeId", &e.creative_id),
    ];
    for (name, value) in optional {
        if let Some(v) = value {
            push_field(out, name, v.as_bytes());
        }
    }
    if let Some(u) = e.units {
        push_field_display(out, "units", u);
    }
    if let Some(v) = e.conversion_value {
        let v = if v == 0.0 { 0.0 } else { v };
        push_field_display(out, "conversionValue", v);
    }
}

/// The canonical form of an event (see the module header).
pub fn canonical_form(e: &InteractionEvent) -> String {
    let mut out = Vec::with_capacity(192);
    write_canonical_form(e, &mut out);
    // Every piece is UTF-8 (field names, decimal digits, the event's strings).
    String::from_utf8(out).unwrap_or_default()
}

fn write_click_form(e: &InteractionEvent, out: &mut Vec<u8>) {
    out.extend_from_slice(b"click1;");
    push_field(
        out,
        "interactionType",
        e.interaction_type.as_str().as_bytes(),
    );
    push_field(out, "adId", e.ad_id.as_bytes());
    push_field(out, "trackingId", e.tracking_id().as_bytes());
    for (name, value) in [
        ("catalogId", &e.catalog_id),
        ("productCode", &e.product_code),
        ("creativeId", &e.creative_id),
    ] {
        if let Some(v) = value {
            push_field(out, name, v.as_bytes());
        }
    }
}

/// XXH3-128 of what `write` puts in a reused per-thread buffer: the key without an
/// allocation per event (the buffer grows once to the longest form seen).
fn hash_form(e: &InteractionEvent, write: fn(&InteractionEvent, &mut Vec<u8>)) -> DedupKey {
    thread_local! {
        static BUF: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(Vec::with_capacity(512));
    }
    BUF.with(|b| match b.try_borrow_mut() {
        Ok(mut buf) => {
            buf.clear();
            write(e, &mut buf);
            DedupKey(xxhash_rust::xxh3::xxh3_128(&buf))
        }
        // Re-entered on this thread (cannot happen: `write` calls no hasher).
        Err(_) => {
            let mut buf = Vec::with_capacity(256);
            write(e, &mut buf);
            DedupKey(xxhash_rust::xxh3::xxh3_128(&buf))
        }
    })
}

/// The click key of a click event (module header); `None` for any other type.
pub fn click_key(e: &InteractionEvent) -> Option<DedupKey> {
    use InteractionType::{AdClick, CreativeClick, ProductClick};
    if !matches!(e.interaction_type, AdClick | ProductClick | CreativeClick) {
        return None;
    }
    Some(hash_form(e, write_click_form))
}

impl DedupKey {
    /// The key of an event.
    pub fn of(e: &InteractionEvent) -> Self {
        hash_form(e, write_canonical_form)
    }

    /// Parses 32 hex digits.
    pub fn from_hex(s: &str) -> Option<Self> {
        (s.len() == 32)
            .then(|| u128::from_str_radix(s, 16).ok())
            .flatten()
            .map(Self)
    }
}

impl fmt::Display for DedupKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

impl Serialize for DedupKey {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for DedupKey {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Self::from_hex(&s).ok_or_else(|| serde::de::Error::custom("dedupKey must be 32 hex digits"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn click(kind: InteractionType, ms: i64, session: &str, product: &str) -> InteractionEvent {
        InteractionEvent {
            ad_id: "rm1.c.ad".into(),
            interaction_type: kind,
            timestamp: chrono::DateTime::from_timestamp_millis(ms)
                .expect("time")
                .fixed_offset(),
            session_id: Some(session.into()),
            customer_id: None,
            dtm_token: None,
            video_id: None,
            product_code: Some(product.into()),
            catalog_id: Some("cat".into()),
            creative_id: None,
            units: None,
            conversion_value: None,
            iab_consent_string: None,
        }
    }

    /// The form as first written (`format!` per field), the reference the in-place
    /// writer must match byte for byte: stored keys must not change.
    fn reference_form(e: &InteractionEvent) -> String {
        use std::fmt::Write as _;
        fn field(out: &mut String, name: &str, value: &str) {
            let _ = write!(out, "{name}:{}:{value};", value.len());
        }
        let mut out = String::from("v1;");
        field(&mut out, "interactionType", e.interaction_type.as_str());
        field(&mut out, "adId", &e.ad_id);
        if e.interaction_type != InteractionType::AdImpression {
            let nanos = e.timestamp.timestamp() as i128 * 1_000_000_000
                + i128::from(e.timestamp.timestamp_subsec_nanos());
            field(&mut out, "timestamp", &nanos.to_string());
        }
        for (name, value) in [
            ("sessionId", &e.session_id),
            ("customerId", &e.customer_id),
            ("dtmToken", &e.dtm_token),
            ("videoId", &e.video_id),
            ("productCode", &e.product_code),
            ("catalogId", &e.catalog_id),
            ("creativeId", &e.creative_id),
        ] {
            if let Some(v) = value {
                field(&mut out, name, v);
            }
        }
        if let Some(u) = e.units {
            field(&mut out, "units", &u.to_string());
        }
        if let Some(v) = e.conversion_value {
            let v = if v == 0.0 { 0.0 } else { v };
            field(&mut out, "conversionValue", &v.to_string());
        }
        out
    }

    fn opt(s: Option<String>) -> Option<String> {
        s.filter(|v| !v.is_empty())
    }

    proptest! {
        #[test]
        fn the_in_place_form_is_the_reference_form(
            kind in 0usize..17,
            ad in "\\PC{0,40}",
            ns in -4_000_000_000_000_000_000i64..4_000_000_000_000_000_000,
            strings in proptest::collection::vec(proptest::option::of("\\PC{0,30}"), 7),
            units in proptest::option::of(any::<u64>()),
            value in proptest::option::of(prop_oneof![any::<f64>(), Just(0.0), Just(-0.0), Just(1e300), Just(5e-324)]),
        ) {
            let all: Vec<InteractionType> = InteractionType::ALL
                .iter()
                .chain(InteractionType::AD_EVENTS.iter())
                .copied()
                .collect();
            let mut s = strings.into_iter().map(opt);
            let mut next = || s.next().flatten();
            let e = InteractionEvent {
                ad_id: ad,
                interaction_type: all[kind % all.len()],
                timestamp: chrono::DateTime::from_timestamp_nanos(ns).fixed_offset(),
                session_id: next(),
                customer_id: next(),
                dtm_token: next(),
                video_id: next(),
                product_code: next(),
                catalog_id: next(),
                creative_id: next(),
                units,
                conversion_value: value.filter(|v| v.is_finite()),
                iab_consent_string: None,
            };
            let reference = reference_form(&e);
            prop_assert_eq!(&canonical_form(&e), &reference);
            prop_assert_eq!(DedupKey::of(&e), DedupKey(xxhash_rust::xxh3::xxh3_128(reference.as_bytes())));
            if let Some(k) = click_key(&e) {
                use std::fmt::Write as _;
                let mut form = String::from("click1;");
                let mut field = |name: &str, v: &str| {
                    let _ = write!(form, "{name}:{}:{v};", v.len());
                };
                field("interactionType", e.interaction_type.as_str());
                field("adId", &e.ad_id);
                field("trackingId", e.tracking_id());
                for (name, v) in [("catalogId", &e.catalog_id), ("productCode", &e.product_code), ("creativeId", &e.creative_id)] {
                    if let Some(v) = v {
                        field(name, v);
                    }
                }
                prop_assert_eq!(k, DedupKey(xxhash_rust::xxh3::xxh3_128(form.as_bytes())));
            }
        }

        #[test]
        fn a_click_key_ignores_the_timestamp_and_names_what_was_clicked(a in 0i64..4_000_000_000_000, b in 0i64..4_000_000_000_000) {
            let k = |ms, s: &str, p: &str| click_key(&click(InteractionType::ProductClick, ms, s, p));
            prop_assert_eq!(k(a, "s", "p"), k(b, "s", "p"));
            prop_assert_ne!(k(a, "s", "p"), k(a, "s2", "p"));
            prop_assert_ne!(k(a, "s", "p"), k(a, "s", "p2"));
            prop_assert_ne!(k(a, "s", "p"), click_key(&click(InteractionType::AdClick, a, "s", "p")));
            if a != b {
                prop_assert_ne!(
                    DedupKey::of(&click(InteractionType::ProductClick, a, "s", "p")),
                    DedupKey::of(&click(InteractionType::ProductClick, b, "s", "p")),
                    "the event's own key keeps its time"
                );
            }
        }
    }

    #[test]
    fn only_clicks_have_a_click_key() {
        assert!(click_key(&click(InteractionType::AdImpression, 0, "s", "p")).is_none());
        assert!(click_key(&click(InteractionType::ProductImpression, 0, "s", "p")).is_none());
        assert!(click_key(&click(InteractionType::CreativeClick, 0, "s", "p")).is_some());
    }
}
