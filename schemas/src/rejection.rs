//! Why a beacon was refused: a fixed, bounded set of reasons (used as a metric label
//! and in the error body) plus the field that caused it.

use std::borrow::Cow;

/// The reason a beacon was rejected. The set is closed so it can label metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RejectReason {
    /// The query string is not URL-encoded as a whole: a byte RFC 3986 does not allow
    /// raw in a query, a malformed `%` escape, or invalid UTF-8 once decoded.
    UrlNotEncoded,
    /// A required parameter is absent or empty.
    MissingParameter,
    /// A known parameter appears more than once.
    DuplicateParameter,
    /// `interactionType` is not one of the 15 types of the spec.
    UnknownInteractionType,
    /// None of `sessionId`, `customerId`, `dtmToken` is present and non-empty.
    NoTrackingId,
    /// `timestamp` is not an ISO 8601 date-time with an offset.
    InvalidTimestamp,
    /// A parameter still holds a VAST macro such as `[TIMESTAMP]`: the player did not
    /// expand macros.
    UnexpandedMacro,
    /// `units` is not a non-negative integer.
    InvalidUnits,
    /// `conversionValue` is not a finite number.
    InvalidConversionValue,
    /// A parameter value is longer than allowed.
    ParameterTooLong,
    /// The `adId` does not carry a valid signature (only when verification is on).
    UnverifiedAdId,
    /// A click's `dest` is not an absolute `http` or `https` URL.
    InvalidDestination,
    /// A click's `dest` has no `sig`, or its `sig` is not the api's signature of that
    /// destination for that `adId` (the edge is never an open redirect).
    UnsignedDestination,
}

impl RejectReason {
    /// Every reason, for pre-registering metric series.
    pub const ALL: [RejectReason; 13] = [
        Self::UrlNotEncoded,
        Self::MissingParameter,
        Self::DuplicateParameter,
        Self::UnknownInteractionType,
        Self::NoTrackingId,
        Self::InvalidTimestamp,
        Self::UnexpandedMacro,
        Self::InvalidUnits,
        Self::InvalidConversionValue,
        Self::ParameterTooLong,
        Self::UnverifiedAdId,
        Self::InvalidDestination,
        Self::UnsignedDestination,
    ];

    /// The snake_case label used in metrics and in the error body's `reason`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::UrlNotEncoded => "url_not_encoded",
            Self::MissingParameter => "missing_parameter",
            Self::DuplicateParameter => "duplicate_parameter",
            Self::UnknownInteractionType => "unknown_interaction_type",
            Self::NoTrackingId => "no_tracking_id",
            Self::InvalidTimestamp => "invalid_timestamp",
            Self::UnexpandedMacro => "unexpanded_macro",
            Self::InvalidUnits => "invalid_units",
            Self::InvalidConversionValue => "invalid_conversion_value",
            Self::ParameterTooLong => "parameter_too_long",
            Self::UnverifiedAdId => "unverified_ad_id",
            Self::InvalidDestination => "invalid_destination",
            Self::UnsignedDestination => "unsigned_destination",
        }
    }
}

impl std::fmt::Display for RejectReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A refused beacon: the reason, the offending field, and a sentence for a developer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason} ({field}): {message}")]
pub struct Rejection {
    /// The fixed reason.
    pub reason: RejectReason,
    /// The parameter at fault (`query` when the whole query string is at fault).
    pub field: Cow<'static, str>,
    /// A developer-facing explanation.
    pub message: String,
}

impl Rejection {
    /// Builds a rejection.
    pub fn new(
        reason: RejectReason,
        field: impl Into<Cow<'static, str>>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            reason,
            field: field.into(),
            message: message.into(),
        }
    }
}
