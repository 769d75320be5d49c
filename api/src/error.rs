//! The api's one error type and the one place that turns an error into an HTTP
//! response: the spec's error status object `{code, message, details}` with the gRPC
//! code mapped to HTTP as grpc-gateway does. 5xx bodies never carry internals: the
//! cause is logged, the client gets a generic message.
//!
//! Every error answer of the api is built here: the router's 404 and 405, the access
//! checks' 401 and 403 (`rm_auth`'s one denial answer, [`Denial`], which the edge
//! sends too), body, query and report errors, and the token endpoint's, which are
//! RFC 6749 5.2 bodies `{error, error_description}` instead of status objects
//! ([`ApiError::OAuth`]). Authentication errors ([`AuthError`]) arrive whole
//! ([`ApiError::Auth`], the cause kept as the source) and are answered here.

use http::{header, HeaderValue, StatusCode};
use rm_ads::AdsError;
use rm_auth::denial::Denial;
use rm_auth::AuthError;
use rm_schemas::rpc_status::{Code, RpcStatus};
use rm_service::{response, Response};

use crate::state::StateError;

/// An RFC 6749 5.2 error of the token endpoint (`crate::endpoints::tokens`), answered by
/// [`ApiError::OAuth`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenError {
    /// HTTP status.
    pub status: StatusCode,
    /// `error`.
    pub error: &'static str,
    /// `error_description`.
    pub description: String,
    /// `Retry-After` seconds, for 429.
    pub retry_after: Option<u64>,
}

/// `@type` of field violation details.
pub const BAD_REQUEST_TYPE: &str = "type.googleapis.com/google.rpc.BadRequest";
/// `@type` of the reason detail.
pub const ERROR_INFO_TYPE: &str = "type.googleapis.com/google.rpc.ErrorInfo";

/// Everything that can go wrong in the api.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The request is malformed; `field` names the part at fault.
    #[error("{field}: {message}")]
    InvalidArgument {
        /// JSON path, parameter or header at fault.
        field: String,
        /// What is wrong, for a developer.
        message: String,
    },
    /// The path exists, but not with this method (405); holds the `Allow` value.
    #[error("method not allowed; allowed: {0}")]
    MethodNotAllowed(String),
    /// An authentication failure: a denial (401/403) answered by `rm_auth`'s
    /// [`Denial`], a limit (429), a full hashing queue or an unreadable state (503).
    #[error(transparent)]
    Auth(#[from] AuthError),
    /// Valid credentials that may not do this: a missing scope, or a namespace not
    /// the caller's (403, answered as [`Denial::InsufficientScope`]).
    #[error("{0}")]
    PermissionDenied(String),
    /// The addressed resource does not exist (404).
    #[error("{0}")]
    NotFound(String),
    /// A resource with that id exists already (409).
    #[error("{0}")]
    AlreadyExists(String),
    /// The request body did not arrive within the body timeout, in seconds (408; the
    /// connection is closed).
    #[error("the request body did not arrive within {0} s")]
    BodyTimeout(u64),
    /// Too many requests (429).
    #[error("{0}")]
    ResourceExhausted(String),
    /// A dependency is down; retry later (503).
    #[error("{0}")]
    Unavailable(String),
    /// The report store failed (503, retry after 5 s); the cause is logged, never sent.
    #[error("report store: {0}")]
    ReportStore(#[source] rm_store::StoreError),
    /// A token endpoint error, answered as an RFC 6749 5.2 body.
    #[error("{}: {}", .0.error, .0.description)]
    OAuth(TokenError),
    /// A bug or an unexpected failure (500); the text is logged, never sent.
    #[error("internal error: {0}")]
    Internal(String),
    /// Serving ads failed for a reason of the server's (500, like
    /// [`ApiError::Internal`]): an ad id that could not be minted, a VAST document
    /// that could not be built. Made only by `From<AdsError>`, which turns the ads'
    /// field violations into [`ApiError::InvalidArgument`].
    #[error("internal error: {0}")]
    Ads(#[source] AdsError),
    /// The listener could not drain in time.
    #[error(transparent)]
    Serve(#[from] rm_service::ServeError),
}

impl ApiError {
    /// An [`ApiError::InvalidArgument`].
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::InvalidArgument {
            field: field.into(),
            message: message.into(),
        }
    }

    /// The gRPC code of this error.
    pub fn code(&self) -> Code {
        match self {
            Self::InvalidArgument { .. } | Self::BodyTimeout(_) => Code::InvalidArgument,
            Self::MethodNotAllowed(_) => Code::Unimplemented,
            Self::Auth(e) => auth_code(e),
            Self::PermissionDenied(_) => Code::PermissionDenied,
            Self::NotFound(_) => Code::NotFound,
            Self::AlreadyExists(_) => Code::AlreadyExists,
            Self::ResourceExhausted(_) => Code::ResourceExhausted,
            Self::Unavailable(_) | Self::ReportStore(_) => Code::Unavailable,
            Self::OAuth(e) => match e.status {
                StatusCode::BAD_REQUEST => Code::InvalidArgument,
                StatusCode::UNAUTHORIZED => Code::Unauthenticated,
                StatusCode::TOO_MANY_REQUESTS => Code::ResourceExhausted,
                StatusCode::SERVICE_UNAVAILABLE => Code::Unavailable,
                _ => Code::Internal,
            },
            Self::Internal(_) | Self::Serve(_) | Self::Ads(_) => Code::Internal,
        }
    }

    fn reason(&self) -> &'static str {
        match self {
            Self::InvalidArgument { .. } => "invalid_argument",
            Self::BodyTimeout(_) => "body_timeout",
            Self::MethodNotAllowed(_) => "method_not_allowed",
            Self::Auth(e) => match Denial::of(e) {
                Some(d) => d.reason(),
                None => match auth_code(e) {
                    Code::ResourceExhausted => "resource_exhausted",
                    Code::Unavailable => "unavailable",
                    _ => "internal",
                },
            },
            Self::PermissionDenied(_) => "permission_denied",
            Self::NotFound(_) => "not_found",
            Self::AlreadyExists(_) => "already_exists",
            Self::ResourceExhausted(_) => "resource_exhausted",
            Self::Unavailable(_) => "unavailable",
            Self::ReportStore(_) => "store_unavailable",
            Self::OAuth(e) => e.error,
            Self::Internal(_) | Self::Serve(_) | Self::Ads(_) => "internal",
        }
    }

    /// The HTTP response: error status object, plus `WWW-Authenticate: Bearer` on
    /// 401 and 403 (RFC 6750 3; `Basic` for the orders API key), `Retry-After` on 429
    /// and 503, and `Allow` on 405. Token endpoint errors are RFC 6749 bodies.
    pub fn response(&self) -> Response {
        let message = match self {
            Self::OAuth(e) => return oauth_response(e),
            Self::PermissionDenied(m) => return Denial::InsufficientScope(m).response(),
            Self::Auth(e) => match Denial::of(e) {
                Some(d) => return d.response(),
                None => auth_message(e),
            },
            Self::Internal(_) | Self::Serve(_) | Self::Ads(_) => {
                tracing::error!(error = %self, "internal error");
                "internal error; the request was not completed".to_owned()
            }
            Self::ReportStore(cause) => {
                tracing::warn!(error = %cause, "report query failed");
                "the report store is unavailable; retry later".to_owned()
            }
            other => other.to_string(),
        };
        let mut s = RpcStatus::new(self.code(), self.reason(), message);
        if let Self::InvalidArgument { field, message } = self {
            s.details.push(serde_json::json!({
                "@type": BAD_REQUEST_TYPE,
                "fieldViolations": [{"field": field, "description": message}],
            }));
        }
        let mut r = response::status(&s);
        match self {
            Self::ResourceExhausted(_) | Self::Unavailable(_) => {
                r.headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            }
            Self::Auth(e)
                if matches!(auth_code(e), Code::ResourceExhausted | Code::Unavailable) =>
            {
                r.headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            }
            Self::ReportStore(_) => {
                r.headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
            }
            Self::BodyTimeout(_) => {
                *r.status_mut() = StatusCode::REQUEST_TIMEOUT;
                r.headers_mut()
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            Self::MethodNotAllowed(allow) => {
                *r.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
                if let Ok(v) = HeaderValue::from_str(allow) {
                    r.headers_mut().insert(header::ALLOW, v);
                }
            }
            _ => {}
        }
        r
    }
}

/// The api state's errors: a 503 (the backend is down, or a value does not decode,
/// which is logged here as the corruption it is).
impl From<StateError> for ApiError {
    fn from(e: StateError) -> Self {
        ApiError::Unavailable(match e {
            StateError::Backend(_) => {
                tracing::warn!(error = %e, "api state unavailable");
                "the api's state store is unavailable".to_owned()
            }
            StateError::Corrupt { .. } => {
                tracing::error!(error = %e, "corrupt state");
                "the api's state store returned an unreadable value".to_owned()
            }
        })
    }
}

/// The report store's errors: a 503 whose cause is logged when answered.
impl From<rm_store::StoreError> for ApiError {
    fn from(e: rm_store::StoreError) -> Self {
        ApiError::ReportStore(e)
    }
}

/// A member of a body at fault ([`crate::model::Invalid`]): a 400 naming it.
impl From<crate::model::Invalid> for ApiError {
    fn from(e: crate::model::Invalid) -> Self {
        Self::InvalidArgument {
            field: e.field,
            message: e.message,
        }
    }
}

/// The ads' errors: a member at fault is the same 400 as the api's own
/// ([`ApiError::InvalidArgument`], same field and message); anything else is a 500
/// keeping the cause.
impl From<AdsError> for ApiError {
    fn from(e: AdsError) -> Self {
        match e {
            AdsError::Invalid { field, message } => Self::InvalidArgument { field, message },
            other => Self::Ads(other),
        }
    }
}

/// The gRPC code of an authentication error.
fn auth_code(e: &AuthError) -> Code {
    if let Some(d) = Denial::of(e) {
        return d.code();
    }
    match e {
        AuthError::Limited(_) => Code::ResourceExhausted,
        AuthError::Busy | AuthError::KeysUnavailable(_) | AuthError::Store(_) => Code::Unavailable,
        _ => Code::Internal,
    }
}

/// The message of an authentication error that is not a denial (429 or 503), the
/// cause logged once here: a state failure reads as the state's own 503.
fn auth_message(e: &AuthError) -> String {
    match e {
        AuthError::Store(cause) => match cause.downcast_ref::<StateError>() {
            Some(StateError::Backend(_)) => {
                tracing::warn!(error = %cause, "auth: state unavailable");
                "the api's state store is unavailable".to_owned()
            }
            Some(StateError::Corrupt { .. }) => {
                tracing::error!(error = %cause, "corrupt state");
                "the api's state store returned an unreadable value".to_owned()
            }
            None => {
                tracing::warn!(error = %cause, "auth: store unavailable");
                "the api's state store is unavailable".to_owned()
            }
        },
        AuthError::Limited(_) | AuthError::Busy | AuthError::KeysUnavailable(_) => e.to_string(),
        other => {
            tracing::error!(error = %other, "auth: internal error");
            "internal error; the request was not completed".to_owned()
        }
    }
}

/// An RFC 6749 5.2 error body, with `WWW-Authenticate: Basic` on 401 (2.3.1) and
/// `Retry-After` when the error says when.
fn oauth_response(e: &TokenError) -> Response {
    let body = serde_json::json!({"error": e.error, "error_description": e.description});
    let mut r = response::json(e.status, body.to_string());
    if e.status == StatusCode::UNAUTHORIZED {
        r.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Basic realm=\"retail-media\", charset=\"UTF-8\""),
        );
    }
    if let Some(s) = e.retry_after {
        if let Ok(v) = HeaderValue::from_str(&s.to_string()) {
            r.headers_mut().insert(header::RETRY_AFTER, v);
        }
    }
    r
}

/// Parses a JSON body into `T`, naming the JSON path of the first problem.
pub fn parse_json<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    if body.is_empty() {
        return Err(ApiError::invalid("body", "a JSON body is required"));
    }
    let de = &mut serde_json::Deserializer::from_slice(body);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let message = e.into_inner().to_string();
        // "missing field `x`" is reported at the parent: name the field itself.
        let missing = message
            .strip_prefix("missing field `")
            .and_then(|r| r.split('`').next());
        let field = match (path.as_str(), missing) {
            (".", Some(m)) => m.to_owned(),
            (".", None) => "body".to_owned(),
            (p, Some(m)) => format!("{p}.{m}"),
            (p, None) => p.to_owned(),
        };
        ApiError::invalid(field, message)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Outer {
        inner: Inner,
    }
    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Inner {
        n: u32,
    }

    #[test]
    fn json_errors_name_the_path() {
        let e = parse_json::<Outer>(br#"{"inner":{"n":"x"}}"#).unwrap_err();
        assert!(matches!(&e, ApiError::InvalidArgument { field, .. } if field == "inner.n"));
        let e = parse_json::<Outer>(b"{").unwrap_err();
        assert!(matches!(&e, ApiError::InvalidArgument { .. }));
        let e = parse_json::<Outer>(b"").unwrap_err();
        assert!(matches!(&e, ApiError::InvalidArgument { field, .. } if field == "body"));
    }

    #[test]
    fn statuses_follow_grpc_gateway() {
        assert_eq!(ApiError::invalid("a", "b").response().status(), 400);
        assert_eq!(
            ApiError::from(AuthError::InvalidToken("x".into()))
                .response()
                .status(),
            401
        );
        let r = ApiError::PermissionDenied("x".into()).response();
        assert_eq!(r.status(), 403);
        assert!(r.headers()[header::WWW_AUTHENTICATE]
            .to_str()
            .unwrap()
            .contains("insufficient_scope"));
        assert_eq!(ApiError::NotFound("x".into()).response().status(), 404);
        assert_eq!(ApiError::AlreadyExists("x".into()).response().status(), 409);
        assert_eq!(
            ApiError::ResourceExhausted("x".into()).response().status(),
            429
        );
        assert_eq!(ApiError::Internal("db".into()).response().status(), 500);
        assert_eq!(ApiError::Unavailable("x".into()).response().status(), 503);
    }

    /// Status, headers and body bytes of a response.
    fn parts(r: Response) -> (StatusCode, Vec<(String, String)>, Vec<u8>) {
        use http_body_util::BodyExt as _;
        let status = r.status();
        let headers = r
            .headers()
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or_default().to_owned()))
            .collect();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let body = rt.block_on(r.into_body().collect()).expect("body");
        (status, headers, body.to_bytes().to_vec())
    }

    #[test]
    fn answers_once_built_elsewhere_are_byte_identical() {
        let same =
            |ours: ApiError, theirs: Response| assert_eq!(parts(ours.response()), parts(theirs));
        same(
            ApiError::NotFound("no route for /x".into()),
            response::not_found("/x"),
        );
        same(
            ApiError::MethodNotAllowed("GET, HEAD".into()),
            response::method_not_allowed("GET, HEAD"),
        );
        same(
            ApiError::ReportStore(rm_store::StoreError::Unavailable(
                "connection refused".into(),
            )),
            response::unavailable(
                "store_unavailable",
                "the report store is unavailable; retry later",
                5,
            ),
        );
        let e = TokenError {
            status: StatusCode::TOO_MANY_REQUESTS,
            error: "slow_down",
            description: "retry in 7 s".into(),
            retry_after: Some(7),
        };
        let (status, headers, body) = parts(ApiError::OAuth(e).response());
        assert_eq!(status, 429);
        assert!(headers.contains(&("retry-after".into(), "7".into())));
        assert_eq!(
            body,
            br#"{"error":"slow_down","error_description":"retry in 7 s"}"#
        );
        // The ads' errors answer as the api's own did before they had their own type.
        same(
            AdsError::invalid("bannerXCampaign.endTime", "is before startTime").into(),
            ApiError::invalid("bannerXCampaign.endTime", "is before startTime").response(),
        );
        let mint = AdsError::MintAdId {
            campaign: "c1".into(),
        };
        same(
            mint.into(),
            ApiError::Internal("could not mint an ad id for campaign c1".into()).response(),
        );
        let r =
            ApiError::from(AuthError::ApiKeyRejected("the API key is not valid".into())).response();
        assert_eq!(r.status(), 401);
        assert_eq!(
            r.headers()[header::WWW_AUTHENTICATE],
            "Basic realm=\"retail-media-orders\""
        );
    }
}
