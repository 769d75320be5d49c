//! Report admission: how many reports run at once, in all and per namespace.
//!
//! A report reads the store and builds its rows in the api's memory; the cost of one
//! grows with the events behind it (issue 26 makes it grow with the answer). Without
//! a bound, one tenant asking for many reports at once takes the store and the api's
//! cores from every other tenant. So:
//!
//! - a namespace runs at most `RM_API_REPORTS_PER_NAMESPACE` reports at once (2); one
//!   more is answered at once `429 resource_exhausted` with `Retry-After: 1`, naming
//!   the bound (an operator's report over every namespace counts as the party
//!   `operator`);
//! - at most `RM_API_REPORTS_CONCURRENT` reports run in all (4); a report within its
//!   namespace's share waits for a place.
//!
//! So a namespace can hold at most its share of the places, whatever it sends, and
//! the others keep theirs (`RM_API_REPORTS_CONCURRENT` minus one namespace's share
//! when the defaults are kept). A place is held while the rows are read and built;
//! the CSV answer then streams what was built.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::ApiError;

/// Default of `RM_API_REPORTS_PER_NAMESPACE`.
pub const DEFAULT_PER_NAMESPACE: u32 = 2;
/// Default of `RM_API_REPORTS_CONCURRENT`.
pub const DEFAULT_CONCURRENT: u32 = 4;
/// The party of a report over every namespace.
pub const OPERATOR: &str = "operator";

/// See the module header.
pub struct Admission {
    per_namespace: usize,
    places: Arc<Semaphore>,
    held: Arc<Mutex<HashMap<String, usize>>>,
}

/// A running report's place, given back on drop.
pub struct Ticket {
    _place: OwnedSemaphorePermit,
    held: Arc<Mutex<HashMap<String, usize>>>,
    party: String,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = held.get_mut(&self.party) {
            *n -= 1;
            if *n == 0 {
                held.remove(&self.party);
            }
        }
    }
}

/// Frees a party's share when its request is dropped while waiting for a place.
struct Claim {
    held: Arc<Mutex<HashMap<String, usize>>>,
    party: Option<String>,
}

impl Drop for Claim {
    fn drop(&mut self) {
        if let Some(p) = self.party.take() {
            let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(n) = held.get_mut(&p) {
                *n -= 1;
                if *n == 0 {
                    held.remove(&p);
                }
            }
        }
    }
}

impl Admission {
    /// At most `concurrent` reports at once, `per_namespace` of one party.
    pub fn new(concurrent: usize, per_namespace: usize) -> Self {
        Admission {
            per_namespace: per_namespace.max(1),
            places: Arc::new(Semaphore::new(concurrent.max(1))),
            held: Arc::default(),
        }
    }

    /// A place for a report of `party` (a namespace, or [`OPERATOR`]): at once a 429
    /// when the party runs its share already, else when a place is free.
    pub async fn enter(&self, party: &str) -> Result<Ticket, ApiError> {
        let mut claim = Claim {
            held: Arc::clone(&self.held),
            party: None,
        };
        {
            let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
            let n = held.entry(party.to_owned()).or_default();
            if *n >= self.per_namespace {
                return Err(ApiError::ResourceExhausted(format!(
                    "this namespace is running {} reports already, its share; retry when one has answered",
                    self.per_namespace
                )));
            }
            *n += 1;
            claim.party = Some(party.to_owned());
        }
        let place = Arc::clone(&self.places)
            .acquire_owned()
            .await
            .map_err(|_| ApiError::Unavailable("the api is shutting down".into()))?;
        let party = claim.party.take().unwrap_or_default();
        Ok(Ticket {
            _place: place,
            held: Arc::clone(&self.held),
            party,
        })
    }

    /// Reports `party` runs or waits for now.
    pub fn held_by(&self, party: &str) -> usize {
        let held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        held.get(party).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_namespace_beyond_its_share_gets_429_and_another_is_admitted() {
        let a = Arc::new(Admission::new(3, 2));
        let t1 = a.enter("greedy").await.unwrap();
        let t2 = a.enter("greedy").await.unwrap();
        let e = a.enter("greedy").await.err().unwrap();
        assert_eq!(e.response().status(), 429);
        assert_eq!(a.held_by("greedy"), 2);
        let other = a.enter("polite").await.unwrap();
        // Every place taken: a report within its share waits, then runs.
        let waiter = {
            let a = Arc::clone(&a);
            tokio::spawn(async move { a.enter("third").await.map(|_| ()) })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished());
        drop(t1);
        waiter.await.unwrap().unwrap();
        drop((t2, other));
        assert_eq!(a.held_by("greedy"), 0);
        assert_eq!(a.held_by("third"), 0);
    }

    #[tokio::test]
    async fn a_request_dropped_while_waiting_gives_its_share_back() {
        let a = Arc::new(Admission::new(1, 1));
        let t = a.enter("x").await.unwrap();
        let waiter = {
            let a = Arc::clone(&a);
            tokio::spawn(async move { a.enter("y").await.map(|_| ()) })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(a.held_by("y"), 1);
        waiter.abort();
        let _ = waiter.await;
        assert_eq!(a.held_by("y"), 0);
        drop(t);
        assert!(a.enter("y").await.is_ok());
    }
}
