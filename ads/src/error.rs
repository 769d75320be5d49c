//! The crate's one error type. It says what went wrong in the ads' own terms (a
//! member at fault, a campaign whose ad cannot be built, inputs that could not be
//! read); it knows nothing of HTTP: the api maps it to its answers in its one
//! error-to-response place (`api/src/error.rs`).

use rm_vast::VastError;

/// Why a request, a record or a rebuild of the index failed.
#[derive(Debug, thiserror::Error)]
pub enum AdsError {
    /// A request or a record breaks a rule; `field` names the member at fault (the
    /// api answers 400 with a field violation).
    #[error("{field}: {message}")]
    Invalid {
        /// JSON path of the member at fault, e.g. `bannerXCampaign.endTime`.
        field: String,
        /// What is wrong, for a developer.
        message: String,
    },
    /// A realised ad id could not be minted for a campaign.
    #[error("could not mint an ad id for campaign {campaign}")]
    MintAdId {
        /// The campaign.
        campaign: String,
    },
    /// A campaign's video creatives do not make a VAST document.
    #[error("VAST for campaign {campaign}: {source}")]
    Vast {
        /// The campaign.
        campaign: String,
        /// Why building or injecting failed.
        #[source]
        source: VastError,
    },
    /// The index's inputs (campaigns, products) could not be read.
    #[error("ads index inputs: {0}")]
    Inputs(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// A rebuild on the blocking pool did not complete (it panicked or was cancelled).
    #[error("{0}")]
    Rebuild(#[source] tokio::task::JoinError),
}

impl AdsError {
    /// An [`AdsError::Invalid`].
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Invalid {
            field: field.into(),
            message: message.into(),
        }
    }
}
