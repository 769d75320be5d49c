//! The spec's error status object (`rpcStatus`): `{code, message, details[]}` with
//! gRPC codes, and the one mapping from gRPC code to HTTP status (as grpc-gateway
//! does it). Every HTTP error body of every service is built here.

use serde::Serialize;
use serde_json::{json, Value};

use crate::rejection::Rejection;

/// The gRPC status codes the services use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    /// 3: bad input.
    InvalidArgument,
    /// 5: no such resource.
    NotFound,
    /// 6: already exists.
    AlreadyExists,
    /// 7: authenticated but not allowed.
    PermissionDenied,
    /// 8: rate limited or a bound hit.
    ResourceExhausted,
    /// 12: method not supported on this resource.
    Unimplemented,
    /// 13: a bug or an unexpected failure.
    Internal,
    /// 14: a dependency is down; retry later.
    Unavailable,
    /// 16: missing or invalid credentials.
    Unauthenticated,
}

impl Code {
    /// Every code the services use.
    pub const ALL: [Code; 9] = [
        Self::InvalidArgument,
        Self::NotFound,
        Self::AlreadyExists,
        Self::PermissionDenied,
        Self::ResourceExhausted,
        Self::Unimplemented,
        Self::Internal,
        Self::Unavailable,
        Self::Unauthenticated,
    ];

    /// The code with this gRPC number, if the services use it.
    pub fn from_grpc(code: i32) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.grpc() == code)
    }

    /// The numeric gRPC code.
    pub const fn grpc(self) -> i32 {
        match self {
            Self::InvalidArgument => 3,
            Self::NotFound => 5,
            Self::AlreadyExists => 6,
            Self::PermissionDenied => 7,
            Self::ResourceExhausted => 8,
            Self::Unimplemented => 12,
            Self::Internal => 13,
            Self::Unavailable => 14,
            Self::Unauthenticated => 16,
        }
    }

    /// The HTTP status grpc-gateway maps this code to.
    pub const fn http_status(self) -> u16 {
        match self {
            Self::InvalidArgument => 400,
            Self::NotFound => 404,
            Self::AlreadyExists => 409,
            Self::PermissionDenied => 403,
            Self::ResourceExhausted => 429,
            Self::Unimplemented => 501,
            Self::Internal => 500,
            Self::Unavailable => 503,
            Self::Unauthenticated => 401,
        }
    }
}

/// The error status object.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RpcStatus {
    /// gRPC status code.
    pub code: i32,
    /// Developer-facing English message.
    pub message: String,
    /// Typed details, each with an `@type` URL.
    pub details: Vec<Value>,
}

/// Error domain used in `google.rpc.ErrorInfo` details.
pub const DOMAIN: &str = "retail-media";

impl RpcStatus {
    /// A status with an `ErrorInfo` detail carrying a machine-readable reason.
    pub fn new(code: Code, reason: &str, message: impl Into<String>) -> Self {
        Self {
            code: code.grpc(),
            message: message.into(),
            details: vec![json!({
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": reason.to_ascii_uppercase(),
                "domain": DOMAIN,
            })],
        }
    }

    /// The 400 body of a rejected beacon: `ErrorInfo` (reason, field) and
    /// `BadRequest.fieldViolations` naming the field.
    pub fn from_rejection(r: &Rejection) -> Self {
        Self {
            code: Code::InvalidArgument.grpc(),
            message: format!("{}: {}", r.field, r.message),
            details: vec![
                json!({
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": r.reason.as_str().to_ascii_uppercase(),
                    "domain": DOMAIN,
                    "metadata": { "reason": r.reason.as_str(), "field": r.field },
                }),
                json!({
                    "@type": "type.googleapis.com/google.rpc.BadRequest",
                    "fieldViolations": [{
                        "field": r.field,
                        "description": r.message,
                        "reason": r.reason.as_str(),
                    }],
                }),
            ],
        }
    }

    /// Serialises to JSON bytes.
    pub fn to_json(&self) -> Vec<u8> {
        // Serialising a struct of strings, integers and JSON values cannot fail.
        serde_json::to_vec(self)
            .unwrap_or_else(|_| b"{\"code\":13,\"message\":\"internal\",\"details\":[]}".to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rejection::RejectReason;

    #[test]
    fn rejection_body_names_reason_and_field() {
        let r = Rejection::new(
            RejectReason::NoTrackingId,
            "sessionId",
            "at least one tracking id is required",
        );
        let v: Value =
            serde_json::from_slice(&RpcStatus::from_rejection(&r).to_json()).expect("json");
        assert_eq!(v["code"], 3);
        assert!(v["message"]
            .as_str()
            .expect("message")
            .contains("sessionId"));
        assert_eq!(
            v["details"][0]["@type"],
            "type.googleapis.com/google.rpc.ErrorInfo"
        );
        assert_eq!(v["details"][0]["metadata"]["reason"], "no_tracking_id");
        assert_eq!(v["details"][1]["fieldViolations"][0]["field"], "sessionId");
    }

    #[test]
    fn grpc_to_http_mapping_matches_grpc_gateway() {
        let table = [
            (Code::InvalidArgument, 3, 400),
            (Code::Unauthenticated, 16, 401),
            (Code::PermissionDenied, 7, 403),
            (Code::NotFound, 5, 404),
            (Code::AlreadyExists, 6, 409),
            (Code::ResourceExhausted, 8, 429),
            (Code::Internal, 13, 500),
            (Code::Unavailable, 14, 503),
        ];
        for (c, g, h) in table {
            assert_eq!((c.grpc(), c.http_status()), (g, h), "{c:?}");
        }
    }
}
