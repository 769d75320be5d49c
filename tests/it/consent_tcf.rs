//! The edge's TCF decoding and consent rule (`rm_ingest::consent`) against the IAB's
//! own library, `@iabtechlabtcf/core` from npm (`tests/js/tcf_strings.mjs`): strings
//! the library encodes from consent choices (our vendor's purposes consented, another
//! vendor's only, a purpose missing, on legitimate interest or objected to, ranges of
//! thousands of vendors, a publisher restriction) are decided as the choices say, and
//! the specification's published example strings decode to what the library reads.
//!
//! Skipped with a message when node or the npm package is missing, unless
//! `RM_REQUIRE_SERVICES=1`, where it fails.

#![allow(clippy::unwrap_used, missing_docs)]

use std::path::Path;
use std::process::Command;

use rm_ingest::consent::tc_string::decode;
use rm_ingest::consent::{ConsentPolicy, Decision};
use serde_json::Value;

const VENDOR: u16 = 1234;

/// The library's output, installing the package from the lockfile when missing.
fn from_the_iab_library() -> Option<Value> {
    let js = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/js");
    let marker = js.join("node_modules/@iabtechlabtcf/core/package.json");
    if !marker.exists() {
        let _ = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--prefix"])
            .arg(&js)
            .output();
    }
    let out = Command::new("node")
        .current_dir(&js)
        .args(["tcf_strings.mjs", &VENDOR.to_string()])
        .output();
    match out {
        Ok(o) if o.status.success() && marker.exists() => {
            Some(serde_json::from_slice(&o.stdout).unwrap())
        }
        other => {
            let why = format!("node or @iabtechlabtcf/core unavailable: {other:?}");
            assert!(
                std::env::var("RM_REQUIRE_SERVICES").as_deref() != Ok("1"),
                "{why}, and RM_REQUIRE_SERVICES=1"
            );
            eprintln!("skipped: {why}");
            None
        }
    }
}

fn ids(v: &Value) -> Vec<u64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect()
}

#[test]
fn strings_of_the_iab_library_are_decided_and_decoded_as_it_reads_them() {
    let Some(lib) = from_the_iab_library() else {
        return;
    };
    let made = lib["made"].as_array().unwrap();
    assert!(made.len() >= 10, "{made:?}");
    for case in made {
        let policy = ConsentPolicy::new(VENDOR, case["policy"].as_str().unwrap()).unwrap();
        let got = match policy.decide(case["tc"].as_str().unwrap()) {
            Decision::Allowed => "allowed",
            Decision::Refused(r) => r.reason(),
        };
        assert_eq!(got, case["decision"], "{}: {}", case["name"], case["tc"]);
    }
    let examples = lib["examples"].as_array().unwrap();
    assert!(!examples.is_empty());
    for e in examples {
        let tc = decode(e["tc"].as_str().unwrap()).unwrap();
        let purposes = |f: &dyn Fn(u8) -> bool| -> Vec<u64> {
            (1..=24u8).filter(|&p| f(p)).map(u64::from).collect()
        };
        assert_eq!(u64::from(tc.cmp_id), e["cmpId"].as_u64().unwrap());
        assert_eq!(
            u64::from(tc.vendor_list_version),
            e["vendorListVersion"].as_u64().unwrap()
        );
        assert_eq!(
            u64::from(tc.policy_version),
            e["policyVersion"].as_u64().unwrap()
        );
        assert_eq!(tc.created_ds * 100, e["created"].as_u64().unwrap());
        assert_eq!(
            purposes(&|p| tc.purpose_consent(p)),
            ids(&e["purposeConsents"])
        );
        assert_eq!(
            purposes(&|p| tc.purpose_li(p)),
            ids(&e["purposeLegitimateInterests"])
        );
        let vendors = |v: &rm_ingest::consent::tc_string::Vendors| -> Vec<u64> {
            v.ids().map(u64::from).collect()
        };
        assert_eq!(vendors(&tc.vendor_consents), ids(&e["vendorConsents"]));
        assert_eq!(vendors(&tc.vendor_li), ids(&e["vendorLegitimateInterests"]));
    }
}

/// The consent stage through `retail-media all` (`RM_TCF_VENDOR_ID` set): a product
/// click whose consent string (made by the IAB's library) refuses our vendor is still
/// counted, but credits no order of the shopper it names and never reaches the
/// inspector; one whose string allows us does both. Counted by outcome in metrics.
#[test]
fn events_without_consent_count_but_credit_no_order_and_reach_no_inspector() {
    use crate::common::{self, beacon, demo_token, free_port, get, send, Service};
    use rm_schemas::ad_id::AdIdKeys;
    use serde_json::json;
    use std::time::{Duration, Instant};

    let Some(lib) = from_the_iab_library() else {
        return;
    };
    let string = |name: &str| -> String {
        lib["made"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap()["tc"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let (allowed, refused) = (string("consented"), string("another vendor only"));
    let dir = tempfile::tempdir().unwrap();
    let key = AdIdKeys::generate_key();
    let keys = AdIdKeys::from_list(&key).unwrap();
    let api_port = free_port();
    let svc = Service::start(
        "all",
        dir.path(),
        &[
            ("RM_AD_ID_KEYS", key),
            ("RM_TCF_VENDOR_ID", VENDOR.to_string()),
            ("RM_AGGREGATOR_BATCH_MAX_WAIT_MS", "100".to_owned()),
            ("RM_API_ADDR", format!("127.0.0.1:{api_port}")),
            (
                "RM_INGEST_JWKS_URL",
                format!("http://127.0.0.1:{api_port}/.well-known/jwks.json"),
            ),
        ],
    );
    let api: std::net::SocketAddr = ([127, 0, 0, 1], api_port).into();
    svc.wait_ready(api, Duration::from_secs(60));
    let token = demo_token(api);
    let run = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let now = chrono::Utc::now();
    // One served ad per shopper (a served ad bills one click).
    let mint = || {
        keys.mint_in("demo", "camp-consent", "banner", now.timestamp() + 3_600)
            .unwrap()
    };
    let ts = |s: i64| {
        (now - chrono::Duration::seconds(120) + chrono::Duration::seconds(s))
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
    };
    let shoppers = [
        (format!("c-allowed-{run}"), allowed.as_str()),
        (format!("c-refused-{run}"), refused.as_str()),
    ];
    for (shopper, consent) in &shoppers {
        let ad = mint();
        for (kind, s) in [("productImpression", 0), ("productClick", 1)] {
            let r = get(
                svc.ingest,
                &beacon(&[
                    ("adId", &ad),
                    ("interactionType", kind),
                    ("customerId", shopper),
                    ("sessionId", &format!("s-{shopper}")),
                    ("catalogId", "demo-catalog"),
                    ("productCode", "cola-1l"),
                    ("timestamp", &ts(s)),
                    ("iabConsentString", consent),
                ]),
            )
            .unwrap();
            assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        }
        let order = json!({"orders": [{"id": format!("o-{shopper}"), "customerId": shopper,
            "orderDate": ts(60), "catalogId": "demo-catalog",
            "orderItems": [{"productCode": "cola-1l", "quantity": 1,
                "totalOrderItemPriceAfterDiscounts": 1.29}]}]});
        common::post_orders(api, &order);
    }
    // Both clicks count; only the allowed shopper's order is credited, the other is
    // reported unattributed (campaign "").
    let day = ts(0)[..10].to_owned();
    let t = Instant::now();
    loop {
        let sales = common::api_json(
            api,
            &format!("Bearer {token}"),
            &format!("/v1/reports/sales?from={day}&to={day}&catalogId=demo-catalog"),
        );
        let products = common::api_json(
            api,
            &format!("Bearer {token}"),
            "/v1/reports/products?campaignId=camp-consent",
        );
        let orders = |campaign: &str| -> u64 {
            sales["rows"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|r| r["campaignId"] == campaign && r["productCode"] == "cola-1l")
                .map(|r| r["orders"].as_u64().unwrap())
                .sum()
        };
        let clicks: u64 = products["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["clicks"].as_u64().unwrap_or(0))
            .sum();
        if clicks == 2 && orders("camp-consent") == 1 && orders("") >= 1 {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "clicks {clicks}, sales {sales}; log:\n{}",
            svc.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // The inspector holds the allowed shopper's events, none of the other's (under
    // either the ids it sent or any other).
    let inspect = |id: &str| -> serde_json::Value {
        let r = send(
            svc.ingest,
            "GET",
            &format!("/v1/debug/events?trackingId={id}"),
            &[("Authorization", &format!("Bearer {token}"))],
            b"",
        )
        .unwrap();
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        r.json()
    };
    let events = |v: &serde_json::Value| v["events"].as_array().map_or(0, Vec::len);
    assert_eq!(events(&inspect(&shoppers[0].0)), 2);
    assert_eq!(events(&inspect(&shoppers[1].0)), 0);
    let metrics = String::from_utf8(get(svc.ingest, "/metrics").unwrap().body).unwrap();
    let count = |outcome: &str| -> f64 {
        let series = format!("ingest_consent_total{{outcome=\"{outcome}\"}}");
        metrics
            .lines()
            .find(|l| l.starts_with(&series))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0)
    };
    assert_eq!(
        (count("allowed"), count("no_consent")),
        (2.0, 2.0),
        "{metrics}"
    );
}
