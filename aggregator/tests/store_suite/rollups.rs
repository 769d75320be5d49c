//! Rollups (`rm_store::model::tallies`) on every backend count what the fact reports
//! count: for streams of genuine, expired and forged ad ids, bots, prefetches, copies
//! (better ones later, impressions re-fired earlier), events dated before their ad
//! was served and products their ad did not carry, folded in batches cut anywhere,
//! through crashes after the tallies' write (with and without the served ads' states)
//! and replays from earlier offsets, the tallies per campaign, creative, catalog,
//! product and UTC day equal the products and ads reports' rows summed per creative,
//! reason by reason, with the same worst ad id status; quarter hours add up to their
//! days and creatives to their campaign.
//!
//! Not covered, by design: a copy of a forged ad id's event that the edge let through
//! (no state is kept for ids we did not mint, so the tallies count it again; the
//! generator makes none).

use std::collections::BTreeMap;

use rm_aggregator::batch::{fold_at, Policy, Position};
use rm_aggregator::pipeline::load_sets;
use rm_schemas::ad_id::{product_creative, AdIdKeys};
use rm_schemas::agent::AgentClass;
use rm_schemas::record::UnverifiedAdId;
use rm_schemas::{EventRecord, InteractionEvent, InteractionType as T};
use rm_store::model::ad_id_campaign::creative_of;
use rm_store::model::funnel::FunnelReportRow;
use rm_store::model::parse_day;
use rm_store::model::periods::{self, Granularity, Periods};
use rm_store::model::rollup;
use rm_store::model::status::AdIdStatus;
use rm_store::model::tallies::{Grain, Kind, Metric, Scope, SummedTally, TallyQuery};
use rm_store::model::traffic::InvalidCounts;
use rm_store::BatchWrite;

use super::{all, at, t, Store, D0, TEN};

/// A small deterministic generator (xorshift64*).
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    pub(crate) fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

const MIN: i64 = 60_000;

/// A video view's events.
const VIEW_EVENTS: [T; 9] = [
    T::VideoCreativeView,
    T::VideoPlay,
    T::VideoFirstQuartile,
    T::VideoMidpoint,
    T::VideoThirdQuartile,
    T::VideoComplete,
    T::VideoPause,
    T::VideoResume,
    T::VideoSkip,
];

/// A record as the edge writes it, with its verdict and traffic.
fn record(
    e: InteractionEvent,
    verdict: Option<UnverifiedAdId>,
    bot: bool,
    prefetch: bool,
) -> EventRecord {
    let received = e.timestamp.with_timezone(&chrono::Utc) + chrono::Duration::seconds(2);
    let mut r = EventRecord::new(e, uuid::Uuid::now_v7(), received);
    r.ad_id_verdict = verdict;
    r.agent = Some(if bot {
        AgentClass::KnownBot
    } else {
        AgentClass::Browser
    });
    r.prefetch = prefetch;
    r
}

/// A stream of records in log order, and their positions (3 partitions, records
/// keyed by ad id).
pub(crate) fn stream(seed: u64) -> (Vec<EventRecord>, Vec<Position>) {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let keys = AdIdKeys::new(vec![b"0123456789abcdef-rollups".to_vec()]).expect("key");
    let other = AdIdKeys::new(vec![b"another deployment's key".to_vec()]).expect("key");
    let base = t(D0, TEN);
    let expiry = (base + 30 * MIN) / 1000;
    let mut out: Vec<EventRecord> = Vec::new();
    for i in 0..12u64 {
        let campaign = if i % 2 == 0 { "c1" } else { "c2" };
        let creative = match i % 4 {
            0 => "banner".to_owned(),
            3 => format!("vid-{}", i % 2),
            _ => product_creative(&format!("sku-{}", i % 4)),
        };
        let carried = format!("sku-{}", i % 4);
        let forged = i == 11;
        let ad = if forged {
            other.mint(campaign, &creative, expiry).expect("id")
        } else {
            keys.mint(campaign, &creative, expiry).expect("id")
        };
        let start = base + i64::try_from(i).expect("i") * 7 * MIN;
        let mut impressed = std::collections::BTreeSet::new();
        for n in 0..(4 + rng.below(10)) {
            let shopper = format!("s-{}", rng.below(3));
            let ms = start
                + i64::try_from(n).expect("n") * MIN
                + i64::try_from(rng.below(50_000)).expect("ms");
            let ms = if rng.chance(5) {
                ms - 3 * rm_store::model::DAY_MS
            } else {
                ms
            };
            let kind = match rng.below(8) {
                0 => T::AdImpression,
                1 => T::AdClick,
                2 => T::ProductImpression,
                3 => T::ProductClick,
                4 => T::Cart,
                _ => VIEW_EVENTS[rng.below(VIEW_EVENTS.len() as u64) as usize],
            };
            // An impression's key has no time: a shopper's second one is a copy, which
            // a forged id's would count again (see the header).
            if forged && kind == T::AdImpression && !impressed.insert(shopper.clone()) {
                continue;
            }
            let product = if rng.chance(15) {
                "sku-9".to_owned()
            } else if creative == "banner" {
                format!("sku-{}", rng.below(2))
            } else {
                carried.clone()
            };
            // A view of the ad's video (another one's, for an ad that is no video).
            let video = if creative.starts_with("vid-") {
                creative.clone()
            } else {
                "vid-9".to_owned()
            };
            let with_product = matches!(kind, T::ProductImpression | T::ProductClick | T::Cart);
            let e = InteractionEvent {
                video_id: VIEW_EVENTS.contains(&kind).then_some(video),
                session_id: Some(shopper),
                catalog_id: with_product.then(|| "cat".to_owned()),
                product_code: with_product.then_some(product),
                // A cart line's units now: adds, changes, removals and adds again.
                units: (kind == T::Cart).then(|| rng.below(3)),
                ..InteractionEvent::new(ad.as_str(), kind, at(ms))
            };
            let verdict = if forged {
                Some(UnverifiedAdId::BadSignature)
            } else if rng.chance(10) {
                Some(UnverifiedAdId::Expired)
            } else {
                None
            };
            let (bot, prefetch) = (rng.chance(8), rng.chance(8));
            out.push(record(e.clone(), verdict, bot, prefetch));
            if !forged && rng.chance(30) {
                // A copy later in the log: a browser's after a prefetch's, another
                // verdict, or an impression re-fired earlier (its key has no time).
                let mut copy = e;
                if kind == T::AdImpression && rng.chance(50) {
                    copy.timestamp = at(ms - 20 * MIN);
                }
                let verdict = if rng.chance(50) { None } else { verdict };
                out.push(record(copy, verdict, false, rng.chance(20)));
            }
        }
    }
    // Interleave the ads' records as a log would, keeping each ad's order.
    let mut order: Vec<(u64, usize)> = (0..out.len())
        .map(|i| (rng.below(8) + i as u64 / 6, i))
        .collect();
    order.sort();
    let mut by_ad: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, r) in out.iter().enumerate() {
        by_ad.entry(r.event.ad_id.clone()).or_default().push(i);
    }
    let mut taken: BTreeMap<String, usize> = BTreeMap::new();
    let mut records = Vec::new();
    for (_, i) in order {
        let ad = out[i].event.ad_id.clone();
        let k = taken.entry(ad.clone()).or_default();
        records.push(out[by_ad[&ad][*k]].clone());
        *k += 1;
    }
    let mut next = [0i64; 3];
    let positions = records
        .iter()
        .map(|r| {
            // Keyed as the edge keys them: a cart event by its tracking id.
            let key = String::from_utf8_lossy(r.partition_key()).into_owned();
            let p = (rm_store::model::traffic::shopper_hash(&key) % 3) as usize;
            next[p] += 1;
            (p as i32, next[p] - 1)
        })
        .collect();
    (records, positions)
}

pub(crate) async fn fold_loaded(
    store: &impl Store,
    records: &[EventRecord],
    positions: &[Position],
) -> BatchWrite {
    let mut sets = load_sets(store, records, positions).await.expect("load");
    fold_at(records, Some(positions), &mut sets, &Policy::default()).0
}

/// Folds the stream in batches cut anywhere, with crashes and replays; `compact`:
/// with compactions of the closed hours' tallies between batches, on a compactor's
/// clock that steps through the stream's hours (its ads are served from 10:00 on
/// `D0`; its late records are three days older), so a compaction closes some of
/// `D0`'s hours and later batches change closed hours and days.
async fn ingest(store: &impl Store, seed: u64, compact: bool) {
    let (records, positions) = stream(seed);
    let mut rng = Rng(seed ^ 0xABCD);
    // 11:30 on D0: its hours before 09:00 close (those of the re-fired impressions),
    // then more at each compaction.
    let mut clock = t(D0, TEN + 90 * MIN);
    let mut i = 0;
    while i < records.len() {
        let end = (i + 1 + rng.below(40) as usize).min(records.len());
        let (r, p) = (&records[i..end], &positions[i..end]);
        let w = fold_loaded(store, r, p).await;
        match rng.below(4) {
            0 => {
                // A crash after the tallies were written (ClickHouse inserts them
                // first), the served ads' states perhaps too, not the facts.
                let partial = BatchWrite {
                    tallies: w.tallies.clone(),
                    served: if rng.chance(50) {
                        w.served.clone()
                    } else {
                        Vec::new()
                    },
                    ..BatchWrite::default()
                };
                store.write(&partial).await.expect("write part");
                let replay = fold_loaded(store, r, p).await;
                store.write(&replay).await.expect("write the replay");
            }
            1 => {
                // Written, offsets not committed: replayed from an earlier offset,
                // cut elsewhere.
                store.write(&w).await.expect("write");
                let from = i.saturating_sub(rng.below(30) as usize);
                let mid = (from + end) / 2;
                for (a, b) in [(from, mid), (mid, end)] {
                    if a < b {
                        let replay = fold_loaded(store, &records[a..b], &positions[a..b]).await;
                        assert!(replay.tallies.is_empty(), "a replay moves no tally");
                        store.write(&replay).await.expect("write the replay");
                    }
                }
            }
            _ => store.write(&w).await.expect("write"),
        }
        if compact && rng.chance(40) {
            // No write is in flight: no margin is needed.
            let open = store.compact_tallies_at(clock, 0).await.expect("compact");
            assert!(open.is_some(), "this store compacts");
            clock += i64::try_from(rng.below(60)).expect("minutes") * MIN;
        }
        i = end;
    }
}

/// Where a count lands: campaign, creative, catalog, product, UTC day, kind.
type Key = (String, String, String, String, i32, Kind);

#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct Counts {
    valid: u64,
    invalid: InvalidCounts,
    worst: AdIdStatus,
}

impl Counts {
    fn is_empty(&self) -> bool {
        self.valid == 0 && self.invalid.total() == 0
    }
}

/// The fact reports' rows, summed per creative.
async fn from_reports(store: &impl Store) -> BTreeMap<Key, Counts> {
    let mut out: BTreeMap<Key, Counts> = BTreeMap::new();
    let mut add = |k: Key, valid: u64, invalid: &InvalidCounts, status: AdIdStatus| {
        let c = out.entry(k).or_default();
        c.valid += valid;
        c.invalid.merge(invalid);
        c.worst = c.worst.max(status);
    };
    for r in store.products(&all()).await.expect("products") {
        let day = parse_day(&r.day).expect("day");
        let creative = creative_of(&r.ad_id);
        let k = |kind| {
            (
                r.campaign_id.clone(),
                creative.clone(),
                r.catalog_id.clone(),
                r.product_code.clone(),
                day,
                kind,
            )
        };
        if r.impressions + r.invalid_impressions.total() > 0 {
            add(
                k(Kind::ProductImpression),
                r.impressions,
                &r.invalid_impressions,
                r.ad_id_status,
            );
        }
        if r.clicks + r.invalid_clicks.total() > 0 {
            add(
                k(Kind::ProductClick),
                r.clicks,
                &r.invalid_clicks,
                r.ad_id_status,
            );
        }
    }
    for r in store.ads(&all()).await.expect("ads") {
        let day = parse_day(&r.day).expect("day");
        let creative = creative_of(&r.ad_id);
        let k = |kind| {
            (
                r.campaign_id.clone(),
                creative.clone(),
                String::new(),
                String::new(),
                day,
                kind,
            )
        };
        if r.impressions + r.invalid_impressions.total() > 0 {
            add(
                k(Kind::AdImpression),
                r.impressions,
                &r.invalid_impressions,
                r.ad_id_status,
            );
        }
        if r.clicks + r.invalid_clicks.total() > 0 {
            add(
                k(Kind::AdClick),
                r.clicks,
                &r.invalid_clicks,
                r.ad_id_status,
            );
        }
    }
    out
}

/// Every tally of a scope and grain, all history.
pub(crate) fn everything(scope: Scope, grain: Grain) -> TallyQuery {
    TallyQuery {
        campaigns: None,
        scope,
        grain,
        from: i32::MIN,
        to: i32::MAX,
        kinds: Vec::new(),
        catalog_id: None,
        page: None,
        only: Vec::new(),
        group: rm_store::model::tallies::Group::Each,
    }
}

async fn read(store: &impl Store, scope: Scope, grain: Grain) -> Vec<SummedTally> {
    let q = everything(scope, grain);
    store.tallies(&q).await.expect("tallies").expect("counted")
}

/// The creatives' tallies of a grain: ad events' and product events'.
async fn detail(store: &impl Store, grain: Grain) -> Vec<SummedTally> {
    let mut rows = read(store, Scope::Creative, grain).await;
    let products = read(store, Scope::Product, grain).await;
    assert!(
        rows.iter()
            .all(|s| !s.metric.kind().is_some_and(Kind::is_product))
            && products
                .iter()
                .all(|s| s.metric.kind().is_some_and(Kind::is_product)),
        "ad and product events apart"
    );
    rows.extend(products);
    rows
}

/// The tallies of a scope and grain as report counts, quarters summed into days.
fn as_counts(rows: &[SummedTally]) -> BTreeMap<Key, Counts> {
    let mut out: BTreeMap<Key, Counts> = BTreeMap::new();
    let mut statuses: BTreeMap<Key, AdIdStatus> = BTreeMap::new();
    for s in rows {
        let Some(kind) = s.metric.kind() else {
            continue;
        };
        let (c, cr, cat, prod, day) = text_and_day(&s.place);
        let key = (c, cr, cat, prod, day, kind);
        let n = u64::try_from(s.value).expect("a tally is never negative");
        match s.metric {
            Metric::Events(_, None) => out.entry(key).or_default().valid += n,
            Metric::Events(_, Some(why)) => out.entry(key).or_default().invalid.add(why, n),
            Metric::Status(_, status) if n > 0 => {
                let w = statuses.entry(key).or_default();
                *w = (*w).max(status);
            }
            _ => {}
        }
    }
    for (k, w) in statuses {
        if let Some(c) = out.get_mut(&k) {
            c.worst = w;
        }
    }
    out.retain(|_, c| !c.is_empty());
    out
}

/// A report row's `adIdStatus` covers its impressions and clicks: each count's worst
/// status becomes its row's (the worst of the kinds of its family).
fn row_status(mut m: BTreeMap<Key, Counts>) -> BTreeMap<Key, Counts> {
    let mut worst: BTreeMap<(String, String, String, String, i32, bool), AdIdStatus> =
        BTreeMap::new();
    for ((c, cr, cat, p, day, kind), n) in &m {
        let w = worst
            .entry((
                c.clone(),
                cr.clone(),
                cat.clone(),
                p.clone(),
                *day,
                kind.is_product(),
            ))
            .or_default();
        *w = (*w).max(n.worst);
    }
    for ((c, cr, cat, p, day, kind), n) in m.iter_mut() {
        n.worst = worst[&(
            c.clone(),
            cr.clone(),
            cat.clone(),
            p.clone(),
            *day,
            kind.is_product(),
        )];
    }
    m
}

/// A place's text and its UTC day, to key sums across grains by.
fn text_and_day(p: &rm_store::model::tallies::Place) -> (String, String, String, String, i32) {
    (
        p.campaign_id.to_string(),
        p.creative.to_string(),
        p.catalog_id.to_string(),
        p.product_code.to_string(),
        p.grain.day_of_bucket(p.bucket),
    )
}

/// Each tally of the campaigns', videos' and campaigns' sales' quarter hours, and of
/// their hours, summed per UTC day, is that day's tally, metric by metric and place
/// by place: what the campaign summary and the funnel read in any zone is what they
/// read in UTC.
async fn zoned_quarters_are_days(store: &impl Store, seed: u64) {
    type DayKey = (String, String, String, String, i32, u16);
    let by_day = |rows: Vec<SummedTally>| -> BTreeMap<DayKey, i64> {
        let mut out: BTreeMap<DayKey, i64> = BTreeMap::new();
        for s in rows {
            let (c, cr, cat, prod, day) = text_and_day(&s.place);
            *out.entry((c, cr, cat, prod, day, s.metric.code()))
                .or_default() += s.value;
        }
        out.retain(|_, v| *v != 0);
        out
    };
    let mut counted = 0;
    for scope in Scope::ZONED {
        let days = by_day(read(store, scope, Grain::Day).await);
        let quarters = by_day(read(store, scope, Grain::Quarter).await);
        assert_eq!(
            quarters, days,
            "seed {seed}: {scope:?} quarter hours add up to days"
        );
        assert!(scope.by_hour());
        let hours = by_day(read(store, scope, Grain::Hour).await);
        assert_eq!(hours, days, "seed {seed}: {scope:?} hours add up to days");
        counted += days.len();
    }
    assert!(
        counted > 0,
        "seed {seed}: the stream counts in zoned scopes"
    );
}

/// The property, for one stream; returns a transcript for comparing backends.
/// `reports`: compare with the store's fact reports too (the embedded store; on
/// ClickHouse a merge keeps one of two copies that differ only in traffic class, so
/// its fact reports are compared through the embedded store's transcript instead).
pub(crate) async fn counted_as_the_reports_count(
    store: &impl Store,
    seed: u64,
    reports: bool,
) -> Vec<String> {
    counted(store, seed, reports, false).await
}

/// The property's transcript for one stream folded with compactions between its
/// batches (see [`ingest`]), and once more after the last.
pub(crate) async fn counted_with_compactions(store: &impl Store, seed: u64) -> Vec<String> {
    counted(store, seed, false, true).await
}

/// The property's transcript for one stream written to a store whose `rollups`
/// table the caller made as the previous version did (sorted by campaign first), then
/// converted by the aggregator's start (`backfill_tallies`).
pub(crate) async fn counted_across_a_resort(store: &impl Store, seed: u64) -> Vec<String> {
    ingest(store, seed, false).await;
    store.backfill_tallies().await.expect("backfill re-sorts");
    let mut out = transcript(store, seed, false).await;
    out.extend(super::cart_lines::as_folded(store, seed).await);
    out
}

async fn counted(store: &impl Store, seed: u64, reports: bool, compact: bool) -> Vec<String> {
    assert!(
        !store.backfill_tallies().await.expect("backfill"),
        "a new store is counted when opened"
    );
    Box::pin(ingest(store, seed, compact)).await;
    if compact {
        // Read first with the places the last batches flagged since the last
        // compaction (their closed days read from the partitions), then compacted.
        let flagged = Box::pin(transcript(store, seed, reports)).await;
        store.compact_tallies(0).await.expect("compact");
        let quiet = Box::pin(transcript(store, seed, reports)).await;
        assert_eq!(flagged, quiet, "seed {seed}: flagged and quiet reads agree");
    }
    let mut out = Box::pin(transcript(store, seed, reports)).await;
    // The carts report by key: the lines of the stream, at their latest places.
    out.extend(Box::pin(super::cart_lines::as_folded(store, seed)).await);
    out
}

/// A store the previous version wrote until a crash mid-batch (that batch's tallies
/// written, its served ads' states too, not its facts), then started on this version:
/// `forget` takes away what that version never wrote (the campaigns', videos' and
/// campaigns' sales' quarter hours and the zones' marker). Those quarter hours are
/// unavailable until the aggregator's start counts them (`backfill_zones`); then the
/// batch is replayed and the rest of the stream folded. Returns the store and its
/// transcript, which must be the one of the stream folded by this version alone
/// (each zoned quarter hour adds up to its day in it).
pub(crate) async fn zones_backfilled_mid_stream<S, F, Fut>(
    store: S,
    seed: u64,
    forget: F,
) -> (S, Vec<String>)
where
    S: Store,
    F: FnOnce(S) -> Fut,
    Fut: std::future::Future<Output = S>,
{
    let (records, positions) = stream(seed);
    let cut = records.len() / 2;
    let mut rng = Rng(seed ^ 0x2026);
    let mut i = 0;
    while i < cut {
        let end = (i + 1 + rng.below(40) as usize).min(cut);
        let w = fold_loaded(&store, &records[i..end], &positions[i..end]).await;
        store.write(&w).await.expect("write");
        i = end;
    }
    let end = (cut + 30).min(records.len());
    let w = fold_loaded(&store, &records[cut..end], &positions[cut..end]).await;
    let partial = BatchWrite {
        tallies: w.tallies.clone(),
        served: w.served.clone(),
        ..BatchWrite::default()
    };
    store.write(&partial).await.expect("write part");
    let store = forget(store).await;
    let zoned = everything(Scope::Campaign, Grain::Quarter);
    assert_eq!(
        store.tallies(&zoned).await.expect("read"),
        None,
        "seed {seed}: the quarter hours wait for the zones' backfill"
    );
    assert!(!store.backfill_tallies().await.expect("backfill"));
    assert!(store.backfill_zones().await.expect("the zones' backfill"));
    assert!(!store.backfill_zones().await.expect("once"));
    // The aggregator's start: the crashed batch replayed, then the rest.
    let mut i = cut;
    while i < records.len() {
        let end = (i + 1 + rng.below(40) as usize).min(records.len());
        let w = fold_loaded(&store, &records[i..end], &positions[i..end]).await;
        store.write(&w).await.expect("write");
        i = end;
    }
    let mut out = transcript(&store, seed, false).await;
    out.extend(super::cart_lines::as_folded(&store, seed).await);
    (store, out)
}

/// Checks the store's tallies against its reports (`reports`) and against each other
/// (see [`counted`]); returns the transcript.
pub(crate) async fn transcript(store: &impl Store, seed: u64, reports: bool) -> Vec<String> {
    let days = row_status(as_counts(&detail(store, Grain::Day).await));
    if reports {
        let reports = row_status(from_reports(store).await);
        assert!(
            reports.len() > 10,
            "the stream makes rows: {}",
            reports.len()
        );
        for (k, want) in &reports {
            assert_eq!(days.get(k), Some(want), "seed {seed}: {k:?}");
        }
        assert_eq!(
            days.len(),
            reports.len(),
            "seed {seed}: no tally without a report row"
        );
    }
    let quarters = row_status(as_counts(&detail(store, Grain::Quarter).await));
    assert_eq!(quarters, days, "seed {seed}: quarters add up to days");
    zoned_quarters_are_days(store, seed).await;
    // Pages by key give the whole reports.
    let buckets: Vec<i32> = read(store, Scope::Campaign, Grain::Day)
        .await
        .iter()
        .map(|s| s.place.bucket)
        .collect();
    let (from, to) = (buckets.iter().min(), buckets.iter().max());
    super::pages::read_by_pages_as_whole(store, *from.expect("days"), *to.expect("days")).await;
    super::pages::zones_add_up_to_utc(store, *from.expect("days"), *to.expect("days")).await;
    // Creatives add up to their campaign, reason by reason.
    let mut by_campaign: BTreeMap<(String, i32, Kind), Counts> = BTreeMap::new();
    for ((c, _, _, _, day, kind), n) in &as_counts(&detail(store, Grain::Day).await) {
        let e = by_campaign.entry((c.clone(), *day, *kind)).or_default();
        e.valid += n.valid;
        e.invalid.merge(&n.invalid);
        e.worst = e.worst.max(n.worst);
    }
    let campaigns: BTreeMap<(String, i32, Kind), Counts> =
        as_counts(&read(store, Scope::Campaign, Grain::Day).await)
            .into_iter()
            .map(|((c, _, _, _, day, kind), n)| ((c, day, kind), n))
            .collect();
    assert_eq!(
        campaigns, by_campaign,
        "seed {seed}: campaigns are their creatives' sums"
    );
    // The video funnel: the stored views' rows summed per creative, and per campaign.
    let views = views_of_tallies(store, Scope::Video).await;
    if reports {
        let want = views_of_reports(store).await;
        assert!(want.len() > 1, "the stream makes views: {}", want.len());
        assert_eq!(views, want, "seed {seed}: the funnel's tallies");
    }
    let mut by_campaign_views: BTreeMap<(String, String, String), FunnelReportRow> =
        BTreeMap::new();
    for ((c, _, day), r) in &views {
        merge(
            by_campaign_views
                .entry((c.clone(), String::new(), day.clone()))
                .or_insert_with(|| empty_funnel(c, "", day)),
            r,
        );
    }
    assert_eq!(
        views_of_tallies(store, Scope::Campaign).await,
        by_campaign_views
            .into_iter()
            .map(|(k, r)| (k, r.finish()))
            .collect(),
        "seed {seed}: a campaign's views are its creatives'"
    );
    // Cart adds: the campaign tallies equal the adds of the stored cart lines.
    let adds = cart_adds_of_tallies(store).await;
    if reports {
        let want = cart_adds_of_reports(store).await;
        assert!(!want.is_empty(), "the stream adds to carts");
        assert_eq!(adds, want, "seed {seed}: cart adds");
    }
    // Carts per campaign and product: the lines' tallies equal the facts' rollup.
    let cart_campaigns = rm_store::sums::cart_campaign_report(store, &all())
        .await
        .expect("cart campaigns");
    if reports {
        let want = store.cart_campaigns(&all()).await.expect("cart campaigns");
        assert!(
            want.iter().any(|r| r.carts_added > 0),
            "the stream adds to carts"
        );
        assert_eq!(cart_campaigns, want, "seed {seed}: carts per campaign");
    }
    // Billable clicks as spend reads them.
    let spend = rm_store::billable_clicks(store, None)
        .await
        .expect("spend")
        .expect("counted");
    for d in &spend {
        let want = by_campaign
            .get(&(d.campaign_id.clone(), d.day, Kind::AdClick))
            .map_or(0, |c| c.valid);
        assert_eq!(u64::try_from(d.value).expect("count"), want);
    }
    days.iter()
        .map(|(k, c)| format!("{k:?} {} {} {:?}", c.valid, c.invalid.total(), c.worst))
        .chain(views.iter().map(|(k, r)| format!("{k:?} {r:?}")))
        .chain(adds.iter().map(|(k, n)| format!("{k:?} {n:?}")))
        .chain(cart_campaigns.iter().map(|r| format!("{r:?}")))
        .collect()
}

/// Cart adds (valid, invalid) per campaign and UTC day.
type CartAdds = BTreeMap<(String, String), (u64, u64)>;

/// The cart adds the store's fact report counts.
pub(crate) async fn cart_adds_of_reports(store: &impl Store) -> CartAdds {
    store
        .cart_adds(&all())
        .await
        .expect("cart adds")
        .into_iter()
        .map(|r| {
            (
                (r.campaign_id, r.day),
                (r.carts_added, r.invalid_carts_added),
            )
        })
        .collect()
}

/// The cart adds of the campaign tallies.
pub(crate) async fn cart_adds_of_tallies(store: &impl Store) -> CartAdds {
    let summed = read(store, Scope::Campaign, Grain::Day).await;
    let days: Vec<i32> = summed.iter().map(|s| s.place.bucket).collect();
    let (Some(from), Some(to)) = (days.iter().min(), days.iter().max()) else {
        return CartAdds::new();
    };
    let utc = periods::zone("UTC").expect("UTC");
    let periods = Periods::new(utc, Granularity::Day, *from, *to);
    rollup::cart_adds_rows(&summed, &periods)
        .into_iter()
        .map(|r| {
            (
                (r.campaign_id, r.day),
                (r.carts_added, r.invalid_carts_added),
            )
        })
        .collect()
}

pub(crate) type ViewRows = BTreeMap<(String, String, String), FunnelReportRow>;

fn empty_funnel(campaign: &str, video: &str, day: &str) -> FunnelReportRow {
    let mut r = FunnelReportRow::new(campaign.to_owned(), String::new(), video.to_owned(), 0);
    r.day = day.to_owned();
    r.period_start = format!("{day}T00:00:00Z");
    r
}

/// Adds a funnel row's counts to another's.
fn merge(to: &mut FunnelReportRow, r: &FunnelReportRow) {
    to.views += r.views;
    to.creative_views += r.creative_views;
    to.plays += r.plays;
    to.first_quartiles += r.first_quartiles;
    to.midpoints += r.midpoints;
    to.third_quartiles += r.third_quartiles;
    to.completes += r.completes;
    to.skips += r.skips;
    to.pauses += r.pauses;
    to.resumes += r.resumes;
    to.mutes += r.mutes;
    to.unmutes += r.unmutes;
    to.funnel_gap_violations += r.funnel_gap_violations;
    to.repeated_milestone_violations += r.repeated_milestone_violations;
    to.invalid_views += r.invalid_views;
    to.invalid_plays += r.invalid_plays;
    to.ad_id_status = to.ad_id_status.max(r.ad_id_status);
}

/// The funnel fact report's rows (per served ad) summed per creative and UTC day.
pub(crate) async fn views_of_reports(store: &impl Store) -> ViewRows {
    let mut out = ViewRows::new();
    for r in store.funnel(&all()).await.expect("funnel") {
        merge(
            out.entry((r.campaign_id.clone(), r.video_id.clone(), r.day.clone()))
                .or_insert_with(|| empty_funnel(&r.campaign_id, &r.video_id, &r.day)),
            &r,
        );
    }
    out.into_iter().map(|(k, r)| (k, r.finish())).collect()
}

/// The views' tallies of a scope as funnel rows per UTC day.
pub(crate) async fn views_of_tallies(store: &impl Store, scope: Scope) -> ViewRows {
    let summed = read(store, scope, Grain::Day).await;
    let days: Vec<i32> = summed
        .iter()
        .filter(|s| matches!(s.metric, Metric::View(_)))
        .map(|s| s.place.bucket)
        .collect();
    let (Some(from), Some(to)) = (days.iter().min(), days.iter().max()) else {
        return ViewRows::new();
    };
    let utc = periods::zone("UTC").expect("UTC");
    let periods = Periods::new(utc, Granularity::Day, *from, *to);
    rollup::funnel_rows(&summed, &periods)
        .into_iter()
        .map(|r| {
            (
                (r.campaign_id.clone(), r.video_id.clone(), r.day.clone()),
                r,
            )
        })
        .collect()
}
