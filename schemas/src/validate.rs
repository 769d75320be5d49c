//! Validation of a beacon query string into an [`InteractionEvent`].
//!
//! Checks run in this order, and the first failure is reported (one reason, one
//! field): decoding ([`crate::query`]); repeated known parameters; unexpanded VAST
//! macros in known parameters; length bounds; `interactionType`; `adId`;
//! `timestamp`; the tracking ids; the per-type requirements; `units`;
//! `conversionValue`. Unknown parameters (cache-busters such as the expansion of
//! `[CACHEBUSTING]`) are ignored. Empty values count as absent.

use chrono::{DateTime, FixedOffset};

use crate::event::{InteractionEvent, MAX_UNITS};
use crate::interaction::{InteractionType, Requirement};
use crate::query::{decode_query, Pair};
use crate::rejection::{RejectReason, Rejection};

/// The beacon's parameters, in the order of the spec's table.
pub const PARAMETERS: [&str; KNOWN] = [
    "adId",
    "interactionType",
    "timestamp",
    "sessionId",
    "customerId",
    "dtmToken",
    "videoId",
    "productCode",
    "catalogId",
    "creativeId",
    "units",
    "conversionValue",
    "iabConsentString",
];

/// Longest accepted value of an identifier parameter, in bytes.
pub const MAX_ID_LEN: usize = 512;
/// Longest accepted `iabConsentString`, in bytes (TCF strings with many vendors are long).
pub const MAX_CONSENT_LEN: usize = 8192;

/// How many parameters the beacon knows.
pub const KNOWN: usize = 13;

/// A `missing_parameter` rejection for `field`, with why it is required.
pub fn missing(field: &'static str, why: &str) -> Rejection {
    Rejection::new(
        RejectReason::MissingParameter,
        field,
        format!("{field} is required {why}"),
    )
}

/// Decodes `query` and picks the values of the parameters in `names`, checking in
/// order: decoding ([`crate::query`]), repeated known parameters, unexpanded VAST
/// macros, and each value's length against `max_len(name)`. Unknown parameters are
/// ignored; empty values come back as `None`. Shared by every endpoint of the edge.
pub fn known_values<const N: usize>(
    query: &str,
    names: &[&'static str; N],
    max_len: impl Fn(&str) -> usize,
) -> Result<[Option<String>; N], Rejection> {
    let pairs = decode_query(query)?;
    let mut slots: [Option<Pair<'_>>; N] = std::array::from_fn(|_| None);
    for pair in pairs {
        let Some(i) = names.iter().position(|p| *p == pair.key) else {
            continue;
        };
        if slots[i].is_some() {
            return Err(Rejection::new(
                RejectReason::DuplicateParameter,
                names[i],
                format!("{} appears more than once", names[i]),
            ));
        }
        slots[i] = Some(pair);
    }
    for (i, slot) in slots.iter().enumerate() {
        let Some(p) = slot else { continue };
        if p.is_macro {
            return Err(Rejection::new(
                RejectReason::UnexpandedMacro,
                names[i],
                format!(
                    "{} holds the unexpanded VAST macro {}; the player must expand macros",
                    names[i], p.value
                ),
            ));
        }
        let max = max_len(names[i]);
        if p.value.len() > max {
            return Err(Rejection::new(
                RejectReason::ParameterTooLong,
                names[i],
                format!("{} is longer than {max} bytes", names[i]),
            ));
        }
    }
    let take = |i: usize| -> Option<String> {
        slots[i]
            .take()
            .map(|p| p.value.into_owned())
            .filter(|v| !v.is_empty())
    };
    Ok(std::array::from_fn::<Option<String>, N, _>(take))
}

/// The length bound of a beacon parameter.
pub fn max_len(name: &str) -> usize {
    if name == "iabConsentString" {
        MAX_CONSENT_LEN
    } else {
        MAX_ID_LEN
    }
}

/// Parses and validates a raw query string (without `?`) into an event.
pub fn parse_beacon(query: &str) -> Result<InteractionEvent, Rejection> {
    let [ad_id, itype, ts, session_id, customer_id, dtm_token, video_id, product_code, catalog_id, creative_id, units, conversion_value, consent] =
        known_values(query, &PARAMETERS, max_len)?;

    let itype = itype.ok_or_else(|| missing("interactionType", "on every event"))?;
    let interaction_type = InteractionType::from_wire(&itype).ok_or_else(|| {
        Rejection::new(
            RejectReason::UnknownInteractionType,
            "interactionType",
            format!("'{itype}' is not one of the 15 interaction types"),
        )
    })?;
    let ad_id = ad_id.ok_or_else(|| missing("adId", "on every event"))?;
    let ts = ts.ok_or_else(|| missing("timestamp", "on every event"))?;
    let timestamp = parse_timestamp(&ts)?;
    if session_id.is_none() && customer_id.is_none() && dtm_token.is_none() {
        return Err(Rejection::new(
            RejectReason::NoTrackingId,
            "sessionId",
            "at least one tracking id (sessionId, customerId or dtmToken) is required",
        ));
    }
    let absent = match interaction_type.requirement() {
        Requirement::Video if video_id.is_none() => Some("videoId"),
        Requirement::Creative if creative_id.is_none() => Some("creativeId"),
        Requirement::Product | Requirement::Cart if product_code.is_none() => Some("productCode"),
        Requirement::Product | Requirement::Cart if catalog_id.is_none() => Some("catalogId"),
        Requirement::Cart if units.is_none() => Some("units"),
        _ => None,
    };
    if let Some(field) = absent {
        // The message is built only for a rejection: valid beacons allocate nothing here.
        return Err(missing(
            field,
            &format!("for interactionType {interaction_type}"),
        ));
    }
    let units = units.map(|u| parse_units(&u)).transpose()?;
    let conversion_value = conversion_value
        .map(|v| parse_conversion_value(&v))
        .transpose()?;
    Ok(InteractionEvent {
        ad_id,
        interaction_type,
        timestamp,
        session_id,
        customer_id,
        dtm_token,
        video_id,
        product_code,
        catalog_id,
        creative_id,
        units,
        conversion_value,
        iab_consent_string: consent,
    })
}

/// ISO 8601 / RFC 3339 date-time with an offset (`Z` or `±hh:mm`), optional fraction.
/// The basic-format offset `±hhmm` of ISO 8601 is accepted too (rewritten to
/// `±hh:mm` and parsed as RFC 3339, so nothing else is loosened).
pub fn parse_timestamp(s: &str) -> Result<DateTime<FixedOffset>, Rejection> {
    DateTime::parse_from_rfc3339(s)
        .or_else(|e| match basic_offset_as_extended(s) {
            Some(extended) => DateTime::parse_from_rfc3339(&extended),
            None => Err(e),
        })
        .map_err(|_| {
        let hint = if s.contains(' ') {
            " (a '+' in the offset must be sent as %2B: a raw '+' decodes to a space)"
        } else {
            ""
        };
        Rejection::new(
            RejectReason::InvalidTimestamp,
            "timestamp",
            format!("'{s}' is not an ISO 8601 date-time with an offset, such as 2026-11-22T10:15:30.250Z{hint}"),
        )
    })
}

/// `...±hhmm` rewritten as `...±hh:mm`; `None` when `s` does not end in a basic offset.
fn basic_offset_as_extended(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let n = b.len();
    // The last five bytes are ASCII, so both cuts fall on char boundaries.
    (n > 5 && matches!(b[n - 5], b'+' | b'-') && b[n - 4..].iter().all(u8::is_ascii_digit))
        .then(|| format!("{}:{}", &s[..n - 2], &s[n - 2..]))
}

fn parse_units(s: &str) -> Result<u64, Rejection> {
    match s.parse::<u64>() {
        Ok(u) if u <= MAX_UNITS && s.bytes().all(|b| b.is_ascii_digit()) => Ok(u),
        _ => Err(Rejection::new(
            RejectReason::InvalidUnits,
            "units",
            format!("'{s}' is not a non-negative integer up to {MAX_UNITS} (units is the absolute count, never a delta)"),
        )),
    }
}

/// Most significant digits of a `conversionValue`: every decimal with at most 15
/// travels exactly through the record's `f64` (its shortest round-trip text is the
/// decimal sent, `rm_schemas::money::decimal_of_f64`), so the money the cart reports
/// sum is the money sent.
pub const MAX_CONVERSION_VALUE_DIGITS: u32 = 15;

/// A `conversionValue`: a finite plain decimal number that is exact money: at most
/// [`MAX_CONVERSION_VALUE_DIGITS`] significant digits, at most
/// [`crate::money::MAX_SCALE`] decimals, at most [`crate::money::MAX_AMOUNT`].
fn parse_conversion_value(s: &str) -> Result<f64, Rejection> {
    use crate::money::{Decimal, MAX_AMOUNT, MAX_SCALE};
    let plain = s
        .bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'-' | b'e' | b'E'));
    let refuse = |why: String| {
        Err(Rejection::new(
            RejectReason::InvalidConversionValue,
            "conversionValue",
            why,
        ))
    };
    let v = match s.parse::<f64>() {
        Ok(v) if v.is_finite() && plain => v,
        _ => return refuse(format!("'{s}' is not a finite decimal number")),
    };
    let exact = if s.contains(['e', 'E']) {
        Decimal::from_scientific(s)
    } else {
        s.parse::<Decimal>()
    };
    let Ok(d) = exact.map(|d| d.normalize()) else {
        return refuse(format!("'{s}' is beyond the largest amount, {MAX_AMOUNT}"));
    };
    let digits = d
        .mantissa()
        .unsigned_abs()
        .checked_ilog10()
        .map_or(1, |l| l + 1);
    if d.abs() > MAX_AMOUNT {
        return refuse(format!("'{s}' is beyond the largest amount, {MAX_AMOUNT}"));
    }
    if d.scale() > MAX_SCALE || digits > MAX_CONVERSION_VALUE_DIGITS {
        return refuse(format!(
            "'{s}' has more than {MAX_CONVERSION_VALUE_DIGITS} significant digits or \
             {MAX_SCALE} decimals; conversionValue is money and is kept exactly"
        ));
    }
    Ok(v)
}
