//! A fixed-capacity map whose entries expire, for the authentication limiter.
//!
//! Keys are 64-bit SipHash digests under a key chosen at start (so an attacker can
//! neither aim many keys at one shard nor make a long client id cost memory); each
//! entry carries the instant it expires. The table is split into shards, each behind
//! its own mutex, so no lock covers the whole table.
//!
//! **Eviction never removes a live entry.** A shard that is full drops only expired
//! entries; when none has expired, the new key is *not* stored and the caller is told
//! ([`Full`]), so a flood of new keys can never push out a lockout. Each shard knows
//! a lower bound of its earliest expiry, so a full shard of live entries refuses a
//! new key in O(1) and is scanned only once something in it may have expired.

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hash};
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

/// Shards of a table (a power of two).
const SHARDS: usize = 64;

/// The table had no room for a new key: every stored entry is still live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Full;

struct Shard<V> {
    map: HashMap<u64, (V, Instant)>,
    /// No entry expires before this (a lower bound; exact after a sweep).
    earliest: Option<Instant>,
}

/// A fixed-capacity map of live entries; see the module header.
pub struct ExpiringTable<V> {
    shards: Box<[Mutex<Shard<V>>]>,
    per_shard: usize,
    hasher: RandomState,
}

impl<V> ExpiringTable<V> {
    /// A table holding at most `capacity` entries (rounded up to a multiple of the
    /// shard count).
    pub fn new(capacity: usize) -> Self {
        let per_shard = capacity.div_ceil(SHARDS).max(1);
        ExpiringTable {
            shards: (0..SHARDS)
                .map(|_| {
                    Mutex::new(Shard {
                        map: HashMap::new(),
                        earliest: None,
                    })
                })
                .collect(),
            per_shard,
            hasher: RandomState::new(),
        }
    }

    /// The digest of `key` this table stores.
    pub fn digest<K: Hash + ?Sized>(&self, key: &K) -> u64 {
        self.hasher.hash_one(key)
    }

    fn shard(&self, digest: u64) -> MutexGuard<'_, Shard<V>> {
        // The digest's high bits pick the shard (the map itself uses the low ones).
        let i = (digest >> 58) as usize % SHARDS;
        self.shards[i].lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` on the live entry of `digest`, if there is one.
    pub fn get<R>(&self, digest: u64, now: Instant, f: impl FnOnce(&V) -> R) -> Option<R> {
        let shard = self.shard(digest);
        match shard.map.get(&digest) {
            Some((v, expires)) if now < *expires => Some(f(v)),
            _ => None,
        }
    }

    /// Updates the entry of `digest` with `f`, starting from `fresh()` when there is
    /// no live one; `f` returns the entry's new expiry. [`Full`] when the key is new
    /// and its shard holds only live entries (nothing is stored then).
    pub fn update<R>(
        &self,
        digest: u64,
        now: Instant,
        fresh: impl FnOnce() -> V,
        f: impl FnOnce(&mut V) -> (Instant, R),
    ) -> Result<R, Full> {
        let mut shard = self.shard(digest);
        let live = matches!(shard.map.get(&digest), Some((_, e)) if now < *e);
        if !live {
            shard.map.remove(&digest);
            if shard.map.len() >= self.per_shard {
                if shard.earliest.is_some_and(|e| now < e) {
                    return Err(Full);
                }
                shard.map.retain(|_, (_, e)| now < *e);
                shard.earliest = shard.map.values().map(|(_, e)| *e).min();
                if shard.map.len() >= self.per_shard {
                    return Err(Full);
                }
            }
            shard.map.insert(digest, (fresh(), now));
        }
        let Some((v, expires)) = shard.map.get_mut(&digest) else {
            return Err(Full);
        };
        let (new_expiry, r) = f(v);
        *expires = new_expiry;
        // Only a shortened expiry can lower the bound; a longer one keeps it valid.
        shard.earliest = Some(shard.earliest.map_or(new_expiry, |e| e.min(new_expiry)));
        Ok(r)
    }

    /// Removes the entry of `digest`.
    pub fn remove(&self, digest: u64) {
        self.shard(digest).map.remove(&digest);
    }

    /// Entries stored now (live or not yet swept).
    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(|e| e.into_inner()).map.len())
            .sum()
    }

    /// Whether nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Most entries the table holds.
    pub fn capacity(&self) -> usize {
        self.per_shard * SHARDS
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_full_table_of_live_entries_refuses_new_keys_and_keeps_the_old() {
        let t: ExpiringTable<u32> = ExpiringTable::new(64);
        let now = Instant::now();
        let later = now + Duration::from_secs(60);
        let mut stored = Vec::new();
        for i in 0..10_000u32 {
            let d = t.digest(&i);
            if t.update(d, now, || 0, |v| (later, *v = i)).is_ok() {
                stored.push((d, i));
            }
            assert!(t.len() <= t.capacity());
        }
        assert_eq!(stored.len(), t.capacity());
        for (d, i) in stored {
            assert_eq!(t.get(d, now, |v| *v), Some(i));
        }
    }

    #[test]
    fn expired_entries_make_room() {
        let t: ExpiringTable<()> = ExpiringTable::new(64);
        let now = Instant::now();
        let soon = now + Duration::from_secs(1);
        for i in 0..10_000u32 {
            let _ = t.update(t.digest(&i), now, || (), |()| (soon, ()));
        }
        let after = soon + Duration::from_secs(1);
        assert_eq!(t.get(t.digest(&0u32), after, |()| ()), None);
        let d = t.digest("new");
        assert!(t
            .update(d, after, || (), |()| (after + Duration::from_secs(1), ()))
            .is_ok());
        assert_eq!(t.get(d, after, |()| ()), Some(()));
    }
}
