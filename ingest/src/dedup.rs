//! The edge's dedup window: recent dedup keys, sharded, bounded in time and memory.
//!
//! Each shard (a `Mutex` over two flat tables, picked by the key's top bits) keeps a
//! *current* and a *previous* generation. A key is looked up in both and inserted
//! into the current one. A shard rotates (previous dropped, current becomes previous)
//! when its current generation is older than the TTL or holds half the shard's
//! capacity. So a key is remembered for at least `ttl` unless the key-count bound
//! forces an earlier eviction, for at most `2 * ttl`, and a shard never holds more
//! than its capacity: memory is bounded by `max_keys` whatever the traffic.
//!
//! A generation is one open-addressing table of `u128` slots with linear probing
//! (deletion by backward shift, so no tombstones): a slot holds the key with its two
//! low bits replaced by its state (pending or durable; 0 is an empty slot), so a key
//! costs 16 bytes at the table's load, which stays between 3/8 and 3/4 (the table
//! doubles up to the generation's capacity): 21 to 43 bytes per key, against about
//! 52 for the hash maps of `(u64, u64)` and a state this replaced (`dedupmem`,
//! BENCHMARKS.md). Two keys that differ only in their two low bits are one key here:
//! keys are XXH3-128 hashes, so that is a chance of 2^-126 per pair, far below the
//! 128-bit key's own. The slot index is the product of the table size and the XOR of
//! the key's halves (the top bits pick the shard, so they cannot pick the slot).
//! XXH3 is not keyed: a client grinding beacons could aim keys at one run of slots,
//! but a shard holds at most its capacity, so that costs probe length within one
//! shard, not memory. Each entry also remembers whether the event is durable yet: a
//! duplicate of an event whose write is still in flight is not "seen" (its 200 would
//! be a promise the first write may not keep), so the caller writes it too and the
//! aggregator, which dedups by the same key, counts it once.
//!
//! This is the edge's first line only: exactness across restarts and instances is
//! the aggregator's job. A plain `Mutex` per shard is used rather than `dashmap`
//! because rotation must be atomic with the lookups of its shard.

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

/// The state bits of a slot (the key's two low bits); 0 is an empty slot.
const STATE: u128 = 3;
const PENDING: u128 = 1;
const DURABLE: u128 = 2;
const EMPTY: u128 = 0;
/// Smallest table allocated.
const MIN_SLOTS: usize = 64;

/// One generation: an open-addressing table of tagged keys.
#[derive(Default)]
struct Table {
    slots: Box<[u128]>,
    len: usize,
}

impl Table {
    fn home(&self, key: u128) -> usize {
        let h = (key >> 64) as u64 ^ key as u64;
        ((u128::from(h) * self.slots.len() as u128) >> 64) as usize
    }

    /// The slot of `key` (low bits ignored).
    fn find(&self, key: u128) -> Option<usize> {
        let n = self.slots.len();
        if n == 0 {
            return None;
        }
        let mut i = self.home(key);
        loop {
            let s = self.slots[i];
            if s == EMPTY {
                return None;
            }
            if s & !STATE == key {
                return Some(i);
            }
            i = if i + 1 == n { 0 } else { i + 1 };
        }
    }

    /// Inserts `key` (absent) with `state`, growing towards `max_slots`.
    fn insert(&mut self, key: u128, state: u128, max_slots: usize) {
        if (self.len + 1) * 4 > self.slots.len() * 3 && self.slots.len() < max_slots {
            self.grow((self.slots.len() * 2).max(MIN_SLOTS).min(max_slots));
        }
        let n = self.slots.len();
        let mut i = self.home(key);
        while self.slots[i] != EMPTY {
            i = if i + 1 == n { 0 } else { i + 1 };
        }
        self.slots[i] = key | state;
        self.len += 1;
    }

    fn grow(&mut self, slots: usize) {
        let old = std::mem::replace(&mut self.slots, vec![EMPTY; slots].into_boxed_slice());
        let n = self.slots.len();
        for s in old.iter().copied().filter(|s| *s != EMPTY) {
            let mut i = self.home(s & !STATE);
            while self.slots[i] != EMPTY {
                i = if i + 1 == n { 0 } else { i + 1 };
            }
            self.slots[i] = s;
        }
    }

    /// Empties slot `i`, shifting back the run after it (no tombstones).
    fn remove(&mut self, mut i: usize) {
        let n = self.slots.len();
        let mut j = i;
        loop {
            j = if j + 1 == n { 0 } else { j + 1 };
            let s = self.slots[j];
            if s == EMPTY {
                break;
            }
            let home = self.home(s & !STATE);
            // Slot j may move to i when its home is not cyclically within (i, j].
            let stays = if i <= j {
                i < home && home <= j
            } else {
                i < home || home <= j
            };
            if !stays {
                self.slots[i] = s;
                i = j;
            }
        }
        self.slots[i] = EMPTY;
        self.len -= 1;
    }
}

struct Shard {
    current: Table,
    previous: Table,
    started_ms: u64,
}

/// The sharded dedup window.
pub struct DedupWindow {
    shards: Box<[Mutex<Shard>]>,
    ttl_ms: u64,
    generation_cap: usize,
    /// Table size at which a full generation sits at a load of 3/4.
    max_slots: usize,
}

impl DedupWindow {
    /// A window remembering keys for `ttl_ms` and at most `max_keys` keys in all.
    pub fn new(ttl_ms: u64, max_keys: usize, shards: usize) -> Self {
        let shards = shards.clamp(1, 1024).next_power_of_two();
        let generation_cap = (max_keys / shards / 2).max(1);
        let shards = (0..shards)
            .map(|_| {
                Mutex::new(Shard {
                    current: Table::default(),
                    previous: Table::default(),
                    started_ms: 0,
                })
            })
            .collect();
        Self {
            shards,
            ttl_ms: ttl_ms.max(1),
            generation_cap,
            max_slots: (generation_cap * 4).div_ceil(3) + 1,
        }
    }

    fn lock(&self, key: u128) -> std::sync::MutexGuard<'_, Shard> {
        // Top bits pick the shard; the table uses both halves (`Table::home`).
        let i = (key >> 116) as usize & (self.shards.len() - 1);
        // A panic while holding a shard lock cannot leave it inconsistent.
        self.shards[i]
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Looks `key` up and, when new, records it as pending. `now_ms` is monotonic.
    pub fn check(&self, key: u128, now_ms: u64) -> Seen {
        let k = key & !STATE;
        let mut s = self.lock(key);
        if now_ms.saturating_sub(s.started_ms) >= self.ttl_ms
            || s.current.len >= self.generation_cap
        {
            s.previous = std::mem::take(&mut s.current);
            s.started_ms = now_ms;
        }
        let found = match s.current.find(k) {
            Some(i) => Some(s.current.slots[i]),
            None => s.previous.find(k).map(|i| s.previous.slots[i]),
        };
        match found.map(|slot| slot & STATE) {
            Some(DURABLE) => Seen::Durable,
            Some(_) => Seen::Pending,
            None => {
                s.current.insert(k, PENDING, self.max_slots);
                Seen::New
            }
        }
    }

    /// Marks `key` durable: later sightings are duplicates.
    pub fn mark_durable(&self, key: u128) {
        let k = key & !STATE;
        let mut s = self.lock(key);
        let s = &mut *s;
        for t in [&mut s.current, &mut s.previous] {
            if let Some(i) = t.find(k) {
                t.slots[i] = k | DURABLE;
                return;
            }
        }
    }

    /// Forgets `key` (its write failed: a retry must be written).
    pub fn forget(&self, key: u128) {
        let k = key & !STATE;
        let mut s = self.lock(key);
        let s = &mut *s;
        for t in [&mut s.current, &mut s.previous] {
            if let Some(i) = t.find(k) {
                t.remove(i);
                return;
            }
        }
    }

    /// Keys held now.
    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|m| {
                m.lock()
                    .map(|s| s.current.len + s.previous.len)
                    .unwrap_or(0)
            })
            .sum()
    }

    /// True when no key is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes allocated for keys now (16 per slot).
    pub fn memory_bytes(&self) -> usize {
        self.shards
            .iter()
            .map(|m| {
                m.lock()
                    .map(|s| (s.current.slots.len() + s.previous.slots.len()) * 16)
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

    /// 2M keys in a window with room for them all, and in the default window (2M at
    /// most, so it has rotated some shards by then): at most 48 bytes per key held.
    #[test]
    fn two_million_keys_cost_at_most_48_bytes_each() {
        for max_keys in [8_000_000, 2_000_000] {
            let w = DedupWindow::new(u64::MAX / 4, max_keys, 32);
            let mut x = 0x9E37_79B9_7F4A_7C15_u128;
            for i in 0..2_000_000u64 {
                x = x
                    .wrapping_mul(0x2545_F491_4F6C_DD1D_2545_F491_4F6C_DD1D)
                    .wrapping_add(u128::from(i));
                w.check(x, 0);
            }
            let per_key = w.memory_bytes() as f64 / w.len() as f64;
            assert!(w.len() >= 1_000_000, "{} keys", w.len());
            if max_keys > 2_000_000 {
                assert_eq!(w.len(), 2_000_000);
            }
            assert!(per_key <= 48.0, "{per_key} bytes per key");
        }
    }

    /// A reference model (a map of key to state per generation) agrees with the
    /// window on any sequence of checks, marks and forgets, on few shards and small
    /// tables so that runs wrap, shift back and rotate.
    #[derive(Debug, Clone)]
    enum Op {
        Check(u8, u64),
        Durable(u8),
        Forget(u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (any::<u8>(), 0u64..3).prop_map(|(k, dt)| Op::Check(k, dt)),
            any::<u8>().prop_map(Op::Durable),
            any::<u8>().prop_map(Op::Forget),
        ]
    }

    proptest! {
        #[test]
        fn agrees_with_a_model(ops in proptest::collection::vec(op(), 1..600), cap in 4usize..200) {
            use std::collections::HashMap;
            // Keys collide in their slots on purpose: few distinct home values.
            let key = |k: u8| (u128::from(k % 7) << 64) | (u128::from(k) << 2) | u128::from(k & 3);
            let w = DedupWindow::new(50, cap, 1);
            let gen_cap = (cap / 2).max(1);
            let (mut cur, mut prev, mut started, mut now): (HashMap<u128, bool>, HashMap<u128, bool>, u64, u64) =
                (HashMap::new(), HashMap::new(), 0, 0);
            for o in ops {
                match o {
                    Op::Check(k, dt) => {
                        now += dt;
                        let k = key(k) & !3;
                        if now - started >= 50 || cur.len() >= gen_cap {
                            prev = std::mem::take(&mut cur);
                            started = now;
                        }
                        let want = match cur.get(&k).or_else(|| prev.get(&k)) {
                            Some(true) => Seen::Durable,
                            Some(false) => Seen::Pending,
                            None => {
                                cur.insert(k, false);
                                Seen::New
                            }
                        };
                        prop_assert_eq!(w.check(k | 3, now), want);
                    }
                    Op::Durable(k) => {
                        let k2 = key(k) & !3;
                        if let Some(v) = cur.get_mut(&k2) {
                            *v = true;
                        } else if let Some(v) = prev.get_mut(&k2) {
                            *v = true;
                        }
                        w.mark_durable(key(k));
                    }
                    Op::Forget(k) => {
                        let k2 = key(k) & !3;
                        if cur.remove(&k2).is_none() {
                            prev.remove(&k2);
                        }
                        w.forget(key(k));
                    }
                }
                prop_assert_eq!(w.len(), cur.len() + prev.len());
            }
        }
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
