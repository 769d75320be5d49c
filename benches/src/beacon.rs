//! Pre-generated beacon requests with a realistic mix of interaction types.
//!
//! Every request must be a distinct event, or the edge's dedup window answers from
//! memory and the benchmark measures the wrong path. Generating a query string per
//! request would put formatting cost in the measurement, so the pool is built once:
//! each [`Template`] is a complete HTTP/1.1 request (valid beacon, its own timestamp,
//! ad, video or product) with a fixed-width 12-digit slot inside `sessionId`. Sending
//! one copies the template and writes a per-run unique sequence number into the slot
//! (a 400-byte copy and 12 digit writes), so no two requests of a run, nor of two
//! runs (the session id also holds a run id), share a dedup key.
//!
//! The mix, per 1000 events: 600 video (creative view 120, play 110, quartiles
//! 90/80/70, complete 60, pause 20, resume 18, skip 16, mute 10, unmute 6), 280
//! product impressions, 60 product clicks, 30 creative clicks, 30 cart changes (with
//! `units`, a third with `conversionValue`). Half carry an `iabConsentString`, 30 % a
//! `customerId`, 10 % a `dtmToken`, and all a `cb` cache-buster, as a VAST player
//! expands `[CACHEBUSTING]`.

/// Path of the interaction beacon on the edge.
pub const BEACON_PATH: &str = "/v1/events/ad/interaction";

/// Width of the sequence-number slot in the session id.
pub const SLOT_WIDTH: usize = 12;

/// What the requests ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UrlKind {
    /// `GET /v1/events/ad/interaction?<distinct beacon>`.
    Beacon,
    /// `GET /` (for baselines that ignore the path).
    Plain,
}

/// One request, ready to send but for its sequence number.
#[derive(Debug, Clone)]
pub struct Template {
    bytes: Vec<u8>,
    slot: Option<usize>,
}

impl Template {
    /// Writes the request with sequence number `seq` into `out` (cleared first).
    pub fn write(&self, seq: u64, out: &mut Vec<u8>) {
        out.clear();
        out.extend_from_slice(&self.bytes);
        if let Some(at) = self.slot {
            write_digits(&mut out[at..at + SLOT_WIDTH], seq);
        }
    }

    /// The same request with its `iabConsentString`, when it has one, set to `consent`
    /// (text a query may hold as it is: a TC string is base64url): a run of real
    /// strings instead of the pool's random ones.
    pub fn with_consent(&self, consent: &str) -> Template {
        const NAME: &[u8] = b"iabConsentString=";
        let Some(at) = self
            .bytes
            .windows(NAME.len())
            .position(|w| w == NAME)
            .map(|i| i + NAME.len())
        else {
            return self.clone();
        };
        let end = self.bytes[at..]
            .iter()
            .position(|&b| b == b'&' || b == b' ')
            .map_or(self.bytes.len(), |i| at + i);
        let mut bytes = self.bytes[..at].to_vec();
        bytes.extend_from_slice(consent.as_bytes());
        bytes.extend_from_slice(&self.bytes[end..]);
        // The slot (in `sessionId`) comes before the consent string.
        Template {
            bytes,
            slot: self.slot.filter(|&s| s < at),
        }
    }

    /// The request with sequence number `seq`, as a new buffer.
    pub fn render(&self, seq: u64) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.bytes.len());
        self.write(seq, &mut out);
        out
    }
}

/// Writes `v` as zero-padded decimal filling `slot` (the lowest digits when it is wider).
fn write_digits(slot: &mut [u8], mut v: u64) {
    for b in slot.iter_mut().rev() {
        *b = b'0' + (v % 10) as u8;
        v /= 10;
    }
}

/// A small deterministic PRNG (SplitMix64): reproducible pools, no dependency.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `[0, n)` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

/// Interaction types and their weight per 1000 events.
const MIX: [(&str, u64); 15] = [
    ("videoCreativeView", 120),
    ("videoPlay", 110),
    ("videoFirstQuartile", 90),
    ("videoMidpoint", 80),
    ("videoThirdQuartile", 70),
    ("videoComplete", 60),
    ("videoPause", 20),
    ("videoResume", 18),
    ("videoSkip", 16),
    ("videoMute", 10),
    ("videoUnmute", 6),
    ("productImpression", 280),
    ("productClick", 60),
    ("creativeClick", 30),
    ("cart", 30),
];

fn pick_type(rng: &mut SplitMix64) -> &'static str {
    let total: u64 = MIX.iter().map(|(_, w)| w).sum();
    let mut r = rng.below(total);
    for (t, w) in MIX {
        if r < w {
            return t;
        }
        r -= w;
    }
    MIX[0].0
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` for `ms` milliseconds since the Unix epoch.
pub fn iso8601_millis(ms: u64) -> String {
    let secs = ms / 1000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        ms % 1000
    )
}

/// A TCF-like consent string: base64url characters, as long as real ones (~120 bytes).
fn consent(rng: &mut SplitMix64) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut s = String::from("CP");
    for _ in 0..118 {
        s.push(ALPHABET[rng.below(64) as usize] as char);
    }
    s
}

/// The query string of one beacon; `slot_marker` stands where the sequence number goes.
fn beacon_query(rng: &mut SplitMix64, run_id: u64, ts_ms: u64, slot_marker: &str) -> String {
    let itype = pick_type(rng);
    let mut q = format!(
        "adId=ad-{:05}&interactionType={itype}&timestamp={}&sessionId=s-{run_id:016x}-{slot_marker}",
        rng.below(5000),
        iso8601_millis(ts_ms),
    );
    if rng.below(10) < 3 {
        q.push_str(&format!("&customerId=c-{:08}", rng.below(10_000_000)));
    }
    if rng.below(10) == 0 {
        q.push_str(&format!("&dtmToken=dtm.{:016x}", rng.next_u64()));
    }
    match itype {
        "productImpression" | "productClick" | "cart" => {
            q.push_str(&format!(
                "&productCode=SKU-{:07}&catalogId=catalog-{:02}",
                rng.below(2_000_000),
                rng.below(20)
            ));
            if itype == "cart" {
                q.push_str(&format!("&units={}", 1 + rng.below(5)));
                if rng.below(3) == 0 {
                    q.push_str(&format!(
                        "&conversionValue={}.{:02}",
                        1 + rng.below(200),
                        rng.below(100)
                    ));
                }
            }
        }
        "creativeClick" => q.push_str(&format!("&creativeId=cr-{:05}", rng.below(20_000))),
        _ => q.push_str(&format!("&videoId=vid-{:06}", rng.below(100_000))),
    }
    if rng.below(2) == 0 {
        q.push_str("&iabConsentString=");
        q.push_str(&consent(rng));
    }
    q.push_str(&format!("&cb={}", rng.below(1_000_000_000)));
    q
}

/// The `User-Agent` requests carry by default.
pub const USER_AGENT: &str = "rm-loadgen/0.1";

/// Builds `n` request templates for `host` (the `Host` header), with [`USER_AGENT`].
///
/// `run_id` goes into every session id so two runs against one edge never collide;
/// `base_ms` is the first event's timestamp (each template is 1-50 ms later than the
/// one before, so timestamps are distinct too).
pub fn pool(kind: UrlKind, host: &str, n: usize, run_id: u64, base_ms: u64) -> Vec<Template> {
    pool_as(kind, host, USER_AGENT, n, run_id, base_ms)
}

/// [`pool`] with another `User-Agent` (a browser's, to time the edge's traffic
/// classification on the agents most beacons carry).
pub fn pool_as(
    kind: UrlKind,
    host: &str,
    user_agent: &str,
    n: usize,
    run_id: u64,
    base_ms: u64,
) -> Vec<Template> {
    let mut rng = SplitMix64::new(run_id ^ 0x5eed);
    let marker = "#".repeat(SLOT_WIDTH);
    let mut ts = base_ms;
    (0..n.max(1))
        .map(|_| {
            ts += 1 + rng.below(50);
            let query = beacon_query(&mut rng, run_id, ts, &marker);
            let target = match kind {
                UrlKind::Beacon => format!("{BEACON_PATH}?{query}"),
                UrlKind::Plain => "/".to_string(),
            };
            let text = format!(
                "GET {target} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: {user_agent}\r\nAccept: image/*,*/*;q=0.8\r\n\r\n"
            );
            let slot = text.find(&marker);
            Template {
                bytes: text.into_bytes(),
                slot,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_dates() {
        assert_eq!(iso8601_millis(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601_millis(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(
            iso8601_millis(1_795_344_930_250),
            "2026-11-22T10:55:30.250Z"
        );
    }

    #[test]
    fn requests_are_distinct_and_well_formed() {
        let p = pool(UrlKind::Beacon, "h:1", 1000, 42, 1_795_344_930_250);
        let a = String::from_utf8(p[7].render(1)).expect("ascii");
        let b = String::from_utf8(p[7].render(2)).expect("ascii");
        assert_ne!(a, b);
        assert!(a.starts_with("GET /v1/events/ad/interaction?adId=ad-"));
        assert!(a.contains("sessionId=s-000000000000002a-000000000001"));
        assert!(a.ends_with("\r\n\r\n"));
        let types: std::collections::HashSet<&str> = p
            .iter()
            .filter_map(|t| {
                let s = std::str::from_utf8(&t.bytes).ok()?;
                let at = s.find("interactionType=")? + 16;
                s[at..].split('&').next()
            })
            .collect();
        assert!(types.len() >= 12, "{types:?}");
        let plain = pool(UrlKind::Plain, "h", 1, 1, 0);
        assert!(plain[0].render(3).starts_with(b"GET / HTTP/1.1\r\n"));
    }

    #[test]
    fn a_real_consent_string_replaces_the_random_one() {
        let p = pool(UrlKind::Beacon, "h:1", 200, 42, 1_795_344_930_250);
        let with = p
            .iter()
            .find(|t| std::str::from_utf8(&t.bytes).is_ok_and(|s| s.contains("iabConsentString")))
            .expect("a beacon with a consent string");
        let a = String::from_utf8(with.with_consent("CQuV9AAQ").render(5)).expect("ascii");
        assert!(a.contains("&iabConsentString=CQuV9AAQ&cb="), "{a}");
        assert!(
            a.contains("sessionId=s-000000000000002a-000000000005"),
            "{a}"
        );
        let without = p
            .iter()
            .find(|t| std::str::from_utf8(&t.bytes).is_ok_and(|s| !s.contains("iabConsentString")))
            .expect("a beacon without");
        assert_eq!(without.with_consent("x").render(1), without.render(1));
    }
}
