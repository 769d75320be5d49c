//! A generator of realistic sessions and the report they must produce, computed
//! independently of the aggregator: the expected numbers are counted while the
//! sessions are generated, from what each simulated player or shopper *did*.
//!
//! Players watch to 25/50/100%, loop (every milestone fired again), seek (a midpoint
//! without a first quartile), pause with rapid toggles; shoppers see and click
//! product tiles (re-fired impressions included) and change carts with absolute
//! units. The beacons are then duplicated and shuffled.
//!
//! Every session is served its own ad, as an ad server does: a genuine realised ad id
//! minted with [`AD_ID_KEY`], so its events are billable and the served-ad rules
//! (one billable event per thing a served ad carries) leave the expectation as it is.
//! The sessions are dated 2026-11-20 and 21 while their ids are minted now, so the
//! services that read them take [`service_env`]: the key, and an ad lifetime of 30 days
//! (an ad served within the late horizon).
#![allow(dead_code, clippy::unwrap_used, missing_docs)]

use std::collections::BTreeMap;

use rm_schemas::ad_id::AdIdKeys;

/// The key the generator's ad ids are signed with (base64url, 24 bytes).
pub const AD_ID_KEY: &str = "c2Vzc2lvbnMtZ2VuZXJhdG9yLWtleS0x";

/// What the edges and aggregators of a test of these sessions need: the generator's
/// signing key, and an ad lifetime that makes its ads served before its sessions.
pub fn service_env() -> [(&'static str, String); 2] {
    [
        ("RM_AD_ID_KEYS", AD_ID_KEY.to_owned()),
        ("RM_API_AD_TTL_SECS", (30 * 86_400).to_string()),
    ]
}

/// A tiny deterministic PRNG (xorshift64*), so a failing seed can be replayed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

pub type Params = Vec<(&'static str, String)>;

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Funnel {
    pub views: u64,
    pub milestones: [u64; 6],
    pub pauses: u64,
    pub resumes: u64,
    pub gaps: u64,
    pub repeats: u64,
}

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Product {
    pub impressions: u64,
    pub clicks: u64,
}

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Cart {
    pub units: u64,
    pub adds: u64,
    pub increments: u64,
    pub decrements: u64,
    pub removals: u64,
}

/// What the reports must say.
#[derive(Debug, Default)]
pub struct Expected {
    /// (campaign, ad, video, day) -> funnel.
    pub funnels: BTreeMap<(String, String, String, String), Funnel>,
    /// (campaign, ad, catalog, product, day) -> counts.
    pub products: BTreeMap<(String, String, String, String, String), Product>,
    /// (tracking, catalog, product) -> cart.
    pub carts: BTreeMap<(String, String, String), Cart>,
}

const MILESTONES: [&str; 6] = [
    "videoCreativeView",
    "videoPlay",
    "videoFirstQuartile",
    "videoMidpoint",
    "videoThirdQuartile",
    "videoComplete",
];

fn ts(day: u32, ms: u64) -> String {
    let s = ms / 1000;
    format!(
        "2026-11-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        (s / 3600) % 24,
        (s / 60) % 60,
        s % 60,
        ms % 1000
    )
}

fn video(ad: &str, video: &str, session: &str, kind: &str, t: String) -> Params {
    vec![
        ("adId", ad.into()),
        ("interactionType", kind.into()),
        ("timestamp", t),
        ("sessionId", session.into()),
        ("videoId", video.into()),
    ]
}

/// Generates `players` viewers and `shoppers` shoppers; returns the beacons in
/// delivery order (duplicated and shuffled) and the expected reports.
pub fn generate(seed: u64, players: usize, shoppers: usize) -> (Vec<Params>, Expected) {
    let mut rng = Rng::new(seed);
    let mut exp = Expected::default();
    let mut beacons: Vec<Params> = Vec::new();
    let keys = AdIdKeys::from_list(AD_ID_KEY).unwrap();
    let expires = chrono::Utc::now().timestamp() + 86_400;
    for p in 0..players {
        let campaign = format!("camp{}", p % 3);
        let vid = format!("vid{}", p % 2);
        let ad = keys.mint(&campaign, &vid, expires).unwrap();
        let session = format!("viewer-{seed}-{p}");
        let day = 20 + (p % 2) as u32;
        let mut t = rng.below(3_600_000) + 3_600_000;
        let f = exp
            .funnels
            .entry((
                campaign,
                ad.clone(),
                vid.clone(),
                format!("2026-11-{day:02}"),
            ))
            .or_default();
        f.views += 1;
        let behaviour = rng.below(5);
        let reach = match behaviour {
            0 => 3, // to 25%
            1 => 4, // to 50%
            _ => 6, // to 100% (2: plain, 3: loop, 4: seek)
        };
        for (i, m) in MILESTONES.iter().enumerate().take(reach) {
            if behaviour == 4 && i == 2 {
                continue; // seek past the first quartile: the player synthesised nothing
            }
            t += 1_000 + rng.below(5_000);
            beacons.push(video(&ad, &vid, &session, m, ts(day, t)));
            f.milestones[i] += 1;
        }
        if behaviour == 4 {
            f.gaps += 1; // midpoint without a first quartile
        }
        if behaviour == 3 {
            // Loop: the player fires the whole funnel again.
            for m in MILESTONES {
                t += 1_000 + rng.below(5_000);
                beacons.push(video(&ad, &vid, &session, m, ts(day, t)));
                f.repeats += 1;
            }
        }
        if rng.chance(50) {
            // Pause with a rapid double toggle (debounced to one), then resume.
            t += 2_000;
            beacons.push(video(&ad, &vid, &session, "videoPause", ts(day, t)));
            beacons.push(video(&ad, &vid, &session, "videoPause", ts(day, t + 150)));
            beacons.push(video(
                &ad,
                &vid,
                &session,
                "videoResume",
                ts(day, t + 4_000),
            ));
            f.pauses += 1;
            f.resumes += 1;
        }
    }
    for s in 0..shoppers {
        let campaign = format!("camp{}", s % 3);
        // A banner with companion products: the id does not list them.
        let ad = keys.mint(&campaign, "banner", expires).unwrap();
        let session = format!("shopper-{seed}-{s}");
        let mut t = rng.below(3_600_000) + 7_200_000;
        for tile in 0..3 {
            let product = format!("sku-{}", (s + tile) % 7);
            let impression: Params = vec![
                ("adId", ad.clone()),
                ("interactionType", "productImpression".into()),
                ("timestamp", ts(21, t)),
                ("customerId", session.clone()),
                ("productCode", product.clone()),
                ("catalogId", "cat-1".into()),
            ];
            beacons.push(impression.clone());
            if rng.chance(30) {
                beacons.push(impression); // a re-render re-fires the same beacon
            }
            let e = exp
                .products
                .entry((
                    campaign.clone(),
                    ad.clone(),
                    "cat-1".into(),
                    product.clone(),
                    "2026-11-21".into(),
                ))
                .or_default();
            e.impressions += 1;
            t += 500;
            if rng.chance(40) {
                beacons.push(vec![
                    ("adId", ad.clone()),
                    ("interactionType", "productClick".into()),
                    ("timestamp", ts(21, t)),
                    ("customerId", session.clone()),
                    ("productCode", product.clone()),
                    ("catalogId", "cat-1".into()),
                ]);
                e.clicks += 1;
                t += 700;
            }
        }
        if rng.chance(60) {
            let product = format!("sku-{}", s % 7);
            let seq: &[u64] = match rng.below(3) {
                0 => &[1, 2, 3, 0],
                1 => &[2, 1],
                _ => &[1, 3],
            };
            let c = exp
                .carts
                .entry((session.clone(), "cat-1".into(), product.clone()))
                .or_default();
            let mut prev = 0;
            for u in seq {
                t += 1_000;
                beacons.push(vec![
                    ("adId", ad.clone()),
                    ("interactionType", "cart".into()),
                    ("timestamp", ts(21, t)),
                    ("customerId", session.clone()),
                    ("productCode", product.clone()),
                    ("catalogId", "cat-1".into()),
                    ("units", u.to_string()),
                    ("conversionValue", format!("{}.25", u * 10)),
                ]);
                match (prev, *u) {
                    (0, _) => c.adds += 1,
                    (p, u) if u > p => c.increments += 1,
                    (_, 0) => c.removals += 1,
                    _ => c.decrements += 1,
                }
                prev = *u;
            }
            c.units = prev;
        }
    }
    // Duplicates (identical re-fires) and out-of-order delivery.
    let n = beacons.len();
    for _ in 0..n / 8 {
        let i = rng.below(n as u64) as usize;
        beacons.push(beacons[i].clone());
    }
    for i in (1..beacons.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        beacons.swap(i, j);
    }
    (beacons, exp)
}

fn mismatches<K: std::fmt::Debug + Ord, V: std::fmt::Debug + PartialEq>(
    what: &str,
    got: &BTreeMap<K, V>,
    want: &BTreeMap<K, V>,
) -> Vec<String> {
    let mut out = Vec::new();
    for (k, w) in want {
        match got.get(k) {
            Some(g) if g == w => {}
            g => out.push(format!("{what} {k:?}: got {g:?}, want {w:?}")),
        }
    }
    for k in got.keys().filter(|k| !want.contains_key(*k)) {
        out.push(format!("{what} {k:?}: unexpected row {:?}", got.get(k)));
    }
    if out.len() > 12 {
        let n = out.len();
        out.truncate(12);
        out.push(format!("... {n} {what} mismatches in all"));
    }
    out
}

/// Checks reports (JSON bodies of the api) against the expectation; returns the
/// differences, empty when equal.
pub fn diff(
    exp: &Expected,
    funnel: &serde_json::Value,
    products: &serde_json::Value,
    carts: &serde_json::Value,
) -> Vec<String> {
    let mut out = Vec::new();
    let s = |v: &serde_json::Value, k: &str| v[k].as_str().unwrap_or_default().to_string();
    let n = |v: &serde_json::Value, k: &str| v[k].as_u64().unwrap_or(u64::MAX);
    let mut got_f = BTreeMap::new();
    for r in funnel["rows"].as_array().cloned().unwrap_or_default() {
        let k = (s(&r, "campaignId"), s(&r, "videoId"), s(&r, "day"));
        let f = Funnel {
            views: n(&r, "views"),
            milestones: [
                n(&r, "creativeViews"),
                n(&r, "plays"),
                n(&r, "firstQuartiles"),
                n(&r, "midpoints"),
                n(&r, "thirdQuartiles"),
                n(&r, "completes"),
            ],
            pauses: n(&r, "pauses"),
            resumes: n(&r, "resumes"),
            gaps: n(&r, "funnelGapViolations"),
            repeats: n(&r, "repeatedMilestoneViolations"),
        };
        let plays = f.milestones[1];
        let rate = r["completionRate"].as_f64().unwrap_or(-1.0);
        let want = if plays == 0 {
            0.0
        } else {
            f.milestones[5] as f64 / plays as f64
        };
        if (rate - want).abs() > 1e-9 {
            out.push(format!("completionRate {rate} != {want} for {k:?}"));
        }
        got_f.insert(k, f);
    }
    // Rows are per creative (the served ads' views summed).
    let mut want_f: BTreeMap<(String, String, String), Funnel> = BTreeMap::new();
    for ((c, _ad, video, day), f) in &exp.funnels {
        let e = want_f
            .entry((c.clone(), video.clone(), day.clone()))
            .or_default();
        e.views += f.views;
        for (m, n) in e.milestones.iter_mut().zip(f.milestones) {
            *m += n;
        }
        e.pauses += f.pauses;
        e.resumes += f.resumes;
        e.gaps += f.gaps;
        e.repeats += f.repeats;
    }
    out.extend(mismatches("funnel", &got_f, &want_f));
    let mut got_p = BTreeMap::new();
    for r in products["rows"].as_array().cloned().unwrap_or_default() {
        let k = (
            s(&r, "campaignId"),
            s(&r, "creativeId"),
            s(&r, "catalogId"),
            s(&r, "productCode"),
            s(&r, "day"),
        );
        // The generator's ad ids are genuine and one per session: every distinct event
        // is billable, exactly once, and nothing may be flagged.
        let flagged = |action: &str, reason: &str| {
            r[format!("invalid{action}")][reason].as_u64().unwrap_or(0)
        };
        for action in ["Impressions", "Clicks"] {
            for reason in [
                "knownBot",
                "nonBrowser",
                "prefetch",
                "unverifiedAdId",
                "beforeServe",
                "productNotInAd",
                "servedAdRepeat",
                "clickWindow",
            ] {
                if flagged(action, reason) != 0 {
                    out.push(format!("{action} flagged {reason} for {k:?}"));
                }
            }
        }
        got_p.insert(
            k,
            Product {
                impressions: n(&r, "impressions"),
                clicks: n(&r, "clicks"),
            },
        );
    }
    // Rows are per creative (the served ads' counts summed).
    let mut want_p: BTreeMap<(String, String, String, String, String), Product> = BTreeMap::new();
    for ((c, ad, cat, p, day), n) in &exp.products {
        let creative = rm_store::model::ad_id_campaign::creative_of(ad);
        let e = want_p
            .entry((c.clone(), creative, cat.clone(), p.clone(), day.clone()))
            .or_default();
        e.impressions += n.impressions;
        e.clicks += n.clicks;
    }
    out.extend(mismatches("product", &got_p, &want_p));
    let mut got_c = BTreeMap::new();
    for r in carts["rows"].as_array().cloned().unwrap_or_default() {
        let k = (
            s(&r, "trackingId"),
            s(&r, "catalogId"),
            s(&r, "productCode"),
        );
        got_c.insert(
            k,
            Cart {
                units: n(&r, "units"),
                adds: n(&r, "adds"),
                increments: n(&r, "increments"),
                decrements: n(&r, "decrements"),
                removals: n(&r, "removals"),
            },
        );
    }
    out.extend(mismatches("cart", &got_c, &exp.carts));
    out
}
