//! The audience segment (spec: "Segment"). Every member is optional on input; the
//! response adds the read-only `id`.
//!
//! Update rule (`PUT /v1/segments/{segment.id}`): the body replaces the stored
//! segment whole (members left out become empty), like an update without a field
//! mask. `segment.id` in the body is read-only: it may be omitted, and if present it
//! must equal the path (400 otherwise). `segmentId` is the partner's own identifier of
//! the segment and is stored as given.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{check_id, check_text, Invalid};

/// Most categories on one segment.
pub const MAX_CATEGORIES: usize = 256;

/// A segment's members.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct Segment {
    /// Read-only identifier, assigned at creation (or taken from the create body).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub id: String,
    /// The namespace the segment belongs to: the creating client's (an operator may
    /// name another at creation). Read-only afterwards.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace_id: String,
    /// Categories the segment belongs to.
    pub category: Vec<String>,
    /// Description of the segment.
    pub description: String,
    /// Name.
    pub name: String,
    /// Identifier of the retailer that owns the segment.
    pub retailer_team_id: String,
    /// Identifier of the segment in the partner's system.
    pub segment_id: String,
    /// Identifier of the source the segment came from.
    pub source_id: String,
}

/// `{segment: {...}}`, the request and response body.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SegmentBody {
    /// The segment.
    #[serde(default)]
    pub segment: Segment,
}

impl Segment {
    /// Checks bounds of every member.
    pub fn validate(&self) -> Result<(), Invalid> {
        if !self.id.is_empty() {
            check_id("segment.id", &self.id)?;
        }
        if self.category.len() > MAX_CATEGORIES {
            return Err(Invalid::new(
                "segment.category",
                format!("more than {MAX_CATEGORIES} categories"),
            ));
        }
        for (i, c) in self.category.iter().enumerate() {
            check_text(&format!("segment.category[{i}]"), c)?;
        }
        if !self.namespace_id.is_empty() && !rm_schemas::namespace::valid(&self.namespace_id) {
            return Err(Invalid::new(
                "segment.namespaceId",
                "not a namespace id ([a-z0-9_-], 1 to 64)",
            ));
        }
        check_text("segment.description", &self.description)?;
        check_text("segment.name", &self.name)?;
        check_text("segment.retailerTeamId", &self.retailer_team_id)?;
        check_text("segment.segmentId", &self.segment_id)?;
        check_text("segment.sourceId", &self.source_id)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shape_is_camel_case() {
        let body: SegmentBody = serde_json::from_str(
            r#"{"segment":{"category":["a"],"retailerTeamId":"t","segmentId":"s","sourceId":"x"}}"#,
        )
        .unwrap();
        assert_eq!(body.segment.retailer_team_id, "t");
        let v = serde_json::to_value(&body).unwrap();
        assert_eq!(v["segment"]["segmentId"], "s");
        assert!(v["segment"].get("id").is_none());
    }

    #[test]
    fn bounds_are_checked() {
        let s = Segment {
            name: "x".repeat(super::super::MAX_TEXT_LEN + 1),
            ..Default::default()
        };
        assert!(s.validate().is_err());
        assert!(Segment::default().validate().is_ok());
    }
}
