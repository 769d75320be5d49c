//! The bounded queue of Argon2 secret checks: at most `concurrency` run at once on
//! the blocking pool and at most `max_waiting` wait for one; a check beyond that is
//! refused at once ([`Busy`]: the token endpoint answers 503 `temporarily_unavailable`,
//! the orders endpoint 503), so a burst of requests costs neither unbounded memory nor
//! an unbounded wait.
//!
//! Pairs that authenticated recently (see `Limiter::recently_good`) may also use a
//! reserve of a quarter more waiting places, so a flood of wrong secrets that fills
//! the queue still leaves room for a partner that has authenticated before. A running
//! check keeps its place until the hash is done, even if its request was dropped.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::{Semaphore, TryAcquireError};

/// The queue was full; retry shortly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Busy;

/// See the module header.
pub struct HashQueue {
    running: Arc<Semaphore>,
    waiting: AtomicUsize,
    max_waiting: usize,
    reserve: usize,
}

/// A place among the waiting, given back on drop (also when the request is dropped).
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl HashQueue {
    /// A queue running `concurrency` checks with `max_waiting` places to wait.
    pub fn new(concurrency: usize, max_waiting: usize) -> Self {
        HashQueue {
            running: Arc::new(Semaphore::new(concurrency.max(1))),
            waiting: AtomicUsize::new(0),
            max_waiting,
            reserve: max_waiting.div_ceil(4).max(1),
        }
    }

    /// Runs `check` on the blocking pool when a place is free; [`Busy`] at once when
    /// every running and waiting place is taken (`priority` adds the reserve).
    pub async fn run<R: Send + 'static>(
        &self,
        priority: bool,
        check: impl FnOnce() -> R + Send + 'static,
    ) -> Result<R, Busy> {
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
            let _permit = permit;
            check()
        })
        .await
        .map_err(|_| Busy)
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn beyond_the_running_and_waiting_places_checks_are_refused_at_once() {
        let q = Arc::new(HashQueue::new(1, 2));
        let slow = || std::thread::sleep(Duration::from_millis(300));
        let mut held = Vec::new();
        for _ in 0..3 {
            let q = Arc::clone(&q);
            held.push(tokio::spawn(async move { q.run(false, slow).await }));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(q.waiting(), 2);
        let t = std::time::Instant::now();
        assert_eq!(q.run(false, || 1).await, Err(Busy));
        assert!(t.elapsed() < Duration::from_millis(50));
        // The reserve (one place here) admits a priority check, then no more.
        let q2 = Arc::clone(&q);
        let priority = tokio::spawn(async move { q2.run(true, || 7).await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(q.run(true, || 1).await, Err(Busy));
        assert_eq!(priority.await.unwrap(), Ok(7));
        for h in held {
            assert_eq!(h.await.unwrap(), Ok(()));
        }
        assert_eq!(q.waiting(), 0);
        assert_eq!(q.run(false, || 2).await, Ok(2));
    }
}
