//! The edge's ad impression and click endpoints: their query strings, and the signed
//! click destination.
//!
//! `GET /v1/events/ad/impression?<query>` and `GET /v1/events/ad/click?<query>` follow
//! the beacon's conventions ([`crate::validate`]): the query is URL-encoded as a
//! whole, `adId`, `timestamp` (as `[TIMESTAMP]` expands) and a tracking id
//! (`sessionId`, `customerId` or `dtmToken`) are required, `iabConsentString` is
//! optional, unknown parameters (`[CACHEBUSTING]`, `cb=...`) are ignored, and the
//! rejections are the beacon's. They become events of type `adImpression` / `adClick`
//! (no `interactionType` parameter: the path says it).
//!
//! A click may carry `dest` (a banner's `ctaLink`) and `sig`: the api signs each
//! destination for one ad id when it serves the ad ([`click_signature`]: HMAC under the
//! ad id keys, scope `click-dest`, message `adId + "\n" + dest`, so a signature cannot
//! be moved to another ad or destination). The edge redirects only to a destination
//! whose signature verifies and whose scheme is `http` or `https`
//! ([`check_destination`]); anything else is a 400, never an open redirect.

use crate::ad_id::AdIdKeys;
use crate::event::InteractionEvent;
use crate::interaction::InteractionType;
use crate::rejection::{RejectReason, Rejection};
use crate::validate::{known_values, max_len, missing, parse_timestamp};

/// The scope of click destination signatures.
pub const CLICK_DEST_SCOPE: &str = "click-dest";

/// Longest accepted `dest`, in bytes.
pub const MAX_DEST_LEN: usize = 2048;

/// Parameters of the impression and click endpoints.
pub const AD_PARAMETERS: [&str; 8] = [
    "adId",
    "timestamp",
    "sessionId",
    "customerId",
    "dtmToken",
    "iabConsentString",
    "dest",
    "sig",
];

/// A decoded impression or click.
#[derive(Debug, Clone, PartialEq)]
pub struct AdBeacon {
    /// The event (type `adImpression` or `adClick`).
    pub event: InteractionEvent,
    /// The click's destination, when it has one (not yet checked: see
    /// [`check_destination`]).
    pub dest: Option<String>,
    /// The destination's signature.
    pub sig: Option<String>,
}

/// The signature of a click destination for one ad id (what the api puts in `sig`).
pub fn click_signature(keys: &AdIdKeys, ad_id: &str, dest: &str) -> String {
    keys.sign_value(CLICK_DEST_SCOPE, &format!("{ad_id}\n{dest}"))
}

/// Parses an impression (`kind` = `AdImpression`) or click (`AdClick`) query string.
/// `dest` and `sig` are read on clicks only (ignored on impressions).
pub fn parse_ad_beacon(kind: InteractionType, query: &str) -> Result<AdBeacon, Rejection> {
    let limit = |name: &str| {
        if name == "dest" {
            MAX_DEST_LEN
        } else {
            max_len(name)
        }
    };
    let [ad_id, ts, session_id, customer_id, dtm_token, consent, dest, sig] =
        known_values(query, &AD_PARAMETERS, limit)?;
    let what = if kind == InteractionType::AdClick {
        "on every click"
    } else {
        "on every impression"
    };
    let ad_id = ad_id.ok_or_else(|| missing("adId", what))?;
    let ts = ts.ok_or_else(|| missing("timestamp", what))?;
    let timestamp = parse_timestamp(&ts)?;
    if session_id.is_none() && customer_id.is_none() && dtm_token.is_none() {
        return Err(Rejection::new(
            RejectReason::NoTrackingId,
            "sessionId",
            "at least one tracking id (sessionId, customerId or dtmToken) is required",
        ));
    }
    let (dest, sig) = if kind == InteractionType::AdClick {
        (dest, sig)
    } else {
        (None, None)
    };
    Ok(AdBeacon {
        event: InteractionEvent {
            session_id,
            customer_id,
            dtm_token,
            iab_consent_string: consent,
            ..InteractionEvent::new(ad_id, kind, timestamp)
        },
        dest,
        sig,
    })
}

/// Checks a click destination: signed by the api for this ad id, an absolute `http`
/// or `https` URL with a host, no whitespace or control characters. On success the
/// destination may go in a `Location` header as it is.
pub fn check_destination(
    keys: &AdIdKeys,
    ad_id: &str,
    dest: &str,
    sig: Option<&str>,
) -> Result<(), Rejection> {
    let Some(sig) = sig else {
        return Err(Rejection::new(
            RejectReason::UnsignedDestination,
            "sig",
            "a click with dest needs the sig the api served with it; unsigned destinations are refused",
        ));
    };
    let rest = dest
        .strip_prefix("https://")
        .or_else(|| dest.strip_prefix("http://"));
    let host = rest.map(|r| r.split(['/', '?', '#']).next().unwrap_or(""));
    let clean = dest
        .chars()
        .all(|c| !c.is_control() && !c.is_whitespace() && c != '\\');
    if !clean || host.is_none_or(str::is_empty) {
        return Err(Rejection::new(
            RejectReason::InvalidDestination,
            "dest",
            "dest must be an absolute http:// or https:// URL with a host",
        ));
    }
    let expected = format!("{ad_id}\n{dest}");
    if !keys.verify_value(CLICK_DEST_SCOPE, &expected, sig) {
        return Err(Rejection::new(
            RejectReason::UnsignedDestination,
            "sig",
            "sig is not the api's signature of this dest for this adId; only destinations served with the ad redirect",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn keys() -> AdIdKeys {
        AdIdKeys::new(vec![b"0123456789abcdef-key-one".to_vec()]).expect("keys")
    }

    const TS: &str = "2026-11-22T10%3A15%3A30.250Z";

    #[test]
    fn impressions_and_clicks_parse_like_beacons() {
        let q = format!("adId=a-1&timestamp={TS}&sessionId=s-1&cb=123&dest=x&sig=y");
        let imp = parse_ad_beacon(InteractionType::AdImpression, &q).expect("impression");
        assert_eq!(imp.event.interaction_type, InteractionType::AdImpression);
        assert_eq!(imp.event.tracking_id(), "s-1");
        assert_eq!((imp.dest, imp.sig), (None, None), "impressions ignore dest");
        let click = parse_ad_beacon(InteractionType::AdClick, &q).expect("click");
        assert_eq!(click.dest.as_deref(), Some("x"));
        assert_eq!(click.sig.as_deref(), Some("y"));
        let reason = |q: &str| {
            parse_ad_beacon(InteractionType::AdClick, q)
                .expect_err(q)
                .reason
        };
        assert_eq!(
            reason(&format!("timestamp={TS}&sessionId=s")),
            RejectReason::MissingParameter
        );
        assert_eq!(reason("adId=a&sessionId=s"), RejectReason::MissingParameter);
        assert_eq!(
            reason("adId=a&sessionId=s&timestamp=[TIMESTAMP]"),
            RejectReason::UnexpandedMacro
        );
        assert_eq!(
            reason(&format!("adId=a&timestamp={TS}")),
            RejectReason::NoTrackingId
        );
        assert_eq!(
            reason(&format!("adId=a&adId=b&timestamp={TS}&sessionId=s")),
            RejectReason::DuplicateParameter
        );
        assert_eq!(
            reason(&format!("adId=a b&timestamp={TS}&sessionId=s")),
            RejectReason::UrlNotEncoded
        );
    }

    #[test]
    fn destinations_must_be_signed_for_the_ad_and_http() {
        let k = keys();
        let dest = "https://shop.example/p?x=1";
        let sig = click_signature(&k, "ad-1", dest);
        assert_eq!(check_destination(&k, "ad-1", dest, Some(&sig)), Ok(()));
        let reason = |ad: &str, d: &str, s: Option<&str>| {
            check_destination(&k, ad, d, s).expect_err(d).reason
        };
        assert_eq!(
            reason("ad-2", dest, Some(&sig)),
            RejectReason::UnsignedDestination
        );
        assert_eq!(
            reason("ad-1", "https://evil.example/", Some(&sig)),
            RejectReason::UnsignedDestination
        );
        assert_eq!(
            reason("ad-1", dest, None),
            RejectReason::UnsignedDestination
        );
        for bad in [
            "javascript:alert(1)",
            "//evil.example/",
            "https:///x",
            "https://a.example/\r\nSet-Cookie: x",
            "ftp://a.example/",
            "https://a b/",
        ] {
            let s = click_signature(&k, "ad-1", bad);
            assert_eq!(
                reason("ad-1", bad, Some(&s)),
                RejectReason::InvalidDestination,
                "{bad}"
            );
        }
    }

    #[test]
    fn an_impression_counts_once_per_ad_and_tracking_id_a_click_per_time() {
        use crate::DedupKey;
        let at = |kind, t: &str, s: &str| {
            let q = format!("adId=a-1&timestamp={t}&sessionId={s}");
            DedupKey::of(&parse_ad_beacon(kind, &q).expect("valid").event)
        };
        let imp = InteractionType::AdImpression;
        assert_eq!(at(imp, TS, "s"), at(imp, "2026-11-22T11%3A00%3A00Z", "s"));
        assert_ne!(at(imp, TS, "s"), at(imp, TS, "t"));
        let click = InteractionType::AdClick;
        assert_eq!(
            at(click, TS, "s"),
            at(click, "2026-11-22T10%3A15%3A30.25Z", "s")
        );
        assert_ne!(
            at(click, TS, "s"),
            at(click, "2026-11-22T11%3A00%3A00Z", "s")
        );
        assert_ne!(at(click, TS, "s"), at(imp, TS, "s"));
    }

    #[test]
    fn records_carry_the_verdict_and_old_records_read_as_valid() {
        use crate::record::{EventRecord, UnverifiedAdId};
        let q = format!("adId=a-1&timestamp={TS}&sessionId=s");
        let e = parse_ad_beacon(InteractionType::AdClick, &q)
            .expect("valid")
            .event;
        let mut r = EventRecord::new(e, uuid::Uuid::now_v7(), chrono::Utc::now());
        let plain = String::from_utf8(r.to_bytes()).expect("utf8");
        assert!(!plain.contains("adIdVerdict"), "{plain}");
        assert_eq!(
            EventRecord::from_bytes(plain.as_bytes())
                .expect("read")
                .ad_id_verdict,
            None
        );
        r.ad_id_verdict = Some(UnverifiedAdId::BadSignature);
        let marked = String::from_utf8(r.to_bytes()).expect("utf8");
        assert!(
            marked.contains(r#""adIdVerdict":"bad_signature""#),
            "{marked}"
        );
        assert!(
            marked.contains(r#""interactionType":"adClick""#),
            "{marked}"
        );
        let back = EventRecord::from_bytes(marked.as_bytes()).expect("read");
        assert_eq!(
            (back.ad_id_verdict, back.event, back.dedup_key),
            (r.ad_id_verdict, r.event, r.dedup_key)
        );
    }

    proptest! {
        /// No destination other than the signed one, for the signed ad, ever passes.
        #[test]
        fn only_the_signed_pair_passes(ad in "[a-z0-9.-]{1,20}", path in "[a-z0-9/]{0,20}", other in "\\PC{0,40}") {
            let k = keys();
            let dest = format!("https://shop.example/{path}");
            let sig = click_signature(&k, &ad, &dest);
            prop_assert!(check_destination(&k, &ad, &dest, Some(&sig)).is_ok());
            if other != dest {
                prop_assert!(check_destination(&k, &ad, &other, Some(&sig)).is_err());
            }
        }

        #[test]
        fn parsing_never_panics(q in "\\PC{0,200}") {
            let _ = parse_ad_beacon(InteractionType::AdClick, &q);
        }
    }
}
