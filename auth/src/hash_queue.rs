//! The bounded queue of Argon2 secret checks: at most `concurrency` run at once on
//! the blocking pool and at most `max_waiting` wait for one; a check beyond that is
//! refused at once ([`Busy`]: the token endpoint answers 503 `temporarily_unavailable`,
//! the orders endpoint 503), so a burst of requests costs neither unbounded memory nor
//! an unbounded wait.
//!
//! **Fair shares.** Every check names its parties (the namespace and the client or
//! API key it is for; `unknown` for credentials naming nothing that exists). A party
//! holds at most a quarter of the places (running and waiting together, at least
//! one): a namespace that floods the queue, with valid or wrong secrets, is refused
//! beyond its share while every other namespace keeps three quarters of the queue.
//! (Valid credentials rarely get here at all: a check that succeeded is remembered
//! for a minute, see `Auth::check_secret`.)
//!
//! Pairs that authenticated recently (see `Limiter::recently_good`) may also use a
//! reserve of a quarter more waiting places and are not held to their parties'
//! share, so a flood of wrong secrets that fills the queue, or a partner's share of
//! it, still leaves room for a partner that has authenticated before from there. A running
//! check keeps its place until the hash is done, even if its request was dropped.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{Semaphore, TryAcquireError};

/// The names of the parties a check is for.
pub mod party {
    /// Checks naming a client or key that does not exist.
    pub const UNKNOWN: &str = "unknown";

    /// The party of a namespace.
    pub fn namespace(ns: &str) -> String {
        format!("ns:{ns}")
    }

    /// The party of a client.
    pub fn client(id: &str) -> String {
        format!("client:{id}")
    }
}

/// The queue was full, or the party's share of it; retry shortly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Busy;

/// See the module header.
pub struct HashQueue {
    running: Arc<Semaphore>,
    waiting: AtomicUsize,
    max_waiting: usize,
    reserve: usize,
    /// Places (running or waiting) each party holds now; a party at zero is removed.
    held: Arc<Mutex<HashMap<String, usize>>>,
    share: usize,
}

/// A place among the waiting, given back on drop (also when the request is dropped).
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The places a check's parties hold, given back on drop (after the hash, or when the
/// request is dropped while waiting).
struct Shares {
    held: Arc<Mutex<HashMap<String, usize>>>,
    parties: Vec<String>,
}

impl Drop for Shares {
    fn drop(&mut self) {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        for p in &self.parties {
            if let Some(n) = held.get_mut(p) {
                *n -= 1;
                if *n == 0 {
                    held.remove(p);
                }
            }
        }
    }
}

impl HashQueue {
    /// A queue running `concurrency` checks with `max_waiting` places to wait.
    pub fn new(concurrency: usize, max_waiting: usize) -> Self {
        let concurrency = concurrency.max(1);
        HashQueue {
            running: Arc::new(Semaphore::new(concurrency)),
            waiting: AtomicUsize::new(0),
            max_waiting,
            reserve: max_waiting.div_ceil(4).max(1),
            held: Arc::default(),
            share: ((concurrency + max_waiting) / 4).max(1),
        }
    }

    /// The most places one party holds at once.
    pub fn share(&self) -> usize {
        self.share
    }

    /// Runs `check` on the blocking pool when a place is free; [`Busy`] at once when
    /// one of `parties` holds its share already, or when every running and waiting
    /// place is taken (`priority` adds the reserve).
    pub async fn run<R: Send + 'static>(
        &self,
        parties: &[&str],
        priority: bool,
        check: impl FnOnce() -> R + Send + 'static,
    ) -> Result<R, Busy> {
        let shares = self.take_shares(parties, priority).ok_or(Busy)?;
        let permit = match Arc::clone(&self.running).try_acquire_owned() {
            Ok(p) => p,
            Err(TryAcquireError::Closed) => return Err(Busy),
            Err(TryAcquireError::NoPermits) => {
                let limit = self.max_waiting + if priority { self.reserve } else { 0 };
                let _place = self.wait_place(limit).ok_or(Busy)?;
                Arc::clone(&self.running)
                    .acquire_owned()
                    .await
                    .map_err(|_| Busy)?
            }
        };
        tokio::task::spawn_blocking(move || {
            let _held = (permit, shares);
            check()
        })
        .await
        .map_err(|_| Busy)
    }

    /// A place for each party, or none when one of them holds its share (a priority
    /// check is not refused: an attacker guessing a partner's secret from many
    /// addresses fills that partner's share, and must not lock the partner out).
    fn take_shares(&self, parties: &[&str], priority: bool) -> Option<Shares> {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if !priority
            && parties
                .iter()
                .any(|p| held.get(*p).is_some_and(|n| *n >= self.share))
        {
            return None;
        }
        let mut taken = Vec::with_capacity(parties.len());
        for p in parties {
            if taken.iter().any(|t: &String| t == p) {
                continue;
            }
            *held.entry((*p).to_owned()).or_default() += 1;
            taken.push((*p).to_owned());
        }
        Some(Shares {
            held: Arc::clone(&self.held),
            parties: taken,
        })
    }

    fn wait_place(&self, limit: usize) -> Option<Waiting<'_>> {
        let before = self.waiting.fetch_add(1, Ordering::AcqRel);
        let place = Waiting(&self.waiting);
        (before < limit).then_some(place)
    }

    /// Checks waiting now.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Acquire)
    }

    /// Places `party` holds now.
    pub fn held_by(&self, party: &str) -> usize {
        let held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        held.get(party).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn slow() {
        std::thread::sleep(Duration::from_millis(300));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn beyond_the_running_and_waiting_places_checks_are_refused_at_once() {
        let q = Arc::new(HashQueue::new(1, 2));
        let mut held = Vec::new();
        for i in 0..3 {
            let q = Arc::clone(&q);
            held.push(tokio::spawn(async move {
                q.run(&[&format!("p{i}")], false, slow).await
            }));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(q.waiting(), 2);
        let t = std::time::Instant::now();
        assert_eq!(q.run(&["other"], false, || 1).await, Err(Busy));
        assert!(t.elapsed() < Duration::from_millis(50));
        // The reserve (one place here) admits a priority check, then no more.
        let q2 = Arc::clone(&q);
        let priority = tokio::spawn(async move { q2.run(&["p9"], true, || 7).await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(q.run(&["p8"], true, || 1).await, Err(Busy));
        assert_eq!(priority.await.unwrap(), Ok(7));
        for h in held {
            assert_eq!(h.await.unwrap(), Ok(()));
        }
        assert_eq!(q.waiting(), 0);
        assert_eq!(q.run(&["p0"], false, || 2).await, Ok(2));
        assert_eq!(q.held_by("p0"), 0, "every place given back");
    }

    /// One namespace flooding the queue gets its quarter; another is served beside it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_party_beyond_its_share_is_refused_while_others_are_served() {
        let q = Arc::new(HashQueue::new(2, 6));
        assert_eq!(q.share(), 2);
        let mut flood = Vec::new();
        for _ in 0..2 {
            let q = Arc::clone(&q);
            flood.push(tokio::spawn(async move {
                q.run(&["ns:greedy", "client:a"], false, slow).await
            }));
        }
        tokio::time::sleep(Duration::from_millis(30)).await;
        assert_eq!(q.held_by("ns:greedy"), 2);
        // Its third check is refused at once, whichever of its clients asks.
        assert_eq!(
            q.run(&["ns:greedy", "client:b"], false, || 1).await,
            Err(Busy)
        );
        // Another namespace waits for a running place and is served.
        assert_eq!(q.run(&["ns:polite", "client:c"], false, || 3).await, Ok(3));
        // A pair that authenticated recently is not refused for its party's share
        // (attackers guessing its secret filled it).
        assert_eq!(q.run(&["ns:greedy", "client:a"], true, || 4).await, Ok(4));
        for f in flood {
            assert_eq!(f.await.unwrap(), Ok(()));
        }
        assert_eq!(q.held_by("ns:greedy"), 0);
        assert_eq!(q.held_by("client:a"), 0);
    }

    /// A dropped request gives its party's place back.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_dropped_waiting_check_gives_its_share_back() {
        let q = Arc::new(HashQueue::new(1, 4));
        let q1 = Arc::clone(&q);
        let running = tokio::spawn(async move { q1.run(&["x"], false, slow).await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        let waiting = {
            let q = Arc::clone(&q);
            tokio::spawn(async move { q.run(&["y"], false, || 1).await })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(q.held_by("y"), 1);
        waiting.abort();
        let _ = waiting.await;
        assert_eq!(q.held_by("y"), 0);
        assert_eq!(running.await.unwrap(), Ok(()));
    }
}
