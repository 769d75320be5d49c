//! A shopper's identifiers erased on request, against the real binary (`all`, the
//! embedded backends), as a retailer and an attacker would try it:
//!
//! - another tenant erasing the same id removes nothing of ours (its erasure covers
//!   its namespace only), and cannot read our erasure (404);
//! - our erasure answers 200 once the aggregator ran it, with what it replaced; the
//!   carts report names the replacement where it named the id, with the same counts;
//!   the inspector has forgotten the id's events;
//! - the shopper's next event is stored under the replacement, never as the id;
//! - no token is a 401, a token without scope `shoppers` a 403, a control character
//!   or an id of more than 512 bytes a 400;
//! - after the process stops, no table of the report store holds the id.

#![allow(clippy::unwrap_used, missing_docs)]

use crate::common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use chrono::{SecondsFormat, Utc};
use common::{beacon, demo_token, enc, get, send, token, Service};
use rm_schemas::ad_id::{product_creative, AdIdKeys};
use serde_json::{json, Value};

const ERASED: &str = "cust-gone-5d1e90";
const KEPT: &str = "cust-stays-77a2c1";

fn call(api: SocketAddr, method: &str, path: &str, auth: &str) -> common::HttpResponse {
    let headers: Vec<(&str, &str)> = if auth.is_empty() {
        Vec::new()
    } else {
        vec![("Authorization", auth)]
    };
    send(api, method, path, &headers, b"").unwrap()
}

fn cart(edge: SocketAddr, ad: &str, customer: &str, units: u32) {
    let ts = Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true);
    let r = get(
        edge,
        &beacon(&[
            ("adId", ad),
            ("interactionType", "cart"),
            ("timestamp", &ts),
            ("customerId", customer),
            ("catalogId", "demo-catalog"),
            ("productCode", "crisps-salted"),
            ("units", &units.to_string()),
        ]),
    )
    .unwrap();
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
}

fn click(edge: SocketAddr, ad: &str, customer: &str) {
    let ts = Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true);
    for kind in ["productImpression", "productClick"] {
        let r = get(
            edge,
            &beacon(&[
                ("adId", ad),
                ("interactionType", kind),
                ("timestamp", &ts),
                ("customerId", customer),
                ("catalogId", "demo-catalog"),
                ("productCode", "crisps-salted"),
            ]),
        )
        .unwrap();
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    }
}

/// The carts report as `auth` sees it: (tracking id, units, adds) per line.
fn carts(api: SocketAddr, auth: &str) -> Vec<(String, u64, u64)> {
    let mut rows: Vec<(String, u64, u64)> = common::report_rows(api, auth, "/v1/reports/carts")
        .iter()
        .map(|r| {
            (
                r["trackingId"].as_str().unwrap().to_owned(),
                r["units"].as_u64().unwrap(),
                r["adds"].as_u64().unwrap(),
            )
        })
        .collect();
    rows.sort();
    rows
}

fn eventually<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let t = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(t.elapsed() < Duration::from_secs(60), "never: {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn erase(api: SocketAddr, auth: &str, id: &str) -> Value {
    let r = call(api, "DELETE", &format!("/v1/shoppers/{}", enc(id)), auth);
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert!(r
        .header("location")
        .is_some_and(|l| l.starts_with("/v1/shoppers/erasures/")));
    r.json()
}

#[test]
fn a_shoppers_ids_are_erased_in_the_callers_namespace_and_never_stored_again() {
    let dir = tempfile::tempdir().unwrap();
    let key = AdIdKeys::generate_key();
    let keys = AdIdKeys::from_list(&key).unwrap();
    let svc = Service::start(
        "all",
        dir.path(),
        &[
            ("RM_AD_ID_KEYS", key),
            ("RM_AGGREGATOR_BATCH_MAX_WAIT_MS", "100".to_owned()),
            ("RM_AGGREGATOR_ERASURES_SECS", "1".to_owned()),
            ("RM_AGGREGATOR_ERASURE_SETTLE_SECS", "3".to_owned()),
            ("RM_INGEST_INSPECTOR", "on".to_owned()),
        ],
    );
    svc.wait_ready(svc.api, Duration::from_secs(60));
    svc.wait_ready(svc.aggregator, Duration::from_secs(60));
    let (api, edge) = (svc.api, svc.ingest);
    let operator = format!("Bearer {}", demo_token(api));
    let ours = format!("Bearer {}", token(api, "demo-client", "demo-secret", None));
    let created = send(
        api,
        "POST",
        "/v1/admin/clients",
        &[
            ("Authorization", &operator),
            ("Content-Type", "application/json"),
        ],
        &serde_json::to_vec(&json!({"clientId": "rival-client", "namespaceId": "rival",
            "scopes": ["reports", "shoppers"]}))
        .unwrap(),
    )
    .unwrap();
    assert_eq!(created.status, 201);
    let rival_secret = created.json()["clientSecret"].as_str().unwrap().to_owned();
    let theirs = format!("Bearer {}", token(api, "rival-client", &rival_secret, None));

    let expires = Utc::now().timestamp() + 3_600;
    let our_ad = keys
        .mint_in(
            "demo",
            "demo-products",
            &product_creative("crisps-salted"),
            expires,
        )
        .unwrap();
    let their_ad = keys
        .mint_in(
            "rival",
            "rival-camp",
            &product_creative("crisps-salted"),
            expires,
        )
        .unwrap();
    cart(edge, &our_ad, ERASED, 2);
    click(edge, &our_ad, ERASED);
    cart(edge, &our_ad, KEPT, 1);
    cart(edge, &their_ad, ERASED, 1);
    let before = eventually("our carts", || {
        let c = carts(api, &ours);
        (c.len() == 2).then_some(c)
    });
    assert!(before.iter().any(|c| c.0 == ERASED), "{before:?}");
    // Theirs (a campaign their namespace does not hold: seen by the operator).
    eventually("their cart", || {
        (carts(api, &operator).len() == 3).then_some(())
    });

    // Refused without a token, without the scope, for a bad id.
    assert_eq!(call(api, "DELETE", "/v1/shoppers/x", "").status, 401);
    let reports_only = format!(
        "Bearer {}",
        token(api, "demo-client", "demo-secret", Some("reports"))
    );
    assert_eq!(
        call(
            api,
            "DELETE",
            &format!("/v1/shoppers/{ERASED}"),
            &reports_only
        )
        .status,
        403
    );
    for bad in ["%01", &"a".repeat(513)] {
        let r = call(api, "DELETE", &format!("/v1/shoppers/{bad}"), &ours);
        assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(&r.body));
        assert!(String::from_utf8_lossy(&r.body).contains("trackingId"));
    }

    // The rival tenant erases the same id: its own cart line only.
    let theirs_erased = erase(api, &theirs, ERASED);
    assert_eq!(theirs_erased["namespaceId"], "rival");
    assert_eq!(theirs_erased["status"], "done");
    assert_eq!(theirs_erased["erased"]["cartEvents"], 1, "{theirs_erased}");
    assert_eq!(carts(api, &ours), before, "ours untouched");
    let inspected = |auth: &str, id: &str| -> usize {
        let r = call(
            api,
            "GET",
            &format!("/v1/debug/events?trackingId={id}"),
            auth,
        );
        assert_eq!(r.status, 200);
        r.json()["events"].as_array().map_or(0, Vec::len)
    };
    assert_eq!(inspected(&ours, ERASED), 3, "our events of the id stay");
    let their_request = theirs_erased["requestId"].as_str().unwrap().to_owned();
    assert_eq!(
        call(
            api,
            "GET",
            &format!("/v1/shoppers/erasures/{their_request}"),
            &ours
        )
        .status,
        404,
        "another namespace's erasure is not ours to read"
    );

    // Ours.
    let done = erase(api, &ours, ERASED);
    assert_eq!(done["namespaceId"], "demo");
    assert_eq!(done["status"], "done");
    assert_eq!(done["inspectorEvents"], 3);
    let replacement = done["replacement"].as_str().unwrap().to_owned();
    assert!(replacement.starts_with("erased-"));
    assert_eq!(
        done["trackingIdSha256"],
        rm_store::model::erasure::digest(ERASED)
    );
    let erased = &done["erased"];
    assert!(erased["cartEvents"].as_u64().unwrap() >= 1, "{done}");
    assert!(erased["productFacts"].as_u64().unwrap() >= 2, "{done}");
    assert!(erased["touches"].as_u64().unwrap() >= 1, "{done}");
    let renamed: Vec<(String, u64, u64)> = {
        let mut v: Vec<_> = before
            .iter()
            .map(|(id, u, a)| {
                let id = if id == ERASED {
                    replacement.clone()
                } else {
                    id.clone()
                };
                (id, *u, *a)
            })
            .collect();
        v.sort();
        v
    };
    assert_eq!(
        carts(api, &ours),
        renamed,
        "the same counts, under the replacement"
    );
    assert_eq!(inspected(&ours, ERASED), 0, "the inspector forgot the id");
    let request = done["requestId"].as_str().unwrap();
    let read = common::api_json(api, &ours, &format!("/v1/shoppers/erasures/{request}"));
    assert_eq!(read["status"], "done");
    assert_eq!(read["erased"], done["erased"]);

    // The shopper goes on: stored under the replacement, never as the id.
    cart(edge, &our_ad, ERASED, 5);
    eventually("the next cart event", || {
        let c = carts(api, &ours);
        c.iter()
            .any(|(id, units, _)| *id == replacement && *units == 5)
            .then_some(())
    });
    assert!(carts(api, &ours).iter().all(|c| c.0 != ERASED));
    // Asking again finds nothing more to replace.
    let again = erase(api, &ours, ERASED);
    let total: u64 = again["erased"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(total, 0, "{again}");

    // Settled (the last one asked last): the audit log keeps the id's SHA-256, no
    // longer the id.
    let last = again["requestId"].as_str().unwrap();
    eventually("settled", || {
        let read = common::api_json(api, &ours, &format!("/v1/shoppers/erasures/{last}"));
        (read["settled"] == true).then_some(())
    });
    let data = svc.data_dir.clone();
    assert_eq!(svc.terminate(), Some(0));
    let store = rm_store::embedded::EmbeddedStore::path(&data);
    for (table, bytes) in rm_store::embedded::tables_content(&store).unwrap() {
        assert!(
            !bytes.windows(ERASED.len()).any(|w| w == ERASED.as_bytes()),
            "{table} holds the erased id"
        );
    }
}

/// One tenant cannot queue erasures without bound (each is a scan of the store that
/// the aggregator runs before anything else): with the aggregator looking only once
/// an hour, a namespace's ninth pending erasure is a 429, while another namespace's
/// is still taken.
#[test]
fn a_tenant_queues_at_most_eight_pending_erasures() {
    let dir = tempfile::tempdir().unwrap();
    let svc = Service::start(
        "all",
        dir.path(),
        &[
            ("RM_AGGREGATOR_ERASURES_SECS", "3600".to_owned()),
            ("RM_API_ERASURE_WAIT_SECS", "0".to_owned()),
        ],
    );
    svc.wait_ready(svc.api, Duration::from_secs(60));
    svc.wait_ready(svc.aggregator, Duration::from_secs(60));
    let api = svc.api;
    let ours = format!("Bearer {}", token(api, "demo-client", "demo-secret", None));
    for i in 0..8 {
        let r = call(api, "DELETE", &format!("/v1/shoppers/flood-{i}"), &ours);
        assert_eq!(r.status, 202, "{}", String::from_utf8_lossy(&r.body));
    }
    let r = call(api, "DELETE", "/v1/shoppers/flood-8", &ours);
    assert_eq!(r.status, 429, "{}", String::from_utf8_lossy(&r.body));
    let operator = format!("Bearer {}", demo_token(api));
    let created = send(
        api,
        "POST",
        "/v1/admin/clients",
        &[
            ("Authorization", &operator),
            ("Content-Type", "application/json"),
        ],
        &serde_json::to_vec(&json!({"clientId": "other-client", "namespaceId": "other",
            "scopes": ["shoppers"]}))
        .unwrap(),
    )
    .unwrap();
    assert_eq!(created.status, 201);
    let secret = created.json()["clientSecret"].as_str().unwrap().to_owned();
    let theirs = format!("Bearer {}", token(api, "other-client", &secret, None));
    let r = call(api, "DELETE", "/v1/shoppers/flood-0", &theirs);
    assert_eq!(r.status, 202, "another namespace's own share");
}
