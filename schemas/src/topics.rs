//! Names of the event-log topics. The embedded log and Kafka use the same names.

/// Accepted interaction events, one record per event, keyed by the tracking id
/// (`rm_schemas::record`), so everything one shopper does stays in one partition.
pub const AD_INTERACTIONS: &str = "ad-interactions";
/// Optional "bad rows": rejected beacons with their reason and (truncated) raw query.
pub const AD_INTERACTIONS_REJECTED: &str = "ad-interactions-rejected";
/// Orders sent to the partner API, for sales attribution.
pub const ORDERS: &str = "orders";
