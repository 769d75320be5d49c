//! The shared contract of the pipeline, with no I/O.
//!
//! Everything that crosses a process boundary is defined here once: the interaction
//! types of the spec ([`interaction`]), the strict query-string decoder
//! ([`query`]), validation of a beacon into an [`event::InteractionEvent`]
//! ([`validate`]), the fixed set of rejection reasons ([`rejection`]), the 128-bit
//! dedup key ([`dedup_key`]), the versioned log record ([`record`]), topic names
//! ([`topics`]) and the error status object every HTTP error body uses
//! ([`rpc_status`]). Tenancy rules (namespace ids, scoped ids) are in
//! [`namespace`]. Text from URLs and forms is percent-decoded in one place
//! ([`percent`]). The video funnel and control debounce rules of one view
//! ([`video_funnel`]) are here too, so the inspector ([`inspect`]) and the
//! aggregator's report judge a view alike. Invalid traffic (bots, non-browsers,
//! prefetches) is classified from request headers in [`agent`].

pub mod ad_event;
pub mod ad_id;
pub mod agent;
pub mod dedup_key;
pub mod event;
pub mod inspect;
pub mod interaction;
pub mod money;
pub mod namespace;
pub mod order;
pub mod percent;
pub mod query;
pub mod record;
pub mod rejection;
pub mod rpc_status;
pub mod tables;
pub mod topics;
pub mod validate;
pub mod vast_events;
pub mod video_funnel;

pub use dedup_key::DedupKey;
pub use event::InteractionEvent;
pub use interaction::InteractionType;
pub use record::{EventRecord, RECORD_VERSION};
pub use rejection::{RejectReason, Rejection};
pub use validate::parse_beacon;
