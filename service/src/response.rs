//! Response builders shared by every service: JSON, the error status object, plain
//! statuses. One place decides headers such as `Cache-Control`.

use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, StatusCode};
use rm_schemas::rpc_status::{Code, RpcStatus};

use crate::{Body, Response};

/// A response with the given status, content type and body.
pub fn with_body(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> Response {
    let mut r = http::Response::new(Body::new(body.into()));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

/// A JSON response.
pub fn json(status: StatusCode, body: impl Into<Bytes>) -> Response {
    with_body(status, "application/json", body)
}

/// An error status object with the HTTP status its code maps to.
pub fn status(s: &RpcStatus) -> Response {
    let http = Code::from_grpc(s.code).map_or(500, Code::http_status);
    json(
        StatusCode::from_u16(http).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        s.to_json(),
    )
}

/// An error status object built from a code, reason and message.
pub fn error(code: Code, reason: &str, message: impl Into<String>) -> Response {
    status(&RpcStatus::new(code, reason, message))
}

/// 404 for an unknown path.
pub fn not_found(path: &str) -> Response {
    error(Code::NotFound, "not_found", format!("no route for {path}"))
}

/// 405 with the `Allow` header.
pub fn method_not_allowed(allow: &'static str) -> Response {
    let mut r = error(
        Code::Unimplemented,
        "method_not_allowed",
        format!("method not allowed; allowed: {allow}"),
    );
    *r.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
    r.headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static(allow));
    r
}

/// 503 with `Retry-After`.
pub fn unavailable(reason: &str, message: impl Into<String>, retry_after_secs: u32) -> Response {
    let mut r = error(Code::Unavailable, reason, message);
    if let Ok(v) = HeaderValue::from_str(&retry_after_secs.to_string()) {
        r.headers_mut().insert(header::RETRY_AFTER, v);
    }
    r
}

/// Whether an `If-None-Match` header names `tag` (weak comparison, as RFC 9110
/// prescribes for `If-None-Match`: a `W/` prefix is ignored; `*` matches).
pub fn if_none_match_hits(headers: &HeaderMap, tag: &str) -> bool {
    headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .any(|t| t == "*" || t.strip_prefix("W/").unwrap_or(t) == tag)
}

/// A static asset compiled into the binary: 200 with `body`, or 304 without a body
/// when `If-None-Match` names `etag`; both with `ETag`, `Cache-Control` and
/// `X-Content-Type-Options: nosniff`. The caller adds headers of its own.
pub fn static_asset(
    headers: &HeaderMap,
    etag: &str,
    content_type: &'static str,
    cache_control: &'static str,
    body: &'static str,
) -> Response {
    let mut r = if if_none_match_hits(headers, etag) {
        let mut r = with_body(StatusCode::NOT_MODIFIED, content_type, "");
        r.headers_mut().remove(header::CONTENT_TYPE);
        r
    } else {
        with_body(StatusCode::OK, content_type, body)
    };
    let h = r.headers_mut();
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static(cache_control),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    if let Ok(v) = HeaderValue::from_str(etag) {
        h.insert(header::ETAG, v);
    }
    r
}

/// The Prometheus text exposition of `metrics`.
pub(crate) fn metrics(metrics: &metrics_exporter_prometheus::PrometheusHandle) -> Response {
    with_body(
        StatusCode::OK,
        "text/plain; version=0.0.4; charset=utf-8",
        metrics.render(),
    )
}
