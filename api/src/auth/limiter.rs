//! Failed-authentication limiter: after `max_failures` failures for one client id
//! within `window`, that id is refused for the rest of the window without a secret
//! check. Memory is bounded: at most `max_entries` ids are tracked; when full, the
//! oldest windows are dropped first.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Tracks failures per id.
pub struct FailureLimiter {
    inner: Mutex<HashMap<String, (u32, Instant)>>,
    max_failures: u32,
    window: Duration,
    max_entries: usize,
}

impl FailureLimiter {
    /// A limiter allowing `max_failures` per `window`.
    pub fn new(max_failures: u32, window: Duration, max_entries: usize) -> Self {
        FailureLimiter {
            inner: Mutex::new(HashMap::new()),
            max_failures,
            window,
            max_entries: max_entries.max(1),
        }
    }

    /// `Some(seconds to wait)` when `id` is locked out at `now`.
    pub fn locked(&self, id: &str, now: Instant) -> Option<u64> {
        let map = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let (n, start) = map.get(id)?;
        let elapsed = now.saturating_duration_since(*start);
        (*n >= self.max_failures && elapsed < self.window)
            .then(|| (self.window - elapsed).as_secs().max(1))
    }

    /// Records a failure of `id` at `now`.
    pub fn fail(&self, id: &str, now: Instant) {
        let mut map = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() >= self.max_entries && !map.contains_key(id) {
            let window = self.window;
            map.retain(|_, (_, s)| now.saturating_duration_since(*s) < window);
            if map.len() >= self.max_entries {
                if let Some(oldest) = map
                    .iter()
                    .min_by_key(|(_, (_, s))| *s)
                    .map(|(k, _)| k.clone())
                {
                    map.remove(&oldest);
                }
            }
        }
        let e = map.entry(id.to_owned()).or_insert((0, now));
        if now.saturating_duration_since(e.1) >= self.window {
            *e = (0, now);
        }
        e.0 += 1;
    }

    /// Clears `id` after a success.
    pub fn succeed(&self, id: &str) {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id);
    }

    /// Ids tracked now.
    pub fn len(&self) -> usize {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Whether no id is tracked.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn locks_after_max_failures_until_the_window_ends() {
        let l = FailureLimiter::new(3, Duration::from_secs(60), 10);
        let t = Instant::now();
        for _ in 0..2 {
            l.fail("c", t);
        }
        assert_eq!(l.locked("c", t), None);
        l.fail("c", t);
        assert!(l.locked("c", t + Duration::from_secs(1)).is_some());
        assert_eq!(l.locked("c", t + Duration::from_secs(61)), None);
        l.succeed("c");
        assert_eq!(l.locked("c", t), None);
    }

    proptest! {
        #[test]
        fn memory_stays_bounded(ids in proptest::collection::vec("[a-z]{1,6}", 1..200)) {
            let l = FailureLimiter::new(3, Duration::from_secs(60), 16);
            let t = Instant::now();
            for id in &ids {
                l.fail(id, t);
                prop_assert!(l.len() <= 16);
            }
        }
    }
}
