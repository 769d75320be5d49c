//! VAST 4.0: building our video ad documents ([`build`]) and injecting our tracking
//! into any VAST 4.x document, ours or an advertiser's ([`inject`]); [`serve`] is
//! both (spec, Events rules 4-8; issue 5, "VAST 4.0 generation and injection").
//!
//! Pure functions over strings: no I/O, no clock, no randomness. The crate knows
//! nothing of campaigns, tenants or HTTP (the ads crate, `rm-ads`, builds a
//! [`VideoAd`] from a campaign; the api turns [`VastError`] into its answers), and
//! depends on the contract (`rm-schemas`) only for the event mapping and the edge's
//! id bounds.
//!
//! # What injection writes
//!
//! For every `Creative` that has a `Linear` (in `InLine` and in `Wrapper` ads), one
//! `<Tracking event="...">` per event of [`rm_schemas::vast_events::MAPPED`] (rule 6,
//! 11 nodes) and none for the events of rule 5. Each holds one beacon URL
//! ([`url`]): `beacon_url?adId=..&interactionType=..&videoId=..&<trackingParam>=..
//! &timestamp=[TIMESTAMP]` plus `&cb=[CACHEBUSTING]` when asked; values are
//! percent-encoded (RFC 3986 unreserved bytes kept), the macros are left for the
//! player to expand, and the URL is XML-escaped in the document.
//!
//! # Where it goes, and what stays untouched
//!
//! Rule 7 says "after VideoClicks", but the IAB VAST 4.0 schema
//! (`../shared/vast/vast4.xsd`) puts `TrackingEvents` in the base type of `Linear`,
//! so it comes *before* everything else but `Icons`: `Icons?, TrackingEvents?,
//! AdParameters?, Duration, MediaFiles, VideoClicks?` (inline) and `Icons?,
//! TrackingEvents?, VideoClicks?` (wrapper). A node after `VideoClicks` does not
//! validate, so we follow the schema: a new `TrackingEvents` goes right after the
//! `Linear` start tag, or after its `Icons` when `Icons` is the first child. When the
//! `Linear` already has a `TrackingEvents` (wherever it is), our nodes are appended
//! inside it, after the advertiser's. Every other byte of the input, `Impression`
//! and `VideoClicks/ClickTracking` included, is copied through unchanged: the input
//! is only parsed to find byte offsets, and the output is the input with our text
//! spliced in at those offsets.
//!
//! # Which videoId
//!
//! Rule 4: the `idValue` of the creative's `UniversalAdId` (the first one, when a
//! VAST 4.1+ creative lists several). A tracked creative without one, with an empty
//! one or with `unknown` (VAST's placeholder for "no id"), or whose id another
//! tracked creative of the document already uses, is an error naming the creative.
//! Wrapper creatives have no `UniversalAdId` in VAST 4.0 (the id lives in the
//! wrapped ad, unknown here), so a wrapper creative is identified by its `adId`
//! attribute (the Ad-ID, the registry `UniversalAdId` replaced), else its `id`
//! attribute, under the same rules.
//!
//! # Refusals
//!
//! Input over [`MAX_VAST_BYTES`], malformed XML, a root that is not `VAST`, a
//! `version` that is not 4.x, a document without any `Linear` creative, and a
//! document that already carries our beacons (a `Tracking` URL starting with
//! `beacon_url?`): injecting twice is refused with [`VastError::AlreadyInjected`]
//! rather than doubling every beacon. A different `beacon_url` is not ours and is
//! kept like any other third-party tracking.
//!
//! # The macros and the schema
//!
//! `[TIMESTAMP]` and `[CACHEBUSTING]` are written raw, because players replace the
//! literal bracketed form (IAB VAST; `@dailymotion/vast-client` matches `[NAME]` and
//! `%%NAME%%`, not `%5BNAME%5D`). The edge refuses a value that is still a macro
//! (`unexpanded_macro`) and accepts the expansion (an ISO 8601 time, percent-encoded
//! or not, and any cache-buster). libxml2's `xs:anyURI` check follows RFC 3986,
//! which has no raw `[` `]` in a query, so `xmllint --schema` reports each of our
//! `Tracking` values as not an `anyURI` while the macros are unexpanded; the
//! documents validate once they are expanded, and everything else validates as
//! served (`vast/tests/vast_xsd.rs` checks both). [`url::MACRO_TIMESTAMP`] is the one
//! place to change the spelling should a stricter reading win.

mod build;
mod inject;
mod scan;
pub mod url;
mod xml;

#[cfg(test)]
mod proptests;

pub use build::{build, serve, VideoAd, VideoCreative};
pub use inject::inject;

/// Largest VAST document [`inject`] accepts, in bytes (1 MiB). Real tags are a few
/// KiB; the bound keeps one request from holding megabytes of splice buffers.
pub const MAX_VAST_BYTES: usize = 1 << 20;

/// Who and where the injected beacons report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrackingContext {
    /// Full URL of the beacon endpoint, without a query, e.g.
    /// `http://127.0.0.1:8080/v1/events/ad/interaction`.
    pub beacon_url: String,
    /// The realised ad id (`partnerAdId`), sent as `adId`.
    pub ad_id: String,
    /// Which tracking id parameter to send: `sessionId`, `customerId` or `dtmToken`.
    pub tracking_param: &'static str,
    /// The tracking id's value.
    pub tracking_id: String,
    /// Add `cb=[CACHEBUSTING]` for players that cache identical URLs (rule 7).
    pub cachebusting: bool,
}

/// Why a VAST document could not be built or injected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VastError {
    /// The input is larger than [`MAX_VAST_BYTES`].
    #[error("VAST document is {len} bytes, more than the {max} accepted")]
    TooLarge {
        /// Input length in bytes.
        len: usize,
        /// The bound.
        max: usize,
    },
    /// Not well-formed XML.
    #[error("VAST document is not well-formed XML at byte {position}: {message}")]
    Malformed {
        /// Byte offset of the problem.
        position: u64,
        /// What is wrong.
        message: String,
    },
    /// The root element is not `VAST`.
    #[error("not a VAST document: the root element is <{root}>, not <VAST>")]
    NotVast {
        /// The root's name as written.
        root: String,
    },
    /// The `version` attribute is missing or not 4.x.
    #[error("VAST version {version:?} is not supported: only VAST 4.x is")]
    UnsupportedVersion {
        /// The version as written (empty when missing).
        version: String,
    },
    /// No `Creative` has a `Linear`: there is nothing to track.
    #[error("the VAST document has no Creative with a Linear element: nothing to track")]
    NoLinearCreative,
    /// A tracked creative has no usable id for `videoId` (rule 4).
    #[error("{creative} has no usable id for videoId: {reason}")]
    MissingVideoId {
        /// The creative, e.g. `creative #2 (id="c2")`.
        creative: String,
        /// What is missing.
        reason: &'static str,
    },
    /// Two tracked creatives share one id (rule 4: never shared).
    #[error("{creative} uses videoId {video_id:?}, already used by {first}: each creative needs its own UniversalAdId idValue")]
    DuplicateVideoId {
        /// The id.
        video_id: String,
        /// The creative that used it first.
        first: String,
        /// The creative that repeats it.
        creative: String,
    },
    /// A creative's id is longer than the edge accepts.
    #[error("{creative}: videoId is {len} bytes, more than the {max} the beacon endpoint accepts")]
    VideoIdTooLong {
        /// The creative.
        creative: String,
        /// Its length.
        len: usize,
        /// The bound ([`rm_schemas::validate::MAX_ID_LEN`]).
        max: usize,
    },
    /// A `Linear` holds more than one `TrackingEvents`.
    #[error("{creative}: its Linear holds more than one TrackingEvents")]
    RepeatedTrackingEvents {
        /// The creative.
        creative: String,
    },
    /// The document already carries beacons to `beacon_url`.
    #[error(
        "{creative} already carries tracking to {beacon_url}: the document was injected before"
    )]
    AlreadyInjected {
        /// The creative.
        creative: String,
        /// Our beacon URL.
        beacon_url: String,
    },
    /// The tracking context cannot produce beacons the edge accepts.
    #[error("tracking context: {field} {reason}")]
    InvalidContext {
        /// The field of [`TrackingContext`].
        field: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// The ad to build cannot make a valid VAST document.
    #[error("video ad: {0}")]
    InvalidAd(&'static str),
}
