//! The browser snippet (`api/sdk/beacon.js`) in a real browser against the real
//! binary: `retail-media all` on its embedded log and store, then
//! `tests/js/sdk_browser.mjs` drives Debian's Chromium through playwright-core over
//! the fixture shop (tiles scrolled in and out of view with jitter and a re-render,
//! a click, a cart 1, 2, 3, 0, a creative click, two HTML5 videos). Checked here: what
//! the edge wrote to the log (read back after the process exits) and what the
//! reports show, with exact counts. Skipped with a message when node or chromium is
//! missing, unless `RM_REQUIRE_SERVICES=1`.
#![allow(clippy::unwrap_used, missing_docs)]

use crate::common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{get, read_embedded, send, Service};
use serde_json::Value;

/// `demo-operator:demo-operator-secret`, the quick start's operator client (every
/// namespace: the test's campaign is in none), in HTTP Basic form.
const DEMO_BASIC: &str = "Basic ZGVtby1vcGVyYXRvcjpkZW1vLW9wZXJhdG9yLXNlY3JldA==";

/// Skips (returns `None`) or, under `RM_REQUIRE_SERVICES=1`, fails.
fn required_tool(found: bool, what: &str) -> Option<()> {
    if found {
        return Some(());
    }
    if std::env::var("RM_REQUIRE_SERVICES").as_deref() == Ok("1") {
        panic!("{what} is missing but RM_REQUIRE_SERVICES=1");
    }
    eprintln!("SKIPPED: {what} is missing");
    None
}

fn chromium() -> PathBuf {
    std::env::var_os("RM_CHROMIUM")
        .map_or_else(|| PathBuf::from("/usr/bin/chromium"), PathBuf::from)
}

fn js_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("js")
}

/// Installs the pinned npm packages from the committed lockfile when absent.
fn npm_ci(js: &Path) {
    if js
        .join("node_modules/playwright-core/package.json")
        .exists()
    {
        return;
    }
    let out = Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund", "--prefix"])
        .arg(js)
        .output()
        .expect("run npm ci");
    assert!(
        out.status.success(),
        "npm ci --prefix tests/js failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// GETs a report, with a client-credentials bearer token when the route asks for one.
struct Reports {
    api: SocketAddr,
    bearer: Option<String>,
}

impl Reports {
    fn get(&mut self, path: &str) -> Value {
        let mut r = self.fetch(path);
        if r.status == 401 && self.bearer.is_none() {
            let t = send(
                self.api,
                "POST",
                "/v1/oauth2/token",
                &[
                    ("Authorization", DEMO_BASIC),
                    ("Content-Type", "application/x-www-form-urlencoded"),
                ],
                b"grant_type=client_credentials",
            )
            .unwrap();
            assert_eq!(t.status, 200, "token: {}", String::from_utf8_lossy(&t.body));
            let token = t.json()["access_token"].as_str().unwrap().to_owned();
            self.bearer = Some(format!("Bearer {token}"));
            r = self.fetch(path);
        }
        assert_eq!(
            r.status,
            200,
            "{path}: {}",
            String::from_utf8_lossy(&r.body)
        );
        r.json()
    }

    fn fetch(&self, path: &str) -> common::HttpResponse {
        match &self.bearer {
            Some(b) => send(self.api, "GET", path, &[("Authorization", b)], b"").unwrap(),
            None => get(self.api, path).unwrap(),
        }
    }

    /// Polls `path` until `check` accepts its rows (the aggregator batches).
    fn until(&mut self, path: &str, check: impl Fn(&[Value]) -> Result<(), String>) -> Vec<Value> {
        let t = Instant::now();
        loop {
            let rows = self.get(path)["rows"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            match check(&rows) {
                Ok(()) => return rows,
                Err(e) if t.elapsed() > Duration::from_secs(30) => {
                    panic!(
                        "{path}: {e}\nrows: {}",
                        serde_json::to_string_pretty(&rows).unwrap()
                    )
                }
                Err(_) => std::thread::sleep(Duration::from_millis(200)),
            }
        }
    }
}

fn row<'a>(rows: &'a [Value], key: &str, value: &str) -> Result<&'a Value, String> {
    rows.iter()
        .find(|r| r[key] == value)
        .ok_or_else(|| format!("no row with {key} = {value}"))
}

fn expect_fields(r: &Value, want: &[(&str, Value)]) -> Result<(), String> {
    for (k, v) in want {
        if &r[*k] != v {
            return Err(format!("{k}: expected {v}, got {}", r[*k]));
        }
    }
    Ok(())
}

fn node_found() -> bool {
    Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn the_snippet_rules_hold_in_node_unit_tests() {
    if required_tool(node_found(), "node (Node.js, with npm)").is_none() {
        return;
    }
    let out = Command::new("node")
        .arg("--test")
        .arg(js_dir().join("sdk_units.test.mjs"))
        .output()
        .expect("run node --test");
    let text = String::from_utf8_lossy(&out.stdout);
    for line in text
        .lines()
        .filter(|l| l.starts_with("ok ") || l.starts_with("not ok") || l.starts_with("# "))
    {
        println!("{line}");
    }
    assert!(
        out.status.success(),
        "node --test tests/js/sdk_units.test.mjs failed:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("# fail 0"), "{text}");
}

#[test]
fn the_browser_snippet_reports_what_the_shopper_did() {
    if required_tool(node_found(), "node (Node.js, with npm)").is_none() {
        return;
    }
    let browser = chromium();
    if required_tool(
        browser.exists(),
        &format!("chromium at {} (deploy/local/up.sh installs Debian's chromium; RM_CHROMIUM overrides the path)", browser.display()),
    )
    .is_none()
    {
        return;
    }
    let js = js_dir();
    npm_ci(&js);

    let dir = tempfile::tempdir().unwrap();
    // The shop's ads as the api serves them: genuine ad ids, one per placement.
    let key = rm_schemas::ad_id::AdIdKeys::generate_key();
    let keys = rm_schemas::ad_id::AdIdKeys::from_list(&key).unwrap();
    let expires = chrono::Utc::now().timestamp() + 3_600;
    let served: std::collections::BTreeMap<&str, String> = [
        ("rm1.camp-sdk.ad-tiles", "banner"),
        ("rm1.camp-sdk.ad-banner", "banner"),
        ("rm1.camp-sdk.ad-video", "v-main"),
    ]
    .into_iter()
    .map(|(placeholder, creative)| {
        (
            placeholder,
            keys.mint("camp-sdk", creative, expires).unwrap(),
        )
    })
    .collect();
    let svc = Service::start("all", dir.path(), &[("RM_AD_ID_KEYS", key)]);
    svc.wait_ready(svc.api, Duration::from_secs(30));
    let out = Command::new("node")
        .env("RM_TEST_AD_IDS", serde_json::to_string(&served).unwrap())
        .arg(js.join("sdk_browser.mjs"))
        .arg("--edge")
        .arg(format!("http://{}", svc.ingest))
        .arg("--api")
        .arg(format!("http://{}", svc.api))
        .arg("--chromium")
        .arg(&browser)
        .output()
        .expect("run node sdk_browser.mjs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    let summary: Value = stdout
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("SUMMARY "))
        .map(|s| serde_json::from_str(s).unwrap())
        .unwrap_or_else(|| panic!("no SUMMARY line from sdk_browser.mjs:\n{stdout}"));
    println!("browser summary: {summary}");
    assert!(
        out.status.success() && summary["ok"] == true,
        "the browser run failed: {:#}",
        summary["failures"]
    );
    let tracking_id = summary["trackingId"].as_str().unwrap().to_owned();

    // The api serves the very file the browser ran.
    let sdk = &summary["apiSdk"];
    assert_eq!(sdk["status"], 200, "GET /sdk/beacon.js on the api: {sdk}");
    assert_eq!(sdk["sameBytes"], true, "{sdk}");
    assert_eq!(
        sdk["contentType"], "text/javascript; charset=utf-8",
        "{sdk}"
    );
    assert_eq!(sdk["etag"], rm_api::sdk::etag(), "{sdk}");
    assert_eq!(sdk["revalidatedStatus"], 304, "{sdk}");

    // What the reports show.
    let mut reports = Reports {
        api: svc.api,
        bearer: None,
    };
    let products = reports.until("/v1/reports/products?campaignId=camp-sdk", |rows| {
        use serde_json::json;
        // The tiles are one served ad: its product impressions and click are billable
        // (the browser is no bot, the ad id genuine), once per product: tile A's
        // second viewability occurrence is the served ad's repeat.
        let flagged = |repeats: u64| {
            json!({"knownBot": 0, "nonBrowser": 0, "prefetch": 0, "unverifiedAdId": 0,
                   "beforeServe": 0, "productNotInAd": 0, "servedAdRepeat": repeats,
                   "clickWindow": 0})
        };
        let a = row(rows, "productCode", "P-A")?;
        expect_fields(
            a,
            &[
                ("impressions", json!(1)),
                ("clicks", json!(1)),
                ("ctr", json!(1.0)),
                ("invalidImpressions", flagged(1)),
                ("invalidClicks", flagged(0)),
            ],
        )?;
        let b = row(rows, "productCode", "P-B")?;
        expect_fields(
            b,
            &[
                ("impressions", json!(1)),
                ("clicks", json!(0)),
                ("ctr", json!(0.0)),
                ("invalidImpressions", flagged(0)),
                ("invalidClicks", flagged(0)),
            ],
        )?;
        if rows.len() != 2 {
            return Err(format!(
                "expected rows for P-A and P-B only, got {}",
                rows.len()
            ));
        }
        Ok(())
    });
    // Rows are per creative: the served tiles ad's.
    let tiles = rm_store::model::ad_id_campaign::creative_of(&served["rm1.camp-sdk.ad-tiles"]);
    assert!(products.iter().all(|r| r["catalogId"] == "cat-sdk"
        && r["creativeId"] == tiles.as_str()
        && r["adId"] == ""));
    let carts = reports.until("/v1/reports/carts?catalogId=cat-sdk", |rows| {
        use serde_json::json;
        let r = row(rows, "productCode", "P-A")?;
        expect_fields(
            r,
            &[
                ("trackingId", json!(tracking_id)),
                ("units", json!(0)),
                ("adds", json!(1)),
                ("increments", json!(2)),
                ("decrements", json!(0)),
                ("removals", json!(1)),
                ("campaignId", json!("camp-sdk")),
            ],
        )
    });
    assert_eq!(carts.len(), 1, "{carts:?}");
    reports.until("/v1/reports/video-funnel?campaignId=camp-sdk", |rows| {
        use serde_json::json;
        let main = row(rows, "videoId", "v-main")?;
        let mut want: Vec<(&str, Value)> = [
            "views",
            "creativeViews",
            "plays",
            "firstQuartiles",
            "midpoints",
            "thirdQuartiles",
            "completes",
            "pauses",
            "resumes",
            "mutes",
            "unmutes",
        ]
        .iter()
        .map(|k| (*k, json!(1)))
        .collect();
        want.extend([
            ("skips", json!(0)),
            ("completionRate", json!(1.0)),
            ("funnelGapViolations", json!(0)),
            ("repeatedMilestoneViolations", json!(0)),
        ]);
        expect_fields(main, &want)?;
        let seek = row(rows, "videoId", "v-seek")?;
        expect_fields(
            seek,
            &[
                ("views", json!(1)),
                ("creativeViews", json!(1)),
                ("plays", json!(1)),
                ("firstQuartiles", json!(0)),
                ("midpoints", json!(0)),
                ("thirdQuartiles", json!(0)),
                ("completes", json!(0)),
                ("skips", json!(1)),
                ("pauses", json!(0)),
                ("funnelGapViolations", json!(0)),
                ("repeatedMilestoneViolations", json!(0)),
            ],
        )
    });

    println!(
        "reports read {}",
        if reports.bearer.is_some() {
            "with a client-credentials bearer token (they answered 401 without)"
        } else {
            "without a token"
        }
    );

    // What the edge wrote: exactly the beacons the page fired, one tracking id.
    assert_eq!(svc.terminate(), Some(0));
    let records = read_embedded(dir.path(), rm_schemas::topics::AD_INTERACTIONS);
    let mut by_type: BTreeMap<String, u64> = BTreeMap::new();
    for r in &records {
        let e = &r.event;
        let mut k = e.interaction_type.as_str().to_owned();
        for part in [&e.product_code, &e.video_id].into_iter().flatten() {
            k = format!("{k}:{part}");
        }
        *by_type.entry(k).or_default() += 1;
        assert_eq!(e.session_id.as_deref(), Some(tracking_id.as_str()), "{r:?}");
        assert!(e.customer_id.is_none() && e.dtm_token.is_none(), "{r:?}");
    }
    let fired: BTreeMap<String, u64> = serde_json::from_value(summary["byType"].clone()).unwrap();
    assert_eq!(by_type, fired, "the log holds exactly what the page fired");
    assert_eq!(records.len() as u64, summary["beacons"].as_u64().unwrap());
    let carts: Vec<u64> = records
        .iter()
        .filter(|r| r.event.interaction_type.as_str() == "cart")
        .map(|r| r.event.units.unwrap())
        .collect();
    assert_eq!(carts, [1, 2, 3, 0]);
}
