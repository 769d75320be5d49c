//! The api's resources as they cross the wire: serde for the JSON shape of the spec's
//! tables (camelCase members, enums by their full names, money as strings, times as
//! RFC 3339), schemars for the OpenAPI document generated from the same types, and
//! validation of what serde alone cannot express. No I/O here.
//!
//! The campaign and catalog model belong to the ads (`rm_ads::model`); the id and
//! text checks are theirs too, shared here (their `AdsError` becomes an `ApiError`
//! by `?`, in `crate::error`).

pub mod segment;

pub use rm_ads::model::{check_id, check_text, MAX_ID_LEN, MAX_TEXT_LEN};
