//! The integration inspector's rule checks: what the events one tracking id sent say
//! about the client's side of the spec (Events, rules 1, 2, 3, 9 and 10). Pure: the
//! edge records what it answered ([`Observed`]), this module judges it.
//!
//! Events are grouped per view (`adId`, `videoId`), per cart line (`catalogId`,
//! `productCode`) and per product, and ordered by their `timestamp` (arrival order
//! breaks ties and stands in when the timestamp is unreadable). Each rule gets a
//! [`RuleVerdict`] (`ok`, `violated`, `not_applicable` when no event concerns it) and
//! one plain sentence per problem naming the events at fault by their arrival number
//! (`#3`). What counts as evidence:
//!
//! - rule 1 (funnel order): accepted milestones of a view: a milestone whose earlier
//!   milestones never came (synthesised on seek), one arriving after a later one, a
//!   milestone repeated (two `videoComplete`s: loop or replay), a `videoComplete`
//!   with no `videoPlay` (complete on load);
//! - rule 2 (controls): two control events of a view closer than the debounce interval;
//! - rule 3 (one view, one set of ids): a video event refused for lacking `videoId`,
//!   and a view whose events carry different tracking ids;
//! - rule 9 (impressions once per occurrence): a `productImpression` of one product
//!   again within the re-render interval, or re-fired identically (the edge's dropped
//!   duplicates are evidence too), and an ad impression URL fired again;
//! - rule 10 (absolute cart units): a negative `units` (the edge refuses it, and the
//!   refusal is the evidence) and a cart line repeating the same non-zero count
//!   (`1, 1, 1`: deltas).
//!
//! Rules 1 and 2 are judged by [`crate::video_funnel`], the rules the aggregator's
//! funnel report counts with, and with the same debounce ([`Thresholds::debounce`]).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::interaction::InteractionType;
use crate::rejection::RejectReason;
use crate::validate::parse_timestamp;
use crate::video_funnel::{Debounce, Order, Step, Toggle, ViewWalk, MILESTONES};

/// Which endpoint answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Endpoint {
    /// `/v1/events/ad/interaction`.
    Interaction,
    /// `/v1/events/ad/impression`.
    Impression,
    /// `/v1/events/ad/click`.
    Click,
}

/// What the edge answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Durably written (200, or 302 for a click).
    Accepted,
    /// A duplicate of a durable event, answered without a write.
    Duplicate,
    /// Refused with 400.
    Rejected {
        /// The reason.
        reason: RejectReason,
        /// The field at fault.
        field: String,
    },
    /// Not made durable (503, or a click redirected without being recorded).
    NotRecorded,
}

/// One event the edge answered, as the inspector keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct Observed {
    /// Arrival number within its tracking id (1, 2, ...).
    pub seq: u64,
    /// When the edge received it, Unix milliseconds.
    pub received_at_ms: i64,
    /// The endpoint.
    pub endpoint: Endpoint,
    /// Decoded parameters (known names only, values as sent).
    pub params: Vec<(&'static str, String)>,
    /// The answer.
    pub outcome: Outcome,
}

impl Observed {
    /// A parameter's value.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The interaction type (the endpoint's for impressions and clicks).
    pub fn kind(&self) -> Option<InteractionType> {
        match self.endpoint {
            Endpoint::Impression => Some(InteractionType::AdImpression),
            Endpoint::Click => Some(InteractionType::AdClick),
            Endpoint::Interaction => self
                .get("interactionType")
                .and_then(InteractionType::from_wire),
        }
    }

    /// The event's own time (Unix ms), or its arrival when unreadable.
    pub fn time_ms(&self) -> i64 {
        self.get("timestamp")
            .and_then(|t| parse_timestamp(t).ok())
            .map_or(self.received_at_ms, |t| t.timestamp_millis())
    }

    fn accepted(&self) -> bool {
        self.outcome == Outcome::Accepted
    }

    fn tracking_ids(&self) -> String {
        ["customerId", "sessionId", "dtmToken"]
            .iter()
            .filter_map(|k| self.get(k).map(|v| format!("{k}={v}")))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// A rule's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleVerdict {
    /// The events follow the rule.
    Ok,
    /// At least one event breaks it.
    Violated,
    /// No event concerns it.
    NotApplicable,
}

/// One rule, judged.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RuleCheck {
    /// The rule's number in the spec's Events section.
    pub rule: u8,
    /// What the rule asks, in a few words.
    pub title: &'static str,
    /// The verdict.
    pub verdict: RuleVerdict,
    /// One sentence on the whole.
    pub summary: String,
    /// One sentence per problem, naming the events at fault.
    pub findings: Vec<String>,
}

/// A view's events.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ViewGroup {
    /// The ad.
    pub ad_id: String,
    /// The video ("" when missing).
    pub video_id: String,
    /// Arrival numbers, in event-time order.
    pub events: Vec<u64>,
    /// `interactionType`s of the accepted events, in event-time order.
    pub sequence: Vec<String>,
}

/// A cart line's events.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CartGroup {
    /// The catalog.
    pub catalog_id: String,
    /// The product.
    pub product_code: String,
    /// Arrival numbers, in event-time order.
    pub events: Vec<u64>,
    /// `units` as sent, in event-time order (refused values included).
    pub units: Vec<String>,
}

/// The inspector's judgement over one tracking id's events.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Inspection {
    /// Rules 1, 2, 3, 9, 10.
    pub rules: Vec<RuleCheck>,
    /// Events per view.
    pub views: Vec<ViewGroup>,
    /// Events per cart line.
    pub carts: Vec<CartGroup>,
}

/// Thresholds of the checks.
#[derive(Debug, Clone, Copy)]
pub struct Thresholds {
    /// Two control events of a view closer than this are a rapid toggle (rule 2): the
    /// `RM_CONTROL_DEBOUNCE_MS` setting, the same the funnel report debounces with.
    pub debounce: Debounce,
    /// Two impressions of a product closer than this are a re-render (rule 9).
    pub rerender_ms: i64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Self {
            debounce: Debounce::DEFAULT,
            rerender_ms: 1_000,
        }
    }
}

/// Most findings kept per rule (the rest are counted in the summary).
pub const MAX_FINDINGS: usize = 20;

fn ev(e: &Observed) -> String {
    let kind = e.kind().map_or_else(
        || e.get("interactionType").unwrap_or("event").to_owned(),
        |k| k.as_str().to_owned(),
    );
    format!("{kind} #{}", e.seq)
}

type Sorted<'a> = Vec<&'a Observed>;

fn sort(mut v: Sorted<'_>) -> Sorted<'_> {
    v.sort_by_key(|e| (e.time_ms(), e.seq));
    v
}

fn is_video(e: &Observed) -> bool {
    e.kind()
        .is_some_and(|k| k.funnel_step().is_some() || k.is_video_control())
}

/// Judges one tracking id's events (any order; arrival numbers identify them).
pub fn inspect(events: &[Observed], t: Thresholds) -> Inspection {
    let mut views: BTreeMap<(String, String), Sorted<'_>> = BTreeMap::new();
    let mut carts: BTreeMap<(String, String), Sorted<'_>> = BTreeMap::new();
    let mut products: BTreeMap<(String, String), Sorted<'_>> = BTreeMap::new();
    let mut ads: BTreeMap<String, Sorted<'_>> = BTreeMap::new();
    for e in events {
        let get = |k: &str| e.get(k).unwrap_or("").to_owned();
        match e.kind() {
            Some(_) if is_video(e) => {
                views
                    .entry((get("adId"), get("videoId")))
                    .or_default()
                    .push(e);
            }
            Some(InteractionType::Cart) => {
                carts
                    .entry((get("catalogId"), get("productCode")))
                    .or_default()
                    .push(e);
            }
            Some(InteractionType::ProductImpression) => {
                products
                    .entry((get("catalogId"), get("productCode")))
                    .or_default()
                    .push(e);
            }
            Some(InteractionType::AdImpression) => ads.entry(get("adId")).or_default().push(e),
            _ => {}
        }
    }
    let views: BTreeMap<_, _> = views.into_iter().map(|(k, v)| (k, sort(v))).collect();
    let carts: BTreeMap<_, _> = carts.into_iter().map(|(k, v)| (k, sort(v))).collect();
    let walked: Walked<'_> = views
        .iter()
        .map(|(k, es)| (k, walk(es, t.debounce)))
        .collect();
    let rules = vec![
        rule1(&walked),
        rule2(&walked, t.debounce),
        rule3(events, &views),
        rule9(&products, &ads, t.rerender_ms),
        rule10(&carts),
    ];
    Inspection {
        rules,
        views: views
            .iter()
            .map(|((ad, video), es)| ViewGroup {
                ad_id: ad.clone(),
                video_id: video.clone(),
                events: es.iter().map(|e| e.seq).collect(),
                sequence: es
                    .iter()
                    .filter(|e| e.accepted())
                    .filter_map(|e| e.kind().map(|k| k.as_str().to_owned()))
                    .collect(),
            })
            .collect(),
        carts: carts
            .iter()
            .map(|((catalog, product), es)| CartGroup {
                catalog_id: catalog.clone(),
                product_code: product.clone(),
                events: es.iter().map(|e| e.seq).collect(),
                units: es
                    .iter()
                    .map(|e| e.get("units").unwrap_or("").to_owned())
                    .collect(),
            })
            .collect(),
    }
}

fn judged(
    rule: u8,
    title: &'static str,
    applicable: bool,
    mut findings: Vec<String>,
    ok: String,
) -> RuleCheck {
    let (verdict, summary) = if !findings.is_empty() {
        let n = findings.len();
        findings.truncate(MAX_FINDINGS);
        (
            RuleVerdict::Violated,
            format!(
                "{n} problem{}: {}",
                if n == 1 { "" } else { "s" },
                findings[0]
            ),
        )
    } else if applicable {
        (RuleVerdict::Ok, ok)
    } else {
        (
            RuleVerdict::NotApplicable,
            "no event of this tracking id concerns this rule".to_owned(),
        )
    };
    RuleCheck {
        rule,
        title,
        verdict,
        summary,
        findings,
    }
}

fn view_name((ad, video): &(String, String)) -> String {
    format!("view (adId {ad}, videoId {video})")
}

/// Each view's accepted video events, in event-time order, as the funnel rules judge them.
type Walked<'a> = BTreeMap<&'a (String, String), Vec<(&'a Observed, Step<&'a Observed>)>>;

fn walk<'a>(es: &Sorted<'a>, debounce: Debounce) -> Vec<(&'a Observed, Step<&'a Observed>)> {
    let mut view = ViewWalk::new(debounce);
    es.iter()
        .filter(|e| e.accepted())
        .filter_map(|e| e.kind().map(|k| (*e, view.push(*e, k, e.time_ms()))))
        .collect()
}

fn rule1(views: &Walked<'_>) -> RuleCheck {
    let mut findings = Vec::new();
    let mut applicable = false;
    for (key, steps) in views {
        for (e, step) in steps {
            let Step::Milestone { index, order } = step else {
                continue;
            };
            applicable = true;
            let view = view_name(key);
            match order {
                Order::InOrder => {}
                Order::Repeat { first } if *index == MILESTONES.len() - 1 => findings.push(format!(
                    "{view}: two videoComplete ({} and {}) in one view; a full watch has exactly one videoComplete, none on loop or replay",
                    ev(first),
                    ev(e)
                )),
                Order::Repeat { first } => findings.push(format!(
                    "{view}: {} repeats {} in one view; milestones must follow real playback, not loops, replays or seeks",
                    ev(e),
                    ev(first)
                )),
                Order::AfterLater { later } => findings.push(format!(
                    "{view}: {} came after {}; milestones go in funnel order (creativeView, play, firstQuartile, midpoint, thirdQuartile, complete)",
                    ev(e),
                    ev(later)
                )),
                Order::CompleteWithoutPlay => findings.push(format!(
                    "{view}: {} with no videoPlay before it; a complete fired on load, without playback",
                    ev(e)
                )),
                Order::Skipped { missing } => findings.push(format!(
                    "{view}: {} arrived without {} before it; milestones must follow real playback and must not be synthesised on seek",
                    ev(e),
                    missing.iter().map(InteractionType::as_str).collect::<Vec<_>>().join(", ")
                )),
            }
        }
    }
    judged(
        1,
        "video milestones in funnel order, one complete per view",
        applicable,
        findings,
        format!("milestones follow playback in all {} view(s)", views.len()),
    )
}

fn rule2(views: &Walked<'_>, debounce: Debounce) -> RuleCheck {
    let mut findings = Vec::new();
    let mut applicable = false;
    for (key, steps) in views {
        for (e, step) in steps {
            let Step::Control { toggle, .. } = step else {
                continue;
            };
            applicable = true;
            if let Some(Toggle { previous, gap_ms }) = toggle {
                findings.push(format!(
                    "{}: {} and {} are {gap_ms} ms apart; rapid control toggles must be debounced (at least {} ms)",
                    view_name(key),
                    ev(previous),
                    ev(e),
                    debounce.ms()
                ));
            }
        }
    }
    judged(
        2,
        "video controls debounced",
        applicable,
        findings,
        "no rapid control toggles".to_owned(),
    )
}

fn rule3(events: &[Observed], views: &BTreeMap<(String, String), Sorted<'_>>) -> RuleCheck {
    let mut findings = Vec::new();
    let mut applicable = !views.is_empty();
    for e in events {
        if let Outcome::Rejected { reason, field } = &e.outcome {
            if *reason == RejectReason::MissingParameter && field == "videoId" {
                applicable = true;
                findings.push(format!(
                    "{} has no videoId (refused); every video event of a view carries the creative's UniversalAdId idValue",
                    ev(e)
                ));
            }
        }
    }
    for (key, es) in views {
        let mut ids: Vec<(String, &Observed)> = Vec::new();
        for e in es.iter().filter(|e| e.accepted()) {
            let t = e.tracking_ids();
            if !ids.iter().any(|(x, _)| *x == t) {
                ids.push((t, e));
            }
        }
        if ids.len() > 1 {
            let list: Vec<String> = ids
                .iter()
                .map(|(t, e)| format!("{} sent {t}", ev(e)))
                .collect();
            findings.push(format!(
                "{}: its events carry different tracking ids ({}); every event of a view reuses the same adId, videoId and tracking id",
                view_name(key),
                list.join("; ")
            ));
        }
    }
    judged(
        3,
        "a view's events reuse adId, videoId and tracking id",
        applicable,
        findings,
        format!(
            "each of the {} view(s) keeps one adId, videoId and tracking id",
            views.len()
        ),
    )
}

fn rule9(
    products: &BTreeMap<(String, String), Sorted<'_>>,
    ads: &BTreeMap<String, Sorted<'_>>,
    rerender_ms: i64,
) -> RuleCheck {
    let mut findings = Vec::new();
    for ((catalog, product), es) in products {
        let es = sort(es.clone());
        let name = format!("product {product} (catalog {catalog})");
        for e in es.iter().filter(|e| e.outcome == Outcome::Duplicate) {
            findings.push(format!(
                "{name}: {} re-fired an earlier productImpression identically (the edge dropped it as a duplicate); fire once per viewability occurrence",
                ev(e)
            ));
        }
        let shown: Vec<&&Observed> = es.iter().filter(|e| e.accepted()).collect();
        for w in shown.windows(2) {
            let gap = w[1].time_ms() - w[0].time_ms();
            if gap < rerender_ms {
                findings.push(format!(
                    "{name}: {} and {} are {gap} ms apart; a productImpression re-fired that fast is a re-render, not a new viewability occurrence",
                    ev(w[0]),
                    ev(w[1])
                ));
            }
        }
    }
    for (ad, es) in ads {
        let again: Vec<String> = es
            .iter()
            .filter(|e| e.outcome == Outcome::Duplicate)
            .map(|e| ev(e))
            .collect();
        if !again.is_empty() {
            findings.push(format!(
                "ad {ad}: its impression URL was fired again ({}); it is counted once per served ad, fire it once",
                again.join(", ")
            ));
        }
    }
    judged(
        9,
        "impressions fired once per viewability occurrence",
        !products.is_empty() || !ads.is_empty(),
        findings,
        format!(
            "impressions of {} product(s) and {} ad(s) fired once per occurrence",
            products.len(),
            ads.len()
        ),
    )
}

fn rule10(carts: &BTreeMap<(String, String), Sorted<'_>>) -> RuleCheck {
    let mut findings = Vec::new();
    for ((catalog, product), es) in carts {
        let name = format!("cart line {product} (catalog {catalog})");
        let sent: Vec<(&Observed, &str)> = es
            .iter()
            .filter(|e| match &e.outcome {
                Outcome::Accepted => true,
                Outcome::Rejected { reason, .. } => *reason == RejectReason::InvalidUnits,
                _ => false,
            })
            .filter_map(|e| e.get("units").map(|u| (*e, u)))
            .collect();
        let seq: Vec<&str> = sent.iter().map(|(_, u)| *u).collect();
        for (e, u) in &sent {
            if u.starts_with('-') || u.starts_with('+') {
                findings.push(format!(
                    "{name}: {} sent units={u} (units in order: {}); units is the absolute current count, never a delta, and removal sends 0",
                    ev(e),
                    seq.join(", ")
                ));
            }
        }
        for w in sent.windows(2) {
            let (a, b) = (w[0].1.parse::<u64>(), w[1].1.parse::<u64>());
            if let (Ok(a), Ok(b)) = (a, b) {
                if a == b && a != 0 {
                    findings.push(format!(
                        "{name}: {} and {} both sent units={a} (units in order: {}); that reads as +1 deltas: send the absolute count (add, two increments, removal: 1, 2, 3, 0)",
                        ev(w[0].0),
                        ev(w[1].0),
                        seq.join(", ")
                    ));
                }
            }
        }
    }
    judged(
        10,
        "cart units absolute, removal 0",
        !carts.is_empty(),
        findings,
        format!("{} cart line(s) sent absolute units", carts.len()),
    )
}

#[cfg(test)]
mod tests;
