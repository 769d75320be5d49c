//! Folding a batch of log records into store writes (between step 5 and step 7).
//!
//! For every entity a record touches, the entity's current set of facts is taken
//! from the cache or the store, the record's fact is added (a fact already in the set
//! changes nothing), and the entity's derived rows are recomputed from the whole set.
//! The write therefore carries, per touched entity, its complete fact set and rows
//! that are a function of it: writing it twice, or after a crash, is harmless.
//!
//! Late events: an event is placed on the day of its own `timestamp`. One whose
//! timestamp is more than `late_horizon` before the edge received it, or more than
//! `future_skew` after, is not aggregated (counted as dropped by reason): the decision
//! uses the record's `receivedAt`, so replays decide the same way.
//!
//! Ad impressions and ad clicks (the edge's impression and click endpoints) are stored
//! as [`AdFact`]s, one row per distinct copy, resolved when read (see
//! [`rm_store::model::ads`]). Every fact keeps its record's `adIdVerdict` as an
//! [`AdIdStatus`] (see [`rm_store::model::status`]); unverified events are counted
//! by verdict in [`FoldStats::unverified`].
//!
//! Product and ad facts also keep the traffic class the edge decided (`agent`,
//! `prefetch`: [`TrafficClass`]), the shopper and the receive time, which the reports
//! need to flag invalid traffic by reason and to apply the click window
//! ([`rm_store::model::traffic`]); invalid events are counted by reason in
//! [`FoldStats::invalid`].
//!
//! **One served ad, one billable event per thing it carries** ([`rm_store::model::served`]):
//! ad impressions, ad clicks, product impressions and product clicks of valid traffic
//! whose ad id verified are judged as they arrive, against the state kept per
//! realised ad id (loaded from the store, cached, written with the batch): an event
//! dated before its ad was served, a product its product ad did not carry, or any
//! event after the one that took its unit is stored with that decision as its class
//! (`before_serve`, `product_not_in_ad`, `served_ad_repeat`) and counted invalid by
//! reason; an ad id seen with a second shopper is counted ([`FoldStats::shared_ads`]).
//! A served ad's video view of each creative is its first eligible viewer's: every
//! other view of it (another tracking id's, or one none of whose events was eligible)
//! is derived as a repeat (`ViewRow::served_repeat`), counted beside the funnel. So a
//! view's row changes only with its own records.
//! Records are keyed by ad id, so one consumer holds each ad id's state.
//!
//! **Tallies** ([`rm_store::model::tallies`]): every distinct ad and product event
//! counts, once judged, in the tallies of its campaign and creative (per day and
//! quarter hour) under its reason (or billable) and its ad id's status, in the log
//! partition of its record, unless the tally's stamp shows the record was applied
//! before (a replay). The served ad of a genuine ad id (verified or only expired)
//! remembers how each of its distinct events counts ([`ServedAd::judge`]), so a copy
//! moves nothing unless it is a better one (a browser's after a prefetch's, an
//! earlier impression): then the event moves from where it counted to where it counts
//! now. An ad id that is not genuine has no state: each of its records counts (a copy
//! the edge let through counts again; such ids are forged, and counted invalid). The
//! batch writes the tallies it moved, absolute and stamped. Folded without positions
//! ([`fold`], tests), nothing is tallied.
//!
//! Carts belong to the namespace of their genuine ad id (verified, or only expired):
//! the cart line's catalog is stored scoped by it (`rm_schemas::namespace::scoped`; a
//! forged or foreign ad id's cart events go to a line no namespace reads), so no
//! namespace's cart event can move another's cart.
//!
//! Product impressions, product clicks and creative clicks of valid traffic whose ad
//! id verified and that the served-ad rules let through are also stored as
//! attribution touches (one per shopper id, keyed by shopper and dedup key; an
//! unverified or expired ad id, a bot, a non-browser, a prefetch, an event dated
//! before its ad was served, a product its ad did not carry or a served ad's repeat
//! never credits an order). Orders and the touches offered to them are folded by
//! [`crate::sales`]; [`fold_orders`] (the order lines of records not yet stored) is
//! what the store suites write orders with.

use std::collections::{HashMap, HashSet};

use rm_schemas::agent::InvalidReason;
use rm_schemas::order::OrderRecord;
use rm_schemas::record::UnverifiedAdId;
use rm_schemas::{EventRecord, InteractionType};

use rm_store::model::ad_id_campaign::{campaign_of, campaign_str, creative_of};
use rm_store::model::ads::{AdAction, AdFact};
use rm_store::model::attribution::{self, OrderLine};
use rm_store::model::carts::lines::{self, LinePlace};
use rm_store::model::carts::{self, CartFact, CartKey};
use rm_store::model::day_of;
use rm_store::model::funnel::{self, ViewFact, ViewKey, ViewRow};
use rm_store::model::products::{ProductAction, ProductFact, ProductGroup};
use rm_store::model::served::{self, ServeRules, ServedAd, Take, Unit};
use rm_store::model::status::AdIdStatus;
use rm_store::model::tallies::carts as carts_t;
use rm_store::model::tallies::moves::{self, Event, Judged};
use rm_store::model::tallies::{views, Grain, Kind, Metric, Place};
use rm_store::model::traffic::{shopper_hash, TrafficClass};
use rm_store::{BatchWrite, EntitySets, FastMap, FastSet};

/// Default of `--late-horizon-hours` (30 days).
pub const DEFAULT_LATE_HORIZON_HOURS: i64 = 720;
/// Default of `--future-skew-hours`.
pub const DEFAULT_FUTURE_SKEW_HOURS: i64 = 24;

/// Aggregation policy.
#[derive(Debug, Clone, Copy)]
pub struct Policy {
    /// Repeats of one control closer than this merge (rule 2).
    pub debounce_ms: i64,
    /// Events older than this at receipt are dropped.
    pub late_horizon_ms: i64,
    /// Events dated further than this after receipt are dropped.
    pub future_skew_ms: i64,
    /// The ads' lifetime (`RM_API_AD_TTL_SECS`), ms: an ad was served at its id's
    /// expiry minus this.
    pub ad_ttl_ms: i64,
    /// Served ads whose id expired before these Unix seconds may have had their state
    /// forgotten (the pipeline sets it from the clock and
    /// `RM_AGGREGATOR_SERVED_RETENTION_HOURS`): their events count as repeats, so a
    /// forgotten state never lets a unit be billed twice. `None`: no cutoff.
    pub forgotten_before: Option<i64>,
    /// The attribution windows orders are credited with as they arrive
    /// (`crate::sales`).
    pub windows: rm_store::model::attribution::Windows,
}

impl Policy {
    /// The rules a served ad's events are judged by.
    pub fn serve_rules(&self) -> ServeRules {
        ServeRules {
            ad_ttl_ms: self.ad_ttl_ms,
            skew_ms: self.future_skew_ms,
        }
    }
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            debounce_ms: rm_schemas::video_funnel::DEFAULT_DEBOUNCE_MS,
            late_horizon_ms: DEFAULT_LATE_HORIZON_HOURS * 3_600_000,
            future_skew_ms: DEFAULT_FUTURE_SKEW_HOURS * 3_600_000,
            ad_ttl_ms: rm_schemas::ad_id::DEFAULT_TTL_SECS * 1000,
            forgotten_before: None,
            windows: rm_store::model::attribution::Windows::default(),
        }
    }
}

/// Default of `--aggregator-served-retention-hours`: how long after its ad id expired
/// a served ad's state is kept.
pub const DEFAULT_SERVED_RETENTION_HOURS: i64 = 48;

/// Why an event was not aggregated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dropped {
    /// Older than the late horizon at receipt.
    TooLate,
    /// Dated in the future beyond the skew.
    Future,
}

/// Counts of what a batch did, for metrics.
#[derive(Debug, Default, Clone)]
pub struct FoldStats {
    /// Events aggregated, by type.
    pub by_type: HashMap<InteractionType, u64>,
    /// Events already in their entity's set.
    pub duplicates: u64,
    /// Events not aggregated, by reason.
    pub dropped: HashMap<Dropped, u64>,
    /// Events aggregated whose ad id did not verify, by verdict.
    pub unverified: HashMap<UnverifiedAdId, u64>,
    /// Events aggregated that are invalid traffic, by reason (the click window is
    /// decided when reports are read, so it is not among them).
    pub invalid: HashMap<InvalidReason, u64>,
    /// Events the served-ad rules judged invalid, by the class they got
    /// (`Repeat`, `BeforeServe`, `NotInAd`).
    pub decided: HashMap<TrafficClass, u64>,
    /// Ad ids seen with a second distinct shopper in this batch.
    pub shared_ads: u64,
    /// Records that moved tallies (a replayed record at or below the stamps, or a
    /// copy that changes nothing, is not among them).
    pub tallied: u64,
    /// Billable ad clicks the batch tallied (what spend reads).
    pub tallied_clicks: u64,
}

/// The entities a batch touches.
#[derive(Debug, Default)]
pub struct Touched {
    /// Views.
    pub views: FastSet<ViewKey>,
    /// Cart lines.
    pub carts: FastSet<CartKey>,
    /// Served ads (realised ad ids) whose billable events are decided.
    pub served: FastSet<String>,
    /// Places whose tallies the batch may move (their own; see [`copy_places`]), and
    /// its partitions' progress ([`Place::progress`]).
    pub places: FastSet<Place>,
}

/// Where a record is in the log: its partition (`-1`: the embedded log) and offset.
pub type Position = (i32, i64);

/// What kind of distinct event a record is, when tallies count it.
fn tally_kind(r: &EventRecord) -> Option<Kind> {
    match r.event.interaction_type {
        InteractionType::AdImpression => Some(Kind::AdImpression),
        InteractionType::AdClick => Some(Kind::AdClick),
        InteractionType::ProductImpression => Some(Kind::ProductImpression),
        InteractionType::ProductClick => Some(Kind::ProductClick),
        _ => None,
    }
}

/// Where a record's event counts (`creative`: its ad id's, [`creative_of`]).
fn tally_event<'a>(r: &'a EventRecord, kind: Kind, creative: &'a str) -> Event<'a> {
    let e = &r.event;
    Event {
        kind,
        campaign_id: campaign_str(&e.ad_id),
        creative,
        catalog_id: e.catalog_id.as_deref().unwrap_or_default(),
        product_code: e.product_code.as_deref().unwrap_or_default(),
    }
}

/// The entities a batch touches, and the places whose tallies it may move (records
/// at `positions`), apart from those of earlier copies ([`copy_places`]).
pub fn touched_at(records: &[EventRecord], positions: &[Position]) -> Touched {
    let mut t = touched(records);
    t.places.extend(progress_places(positions));
    // A view's places once per (campaign, video, day, partition), not per record.
    let mut view_places: FastSet<(&str, &str, i32, i32)> = FastSet::default();
    for (r, (partition, _)) in records.iter().zip(positions) {
        let time_ms = r.event.timestamp.timestamp_millis();
        if let Some(kind) = tally_kind(r) {
            let creative = creative_of(&r.event.ad_id);
            let e = tally_event(r, kind, &creative);
            t.places.extend(moves::places(&e, time_ms, *partition));
        } else if r.event.interaction_type == InteractionType::Cart {
            if let Entity::Cart(line) = entity(r) {
                t.places.extend(carts_t::places(
                    &line,
                    campaign_str(&r.event.ad_id),
                    time_ms,
                    *partition,
                ));
            }
        } else if is_view(r.event.interaction_type) {
            let e = &r.event;
            view_places.insert((
                campaign_str(&e.ad_id),
                e.video_id.as_deref().unwrap_or_default(),
                Grain::Quarter.bucket(time_ms),
                *partition,
            ));
        }
    }
    for (campaign, video, quarter, partition) in view_places {
        let at = Grain::Quarter.start_ms(quarter);
        t.places
            .extend(views::places_at(campaign, video, at, partition));
    }
    t
}

/// The progress places of the partitions of `positions` (each once).
pub fn progress_places(positions: &[Position]) -> Vec<Place> {
    let mut out: Vec<Place> = Vec::new();
    for &(partition, _) in positions {
        if !out.iter().any(|p| p.partition == partition) {
            out.push(Place::progress(partition));
        }
    }
    out
}

/// Whether a record's event belongs to a video view ([`entity`]): a milestone or a
/// control.
fn is_view(t: InteractionType) -> bool {
    t.funnel_step().is_some() || t.is_video_control()
}

/// The partition of each entity key (`key` of a record, `None`: not that entity's
/// record) the batch's records name: an entity's records share one partition.
fn partition_by<'a>(
    records: &'a [EventRecord],
    positions: &[Position],
    key: impl Fn(&'a EventRecord) -> Option<&'a str>,
) -> FastMap<&'a str, i32> {
    records
        .iter()
        .zip(positions)
        .filter_map(|(r, (p, _))| Some((key(r)?, *p)))
        .collect()
}

/// The places of the cart lines' stored events (any of them may be an add, or stop
/// being one when an earlier event arrives): known once the lines are loaded.
pub fn cart_places(
    records: &[EventRecord],
    positions: &[Position],
    carts: &rm_store::FastMap<CartKey, Vec<CartFact>>,
) -> Vec<Place> {
    if carts.is_empty() {
        return Vec::new();
    }
    let partition_of = partition_by(records, positions, |r| {
        (r.event.interaction_type == InteractionType::Cart).then(|| r.event.tracking_id())
    });
    let mut at: FastSet<(&CartKey, &str, i32, i32)> = FastSet::default();
    for (k, facts) in carts {
        let Some(p) = partition_of.get(k.tracking_id.as_str()) else {
            continue;
        };
        for f in facts {
            let quarter = Grain::Quarter.bucket(f.time_ms);
            at.insert((k, f.campaign_id.as_str(), quarter, *p));
        }
    }
    at.into_iter()
        .flat_map(|(k, c, q, p)| carts_t::places(k, c, Grain::Quarter.start_ms(q), p))
        .collect()
}

/// The places of the views' rows as stored (the day of each view's earliest event,
/// which a record of an earlier day moves the view from): known once the views'
/// facts are loaded.
pub fn view_places(
    records: &[EventRecord],
    positions: &[Position],
    views: &rm_store::FastMap<ViewKey, Vec<ViewFact>>,
) -> Vec<Place> {
    if views.is_empty() {
        return Vec::new();
    }
    let partition_of = partition_by(records, positions, |r| {
        is_view(r.event.interaction_type).then_some(r.event.ad_id.as_str())
    });
    let mut at: FastSet<(&str, &str, i64, i32)> = FastSet::default();
    for (k, facts) in views {
        let (Some(first), Some(p)) = (
            facts.iter().map(|f| f.time_ms).min(),
            partition_of.get(k.ad_id.as_str()),
        ) else {
            continue;
        };
        let first = Grain::Quarter.start_ms(Grain::Quarter.bucket(first));
        at.insert((campaign_str(&k.ad_id), &k.video_id, first, *p));
    }
    at.into_iter()
        .flat_map(|(c, v, first, p)| views::places_at(c, v, first, p))
        .collect()
}

/// The places of earlier copies the batch's records may move their events from: an
/// event its served ad remembers at another time (an impression re-fired with another
/// timestamp keeps the earliest). Known once the served ads' states are loaded.
pub fn copy_places(
    records: &[EventRecord],
    positions: &[Position],
    served: &rm_store::FastMap<String, ServedAd>,
) -> Vec<Place> {
    let mut out = Vec::new();
    for (r, (partition, _)) in records.iter().zip(positions) {
        let Some(kind) = tally_kind(r) else { continue };
        let Some(counted) = served
            .get(r.event.ad_id.as_str())
            .and_then(|s| s.counted(r.dedup_key.0))
        else {
            continue;
        };
        if counted.time_ms != r.event.timestamp.timestamp_millis() {
            let creative = creative_of(&r.event.ad_id);
            let e = tally_event(r, kind, &creative);
            out.extend(moves::places(&e, counted.time_ms, *partition));
        }
    }
    out
}

/// The entities a batch touches.
pub fn touched(records: &[EventRecord]) -> Touched {
    let mut t = Touched::default();
    for r in records {
        match entity(r) {
            Entity::View(k) => {
                if !t.served.contains(k.ad_id.as_str()) {
                    t.served.insert(k.ad_id.clone());
                }
                t.views.insert(k);
            }
            Entity::Cart(k) => {
                t.carts.insert(k);
            }
            Entity::Product(_) | Entity::Ad(_) => {
                if !t.served.contains(r.event.ad_id.as_str()) {
                    t.served.insert(r.event.ad_id.clone());
                }
            }
            Entity::None => {}
        }
    }
    t
}

enum Entity {
    View(ViewKey),
    Cart(CartKey),
    Product(ProductAction),
    Ad(AdAction),
    None,
}

fn entity(r: &EventRecord) -> Entity {
    let e = &r.event;
    let s = |o: &Option<String>| o.clone().unwrap_or_default();
    match e.interaction_type {
        InteractionType::ProductImpression => Entity::Product(ProductAction::Impression),
        InteractionType::ProductClick => Entity::Product(ProductAction::Click),
        InteractionType::Cart => Entity::Cart(CartKey {
            tracking_id: e.tracking_id().to_owned(),
            catalog_id: rm_schemas::namespace::scoped(cart_namespace(r), &s(&e.catalog_id)),
            product_code: s(&e.product_code),
        }),
        // Ad impressions and clicks (the edge's own endpoints) are ad facts, not views.
        InteractionType::AdImpression => Entity::Ad(AdAction::Impression),
        InteractionType::AdClick => Entity::Ad(AdAction::Click),
        InteractionType::CreativeClick => Entity::None,
        _ => Entity::View(ViewKey {
            ad_id: e.ad_id.clone(),
            video_id: s(&e.video_id),
            tracking_id: e.tracking_id().to_owned(),
        }),
    }
}

/// The namespace a cart event's line belongs to: its ad id's, once the id is known
/// genuine (it verified, or only expired: a shopper's later cart change keeps its
/// line); a forged or foreign one's line is scoped by [`UNVERIFIED_CARTS`], which no
/// namespace reads (not a valid namespace id).
fn cart_namespace(r: &EventRecord) -> &str {
    match r.ad_id_verdict {
        None | Some(UnverifiedAdId::Expired) => rm_schemas::ad_id::namespace_of(&r.event.ad_id)
            .unwrap_or(rm_schemas::namespace::DEFAULT),
        Some(UnverifiedAdId::BadSignature | UnverifiedAdId::Foreign) => UNVERIFIED_CARTS,
    }
}

/// The scope of cart lines of unverified ad ids (see [`cart_namespace`]).
pub const UNVERIFIED_CARTS: &str = "~unverified";

/// The served-ad unit of a product or ad event.
fn unit_of(r: &EventRecord) -> Option<Unit<'_>> {
    let e = &r.event;
    let (c, p) = (
        e.catalog_id.as_deref().unwrap_or_default(),
        e.product_code.as_deref().unwrap_or_default(),
    );
    match e.interaction_type {
        InteractionType::AdImpression => Some(Unit::AdImpression),
        InteractionType::AdClick => Some(Unit::AdClick),
        InteractionType::ProductImpression => Some(Unit::ProductImpression(c, p)),
        InteractionType::ProductClick => Some(Unit::ProductClick(c, p)),
        _ => None,
    }
}

/// The class of an event as the served-ad rules decide it: the edge's class, unless
/// the event is valid traffic with a verified ad id (`ad`: its parsed id), which the
/// stateless rules and then its served ad's state judge (taking the unit when it is
/// the first); and what its claim on its unit found, when it made one.
fn decide(
    r: &EventRecord,
    ad: Option<&rm_schemas::ad_id::AdId>,
    edge_class: TrafficClass,
    status: AdIdStatus,
    time_ms: i64,
    state: Option<&mut ServedAd>,
    policy: &Policy,
) -> (TrafficClass, Option<Take>) {
    if edge_class != TrafficClass::Valid {
        return (edge_class, None);
    }
    if !status.is_billable() {
        // Its reason is its ad id; but a copy of a repeat must stay a repeat, or the
        // best of its copies' status and class could make it billable.
        let class = match (state, unit_of(r)) {
            (Some(state), Some(unit)) if state.taken_by_another(unit, r.dedup_key.0) => {
                TrafficClass::Repeat
            }
            _ => edge_class,
        };
        return (class, None);
    }
    let product = match r.event.interaction_type {
        InteractionType::ProductImpression | InteractionType::ProductClick => {
            r.event.product_code.as_deref()
        }
        _ => None,
    };
    if let Some(class) = served::stateless(ad, time_ms, product, policy.serve_rules()) {
        return (class, None);
    }
    // Aggregated long after its ad expired (a lag beyond the retention): the served
    // ad's state may be gone, so nothing of it can be billed again.
    if let (Some(ad), Some(before)) = (ad, policy.forgotten_before) {
        if ad.expires_at < before {
            return (TrafficClass::Repeat, None);
        }
    }
    match (state, unit_of(r)) {
        (Some(state), Some(unit)) => {
            let take = state.claim(unit, r.dedup_key.0);
            let class = match take {
                Take::New | Take::Copy => TrafficClass::Valid,
                Take::Repeat => TrafficClass::Repeat,
            };
            (class, Some(take))
        }
        _ => (TrafficClass::Valid, None),
    }
}

/// A view's row from its facts: a repeat unless it took its served ad's view of its
/// creative with one of them (see the module header).
fn view_row(
    k: &ViewKey,
    facts: &[ViewFact],
    served: &rm_store::FastMap<String, ServedAd>,
    policy: &Policy,
) -> ViewRow {
    let mut row = funnel::derive_view(k.clone(), campaign_of(&k.ad_id), facts, policy.debounce_ms);
    let viewer = shopper_hash(&k.tracking_id);
    row.served_repeat = !served
        .get(&k.ad_id)
        .and_then(|s| s.view_taken_by(&k.video_id, viewer))
        .is_some_and(|by| by.is_none_or(|e| facts.iter().any(|f| f.dedup_key as u64 == e)));
    row
}

/// The state of served ad `ad_id`, a new one when absent (the id is copied only then).
fn served_state<'a>(
    served: &'a mut rm_store::FastMap<String, ServedAd>,
    ad_id: &str,
) -> &'a mut ServedAd {
    if !served.contains_key(ad_id) {
        served.insert(ad_id.to_owned(), ServedAd::default());
    }
    served.get_mut(ad_id).expect("inserted above")
}

/// Adds `ad_id` to `set` (copied only when absent).
fn mark(set: &mut FastSet<String>, ad_id: &str) {
    if !set.contains(ad_id) {
        set.insert(ad_id.to_owned());
    }
}

/// Folds `records` into `sets` (which must hold the current fact set of every touched
/// entity, empty when new, and the state of every touched served ad, absent when new)
/// and returns what to write; nothing is tallied (see [`fold_at`]).
pub fn fold(
    records: &[EventRecord],
    sets: &mut EntitySets,
    policy: &Policy,
) -> (BatchWrite, FoldStats) {
    fold_at(records, None, sets, policy)
}

/// As [`fold`], for records at `positions` (one per record): the tallies they move
/// are taken from `sets` (absent: empty), moved and written.
pub fn fold_at(
    records: &[EventRecord],
    positions: Option<&[Position]>,
    sets: &mut EntitySets,
    policy: &Policy,
) -> (BatchWrite, FoldStats) {
    let mut stats = FoldStats::default();
    let mut write = BatchWrite::default();
    let mut dirty_views: FastSet<ViewKey> = FastSet::default();
    // Each touched cart line, with its place in the carts report before the batch.
    let mut dirty_carts: FastMap<CartKey, Option<LinePlace>> = FastMap::default();
    let mut dirty_served: FastSet<String> = FastSet::default();
    // Each view's row as the tallies count it so far (`None`: not counted yet).
    // Each view's row as the tallies count it, with its earliest event's time.
    let mut view_rows: FastMap<ViewKey, Option<(ViewRow, i64)>> = FastMap::default();
    // Each cart line's adds as the tallies count them so far.
    let mut cart_adds: FastMap<CartKey, carts_t::Adds> = FastMap::default();
    let mut creative = String::new();
    for (i, r) in records.iter().enumerate() {
        let time_ms = r.event.timestamp.timestamp_millis();
        let received_ms = r.received_at.timestamp_millis();
        if time_ms < received_ms - policy.late_horizon_ms {
            *stats.dropped.entry(Dropped::TooLate).or_default() += 1;
            continue;
        }
        if time_ms > received_ms + policy.future_skew_ms {
            *stats.dropped.entry(Dropped::Future).or_default() += 1;
            continue;
        }
        let key = r.dedup_key.0;
        let status = AdIdStatus::of(r.ad_id_verdict);
        let campaign_id = campaign_str(&r.event.ad_id);
        let invalid = r.invalid_reason();
        let mut traffic = TrafficClass::of(invalid);
        if let Some(kind) = tally_kind(r) {
            let ad = rm_schemas::ad_id::parse(&r.event.ad_id);
            // An eligible event may take a unit (a state made when new); an unverified
            // copy only reads the state, to stay a repeat of a unit another took.
            let state = match (traffic == TrafficClass::Valid, status.is_billable()) {
                (true, true) => {
                    let state = served_state(&mut sets.served, &r.event.ad_id);
                    if state.see(shopper_hash(r.event.tracking_id())) {
                        stats.shared_ads += 1;
                    }
                    mark(&mut dirty_served, &r.event.ad_id);
                    Some(state)
                }
                (true, false) => sets.served.get_mut(r.event.ad_id.as_str()),
                (false, _) => None,
            };
            let take;
            (traffic, take) = decide(r, ad.as_ref(), traffic, status, time_ms, state, policy);
            // How the event counts in the tallies: judged by its served ad when its id
            // is genuine (a state made when new), else counted as it comes.
            let judged = Judged {
                status,
                class: traffic,
                time_ms,
            };
            let change = if status.is_genuine() {
                let state = served_state(&mut sets.served, &r.event.ad_id);
                let change = match (take, state.counted(key)) {
                    // The unit's billable event, taken before the state remembered
                    // events (a store written before tallies): the backfill counted it.
                    (Some(Take::Copy), None) => {
                        state.counted_before(key, judged);
                        None
                    }
                    _ => state.judge(key, judged),
                };
                if change.is_some() {
                    mark(&mut dirty_served, &r.event.ad_id);
                }
                change
            } else {
                Some((None, judged))
            };
            let at = positions.and_then(|p| p.get(i));
            if let (Some((old, now)), Some(&(partition, offset))) = (change, at) {
                creative.clear();
                creative.push_str(&ad.map(|a| a.creative).unwrap_or_default());
                if creative.len() > rm_schemas::ad_id::MAX_CREATIVE_BYTES {
                    creative.clear();
                }
                let e = tally_event(r, kind, &creative);
                let m = moves::moves(&e, old, now, partition);
                let clicks: i64 = m
                    .iter()
                    .filter(|(k, _)| {
                        k.metric == Metric::BILLABLE_CLICKS
                            && k.place.scope == rm_store::model::tallies::Scope::Campaign
                            && k.place.grain == rm_store::model::tallies::Grain::Day
                    })
                    .map(|(_, d)| *d)
                    .sum();
                if moves::apply(m, offset, &mut sets.tallies) {
                    stats.tallied += 1;
                    stats.tallied_clicks = stats.tallied_clicks.saturating_add_signed(clicks);
                }
            }
        } else if r.event.interaction_type == InteractionType::CreativeClick {
            // Not a unit of its own (the ad click is), but judged by the stateless
            // rules before it may credit an order.
            let ad = rm_schemas::ad_id::parse(&r.event.ad_id);
            (traffic, _) = decide(r, ad.as_ref(), traffic, status, time_ms, None, policy);
        }
        // Only a verified ad id of valid traffic, through the served-ad rules, may
        // credit an order: a forged or expired one naming a real shopper's id would
        // otherwise send that shopper's orders to a campaign of the forger's choice, a
        // crawler's would credit sales to traffic no person saw, and a served ad's
        // repeats would let whoever saw one ad name every shopper they like. An event
        // whose consent string refused our processing never links a shopper to an
        // order (its ids are the edge's daily hashes, and stay unused).
        if invalid.is_none() && traffic == TrafficClass::Valid && !r.anonymous {
            write
                .touches
                .extend(attribution::touches_of(&r.event, key, campaign_id, time_ms));
        }
        let fresh = match entity(r) {
            Entity::View(k) => {
                let at = positions.and_then(|p| p.get(i)).copied();
                // The view's row before this record: what the tallies count of it.
                if at.is_some() && !view_rows.contains_key(&k) {
                    let before = sets.views.get(&k).map(|facts| {
                        let row = view_row(&k, facts, &sets.served, policy);
                        (row, views::first_ms(facts))
                    });
                    view_rows.insert(k.clone(), before);
                }
                // The served ad's view of this creative is its first eligible viewer's.
                if traffic == TrafficClass::Valid && status.is_billable() {
                    let state = served_state(&mut sets.served, &k.ad_id);
                    let viewer = shopper_hash(&k.tracking_id);
                    state.take_view(&k.video_id, viewer, key);
                    if state.see(viewer) {
                        stats.shared_ads += 1;
                    }
                    mark(&mut dirty_served, &k.ad_id);
                }
                let fact = ViewFact {
                    dedup_key: key,
                    kind: r.event.interaction_type,
                    time_ms,
                    status,
                };
                let fresh = match sets.views.get_mut(&k) {
                    Some(facts) => funnel::insert_fact(facts, fact),
                    None => {
                        sets.views.insert(k.clone(), vec![fact]);
                        true
                    }
                };
                // The row may have changed (a new event, a copy of one with a better
                // status, or the view took its unit): the tallies move from the old
                // row's counts to the new one's (nothing when they are equal).
                if let Some((partition, offset)) = at {
                    let facts = sets.views.get(&k).map_or(&[][..], Vec::as_slice);
                    let now = view_row(&k, facts, &sets.served, policy);
                    let first_ms = views::first_ms(facts);
                    let old = view_rows.get(&k).and_then(Option::as_ref);
                    let old = old.map(|(row, first_ms)| views::Counted {
                        row,
                        first_ms: *first_ms,
                    });
                    let new = views::Counted {
                        row: &now,
                        first_ms,
                    };
                    let m = views::moves(old, new, partition);
                    if moves::apply(m, offset, &mut sets.tallies) {
                        stats.tallied += 1;
                    }
                    view_rows.insert(k.clone(), Some((now, first_ms)));
                }
                dirty_views.insert(k);
                fresh
            }
            Entity::Cart(k) => {
                let at = positions.and_then(|p| p.get(i)).copied();
                // The line's adds before this record: what the tallies count of it.
                if at.is_some() && !cart_adds.contains_key(&k) {
                    let before = sets.carts.get(&k).map(|f| carts_t::adds(f));
                    cart_adds.insert(k.clone(), before.unwrap_or_default());
                }
                if !dirty_carts.contains_key(&k) {
                    let before = sets
                        .carts
                        .get(&k)
                        .and_then(|f| lines::place_of_facts(&k, f));
                    dirty_carts.insert(k.clone(), before);
                }
                let fact = CartFact {
                    dedup_key: key,
                    time_ms,
                    units: r.event.units.unwrap_or(0),
                    value: r.event.conversion_value,
                    campaign_id: campaign_id.to_owned(),
                    ad_id: r.event.ad_id.clone(),
                    status,
                };
                let fresh = match sets.carts.get_mut(&k) {
                    Some(facts) => carts::insert_fact(facts, fact),
                    None => {
                        sets.carts.insert(k.clone(), vec![fact]);
                        true
                    }
                };
                // The line's adds may have changed (a new event, or a copy with a better
                // status): the tallies move by the difference.
                if let Some((partition, offset)) = at {
                    let facts = sets.carts.get(&k).map_or(&[][..], Vec::as_slice);
                    let now = carts_t::adds(facts);
                    if let Some(old) = cart_adds.get(&k) {
                        let m = carts_t::moves(&k, old, &now, partition);
                        if moves::apply(m, offset, &mut sets.tallies) {
                            stats.tallied += 1;
                        }
                    }
                    cart_adds.insert(k.clone(), now);
                }
                fresh
            }
            Entity::Product(action) => {
                let e = &r.event;
                write.product_facts.push(ProductFact {
                    group: ProductGroup {
                        campaign_id: campaign_id.to_owned(),
                        ad_id: e.ad_id.clone(),
                        catalog_id: e.catalog_id.clone().unwrap_or_default(),
                        product_code: e.product_code.clone().unwrap_or_default(),
                        day: day_of(time_ms),
                    },
                    action,
                    dedup_key: key,
                    status,
                    time_ms,
                    traffic,
                    shopper: shopper_hash(e.tracking_id()),
                    received_ms,
                });
                true
            }
            Entity::Ad(action) => {
                write.ad_facts.push(AdFact {
                    campaign_id: campaign_id.to_owned(),
                    ad_id: r.event.ad_id.clone(),
                    action,
                    dedup_key: key,
                    time_ms,
                    status,
                    traffic,
                    shopper: shopper_hash(r.event.tracking_id()),
                    received_ms,
                });
                true
            }
            Entity::None => true,
        };
        if fresh {
            *stats.by_type.entry(r.event.interaction_type).or_default() += 1;
            if let Some(v) = r.ad_id_verdict {
                *stats.unverified.entry(v).or_default() += 1;
            }
            if let Some(why) = invalid {
                *stats.invalid.entry(why).or_default() += 1;
            } else if traffic != TrafficClass::Valid {
                *stats.decided.entry(traffic).or_default() += 1;
            }
            write.newest_event_ms = write.newest_event_ms.max(Some(time_ms));
        } else {
            stats.duplicates += 1;
        }
    }
    write.views.reserve(dirty_views.len());
    write.view_facts.reserve(dirty_views.len());
    for k in dirty_views {
        let facts = sets.views.get(&k).cloned().unwrap_or_default();
        // Derived as the tallies counted it (a view's row changes only with its own
        // records, so the last row the batch derived is current).
        let row = match view_rows.remove(&k).flatten() {
            Some((row, _)) => row,
            None => view_row(&k, &facts, &sets.served, policy),
        };
        write.views.push(row);
        write.view_facts.push((k, facts));
    }
    for (k, before) in dirty_carts {
        if let Some(facts) = sets.carts.get(&k) {
            let rows = carts::derive_cart(&k, facts);
            let now = lines::place_of_facts(&k, facts);
            if let (Some(before), Some(row)) =
                (before.filter(|b| now.as_ref() != Some(b)), rows.last())
            {
                write.cart_lines_left.push((before, row.version));
            }
            write.cart_rows.extend(rows);
        }
    }
    // How far each partition is folded: written with the tallies, read by the next
    // fold to tell whether another writer went further (`rm_store::model::tallies`).
    for &(partition, offset) in positions.unwrap_or_default() {
        let p = sets.tallies.entry(Place::progress(partition)).or_default();
        if p.get_mut(Metric::Progress).advance(offset) {
            p.mark(Metric::Progress);
        }
    }
    write.tallies = moves::dirty_rows(&mut sets.tallies);
    write.served.reserve(dirty_served.len());
    for ad_id in dirty_served {
        if let Some(state) = sets.served.get(&ad_id) {
            write.served.push((ad_id, state.clone()));
        }
    }
    (write, stats)
}

/// What [`fold_orders`] did, for metrics.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct OrderStats {
    /// Orders stored for the first time.
    pub new: u64,
    /// Orders already stored (or earlier in the batch): a re-sent or replayed order.
    pub duplicates: u64,
}

/// The lines of the orders in `records` whose id is not in `known` (the ids the store
/// already holds); of several records of one id in the batch, the first wins. So an
/// order id, once stored, never changes, whatever is re-sent or replayed.
pub fn fold_orders(
    records: &[OrderRecord],
    known: &HashSet<String>,
) -> (Vec<OrderLine>, OrderStats) {
    let mut stats = OrderStats::default();
    let mut taken: HashSet<String> = HashSet::new();
    let mut lines = Vec::new();
    for r in records {
        // Order ids are unique within a namespace: stored scoped by it.
        let id = rm_schemas::namespace::scoped(&r.namespace_id, &r.order.id);
        if known.contains(&id) || taken.contains(&id) {
            stats.duplicates += 1;
            continue;
        }
        stats.new += 1;
        lines.extend(
            attribution::lines_of(&r.order)
                .into_iter()
                .map(|l| OrderLine {
                    order_id: id.clone(),
                    ..l
                }),
        );
        taken.insert(id);
    }
    (lines, stats)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rm_schemas::agent::AgentClass;
    use rm_schemas::InteractionEvent;
    use rm_store::model::ads;
    use rm_store::model::traffic::ClickWindow;

    const T0: i64 = 1_795_000_000_000;

    /// An ad event record as the edge writes it, received 1 s after its time.
    fn record(
        kind: InteractionType,
        ad: u8,
        shopper: u8,
        ms: i64,
        v: Option<UnverifiedAdId>,
    ) -> EventRecord {
        let at = chrono::DateTime::from_timestamp_millis(T0 + ms).expect("time");
        let e = InteractionEvent {
            session_id: Some(format!("s-{shopper}")),
            ..InteractionEvent::new(format!("rm1.c{}.ad-{ad}", ad % 2), kind, at.fixed_offset())
        };
        let mut r = EventRecord::new(e, uuid_of(ms), at + chrono::Duration::seconds(1));
        r.ad_id_verdict = v;
        r
    }

    fn uuid_of(ms: i64) -> uuid::Uuid {
        uuid::Uuid::from_u128(ms as u128)
    }

    #[test]
    fn only_verified_ad_ids_become_attribution_touches() {
        let click = |v: Option<UnverifiedAdId>| {
            let mut r = record(InteractionType::ProductClick, 0, 1, 0, v);
            r.event.customer_id = Some("victim".into());
            r.event.catalog_id = Some("cat".into());
            r.event.product_code = Some("p".into());
            r
        };
        let genuine = fold(
            &[click(None)],
            &mut EntitySets::default(),
            &Policy::default(),
        )
        .0;
        assert_eq!(genuine.touches.len(), 2, "its session and customer id");
        for v in UnverifiedAdId::ALL {
            let (w, _) = fold(
                &[click(Some(v))],
                &mut EntitySets::default(),
                &Policy::default(),
            );
            assert!(w.touches.is_empty(), "{v:?} credits nothing");
            assert_eq!(w.product_facts.len(), 1, "but is still counted, flagged");
        }
    }

    #[test]
    fn events_without_consent_are_counted_and_never_a_touch() {
        let mut r = record(InteractionType::ProductClick, 0, 1, 0, None);
        r.event.customer_id = Some("anon-0123".into());
        r.event.catalog_id = Some("cat".into());
        r.event.product_code = Some("p".into());
        r.anonymous = true;
        let (w, _) = fold(&[r], &mut EntitySets::default(), &Policy::default());
        assert!(w.touches.is_empty(), "no touch without consent");
        assert_eq!(w.product_facts.len(), 1, "but counted");
    }

    #[test]
    fn invalid_traffic_is_flagged_and_never_a_touch() {
        let click = |agent: Option<AgentClass>, prefetch: bool| {
            let mut r = record(InteractionType::ProductClick, 0, 1, 0, None);
            r.event.customer_id = Some("victim".into());
            r.event.catalog_id = Some("cat".into());
            r.event.product_code = Some("p".into());
            r.agent = agent;
            r.prefetch = prefetch;
            r
        };
        let cases = [
            (Some(AgentClass::Browser), false, TrafficClass::Valid),
            (None, false, TrafficClass::Valid),
            (Some(AgentClass::KnownBot), false, TrafficClass::KnownBot),
            (
                Some(AgentClass::NonBrowser),
                false,
                TrafficClass::NonBrowser,
            ),
            (Some(AgentClass::Browser), true, TrafficClass::Prefetch),
        ];
        for (agent, prefetch, class) in cases {
            let (w, stats) = fold(
                &[click(agent, prefetch)],
                &mut EntitySets::default(),
                &Policy::default(),
            );
            assert_eq!(w.product_facts.len(), 1, "{agent:?} is kept");
            let fact = &w.product_facts[0];
            assert_eq!(fact.traffic, class);
            assert_eq!(fact.received_ms, T0 + 1_000, "the edge's receive time");
            assert_eq!(fact.shopper, shopper_hash("victim"), "the tracking id");
            let valid = class == TrafficClass::Valid;
            assert_eq!(w.touches.is_empty(), !valid, "{agent:?} {prefetch}");
            assert_eq!(stats.invalid.values().sum::<u64>(), u64::from(!valid));
        }
    }

    #[test]
    fn a_hundred_clicks_a_millisecond_apart_are_one_billable_click() {
        let records: Vec<EventRecord> = (0..100)
            .map(|i| record(InteractionType::AdClick, 0, 1, i, None))
            .collect();
        let (w, stats) = fold(&records, &mut EntitySets::default(), &Policy::default());
        assert_eq!(stats.by_type[&InteractionType::AdClick], 100, "all kept");
        let rows = ads::report(ads::resolve(&w.ad_facts), |_| true, ClickWindow::default());
        assert_eq!(rows.len(), 1);
        // The served ad yields one billable click; the others are its repeats (before
        // the served-ad rule, the click window flagged them).
        assert_eq!(
            (
                rows[0].clicks,
                rows[0].invalid_clicks.served_ad_repeat,
                rows[0].invalid_clicks.click_window
            ),
            (1, 99, 0)
        );
        assert_eq!(stats.decided[&TrafficClass::Repeat], 99);
        assert_eq!(w.served.len(), 1, "the served ad's state is written");
    }

    #[test]
    fn one_served_ad_named_by_forty_shoppers_is_one_billable_impression_and_click() {
        let mut records = Vec::new();
        for shopper in 0..40u8 {
            let at = i64::from(shopper) * 10;
            records.push(record(InteractionType::AdImpression, 0, shopper, at, None));
            let mut click = record(InteractionType::AdClick, 0, shopper, at + 1, None);
            click.event.customer_id = Some(format!("victim-{shopper}"));
            records.push(click);
        }
        let mut sets = EntitySets::default();
        let (w, stats) = fold(&records, &mut sets, &Policy::default());
        let rows = ads::report(ads::resolve(&w.ad_facts), |_| true, ClickWindow::default());
        let sum = |f: fn(&ads::AdReportRow) -> u64| rows.iter().map(f).sum::<u64>();
        assert_eq!(sum(|r| r.impressions), 1);
        assert_eq!(sum(|r| r.clicks), 1);
        assert_eq!(sum(|r| r.invalid_impressions.served_ad_repeat), 39);
        assert_eq!(sum(|r| r.invalid_clicks.served_ad_repeat), 39);
        assert_eq!(stats.shared_ads, 1, "told once");
        // A replay of the batch over the stored state decides the same.
        let (again, _) = fold(&records, &mut sets, &Policy::default());
        let rows2 = ads::report(
            ads::resolve(&again.ad_facts),
            |_| true,
            ClickWindow::default(),
        );
        assert_eq!(rows2, rows);
    }

    #[test]
    fn events_before_serve_or_of_another_product_never_credit_an_order() {
        let keys = rm_schemas::ad_id::AdIdKeys::new(vec![b"0123456789abcdef-key-one".to_vec()])
            .expect("keys");
        let expires = (T0 / 1000) + 1800; // served half an hour before T0
        let ad = keys
            .mint("c", &rm_schemas::ad_id::product_creative("sku-1"), expires)
            .expect("mint");
        let click = |ms: i64, product: &str| {
            let mut r = record(InteractionType::ProductClick, 0, 1, ms, None);
            r.event.ad_id = ad.clone();
            r.event.customer_id = Some("victim".into());
            r.event.catalog_id = Some("cat".into());
            r.event.product_code = Some(product.into());
            r.dedup_key = rm_schemas::dedup_key::DedupKey::of(&r.event);
            r
        };
        let policy = Policy::default();
        let five_days = 5 * 86_400_000;
        let cases = [
            (click(-five_days, "sku-1"), TrafficClass::BeforeServe),
            (click(0, "sku-2"), TrafficClass::NotInAd),
            (click(0, "sku-1"), TrafficClass::Valid),
        ];
        for (r, class) in cases {
            let (w, stats) = fold(
                std::slice::from_ref(&r),
                &mut EntitySets::default(),
                &policy,
            );
            assert_eq!(w.product_facts[0].traffic, class);
            assert_eq!(
                w.touches.is_empty(),
                class != TrafficClass::Valid,
                "{class:?}"
            );
            let decided = stats.decided.values().sum::<u64>();
            assert_eq!(decided, u64::from(class != TrafficClass::Valid));
        }
    }

    #[test]
    fn an_ad_expired_beyond_the_retention_bills_nothing_more() {
        let keys = rm_schemas::ad_id::AdIdKeys::new(vec![b"0123456789abcdef-key-one".to_vec()])
            .expect("keys");
        let expires = T0 / 1000 + 1800;
        let click = |ad: &str| {
            let mut r = record(InteractionType::AdClick, 0, 1, 0, None);
            r.event.ad_id = ad.to_owned();
            r.dedup_key = rm_schemas::dedup_key::DedupKey::of(&r.event);
            r
        };
        let ad = keys.mint("c", "banner", expires).expect("mint");
        let class = |forgotten_before| {
            let policy = Policy {
                forgotten_before,
                ..Policy::default()
            };
            let (w, _) = fold(&[click(&ad)], &mut EntitySets::default(), &policy);
            w.ad_facts[0].traffic
        };
        assert_eq!(class(None), TrafficClass::Valid);
        assert_eq!(class(Some(expires)), TrafficClass::Valid, "not before");
        assert_eq!(
            class(Some(expires + 1)),
            TrafficClass::Repeat,
            "its state may be gone"
        );
    }

    #[test]
    fn a_cart_line_belongs_to_the_namespace_of_its_verified_ad_id() {
        let cart = |ad: &str, v: Option<UnverifiedAdId>| {
            let mut r = record(InteractionType::Cart, 0, 1, 0, v);
            r.event.ad_id = ad.into();
            r.event.catalog_id = Some("cat".into());
            r.event.product_code = Some("p".into());
            r.event.units = Some(1);
            r
        };
        let line = |r: EventRecord| {
            let (w, _) = fold(&[r], &mut EntitySets::default(), &Policy::default());
            w.cart_rows[0].key.catalog_id.clone()
        };
        let other = "rm2.other.c.YQ.1.bm9uY2U.c2ln";
        assert_eq!(
            line(cart("rm1.c.YQ.1.bm9uY2U.c2ln", None)),
            "cat",
            "default: bare"
        );
        assert_eq!(
            line(cart(other, None)),
            rm_schemas::namespace::scoped("other", "cat")
        );
        let forged = line(cart(other, Some(UnverifiedAdId::BadSignature)));
        assert_eq!(
            forged,
            rm_schemas::namespace::scoped(UNVERIFIED_CARTS, "cat")
        );
        assert_eq!(rm_schemas::namespace::bare(&forged), "cat");
        assert_eq!(
            line(cart(other, Some(UnverifiedAdId::Foreign))),
            forged,
            "not ours"
        );
        assert_eq!(
            line(cart(other, Some(UnverifiedAdId::Expired))),
            rm_schemas::namespace::scoped("other", "cat"),
            "genuine, only expired: the shopper's line goes on"
        );
    }

    proptest! {
        /// Impressions and clicks fired through the pipeline's fold, re-fired at any
        /// time, in any batches and order (the served-ad state carried from batch to
        /// batch, as the pipeline does): every distinct (ad id, shopper) impression is
        /// counted once; each ad id yields exactly one billable impression when one
        /// of its impressions verified, and one billable click likewise, whatever the
        /// order; every unverified event is counted.
        #[test]
        fn refired_impressions_count_once_and_each_served_ad_bills_once(
            fires in proptest::collection::vec(
                (any::<bool>(), 0u8..3, 0u8..3, 0i64..2 * 86_400_000, proptest::option::of(0usize..3)),
                1..40,
            ),
            split in any::<usize>(),
        ) {
            let records: Vec<EventRecord> = fires
                .iter()
                .map(|(click, ad, shopper, ms, v)| {
                    let kind = if *click { InteractionType::AdClick } else { InteractionType::AdImpression };
                    record(kind, *ad, *shopper, *ms, v.map(|i| UnverifiedAdId::ALL[i]))
                })
                .collect();
            let report = |batches: &[&[EventRecord]]| {
                let mut copies = Vec::new();
                let mut unverified = 0;
                let mut sets = EntitySets::default();
                for b in batches {
                    let (w, stats) = fold(b, &mut sets, &Policy::default());
                    copies.extend(w.ad_facts);
                    unverified += stats.unverified.values().sum::<u64>();
                }
                (ads::report(ads::resolve(&copies), |_| true, ClickWindow::default()), unverified)
            };
            // Billable impressions and clicks per ad id.
            let per_ad = |rows: &[ads::AdReportRow]| {
                let mut m: std::collections::BTreeMap<String, (u64, u64)> = Default::default();
                for r in rows {
                    let e = m.entry(r.ad_id.clone()).or_default();
                    e.0 += r.impressions;
                    e.1 += r.clicks;
                }
                m.retain(|_, v| *v != (0, 0));
                m
            };
            let (whole, unverified) = report(&[&records]);
            let at = split % records.len();
            let mut reversed = records.clone();
            reversed.reverse();
            let (a, b) = reversed.split_at(at);
            prop_assert_eq!(per_ad(&report(&[b, a, &records[..at]]).0), per_ad(&whole));
            let impressions: std::collections::HashSet<(u8, u8)> = fires
                .iter()
                .filter(|f| !f.0)
                .map(|f| (f.1, f.2))
                .collect();
            let counted: u64 = whole.iter().map(|r| r.impressions + r.not_billable_impressions).sum();
            prop_assert_eq!(counted as usize, impressions.len());
            let verified = |click: bool| -> std::collections::HashSet<u8> {
                fires
                    .iter()
                    .filter(|f| f.0 == click && f.4.is_none())
                    .map(|f| f.1)
                    .collect()
            };
            let billable: u64 = whole.iter().map(|r| r.impressions).sum();
            prop_assert_eq!(billable as usize, verified(false).len());
            let clicks: u64 = whole.iter().map(|r| r.clicks).sum();
            prop_assert_eq!(clicks as usize, verified(true).len());
            prop_assert_eq!(unverified as usize, fires.iter().filter(|f| f.4.is_some()).count());
        }
    }
}
