//! The edge's dedup window: recent dedup keys, sharded, bounded in time and memory.
//!
//! Each shard (a `Mutex` over two hash maps, picked by the key's top bits) keeps a
//! *current* and a *previous* generation. A key is looked up in both and inserted
//! into the current one. A shard rotates (previous dropped, current becomes previous)
//! when its current generation is older than the TTL or holds half the shard's
//! capacity. So a key is remembered for at least `ttl` unless the key-count bound
//! forces an earlier eviction, for at most `2 * ttl`, and a shard never holds more
//! than its capacity: memory is bounded by `max_keys` whatever the traffic.
//!
//! Keys are already 128-bit hashes (XXH3, uniform for real traffic), so the maps hash
//! a key as the XOR of its two 64-bit halves instead of hashing it again (the top
//! bits pick the shard). XXH3 is not keyed: a client grinding beacons could aim keys
//! at one bucket, but a shard holds at most its capacity, so that costs probe length
//! within one shard, not memory. Each entry also remembers whether the event is durable yet: a
//! duplicate of an event whose write is still in flight is not "seen" (its 200 would
//! be a promise the first write may not keep), so the caller writes it too and the
//! aggregator, which dedups by the same key, counts it once.
//!
//! This is the edge's first line only: exactness across restarts and instances is
//! the aggregator's job. A plain `Mutex` per shard is used rather than `dashmap`
//! because rotation must be atomic with the lookups of its shard.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Mutex;

/// What the window knew about a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// Not seen within the window: now recorded as pending.
    New,
    /// Seen, and its write has not been acknowledged yet.
    Pending,
    /// Seen and durably written: a duplicate.
    Durable,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Pending,
    Durable,
}

/// Hashes a key `(high, low)` as `high ^ low` (keys are hashes already).
#[derive(Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 ^= n;
    }
}

type Key = (u64, u64);
type Map = HashMap<Key, State, BuildHasherDefault<KeyHasher>>;

struct Shard {
    current: Map,
    previous: Map,
    started_ms: u64,
}

/// The sharded dedup window.
pub struct DedupWindow {
    shards: Box<[Mutex<Shard>]>,
    ttl_ms: u64,
    generation_cap: usize,
}

fn split(key: u128) -> Key {
    ((key >> 64) as u64, key as u64)
}

impl DedupWindow {
    /// A window remembering keys for `ttl_ms` and at most `max_keys` keys in all.
    pub fn new(ttl_ms: u64, max_keys: usize, shards: usize) -> Self {
        let shards = shards.clamp(1, 1024).next_power_of_two();
        let generation_cap = (max_keys / shards / 2).max(1);
        let shards = (0..shards)
            .map(|_| {
                Mutex::new(Shard {
                    current: Map::default(),
                    previous: Map::default(),
                    started_ms: 0,
                })
            })
            .collect();
        Self {
            shards,
            ttl_ms: ttl_ms.max(1),
            generation_cap,
        }
    }

    fn shard(&self, key: u128) -> &Mutex<Shard> {
        // Top bits pick the shard; the map hashes both halves (`KeyHasher`).
        let i = (key >> 116) as usize & (self.shards.len() - 1);
        &self.shards[i]
    }

    fn lock(&self, key: u128) -> std::sync::MutexGuard<'_, Shard> {
        // A panic while holding a shard lock cannot leave it inconsistent (plain maps).
        self.shard(key)
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Looks `key` up and, when new, records it as pending. `now_ms` is monotonic.
    pub fn check(&self, key: u128, now_ms: u64) -> Seen {
        let k = split(key);
        let mut s = self.lock(key);
        if now_ms.saturating_sub(s.started_ms) >= self.ttl_ms
            || s.current.len() >= self.generation_cap
        {
            s.previous = std::mem::take(&mut s.current);
            s.started_ms = now_ms;
        }
        match s.current.get(&k).or_else(|| s.previous.get(&k)) {
            Some(State::Durable) => Seen::Durable,
            Some(State::Pending) => Seen::Pending,
            None => {
                s.current.insert(k, State::Pending);
                Seen::New
            }
        }
    }

    /// Marks `key` durable: later sightings are duplicates.
    pub fn mark_durable(&self, key: u128) {
        let k = split(key);
        let mut s = self.lock(key);
        if let Some(v) = s.current.get_mut(&k) {
            *v = State::Durable;
        } else if let Some(v) = s.previous.get_mut(&k) {
            *v = State::Durable;
        }
    }

    /// Forgets `key` (its write failed: a retry must be written).
    pub fn forget(&self, key: u128) {
        let k = split(key);
        let mut s = self.lock(key);
        if s.current.remove(&k).is_none() {
            s.previous.remove(&k);
        }
    }

    /// Keys held now.
    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|m| {
                m.lock()
                    .map(|s| s.current.len() + s.previous.len())
                    .unwrap_or(0)
            })
            .sum()
    }

    /// True when no key is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes allocated for keys now (table capacity times the slot size plus one
    /// control byte per slot).
    pub fn memory_bytes(&self) -> usize {
        let slot = std::mem::size_of::<(Key, State)>() + 1;
        self.shards
            .iter()
            .map(|m| {
                m.lock()
                    .map(|s| (s.current.capacity() + s.previous.capacity()) * slot)
                    .unwrap_or(0)
            })
            .sum()
    }

    /// The most keys the window can hold.
    pub fn max_keys(&self) -> usize {
        self.generation_cap * 2 * self.shards.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn new_pending_durable_forget() {
        let w = DedupWindow::new(1_000, 1_000, 4);
        assert_eq!(w.check(7, 0), Seen::New);
        assert_eq!(w.check(7, 1), Seen::Pending);
        w.mark_durable(7);
        assert_eq!(w.check(7, 2), Seen::Durable);
        w.forget(7);
        assert_eq!(w.check(7, 3), Seen::New);
    }

    #[test]
    fn keys_expire_after_at_most_two_ttls() {
        let w = DedupWindow::new(100, 1_000, 1);
        assert_eq!(w.check(1, 0), Seen::New);
        w.mark_durable(1);
        assert_eq!(w.check(1, 99), Seen::Durable);
        assert_eq!(w.check(1, 150), Seen::Durable, "kept within [ttl, 2 ttl)");
        assert_eq!(
            w.check(1, 249),
            Seen::Durable,
            "the second rotation is due at 250"
        );
        assert_eq!(w.check(1, 250), Seen::New, "gone after two rotations");
    }

    /// The memory bound the README states: well under 64 bytes per key at scale.
    #[test]
    fn memory_per_key_is_measured_and_bounded() {
        let w = DedupWindow::new(u64::MAX / 4, 1_000_000, 64);
        let mut x = 0x9E37_79B9_7F4A_7C15_u128;
        for i in 0..400_000u64 {
            x = x
                .wrapping_mul(0x2545_F491_4F6C_DD1D_2545_F491_4F6C_DD1D)
                .wrapping_add(u128::from(i));
            w.check(x, 0);
        }
        let per_key = w.memory_bytes() as f64 / w.len() as f64;
        eprintln!(
            "dedup window: {} keys, {} bytes, {per_key:.1} bytes/key",
            w.len(),
            w.memory_bytes()
        );
        assert!(per_key < 64.0, "{per_key} bytes per key");
    }

    proptest! {
        /// Within the TTL and under capacity, every durable key is a duplicate.
        #[test]
        fn remembers_every_key_under_capacity(keys in proptest::collection::hash_set(any::<u128>(), 1..500)) {
            let w = DedupWindow::new(10_000, 100_000, 8);
            for (i, k) in keys.iter().enumerate() {
                prop_assert_eq!(w.check(*k, i as u64), Seen::New);
                w.mark_durable(*k);
            }
            for k in &keys {
                prop_assert_eq!(w.check(*k, 600), Seen::Durable);
            }
        }

        /// Whatever the traffic, the window never holds more than its bound.
        #[test]
        fn bounded_in_keys(keys in proptest::collection::vec(any::<u128>(), 1..3_000), max in 16usize..512) {
            let w = DedupWindow::new(u64::MAX / 4, max, 4);
            for (i, k) in keys.iter().enumerate() {
                w.check(*k, i as u64);
                prop_assert!(w.len() <= w.max_keys());
            }
            prop_assert!(w.max_keys() <= max.max(8));
        }
    }
}
