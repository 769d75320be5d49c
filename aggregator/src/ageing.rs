//! Identifiers past their retention, aged by the aggregator
//! (`rm_store::model::ageing`): a pass at start and every `RM_AGGREGATOR_AGEING_SECS`
//! (a day) replaces the shopper ids of the rows older than
//! `RM_IDENTIFIER_RETENTION_DAYS` (90) by keyed hashes, so the counts stay and the
//! raw ids go.
//!
//! **Why here.** The aggregator is the one writer of the tables, and its cache holds
//! views, carts and orders by id: the loop lets the write in flight land and drops
//! its cache before a pass, as before an erasure, so nothing cached writes a raw id
//! back under an aged row. A pass is idempotent; a crash during one leaves rows the
//! next pass ages. With several aggregators each runs its passes: the second finds
//! nothing left.
//!
//! **Erasures reach aged rows.** A shopper's rows past the retention carry the
//! pseudonym of their id, not the id: an erasure runs again for the pseudonym (and the
//! aged hash), with the same replacement ([`aged_erasure`]), so what it leaves holds
//! neither.

use std::time::Duration;

use rm_store::model::ageing::{Ageing, AgeingKey};
use rm_store::model::erasure::Erasure;
use rm_store::model::DAY_MS;

/// Default of `--aggregator-ageing-secs`.
pub const DEFAULT_AGEING_SECS: u64 = 86_400;

/// How the loop ages identifiers.
#[derive(Debug, Clone, Copy)]
pub struct AgeingOptions {
    /// The deployment's key.
    pub key: AgeingKey,
    /// How long a row keeps its raw ids.
    pub retention: Duration,
    /// How often a pass runs (and once at start).
    pub every: Duration,
}

impl AgeingOptions {
    /// The retention of `days` whole days.
    pub fn days(key: AgeingKey, days: u32, every: Duration) -> Self {
        Self {
            key,
            retention: Duration::from_millis(u64::from(days) * DAY_MS.unsigned_abs()),
            every,
        }
    }

    /// The pass due at `now_ms`: rows dated before `now - retention` are old.
    pub fn pass(&self, now_ms: i64) -> Ageing {
        let ms = i64::try_from(self.retention.as_millis()).unwrap_or(i64::MAX);
        Ageing::new(self.key, now_ms.saturating_sub(ms))
    }
}

/// The shortest retention the settings allow: longer than the attribution windows
/// and the late horizon together (an aged row is never looked up by shopper again),
/// and than the served ads' states are kept (they are not aged: they are forgotten).
pub fn shortest_retention(window_ms: i64, late_horizon_ms: i64, served_ms: i64) -> Duration {
    let ms = window_ms
        .max(0)
        .saturating_add(late_horizon_ms.max(0))
        .max(served_ms.max(0));
    Duration::from_millis(ms.unsigned_abs())
}

/// The erasure of `e`'s id in its aged form (its pseudonym, and the aged hash), with
/// the same replacement; `None` once `e` has settled.
pub fn aged_erasure(e: &Erasure, key: AgeingKey) -> Option<Erasure> {
    if !e.holds_id() {
        return None;
    }
    let a = Ageing::new(key, 0);
    let mut aged = e.clone();
    aged.tracking_id = a.pseudonym(&e.tracking_id);
    aged.hash = a.hash(e.hash);
    Some(aged)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> AgeingKey {
        AgeingKey::new(b"secret-for-tests")
    }

    #[test]
    fn a_pass_ages_what_is_older_than_the_retention() {
        let o = AgeingOptions::days(key(), 90, Duration::from_secs(60));
        let now = 200 * DAY_MS + 5;
        assert_eq!(o.pass(now).before_ms, 110 * DAY_MS + 5);
        assert_eq!(o.pass(now).before_day(), 110);
    }

    #[test]
    fn the_retention_outlasts_every_lookup_by_shopper() {
        let d = shortest_retention(30 * DAY_MS, 30 * DAY_MS, 2 * DAY_MS);
        assert_eq!(d, Duration::from_millis((60 * DAY_MS).unsigned_abs()));
        let d = shortest_retention(0, 0, 2 * DAY_MS);
        assert_eq!(d, Duration::from_millis((2 * DAY_MS).unsigned_abs()));
    }

    #[test]
    fn an_erasure_reaches_the_pseudonym_of_its_id() {
        let e = Erasure::new("r-1".into(), None, "shopper-1", "c".into(), 0, None);
        let aged = aged_erasure(&e, key()).expect("holds its id");
        let a = Ageing::new(key(), 0);
        assert_eq!(aged.tracking_id, a.pseudonym("shopper-1"));
        assert_eq!(aged.hash, a.hash(e.hash));
        assert_eq!(aged.replacement, e.replacement, "one replacement for both");
        let mut settled = e.clone();
        settled.tracking_id.clear();
        assert!(aged_erasure(&settled, key()).is_none());
    }
}
