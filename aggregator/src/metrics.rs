//! The aggregator's metrics: names in one place, bounded labels, counted per batch.
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `aggregator_batches_total` | counter | |
//! | `aggregator_batch_records` | histogram | |
//! | `aggregator_events_total` | counter | `interaction_type` |
//! | `aggregator_duplicates_total` | counter | |
//! | `aggregator_unverified_events_total` | counter | `verdict` (expired, bad_signature, foreign) |
//! | `aggregator_invalid_events_total` | counter | `reason` (known_bot, non_browser, prefetch, unverified_ad_id; the served-ad rules' before_serve, product_not_in_ad, served_ad_repeat) |
//! | `aggregator_shared_ad_ids_total` | counter | |
//! | `aggregator_tallied_total` | counter | `metric`: `events` (records that moved tallies, a replay's or a copy's do not), `billable_clicks` (net billable ad clicks tallied: what spend reads) |
//! | `aggregator_events_dropped_total` | counter | `reason` (too_late, future, undecodable) |
//! | `aggregator_rule_violations_total` | counter | `rule` (funnel_gap, repeated_milestone) |
//! | `aggregator_store_write_seconds` | histogram | `backend` |
//! | `aggregator_store_errors_total` | counter | `kind` (unavailable, refused) |
//! | `aggregator_orders_total` | counter | `outcome` (new, duplicate) |
//! | `aggregator_consumer_lag_records` | gauge | `topic` (events, orders), `partition` (`embedded` or the partition number) |
//! | `aggregator_freshness_seconds` | gauge | |
//! | `aggregator_overtaken_total` | counter | |
//! | `aggregator_rollups_compactions_total` | counter | `outcome` (done, failed) |
//! | `aggregator_rollups_open_from_day` | gauge | |
//! | `aggregator_erasures_total` | counter | |
//! | `aggregator_erased_id_records_total` | counter | |
//! | `aggregator_ageing_passes_total` | counter | `outcome` (done, failed) |
//! | `aggregator_aged_rows_total` | counter | |
//! | `aggregator_retention_passes_total` | counter | `outcome` (done, failed) |
//! | `aggregator_retired_rows_total` | counter | |
//! | `aggregator_loads_total` | counter | `kind` (served_ads, views, carts, orders, tallies), `found` (cache, nowhere, store: `crate::loads`) |

use metrics::{counter, gauge, histogram};
use rm_schemas::agent::InvalidReason;
use rm_schemas::record::UnverifiedAdId;
use rm_schemas::InteractionType;

use crate::batch::{Dropped, FoldStats};
use crate::sales::OrderStats;
use rm_store::model::traffic::TrafficClass;

/// Moves of the tallies (`rm_store::model::tallies`), by metric.
pub const TALLIED: &str = "aggregator_tallied_total";
/// Batches stored.
pub const BATCHES: &str = "aggregator_batches_total";
/// Records per batch.
pub const BATCH_RECORDS: &str = "aggregator_batch_records";
/// Events aggregated by type.
pub const EVENTS: &str = "aggregator_events_total";
/// Events already counted (duplicates that passed the edge).
pub const DUPLICATES: &str = "aggregator_duplicates_total";
/// Events aggregated whose ad id did not verify, by verdict.
pub const UNVERIFIED: &str = "aggregator_unverified_events_total";
/// Events aggregated that are invalid traffic, by reason (flagged, not deleted).
pub const INVALID: &str = "aggregator_invalid_events_total";
/// Realised ad ids seen with a second distinct shopper (a page caching ad responses
/// across shoppers, or someone replaying a served ad).
pub const SHARED_AD_IDS: &str = "aggregator_shared_ad_ids_total";
/// Events not aggregated.
pub const DROPPED: &str = "aggregator_events_dropped_total";
/// Rule violations seen.
pub const VIOLATIONS: &str = "aggregator_rule_violations_total";
/// Store write latency.
pub const STORE_WRITE: &str = "aggregator_store_write_seconds";
/// Store errors.
pub const STORE_ERRORS: &str = "aggregator_store_errors_total";
/// Orders read from the log, new or already stored.
pub const ORDERS: &str = "aggregator_orders_total";
/// Offers of touches to orders folded, by outcome (`credited`: a line's credit moved;
/// `kept`: no better than the credit, or a repeat; `orphan`: an order without a
/// state, never expected).
pub const OFFERS: &str = "aggregator_order_offers_total";
/// Offers of touches to orders appended to the orders topic (the lookups after each
/// write: new orders' shoppers' touches, new touches' shoppers' orders).
pub const OFFERS_SENT: &str = "aggregator_order_offers_sent_total";
/// Compactions of the closed hours' rollups, by outcome (`done`, `failed`).
pub const COMPACTIONS: &str = "aggregator_rollups_compactions_total";
/// The first day the last compaction left open (days since 1970-01-01 UTC).
pub const OPEN_FROM_DAY: &str = "aggregator_rollups_open_from_day";
/// Records behind the head of the log.
pub const LAG: &str = "aggregator_consumer_lag_records";
/// Now minus the event time of the newest stored event.
pub const FRESHNESS: &str = "aggregator_freshness_seconds";
/// Batches folded again from the store because another writer had folded one of
/// their log partitions further (a consumer that lost it in a rebalance and still
/// wrote, or a second consumer group on the topic).
pub const OVERTAKEN: &str = "aggregator_overtaken_total";
/// Erasures run (`crate::erasures`).
pub const ERASURES: &str = "aggregator_erasures_total";
/// Records whose erased ids were replaced before they were folded.
pub const ERASED_RECORDS: &str = "aggregator_erased_id_records_total";
/// Ageing passes (`crate::ageing`), by outcome (done, failed).
pub const AGEING_PASSES: &str = "aggregator_ageing_passes_total";
/// Rows whose ids an ageing pass replaced.
pub const AGED_ROWS: &str = "aggregator_aged_rows_total";
/// Fact retention passes (`crate::retention`), by outcome (done, failed).
pub const RETENTION_PASSES: &str = "aggregator_retention_passes_total";
/// Raw rows a retention pass removed.
pub const RETIRED_ROWS: &str = "aggregator_retired_rows_total";
/// What the folds needed of what a store may hold, by kind and where it was found
/// (`crate::loads`).
pub const LOADS: &str = "aggregator_loads_total";

/// Registers every series at zero so dashboards see them from the first scrape.
pub fn register(backend: &'static str) {
    counter!(BATCHES).absolute(0);
    counter!(DUPLICATES).absolute(0);
    for t in InteractionType::ALL
        .into_iter()
        .chain(InteractionType::AD_EVENTS)
    {
        counter!(EVENTS, "interaction_type" => t.as_str()).absolute(0);
    }
    for v in UnverifiedAdId::ALL {
        counter!(UNVERIFIED, "verdict" => v.as_str()).absolute(0);
    }
    for r in InvalidReason::ALL {
        counter!(INVALID, "reason" => r.as_str()).absolute(0);
    }
    for r in DECIDED {
        counter!(INVALID, "reason" => r).absolute(0);
    }
    counter!(SHARED_AD_IDS).absolute(0);
    counter!(OVERTAKEN).absolute(0);
    counter!(ERASURES).absolute(0);
    counter!(ERASED_RECORDS).absolute(0);
    counter!(AGED_ROWS).absolute(0);
    counter!(RETIRED_ROWS).absolute(0);
    for o in ["done", "failed"] {
        counter!(AGEING_PASSES, "outcome" => o).absolute(0);
        counter!(RETENTION_PASSES, "outcome" => o).absolute(0);
    }
    counter!(OFFERS_SENT).absolute(0);
    for (kind, found, _) in crate::loads::Counts::default().each() {
        counter!(LOADS, "kind" => kind.as_str(), "found" => found.as_str()).absolute(0);
    }
    for o in ["credited", "kept", "orphan"] {
        counter!(OFFERS, "outcome" => o).absolute(0);
    }
    for m in ["events", "billable_clicks"] {
        counter!(TALLIED, "metric" => m).absolute(0);
    }
    for r in ["too_late", "future", "undecodable"] {
        counter!(DROPPED, "reason" => r).absolute(0);
    }
    for r in ["funnel_gap", "repeated_milestone"] {
        counter!(VIOLATIONS, "rule" => r).absolute(0);
    }
    for k in ["unavailable", "refused"] {
        counter!(STORE_ERRORS, "kind" => k).absolute(0);
    }
    for o in ["new", "duplicate"] {
        counter!(ORDERS, "outcome" => o).absolute(0);
    }
    let _ = histogram!(STORE_WRITE, "backend" => backend);
    gauge!(FRESHNESS).set(0.0);
}

/// Counts one stored batch.
pub fn batch(records: usize, stats: &FoldStats, gaps: i64, repeats: i64) {
    counter!(BATCHES).increment(1);
    histogram!(BATCH_RECORDS).record(records as f64);
    for (t, n) in &stats.by_type {
        counter!(EVENTS, "interaction_type" => t.as_str()).increment(*n);
    }
    counter!(DUPLICATES).increment(stats.duplicates);
    for (v, n) in &stats.unverified {
        counter!(UNVERIFIED, "verdict" => v.as_str()).increment(*n);
    }
    for (r, n) in &stats.invalid {
        counter!(INVALID, "reason" => r.as_str()).increment(*n);
    }
    for (class, n) in &stats.decided {
        if let Some(r) = decided_reason(*class) {
            counter!(INVALID, "reason" => r).increment(*n);
        }
    }
    if stats.shared_ads > 0 {
        counter!(SHARED_AD_IDS).increment(stats.shared_ads);
    }
    if stats.tallied > 0 {
        counter!(TALLIED, "metric" => "events").increment(stats.tallied);
    }
    if stats.tallied_clicks > 0 {
        counter!(TALLIED, "metric" => "billable_clicks").increment(stats.tallied_clicks);
    }
    for (d, n) in &stats.dropped {
        let reason = match d {
            Dropped::TooLate => "too_late",
            Dropped::Future => "future",
        };
        counter!(DROPPED, "reason" => reason).increment(*n);
    }
    if gaps > 0 {
        counter!(VIOLATIONS, "rule" => "funnel_gap").increment(gaps as u64);
    }
    if repeats > 0 {
        counter!(VIOLATIONS, "rule" => "repeated_milestone").increment(repeats as u64);
    }
}

/// The `reason` labels of the served-ad rules' decisions.
const DECIDED: [&str; 3] = ["before_serve", "product_not_in_ad", "served_ad_repeat"];

/// The `reason` label of a class the served-ad rules gave (`None` for the edge's).
fn decided_reason(class: TrafficClass) -> Option<&'static str> {
    match class {
        TrafficClass::BeforeServe => Some(DECIDED[0]),
        TrafficClass::NotInAd => Some(DECIDED[1]),
        TrafficClass::Repeat => Some(DECIDED[2]),
        _ => None,
    }
}

/// Counts the orders of one stored batch.
pub fn orders(stats: &OrderStats) {
    if stats.new > 0 {
        counter!(ORDERS, "outcome" => "new").increment(stats.new);
    }
    if stats.duplicates > 0 {
        counter!(ORDERS, "outcome" => "duplicate").increment(stats.duplicates);
    }
    for (outcome, n) in [
        ("credited", stats.credited),
        ("kept", stats.offers_kept),
        ("orphan", stats.orphans),
    ] {
        if n > 0 {
            counter!(OFFERS, "outcome" => outcome).increment(n);
        }
    }
}

/// Counts what one batch's fold needed, by kind and where it was found.
pub fn loads(counts: &crate::loads::Counts) {
    for (kind, found, n) in counts.each().filter(|c| c.2 > 0) {
        counter!(LOADS, "kind" => kind.as_str(), "found" => found.as_str()).increment(n);
    }
}

/// Offers of touches appended to the orders topic by the lookups after a write.
pub fn offers_sent(n: usize) {
    counter!(OFFERS_SENT).increment(n as u64);
}
