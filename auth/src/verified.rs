//! Secret checks that succeeded, remembered briefly so valid credentials cost no
//! Argon2 per request: a partner's orders client or token refresher sends the same
//! key many times a minute, and each hash takes tens of milliseconds of a core that
//! every tenant shares.
//!
//! What is remembered is a digest, never the secret: SHA-256 over a random key made
//! when the process starts, the stored PHC string and the presented secret. A digest
//! says only "this secret matched this stored hash"; it is useless outside the
//! process, and a secret or key that is rotated or removed no longer matches (its PHC
//! string changes, or the lookup before the check finds nothing). Failed checks are
//! never remembered, so a wrong secret stays as expensive as before.
//!
//! **One check in flight per credential.** Requests presenting the same secret for
//! the same stored hash while its check runs wait for that check's answer instead of
//! queueing checks of their own ([`Verified::flight`]): a partner's burst of sixty
//! requests at the top of the minute costs one hash, not sixty places in the queue.
//!
//! Bounded: at most [`MAX_ENTRIES`] digests, each for [`VERIFIED_FOR`]; when full,
//! expired ones are dropped and, if none expired, a new success is simply not
//! remembered (it hashed, as it would have without this).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use tokio::sync::OnceCell;

/// How long a successful check is remembered.
pub const VERIFIED_FOR: Duration = Duration::from_secs(60);
/// Most digests remembered.
pub const MAX_ENTRIES: usize = 16_384;

/// See the module header.
pub struct Verified {
    key: [u8; 32],
    until: Mutex<HashMap<[u8; 32], Instant>>,
    /// Checks running now, by digest: their answer once known.
    inflight: Mutex<HashMap<[u8; 32], Arc<OnceCell<bool>>>>,
}

/// A check of one credential that requests share while it runs; leaves the table of
/// checks in flight on drop.
pub struct Flight<'a> {
    owner: &'a Verified,
    digest: [u8; 32],
    answer: Option<Arc<OnceCell<bool>>>,
}

impl Flight<'_> {
    /// The check's answer, set once by whichever request runs it.
    pub fn answer(&self) -> &OnceCell<bool> {
        self.answer.as_deref().expect("held until drop")
    }
}

impl Drop for Flight<'_> {
    fn drop(&mut self) {
        let mut inflight = self
            .owner
            .inflight
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        // Let go of this request's reference under the lock: the last request of the
        // flight finds only the table's and removes it.
        drop(self.answer.take());
        if inflight
            .get(&self.digest)
            .is_some_and(|a| Arc::strong_count(a) == 1)
        {
            inflight.remove(&self.digest);
        }
    }
}

impl Default for Verified {
    fn default() -> Self {
        let mut key = [0u8; 32];
        rand::fill(&mut key);
        Verified {
            key,
            until: Mutex::default(),
            inflight: Mutex::default(),
        }
    }
}

/// A presented secret for a stored hash, as this process remembers it
/// ([`Verified::digest`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Checked([u8; 32]);

impl Verified {
    /// The digest of `secret` presented for `phc`, computed once per check and used
    /// by [`Self::knows`], [`Self::flight`] and [`Self::remember`].
    pub fn digest(&self, phc: &str, secret: &str) -> Checked {
        let mut h = Sha256::new();
        h.update(self.key);
        h.update((phc.len() as u64).to_le_bytes());
        h.update(phc.as_bytes());
        h.update(secret.as_bytes());
        Checked(h.finalize().into())
    }

    /// True when the secret of `d` matched its hash less than [`VERIFIED_FOR`]
    /// before `now`.
    pub fn knows(&self, d: Checked, now: Instant) -> bool {
        let until = self.until.lock().unwrap_or_else(|e| e.into_inner());
        until.get(&d.0).is_some_and(|t| *t > now)
    }

    /// Remembers that the secret of `d` matched its hash at `now`.
    pub fn remember(&self, d: Checked, now: Instant) {
        let d = d.0;
        let mut until = self.until.lock().unwrap_or_else(|e| e.into_inner());
        if until.len() >= MAX_ENTRIES && !until.contains_key(&d) {
            until.retain(|_, t| *t > now);
            if until.len() >= MAX_ENTRIES {
                return;
            }
        }
        until.insert(d, now + VERIFIED_FOR);
    }

    /// The check of `d` that requests share while it runs (a new one when none runs).
    pub fn flight(&self, d: Checked) -> Flight<'_> {
        let digest = d.0;
        let mut inflight = self.inflight.lock().unwrap_or_else(|e| e.into_inner());
        let answer = Arc::clone(inflight.entry(digest).or_default());
        Flight {
            owner: self,
            digest,
            answer: Some(answer),
        }
    }

    /// Checks in flight now.
    pub fn in_flight(&self) -> usize {
        self.inflight
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }

    /// Digests remembered now (expired ones included until the next purge).
    pub fn len(&self) -> usize {
        self.until.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// True when nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_same_secret_for_the_same_hash_within_the_minute() {
        let v = Verified::default();
        let t0 = Instant::now();
        assert!(!v.knows(v.digest("$argon2id$a", "s3cret"), t0));
        v.remember(v.digest("$argon2id$a", "s3cret"), t0);
        assert!(v.knows(
            v.digest("$argon2id$a", "s3cret"),
            t0 + Duration::from_secs(59)
        ));
        assert!(
            !v.knows(v.digest("$argon2id$a", "s3cre"), t0),
            "another secret"
        );
        assert!(
            !v.knows(v.digest("$argon2id$b", "s3cret"), t0),
            "a rotated hash"
        );
        // The boundary between the PHC string and the secret is part of the digest.
        assert!(!v.knows(v.digest("$argon2id$as", "3cret"), t0));
        assert!(!v.knows(v.digest("$argon2id$a", "s3cret"), t0 + VERIFIED_FOR));
    }

    #[tokio::test]
    async fn requests_for_one_credential_share_one_check_while_it_runs() {
        let v = Arc::new(Verified::default());
        let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for _ in 0..20 {
            let (v, runs) = (Arc::clone(&v), Arc::clone(&runs));
            tasks.push(tokio::spawn(async move {
                let f = v.flight(v.digest("h", "s"));
                let ok = f
                    .answer()
                    .get_or_try_init(|| async {
                        runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        Ok::<bool, ()>(true)
                    })
                    .await;
                *ok.unwrap()
            }));
        }
        for t in tasks {
            assert!(t.await.unwrap());
        }
        assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert_eq!(v.in_flight(), 0, "the last request removed the flight");
        // Another secret is another flight.
        let a = v.flight(v.digest("h", "s"));
        let b = v.flight(v.digest("h", "t"));
        assert!(!std::ptr::eq(a.answer(), b.answer()));
    }

    #[test]
    fn a_full_table_drops_expired_digests_and_never_grows_beyond_its_bound() {
        let v = Verified::default();
        let t0 = Instant::now();
        for i in 0..MAX_ENTRIES {
            v.remember(v.digest("h", &i.to_string()), t0);
        }
        assert_eq!(v.len(), MAX_ENTRIES);
        v.remember(v.digest("h", "one more"), t0);
        assert_eq!(
            v.len(),
            MAX_ENTRIES,
            "full of fresh digests: not remembered"
        );
        assert!(!v.knows(v.digest("h", "one more"), t0));
        let later = t0 + VERIFIED_FOR + Duration::from_secs(1);
        v.remember(v.digest("h", "after"), later);
        assert_eq!(v.len(), 1, "the expired ones were dropped");
        assert!(v.knows(v.digest("h", "after"), later));
    }
}
