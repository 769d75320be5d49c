//! The beacon URL of one injected `Tracking` node, and the checks that make sure the
//! edge will accept it once the player expands the macros.
//!
//! Format (parameter order fixed): `{beacon_url}?adId={a}&interactionType={t}
//! &videoId={v}&{sessionId|customerId|dtmToken}={id}&timestamp=[TIMESTAMP]` and, when
//! cache-busting is on, `&cb=[CACHEBUSTING]`. Values are percent-encoded byte by byte
//! (UTF-8), keeping only RFC 3986 unreserved bytes (`A-Z a-z 0-9 - . _ ~`), so a
//! space is `%20` and a `+` is `%2B` (the edge decodes a raw `+` as a space).

use rm_schemas::validate::MAX_ID_LEN;
use rm_schemas::InteractionType;

use super::{TrackingContext, VastError};

/// The timestamp macro, written raw so players expand it (see the module docs of
/// [`crate`] on why not `%5BTIMESTAMP%5D`).
pub const MACRO_TIMESTAMP: &str = "[TIMESTAMP]";
/// The cache-busting macro, written raw for the same reason.
pub const MACRO_CACHEBUSTING: &str = "[CACHEBUSTING]";
/// The throwaway parameter that carries the cache-buster (the edge ignores it).
pub const CACHEBUSTING_PARAM: &str = "cb";
/// The tracking id parameters the beacon knows.
pub const TRACKING_PARAMS: [&str; 3] = ["sessionId", "customerId", "dtmToken"];

/// Appends `s` percent-encoded (RFC 3986 unreserved bytes kept, `%HH` upper-case).
pub fn percent_encode_into(s: &str, out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &b in s.as_bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push('%');
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 0x0f)]));
        }
    }
}

/// True for bytes a base URL may hold raw: RFC 3986 unreserved, sub-delims, `:`,
/// `/`, `@`, `%`, and `[` `]` for an IPv6 host; never `?` or `#`.
fn base_url_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric()
        || matches!(
            b,
            b'-' | b'.'
                | b'_'
                | b'~'
                | b'!'
                | b'$'
                | b'&'
                | b'\''
                | b'('
                | b')'
                | b'*'
                | b'+'
                | b','
                | b';'
                | b'='
                | b':'
                | b'/'
                | b'@'
                | b'%'
                | b'['
                | b']'
        )
}

fn invalid(field: &'static str, reason: impl Into<String>) -> VastError {
    VastError::InvalidContext {
        field,
        reason: reason.into(),
    }
}

/// Checks that `ctx` yields beacons the edge accepts: an absolute http(s) base URL
/// without query or fragment, a known tracking parameter, and non-empty ids within
/// the edge's length bound.
pub fn check_context(ctx: &TrackingContext) -> Result<(), VastError> {
    let url = ctx.beacon_url.as_str();
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .ok_or_else(|| invalid("beacon_url", format!("{url:?} is not an http(s) URL")))?;
    if rest.is_empty() || rest.starts_with('/') {
        return Err(invalid("beacon_url", format!("{url:?} has no host")));
    }
    if let Some(b) = url.bytes().find(|&b| !base_url_byte(b)) {
        return Err(invalid(
            "beacon_url",
            format!(
                "{url:?} holds {:?}: it must be a plain URL without query or fragment",
                char::from(b)
            ),
        ));
    }
    if !TRACKING_PARAMS.contains(&ctx.tracking_param) {
        return Err(invalid(
            "tracking_param",
            format!(
                "{:?} is not one of sessionId, customerId, dtmToken",
                ctx.tracking_param
            ),
        ));
    }
    for (field, value) in [("ad_id", &ctx.ad_id), ("tracking_id", &ctx.tracking_id)] {
        if value.is_empty() {
            return Err(invalid(field, "is empty (the edge treats empty as absent)"));
        }
        if value.len() > MAX_ID_LEN {
            return Err(invalid(
                field,
                format!(
                    "is {} bytes, more than the {MAX_ID_LEN} the edge accepts",
                    value.len()
                ),
            ));
        }
    }
    Ok(())
}

/// The beacon URL for `interaction` of the creative identified by `video_id`.
/// Assumes [`check_context`] passed.
pub fn tracking_url(ctx: &TrackingContext, interaction: InteractionType, video_id: &str) -> String {
    let mut u = String::with_capacity(
        ctx.beacon_url.len() + 3 * (ctx.ad_id.len() + video_id.len() + ctx.tracking_id.len()) + 96,
    );
    u.push_str(&ctx.beacon_url);
    u.push_str("?adId=");
    percent_encode_into(&ctx.ad_id, &mut u);
    u.push_str("&interactionType=");
    u.push_str(interaction.as_str());
    u.push_str("&videoId=");
    percent_encode_into(video_id, &mut u);
    u.push('&');
    u.push_str(ctx.tracking_param);
    u.push('=');
    percent_encode_into(&ctx.tracking_id, &mut u);
    u.push_str("&timestamp=");
    u.push_str(MACRO_TIMESTAMP);
    if ctx.cachebusting {
        u.push('&');
        u.push_str(CACHEBUSTING_PARAM);
        u.push('=');
        u.push_str(MACRO_CACHEBUSTING);
    }
    u
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> TrackingContext {
        TrackingContext {
            beacon_url: "http://127.0.0.1:8080/v1/events/ad/interaction".into(),
            ad_id: "rm1.camp-1.ad 1+é".into(),
            tracking_param: "sessionId",
            tracking_id: "s&1=2".into(),
            cachebusting: true,
        }
    }

    #[test]
    fn url_is_encoded_and_keeps_macros() {
        let u = tracking_url(&ctx(), InteractionType::VideoPlay, "v/1?#");
        assert_eq!(
            u,
            "http://127.0.0.1:8080/v1/events/ad/interaction?adId=rm1.camp-1.ad%201%2B%C3%A9\
             &interactionType=videoPlay&videoId=v%2F1%3F%23&sessionId=s%261%3D2\
             &timestamp=[TIMESTAMP]&cb=[CACHEBUSTING]"
        );
        let without = TrackingContext {
            cachebusting: false,
            ..ctx()
        };
        assert!(tracking_url(&without, InteractionType::VideoPlay, "v")
            .ends_with("&timestamp=[TIMESTAMP]"));
    }

    #[test]
    fn expanded_url_passes_the_edge() {
        let u = tracking_url(&ctx(), InteractionType::VideoMute, "vid é");
        let q = u.split_once('?').expect("query").1;
        let q = q
            .replace(MACRO_TIMESTAMP, "2026-11-22T10%3A15%3A30.250Z")
            .replace(MACRO_CACHEBUSTING, "01234567");
        let e = rm_schemas::parse_beacon(&q).expect("edge accepts");
        assert_eq!(e.ad_id, "rm1.camp-1.ad 1+é");
        assert_eq!(e.interaction_type, InteractionType::VideoMute);
        assert_eq!(e.video_id.as_deref(), Some("vid é"));
        assert_eq!(e.session_id.as_deref(), Some("s&1=2"));
        // Unexpanded, the edge names the macro instead of accepting a fixed time.
        let raw = u.split_once('?').expect("query").1;
        let r = rm_schemas::parse_beacon(raw).expect_err("unexpanded");
        assert_eq!(r.reason, rm_schemas::RejectReason::UnexpandedMacro);
    }

    #[test]
    fn bad_contexts_are_named() {
        let cases: [(&str, TrackingContext); 8] = [
            (
                "beacon_url",
                TrackingContext {
                    beacon_url: "ftp://x/y".into(),
                    ..ctx()
                },
            ),
            (
                "beacon_url",
                TrackingContext {
                    beacon_url: "http://".into(),
                    ..ctx()
                },
            ),
            (
                "beacon_url",
                TrackingContext {
                    beacon_url: "http://x/y?a=1".into(),
                    ..ctx()
                },
            ),
            (
                "beacon_url",
                TrackingContext {
                    beacon_url: "http://x/a b".into(),
                    ..ctx()
                },
            ),
            (
                "tracking_param",
                TrackingContext {
                    tracking_param: "userId",
                    ..ctx()
                },
            ),
            (
                "ad_id",
                TrackingContext {
                    ad_id: String::new(),
                    ..ctx()
                },
            ),
            (
                "tracking_id",
                TrackingContext {
                    tracking_id: "x".repeat(MAX_ID_LEN + 1),
                    ..ctx()
                },
            ),
            (
                "beacon_url",
                TrackingContext {
                    beacon_url: "http://x/<y>".into(),
                    ..ctx()
                },
            ),
        ];
        for (field, c) in cases {
            match check_context(&c) {
                Err(VastError::InvalidContext { field: f, .. }) => assert_eq!(f, field, "{c:?}"),
                other => panic!("{c:?}: {other:?}"),
            }
        }
        check_context(&ctx()).expect("valid");
        check_context(&TrackingContext {
            beacon_url: "https://[::1]:8443/v1/events/ad/interaction".into(),
            ..ctx()
        })
        .expect("IPv6 host");
    }
}
