//! The OpenAPI document describes what the handlers answer: every operation of
//! `/openapi.json` is called on its happy path against the real binary (the quick
//! start's demo data), answers its documented success status and content type, and
//! each JSON answer validates against the schema the document gives for it
//! (`jsonschema_rs`, the validator schemathesis itself uses, from its venv made by
//! `deploy/local/schemathesis.sh`, with
//! OpenAPI 3.0's `nullable` read as a `null` type). An operation the test does not
//! call fails it, so a new route cannot go undocumented or unchecked.
//!
//! Schemathesis (`api_schemathesis`) fuzzes every operation but mostly reaches 4xx
//! answers; this test is the other half: the 2xx bodies.
#![allow(clippy::unwrap_used, missing_docs)]

use crate::common;

use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;

use base64::Engine as _;
use common::{demo_token, get, required_setting, send, token, Service};
use serde_json::{json, Value};

/// One call: method, the document's path template, the request target, headers, body.
struct Call {
    method: &'static str,
    template: &'static str,
    target: String,
    headers: Vec<(&'static str, String)>,
    body: Vec<u8>,
}

fn call(
    method: &'static str,
    template: &'static str,
    target: &str,
    auth: &str,
    body: Value,
) -> Call {
    let mut headers = vec![("Authorization", auth.to_owned())];
    let body = if body.is_null() {
        Vec::new()
    } else {
        headers.push(("Content-Type", "application/json".to_owned()));
        serde_json::to_vec(&body).unwrap()
    };
    Call {
        method,
        template,
        target: target.to_owned(),
        headers,
        body,
    }
}

/// The venv python that has `jsonschema`, or `None` (the test skips) when it could not
/// be installed.
fn validator_python() -> Option<String> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let st = Command::new("bash")
        .arg(root.join("deploy/local/schemathesis.sh"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
    match st {
        Some(st) => Some(st.replace("/bin/schemathesis", "/bin/python")),
        None => {
            required_setting(
                "RM_SCHEMATHESIS_REQUIRED_BUT_MISSING",
                "jsonschema (deploy/local/schemathesis.sh)",
            )?;
            None
        }
    }
}

const VALIDATE: &str = r#"
import json, sys
from jsonschema_rs import Draft4Validator
doc = json.load(open(sys.argv[1]))
answers = json.load(open(sys.argv[2]))

def nullable(s):
    if isinstance(s, list):
        return [nullable(x) for x in s]
    if not isinstance(s, dict):
        return s
    s = {k: (v if k == "enum" else nullable(v)) for k, v in s.items()}
    if s.pop("nullable", False):
        if "type" in s:
            t = s["type"]
            s["type"] = (t if isinstance(t, list) else [t]) + ["null"]
        else:
            s = {"anyOf": [s, {"type": "null"}]}
    return s

components = nullable(doc["components"])
failed = 0
for a in answers:
    where = f'{a["method"]} {a["template"]} -> {a["status"]}'
    op = doc["paths"][a["template"]][a["method"].lower()]
    content = op["responses"][str(a["status"])]["content"]
    media = a["contentType"].split(";")[0].strip()
    if media not in content:
        print(f"FAIL {where}: {media} not documented ({list(content)})")
        failed += 1
        continue
    if media != "application/json":
        print(f"ok   {where}: {media}")
        continue
    schema = dict(nullable(content[media]["schema"]))
    schema["components"] = components
    errors = list(Draft4Validator(schema).iter_errors(a["body"]))
    for e in errors[:5]:
        print(f"FAIL {where}: {'/'.join(map(str, e.instance_path))}: {e.message[:300]}")
    failed += bool(errors)
    if not errors:
        print(f"ok   {where}")
print(f"{len(answers) - failed} answers valid, {failed} not")
sys.exit(1 if failed else 0)
"#;

#[test]
fn every_operations_answer_validates_against_the_document() {
    let Some(python) = validator_python() else {
        eprintln!("SKIPPED: jsonschema could not be installed");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let svc = Service::start("all", dir.path(), &[]);
    svc.wait_ready(svc.api, Duration::from_secs(60));
    let api = svc.api;
    let doc: Value = get(api, "/openapi.json").unwrap().json();
    let partner = format!("Bearer {}", token(api, "demo-client", "demo-secret", None));
    let operator = format!("Bearer {}", demo_token(api));
    let basic = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode("demo-client:demo-secret")
    );
    let orders_key = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode("demo-orders-key:")
    );

    let mut calls = vec![
        Call {
            method: "POST",
            template: "/v1/oauth2/token",
            target: "/v1/oauth2/token".into(),
            headers: vec![
                ("Authorization", basic),
                ("Content-Type", "application/x-www-form-urlencoded".into()),
            ],
            body: b"grant_type=client_credentials".to_vec(),
        },
        call("GET", "/.well-known/jwks.json", "/.well-known/jwks.json", "", Value::Null),
        call(
            "GET",
            "/.well-known/revoked-clients.json",
            "/.well-known/revoked-clients.json",
            "",
            Value::Null,
        ),
        call("GET", "/openapi.json", "/openapi.json", "", Value::Null),
        call("GET", "/sdk/beacon.js", "/sdk/beacon.js", "", Value::Null),
        call(
            "POST",
            "/v1/segments",
            "/v1/segments",
            &partner,
            json!({"segment": {"id": "conf-seg", "name": "Runners", "category": ["sport"]}}),
        ),
        call("GET", "/v1/segments/{segment.id}", "/v1/segments/conf-seg", &partner, Value::Null),
        call(
            "PUT",
            "/v1/segments/{segment.id}",
            "/v1/segments/conf-seg",
            &partner,
            json!({"segment": {"name": "Trail runners"}}),
        ),
        call(
            "POST",
            "/v3/bannerx-campaigns",
            "/v3/bannerx-campaigns",
            &partner,
            json!({"bannerXCampaign": {"id": "conf-camp", "name": "Conformance", "campaignState": "CAMPAIGN_STATE_DRAFT", "fixedCosts": {"creativeCost": "$1.00"}}}),
        ),
        call(
            "GET",
            "/v3/bannerx-campaigns/{id}",
            "/v3/bannerx-campaigns/conf-camp",
            &partner,
            Value::Null,
        ),
        call(
            "POST",
            "/v3/bannerx-campaigns/{id}:approve",
            "/v3/bannerx-campaigns/conf-camp:approve",
            &partner,
            json!({"approval": {"state": "APPROVAL_STATE_APPROVED"}}),
        ),
        call(
            "POST",
            "/v1/products",
            "/v1/products",
            &partner,
            json!({"products": [{"catalogId": "demo-catalog", "productCode": "conf-1", "name": "Conformance cola"}]}),
        ),
        call(
            "POST",
            "/v1/ads/generate",
            "/v1/ads/generate",
            &partner,
            json!({"sessionId": "conf-s1", "placement": "category", "catalogId": "demo-catalog", "maxNumberOfAds": 5}),
        ),
        call(
            "GET",
            "/v1/debug/events",
            "/v1/debug/events?trackingId=conf-s1",
            &partner,
            Value::Null,
        ),
        Call {
            method: "POST",
            template: "/v1/orders",
            target: "/v1/orders".into(),
            headers: vec![
                ("Authorization", orders_key),
                ("Content-Type", "application/json".into()),
            ],
            body: serde_json::to_vec(&json!({"orders": [{"id": "conf-o1", "customerId": "cust-1", "orderDate": "2026-11-22T10:00:00Z",
                "catalogId": "demo-catalog", "currency": "EUR",
                "orderItems": [{"productCode": "cola-1l", "quantity": 2, "regularUnitPrice": 1.29, "totalOrderItemPriceAfterDiscounts": 2.58}]}]}))
            .unwrap(),
        },
        call(
            "POST",
            "/v1/admin/clients",
            "/v1/admin/clients",
            &operator,
            json!({"clientId": "conf-client", "namespaceId": "conf", "scopes": ["reports"]}),
        ),
        call("GET", "/v1/admin/clients", "/v1/admin/clients", &operator, Value::Null),
        call(
            "DELETE",
            "/v1/admin/clients/{clientId}",
            "/v1/admin/clients/conf-client",
            &operator,
            Value::Null,
        ),
        call(
            "POST",
            "/v1/admin/order-keys",
            "/v1/admin/order-keys",
            &operator,
            json!({"namespaceId": "conf"}),
        ),
    ];
    calls.push(call(
        "DELETE",
        "/v1/shoppers/{trackingId}",
        "/v1/shoppers/cust-1",
        &partner,
        Value::Null,
    ));
    for template in [
        "/v1/reports/video-funnel",
        "/v1/reports/products",
        "/v1/reports/ads",
        "/v1/reports/campaigns",
        "/v1/reports/carts",
        "/v1/reports/carts/campaigns",
        "/v1/reports/sales",
    ] {
        calls.push(call("GET", template, template, &partner, Value::Null));
    }
    for page in ["/reports", "/reports/reports.js", "/reports/reports.css"] {
        calls.push(call("GET", page, page, "", Value::Null));
    }

    let mut answers = Vec::new();
    let mut called = BTreeSet::new();
    let mut new_key = None;
    let mut erasure = None;
    for c in &calls {
        let headers: Vec<(&str, &str)> = c
            .headers
            .iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| (*k, v.as_str()))
            .collect();
        let r = send(api, c.method, &c.target, &headers, &c.body).unwrap();
        let documented = &doc["paths"][c.template][c.method.to_lowercase()];
        assert!(
            documented.is_object(),
            "{} {} is not documented",
            c.method,
            c.template
        );
        let ok: Vec<&String> = documented["responses"]
            .as_object()
            .unwrap()
            .keys()
            .filter(|s| s.starts_with('2'))
            .collect();
        assert!(
            ok.contains(&&r.status.to_string()),
            "{} {}: {} (documented {ok:?}): {}",
            c.method,
            c.target,
            r.status,
            String::from_utf8_lossy(&r.body)
        );
        let content_type = r.header("content-type").unwrap_or("").to_owned();
        let body = if content_type.starts_with("application/json") {
            r.json()
        } else {
            Value::Null
        };
        if c.template == "/v1/admin/order-keys" {
            new_key = body["keyId"].as_str().map(str::to_owned);
        }
        if c.template == "/v1/shoppers/{trackingId}" {
            erasure = body["requestId"].as_str().map(str::to_owned);
        }
        called.insert((c.method.to_owned(), c.template.to_owned()));
        answers.push(json!({"method": c.method, "template": c.template, "status": r.status, "contentType": content_type, "body": body}));
    }
    // The key made above, removed.
    let key = new_key.expect("a created order key");
    let r = send(
        api,
        "DELETE",
        &format!("/v1/admin/order-keys/{key}"),
        &[("Authorization", &operator)],
        b"",
    )
    .unwrap();
    assert_eq!(r.status, 200);
    called.insert(("DELETE".into(), "/v1/admin/order-keys/{keyId}".into()));
    answers.push(json!({"method": "DELETE", "template": "/v1/admin/order-keys/{keyId}", "status": 200, "contentType": r.header("content-type").unwrap_or(""), "body": r.json()}));

    // The erasure made above, read back.
    let erasure = erasure.expect("an erasure's request id");
    let r = send(
        api,
        "GET",
        &format!("/v1/shoppers/erasures/{erasure}"),
        &[("Authorization", &partner)],
        b"",
    )
    .unwrap();
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    called.insert(("GET".into(), "/v1/shoppers/erasures/{requestId}".into()));
    answers.push(json!({"method": "GET", "template": "/v1/shoppers/erasures/{requestId}", "status": 200, "contentType": r.header("content-type").unwrap_or(""), "body": r.json()}));

    let documented: BTreeSet<(String, String)> = doc["paths"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(path, ops)| {
            ops.as_object()
                .unwrap()
                .keys()
                .map(move |m| (m.to_uppercase(), path.clone()))
        })
        .collect();
    assert_eq!(
        called, documented,
        "every documented operation is called once here, and nothing else"
    );

    let doc_path = dir.path().join("openapi.json");
    let answers_path = dir.path().join("answers.json");
    std::fs::write(&doc_path, doc.to_string()).unwrap();
    std::fs::write(&answers_path, Value::Array(answers).to_string()).unwrap();
    let out = Command::new(&python)
        .args(["-c", VALIDATE])
        .arg(&doc_path)
        .arg(&answers_path)
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    eprintln!("{report}{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        out.status.success(),
        "answers that contradict the document:\n{report}"
    );
    svc.terminate();
}
