//! Tenancy end to end: two namespaces on one deployment, each with its client,
//! orders key, catalog (the same catalog id in both), campaign, segment, served ads,
//! beacons by one shared shopper, and an order of the same id. Then every route of
//! the route table (enumerated from `/openapi.json`, so a new route cannot be left
//! out) is called with each namespace's token on the other's ids, and no answer
//! holds anything of the other namespace: statuses as documented, bodies checked for
//! the other's ids. Attribution: each namespace's order is credited to its own
//! campaign, although the shared shopper clicked the other's ad after its own.
//!
//! Runs on the embedded state, log and store always, and on PostgreSQL + Kafka +
//! ClickHouse when `deploy/local/up.sh` started them (skipped with a message
//! otherwise, failing under `RM_REQUIRE_SERVICES=1`). The operator API (create,
//! list, remove clients; a removed client's token refused on this instance at once
//! and on a second api instance sharing PostgreSQL within its refresh) is tested
//! here too.

#![allow(clippy::unwrap_used, missing_docs)]

use crate::common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::{send, token, HttpResponse, Service};
use serde_json::{json, Value};

const TENANTS: [&str; 2] = ["acme", "brand"];
const CATALOG: &str = "shared-cat";
const SHOPPER: &str = "shopper-1";

fn bearer(tok: &str) -> String {
    format!("Bearer {tok}")
}

fn call(
    api: SocketAddr,
    method: &str,
    target: &str,
    tok: &str,
    body: Option<&Value>,
) -> HttpResponse {
    let auth = bearer(tok);
    let bytes = body
        .map(|b| serde_json::to_vec(b).unwrap())
        .unwrap_or_default();
    let mut headers = vec![("Authorization", auth.as_str())];
    if body.is_some() {
        headers.push(("Content-Type", "application/json"));
    }
    send(api, method, target, &headers, &bytes).unwrap()
}

fn ok(r: &HttpResponse, what: &str) -> Value {
    assert!(
        (200..300).contains(&r.status),
        "{what}: {} {}",
        r.status,
        String::from_utf8_lossy(&r.body)
    );
    r.json()
}

/// What one namespace holds after the set-up.
struct Tenant {
    ns: &'static str,
    client: String,
    secret: String,
    key_id: String,
    key: String,
    campaign: String,
    segment: String,
    product: String,
    /// An erasure it asked for (of a shopper of its own): its request id.
    erasure: String,
}

impl Tenant {
    fn token(&self, api: SocketAddr) -> String {
        token(api, &self.client, &self.secret, None)
    }

    /// Strings that must never appear in an answer to another namespace.
    fn markers(&self) -> Vec<String> {
        vec![
            self.campaign.clone(),
            self.segment.clone(),
            self.product.clone(),
            self.client.clone(),
            self.key_id.clone(),
            format!("rm2.{}.", self.ns),
        ]
    }
}

fn now_rfc3339(offset_ms: i64) -> String {
    (chrono::Utc::now() + chrono::Duration::milliseconds(offset_ms))
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// Creates a client as the operator (201): the answer, its secret shown once.
fn new_client(api: SocketAddr, operator: &str, id: &str, ns: &str, scopes: &[&str]) -> Value {
    let body = json!({"clientId": id, "namespaceId": ns, "scopes": scopes});
    let r = call(api, "POST", "/v1/admin/clients", operator, Some(&body));
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let v = r.json();
    assert_eq!(v["namespaceId"], ns);
    v
}

/// Creates the tenant's client and key (as the operator), then its catalog,
/// campaign and segment (as itself).
fn set_up(api: SocketAddr, operator: &str, ns: &'static str) -> Tenant {
    let client = format!("{ns}-client");
    let created = new_client(
        api,
        operator,
        &client,
        ns,
        &["ads", "segments", "campaigns", "reports", "shoppers"],
    );
    let secret = created["clientSecret"].as_str().unwrap().to_owned();
    let key = ok(
        &call(
            api,
            "POST",
            "/v1/admin/order-keys",
            operator,
            Some(&json!({"namespaceId": ns})),
        ),
        "create order key",
    );
    let mut t = Tenant {
        ns,
        client,
        secret,
        key_id: key["keyId"].as_str().unwrap().to_owned(),
        key: key["apiKey"].as_str().unwrap().to_owned(),
        // Unique per run: the `orders` topic outlives a test on Kafka, and with it the
        // touches offered to earlier runs' orders (a fresh store replays them; they
        // credit those runs' campaigns, which this run's tenants do not own).
        campaign: format!("{ns}-camp-{}", run_tag()),
        segment: format!("{ns}-seg"),
        product: format!("{ns}-p1"),
        erasure: String::new(),
    };
    let tok = t.token(api);
    ok(
        &call(
            api,
            "POST",
            "/v1/products",
            &tok,
            Some(
                &json!({"products": [{"catalogId": CATALOG, "productCode": t.product,
                         "name": format!("{ns} product"), "categories": ["food"]}]}),
            ),
        ),
        "products",
    );
    let campaign = json!({"bannerXCampaign": {
        "id": t.campaign, "name": format!("{ns} campaign"),
        "campaignState": "CAMPAIGN_STATE_ACTIVE", "catalogIds": [CATALOG],
        "approval": {"state": "APPROVAL_STATE_APPROVED"},
        "settings": {"campaignType": "CAMPAIGN_TYPE_SPONSORED_PRODUCTS", "isWildcard": true},
        "fixedCosts": {"dataCost": "$10.00"},
        "strategy": {"auction": {"maxBid": "$1.00"}}}});
    let c = ok(
        &call(api, "POST", "/v3/bannerx-campaigns", &tok, Some(&campaign)),
        "campaign",
    );
    assert_eq!(
        c["bannerXCampaign"]["namespaceId"], ns,
        "created in the caller's namespace"
    );
    let s = ok(
        &call(
            api,
            "POST",
            "/v1/segments",
            &tok,
            Some(&json!({"segment": {"id": t.segment, "name": ns}})),
        ),
        "segment",
    );
    assert_eq!(s["segment"]["namespaceId"], ns);
    let erased = call(
        api,
        "DELETE",
        &format!("/v1/shoppers/{ns}-gone"),
        &tok,
        None,
    );
    assert!(
        [200, 202].contains(&erased.status),
        "{}",
        String::from_utf8_lossy(&erased.body)
    );
    let erased = erased.json();
    assert_eq!(erased["namespaceId"], ns, "an erasure of its own namespace");
    t.erasure = erased["requestId"].as_str().unwrap().to_owned();
    t
}

/// The tenant's ad for the shared catalog (waiting for the ads index to pick the
/// campaign up): its realised id.
fn serve_ad(api: SocketAddr, t: &Tenant) -> String {
    let tok = t.token(api);
    let req = json!({"sessionId": SHOPPER, "placement": "category", "catalogId": CATALOG, "maxNumberOfAds": 5});
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let r = ok(
            &call(api, "POST", "/v1/ads/generate", &tok, Some(&req)),
            "ads",
        );
        let ads = r["ads"].as_array().unwrap();
        if let Some(a) = ads.first() {
            let text = r.to_string();
            for a in ads {
                assert_eq!(
                    a["campaignId"],
                    t.campaign.as_str(),
                    "only its own campaigns: {text}"
                );
                assert_eq!(
                    a["productCode"],
                    t.product.as_str(),
                    "only its own catalog: {text}"
                );
            }
            let id = a["partnerAdId"].as_str().unwrap().to_owned();
            assert!(id.starts_with(&format!("rm2.{}.", t.ns)), "{id}");
            return id;
        }
        assert!(
            Instant::now() < until,
            "no ad served for {} within 30 s",
            t.ns
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn fire(edge: SocketAddr, ad: &str, itype: &str, product: &str) {
    let ts = now_rfc3339(0);
    let path = common::beacon(&[
        ("adId", ad),
        ("interactionType", itype),
        ("timestamp", &ts),
        ("sessionId", SHOPPER),
        ("catalogId", CATALOG),
        ("productCode", product),
    ]);
    let r = common::get(edge, &path).unwrap();
    assert_eq!(
        r.status,
        200,
        "{itype}: {}",
        String::from_utf8_lossy(&r.body)
    );
}

/// A tag of this test process, the same for every call.
fn run_tag() -> &'static str {
    static TAG: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TAG.get_or_init(|| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        format!("{}-{nanos}", std::process::id())
    })
}

fn order(api: SocketAddr, t: &Tenant, id: &str) -> Value {
    let body = json!({"orders": [{"id": id, "sessionId": SHOPPER, "orderDate": now_rfc3339(1000),
        "catalogId": CATALOG, "orderItems": [{"productCode": t.product, "quantity": 1,
        "totalOrderItemPriceAfterDiscounts": 20.0}]}]});
    let auth = format!("Basic {}", base64_user(&t.key));
    let r = send(
        api,
        "POST",
        "/v1/orders",
        &[
            ("Authorization", &auth),
            ("Content-Type", "application/json"),
        ],
        &serde_json::to_vec(&body).unwrap(),
    )
    .unwrap();
    ok(&r, "orders")
}

fn base64_user(key: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(format!("{key}:"))
}

/// Polls the tenant's sales report until its order is credited.
fn wait_for_sales(api: SocketAddr, t: &Tenant) -> Value {
    let tok = t.token(api);
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let r = ok(&call(api, "GET", "/v1/reports/sales", &tok, None), "sales");
        let credited = r["rows"]
            .as_array()
            .unwrap()
            .iter()
            .any(|row| row["orders"] == 1 && row["campaignId"] != "");
        if credited {
            return r;
        }
        assert!(
            Instant::now() < until,
            "{}'s order not credited within 60 s: {r}",
            t.ns
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Fills the path template with `other`'s ids.
fn target_for(path: &str, other: &Tenant) -> String {
    let mut out = path.to_owned();
    for (var, value) in [
        ("{segment.id}", other.segment.as_str()),
        ("{id}", other.campaign.as_str()),
        ("{clientId}", other.client.as_str()),
        ("{keyId}", other.key_id.as_str()),
        ("{requestId}", other.erasure.as_str()),
        ("{trackingId}", "probe-shopper"),
    ] {
        out = out.replace(var, value);
    }
    out
}

/// Calls every route of the table as `me` on `other`'s ids and checks statuses and
/// bodies. Returns how many operations were called.
fn matrix(api: SocketAddr, me: &Tenant, other: &Tenant) -> usize {
    let tok = me.token(api);
    let doc = common::get(api, "/openapi.json").unwrap().json();
    let markers = other.markers();
    let mut calls = 0;
    for (path, ops) in doc["paths"].as_object().unwrap() {
        for (method, _) in ops.as_object().unwrap() {
            let method = method.to_uppercase();
            let target = target_for(path, other);
            let (expect, responses): (&[u16], Vec<HttpResponse>) = match (
                method.as_str(),
                path.as_str(),
            ) {
                ("POST", "/v1/oauth2/token") => (
                    &[200],
                    vec![common::send(
                        api,
                        "POST",
                        path,
                        &[
                            (
                                "Authorization",
                                &format!("Basic {}", {
                                    use base64::Engine as _;
                                    base64::engine::general_purpose::STANDARD
                                        .encode(format!("{}:{}", me.client, me.secret))
                                }),
                            ),
                            ("Content-Type", "application/x-www-form-urlencoded"),
                        ],
                        b"grant_type=client_credentials",
                    )
                    .unwrap()],
                ),
                ("POST", "/v1/segments") => (
                    &[403],
                    vec![call(
                        api,
                        "POST",
                        path,
                        &tok,
                        Some(&json!({"segment": {"id": "probe-seg", "namespaceId": other.ns}})),
                    )],
                ),
                ("PUT", p) if p.starts_with("/v1/segments/") => (
                    &[404],
                    vec![call(
                        api,
                        "PUT",
                        &target,
                        &tok,
                        Some(&json!({"segment": {"name": "taken over"}})),
                    )],
                ),
                ("GET", p)
                    if p.starts_with("/v1/segments/") || p == "/v3/bannerx-campaigns/{id}" =>
                {
                    (&[404], vec![call(api, "GET", &target, &tok, None)])
                }
                ("POST", "/v3/bannerx-campaigns") => (
                    &[403],
                    vec![call(
                        api,
                        "POST",
                        path,
                        &tok,
                        Some(
                            &json!({"bannerXCampaign": {"id": "probe-camp", "namespaceId": other.ns}}),
                        ),
                    )],
                ),
                ("POST", "/v3/bannerx-campaigns/{id}:approve") => (
                    &[404],
                    vec![call(
                        api,
                        "POST",
                        &target,
                        &tok,
                        Some(
                            &json!({"approval": {"state": "APPROVAL_STATE_REJECTED", "rejectionReason": "x"}}),
                        ),
                    )],
                ),
                ("POST", "/v1/products") => (
                    &[403],
                    vec![call(
                        api,
                        "POST",
                        path,
                        &tok,
                        Some(
                            &json!({"products": [{"namespaceId": other.ns, "catalogId": CATALOG, "productCode": "evil"}]}),
                        ),
                    )],
                ),
                ("POST", "/v1/ads/generate") => (
                    &[200],
                    vec![call(
                        api,
                        "POST",
                        path,
                        &tok,
                        Some(
                            &json!({"sessionId": SHOPPER, "placement": "category", "catalogId": CATALOG, "maxNumberOfAds": 10}),
                        ),
                    )],
                ),
                ("GET", "/v1/debug/events") => (
                    &[200],
                    vec![call(
                        api,
                        "GET",
                        &format!("{path}?trackingId={SHOPPER}"),
                        &tok,
                        None,
                    )],
                ),
                ("POST", "/v1/orders") => {
                    // The same order id as the other namespace's: a new order here.
                    let r = order(api, me, &format!("probe-{}", me.key_id));
                    assert_eq!(r["accepted"], 1, "{r}");
                    (&[200], Vec::new())
                }
                (_, p) if p.starts_with("/v1/admin/") => {
                    let body = (method == "POST").then(
                        || json!({"clientId": "probe", "namespaceId": me.ns, "scopes": ["ads"]}),
                    );
                    let body = if p.contains("order-keys") {
                        body.map(|_| json!({"namespaceId": me.ns}))
                    } else {
                        body
                    };
                    (
                        &[403],
                        vec![call(api, &method, &target, &tok, body.as_ref())],
                    )
                }
                // An erasure covers the caller's namespace only: the other's shopper
                // of that id keeps every row (the scenario's reports say so after).
                ("DELETE", "/v1/shoppers/{trackingId}") => {
                    (&[200, 202], vec![call(api, "DELETE", &target, &tok, None)])
                }
                ("GET", "/v1/shoppers/erasures/{requestId}") => {
                    (&[404], vec![call(api, "GET", &target, &tok, None)])
                }
                ("GET", p) if p.starts_with("/v1/reports/") => {
                    let own = call(api, "GET", p, &tok, None);
                    assert_eq!(
                        own.status,
                        200,
                        "{p}: {}",
                        String::from_utf8_lossy(&own.body)
                    );
                    let csv = call(api, "GET", &format!("{p}?format=csv"), &tok, None);
                    assert_eq!(csv.status, 200, "{p} csv");
                    let probe = call(
                        api,
                        "GET",
                        &format!("{p}?campaignId={}", other.campaign),
                        &tok,
                        None,
                    );
                    assert_eq!(
                        probe.status,
                        404,
                        "{p} on the other's campaign: {}",
                        String::from_utf8_lossy(&probe.body)
                    );
                    let named = call(
                        api,
                        "GET",
                        &format!("{p}?namespaceId={}", other.ns),
                        &tok,
                        None,
                    );
                    assert_eq!(named.status, 403, "{p} naming the other namespace");
                    let echo = String::from_utf8_lossy(&probe.body).replace(&other.campaign, "");
                    for m in &markers {
                        assert!(!echo.contains(m.as_str()), "{p} probe leaks '{m}': {echo}");
                    }
                    (&[200, 404, 403], vec![own, csv, named])
                }
                ("GET", _) => (&[200], vec![call(api, "GET", path, &tok, None)]),
                (m, p) => panic!("no expectation for {m} {p}: add the new route to this matrix"),
            };
            calls += 1;
            for r in &responses {
                assert!(
                    expect.contains(&r.status),
                    "{method} {target} as {} on {}'s ids: {} {}",
                    me.ns,
                    other.ns,
                    r.status,
                    String::from_utf8_lossy(&r.body)
                );
                let body = String::from_utf8_lossy(&r.body);
                // An error may echo what the caller itself sent (the id in the
                // path): that discloses nothing.
                for m in markers.iter().filter(|m| !target.contains(m.as_str())) {
                    assert!(
                        !body.contains(m.as_str()),
                        "{method} {target} as {} leaks {}'s '{m}': {body}",
                        me.ns,
                        other.ns
                    );
                }
            }
        }
    }
    calls
}

fn scenario(extra: Vec<(&'static str, String)>) {
    let dir = tempfile::tempdir().unwrap();
    let edge_port = common::free_port();
    let mut env = vec![
        (
            "RM_API_BEACON_BASE_URL",
            format!("http://127.0.0.1:{edge_port}"),
        ),
        ("RM_INGEST_ADDR", format!("127.0.0.1:{edge_port}")),
        ("RM_AGGREGATOR_BATCH_MAX_WAIT_MS", "100".to_owned()),
        ("RM_API_ADS_REFRESH_SECS", "1".to_owned()),
    ];
    env.extend(extra);
    let svc = Service::start_with_args("all", dir.path(), &env, &[], Some(edge_port));
    svc.wait_ready(svc.api, Duration::from_secs(60));
    let api = svc.api;
    let operator = token(api, "demo-operator", "demo-operator-secret", None);
    let tenants: Vec<Tenant> = TENANTS
        .iter()
        .map(|ns| set_up(api, &operator, ns))
        .collect();

    // The shared shopper sees and clicks acme's ad, then brand's; each namespace's
    // order (the same order id in both) comes after.
    let ads: Vec<String> = tenants.iter().map(|t| serve_ad(api, t)).collect();
    for (t, ad) in tenants.iter().zip(&ads) {
        fire(svc.ingest, ad, "productImpression", &t.product);
        fire(svc.ingest, ad, "productClick", &t.product);
        std::thread::sleep(Duration::from_millis(20));
    }
    // Unique per run: on Kafka the `orders` topic outlives a test.
    let order_id = format!(
        "order-{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    );
    for t in &tenants {
        let r = order(api, t, &order_id);
        assert_eq!(
            r["accepted"], 1,
            "the same order id is new in each namespace: {r}"
        );
    }

    for t in &tenants {
        let sales = wait_for_sales(api, t);
        let rows = sales["rows"].as_array().unwrap();
        let credited: Vec<&Value> = rows.iter().filter(|r| r["campaignId"] != "").collect();
        assert_eq!(credited.len(), 1, "{}: {sales}", t.ns);
        assert_eq!(
            credited[0]["campaignId"],
            t.campaign.as_str(),
            "{}: {sales}",
            t.ns
        );
        assert_eq!(credited[0]["clickAttributions"], 1, "{sales}");
        let products = ok(
            &call(api, "GET", "/v1/reports/products", &t.token(api), None),
            "products",
        );
        let rows = products["rows"].as_array().unwrap();
        assert_eq!(rows.len(), 1, "{}'s own row: {products}", t.ns);
        assert_eq!(rows[0]["campaignId"], t.campaign.as_str(), "{products}");
        assert_eq!(rows[0]["impressions"], 1, "{products}");
        assert_eq!(rows[0]["clicks"], 1, "{products}");
        let insp = ok(
            &call(
                api,
                "GET",
                &format!("/v1/debug/events?trackingId={SHOPPER}"),
                &t.token(api),
                None,
            ),
            "inspector",
        );
        let events = insp["events"].as_array().unwrap();
        assert_eq!(events.len(), 2, "its own impression and click: {insp}");
    }
    // The operator sees both namespaces' events.
    let all = ok(
        &call(
            api,
            "GET",
            &format!("/v1/debug/events?trackingId={SHOPPER}"),
            &operator,
            None,
        ),
        "inspector as operator",
    );
    assert_eq!(all["events"].as_array().unwrap().len(), 4, "{all}");

    let (a, b) = (&tenants[0], &tenants[1]);
    let n = matrix(api, a, b);
    assert_eq!(n, matrix(api, b, a));
    let routes = common::get(api, "/openapi.json").unwrap().json()["paths"]
        .as_object()
        .unwrap()
        .values()
        .map(|ops| ops.as_object().unwrap().len())
        .sum::<usize>();
    assert_eq!(n, routes, "every operation of the route table was called");

    // Nothing of either namespace changed through the other's calls.
    for t in &tenants {
        let tok = t.token(api);
        let c = ok(
            &call(
                api,
                "GET",
                &format!("/v3/bannerx-campaigns/{}", t.campaign),
                &tok,
                None,
            ),
            "own campaign",
        );
        assert_eq!(
            c["bannerXCampaign"]["approval"]["state"],
            "APPROVAL_STATE_APPROVED"
        );
        let s = ok(
            &call(
                api,
                "GET",
                &format!("/v1/segments/{}", t.segment),
                &tok,
                None,
            ),
            "own segment",
        );
        assert_eq!(s["segment"]["name"], t.ns);
    }
}

#[test]
fn two_namespaces_on_the_embedded_backends() {
    scenario(Vec::new());
}

#[test]
fn two_namespaces_on_postgres_kafka_and_clickhouse() {
    let Some(db) = common::required_setting("RM_API_DATABASE_URL", "a PostgreSQL server") else {
        return;
    };
    let Some((mut env, _drop)) = common::kafka_clickhouse_env("tenancy", 2) else {
        return;
    };
    let db_name = fresh_database(&db, "tenancy");
    env.push(("RM_API_DATABASE_URL", db_name.0.clone()));
    scenario(env);
}

/// A fresh PostgreSQL database for one test (dropped with the guard).
struct FreshDb(String, String, String);

impl Drop for FreshDb {
    fn drop(&mut self) {
        let _ = psql(
            &self.2,
            &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.1),
        );
    }
}

fn psql(url: &str, sql: &str) -> Result<(), String> {
    let out = std::process::Command::new("psql")
        .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", url, "-c", sql])
        .env("PGCONNECT_TIMEOUT", "5")
        .output()
        .map_err(|e| format!("running psql: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

fn fresh_database(url: &str, name: &str) -> FreshDb {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let db = format!("rm_{name}_{}_{}", std::process::id(), nanos % 1_000_000_000);
    psql(url, &format!("CREATE DATABASE {db}")).unwrap();
    let (base, query) = url
        .split_once('?')
        .map_or((url, None), |(b, q)| (b, Some(q)));
    let base = base.rsplit_once('/').map_or(base, |(b, _)| b);
    let with = match query {
        Some(q) => format!("{base}/{db}?{q}"),
        None => format!("{base}/{db}"),
    };
    FreshDb(with, db, url.to_owned())
}

#[test]
fn operators_manage_clients_and_a_removed_clients_tokens_stop_working() {
    let dir = tempfile::tempdir().unwrap();
    let svc = Service::start("api", dir.path(), &[]);
    let api = svc.api;
    let operator = token(api, "demo-operator", "demo-operator-secret", None);
    let created = new_client(api, &operator, "partner-x", "px", &["reports"]);
    let r = call(
        api,
        "POST",
        "/v1/admin/clients",
        &operator,
        Some(&json!({"clientId": "partner-x", "namespaceId": "px", "scopes": ["reports"]})),
    );
    assert_eq!(r.status, 409, "an existing id");
    let bad = call(
        api,
        "POST",
        "/v1/admin/clients",
        &operator,
        Some(&json!({"clientId": "p-y", "namespaceId": "Not Valid", "scopes": ["reports"]})),
    );
    assert_eq!(bad.status, 400);
    let secret = created["clientSecret"].as_str().unwrap();
    assert_eq!(created["scopes"], json!(["reports"]));
    let list = ok(
        &call(api, "GET", "/v1/admin/clients", &operator, None),
        "list",
    );
    let text = list.to_string();
    assert!(
        text.contains("partner-x") && text.contains("\"px\""),
        "{text}"
    );
    assert!(
        !text.contains(secret) && !text.contains("argon2"),
        "no secrets or hashes: {text}"
    );
    let tok = token(api, "partner-x", secret, None);
    assert_eq!(call(api, "GET", "/v1/reports/ads", &tok, None).status, 200);
    // A non-operator token is refused on every operator route.
    for (m, p) in [
        ("GET", "/v1/admin/clients"),
        ("POST", "/v1/admin/clients"),
        ("DELETE", "/v1/admin/clients/partner-x"),
        ("POST", "/v1/admin/order-keys"),
        ("DELETE", "/v1/admin/order-keys/any"),
    ] {
        let body = (m == "POST").then(|| json!({"namespaceId": "px"}));
        assert_eq!(call(api, m, p, &tok, body.as_ref()).status, 403, "{m} {p}");
    }
    // Removal: the token is refused at once here.
    ok(
        &call(
            api,
            "DELETE",
            "/v1/admin/clients/partner-x",
            &operator,
            None,
        ),
        "remove",
    );
    let r = call(api, "GET", "/v1/reports/ads", &tok, None);
    assert_eq!(r.status, 401, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(
        call(
            api,
            "DELETE",
            "/v1/admin/clients/partner-x",
            &operator,
            None
        )
        .status,
        404
    );
    let revoked = common::get(api, "/.well-known/revoked-clients.json")
        .unwrap()
        .json();
    assert_eq!(revoked["revoked"].as_array().unwrap().len(), 1, "{revoked}");
    assert!(
        !revoked.to_string().contains("partner-x"),
        "ids are published hashed"
    );
    // Orders keys: created for a namespace, removed by id.
    let key = ok(
        &call(
            api,
            "POST",
            "/v1/admin/order-keys",
            &operator,
            Some(&json!({"namespaceId": "px"})),
        ),
        "key",
    );
    assert_eq!(key["namespaceId"], "px");
    let path = format!("/v1/admin/order-keys/{}", key["keyId"].as_str().unwrap());
    ok(&call(api, "DELETE", &path, &operator, None), "remove key");
    assert_eq!(call(api, "DELETE", &path, &operator, None).status, 404);
}

#[test]
fn a_removal_reaches_another_api_instance_sharing_postgres() {
    let Some(db) = common::required_setting("RM_API_DATABASE_URL", "a PostgreSQL server") else {
        return;
    };
    let fresh = fresh_database(&db, "revoke");
    let (d1, d2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // Instances of one deployment share the ad id keys (the token seeds are sealed with
    // a key derived from them).
    let env = vec![
        ("RM_API_DATABASE_URL", fresh.0.clone()),
        (
            "RM_AD_ID_KEYS",
            "q1Tj0Ks3n7uLr6SqUEOhJtSz5mEFuDuSGk2rqhwWP0c".to_owned(),
        ),
    ];
    let one = Service::start("api", d1.path(), &env);
    let two = Service::start("api", d2.path(), &env);
    let operator = token(one.api, "demo-operator", "demo-operator-secret", None);
    let created = new_client(one.api, &operator, "shared-x", "sx", &["reports"]);
    let tok = token(
        two.api,
        "shared-x",
        created["clientSecret"].as_str().unwrap(),
        None,
    );
    assert_eq!(
        call(two.api, "GET", "/v1/reports/ads", &tok, None).status,
        200
    );
    ok(
        &call(
            one.api,
            "DELETE",
            "/v1/admin/clients/shared-x",
            &operator,
            None,
        ),
        "remove",
    );
    let removed = Instant::now();
    loop {
        let status = call(two.api, "GET", "/v1/reports/ads", &tok, None).status;
        if status == 401 {
            break;
        }
        assert!(
            removed.elapsed() < Duration::from_secs(60),
            "the other instance still takes a removed client's token after 60 s"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    eprintln!(
        "revocation reached the second instance in {:?}",
        removed.elapsed()
    );
}

#[test]
fn an_edge_verifying_tokens_itself_refuses_a_removed_clients_token() {
    let dir = tempfile::tempdir().unwrap();
    let api_port = common::free_port();
    let env = vec![
        ("RM_API_ADDR", format!("127.0.0.1:{api_port}")),
        (
            "RM_INGEST_JWKS_URL",
            format!("http://127.0.0.1:{api_port}/.well-known/jwks.json"),
        ),
    ];
    let svc = Service::start_with_args("all", dir.path(), &env, &[], None);
    let api: SocketAddr = ([127, 0, 0, 1], api_port).into();
    svc.wait_ready(api, Duration::from_secs(60));
    let operator = token(api, "demo-operator", "demo-operator-secret", None);
    let created = new_client(api, &operator, "edge-x", "ex", &["reports"]);
    let tok = token(
        api,
        "edge-x",
        created["clientSecret"].as_str().unwrap(),
        None,
    );
    let inspect = || {
        call(
            svc.ingest,
            "GET",
            "/v1/debug/events?trackingId=t-1",
            &tok,
            None,
        )
    };
    assert_eq!(inspect().status, 200, "the edge takes the tenant's token");
    ok(
        &call(api, "DELETE", "/v1/admin/clients/edge-x", &operator, None),
        "remove",
    );
    let removed = Instant::now();
    while inspect().status != 401 {
        assert!(
            removed.elapsed() < Duration::from_secs(60),
            "the edge still takes a removed client's token after 60 s"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    eprintln!("revocation reached the edge in {:?}", removed.elapsed());
}
