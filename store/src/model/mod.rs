//! The report model: the facts the store keeps, the rows derived from them and the
//! pure functions (no I/O) that derive and roll them up. The aggregator's fold (step 6
//! of the pipeline) calls the write-time half (`insert_fact`, `derive_*`, `touches_of`,
//! `lines_of`); the reports call the read-time half (`report`, `states`, attribution).
//! Both live here, beside the tables, so neither side reaches into the other.
//!
//! Every derived row is a deterministic function of the **set** of distinct events
//! (by dedup key) of one entity: a view ([`funnel`]), a product-day ([`products`]), a
//! cart ([`carts`]) or an ad event ([`ads`], ad-level impressions and clicks). That is
//! what makes the pipeline exactly-once: re-applying an event already in the set, in
//! any order, after any crash, derives the same rows. Events are placed by their own
//! `timestamp` (event time), never by arrival. Sales [`attribution`] is the same kind
//! of function, of two sets (touches and order lines), evaluated when the sales report
//! is read. [`campaigns`] rolls the reports up per campaign and day; [`status`] is how
//! each row shows unverified ad ids; [`ad_id_campaign`] maps an ad id to its campaign.
//! [`served`] is what the aggregator decides as a served ad's events arrive (one
//! billable impression and click per thing it carries, and the stateless rules),
//! kept per realised ad id. [`tallies`] are the counts decided there, summed per
//! campaign and day as events arrive, for readers that must not read the events.

pub mod ad_id_campaign;
pub mod ads;
pub mod ageing;
pub mod attribution;
pub mod campaigns;
pub mod carts;
pub mod erasure;
pub mod funnel;
pub mod periods;
pub mod products;
pub mod retention;
pub mod rollup;
pub mod served;
pub mod status;
pub mod tallies;
pub mod traffic;

/// Hash maps and sets of the hot path: entity keys are hashed several times per
/// event, so a fast hash (foldhash) rather than SipHash. The keys come from
/// unauthenticated beacons, so a sender chooses them; foldhash's per-process random
/// seed keeps it from aiming them at one bucket.
pub type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
/// See [`FastMap`].
pub type FastSet<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;

/// A fact of an entity's set: identified by its dedup key, placed by its event time,
/// carrying the ad id status of its best copy.
pub trait Fact {
    /// The dedup key (identity in the set).
    fn dedup_key(&self) -> u128;
    /// Event time, ms.
    fn time_ms(&self) -> i64;
    /// The status, improved in place by a better copy.
    fn status_mut(&mut self) -> &mut status::AdIdStatus;
}

/// Implements [`Fact`] for a struct with `dedup_key`, `time_ms` and `status` fields.
macro_rules! impl_fact {
    ($t:ty) => {
        impl $crate::model::Fact for $t {
            fn dedup_key(&self) -> u128 {
                self.dedup_key
            }
            fn time_ms(&self) -> i64 {
                self.time_ms
            }
            fn status_mut(&mut self) -> &mut $crate::model::status::AdIdStatus {
                &mut self.status
            }
        }
    };
}
pub(crate) use impl_fact;

/// Adds `fact` to a set kept in (event time, dedup key) order; false when a fact with
/// its dedup key was already there (a copy with a better ad id status then improves
/// the stored one).
pub fn insert_fact<F: Fact>(facts: &mut Vec<F>, mut fact: F) -> bool {
    let key = fact.dedup_key();
    if let Some(f) = facts.iter_mut().find(|f| f.dedup_key() == key) {
        let better = (*f.status_mut()).min(*fact.status_mut());
        *f.status_mut() = better;
        return false;
    }
    let at = facts.partition_point(|f| (f.time_ms(), f.dedup_key()) < (fact.time_ms(), key));
    facts.insert(at, fact);
    true
}

/// Milliseconds in a day.
pub const DAY_MS: i64 = 86_400_000;

/// The UTC day (days since 1970-01-01) of an event time in milliseconds.
pub fn day_of(time_ms: i64) -> i32 {
    time_ms.div_euclid(DAY_MS) as i32
}

/// Formats a day number as `YYYY-MM-DD`.
pub fn format_day(day: i32) -> String {
    chrono::DateTime::from_timestamp(i64::from(day) * 86_400, 0)
        .map(|t| t.format("%Y-%m-%d").to_string())
        .unwrap_or_default()
}

/// Parses `YYYY-MM-DD` into a day number.
pub fn parse_day(s: &str) -> Option<i32> {
    let d = chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").ok()?;
    let t = d.and_hms_opt(0, 0, 0)?.and_utc().timestamp();
    Some(t.div_euclid(86_400) as i32)
}

/// A ratio that is 0 when the denominator is 0.
pub fn rate(num: u64, den: u64) -> f64 {
    if den == 0 {
        0.0
    } else {
        num as f64 / den as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_round_trip() {
        assert_eq!(day_of(0), 0);
        assert_eq!(day_of(-1), -1);
        assert_eq!(format_day(day_of(1_795_000_000_000)), "2026-11-18");
        assert_eq!(parse_day("2026-11-18"), Some(day_of(1_795_000_000_000)));
        assert_eq!(parse_day("2026-13-01"), None);
        assert_eq!(rate(1, 0), 0.0);
        assert_eq!(rate(1, 4), 0.25);
    }
}
