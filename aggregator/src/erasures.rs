//! Erasures in the aggregator: running each one the api records, and never storing
//! an erased id again (`rm_store::model::erasure`).
//!
//! **Why here.** The aggregator is the one writer of the report tables, and it keeps
//! fact sets and states in a cache that would write an erased id back. So the loop
//! looks for new erasures every `RM_AGGREGATOR_ERASURES_SECS` (and at start); when
//! there are some it lets the write in flight land, drops its cache, runs each
//! erasure that still holds its id ([`rm_store::EraseStore::erase`]; the first run
//! records its end) and adds it to the [`Suppression`], all before it folds again.
//! From then on every record that names an erased id (an event's `customerId`,
//! `sessionId` or `dtmToken`, an order's customer or session id, an offered touch's
//! shopper) has it replaced by the erasure's replacement before the fold
//! ([`Erasures::apply`]): records still in the log, or sent again, are stored under
//! the replacement, so counts, carts and attribution go on as they were and the id
//! is never stored again.
//!
//! **Several aggregators.** Each runs every erasure it has not seen, so the rows it
//! wrote from its cache before it saw one are replaced by its own run; the
//! erasure keeps its id for `RM_AGGREGATOR_ERASURE_SETTLE_SECS` (10 minutes) for
//! that, then any aggregator settles it
//! (only its digest and hash stay).

use std::collections::HashSet;

use rm_schemas::EventRecord;
use rm_store::model::ageing::AgeingKey;
use rm_store::model::erasure::{Erased, Erasure, Suppression};
use rm_store::{EraseStore, StoreError};

use crate::sales::{OrderIn, OrderMsg};

/// Default of `--aggregator-erasures-secs`.
pub const DEFAULT_ERASURES_SECS: u64 = 2;

/// How far before the newest erasure seen a look for new ones starts (clock skew
/// between the api that records and the aggregator that reads).
const LOOK_BACK_MS: i64 = 5 * 60 * 1000;

/// The erasures an aggregator knows.
#[derive(Debug, Default)]
pub struct Erasures {
    suppression: Suppression,
    known: HashSet<String>,
    newest_ms: Option<i64>,
}

impl Erasures {
    /// Ids suppressed.
    pub fn len(&self) -> usize {
        self.suppression.len()
    }

    /// True when no id is suppressed.
    pub fn is_empty(&self) -> bool {
        self.suppression.is_empty()
    }

    /// The erasures recorded since the last look (every one at the first), which
    /// this aggregator has not seen: from now on they are suppressed. The caller
    /// drops its cache and [`run`]s each before it folds again.
    pub async fn poll(&mut self, store: &impl EraseStore) -> Result<Vec<Erasure>, StoreError> {
        let since = self.newest_ms.map_or(i64::MIN, |ms| ms - LOOK_BACK_MS);
        let found = store.erasures_since(since).await?;
        let mut new = Vec::new();
        for e in found {
            self.newest_ms = Some(self.newest_ms.unwrap_or(i64::MIN).max(e.requested_ms));
            if self.known.insert(e.request_id.clone()) {
                self.suppression.add(&e);
                new.push(e);
            }
        }
        Ok(new)
    }

    /// Replaces erased ids in a batch's records and orders; how many records changed.
    pub fn apply(&self, records: &mut [EventRecord], orders: &mut [OrderIn]) -> u64 {
        if self.suppression.is_empty() {
            return 0;
        }
        let s = &self.suppression;
        let mut n = 0;
        for r in records {
            let e = &mut r.event;
            let ns = rm_schemas::ad_id::namespace_of(&e.ad_id);
            let a = s.apply(&mut e.customer_id, ns);
            let b = s.apply(&mut e.session_id, ns);
            let c = s.apply(&mut e.dtm_token, ns);
            n += u64::from(a || b || c);
        }
        for o in orders {
            let changed = match &mut o.msg {
                OrderMsg::Order(r) => {
                    let ns = Some(r.namespace_id.as_str());
                    let a = s.apply(&mut r.order.customer_id, ns);
                    let b = s.apply(&mut r.order.session_id, ns);
                    a || b
                }
                OrderMsg::Offer(offer) => {
                    let ns = rm_schemas::ad_id::namespace_of(&offer.touch.ad_id);
                    s.apply_shopper(&mut offer.touch.shopper, ns)
                }
            };
            n += u64::from(changed);
        }
        n
    }

    /// Forgets the ids of the erasures requested more than `settle` ago.
    pub async fn settle(
        store: &impl EraseStore,
        now_ms: i64,
        settle: std::time::Duration,
    ) -> Result<usize, StoreError> {
        let ms = i64::try_from(settle.as_millis()).unwrap_or(i64::MAX);
        store.settle_erasures(now_ms.saturating_sub(ms)).await
    }
}

/// Runs an erasure that still holds its id, and records the end of its first run.
/// With an ageing key, the id's aged form is erased too (`crate::ageing`).
pub async fn run(
    store: &impl EraseStore,
    e: &Erasure,
    ageing: Option<AgeingKey>,
) -> Result<Erased, StoreError> {
    if !e.holds_id() {
        return Ok(Erased::default());
    }
    let mut erased = store.erase(e).await?;
    if let Some(aged) = ageing.and_then(|k| crate::ageing::aged_erasure(e, k)) {
        erased += store.erase(&aged).await?;
    }
    if e.done_ms == 0 {
        store
            .finish_erasure(e, chrono::Utc::now().timestamp_millis(), erased)
            .await?;
    }
    Ok(erased)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rm_schemas::{InteractionEvent, InteractionType};

    fn erasure(id: &str, ns: Option<&str>) -> Erasure {
        Erasure::new(
            format!("req-{id}"),
            ns.map(str::to_owned),
            id,
            "c".into(),
            0,
            None,
        )
    }

    fn record(ad: &str, customer: &str, session: &str) -> EventRecord {
        let event = InteractionEvent {
            customer_id: Some(customer.into()),
            session_id: Some(session.into()),
            ..InteractionEvent::new(
                ad,
                InteractionType::ProductClick,
                chrono::Utc::now().fixed_offset(),
            )
        };
        EventRecord::new(event, uuid::Uuid::now_v7(), chrono::Utc::now())
    }

    /// A record naming an erased id carries the replacement instead, in the
    /// namespaces the erasure covers; other ids and records are left as they were.
    #[test]
    fn records_naming_an_erased_id_carry_its_replacement() {
        let mut e = Erasures::default();
        let everywhere = erasure("cust-1", None);
        let acme_only = erasure("sess-9", Some("acme"));
        for x in [&everywhere, &acme_only] {
            e.suppression.add(x);
        }
        let mut records = vec![
            record("rm1.c.YmFubmVy.1900000000.bm9uY2U.c2ln", "cust-1", "sess-1"),
            record(
                "rm2.acme.c.YmFubmVy.1900000000.bm9uY2U.c2ln",
                "cust-2",
                "sess-9",
            ),
            record(
                "rm2.zeta.c.YmFubmVy.1900000000.bm9uY2U.c2ln",
                "cust-2",
                "sess-9",
            ),
        ];
        assert_eq!(e.apply(&mut records, &mut []), 2);
        assert_eq!(
            records[0].event.customer_id.as_deref(),
            Some(everywhere.replacement.as_str())
        );
        assert_eq!(records[0].event.session_id.as_deref(), Some("sess-1"));
        assert_eq!(
            records[1].event.session_id.as_deref(),
            Some(acme_only.replacement.as_str())
        );
        assert_eq!(records[2].event.session_id.as_deref(), Some("sess-9"));
    }
}
