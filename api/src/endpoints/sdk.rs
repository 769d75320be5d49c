//! The browser tracking snippet served at `GET /sdk/beacon.js` (`api/sdk/beacon.js`,
//! compiled into the binary; its header documents the viewability and video rules).
//!
//! Answers 200 `text/javascript; charset=utf-8` with `Cache-Control: public,
//! max-age=300`, a strong `ETag` (the first 128 bits of the SHA-256 of the file,
//! computed once) and `Access-Control-Allow-Origin: *` (so pages may load it with
//! `crossorigin` and subresource integrity); 304 when `If-None-Match` names that tag
//! (or is `*`); `HEAD` the same without a body; 405 for any other method. No I/O.

use std::sync::OnceLock;

use http::{header, HeaderMap, HeaderValue, Method};
use rm_service::{response, Response};

use crate::error::ApiError;
use crate::routes::{Access, Call, Content, RequestBody, Route};
use crate::Api;

/// The snippet's route.
pub(crate) fn routes() -> Vec<Route> {
    vec![Route {
        method: Method::GET,
        path: PATH,
        op: "Sdk",
        handler: |api, call| Box::pin(sdk(api, call)),
        access: Access::Public,
        summary: "The browser tracking snippet",
        query: &[],
        request: RequestBody::None,
        ok: 200,
        response: Content::Text("text/javascript"),
        errors: &[],
    }]
}

/// `GET /sdk/beacon.js`.
async fn sdk(_api: &Api, call: Call) -> Result<Response, ApiError> {
    Ok(answer(&call.parts.method, &call.parts.headers))
}

/// Path of the snippet.
pub const PATH: &str = "/sdk/beacon.js";

/// The snippet's source, as served.
pub const SOURCE: &str = include_str!("../../sdk/beacon.js");

const CONTENT_TYPE: &str = "text/javascript; charset=utf-8";
const CACHE_CONTROL: &str = "public, max-age=300";

/// The strong entity tag of [`SOURCE`], quoted: `"<32 hex digits>"`.
pub fn etag() -> &'static str {
    static TAG: OnceLock<String> = OnceLock::new();
    TAG.get_or_init(|| super::strong_etag(SOURCE.as_bytes()))
}

/// Answers a request for [`PATH`].
pub fn answer(method: &Method, headers: &HeaderMap) -> Response {
    if method != Method::GET && method != Method::HEAD {
        return ApiError::MethodNotAllowed("GET, HEAD".into()).response();
    }
    let mut r = response::static_asset(headers, etag(), CONTENT_TYPE, CACHE_CONTROL, SOURCE);
    r.headers_mut().insert(
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        HeaderValue::from_static("*"),
    );
    r
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use http::StatusCode;
    use http_body_util::BodyExt;

    fn body(r: Response) -> Vec<u8> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(r.into_body().collect())
            .unwrap()
            .to_bytes()
            .to_vec()
    }

    fn with_inm(v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::IF_NONE_MATCH, HeaderValue::from_str(v).unwrap());
        h
    }

    #[test]
    fn sdk_get_serves_the_file_with_cache_headers() {
        let r = answer(&Method::GET, &HeaderMap::new());
        assert_eq!(r.status(), StatusCode::OK);
        let h = r.headers().clone();
        assert_eq!(h[header::CONTENT_TYPE], CONTENT_TYPE);
        assert_eq!(h[header::CACHE_CONTROL], "public, max-age=300");
        assert_eq!(h[header::ETAG], etag());
        assert_eq!(h[header::ACCESS_CONTROL_ALLOW_ORIGIN], "*");
        let b = body(r);
        assert_eq!(b, SOURCE.as_bytes());
        assert!(SOURCE.contains("RetailMediaBeacon"));
    }

    #[test]
    fn sdk_etag_is_a_stable_quoted_hash_of_the_content() {
        let t = etag();
        assert_eq!(t.len(), 34, "{t}");
        assert!(t.starts_with('"') && t.ends_with('"'));
        assert!(t[1..33].bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(t, etag());
    }

    #[test]
    fn sdk_if_none_match_answers_304_without_a_body() {
        for v in [
            etag().to_string(),
            format!("W/{}", etag()),
            format!("\"other\", {}", etag()),
            "*".to_string(),
        ] {
            let r = answer(&Method::GET, &with_inm(&v));
            assert_eq!(r.status(), StatusCode::NOT_MODIFIED, "{v}");
            assert_eq!(r.headers()[header::ETAG], etag());
            assert_eq!(r.headers()[header::CACHE_CONTROL], "public, max-age=300");
            assert!(body(r).is_empty());
        }
        let r = answer(&Method::GET, &with_inm("\"stale\""));
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(body(r), SOURCE.as_bytes());
    }

    #[test]
    fn sdk_head_is_allowed_and_other_methods_are_405() {
        let r = answer(&Method::HEAD, &HeaderMap::new());
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(r.headers()[header::ETAG], etag());
        for m in [Method::POST, Method::PUT, Method::DELETE, Method::OPTIONS] {
            let r = answer(&m, &HeaderMap::new());
            assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED, "{m}");
            assert_eq!(r.headers()[header::ALLOW], "GET, HEAD");
        }
    }
}
