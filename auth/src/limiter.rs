//! Failed-authentication limits that an attacker cannot turn against a partner.
//!
//! Every rule is keyed by what the attacker cannot choose for someone else: the
//! source address of the connection (an IPv4 address, or an IPv6 /64, since one host
//! holds a whole /64).
//!
//! | rule | key | limit (settings) | refused with |
//! |---|---|---|---|
//! | pair | client id and source address | `max_auth_failures` failures a minute | 429 for that pair |
//! | source | source address | `max_source_auth_failures` failures a minute, any id or key | 429 for that address |
//! | unknown | (global) | a token bucket of `unknown_auth_per_sec`, burst `unknown_auth_burst` | 429, no secret check |
//!
//! A flood of wrong secrets for a partner's client id from other addresses locks those
//! addresses and pairs, never the partner's own address. Unknown client ids and API
//! keys spend one token of the global bucket each (the Argon2 decoy runs only with a
//! token), so a flood of random ids from many addresses is limited as a whole.
//!
//! Memory is bounded: every table is an [`ExpiringTable`] of fixed capacity that
//! evicts only expired entries, so no flood can evict a live lockout. A failure that a
//! full table cannot record is charged to the global bucket instead (the conservative
//! choice: untracked failures shrink the budget of unknown credentials, never a
//! partner's own pair). Successful authentications are remembered for a day per pair
//! ([`Limiter::recently_good`]) so the hashing queue can keep room for them.
//!
//! Pure: every method takes the current instant.

use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::table::ExpiringTable;

/// Length of a failure-counting window.
pub const WINDOW: Duration = Duration::from_secs(60);

/// How long a successful (client id, address) pair keeps its place in the reserve
/// of the hashing queue.
pub const GOOD_FOR: Duration = Duration::from_secs(24 * 3600);

/// Settings of the limiter and of the hashing queue.
#[derive(Debug, Clone, clap::Args)]
pub struct LimitSettings {
    /// Failed authentications of one client id from one source address (an IPv4
    /// address or an IPv6 /64) allowed per minute; then that pair is refused (429)
    /// for the rest of the minute. Other addresses are not affected.
    #[arg(
        long = "api-max-auth-failures",
        env = "RM_API_MAX_AUTH_FAILURES",
        default_value_t = 10
    )]
    pub max_auth_failures: u32,
    /// Failed authentications (token endpoint and orders API key, any id or key)
    /// allowed per minute from one source address; then that address is refused (429)
    /// for the rest of the minute.
    #[arg(
        long = "api-max-source-auth-failures",
        env = "RM_API_MAX_SOURCE_AUTH_FAILURES",
        default_value_t = 50
    )]
    pub max_source_auth_failures: u32,
    /// Attempts with unknown client ids or API keys allowed per second from all
    /// addresses together (a token bucket); beyond it they are answered 429 without a
    /// secret check.
    #[arg(
        long = "api-unknown-auth-per-sec",
        env = "RM_API_UNKNOWN_AUTH_PER_SEC",
        default_value_t = 5
    )]
    pub unknown_auth_per_sec: u32,
    /// Burst of the unknown-credentials budget (the bucket's size).
    #[arg(
        long = "api-unknown-auth-burst",
        env = "RM_API_UNKNOWN_AUTH_BURST",
        default_value_t = 20
    )]
    pub unknown_auth_burst: u32,
    /// Entries of each limiter table (pairs, addresses, recent successes); a full
    /// table stores no new entries rather than evict a live one.
    #[arg(
        long = "api-auth-limiter-entries",
        env = "RM_API_AUTH_LIMITER_ENTRIES",
        default_value_t = 65_536,
        value_parser = clap::value_parser!(u32).range(64..)
    )]
    pub limiter_entries: u32,
    /// Argon2 secret checks running at once (each takes tens of ms of one core).
    #[arg(
        long = "api-hash-concurrency",
        env = "RM_API_HASH_CONCURRENCY",
        default_value_t = 4,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub hash_concurrency: u32,
    /// Secret checks that may wait for a running one; beyond it the token endpoint
    /// answers 503 `temporarily_unavailable` and the orders endpoint 503, at once.
    #[arg(
        long = "api-hash-queue",
        env = "RM_API_HASH_QUEUE",
        default_value_t = 32
    )]
    pub hash_queue: u32,
}

impl Default for LimitSettings {
    fn default() -> Self {
        LimitSettings {
            max_auth_failures: 10,
            max_source_auth_failures: 50,
            unknown_auth_per_sec: 5,
            unknown_auth_burst: 20,
            limiter_entries: 65_536,
            hash_concurrency: 4,
            hash_queue: 32,
        }
    }
}

/// The key of a source address: IPv4 addresses (also IPv4-mapped IPv6) whole, IPv6
/// addresses by their /64.
pub fn source_key(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => {
            let bits = u128::from(v6) & !((1u128 << 64) - 1);
            IpAddr::V6(bits.into())
        }
        v4 => v4,
    }
}

/// Why an attempt is refused before any secret check, and when to retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused {
    /// Whole seconds until the refusal may end (at least 1).
    pub retry_after: u64,
    /// Which rule refused.
    pub rule: Rule,
}

/// The rule behind a [`Refused`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// Too many failures for this client id from this address.
    Pair,
    /// Too many failures from this address.
    Source,
    /// The global budget of unknown credentials is spent.
    Unknown,
}

impl Refused {
    /// A sentence for the error description.
    pub fn describe(&self) -> String {
        let what = match self.rule {
            Rule::Pair => "too many failed authentications for this client from this address",
            Rule::Source => "too many failed authentications from this address",
            Rule::Unknown => "too many attempts with unknown credentials",
        };
        format!("{what}; retry in {} s", self.retry_after)
    }
}

/// Failures within one window.
#[derive(Debug, Clone, Copy)]
struct Window {
    failures: u32,
    start: Instant,
}

/// A token bucket: `rate` tokens a second up to `burst`.
#[derive(Debug)]
struct Bucket {
    tokens: f64,
    burst: f64,
    rate: f64,
    last: Instant,
}

impl Bucket {
    fn refill(&mut self, now: Instant) {
        let dt = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + dt * self.rate).min(self.burst);
        self.last = self.last.max(now);
    }

    /// Takes a token, or says how many seconds until one.
    fn take(&mut self, now: Instant) -> Result<(), u64> {
        self.refill(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            return Ok(());
        }
        if self.rate <= 0.0 {
            return Err(WINDOW.as_secs());
        }
        Err((((1.0 - self.tokens) / self.rate).ceil() as u64).max(1))
    }

    /// Spends a token if there is one (a failure no table could record).
    fn charge(&mut self, now: Instant) {
        self.refill(now);
        self.tokens = (self.tokens - 1.0).max(0.0);
    }
}

/// The failed-authentication limits; see the module header.
pub struct Limiter {
    pairs: ExpiringTable<Window>,
    sources: ExpiringTable<Window>,
    good: ExpiringTable<()>,
    unknown: Mutex<Bucket>,
    max_pair: u32,
    max_source: u32,
}

impl Limiter {
    /// A limiter with `s`'s limits, starting with a full bucket at `now`.
    pub fn new(s: &LimitSettings, now: Instant) -> Self {
        let entries = s.limiter_entries as usize;
        Limiter {
            pairs: ExpiringTable::new(entries),
            sources: ExpiringTable::new(entries),
            good: ExpiringTable::new(entries),
            unknown: Mutex::new(Bucket {
                tokens: f64::from(s.unknown_auth_burst),
                burst: f64::from(s.unknown_auth_burst),
                rate: f64::from(s.unknown_auth_per_sec),
                last: now,
            }),
            max_pair: s.max_auth_failures.max(1),
            max_source: s.max_source_auth_failures.max(1),
        }
    }

    fn pair_digest(&self, table: &ExpiringTable<impl Sized>, id: &str, src: IpAddr) -> u64 {
        table.digest(&(id, source_key(src)))
    }

    /// Whether an attempt for `id` from `src` may go on to a secret check: refused
    /// while `src` or the pair is locked out.
    pub fn check(&self, id: Option<&str>, src: IpAddr, now: Instant) -> Result<(), Refused> {
        let locked = |w: &Window, max: u32, rule: Rule| {
            (w.failures >= max).then(|| Refused {
                retry_after: (w.start + WINDOW)
                    .saturating_duration_since(now)
                    .as_secs_f64()
                    .ceil()
                    .max(1.0) as u64,
                rule,
            })
        };
        let source = self.sources.digest(&source_key(src));
        if let Some(r) = self
            .sources
            .get(source, now, |w| locked(w, self.max_source, Rule::Source))
            .flatten()
        {
            return Err(r);
        }
        if let Some(id) = id {
            let pair = self.pair_digest(&self.pairs, id, src);
            if let Some(r) = self
                .pairs
                .get(pair, now, |w| locked(w, self.max_pair, Rule::Pair))
                .flatten()
            {
                return Err(r);
            }
        }
        Ok(())
    }

    /// Takes one unit of the global budget for an attempt with an unknown client id
    /// or API key.
    pub fn admit_unknown(&self, now: Instant) -> Result<(), Refused> {
        self.bucket().take(now).map_err(|retry_after| Refused {
            retry_after,
            rule: Rule::Unknown,
        })
    }

    fn bucket(&self) -> std::sync::MutexGuard<'_, Bucket> {
        self.unknown.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records a failed attempt from `src` (for `id` when it names a known client).
    pub fn failed(&self, id: Option<&str>, src: IpAddr, now: Instant) {
        let count = |w: &mut Window| {
            if now.saturating_duration_since(w.start) >= WINDOW {
                *w = Window {
                    failures: 0,
                    start: now,
                };
            }
            w.failures = w.failures.saturating_add(1);
            (w.start + WINDOW, ())
        };
        let fresh = || Window {
            failures: 0,
            start: now,
        };
        let mut untracked = 0;
        let source = self.sources.digest(&source_key(src));
        if self.sources.update(source, now, fresh, count).is_err() {
            untracked += 1;
        }
        if let Some(id) = id {
            let pair = self.pair_digest(&self.pairs, id, src);
            if self.pairs.update(pair, now, fresh, count).is_err() {
                untracked += 1;
            }
        }
        if untracked > 0 {
            self.bucket().charge(now);
        }
    }

    /// Records a successful authentication of `id` from `src`: its pair's failures
    /// are cleared and the pair is remembered as good for [`GOOD_FOR`].
    pub fn succeeded(&self, id: &str, src: IpAddr, now: Instant) {
        self.pairs.remove(self.pair_digest(&self.pairs, id, src));
        // A full table only costs this pair its place in the queue's reserve.
        let _ = self.good.update(
            self.pair_digest(&self.good, id, src),
            now,
            || (),
            |()| (now + GOOD_FOR, ()),
        );
    }

    /// Whether `id` authenticated from `src` within [`GOOD_FOR`].
    pub fn recently_good(&self, id: &str, src: IpAddr, now: Instant) -> bool {
        self.good
            .get(self.pair_digest(&self.good, id, src), now, |()| ())
            .is_some()
    }

    /// Entries held in the tables (pairs, sources, good pairs).
    pub fn tracked(&self) -> (usize, usize, usize) {
        (self.pairs.len(), self.sources.len(), self.good.len())
    }

    /// Most entries each table holds.
    pub fn capacity(&self) -> usize {
        self.pairs.capacity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn settings(entries: u32) -> LimitSettings {
        LimitSettings {
            max_auth_failures: 3,
            max_source_auth_failures: 5,
            unknown_auth_per_sec: 1,
            unknown_auth_burst: 2,
            limiter_entries: entries,
            ..LimitSettings::default()
        }
    }

    fn v4(n: u32) -> IpAddr {
        IpAddr::V4(Ipv4Addr::from(n))
    }

    const PARTNER: IpAddr = IpAddr::V4(Ipv4Addr::new(203, 0, 113, 7));

    #[test]
    fn a_pair_locks_after_its_failures_until_the_window_ends() {
        let t = Instant::now();
        let l = Limiter::new(&settings(1024), t);
        for _ in 0..3 {
            assert_eq!(l.check(Some("c"), PARTNER, t), Ok(()));
            l.failed(Some("c"), PARTNER, t);
        }
        let r = l.check(Some("c"), PARTNER, t).unwrap_err();
        assert_eq!((r.rule, r.retry_after), (Rule::Pair, 60));
        // Another client from the same address, and the client elsewhere, go on.
        assert_eq!(l.check(Some("d"), PARTNER, t), Ok(()));
        assert_eq!(l.check(Some("c"), v4(1), t), Ok(()));
        assert_eq!(l.check(Some("c"), PARTNER, t + WINDOW), Ok(()));
        l.succeeded("c", PARTNER, t);
        assert_eq!(l.check(Some("c"), PARTNER, t), Ok(()));
        assert!(l.recently_good("c", PARTNER, t + WINDOW));
        assert!(!l.recently_good("c", v4(1), t));
    }

    #[test]
    fn a_source_locks_across_ids() {
        let t = Instant::now();
        let l = Limiter::new(&settings(1024), t);
        for i in 0..5 {
            l.failed(Some(&format!("id{i}")), v4(9), t);
        }
        let r = l.check(Some("other"), v4(9), t).unwrap_err();
        assert_eq!(r.rule, Rule::Source);
        assert_eq!(l.check(None, v4(9), t).unwrap_err().rule, Rule::Source);
        assert_eq!(l.check(Some("other"), v4(10), t), Ok(()));
    }

    #[test]
    fn ipv6_sources_are_keyed_by_their_64() {
        let a: Ipv6Addr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: Ipv6Addr = "2001:db8:1:2:bbbb::9".parse().unwrap();
        let c: Ipv6Addr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(source_key(a.into()), source_key(b.into()));
        assert_ne!(source_key(a.into()), source_key(c.into()));
        let mapped: Ipv6Addr = Ipv4Addr::new(10, 1, 2, 3).to_ipv6_mapped();
        assert_eq!(source_key(mapped.into()), v4(0x0a01_0203));
    }

    #[test]
    fn the_unknown_budget_is_a_token_bucket() {
        let t = Instant::now();
        let l = Limiter::new(&settings(1024), t);
        assert!(l.admit_unknown(t).is_ok());
        assert!(l.admit_unknown(t).is_ok());
        let r = l.admit_unknown(t).unwrap_err();
        assert_eq!((r.rule, r.retry_after), (Rule::Unknown, 1));
        assert!(l.admit_unknown(t + Duration::from_millis(1000)).is_ok());
        assert!(l.admit_unknown(t + Duration::from_millis(1000)).is_err());
    }

    /// A million failures with random ids from random addresses: every table stays
    /// within its capacity, and lockouts made before the flood hold through it.
    #[test]
    fn memory_is_bounded_and_lockouts_survive_a_flood_of_a_million_ids() {
        let t = Instant::now();
        let l = Limiter::new(&settings(4096), t);
        for _ in 0..3 {
            l.failed(Some("partner"), v4(77), t);
        }
        for _ in 0..5 {
            l.failed(None, v4(78), t);
        }
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for i in 0..1_000_000u64 {
            // xorshift: cheap distinct-looking ids and addresses.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let now = t + Duration::from_micros(i * 50);
            l.failed(Some(&format!("{x:x}")), v4(x as u32), now);
        }
        let (pairs, sources, good) = l.tracked();
        assert!(pairs <= l.capacity() && sources <= l.capacity() && good == 0);
        let later = t + Duration::from_secs(50);
        assert_eq!(
            l.check(Some("partner"), v4(77), later).unwrap_err().rule,
            Rule::Pair
        );
        assert_eq!(l.check(None, v4(78), later).unwrap_err().rule, Rule::Source);
        // The untracked failures were charged to the unknown budget.
        assert!(l.admit_unknown(later).is_err());
    }

    proptest! {
        /// Whatever other addresses send (wrong secrets for the partner's id or for
        /// random ids, tables small enough to fill), the partner's own address is
        /// never refused.
        #[test]
        fn a_flood_from_other_addresses_never_locks_the_partner(
            flood in proptest::collection::vec((any::<u32>(), any::<bool>(), 0u64..120_000), 1..600),
        ) {
            let t = Instant::now();
            let l = Limiter::new(&settings(64), t);
            let partner = u32::from_be_bytes([203, 0, 113, 7]);
            for (src, known, ms) in flood {
                let src = if src == partner { src ^ 1 } else { src };
                let now = t + Duration::from_millis(ms);
                l.failed(known.then_some("partner"), v4(src), now);
                prop_assert_eq!(l.check(Some("partner"), PARTNER, now), Ok(()));
            }
        }

        /// However failures arrive, no table outgrows its capacity.
        #[test]
        fn tables_stay_within_capacity(
            events in proptest::collection::vec(("[a-z]{1,4}", any::<u8>()), 1..400),
        ) {
            let t = Instant::now();
            let l = Limiter::new(&settings(64), t);
            for (id, src) in events {
                l.failed(Some(&id), v4(u32::from(src)), t);
                l.succeeded(&id, v4(u32::from(src) + 1), t);
                let (p, s, g) = l.tracked();
                prop_assert!(p <= l.capacity() && s <= l.capacity() && g <= l.capacity());
            }
        }
    }
}
