//! The analyst page: `GET /reports` and its two assets (`api/web/`, compiled into the
//! binary, no build step). The page logs in with OAuth client credentials and reads
//! the JSON report routes with the token; this module only serves the files.
//!
//! | path | file | content type |
//! |---|---|---|
//! | `/reports` | `web/reports.html` | `text/html; charset=utf-8` |
//! | `/reports/reports.js` | `web/reports.js` | `text/javascript; charset=utf-8` |
//! | `/reports/reports.css` | `web/reports.css` | `text/css; charset=utf-8` |
//!
//! Answers 200 with `Cache-Control: no-cache` (browsers revalidate, so the page and
//! its script never drift apart after an upgrade), a strong `ETag` per file (the
//! first 128 bits of its SHA-256, computed once), `X-Content-Type-Options: nosniff`,
//! `Referrer-Policy: no-referrer` and a `Content-Security-Policy` that allows only
//! this origin (no inline script, no external host; the page talks to the api only);
//! 304 when `If-None-Match` names the tag (or is `*`); `HEAD` the same without a
//! body; 405 for any other method; 404 for any other path. No I/O.

use std::sync::OnceLock;

use http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use rm_service::{response, Response};

use crate::error::ApiError;
use crate::routes::{Access, Call, Content, RequestBody, Route};
use crate::Api;

/// The page's routes, one per asset.
pub(crate) fn routes() -> Vec<Route> {
    ASSETS
        .iter()
        .map(|asset| Route {
            method: Method::GET,
            path: asset.path,
            op: "Web",
            handler: |api, call| Box::pin(web(api, call)),
            access: Access::Public,
            summary: "The analyst page (static; it reads the report routes with a token)",
            query: &[],
            request: RequestBody::None,
            ok: 200,
            response: Content::Text(asset.media_type()),
            errors: &[],
        })
        .collect()
}

/// `GET /openapi.json`: the document of every route, built at start.
pub(crate) fn document_routes() -> Vec<Route> {
    vec![Route {
        method: Method::GET,
        path: "/openapi.json",
        op: "OpenApi",
        handler: |api, call| Box::pin(openapi(api, call)),
        access: Access::Public,
        summary: "This document",
        query: &[],
        request: RequestBody::None,
        ok: 200,
        response: Content::AnyJson,
        errors: &[],
    }]
}

/// The analyst page and its assets (the path picks which).
async fn web(_api: &Api, call: Call) -> Result<Response, ApiError> {
    let p = &call.parts;
    Ok(answer(p.uri.path(), &p.method, &p.headers))
}

/// `GET /openapi.json`: the document built at start.
async fn openapi(api: &Api, _call: Call) -> Result<Response, ApiError> {
    Ok(response::json(StatusCode::OK, api.openapi.clone()))
}

/// One served file.
#[derive(Debug, Clone, Copy)]
pub struct Asset {
    /// Request path.
    pub path: &'static str,
    /// `Content-Type`.
    pub content_type: &'static str,
    /// The bytes served.
    pub body: &'static str,
}

impl Asset {
    /// The media type: `content_type` without its parameters.
    pub fn media_type(&self) -> &'static str {
        let t: &'static str = self.content_type;
        t.split(';').next().unwrap_or(t)
    }
}

/// Every file of the page, the page first.
pub const ASSETS: [Asset; 3] = [
    Asset {
        path: "/reports",
        content_type: "text/html; charset=utf-8",
        body: include_str!("../../web/reports.html"),
    },
    Asset {
        path: "/reports/reports.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../web/reports.js"),
    },
    Asset {
        path: "/reports/reports.css",
        content_type: "text/css; charset=utf-8",
        body: include_str!("../../web/reports.css"),
    },
];

const CACHE_CONTROL: &str = "no-cache";
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
                   img-src 'self' data:; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

/// The asset served at `path`, if any.
pub fn asset(path: &str) -> Option<(usize, &'static Asset)> {
    ASSETS.iter().enumerate().find(|(_, a)| a.path == path)
}

/// The strong entity tag of asset `i` of [`ASSETS`], quoted: `"<32 hex digits>"`.
pub fn etag(i: usize) -> &'static str {
    static TAGS: OnceLock<Vec<String>> = OnceLock::new();
    TAGS.get_or_init(|| {
        ASSETS
            .iter()
            .map(|a| super::strong_etag(a.body.as_bytes()))
            .collect()
    })
    .get(i)
    .map_or("\"\"", String::as_str)
}

/// Answers a request for one of the [`ASSETS`] paths.
pub fn answer(path: &str, method: &Method, headers: &HeaderMap) -> Response {
    let Some((i, a)) = asset(path) else {
        return ApiError::NotFound(format!("no route for {path}")).response();
    };
    if method != Method::GET && method != Method::HEAD {
        return ApiError::MethodNotAllowed("GET, HEAD".into()).response();
    }
    let mut r = response::static_asset(headers, etag(i), a.content_type, CACHE_CONTROL, a.body);
    let h = r.headers_mut();
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
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
    fn web_serves_each_asset_with_its_type_and_headers() {
        for (i, a) in ASSETS.iter().enumerate() {
            let r = answer(a.path, &Method::GET, &HeaderMap::new());
            assert_eq!(r.status(), StatusCode::OK, "{}", a.path);
            let h = r.headers().clone();
            assert_eq!(h[header::CONTENT_TYPE], a.content_type);
            assert_eq!(h[header::CACHE_CONTROL], "no-cache");
            assert_eq!(h[header::ETAG], etag(i));
            assert_eq!(h[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
            assert!(h[header::CONTENT_SECURITY_POLICY]
                .to_str()
                .unwrap()
                .contains("script-src 'self'"));
            assert_eq!(body(r), a.body.as_bytes());
        }
    }

    #[test]
    fn web_page_links_only_its_own_assets() {
        let html = ASSETS[0].body;
        assert!(html.contains("src=\"/reports/reports.js\""));
        assert!(html.contains("href=\"/reports/reports.css\""));
        assert!(!html.contains("http://") && !html.contains("https://"));
        assert!(
            !html.contains("<script>"),
            "no inline script: the CSP forbids it"
        );
        // The script names no host: the only URL in it is the SVG namespace.
        let js = ASSETS[1].body.replace("'http://www.w3.org/2000/svg'", "");
        assert!(!js.contains("http://") && !js.contains("https://"));
    }

    #[test]
    fn web_etags_differ_per_file_and_are_stable() {
        let tags: Vec<&str> = (0..ASSETS.len()).map(etag).collect();
        for t in &tags {
            assert_eq!(t.len(), 34, "{t}");
            assert!(t[1..33].bytes().all(|b| b.is_ascii_hexdigit()));
        }
        assert_ne!(tags[0], tags[1]);
        assert_ne!(tags[1], tags[2]);
        assert_eq!(tags[0], etag(0));
    }

    #[test]
    fn web_if_none_match_answers_304_without_a_body() {
        for v in [
            etag(1).to_string(),
            format!("W/{}", etag(1)),
            format!("\"other\", {}", etag(1)),
            "*".to_string(),
        ] {
            let r = answer("/reports/reports.js", &Method::GET, &with_inm(&v));
            assert_eq!(r.status(), StatusCode::NOT_MODIFIED, "{v}");
            assert_eq!(r.headers()[header::ETAG], etag(1));
            assert!(body(r).is_empty());
        }
        let r = answer("/reports/reports.js", &Method::GET, &with_inm(etag(0)));
        assert_eq!(r.status(), StatusCode::OK, "another file's tag");
    }

    #[test]
    fn web_head_allowed_other_methods_405_other_paths_404() {
        let r = answer("/reports", &Method::HEAD, &HeaderMap::new());
        assert_eq!(r.status(), StatusCode::OK);
        for m in [Method::POST, Method::PUT, Method::DELETE] {
            let r = answer("/reports", &m, &HeaderMap::new());
            assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED, "{m}");
            assert_eq!(r.headers()[header::ALLOW], "GET, HEAD");
        }
        let r = answer("/reports/nope.js", &Method::GET, &HeaderMap::new());
        assert_eq!(r.status(), StatusCode::NOT_FOUND);
    }
}
