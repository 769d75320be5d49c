//! The one denial answer: the 401 and 403 both the api and the edge send, an error
//! status object `{code, message, details}` (`rm_service::response`) with its
//! challenge (RFC 6750 3 for bearer tokens, RFC 7617 for the orders API key):
//!
//! | denial | status | reason | `WWW-Authenticate` |
//! |---|---|---|---|
//! | no credentials | 401 | `unauthenticated` | `Bearer realm="retail-media"` (no error code, RFC 6750 3.1) |
//! | a token that does not verify | 401 | `unauthenticated` | `Bearer realm="retail-media", error="invalid_token", error_description="..."` |
//! | a token without the scope, or a namespace not the caller's | 403 | `permission_denied` | `Bearer realm="retail-media", error="insufficient_scope", error_description="..."` |
//! | a missing or bad orders API key | 401 | `unauthenticated` | `Basic realm="retail-media-orders"` |

use http::{header, HeaderValue};
use rm_schemas::rpc_status::{Code, RpcStatus};
use rm_service::{response, Response};

use crate::error::AuthError;

/// A refusal to let a request in, with the message the caller reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Denial<'a> {
    /// No credentials were sent (401).
    NoCredentials(&'a str),
    /// A bearer token that does not verify (401).
    InvalidToken(&'a str),
    /// Valid credentials that may not do this (403).
    InsufficientScope(&'a str),
    /// The orders API key is missing or does not verify (401).
    ApiKey(&'a str),
}

impl<'a> Denial<'a> {
    /// The denial of `e`, when `e` is one (401/403); other errors are answered by
    /// whoever serves the request.
    pub fn of(e: &'a AuthError) -> Option<Denial<'a>> {
        match e {
            AuthError::NoCredentials(m) => Some(Denial::NoCredentials(m)),
            AuthError::InvalidToken(m) => Some(Denial::InvalidToken(m)),
            AuthError::InsufficientScope(m) => Some(Denial::InsufficientScope(m)),
            AuthError::ApiKeyRejected(m) => Some(Denial::ApiKey(m)),
            _ => None,
        }
    }

    /// The gRPC code: `UNAUTHENTICATED` (401) or `PERMISSION_DENIED` (403).
    pub fn code(self) -> Code {
        match self {
            Denial::InsufficientScope(_) => Code::PermissionDenied,
            _ => Code::Unauthenticated,
        }
    }

    /// The reason of the status object.
    pub fn reason(self) -> &'static str {
        match self {
            Denial::InsufficientScope(_) => "permission_denied",
            _ => "unauthenticated",
        }
    }

    fn message(self) -> &'a str {
        match self {
            Denial::NoCredentials(m)
            | Denial::InvalidToken(m)
            | Denial::InsufficientScope(m)
            | Denial::ApiKey(m) => m,
        }
    }

    /// The answer: status object and challenge (see the module header).
    pub fn response(self) -> Response {
        let mut r = response::status(&RpcStatus::new(self.code(), self.reason(), self.message()));
        let challenge = match self {
            Denial::NoCredentials(_) => HeaderValue::from_static(BEARER_REALM),
            Denial::InvalidToken(m) => bearer("invalid_token", m),
            Denial::InsufficientScope(m) => bearer("insufficient_scope", m),
            Denial::ApiKey(_) => HeaderValue::from_static("Basic realm=\"retail-media-orders\""),
        };
        r.headers_mut().insert(header::WWW_AUTHENTICATE, challenge);
        r
    }
}

const BEARER_REALM: &str = "Bearer realm=\"retail-media\"";

/// A bearer challenge with an error code and description (quotes and backslashes of
/// the description become `'`; one that still is no header value: the bare realm).
fn bearer(error: &str, description: &str) -> HeaderValue {
    let d = description.replace(['"', '\\'], "'");
    HeaderValue::from_str(&format!(
        "{BEARER_REALM}, error=\"{error}\", error_description=\"{d}\""
    ))
    .unwrap_or_else(|_| HeaderValue::from_static(BEARER_REALM))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenges() {
        let r = Denial::NoCredentials("m").response();
        assert_eq!(r.status(), 401);
        assert_eq!(r.headers()[header::WWW_AUTHENTICATE], BEARER_REALM);
        let r = Denial::InsufficientScope("needs \"reports\"").response();
        assert_eq!(r.status(), 403);
        assert_eq!(
            r.headers()[header::WWW_AUTHENTICATE],
            "Bearer realm=\"retail-media\", error=\"insufficient_scope\", error_description=\"needs 'reports'\""
        );
        let e = AuthError::ApiKeyRejected("no".into());
        let r = Denial::of(&e).map(Denial::response).unwrap();
        assert_eq!(r.status(), 401);
        assert_eq!(
            r.headers()[header::WWW_AUTHENTICATE],
            "Basic realm=\"retail-media-orders\""
        );
        assert!(Denial::of(&AuthError::Busy).is_none());
    }
}
