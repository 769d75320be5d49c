//! The partner API end to end against the running binary: a real OAuth 2.0 client
//! (the `oauth2` crate) gets and uses a token; every status the spec and the issue
//! list for the token, segment, campaign, orders and report endpoints is produced;
//! forged tokens (`alg: none`, HMAC with the public key, another issuer) are refused;
//! state and signing keys survive a restart; accepted orders are in the log.

#![allow(clippy::unwrap_used, missing_docs)]

use crate::common;

use std::net::SocketAddr;

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use common::{demo_token, send, token, HttpResponse, Service};
use serde_json::{json, Value};

fn call(
    api: SocketAddr,
    method: &str,
    path: &str,
    tok: Option<&str>,
    body: &Value,
) -> HttpResponse {
    let auth = tok.map(|t| format!("Bearer {t}"));
    let mut headers = vec![("Content-Type", "application/json")];
    if let Some(a) = &auth {
        headers.push(("Authorization", a.as_str()));
    }
    let bytes = if body.is_null() {
        Vec::new()
    } else {
        serde_json::to_vec(body).unwrap()
    };
    send(api, method, path, &headers, &bytes).unwrap()
}

fn call_raw(api: SocketAddr, method: &str, path: &str, tok: &str, body: &[u8]) -> HttpResponse {
    let auth = format!("Bearer {tok}");
    send(
        api,
        method,
        path,
        &[
            ("Content-Type", "application/json"),
            ("Authorization", &auth),
        ],
        body,
    )
    .unwrap()
}

/// Asserts an error status object with `status` and gRPC `code`.
fn assert_status(r: &HttpResponse, status: u16, code: i64) -> Value {
    assert_eq!(
        r.status,
        status,
        "body: {}",
        String::from_utf8_lossy(&r.body)
    );
    let v = r.json();
    assert_eq!(v["code"], code, "{v}");
    assert!(v["message"].as_str().is_some_and(|m| !m.is_empty()), "{v}");
    assert!(
        v["details"]
            .as_array()
            .is_some_and(|d| d.iter().all(|x| x["@type"].is_string())),
        "{v}"
    );
    v
}

fn token_request(api: SocketAddr, headers: &[(&str, &str)], body: &str) -> HttpResponse {
    send(api, "POST", "/v1/oauth2/token", headers, body.as_bytes()).unwrap()
}

fn basic(id: &str, secret: &str) -> String {
    format!("Basic {}", STANDARD.encode(format!("{id}:{secret}")))
}

const FORM: (&str, &str) = ("Content-Type", "application/x-www-form-urlencoded");

fn start(dir: &std::path::Path, env: &[(&str, String)]) -> Service {
    let svc = Service::start("all", dir, env);
    svc.wait_ready(svc.api, std::time::Duration::from_secs(60));
    svc
}

#[test]
fn a_real_oauth2_client_gets_a_token_and_uses_it() {
    use oauth2::basic::BasicClient;
    use oauth2::{ClientId, ClientSecret, TokenResponse, TokenUrl};
    let dir = tempfile::tempdir().unwrap();
    let svc = start(dir.path(), &[]);
    let api = svc.api;
    let http_client =
        move |req: oauth2::HttpRequest| -> Result<oauth2::HttpResponse, std::io::Error> {
            let headers: Vec<(String, String)> = req
                .headers()
                .iter()
                .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap_or("").to_owned()))
                .collect();
            let hdrs: Vec<(&str, &str)> = headers
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            let r = send(
                api,
                req.method().as_str(),
                req.uri().path(),
                &hdrs,
                req.body(),
            )?;
            let mut b = http::Response::builder().status(r.status);
            for (k, v) in &r.headers {
                b = b.header(k, v);
            }
            Ok(b.body(r.body).unwrap())
        };
    let client = BasicClient::new(ClientId::new("demo-client".into()))
        .set_client_secret(ClientSecret::new("demo-secret".into()))
        .set_token_uri(TokenUrl::new(format!("http://{api}/v1/oauth2/token")).unwrap());
    let tok = client
        .exchange_client_credentials()
        .request(&http_client)
        .expect("the oauth2 crate's client-credentials flow succeeds");
    assert_eq!(tok.expires_in(), Some(std::time::Duration::from_secs(3600)));
    assert_eq!(*tok.token_type(), oauth2::basic::BasicTokenType::Bearer);
    let r = call(
        api,
        "GET",
        "/v1/segments/demo-segment",
        Some(tok.access_token().secret()),
        &Value::Null,
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["segment"]["name"], "Snack lovers");

    // A wrong secret through the same client is the RFC's invalid_client.
    let bad = BasicClient::new(ClientId::new("demo-client".into()))
        .set_client_secret(ClientSecret::new("wrong".into()))
        .set_token_uri(TokenUrl::new(format!("http://{api}/v1/oauth2/token")).unwrap());
    match bad.exchange_client_credentials().request(&http_client) {
        Err(oauth2::RequestTokenError::ServerResponse(e)) => {
            assert_eq!(
                *e.error(),
                oauth2::basic::BasicErrorResponseType::InvalidClient
            );
        }
        other => panic!("expected invalid_client, got {other:?}"),
    }

    // The token verifies with the published JWK set.
    let jwks = common::get(api, "/.well-known/jwks.json").unwrap().json();
    let key = &jwks["keys"][0];
    assert_eq!(key["kty"], "OKP");
    let dk = jsonwebtoken::DecodingKey::from_ed_components(key["x"].as_str().unwrap()).unwrap();
    let mut v = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::EdDSA);
    v.set_audience(&["retail-media-partner-api"]);
    v.set_issuer(&["retail-media"]);
    let data = jsonwebtoken::decode::<Value>(tok.access_token().secret(), &dk, &v).unwrap();
    assert_eq!(data.claims["sub"], "demo-client");
    assert!(data.claims["jti"].is_string());
    assert!(data.claims["scope"].as_str().unwrap().contains("reports"));
    assert_eq!(data.header.kid.as_deref(), key["kid"].as_str());
    svc.terminate();
}

#[test]
fn token_endpoint_answers_each_rfc_6749_case() {
    let dir = tempfile::tempdir().unwrap();
    let svc = start(dir.path(), &[("RM_API_MAX_AUTH_FAILURES", "3".into())]);
    let api = svc.api;
    let demo = basic("demo-client", "demo-secret");

    let ok = token_request(
        api,
        &[("Authorization", &demo), FORM],
        "grant_type=client_credentials",
    );
    assert_eq!(ok.status, 200);
    assert_eq!(ok.header("cache-control"), Some("no-store"));
    assert_eq!(ok.header("pragma"), Some("no-cache"));
    let v = ok.json();
    assert_eq!(v["token_type"], "Bearer");
    assert_eq!(v["expires_in"], 3600);
    assert!(v["access_token"].as_str().unwrap().split('.').count() == 3);

    // Unrecognised parameters are ignored (RFC 6749 3.2); charset on the type is fine.
    let extra = token_request(
        api,
        &[
            ("Authorization", &demo),
            (
                "Content-Type",
                "application/x-www-form-urlencoded; charset=utf-8",
            ),
        ],
        "grant_type=client_credentials&foo=bar",
    );
    assert_eq!(extra.status, 200);

    let err = |r: &HttpResponse, status: u16, error: &str| {
        assert_eq!(r.status, status, "{}", String::from_utf8_lossy(&r.body));
        assert_eq!(r.json()["error"], error);
        assert_eq!(r.header("cache-control"), Some("no-store"));
    };
    let r = token_request(
        api,
        &[("Authorization", &basic("demo-client", "nope")), FORM],
        "grant_type=client_credentials",
    );
    err(&r, 401, "invalid_client");
    assert!(r.header("www-authenticate").unwrap().starts_with("Basic"));
    err(
        &token_request(
            api,
            &[("Authorization", &basic("nobody", "x")), FORM],
            "grant_type=client_credentials",
        ),
        401,
        "invalid_client",
    );
    err(
        &token_request(api, &[FORM], "grant_type=client_credentials"),
        401,
        "invalid_client",
    );
    err(
        &token_request(
            api,
            &[("Authorization", "Basic !!notbase64"), FORM],
            "grant_type=client_credentials",
        ),
        401,
        "invalid_client",
    );
    err(
        &token_request(
            api,
            &[("Authorization", &demo)],
            "grant_type=client_credentials",
        ),
        400,
        "invalid_request",
    );
    err(
        &token_request(
            api,
            &[
                ("Authorization", &demo),
                ("Content-Type", "application/json"),
            ],
            r#"{"grant_type":"client_credentials"}"#,
        ),
        400,
        "invalid_request",
    );
    err(
        &token_request(
            api,
            &[("Authorization", &demo), FORM],
            "grant_type=client_credentials&grant_type=client_credentials",
        ),
        400,
        "invalid_request",
    );
    err(
        &token_request(api, &[("Authorization", &demo), FORM], ""),
        400,
        "invalid_request",
    );
    err(
        &token_request(api, &[("Authorization", &demo), FORM], "grant_type=%zz"),
        400,
        "invalid_request",
    );
    err(
        &token_request(
            api,
            &[("Authorization", &demo), FORM],
            "grant_type=password&username=a&password=b",
        ),
        400,
        "unsupported_grant_type",
    );
    err(
        &token_request(
            api,
            &[("Authorization", &demo), FORM],
            "grant_type=client_credentials&scope=root",
        ),
        400,
        "invalid_scope",
    );

    // Repeated failures for one client from one address are rate-limited; other
    // clients are not (tests/it/auth_limits.rs covers addresses and unknown ids).
    for _ in 0..3 {
        let r = token_request(
            api,
            &[("Authorization", &basic("demo-operator", "guess")), FORM],
            "grant_type=client_credentials",
        );
        err(&r, 401, "invalid_client");
    }
    let limited = token_request(
        api,
        &[("Authorization", &basic("demo-operator", "guess")), FORM],
        "grant_type=client_credentials",
    );
    err(&limited, 429, "slow_down");
    assert!(limited.header("retry-after").is_some());
    assert_eq!(
        token_request(
            api,
            &[("Authorization", &demo), FORM],
            "grant_type=client_credentials"
        )
        .status,
        200
    );

    // Method and metrics.
    assert_eq!(common::get(api, "/v1/oauth2/token").unwrap().status, 405);
    let m = String::from_utf8(common::get(api, "/metrics").unwrap().body).unwrap();
    assert!(
        m.contains("api_token_requests_total{outcome=\"rate_limited\"} 1"),
        "{m}"
    );
    assert!(m.contains("api_request_duration_seconds_bucket{route=\"/v1/oauth2/token\""));
    svc.terminate();
}

fn forge(header: &Value, claims: &Value, sig: &[u8]) -> String {
    format!(
        "{}.{}.{}",
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(header).unwrap()),
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(claims).unwrap()),
        URL_SAFE_NO_PAD.encode(sig)
    )
}

#[test]
fn bearer_checks_refuse_forged_foreign_and_underscoped_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let svc = start(dir.path(), &[]);
    let api = svc.api;
    let good = demo_token(api);
    let parts: Vec<&str> = good.split('.').collect();
    let header: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[0]).unwrap()).unwrap();
    let claims: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
    let kid = header["kid"].as_str().unwrap().to_owned();
    let path = "/v1/segments/demo-segment";
    let unauth = |tok: Option<&str>| {
        let r = call(api, "GET", path, tok, &Value::Null);
        assert_status(&r, 401, 16);
        assert!(
            r.header("www-authenticate").unwrap().starts_with("Bearer"),
            "{:?}",
            r.headers
        );
    };
    unauth(None);
    unauth(Some("not-a-jwt"));
    let r = send(
        api,
        "GET",
        path,
        &[(
            "Authorization",
            &format!("Basic {}", STANDARD.encode("demo-client:demo-secret")),
        )],
        b"",
    )
    .unwrap();
    assert_status(&r, 401, 16);

    // alg: none.
    unauth(Some(&forge(
        &json!({"alg": "none", "typ": "JWT", "kid": kid}),
        &claims,
        b"",
    )));
    // HS256 with the public key as the HMAC secret.
    let jwks = common::get(api, "/.well-known/jwks.json").unwrap().json();
    let x = jwks["keys"][0]["x"].as_str().unwrap().to_owned();
    let public = URL_SAFE_NO_PAD.decode(&x).unwrap();
    let mut h = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256);
    h.kid = Some(kid.clone());
    for secret in [public.as_slice(), x.as_bytes()] {
        let hs = jsonwebtoken::encode(&h, &claims, &jsonwebtoken::EncodingKey::from_secret(secret))
            .unwrap();
        unauth(Some(&hs));
    }
    // Tampered claims with the original signature.
    let mut more = claims.clone();
    more["sub"] = json!("intruder");
    unauth(Some(&format!(
        "{}.{}.{}",
        parts[0],
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(&more).unwrap()),
        parts[2]
    )));

    // A token from another issuer (another deployment, its own keys).
    let dir2 = tempfile::tempdir().unwrap();
    let other = start(
        dir2.path(),
        &[("RM_API_TOKEN_ISSUER", "someone-else".into())],
    );
    let foreign = demo_token(other.api);
    unauth(Some(&foreign));
    other.terminate();

    // A valid token without the scope: 403 with insufficient_scope.
    let ads_only = token(api, "demo-client", "demo-secret", Some("ads"));
    let r = call(api, "GET", path, Some(&ads_only), &Value::Null);
    assert_status(&r, 403, 7);
    assert!(r
        .header("www-authenticate")
        .unwrap()
        .contains("insufficient_scope"));
    let r = call(
        api,
        "GET",
        "/v1/reports/products",
        Some(&ads_only),
        &Value::Null,
    );
    assert_status(&r, 403, 7);
    let reports = token(api, "demo-client", "demo-secret", Some("reports"));
    assert_eq!(
        call(
            api,
            "GET",
            "/v1/reports/products",
            Some(&reports),
            &Value::Null
        )
        .status,
        200
    );
    assert_status(
        &call(api, "GET", "/v1/reports/products", None, &Value::Null),
        401,
        16,
    );
    svc.terminate();
}

#[test]
fn segments_produce_every_listed_status() {
    let dir = tempfile::tempdir().unwrap();
    let svc = start(dir.path(), &[]);
    let api = svc.api;
    let tok = demo_token(api);
    let seg_only = token(api, "demo-client", "demo-secret", Some("segments"));

    let body = json!({"segment": {"id": "s-1", "name": "Runners", "category": ["sport"], "description": "Runs", "retailerTeamId": "t1", "segmentId": "ext-1", "sourceId": "crm"}});
    let r = call(api, "POST", "/v1/segments", Some(&tok), &body);
    assert_eq!(r.status, 200);
    let mut created = body.clone();
    created["segment"]["namespaceId"] = json!("demo");
    assert_eq!(r.json(), created, "created in the caller's namespace");
    assert_status(
        &call(api, "POST", "/v1/segments", Some(&tok), &body),
        409,
        6,
    );
    // The `segments` scope creates segments; without it, 403.
    assert_status(
        &call(api, "POST", "/v1/segments", Some(&seg_only), &body),
        409,
        6,
    );
    let reports_only = token(api, "demo-client", "demo-secret", Some("reports"));
    assert_status(
        &call(api, "POST", "/v1/segments", Some(&reports_only), &body),
        403,
        7,
    );

    let upd = json!({"segment": {"name": "Trail runners", "category": ["sport", "outdoor"], "description": "d", "retailerTeamId": "t1", "segmentId": "ext-1", "sourceId": "crm"}});
    let r = call(api, "PUT", "/v1/segments/s-1", Some(&seg_only), &upd);
    assert_eq!(r.status, 200);
    let v = r.json();
    assert_eq!(v["segment"]["id"], "s-1");
    assert_eq!(v["segment"]["name"], "Trail runners");
    assert_eq!(v["segment"]["category"], json!(["sport", "outdoor"]));
    assert_eq!(
        call(
            api,
            "GET",
            "/v1/segments/s-1",
            Some(&seg_only),
            &Value::Null
        )
        .json(),
        v
    );

    let e = assert_status(
        &call(api, "PUT", "/v1/segments/nope", Some(&tok), &upd),
        404,
        5,
    );
    assert!(e["message"].as_str().unwrap().contains("nope"));
    assert_status(
        &call(api, "GET", "/v1/segments/nope", Some(&tok), &Value::Null),
        404,
        5,
    );
    let e = assert_status(
        &call(
            api,
            "PUT",
            "/v1/segments/s-1",
            Some(&tok),
            &json!({"segment": {"id": "s-2"}}),
        ),
        400,
        3,
    );
    assert_eq!(e["details"][1]["fieldViolations"][0]["field"], "segment.id");
    let e = assert_status(
        &call_raw(api, "PUT", "/v1/segments/s-1", &tok, b"{\"segment\": "),
        400,
        3,
    );
    assert!(e["message"].as_str().unwrap().contains("EOF"), "{e}");
    let e = assert_status(
        &call(
            api,
            "PUT",
            "/v1/segments/s-1",
            Some(&tok),
            &json!({"segment": {"category": "sport"}}),
        ),
        400,
        3,
    );
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .starts_with("segment.category"),
        "{e}"
    );
    assert_status(
        &call(
            api,
            "PUT",
            "/v1/segments/s-1",
            Some(&tok),
            &json!({"name": "forgot the wrapper"}),
        ),
        400,
        3,
    );
    assert_status(&call(api, "PUT", "/v1/segments/s-1", None, &upd), 401, 16);
    assert_status(
        &call(
            api,
            "PUT",
            "/v1/segments/s-1",
            Some(&token(api, "demo-client", "demo-secret", Some("ads"))),
            &upd,
        ),
        403,
        7,
    );
    let r = call(api, "DELETE", "/v1/segments/s-1", Some(&tok), &Value::Null);
    assert_eq!(r.status, 405);
    assert!(r.header("allow").unwrap().contains("PUT"));
    svc.terminate();
}

#[test]
fn campaign_approval_returns_the_full_record_and_enforces_the_rules() {
    let dir = tempfile::tempdir().unwrap();
    let svc = start(dir.path(), &[]);
    let api = svc.api;
    let tok = demo_token(api);
    let camp_only = token(api, "demo-client", "demo-secret", Some("campaigns"));
    let approve = |id: &str, t: &str, body: &Value| {
        call(
            api,
            "POST",
            &format!("/v3/bannerx-campaigns/{id}:approve"),
            Some(t),
            body,
        )
    };

    let r = approve(
        "demo-video",
        &camp_only,
        &json!({"approval": {"state": "APPROVAL_STATE_REJECTED", "rejectionReason": "logo too small"}}),
    );
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let c = &r.json()["bannerXCampaign"];
    assert_eq!(
        c["approval"],
        json!({"state": "APPROVAL_STATE_REJECTED", "rejectionReason": "logo too small"})
    );
    for field in [
        "id",
        "name",
        "namespaceId",
        "managerTeamId",
        "teamId",
        "sellerId",
        "walletId",
        "templateId",
        "placementId",
        "campaignState",
        "startTime",
        "endTime",
        "updateTime",
        "catalogIds",
        "advertisedProducts",
        "approval",
        "settings",
        "fixedCosts",
        "customFields",
        "customQuestions",
        "strategy",
        "targeting",
        "bannerXConfig",
    ] {
        assert!(!c[field].is_null(), "missing {field}");
    }
    assert_eq!(c["campaignState"], "CAMPAIGN_STATE_ACTIVE");
    assert_eq!(c["fixedCosts"]["creativeCost"], "$50.00");
    assert_eq!(c["strategy"]["auction"]["spendLimit"]["daily"], "$100.00");
    assert_eq!(c["settings"]["campaignType"], "CAMPAIGN_TYPE_BANNERX");
    assert_eq!(
        c["targeting"]["searchTerms"][0]["matchType"],
        "MATCH_TYPE_PHRASE_MATCH"
    );
    assert_eq!(c["bannerXConfig"]["slotType"], "BANNER_X_SLOT_TYPE_VIDEO");
    assert_eq!(
        c["bannerXConfig"]["trackingTagProvider"][0]["provider"],
        "TRACKING_TAG_PROVIDER_DV"
    );
    let t1 = chrono::DateTime::parse_from_rfc3339(c["updateTime"].as_str().unwrap()).unwrap();
    chrono::DateTime::parse_from_rfc3339(c["startTime"].as_str().unwrap()).unwrap();

    std::thread::sleep(std::time::Duration::from_millis(5));
    let r = approve(
        "demo-video",
        &tok,
        &json!({"approval": {"state": "APPROVAL_STATE_APPROVED"}}),
    );
    let c = r.json()["bannerXCampaign"].clone();
    assert_eq!(
        c["approval"],
        json!({"state": "APPROVAL_STATE_APPROVED", "rejectionReason": ""})
    );
    let t2 = chrono::DateTime::parse_from_rfc3339(c["updateTime"].as_str().unwrap()).unwrap();
    assert!(t2 > t1, "updateTime moves");
    let r = approve(
        "demo-video",
        &tok,
        &json!({"approval": {"state": "APPROVAL_STATE_PENDING"}}),
    );
    assert_eq!(
        r.json()["bannerXCampaign"]["approval"]["state"],
        "APPROVAL_STATE_PENDING"
    );
    let got = call(
        api,
        "GET",
        "/v3/bannerx-campaigns/demo-video",
        Some(&tok),
        &Value::Null,
    );
    assert_eq!(
        got.json()["bannerXCampaign"]["approval"]["state"],
        "APPROVAL_STATE_PENDING"
    );

    let e = assert_status(
        &approve(
            "demo-video",
            &tok,
            &json!({"approval": {"state": "APPROVAL_STATE_REJECTED"}}),
        ),
        400,
        3,
    );
    assert!(e["message"].as_str().unwrap().contains("rejectionReason"));
    let e = assert_status(
        &approve(
            "demo-video",
            &tok,
            &json!({"approval": {"state": "APPROVAL_STATE_MAYBE"}}),
        ),
        400,
        3,
    );
    assert!(
        e["message"].as_str().unwrap().contains("unknown variant"),
        "{e}"
    );
    assert_status(
        &approve("demo-video", &tok, &json!({"approval": {}})),
        400,
        3,
    );
    assert_status(
        &approve("demo-video", &tok, &json!({"approval": {"state": 3}})),
        400,
        3,
    );
    assert_status(
        &call_raw(
            api,
            "POST",
            "/v3/bannerx-campaigns/demo-video:approve",
            &tok,
            b"not json",
        ),
        400,
        3,
    );
    assert_status(
        &approve(
            "no-such-campaign",
            &tok,
            &json!({"approval": {"state": "APPROVAL_STATE_APPROVED"}}),
        ),
        404,
        5,
    );
    assert_status(
        &call(
            api,
            "POST",
            "/v3/bannerx-campaigns/demo-video:approve",
            None,
            &json!({"approval": {"state": "APPROVAL_STATE_APPROVED"}}),
        ),
        401,
        16,
    );
    let seg_only = token(api, "demo-client", "demo-secret", Some("segments"));
    assert_status(
        &approve(
            "demo-video",
            &seg_only,
            &json!({"approval": {"state": "APPROVAL_STATE_APPROVED"}}),
        ),
        403,
        7,
    );

    // Create and read (admin).
    let new = json!({"bannerXCampaign": {"id": "c-new", "name": "New", "campaignState": "CAMPAIGN_STATE_DRAFT", "fixedCosts": {"creativeCost": "$1.00"}}});
    let r = call(api, "POST", "/v3/bannerx-campaigns", Some(&tok), &new);
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(
        r.json()["bannerXCampaign"]["approval"]["state"],
        "APPROVAL_STATE_PENDING"
    );
    assert_status(
        &call(api, "POST", "/v3/bannerx-campaigns", Some(&tok), &new),
        409,
        6,
    );
    // The `campaigns` scope creates campaigns (in its own namespace); a token without
    // it may not.
    assert_status(
        &call(api, "POST", "/v3/bannerx-campaigns", Some(&camp_only), &new),
        409,
        6,
    );
    let ads_only = token(api, "demo-client", "demo-secret", Some("ads"));
    assert_status(
        &call(api, "POST", "/v3/bannerx-campaigns", Some(&ads_only), &new),
        403,
        7,
    );
    assert_status(
        &call(
            api,
            "POST",
            "/v3/bannerx-campaigns",
            Some(&tok),
            &json!({"bannerXCampaign": {"id": "bad id!"}}),
        ),
        400,
        3,
    );
    let e = assert_status(
        &call(
            api,
            "POST",
            "/v3/bannerx-campaigns",
            Some(&tok),
            &json!({"bannerXCampaign": {"id": "c2", "fixedCosts": {"dataCost": "lots"}}}),
        ),
        400,
        3,
    );
    assert_eq!(
        e["details"][1]["fieldViolations"][0]["field"],
        "bannerXCampaign.fixedCosts.dataCost"
    );
    assert_status(
        &call(
            api,
            "GET",
            "/v3/bannerx-campaigns/nope",
            Some(&tok),
            &Value::Null,
        ),
        404,
        5,
    );
    svc.terminate();
}

fn orders_body(id: &str) -> Value {
    json!({"orders": [{"id": id, "customerId": "cust-1", "sessionId": "sess-1", "orderDate": "2026-11-22T10:00:00Z",
        "catalogId": "demo-catalog", "teamId": "demo-team",
        "orderItems": [{"productCode": "cola-1l", "quantity": 2, "regularUnitPrice": 1.29, "totalOrderItemPriceAfterDiscounts": 2.58}]}]})
}

#[test]
fn orders_take_the_api_key_validate_and_are_idempotent_and_durable() {
    let dir = tempfile::tempdir().unwrap();
    let svc = start(dir.path(), &[]);
    let api = svc.api;
    let post = |auth: Option<&str>, body: &[u8]| {
        let mut h = vec![("Content-Type", "application/json")];
        if let Some(a) = auth {
            h.push(("Authorization", a));
        }
        send(api, "POST", "/v1/orders", &h, body).unwrap()
    };
    let curl_u = format!("Basic {}", STANDARD.encode("demo-orders-key:"));
    let body = serde_json::to_vec(&orders_body("o-1")).unwrap();
    let r = post(Some(&curl_u), &body);
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["accepted"], 1);
    // The raw key after `Basic `, as integrations send it: the same order is a duplicate.
    let r = post(Some("Basic demo-orders-key"), &body);
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["duplicates"], 1);
    assert_eq!(r.json()["orders"][0]["status"], "duplicate");

    let r = post(
        Some(&format!("Basic {}", STANDARD.encode("wrong-key:"))),
        &body,
    );
    assert_status(&r, 401, 16);
    assert!(r.header("www-authenticate").unwrap().starts_with("Basic"));
    assert_status(&post(None, &body), 401, 16);
    assert_status(
        &post(Some(&format!("Bearer {}", demo_token(api))), &body),
        401,
        16,
    );

    let mut bad = orders_body("o-2");
    bad["orders"][0]["orderItems"][0]["quantity"] = json!(0);
    let e = assert_status(
        &post(Some(&curl_u), &serde_json::to_vec(&bad).unwrap()),
        400,
        3,
    );
    assert_eq!(
        e["details"][1]["fieldViolations"][0]["field"],
        "orders[0].orderItems[0].quantity"
    );
    assert_status(&post(Some(&curl_u), b"{"), 400, 3);
    let r = post(
        Some(&curl_u),
        &serde_json::to_vec(&orders_body("o-3")).unwrap(),
    );
    assert_eq!(r.json()["accepted"], 1);

    // What was accepted is in the log, once each.
    svc.terminate();
    let raw = common::read_embedded_raw(dir.path(), rm_schemas::topics::ORDERS);
    let ids: Vec<String> = raw
        .iter()
        .map(|b| rm_schemas::order::parse_record(b).unwrap().order.id)
        .collect();
    assert_eq!(ids, vec!["o-1", "o-3"]);
}

#[test]
fn state_and_signing_keys_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let svc = start(dir.path(), &[]);
    let tok = demo_token(svc.api);
    let r = call(
        svc.api,
        "POST",
        "/v1/segments",
        Some(&tok),
        &json!({"segment": {"id": "kept", "name": "Kept"}}),
    );
    assert_eq!(r.status, 200);
    assert_eq!(svc.terminate(), Some(0));
    let svc = start(dir.path(), &[]);
    let r = call(
        svc.api,
        "GET",
        "/v1/segments/kept",
        Some(&tok),
        &Value::Null,
    );
    assert_eq!(
        r.status, 200,
        "the old token still verifies and the segment is there"
    );
    assert_eq!(r.json()["segment"]["name"], "Kept");
    let doc = common::get(svc.api, "/openapi.json").unwrap().json();
    for p in [
        "/v1/oauth2/token",
        "/v1/segments/{segment.id}",
        "/v3/bannerx-campaigns/{id}:approve",
        "/v1/orders",
        "/v1/reports/products",
    ] {
        assert!(doc["paths"][p].is_object(), "openapi lacks {p}");
    }
    svc.terminate();
}
