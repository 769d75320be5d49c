//! The integration inspector through `GET /v1/debug/events` on the edge's port, with
//! a bearer token from the running api (`retail-media all`, the edge verifying tokens
//! against the api's own JWK set through `RM_INGEST_JWKS_URL`): broken integrations
//! are flagged with the right rule, a clean one is ok; and the inspector's rule 2 and
//! the funnel report debounce with the one `RM_CONTROL_DEBOUNCE_MS` setting.
#![allow(clippy::unwrap_used, missing_docs)]

use crate::common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{beacon, enc, free_port, get, send, Service};
use serde_json::Value;

const BASE_MS: i64 = 1_795_341_600_000; // 2026-11-22T10:00:00Z

fn ts(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(BASE_MS + ms)
        .unwrap()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

struct Harness {
    svc: Service,
    api: SocketAddr,
    token: String,
}

impl Harness {
    fn start(dir: &std::path::Path) -> Harness {
        Self::start_with(dir, &[], &[])
    }

    /// Like [`Harness::start`], with extra environment and flags.
    fn start_with(dir: &std::path::Path, env: &[(&str, String)], args: &[&str]) -> Harness {
        let api_port = free_port();
        let mut env = env.to_vec();
        env.extend([
            ("RM_API_ADDR", format!("127.0.0.1:{api_port}")),
            (
                "RM_INGEST_JWKS_URL",
                format!("http://127.0.0.1:{api_port}/.well-known/jwks.json"),
            ),
        ]);
        let svc = Service::start_with_args("all", dir, &env, args, None);
        let api: SocketAddr = ([127, 0, 0, 1], api_port).into();
        svc.wait_ready(api, Duration::from_secs(60));
        let token = common::demo_token(api);
        Harness { svc, api, token }
    }

    fn video(&self, session: &str, video: &str, kind: &str, at: i64) -> u16 {
        self.video_at(session, video, kind, BASE_MS + at)
    }

    /// A video event of `ad-video` at `time_ms` (Unix milliseconds).
    fn video_at(&self, session: &str, video: &str, kind: &str, time_ms: i64) -> u16 {
        self.video_of("ad-video", session, video, kind, time_ms)
    }

    /// A video event of ad `ad` at `time_ms` (Unix milliseconds).
    fn video_of(&self, ad: &str, session: &str, video: &str, kind: &str, time_ms: i64) -> u16 {
        let t = chrono::DateTime::from_timestamp_millis(time_ms)
            .unwrap()
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        get(
            self.svc.ingest,
            &beacon(&[
                ("adId", ad),
                ("interactionType", kind),
                ("videoId", video),
                ("sessionId", session),
                ("timestamp", &t),
            ]),
        )
        .unwrap()
        .status
    }

    fn full_watch(&self, session: &str, video: &str, start: i64) {
        for (i, k) in [
            "videoCreativeView",
            "videoPlay",
            "videoFirstQuartile",
            "videoMidpoint",
            "videoThirdQuartile",
            "videoComplete",
        ]
        .iter()
        .enumerate()
        {
            assert_eq!(self.video(session, video, k, start + i as i64 * 2_500), 200);
        }
    }

    fn cart(&self, session: &str, units: &str, at: i64) -> u16 {
        let t = ts(at);
        get(
            self.svc.ingest,
            &beacon(&[
                ("adId", "ad-cart"),
                ("interactionType", "cart"),
                ("productCode", "cola-1l"),
                ("catalogId", "demo-catalog"),
                ("units", units),
                ("sessionId", session),
                ("timestamp", &t),
            ]),
        )
        .unwrap()
        .status
    }

    fn product_impression(&self, session: &str, at: i64) -> u16 {
        let t = ts(at);
        get(
            self.svc.ingest,
            &beacon(&[
                ("adId", "ad-product"),
                ("interactionType", "productImpression"),
                ("productCode", "crisps-150g"),
                ("catalogId", "demo-catalog"),
                ("sessionId", session),
                ("timestamp", &t),
            ]),
        )
        .unwrap()
        .status
    }

    fn inspect_with(&self, tracking_id: &str, auth: Option<&str>) -> common::HttpResponse {
        let path = format!("/v1/debug/events?trackingId={}", enc(tracking_id));
        let header = auth.map(|t| format!("Bearer {t}"));
        let headers: Vec<(&str, &str)> = header
            .as_deref()
            .map(|h| vec![("Authorization", h)])
            .unwrap_or_default();
        send(self.svc.ingest, "GET", &path, &headers, b"").unwrap()
    }

    fn inspect(&self, tracking_id: &str) -> Value {
        let r = self.inspect_with(tracking_id, Some(&self.token));
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        r.json()
    }
}

fn rule(report: &Value, n: u64) -> &Value {
    report["rules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["rule"] == n)
        .unwrap_or_else(|| panic!("no rule {n} in {report:#}"))
}

/// Only rule `n` is violated; returns its findings joined.
fn only_violated(report: &Value, n: u64) -> String {
    for r in report["rules"].as_array().unwrap() {
        let expected = if r["rule"] == n { "violated" } else { "" };
        if expected.is_empty() {
            assert_ne!(r["verdict"], "violated", "rule {} in {report:#}", r["rule"]);
        } else {
            assert_eq!(r["verdict"], "violated", "rule {n} in {report:#}");
        }
    }
    rule(report, n)["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap().to_owned())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_inspector_flags_broken_integrations_and_passes_a_clean_one() {
    let dir = tempfile::tempdir().unwrap();
    let h = Harness::start(dir.path());

    // Access: a bearer token with scope reports, verified against the api's JWK set.
    assert_eq!(h.inspect_with("s-clean", None).status, 401);
    assert_eq!(h.inspect_with("s-clean", Some("not.a.jwt")).status, 401);
    let ads_only = common::token(h.api, "demo-client", "demo-secret", Some("ads"));
    assert_eq!(h.inspect_with("s-clean", Some(&ads_only)).status, 403);
    let r = send(
        h.svc.ingest,
        "GET",
        "/v1/debug/events",
        &[("Authorization", &format!("Bearer {}", h.token))],
        b"",
    )
    .unwrap();
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["details"][0]["metadata"]["field"], "trackingId");

    // Rule 1: a midpoint without a first quartile (synthesised on seek).
    assert_eq!(h.video("s-seek", "v-1", "videoCreativeView", 0), 200);
    assert_eq!(h.video("s-seek", "v-1", "videoPlay", 100), 200);
    assert_eq!(h.video("s-seek", "v-1", "videoMidpoint", 8_000), 200);
    let report = h.inspect("s-seek");
    let f = only_violated(&report, 1);
    assert!(
        f.contains("videoMidpoint #3 arrived without videoFirstQuartile"),
        "{f}"
    );
    assert_eq!(report["views"][0]["videoId"], "v-1");
    assert_eq!(report["events"].as_array().unwrap().len(), 3);

    // Rule 1: two completes in one view (a replay).
    h.full_watch("s-twice", "v-1", 0);
    assert_eq!(h.video("s-twice", "v-1", "videoComplete", 40_000), 200);
    let f = only_violated(&h.inspect("s-twice"), 1);
    assert!(
        f.contains("two videoComplete (videoComplete #6 and videoComplete #7)"),
        "{f}"
    );

    // Rule 10: cart units sent as deltas. The -1 is refused by the edge; the
    // inspector shows the refusal and still judges the line.
    for (i, u) in ["1", "1", "1"].iter().enumerate() {
        assert_eq!(h.cart("s-deltas", u, i as i64 * 2_000), 200);
    }
    assert_eq!(h.cart("s-deltas", "-1", 6_000), 400);
    let report = h.inspect("s-deltas");
    let f = only_violated(&report, 10);
    assert!(f.contains("cart #4 sent units=-1"), "{f}");
    assert!(f.contains("both sent units=1"), "{f}");
    let refused = &report["events"][3];
    assert_eq!(refused["outcome"], "rejected", "{report:#}");
    assert_eq!(refused["reason"], "invalid_units");
    assert_eq!(refused["field"], "units");
    assert_eq!(refused["params"]["units"], "-1");
    assert_eq!(
        report["carts"][0]["units"],
        serde_json::json!(["1", "1", "1", "-1"])
    );

    // Rule 9: a product impression re-fired on every re-render (and once identically,
    // which the edge dropped as a duplicate).
    for at in [0, 150, 300, 450] {
        assert_eq!(h.product_impression("s-rerender", at), 200);
    }
    assert_eq!(h.product_impression("s-rerender", 0), 200);
    let report = h.inspect("s-rerender");
    let f = only_violated(&report, 9);
    assert!(f.contains("150 ms apart"), "{f}");
    assert!(f.contains("duplicate"), "{f}");
    assert_eq!(report["events"][4]["outcome"], "duplicate");

    // A clean integration: a full watch with spaced controls, absolute cart units,
    // one impression per product, the served ad's impression and click once.
    h.full_watch("s-clean", "v-1", 0);
    assert_eq!(h.video("s-clean", "v-1", "videoPause", 3_000), 200);
    assert_eq!(h.video("s-clean", "v-1", "videoResume", 6_000), 200);
    for (i, u) in ["1", "2", "3", "0"].iter().enumerate() {
        assert_eq!(h.cart("s-clean", u, 20_000 + i as i64 * 3_000), 200);
    }
    assert_eq!(h.product_impression("s-clean", 40_000), 200);
    for what in ["impression", "click"] {
        let t = ts(50_000);
        let r = get(
            h.svc.ingest,
            &format!(
                "/v1/events/ad/{what}?adId=ad-served&sessionId=s-clean&timestamp={}",
                enc(&t)
            ),
        )
        .unwrap();
        assert_eq!(r.status, 200);
    }
    let report = h.inspect("s-clean");
    for n in [1, 2, 3, 9, 10] {
        assert_eq!(rule(&report, n)["verdict"], "ok", "rule {n}: {report:#}");
        assert!(rule(&report, n)["findings"].as_array().unwrap().is_empty());
    }
    let events = report["events"].as_array().unwrap();
    assert_eq!(events.len(), 15);
    assert!(
        events.iter().all(|e| e["outcome"] == "accepted"),
        "{report:#}"
    );
    assert_eq!(events[13]["endpoint"], "impression");
    assert_eq!(events[14]["adIdVerdict"], "foreign");

    // An id nobody used: empty, with a note.
    let report = h.inspect("nobody");
    assert_eq!(report["events"], serde_json::json!([]));
    assert!(report["rules"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["verdict"] == "not_applicable"));

    // In one process the api serves the same report on its own port.
    let auth = format!("Bearer {}", h.token);
    let via_api = send(
        h.api,
        "GET",
        "/v1/debug/events?trackingId=s-clean",
        &[("Authorization", &auth)],
        b"",
    )
    .unwrap();
    assert_eq!(
        via_api.status,
        200,
        "{}",
        String::from_utf8_lossy(&via_api.body)
    );
    assert_eq!(via_api.header("cache-control"), Some("no-store"));
    assert_eq!(via_api.json()["rules"], h.inspect("s-clean")["rules"]);
    let missing = send(
        h.api,
        "GET",
        "/v1/debug/events",
        &[("Authorization", &auth)],
        b"",
    )
    .unwrap();
    assert_eq!(missing.status, 400);
    let no_token = send(
        h.api,
        "GET",
        "/v1/debug/events?trackingId=s-clean",
        &[],
        b"",
    )
    .unwrap();
    assert_eq!(no_token.status, 401);
    assert_eq!(h.svc.terminate(), Some(0));
}

/// The same events, two settings of `RM_CONTROL_DEBOUNCE_MS` (300 ms from the
/// environment, 3000 ms from the flag), neither the default: the inspector flags as
/// rapid toggles exactly the pauses the video funnel report merges.
#[test]
fn the_inspector_and_the_funnel_report_share_the_control_debounce() {
    // Pauses 500, 1500 and 4000 ms apart: 300 ms merges none, 3000 ms the first two.
    for (ms, from_flag, pauses, gaps) in [
        (300, false, 4, vec![]),
        (3_000, true, 2, vec!["500 ms apart", "1500 ms apart"]),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let value = ms.to_string();
        let (mut env, args) = if from_flag {
            (vec![], vec!["--control-debounce-ms", value.as_str()])
        } else {
            (vec![("RM_CONTROL_DEBOUNCE_MS", value.clone())], vec![])
        };
        // A genuine served ad: the funnel counts the views of verified ad ids only.
        let key = rm_schemas::ad_id::AdIdKeys::generate_key();
        let ad = rm_schemas::ad_id::AdIdKeys::from_list(&key)
            .unwrap()
            .mint("camp-db", "v-db", chrono::Utc::now().timestamp() + 3_600)
            .unwrap();
        env.push(("RM_AD_ID_KEYS", key));
        let h = Harness::start_with(dir.path(), &env, &args);
        // Dated a minute ago: the aggregator takes events of the last 30 days only.
        let t0 = chrono::Utc::now().timestamp_millis() - 60_000;
        for (kind, at) in [
            ("videoCreativeView", 0),
            ("videoPlay", 100),
            ("videoPause", 1_000),
            ("videoPause", 1_500),
            ("videoPause", 3_000),
            ("videoPause", 7_000),
        ] {
            assert_eq!(h.video_of(&ad, "s-debounce", "v-db", kind, t0 + at), 200);
        }

        let report = h.inspect("s-debounce");
        let rule2 = rule(&report, 2);
        let findings: Vec<&str> = rule2["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f.as_str().unwrap())
            .collect();
        assert_eq!(findings.len(), gaps.len(), "{ms} ms: {rule2:#}");
        for (f, gap) in findings.iter().zip(&gaps) {
            assert!(f.contains(gap), "{ms} ms: {f}");
            assert!(f.contains(&format!("at least {ms} ms")), "{ms} ms: {f}");
        }
        let verdict = if gaps.is_empty() { "ok" } else { "violated" };
        assert_eq!(rule2["verdict"], verdict, "{ms} ms: {rule2:#}");

        // The report, once the aggregator has the whole view.
        let auth = format!("Bearer {}", h.token);
        let started = std::time::Instant::now();
        let row = loop {
            let r = send(
                h.api,
                "GET",
                &format!("/v1/reports/video-funnel?adId={}", enc(&ad)),
                &[("Authorization", &auth)],
                b"",
            )
            .unwrap();
            assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
            let row = r.json()["rows"][0].clone();
            let done = row["plays"] == 1 && row["pauses"] == pauses;
            if done || started.elapsed() > Duration::from_secs(30) {
                break row;
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        assert_eq!(row["pauses"], pauses, "{ms} ms: {row:#}");
        assert_eq!(
            (&row["views"], &row["plays"], &row["funnelGapViolations"]),
            (
                &serde_json::json!(1),
                &serde_json::json!(1),
                &serde_json::json!(0)
            ),
            "{ms} ms: {row:#}"
        );
        // Agreement: every pause the report merged is one rapid toggle of the inspector.
        assert_eq!(4 - pauses, findings.len() as u64, "{ms} ms");
        assert_eq!(h.svc.terminate(), Some(0));
    }
}

/// A rejected event is never shown as genuine (issue 23): a beacon refused for a
/// missing parameter, carrying a forged ad id that names the `demo` namespace, does
/// not enter that tenant's inspector view.
#[test]
fn a_rejected_event_with_a_forged_ad_id_is_not_shown_to_the_namespace_it_names() {
    let dir = tempfile::tempdir().unwrap();
    let h = Harness::start(dir.path());
    let forged = "rm2.demo.demo-video.ad-1.4102444800.nonce.c2lnbmF0dXJl";
    // No interactionType: a 400, recorded by the inspector as refused.
    let r = get(
        h.svc.ingest,
        &common::beacon(&[
            ("adId", forged),
            ("sessionId", "s-forged"),
            ("timestamp", &ts(0)),
        ]),
    )
    .unwrap();
    assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(&r.body));
    let tenant = common::token(h.api, "demo-client", "demo-secret", Some("reports"));
    let seen = h.inspect_with("s-forged", Some(&tenant));
    let events = if seen.status == 200 {
        seen.json()["events"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    } else {
        Vec::new()
    };
    assert!(
        events.is_empty(),
        "the tenant sees the forged event: {events:?}"
    );
}

/// An edge's inspector forgets a shopper on request (`DELETE /v1/debug/events`, scope
/// `shoppers`): a token of another scope is a 403; a tenant forgets only its
/// namespace's events (here none: the test's ad ids name no namespace); an operator
/// forgets them all, under every id the events carried.
#[test]
fn an_erasure_on_the_edge_forgets_the_shoppers_events() {
    let dir = tempfile::tempdir().unwrap();
    let h = Harness::start(dir.path());
    assert_eq!(h.product_impression("s-erase", 0), 200);
    assert_eq!(h.cart("s-erase", "2", 10), 200);
    let events = |id: &str| h.inspect(id)["events"].as_array().map_or(0, Vec::len);
    assert_eq!(events("s-erase"), 2);
    let delete = |auth: &str| {
        send(
            h.svc.ingest,
            "DELETE",
            "/v1/debug/events?trackingId=s-erase",
            &[("Authorization", &format!("Bearer {auth}"))],
            b"",
        )
        .unwrap()
    };
    let reports = common::token(h.api, "demo-client", "demo-secret", Some("reports"));
    assert_eq!(delete(&reports).status, 403);
    let tenant = common::token(h.api, "demo-client", "demo-secret", Some("shoppers"));
    let r = delete(&tenant);
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["inspectorEvents"], 0, "not the tenant's events");
    assert_eq!(events("s-erase"), 2);
    let r = delete(&h.token);
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["inspectorEvents"], 2);
    assert_eq!(events("s-erase"), 0);
    let none = send(
        h.svc.ingest,
        "DELETE",
        "/v1/debug/events",
        &[("Authorization", &format!("Bearer {}", h.token))],
        b"",
    )
    .unwrap();
    assert_eq!(none.status, 400, "no trackingId");
}
