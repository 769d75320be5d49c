//! Reads the headers invalid-traffic classification needs from a beacon, impression
//! or click request and classifies them ([`rm_schemas::agent`]): `User-Agent`,
//! `X-Device-User-Agent` (server-side ad insertion), `Sec-Purpose`, `Purpose`,
//! `X-Purpose` and `X-Moz`. Nothing else of the request (no IP) is read.
//!
//! Header values are borrowed, not copied; a value that is not UTF-8 counts as absent.

use http::header::{HeaderMap, USER_AGENT};
use rm_schemas::agent::{classify, AgentHeaders, Traffic};

/// The traffic of a request with these headers.
pub fn of(headers: &HeaderMap) -> Traffic {
    let get = |name: &str| {
        headers
            .get(name)
            .and_then(|v| std::str::from_utf8(v.as_bytes()).ok())
    };
    classify(&AgentHeaders {
        user_agent: headers
            .get(USER_AGENT)
            .and_then(|v| std::str::from_utf8(v.as_bytes()).ok()),
        device_user_agent: get("x-device-user-agent"),
        sec_purpose: get("sec-purpose"),
        purpose: get("purpose"),
        x_purpose: get("x-purpose"),
        x_moz: get("x-moz"),
    })
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;
    use rm_schemas::agent::AgentClass;

    use super::*;

    fn headers(pairs: &[(&'static str, &'static [u8])]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_bytes(v).expect("header value"));
        }
        h
    }

    #[test]
    fn reads_every_header_classification_needs() {
        let chrome: &[u8] = b"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36";
        assert_eq!(of(&headers(&[("user-agent", chrome)])), Traffic::BROWSER);
        assert_eq!(of(&HeaderMap::new()).agent, AgentClass::Missing);
        let t = of(&headers(&[
            ("user-agent", b"Go-http-client/1.1"),
            ("x-device-user-agent", chrome),
        ]));
        assert_eq!((t.agent, t.server_side), (AgentClass::Browser, true));
        for name in ["sec-purpose", "purpose", "x-moz"] {
            let t = of(&headers(&[("user-agent", chrome), (name, b"prefetch")]));
            assert!(t.prefetch, "{name}");
        }
        let t = of(&headers(&[
            ("user-agent", chrome),
            ("x-purpose", b"preview"),
        ]));
        assert!(t.prefetch);
        // Not UTF-8: absent.
        let t = of(&headers(&[("user-agent", b"\xff\xfe")]));
        assert_eq!(t.agent, AgentClass::Missing);
    }
}
