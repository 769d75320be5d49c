//! The api's resources as they cross the wire: serde for the JSON shape of the spec's
//! tables (camelCase members, enums by their full names, money as strings, times as
//! RFC 3339), schemars for the OpenAPI document generated from the same types, and
//! validation of what serde alone cannot express. No I/O here.
//!
//! The campaign and catalog model belong to the ads (`rm_ads::model`), whose id and
//! text checks the segment shares. Validation returns this module's own error,
//! [`Invalid`] (the member at fault and why); the HTTP layer turns it into a 400 in
//! `crate::error`, so the model names nothing of HTTP.

pub mod segment;

pub use rm_ads::model::{MAX_ID_LEN, MAX_TEXT_LEN};

/// A member of a body at fault: its JSON path and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct Invalid {
    /// JSON path of the member.
    pub field: String,
    /// What is wrong, for a developer.
    pub message: String,
}

impl Invalid {
    /// An [`Invalid`] naming `field`.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }

    fn of(field: &str, e: rm_ads::AdsError) -> Self {
        match e {
            rm_ads::AdsError::Invalid { field, message } => Self { field, message },
            other => Self::new(field, other.to_string()),
        }
    }
}

/// An identifier: 1 to [`MAX_ID_LEN`] bytes, no control characters (the ads' rule).
pub fn check_id(field: &str, v: &str) -> Result<(), Invalid> {
    rm_ads::model::check_id(field, v).map_err(|e| Invalid::of(field, e))
}

/// A free-text member: at most [`MAX_TEXT_LEN`] bytes (the ads' rule).
pub fn check_text(field: &str, v: &str) -> Result<(), Invalid> {
    rm_ads::model::check_text(field, v).map_err(|e| Invalid::of(field, e))
}
