//! Names of the event-log topics. The embedded log and Kafka use the same names.

/// Accepted interaction events, one record per event, keyed by `adId`.
pub const AD_INTERACTIONS: &str = "ad-interactions";
/// Optional "bad rows": rejected beacons with their reason and (truncated) raw query.
pub const AD_INTERACTIONS_REJECTED: &str = "ad-interactions-rejected";
/// Orders sent to the partner API, for sales attribution.
pub const ORDERS: &str = "orders";
