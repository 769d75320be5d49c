//! The integration inspector's memory: the latest events the edge answered, per
//! tracking id, for `GET /v1/debug/events?trackingId=...` ([`crate::inspector_report`]).
//!
//! Bounded three ways: at most `events_per_id` events per tracking id (a ring: the
//! oldest go first), at most `max_bytes` in all (accounted per event: its decoded
//! parameters, each cut to [`MAX_VALUE_BYTES`], plus fixed overheads; when a shard
//! is over its share, its least recently seen tracking ids are dropped whole), and
//! sampling by tracking id (`RM_INGEST_INSPECTOR=0.01` keeps every event of 1% of the
//! ids, so the rule checks still see whole sessions). A typical video beacon takes
//! about 300 bytes and a tracking id about 170 more, so the default 32 MiB holds some
//! 100k events (measured: 50k ids of one or two events each fill it).
//!
//! Cost per beacon, measured in release (`inspector_cost_per_event`): off, one load;
//! sampled out, a scan for the tracking-id pieces and a hash (~0.1 us); kept, ~2.5 us
//! in the worst case (every event a new tracking id, evicting another). Production:
//! `off`, or a small fraction such as `0.001`.
//!
//! New tracking ids are admitted at a bounded rate (`RM_INGEST_INSPECTOR_NEW_IDS_PER_SEC`,
//! 1,000 by default, [`Inspector::set_new_ids_per_sec`]): an id already kept is always
//! recorded, a new one only while that second's budget lasts. An integration under
//! test (a few sessions) sees every event, while a busy edge, whose every beacon may
//! start a new session, does not pay the worst case on every beacon: past the budget
//! a beacon costs the scan, a hash and one lookup (~0.3 us), and the 32 MiB then hold
//! minutes of sessions instead of the last few seconds (issue 17, BENCHMARKS.md).
//!
//! Hot path: when off, [`Inspector::enabled`] is one load and nothing is allocated;
//! when on, one hash of the tracking id decides sampling, then one lock of one shard
//! (picked by the tracking id) per tracking id the event carries. An event carrying
//! several tracking ids (`sessionId` and `customerId`) is kept under each.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use rm_schemas::inspect::{Endpoint, Observed, Outcome, Thresholds};
use rm_schemas::record::UnverifiedAdId;
use rm_schemas::video_funnel::Debounce;

/// Longest parameter value kept, in bytes (longer values are cut).
pub const MAX_VALUE_BYTES: usize = 256;
const SHARDS: usize = 16;
const ID_OVERHEAD: usize = 160;

/// Which tracking ids the inspector keeps.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Sampling {
    /// None: the inspector is off.
    Off,
    /// Every tracking id.
    On,
    /// This fraction of tracking ids (0 < f < 1), chosen by a hash of the id.
    Fraction(f64),
}

impl Sampling {
    /// Parses `off`, `on` or a fraction in (0, 1].
    pub fn parse(s: &str) -> Result<Sampling, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "off" | "false" | "0" => Ok(Sampling::Off),
            "on" | "true" | "1" => Ok(Sampling::On),
            other => match other.parse::<f64>() {
                Ok(f) if f > 0.0 && f < 1.0 => Ok(Sampling::Fraction(f)),
                Ok(1.0) => Ok(Sampling::On),
                _ => Err(format!(
                    "'{s}' is not off, on, or a fraction of tracking ids between 0 and 1"
                )),
            },
        }
    }
}

/// One event as kept: what the edge answered and what it was sent.
#[derive(Debug, Clone, PartialEq)]
pub struct Recorded {
    /// Unix milliseconds of arrival.
    pub received_at_ms: i64,
    /// The endpoint.
    pub endpoint: Endpoint,
    /// Decoded known parameters (consent left out), each cut to [`MAX_VALUE_BYTES`].
    pub params: Vec<(&'static str, String)>,
    /// The answer.
    pub outcome: Outcome,
    /// The rejection's sentence, or why a redirect was not recorded.
    pub message: Option<String>,
    /// The ad id's verdict when it did not verify.
    pub ad_id_verdict: Option<UnverifiedAdId>,
}

impl Recorded {
    fn size(&self) -> usize {
        std::mem::size_of::<Self>()
            + self
                .params
                .iter()
                .map(|(_, v)| v.len() + std::mem::size_of::<(&str, String)>())
                .sum::<usize>()
            + self.message.as_ref().map_or(0, String::len)
            + 16
    }

    /// As the rule checks see it.
    pub fn observed(&self, seq: u64) -> Observed {
        Observed {
            seq,
            received_at_ms: self.received_at_ms,
            endpoint: self.endpoint,
            params: self.params.clone(),
            outcome: self.outcome.clone(),
        }
    }

    /// The distinct tracking ids the event carries.
    pub fn tracking_ids(&self) -> Vec<&str> {
        let mut ids: Vec<&str> = Vec::with_capacity(3);
        for (k, v) in &self.params {
            if matches!(*k, "customerId" | "sessionId" | "dtmToken")
                && !v.is_empty()
                && !ids.contains(&v.as_str())
            {
                ids.push(v);
            }
        }
        ids
    }
}

struct Ring {
    events: VecDeque<(u64, Arc<Recorded>, usize)>,
    next_seq: u64,
    bytes: usize,
    touched: u64,
}

#[derive(Default)]
struct Shard {
    ids: HashMap<Arc<str>, Ring>,
    lru: BTreeMap<u64, Arc<str>>,
    tick: u64,
    bytes: usize,
}

/// The inspector: shared by the edge (which records) and whoever serves the report.
pub struct Inspector {
    /// Hashes at or below this are sampled (`None`: off).
    threshold: Option<u64>,
    events_per_id: usize,
    shard_budget: usize,
    shards: Box<[Mutex<Shard>]>,
    thresholds: Thresholds,
    /// New tracking ids admitted per second (0: every one).
    new_ids_per_sec: AtomicU64,
    /// Upper 32 bits: the second since `epoch`; lower 32: new ids admitted in it.
    new_ids: AtomicU64,
    epoch: Instant,
}

impl std::fmt::Debug for Inspector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (ids, bytes) = self.usage();
        write!(f, "Inspector({ids} ids, {bytes} bytes)")
    }
}

fn hash(id: &str) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    id.hash(&mut h);
    h.finish()
}

impl Inspector {
    /// An inspector keeping `sampling` of the tracking ids, `events_per_id` events
    /// each, within about `max_bytes`, judging with the default thresholds.
    pub fn new(sampling: Sampling, events_per_id: usize, max_bytes: usize) -> Arc<Inspector> {
        Self::with_thresholds(sampling, events_per_id, max_bytes, Thresholds::default())
    }

    /// Like [`Inspector::new`], judging with `thresholds`.
    pub fn with_thresholds(
        sampling: Sampling,
        events_per_id: usize,
        max_bytes: usize,
        thresholds: Thresholds,
    ) -> Arc<Inspector> {
        let threshold = match sampling {
            Sampling::Off => None,
            Sampling::On => Some(u64::MAX),
            Sampling::Fraction(f) => Some((f * u64::MAX as f64) as u64),
        };
        Arc::new(Inspector {
            threshold: threshold.filter(|_| events_per_id > 0 && max_bytes > 0),
            events_per_id: events_per_id.max(1),
            shard_budget: (max_bytes / SHARDS).max(1),
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            thresholds,
            new_ids_per_sec: AtomicU64::new(0),
            new_ids: AtomicU64::new(0),
            epoch: Instant::now(),
        })
    }

    /// From the edge's settings and the video funnel's control debounce
    /// (`RM_CONTROL_DEBOUNCE_MS`, the one the aggregator's funnel report uses).
    pub fn from_config(c: &crate::IngestConfig, debounce: Debounce) -> Arc<Inspector> {
        let i = Self::with_thresholds(
            c.inspector,
            c.inspector_events_per_id,
            c.inspector_max_mib.saturating_mul(1 << 20),
            Thresholds {
                debounce,
                ..Thresholds::default()
            },
        );
        i.set_new_ids_per_sec(c.inspector_new_ids_per_sec);
        i
    }

    /// Admits at most `n` new tracking ids per second (0: every one; the default of
    /// [`Inspector::new`]). Ids already kept are always recorded.
    pub fn set_new_ids_per_sec(&self, n: u64) {
        self.new_ids_per_sec.store(n, Ordering::Relaxed);
    }

    /// True when an event of `tracking_id` is to be recorded: sampled, and either
    /// kept already or within this second's budget of new ids (which it takes).
    pub fn admits(&self, tracking_id: &str) -> bool {
        if !self.samples(tracking_id) {
            return false;
        }
        let limit = self.new_ids_per_sec.load(Ordering::Relaxed);
        if limit == 0 || self.shard(tracking_id).ids.contains_key(tracking_id) {
            return true;
        }
        let second = self.epoch.elapsed().as_secs();
        let mut admitted = false;
        let _ = self
            .new_ids
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |w| {
                let used = if w >> 32 == second {
                    w & 0xffff_ffff
                } else {
                    0
                };
                admitted = used < limit;
                admitted.then_some(second << 32 | (used + 1))
            });
        admitted
    }

    /// The thresholds the rule checks judge with.
    pub fn thresholds(&self) -> Thresholds {
        self.thresholds
    }

    /// True when the inspector keeps anything at all.
    pub fn enabled(&self) -> bool {
        self.threshold.is_some()
    }

    /// True when events of `tracking_id` are kept.
    pub fn samples(&self, tracking_id: &str) -> bool {
        self.threshold.is_some_and(|t| hash(tracking_id) <= t)
    }

    fn shard(&self, id: &str) -> MutexGuard<'_, Shard> {
        // Plain maps: a panic elsewhere cannot leave a shard inconsistent.
        self.shards[(hash(id) >> 32) as usize % SHARDS]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Keeps `event` under each of its sampled tracking ids.
    pub fn record(&self, event: Recorded) {
        let event = Arc::new(event);
        let size = event.size();
        for id in event.tracking_ids() {
            if self.samples(id) {
                self.keep(id, &event, size);
            }
        }
    }

    fn keep(&self, id: &str, event: &Arc<Recorded>, size: usize) {
        let mut guard = self.shard(id);
        let s = &mut *guard;
        s.tick += 1;
        let tick = s.tick;
        let key: Arc<str> = match s.ids.get_key_value(id) {
            Some((k, r)) => {
                let (k, old) = (Arc::clone(k), r.touched);
                s.lru.remove(&old);
                k
            }
            None => {
                let k: Arc<str> = Arc::from(id);
                s.bytes += ID_OVERHEAD + id.len();
                s.ids.insert(
                    Arc::clone(&k),
                    Ring {
                        events: VecDeque::new(),
                        next_seq: 1,
                        bytes: ID_OVERHEAD + id.len(),
                        touched: 0,
                    },
                );
                k
            }
        };
        if let Some(ring) = s.ids.get_mut(id) {
            ring.touched = tick;
            ring.events
                .push_back((ring.next_seq, Arc::clone(event), size));
            ring.next_seq += 1;
            ring.bytes += size;
            s.bytes += size;
            while ring.events.len() > self.events_per_id {
                if let Some((_, _, n)) = ring.events.pop_front() {
                    ring.bytes -= n;
                    s.bytes -= n;
                }
            }
        }
        s.lru.insert(tick, key);
        // Over budget: drop the least recently seen ids (never the one just written).
        while s.bytes > self.shard_budget {
            let Some((&oldest, _)) = s.lru.iter().next() else {
                break;
            };
            if oldest == tick {
                break;
            }
            if let Some(k) = s.lru.remove(&oldest) {
                if let Some(r) = s.ids.remove(&k) {
                    s.bytes -= r.bytes;
                }
            }
        }
    }

    /// The events kept for `tracking_id`, oldest first, with their arrival numbers.
    pub fn events(&self, tracking_id: &str) -> Vec<(u64, Arc<Recorded>)> {
        self.shard(tracking_id)
            .ids
            .get(tracking_id)
            .map(|r| {
                r.events
                    .iter()
                    .map(|(seq, e, _)| (*seq, Arc::clone(e)))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// For each of `ad_ids`, how many other tracking ids than `tracking_id` the kept
    /// events name with it: a served ad fired by several shoppers is a page that
    /// caches ad responses across shoppers, or someone replaying it. Counts stop at
    /// `cap`. One pass over what the inspector holds (each shard locked in turn; the
    /// ad ids looked up in a map, so the cost is that of the held events, not times
    /// the ad ids asked about), ending early once every count is at `cap`.
    pub fn others_with(&self, ad_ids: &[&str], tracking_id: &str, cap: usize) -> Vec<usize> {
        let index: HashMap<&str, usize> = ad_ids.iter().enumerate().map(|(i, a)| (*a, i)).collect();
        let mut counts = vec![0; ad_ids.len()];
        let mut full = 0;
        let mut seen = vec![false; ad_ids.len()];
        if ad_ids.is_empty() || cap == 0 {
            return counts;
        }
        for m in self.shards.iter() {
            let s = m.lock().unwrap_or_else(PoisonError::into_inner);
            for (id, ring) in &s.ids {
                if id.as_ref() == tracking_id {
                    continue;
                }
                seen.iter_mut().for_each(|x| *x = false);
                for (_, e, _) in &ring.events {
                    let Some(&i) = e
                        .params
                        .iter()
                        .find(|(k, _)| *k == "adId")
                        .and_then(|(_, v)| index.get(v.as_str()))
                    else {
                        continue;
                    };
                    // An event kept under several ids (a customer id and a session id)
                    // that names `tracking_id` too is that shopper's, not another's.
                    if seen[i] || counts[i] >= cap || e.tracking_ids().contains(&tracking_id) {
                        continue;
                    }
                    seen[i] = true;
                    counts[i] += 1;
                    if counts[i] == cap {
                        full += 1;
                        if full == counts.len() {
                            return counts;
                        }
                    }
                }
            }
        }
        counts
    }

    /// Forgets every kept event that names `tracking_id` (under that id and under
    /// the other ids an event carried with it) whose `adId` is of `namespace`'s ads
    /// (`None`: every event): a shopper's erasure. How many events it dropped.
    pub fn forget(&self, tracking_id: &str, namespace: Option<&str>) -> usize {
        let prefix = namespace.map(rm_schemas::ad_id::namespace_prefix);
        // Values are kept cut to `MAX_VALUE_BYTES`: so is the id looked for.
        let wanted = cut(tracking_id);
        let covered = |e: &Recorded| match &prefix {
            None => true,
            Some(p) => e
                .params
                .iter()
                .any(|(k, v)| *k == "adId" && v.starts_with(p.as_str())),
        };
        // An event kept under several ids is one event.
        let mut dropped: std::collections::HashSet<*const Recorded> = Default::default();
        for m in self.shards.iter() {
            let mut guard = m.lock().unwrap_or_else(PoisonError::into_inner);
            let s = &mut *guard;
            let mut emptied = Vec::new();
            for (id, ring) in s.ids.iter_mut() {
                let before = ring.events.len();
                let mut freed = 0;
                ring.events.retain(|(_, e, size)| {
                    let gone = e.tracking_ids().contains(&wanted.as_str()) && covered(e);
                    if gone {
                        freed += size;
                        dropped.insert(Arc::as_ptr(e));
                    }
                    !gone
                });
                ring.bytes -= freed;
                s.bytes -= freed;
                if ring.events.is_empty() && before > 0 {
                    emptied.push((Arc::clone(id), ring.touched));
                }
            }
            for (id, touched) in emptied {
                if let Some(r) = s.ids.remove(&id) {
                    s.bytes -= r.bytes;
                    s.lru.remove(&touched);
                }
            }
        }
        dropped.len()
    }

    /// Tracking ids and bytes held now.
    pub fn usage(&self) -> (usize, usize) {
        self.shards.iter().fold((0, 0), |(i, b), m| {
            let s = m.lock().unwrap_or_else(PoisonError::into_inner);
            (i + s.ids.len(), b + s.bytes)
        })
    }

    /// The memory bound in bytes.
    pub fn max_bytes(&self) -> usize {
        self.shard_budget * SHARDS
    }
}

/// Parameter names the inspector keeps (the consent string is left out: long, and
/// not about the integration).
pub const KEPT_PARAMETERS: [&str; 14] = [
    "adId",
    "interactionType",
    "timestamp",
    "sessionId",
    "customerId",
    "dtmToken",
    "videoId",
    "productCode",
    "catalogId",
    "creativeId",
    "units",
    "conversionValue",
    "dest",
    "sig",
];

/// The kept parameters of a raw query, decoded piece by piece (a piece that does not
/// decode is kept as sent, so a refused query still shows what it held).
pub fn params_of(query: &str) -> Vec<(&'static str, String)> {
    let mut out = Vec::with_capacity(8);
    for piece in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = match rm_schemas::query::decode_query(piece) {
            Ok(mut pairs) if !pairs.is_empty() => {
                let p = pairs.swap_remove(0);
                (p.key.into_owned(), p.value.into_owned())
            }
            _ => {
                let (k, v) = piece.split_once('=').unwrap_or((piece, ""));
                (k.to_owned(), v.to_owned())
            }
        };
        if let Some(name) = KEPT_PARAMETERS.iter().find(|n| **n == key) {
            if !out.iter().any(|(n, _)| n == name) {
                out.push((*name, cut(&value)));
            }
        }
    }
    out
}

/// True when any tracking id in the raw `query` is sampled: decodes only the
/// tracking-id pieces, so an unsampled beacon costs a scan and a hash.
pub fn samples_query(inspector: &Inspector, query: &str) -> bool {
    inspector.enabled()
        && query.split('&').any(|piece| {
            ["sessionId=", "customerId=", "dtmToken="]
                .iter()
                .any(|k| piece.starts_with(k))
                && rm_schemas::query::decode_query(piece).is_ok_and(|pairs| {
                    pairs
                        .first()
                        .is_some_and(|p| !p.value.is_empty() && inspector.samples(&p.value))
                })
        })
}

/// True when the raw `query` is to be recorded: some tracking id of it is admitted
/// ([`Inspector::admits`]). Decodes only the tracking-id pieces.
pub fn admits_query(inspector: &Inspector, query: &str) -> bool {
    inspector.enabled()
        && query.split('&').any(|piece| {
            ["sessionId=", "customerId=", "dtmToken="]
                .iter()
                .any(|k| piece.starts_with(k))
                && rm_schemas::query::decode_query(piece).is_ok_and(|pairs| {
                    pairs
                        .first()
                        .is_some_and(|p| !p.value.is_empty() && inspector.admits(&p.value))
                })
        })
}

/// Cuts `v` to at most [`MAX_VALUE_BYTES`] on a character boundary.
pub fn cut(v: &str) -> String {
    let mut end = v.len().min(MAX_VALUE_BYTES);
    while !v.is_char_boundary(end) {
        end -= 1;
    }
    v[..end].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ev(id: &str, n: usize) -> Recorded {
        Recorded {
            received_at_ms: n as i64,
            endpoint: Endpoint::Interaction,
            params: vec![("sessionId", id.to_owned()), ("adId", "a".repeat(n % 50))],
            outcome: Outcome::Accepted,
            message: None,
            ad_id_verdict: None,
        }
    }

    /// Records an event of ad `ad` carrying these tracking ids.
    fn fired(on: &Inspector, ids: &[(&'static str, &str)], ad: &str) {
        let mut params: Vec<(&'static str, String)> =
            ids.iter().map(|(k, v)| (*k, (*v).to_owned())).collect();
        params.push(("adId", ad.to_owned()));
        on.record(Recorded {
            params,
            ..ev("unused", 0)
        });
    }

    #[test]
    fn sampling_settings_parse() {
        assert_eq!(Sampling::parse("off"), Ok(Sampling::Off));
        assert_eq!(Sampling::parse("ON"), Ok(Sampling::On));
        assert_eq!(Sampling::parse("0.25"), Ok(Sampling::Fraction(0.25)));
        assert!(Sampling::parse("2").is_err());
        assert!(Sampling::parse("-0.1").is_err());
        assert!(Sampling::parse("sometimes").is_err());
    }

    #[test]
    fn off_keeps_nothing_and_a_ring_keeps_the_latest() {
        let off = Inspector::new(Sampling::Off, 10, 1 << 20);
        off.record(ev("s", 1));
        assert!(!off.enabled());
        assert!(off.events("s").is_empty());
        let on = Inspector::new(Sampling::On, 3, 1 << 20);
        for n in 0..5 {
            on.record(ev("s", n));
        }
        let kept: Vec<u64> = on.events("s").iter().map(|(s, _)| *s).collect();
        assert_eq!(kept, vec![3, 4, 5]);
    }

    /// An erasure drops the id's events wherever they are kept (under its other ids
    /// too), within the namespace asked, and frees their bytes; others stay.
    #[test]
    fn a_forgotten_shopper_leaves_no_event() {
        let on = Inspector::new(Sampling::On, 10, 1 << 20);
        let fire = |ids: &[(&'static str, &str)], ad: &str| fired(&on, ids, ad);
        let acme = "rm2.acme.c.YmFubmVy.1900000000.bm9uY2U.c2ln";
        let zeta = "rm2.zeta.c.YmFubmVy.1900000000.bm9uY2U.c2ln";
        fire(&[("customerId", "x"), ("sessionId", "s-x")], acme);
        fire(&[("customerId", "x")], zeta);
        fire(&[("sessionId", "s-x")], acme);
        fire(&[("customerId", "y")], acme);
        let (_, bytes) = on.usage();
        assert_eq!(on.forget("x", Some("acme")), 1, "acme's event of x");
        assert_eq!(on.events("x").len(), 1, "zeta's stays");
        assert_eq!(on.events("s-x").len(), 1, "the session's own event stays");
        assert_eq!(on.forget("x", None), 1);
        assert!(on.events("x").is_empty());
        assert_eq!(on.events("y").len(), 1);
        let (ids, after) = on.usage();
        assert_eq!(ids, 2, "x's ring is gone; s-x and y stay");
        assert!(after < bytes);
        on.forget("s-x", None);
        on.forget("y", None);
        assert_eq!(on.usage(), (0, 0), "every byte accounted");
    }

    #[test]
    fn both_tracking_ids_find_an_event() {
        let on = Inspector::new(Sampling::On, 3, 1 << 20);
        let mut e = ev("s-1", 1);
        e.params.push(("customerId", "c-1".into()));
        on.record(e);
        assert_eq!(on.events("s-1").len(), 1);
        assert_eq!(on.events("c-1").len(), 1);
    }

    #[test]
    fn other_shoppers_of_a_served_ad_are_counted() {
        let on = Inspector::new(Sampling::On, 10, 1 << 20);
        let fire = |ids: &[(&'static str, &str)], ad: &str| fired(&on, ids, ad);
        fire(&[("sessionId", "s-1"), ("customerId", "c-1")], "ad-x");
        fire(&[("sessionId", "s-2")], "ad-x");
        fire(&[("sessionId", "s-3")], "ad-x");
        fire(&[("sessionId", "s-3")], "ad-y");
        fire(&[("sessionId", "s-1")], "ad-z");
        // c-1 is s-1's own event kept under its other id: not another shopper.
        assert_eq!(on.others_with(&["ad-x", "ad-z"], "s-1", 100), vec![2, 0]);
        assert_eq!(on.others_with(&["ad-x"], "s-1", 1), vec![1], "capped");
        assert_eq!(on.others_with(&["ad-y"], "s-2", 100), vec![1]);
    }

    #[test]
    fn new_ids_are_admitted_at_the_set_rate_and_kept_ids_always() {
        let on = Inspector::new(Sampling::On, 10, 1 << 20);
        assert!(
            (0..5_000).all(|k| on.admits(&format!("free-{k}"))),
            "unlimited by default"
        );
        on.set_new_ids_per_sec(100);
        for k in 0..100 {
            on.record(ev(&format!("id-{k}"), k));
        }
        // The first second's budget of 100 went to ids the test then recorded.
        let fresh = (0..1_000)
            .filter(|k| on.admits(&format!("new-{k}")))
            .count();
        assert!(fresh <= 100, "{fresh} new ids admitted in one second");
        assert!(
            (0..100).all(|k| on.admits(&format!("id-{k}"))),
            "kept ids stay admitted"
        );
        let q = |id: &str| format!("adId=a&sessionId={id}&interactionType=videoPlay");
        assert!(admits_query(&on, &q("id-7")));
        assert!(!Inspector::new(Sampling::Off, 10, 1 << 20).admits("id-7"));
    }

    #[test]
    fn sampling_keeps_whole_ids() {
        let some = Inspector::new(Sampling::Fraction(0.5), 10, 1 << 20);
        let kept = (0..1000)
            .filter(|i| some.samples(&format!("id-{i}")))
            .count();
        assert!((350..650).contains(&kept), "{kept}");
    }

    proptest! {
        /// Whatever arrives, memory stays within the bound and the newest id survives.
        #[test]
        fn bounded_in_bytes(ids in proptest::collection::vec(0u32..500, 1..2_000), budget in 16usize..64) {
            let max = budget * 1024;
            let i = Inspector::new(Sampling::On, 20, max);
            for (n, id) in ids.iter().enumerate() {
                let id = format!("id-{id}");
                i.record(ev(&id, n));
                let (_, bytes) = i.usage();
                // One ring of 20 events may sit on top of a shard's share.
                prop_assert!(bytes <= i.max_bytes() + 20 * 400, "{} > {}", bytes, i.max_bytes());
                prop_assert!(!i.events(&id).is_empty());
            }
        }
    }
}

#[cfg(test)]
mod cost {
    use super::*;

    /// What the inspector costs per beacon, on and off (printed; includes building
    /// each test query, about 0.1 us): `cargo test -p rm-ingest --release inspector_cost -- --nocapture`.
    #[test]
    fn inspector_cost_per_event() {
        let q =
            "adId=rm1.camp-1.YmFubmVy.1795341600.AAAAAAAAAAAAAAAA.sig&interactionType=videoPlay\
                 &timestamp=2026-11-22T10%3A15%3A30.250Z&sessionId=s-000000&videoId=v-1&cb=123";
        for sampling in [Sampling::Off, Sampling::On, Sampling::Fraction(0.01)] {
            let i = Inspector::new(sampling, 200, 32 << 20);
            let n = 200_000u32;
            let started = std::time::Instant::now();
            for k in 0..n {
                let q = q.replace("s-000000", &format!("s-{:06}", k % 50_000));
                if !samples_query(&i, &q) {
                    continue;
                }
                i.record(Recorded {
                    received_at_ms: i64::from(k),
                    endpoint: Endpoint::Interaction,
                    params: params_of(&q),
                    outcome: Outcome::Accepted,
                    message: None,
                    ad_id_verdict: None,
                });
            }
            let per = started.elapsed().as_nanos() as f64 / f64::from(n);
            let (ids, bytes) = i.usage();
            let kept: usize = (0..50_000)
                .map(|k| i.events(&format!("s-{k:06}")).len())
                .sum();
            eprintln!(
                "inspector {sampling:?}: {per:.0} ns/event, {ids} ids, {kept} events, {bytes} bytes"
            );
            assert!(bytes <= i.max_bytes() + 200 * 1024);
        }
    }
}
