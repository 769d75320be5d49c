//! The integration inspector's answer for one tracking id: the events the edge kept
//! ([`crate::inspector`]) in arrival order with their outcomes, grouped per view and
//! per cart line, and the rule checks of `rm_schemas::inspect` over them, with the
//! inspector's thresholds (its control debounce is `RM_CONTROL_DEBOUNCE_MS`).
//!
//! ```json
//! {"trackingId":"s-1","inspector":{"enabled":true,"sampled":true,"eventsPerId":200,"kept":4},
//!  "events":[{"seq":1,"receivedAt":"2026-11-22T10:15:30.251Z","endpoint":"interaction",
//!             "params":{"adId":"ad-1","interactionType":"cart","units":"-1",...},
//!             "outcome":"rejected","reason":"invalid_units","field":"units","message":"..."}],
//!  "rules":[{"rule":10,"title":"cart units absolute, removal 0","verdict":"violated",
//!            "summary":"...","findings":["cart line p-1 (catalog c): cart #4 sent units=-1 ..."]}],
//!  "views":[{"adId":..,"videoId":..,"events":[1,2],"sequence":["videoPlay",...]}],
//!  "carts":[{"catalogId":..,"productCode":..,"events":[..],"units":["1","1","1","-1"]}],
//!  "sharedAdIds":[{"adId":..,"otherTrackingIds":3,"note":".."}]}
//! ```
//!
//! `sharedAdIds` lists the served ads of these events that the inspector also holds
//! for other tracking ids (counted to 100): one served ad bills once, to its first
//! shopper, so a page that caches ad responses across shoppers should hear so.
//!
//! **Tenancy.** A tenant's token sees only the events whose ad id names its
//! namespace (`rm_schemas::ad_id::namespace_of`) and verified (genuine: valid or
//! expired); an event whose ad id does not verify, or that has none, belongs to no
//! namespace and only operators (`admin`) see it. The rule checks, views and carts
//! are computed over the events the viewer sees, so they reveal nothing else.
//!
//! `outcome` is `accepted`, `duplicate` (answered 200 without a write), `rejected`
//! (400, with `reason`, `field` and `message`) or `not_recorded` (503, or a click
//! redirected while the log was down).

use rm_schemas::inspect::{inspect, Outcome};
use rm_schemas::namespace::Viewer;
use rm_schemas::record::UnverifiedAdId;
use serde_json::{json, Map, Value};

use crate::inspector::{Inspector, Recorded};

/// Counts of other shoppers of one served ad stop here (enough to tell it is shared).
const SHARED_CAP: usize = 100;

/// The namespace an event belongs to: its ad id's, when the id is genuine.
fn namespace_of(e: &Recorded) -> Option<&str> {
    let genuine = matches!(e.ad_id_verdict, None | Some(UnverifiedAdId::Expired));
    let ad = e.params.iter().find(|(k, _)| *k == "adId")?;
    genuine
        .then(|| rm_schemas::ad_id::namespace_of(&ad.1))
        .flatten()
}

/// The inspector's report for `tracking_id` as `viewer` may see it (empty when
/// nothing was kept for it).
pub fn report(inspector: &Inspector, tracking_id: &str, viewer: &Viewer) -> Value {
    let mut kept = inspector.events(tracking_id);
    kept.retain(|(_, e)| viewer.sees(namespace_of(e)));
    let observed: Vec<_> = kept.iter().map(|(seq, e)| e.observed(*seq)).collect();
    let judged = inspect(&observed, inspector.thresholds());
    let events: Vec<Value> = kept
        .iter()
        .map(|(seq, e)| {
            let params: Map<String, Value> = e
                .params
                .iter()
                .map(|(k, v)| ((*k).to_owned(), Value::String(v.clone())))
                .collect();
            let mut o = json!({
                "seq": seq,
                "receivedAt": chrono::DateTime::from_timestamp_millis(e.received_at_ms)
                    .map(rm_schemas::record::format_received_at),
                "endpoint": e.endpoint,
                "params": params,
            });
            let (outcome, reason, field) = match &e.outcome {
                Outcome::Accepted => ("accepted", None, None),
                Outcome::Duplicate => ("duplicate", None, None),
                Outcome::NotRecorded => ("not_recorded", None, None),
                Outcome::Rejected { reason, field } => {
                    ("rejected", Some(reason.as_str()), Some(field.as_str()))
                }
            };
            o["outcome"] = json!(outcome);
            if let Some(r) = reason {
                o["reason"] = json!(r);
            }
            if let Some(f) = field {
                o["field"] = json!(f);
            }
            if let Some(m) = &e.message {
                o["message"] = json!(m);
            }
            if let Some(v) = e.ad_id_verdict {
                o["adIdVerdict"] = json!(v.as_str());
            }
            o
        })
        .collect();
    let note = if !inspector.enabled() {
        "the inspector is off on this edge (RM_INGEST_INSPECTOR=off)"
    } else if !inspector.samples(tracking_id) {
        "this tracking id is not sampled (RM_INGEST_INSPECTOR is a fraction); use another id or set it to on"
    } else if kept.is_empty() {
        "no event for this tracking id yet (or it was evicted: the least recently seen ids go first)"
    } else {
        "the latest events of this tracking id, oldest first"
    };
    // The served ads of these events that other shoppers fired too (each billed once,
    // to the first of them: `rm_store::model::served`).
    let mut ads: Vec<&str> = kept
        .iter()
        .filter_map(|(_, e)| e.params.iter().find(|(k, _)| *k == "adId"))
        .map(|(_, v)| v.as_str())
        .collect();
    ads.sort_unstable();
    ads.dedup();
    let shared: Vec<Value> = ads
        .iter()
        .zip(inspector.others_with(&ads, tracking_id, SHARED_CAP))
        .filter(|(_, n)| *n > 0)
        .map(|(ad, n)| {
            json!({
                "adId": ad,
                "otherTrackingIds": n,
                "note": "this served ad was fired by other shoppers too: it bills one \
                         impression, view and click per thing it carries, to the first; \
                         serve every page view its own ad (a page that caches ad \
                         responses across shoppers loses the rest)",
            })
        })
        .collect();
    json!({
        "trackingId": tracking_id,
        "sharedAdIds": shared,
        "inspector": {
            "enabled": inspector.enabled(),
            "sampled": inspector.samples(tracking_id),
            "kept": kept.len(),
            "note": note,
        },
        "events": events,
        "rules": judged.rules,
        "views": judged.views,
        "carts": judged.carts,
    })
}
