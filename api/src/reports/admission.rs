//! Report admission: how many reports run at once, in all and per namespace.
//!
//! A report reads the store and builds its rows in the api's memory; the cost of one
//! grows with the events behind it (issue 26 makes it grow with the answer). Without
//! a bound, one tenant asking for many reports at once takes the store and the api's
//! cores from every other tenant. So:
//!
//! - a namespace runs at most `RM_API_REPORTS_PER_NAMESPACE` reports at once (2); its
//!   further reports wait for one of its own places, at most [`WAITING_PER_NAMESPACE`]
//!   of them (8: the analyst page asks for four at once); one more is answered at
//!   once `429 resource_exhausted` with `Retry-After: 1`, naming the bound (an
//!   operator's report over every namespace counts as the party `operator`);
//! - at most `RM_API_REPORTS_CONCURRENT` reports run in all (4); a report its
//!   namespace lets run waits for one of those places.
//!
//! So a namespace can run at most its share of the places, whatever it sends, and
//! the others keep theirs (`RM_API_REPORTS_CONCURRENT` minus one namespace's share
//! when the defaults are kept); its own backlog waits behind its own places. A place
//! is held while the rows are read and built; the CSV answer then streams what was
//! built. A download read from the store as it streams (the carts report's CSV) holds
//! its place until its last chunk, so downloads count against the same share.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::ApiError;

/// Default of `RM_API_REPORTS_PER_NAMESPACE`.
pub const DEFAULT_PER_NAMESPACE: u32 = 2;
/// Default of `RM_API_REPORTS_CONCURRENT`.
pub const DEFAULT_CONCURRENT: u32 = 4;
/// Reports of one namespace that may wait for its places; one more is a 429.
pub const WAITING_PER_NAMESPACE: usize = 8;
/// The party of a report over every namespace.
pub const OPERATOR: &str = "operator";

/// One party's places and how many of its reports run or wait.
struct Party {
    running: Arc<Semaphore>,
    admitted: usize,
}

type Parties = Arc<Mutex<HashMap<String, Party>>>;

/// See the module header.
pub struct Admission {
    per_namespace: usize,
    waiting: usize,
    places: Arc<Semaphore>,
    parties: Parties,
}

/// An admitted report's claim on its party, given back on drop (also when the
/// request is dropped while it waits).
struct Claim {
    parties: Parties,
    party: String,
}

impl Drop for Claim {
    fn drop(&mut self) {
        let mut parties = self.parties.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = parties.get_mut(&self.party) {
            p.admitted -= 1;
            if p.admitted == 0 {
                parties.remove(&self.party);
            }
        }
    }
}

/// A running report's places, given back on drop.
pub struct Ticket {
    _places: (OwnedSemaphorePermit, OwnedSemaphorePermit),
    _claim: Claim,
}

impl Admission {
    /// At most `concurrent` reports at once, `per_namespace` of one party, with
    /// [`WAITING_PER_NAMESPACE`] more of a party waiting.
    pub fn new(concurrent: usize, per_namespace: usize) -> Self {
        Self::with_waiting(concurrent, per_namespace, WAITING_PER_NAMESPACE)
    }

    /// Like [`Admission::new`], with `waiting` reports of a party waiting at most.
    pub fn with_waiting(concurrent: usize, per_namespace: usize, waiting: usize) -> Self {
        Admission {
            per_namespace: per_namespace.max(1),
            waiting,
            places: Arc::new(Semaphore::new(concurrent.max(1))),
            parties: Arc::default(),
        }
    }

    /// Places for a report of `party` (a namespace, or [`OPERATOR`]): at once a 429
    /// when the party has its share running and its waiting places taken, else when
    /// one of its places and one of all places are free.
    pub async fn enter(&self, party: &str) -> Result<Ticket, ApiError> {
        let (claim, running) = {
            let mut parties = self.parties.lock().unwrap_or_else(|e| e.into_inner());
            let p = parties.entry(party.to_owned()).or_insert_with(|| Party {
                running: Arc::new(Semaphore::new(self.per_namespace)),
                admitted: 0,
            });
            if p.admitted >= self.per_namespace + self.waiting {
                return Err(ApiError::ResourceExhausted(format!(
                    "this namespace has {} reports running and {} waiting, its share; retry when one has answered",
                    self.per_namespace, self.waiting
                )));
            }
            p.admitted += 1;
            let claim = Claim {
                parties: Arc::clone(&self.parties),
                party: party.to_owned(),
            };
            (claim, Arc::clone(&p.running))
        };
        let closed = |_| ApiError::Unavailable("the api is shutting down".into());
        let own = running.acquire_owned().await.map_err(closed)?;
        let place = Arc::clone(&self.places)
            .acquire_owned()
            .await
            .map_err(closed)?;
        Ok(Ticket {
            _places: (own, place),
            _claim: claim,
        })
    }

    /// Reports `party` runs or waits for now.
    pub fn admitted(&self, party: &str) -> usize {
        let parties = self.parties.lock().unwrap_or_else(|e| e.into_inner());
        parties.get(party).map_or(0, |p| p.admitted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_namespace_waits_behind_its_own_places_then_gets_429_and_another_is_served() {
        let a = Arc::new(Admission::with_waiting(3, 2, 1));
        let t1 = a.enter("greedy").await.unwrap();
        let t2 = a.enter("greedy").await.unwrap();
        // Its third waits for one of its own places, though a place is free in all.
        let third = {
            let a = Arc::clone(&a);
            tokio::spawn(async move { a.enter("greedy").await.map(|_| ()) })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!third.is_finished());
        // Its fourth finds every place of its share taken: 429 at once.
        let e = a.enter("greedy").await.err().unwrap();
        assert_eq!(e.response().status(), 429);
        assert_eq!(a.admitted("greedy"), 3);
        // Another namespace takes the free place.
        let other = a.enter("polite").await.unwrap();
        drop(t1);
        drop(other);
        third.await.unwrap().unwrap();
        drop(t2);
        assert_eq!(a.admitted("greedy"), 0);
        assert_eq!(a.admitted("polite"), 0);
    }

    #[tokio::test]
    async fn a_request_dropped_while_waiting_gives_its_place_back() {
        let a = Arc::new(Admission::with_waiting(1, 1, 4));
        let t = a.enter("x").await.unwrap();
        let waiter = {
            let a = Arc::clone(&a);
            tokio::spawn(async move { a.enter("y").await.map(|_| ()) })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(a.admitted("y"), 1);
        waiter.abort();
        let _ = waiter.await;
        assert_eq!(a.admitted("y"), 0);
        drop(t);
        assert!(a.enter("y").await.is_ok());
    }
}
