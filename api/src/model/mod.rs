//! The api's resources as they cross the wire: serde for the JSON shape of the spec's
//! tables (camelCase members, enums by their full names, money as strings, times as
//! RFC 3339), schemars for the OpenAPI document generated from the same types, and
//! validation of what serde alone cannot express. No I/O here.

pub mod campaign;
pub mod catalog;
pub mod segment;

use crate::error::ApiError;

/// Longest accepted identifier (segment, campaign, product, catalog).
pub const MAX_ID_LEN: usize = 256;
/// Longest accepted free-text field.
pub const MAX_TEXT_LEN: usize = 4096;

/// Checks a free-text member: at most [`MAX_TEXT_LEN`] bytes.
pub fn check_text(field: &str, v: &str) -> Result<(), ApiError> {
    if v.len() > MAX_TEXT_LEN {
        return Err(ApiError::invalid(
            field,
            format!("longer than {MAX_TEXT_LEN} bytes"),
        ));
    }
    Ok(())
}

/// Checks an identifier: 1..=[`MAX_ID_LEN`] bytes, no control characters.
pub fn check_id(field: &str, v: &str) -> Result<(), ApiError> {
    if v.is_empty() {
        return Err(ApiError::invalid(field, "must not be empty"));
    }
    if v.len() > MAX_ID_LEN {
        return Err(ApiError::invalid(
            field,
            format!("longer than {MAX_ID_LEN} bytes"),
        ));
    }
    if v.chars().any(char::is_control) {
        return Err(ApiError::invalid(field, "contains control characters"));
    }
    Ok(())
}
