//! Consent decided at the edge (issue 25): whether a beacon's `iabConsentString` (an
//! IAB TCF v2 TC string, [`tc_string`]) gives the platform, as the IAB vendor the
//! operator names, what its measurement needs.
//!
//! **The rule** ([`ConsentPolicy::decide`]), for each purpose the operator says the
//! platform's processing relies on, with its legal basis (by default purpose 1,
//! "store and/or access information on a device", and purpose 7, "measure advertising
//! performance", both on consent):
//! - a publisher restriction of that purpose for our vendor decides first: "not
//!   allowed" refuses; "require consent" or "require legitimate interest" replaces the
//!   basis (purpose 1 only ever on consent);
//! - on consent: the purpose's consent bit and our vendor's consent bit must both be
//!   set;
//! - on legitimate interest: the purpose's legitimate-interest transparency bit and
//!   our vendor's legitimate-interest bit must both be set (neither objected to).
//!
//! TCF v2.2 (policy version 4) allows legitimate interest for none of purposes 1 and
//! 3 to 6: a policy naming it for them is refused at start ([`ConsentPolicy::new`]).
//! A string that does not decode gives nothing (no consent), never an error to the
//! caller: the parameter is optional, and a beacon is never refused for it. No string
//! at all leaves the event as it was (the beacon's own jurisdiction may not need
//! one); neither does a policy without a vendor id (consent strings are then not
//! evaluated).

pub mod pseudonyms;
pub mod tc_string;

use chrono::{DateTime, Utc};
use pseudonyms::Pseudonyms;
use rm_schemas::InteractionEvent;
use tc_string::{Restriction, TcError, TcString};

/// A purpose's legal basis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Basis {
    /// The shopper's consent.
    Consent,
    /// The vendor's legitimate interest, not objected to.
    LegitimateInterest,
}

/// What a consent string decided for one event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Our vendor may process the event's identifiers.
    Allowed,
    /// It may not: the event counts without identifiers ([`Refusal`] says why).
    Refused(Refusal),
}

/// Why a consent string does not allow our processing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// A purpose on consent without the purpose's or our vendor's consent.
    NoConsent,
    /// A purpose on legitimate interest not established, or objected to.
    NoLegitimateInterest,
    /// The publisher does not allow a purpose for our vendor.
    Restricted,
    /// The string does not decode.
    Undecodable(TcError),
}

impl Refusal {
    /// The metric label (bounded).
    pub const fn reason(self) -> &'static str {
        match self {
            Self::NoConsent => "no_consent",
            Self::NoLegitimateInterest => "no_legitimate_interest",
            Self::Restricted => "restricted",
            Self::Undecodable(e) => match e {
                TcError::Encoding => "undecodable_encoding",
                TcError::Version => "undecodable_version",
                TcError::Truncated => "undecodable_truncated",
                TcError::Range => "undecodable_range",
            },
        }
    }
}

/// Purposes TCF v2.2 allows only on consent.
const CONSENT_ONLY: [u8; 5] = [1, 3, 4, 5, 6];

/// The platform's vendor id and the purposes its measurement relies on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsentPolicy {
    vendor: u16,
    needs: Vec<(u8, Basis)>,
}

impl ConsentPolicy {
    /// The policy of vendor `vendor` for `purposes`: a comma-separated list of
    /// `<purpose>:<basis>` (`consent` or `li`), e.g. `1:consent,7:consent`.
    pub fn new(vendor: u16, purposes: &str) -> Result<Self, String> {
        if vendor == 0 {
            return Err("the TCF vendor id is 1 or more".into());
        }
        let mut needs = Vec::new();
        for item in purposes.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (p, basis) = item
                .split_once(':')
                .ok_or_else(|| format!("'{item}' is not <purpose>:<consent|li>"))?;
            let p: u8 = p
                .trim()
                .parse()
                .ok()
                .filter(|p| (1..=11).contains(p))
                .ok_or_else(|| format!("'{p}' is not a TCF purpose (1 to 11)"))?;
            let basis = match basis.trim() {
                "consent" => Basis::Consent,
                "li" => Basis::LegitimateInterest,
                b => return Err(format!("'{b}' is not a legal basis (consent, li)")),
            };
            if basis == Basis::LegitimateInterest && CONSENT_ONLY.contains(&p) {
                return Err(format!(
                    "purpose {p} cannot rest on legitimate interest under TCF v2.2"
                ));
            }
            needs.push((p, basis));
        }
        if needs.is_empty() {
            return Err("name at least one purpose".into());
        }
        Ok(Self { vendor, needs })
    }

    /// The vendor id.
    pub fn vendor(&self) -> u16 {
        self.vendor
    }

    /// What `consent` (a TC string) decides for our processing.
    pub fn decide(&self, consent: &str) -> Decision {
        match tc_string::decode(consent) {
            Ok(tc) => self.decide_decoded(&tc),
            Err(e) => Decision::Refused(Refusal::Undecodable(e)),
        }
    }

    /// What a decoded string decides (see the module header).
    pub fn decide_decoded(&self, tc: &TcString) -> Decision {
        for &(p, basis) in &self.needs {
            let basis = match tc.restriction(p, self.vendor) {
                Some(Restriction::NotAllowed) => return Decision::Refused(Refusal::Restricted),
                Some(Restriction::RequireConsent) => Basis::Consent,
                Some(Restriction::RequireLegitimateInterest) if !CONSENT_ONLY.contains(&p) => {
                    Basis::LegitimateInterest
                }
                _ => basis,
            };
            let ok = match basis {
                Basis::Consent => tc.purpose_consent(p) && tc.vendor_consents.contains(self.vendor),
                Basis::LegitimateInterest => tc.purpose_li(p) && tc.vendor_li.contains(self.vendor),
            };
            if !ok {
                return Decision::Refused(match basis {
                    Basis::Consent => Refusal::NoConsent,
                    Basis::LegitimateInterest => Refusal::NoLegitimateInterest,
                });
            }
        }
        Decision::Allowed
    }
}

/// What the edge's consent stage did with one event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsentOutcome {
    /// No vendor id is set: consent strings are not evaluated.
    NotEvaluated,
    /// The event carries no consent string: its ids are kept, as before.
    Absent,
    /// The string allows our processing.
    Allowed,
    /// It does not: the event's tracking ids were replaced ([`pseudonyms`]).
    Refused(Refusal),
}

impl ConsentOutcome {
    /// Every metric label, for registering the series up front.
    pub const LABELS: [&'static str; 10] = [
        "not_evaluated",
        "absent",
        "allowed",
        "no_consent",
        "no_legitimate_interest",
        "restricted",
        "undecodable_encoding",
        "undecodable_version",
        "undecodable_truncated",
        "undecodable_range",
    ];

    /// The metric label (one of [`Self::LABELS`]).
    pub const fn label(self) -> &'static str {
        match self {
            Self::NotEvaluated => "not_evaluated",
            Self::Absent => "absent",
            Self::Allowed => "allowed",
            Self::Refused(r) => r.reason(),
        }
    }

    /// Whether the event's ids were replaced.
    pub const fn anonymous(self) -> bool {
        matches!(self, Self::Refused(_))
    }
}

/// The edge's consent stage: the policy (`None`: strings are not evaluated) and the
/// deployment's pseudonyms.
#[derive(Debug, Clone)]
pub struct ConsentStage {
    policy: Option<ConsentPolicy>,
    pseudonyms: Pseudonyms,
}

impl ConsentStage {
    /// The stage of `policy`, with pseudonyms keyed by `secret`.
    pub fn new(policy: Option<ConsentPolicy>, secret: &[u8]) -> Self {
        Self {
            policy,
            pseudonyms: Pseudonyms::new(secret),
        }
    }

    /// Decides `event`'s consent string, received at `received`, and replaces its
    /// tracking ids when the string refuses our processing.
    pub fn apply(&self, event: &mut InteractionEvent, received: DateTime<Utc>) -> ConsentOutcome {
        let Some(policy) = &self.policy else {
            return ConsentOutcome::NotEvaluated;
        };
        let Some(s) = event
            .iab_consent_string
            .as_deref()
            .filter(|s| !s.trim().is_empty())
        else {
            return ConsentOutcome::Absent;
        };
        match policy.decide(s) {
            Decision::Allowed => ConsentOutcome::Allowed,
            Decision::Refused(r) => {
                self.pseudonyms.replace(event, received.date_naive());
                ConsentOutcome::Refused(r)
            }
        }
    }
}

#[cfg(test)]
mod tests;
