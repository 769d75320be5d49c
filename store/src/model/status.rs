//! The status of the realised ad id behind a report row (issue 5: "marked unverified in
//! the reports").
//!
//! The edge verifies every `adId` it receives and writes the outcome into the record
//! (`adIdVerdict`, absent when the id verified). Each stored fact keeps it as an
//! [`AdIdStatus`], and every report row keyed by an ad id carries `adIdStatus`: the
//! **worst** status among the distinct events of the row. The order, from best to
//! worst, is
//!
//! `verified` < `expired` < `bad_signature` < `foreign`
//!
//! - `expired`: an id we signed, used after its expiry: a real ad, late (a replayed or
//!   cached page); the least suspicious failure;
//! - `bad_signature`: shaped like ours but the signature does not verify: tampered
//!   with, or signed with a key no longer in `RM_AD_ID_KEYS`;
//! - `foreign`: not one of our ids at all: nothing can be said about the ad.
//!
//! Copies of one event (same dedup key) may carry different verdicts when the same
//! event was re-sent across its ad's expiry; the fact keeps the **best** of them (the
//! event was valid when first received), so the status is a function of the set of
//! copies, not of the order they arrive in.

use rm_schemas::record::UnverifiedAdId;
use serde::{Deserialize, Serialize};

/// How the ad id of an event verified, ordered from best to worst.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum AdIdStatus {
    /// The id verified (or the record predates verification).
    #[default]
    Verified,
    /// Ours, past its expiry.
    Expired,
    /// Shaped like ours, signature wrong.
    BadSignature,
    /// Not one of our ids.
    Foreign,
}

impl AdIdStatus {
    /// Every status, best first.
    pub const ALL: [AdIdStatus; 4] = [
        Self::Verified,
        Self::Expired,
        Self::BadSignature,
        Self::Foreign,
    ];

    /// The status of a record's `adIdVerdict`.
    pub fn of(verdict: Option<UnverifiedAdId>) -> Self {
        match verdict {
            None => Self::Verified,
            Some(UnverifiedAdId::Expired) => Self::Expired,
            Some(UnverifiedAdId::BadSignature) => Self::BadSignature,
            Some(UnverifiedAdId::Foreign) => Self::Foreign,
        }
    }

    /// The rank stored in ClickHouse (`ad_id_status UInt8`): 0 verified .. 3 foreign.
    pub fn rank(self) -> u8 {
        self as u8
    }

    /// The status of a stored rank (`None` for an unknown rank).
    pub fn from_rank(rank: u8) -> Option<Self> {
        Self::ALL.get(usize::from(rank)).copied()
    }

    /// The report value: `verified`, `expired`, `bad_signature` or `foreign`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Verified => "verified",
            Self::Expired => "expired",
            Self::BadSignature => "bad_signature",
            Self::Foreign => "foreign",
        }
    }

    /// True when events with this status are billable.
    pub fn is_billable(self) -> bool {
        self == Self::Verified
    }

    /// True when the id is one we minted (it verified, or only expired): its served
    /// ad's state may be kept, since only ids we served can make one.
    pub fn is_genuine(self) -> bool {
        matches!(self, Self::Verified | Self::Expired)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_ranks_and_names_agree() {
        for (i, s) in AdIdStatus::ALL.into_iter().enumerate() {
            assert_eq!(usize::from(s.rank()), i);
            assert_eq!(AdIdStatus::from_rank(s.rank()), Some(s));
            let json = serde_json::to_string(&s).expect("json");
            assert_eq!(json, format!("\"{}\"", s.as_str()));
        }
        assert_eq!(AdIdStatus::from_rank(4), None);
        assert!(AdIdStatus::Verified < AdIdStatus::Expired);
        assert!(AdIdStatus::Expired < AdIdStatus::BadSignature);
        assert!(AdIdStatus::BadSignature < AdIdStatus::Foreign);
        for v in UnverifiedAdId::ALL {
            assert_eq!(AdIdStatus::of(Some(v)).as_str(), v.as_str());
            assert!(!AdIdStatus::of(Some(v)).is_billable());
        }
        assert!(AdIdStatus::of(None).is_billable());
    }
}
