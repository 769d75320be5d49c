//! The analyst page (`GET /reports`, `api/web/`) end to end: `retail-media all` on its
//! embedded log and store, a known set of beacons fired at the edge for one campaign
//! (three video views reaching different milestones, two products of which one is
//! never clicked, carts 1, 2, 3, 0 and a second cart line) and an order the click
//! earns, plus one impression of another campaign; once the JSON reports show them,
//! `tests/js/analyst_page.mjs` drives Debian's Chromium through playwright-core: a
//! wrong secret, the demo client's login, the campaign picker, the numbers on the
//! page, sorting, each table's "Download CSV", a refused token and the network down;
//! then a client of another namespace logs in and sees only its own campaign, and
//! the page names the namespace each login is in.
//! Checked here: every number the page shows against what was fired, and every
//! downloaded CSV byte for byte against the api's `format=csv` answer and row for row
//! against the page. The screenshot is saved as `<target>/test-output/analyst-page.png`.
//! Skipped with a message when node, chromium or playwright-core is missing, unless
//! `RM_REQUIRE_SERVICES=1`.
#![allow(clippy::unwrap_used, missing_docs)]

use crate::common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{beacon, demo_token, enc, get, send, Service};
use serde_json::{json, Value};

/// The campaign the test fires (a demo campaign: its fixed costs, $5.00, give ROAS).
const CAMPAIGN: &str = "demo-products";
/// Another campaign of the demo namespace, so picking one matters.
const OTHER: &str = "camp-other";
/// The demo data's namespace (ad ids name it).
const NS: &str = "demo";
/// A second namespace, its client and its campaign.
const RIVAL_NS: &str = "rival";
const RIVAL_CAMPAIGN: &str = "rival-camp";
const CATALOG: &str = "cat-page";
/// The ad id signing key given to the service (`RM_AD_ID_KEYS`), raw and base64url.
const KEY: &[u8] = b"0123456789abcdef-analyst-page-ky";

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

fn js_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("js")
}

/// `<target>/test-output`, next to the binary's profile directory.
fn output_dir() -> PathBuf {
    let bin = Path::new(env!("CARGO_BIN_EXE_retail-media"));
    let target = bin.parent().and_then(Path::parent).unwrap();
    let dir = target.join("test-output");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Whether playwright-core is installed, running `npm ci` from the lockfile if not.
fn playwright_core(js: &Path) -> bool {
    let marker = js.join("node_modules/playwright-core/package.json");
    if !marker.exists() {
        let out = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--prefix"])
            .arg(js)
            .output();
        if let Ok(o) = out {
            if !o.status.success() {
                eprintln!(
                    "npm ci --prefix tests/js failed:\n{}",
                    String::from_utf8_lossy(&o.stderr)
                );
            }
        }
    }
    marker.exists()
}

fn ok_beacon(edge: SocketAddr, params: &[(&str, &str)]) {
    let r = get(edge, &beacon(params)).unwrap();
    assert_eq!(
        r.status,
        200,
        "{params:?}: {}",
        String::from_utf8_lossy(&r.body)
    );
}

/// Creates the other demo campaign and a second namespace with its client and
/// campaign (as the operator); the rival client's secret.
fn namespaces(api: SocketAddr, operator: &str) -> String {
    let post = |path: &str, body: Value| {
        let r = send(
            api,
            "POST",
            path,
            &[
                ("Authorization", &format!("Bearer {operator}")),
                ("Content-Type", "application/json"),
            ],
            &serde_json::to_vec(&body).unwrap(),
        )
        .unwrap();
        assert!(
            r.status < 300,
            "{path}: {}",
            String::from_utf8_lossy(&r.body)
        );
        r.json()
    };
    for (id, ns) in [(OTHER, NS), (RIVAL_CAMPAIGN, RIVAL_NS)] {
        post(
            "/v3/bannerx-campaigns",
            json!({"bannerXCampaign": {"id": id, "name": id, "namespaceId": ns}}),
        );
    }
    let c = post(
        "/v1/admin/clients",
        json!({"clientId": "rival-client", "namespaceId": RIVAL_NS, "scopes": ["reports"]}),
    );
    c["clientSecret"].as_str().unwrap().to_owned()
}

/// Fires the known set of beacons and the order; timestamps from `t0`, a second apart.
fn fire(edge: SocketAddr, api: SocketAddr, t0: chrono::DateTime<chrono::Utc>) {
    let keys = rm_schemas::ad_id::AdIdKeys::new(vec![KEY.to_vec()]).unwrap();
    let expiry = t0.timestamp() + 86_400;
    // Each viewer is served the video ad on their own (one served ad, one view).
    let video_ads: Vec<String> = (0..3)
        .map(|_| keys.mint_in(NS, CAMPAIGN, "v-page", expiry).unwrap())
        .collect();
    let ad_a = keys.mint_in(NS, CAMPAIGN, "P-A", expiry).unwrap();
    let ad_z = keys.mint_in(NS, CAMPAIGN, "P-Z", expiry).unwrap();
    let ad_b = keys.mint_in(NS, CAMPAIGN, "P-B", expiry).unwrap();
    let ad_other = keys.mint_in(NS, OTHER, "P-O", expiry).unwrap();
    let ad_rival = keys
        .mint_in(RIVAL_NS, RIVAL_CAMPAIGN, "P-R", expiry)
        .unwrap();
    let mut n = 0;
    let mut at = || {
        n += 1;
        (t0 + chrono::Duration::seconds(n)).to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
    };
    // Three views: one complete, one to the first quartile, one seen but not played.
    let views: [(&str, &[&str]); 3] = [
        (
            "s-1",
            &[
                "videoCreativeView",
                "videoPlay",
                "videoFirstQuartile",
                "videoMidpoint",
                "videoThirdQuartile",
                "videoComplete",
            ],
        ),
        (
            "s-2",
            &["videoCreativeView", "videoPlay", "videoFirstQuartile"],
        ),
        ("s-3", &["videoCreativeView"]),
    ];
    for ((session, steps), video_ad) in views.into_iter().zip(&video_ads) {
        for step in steps {
            let ts = at();
            ok_beacon(
                edge,
                &[
                    ("adId", video_ad),
                    ("interactionType", step),
                    ("timestamp", &ts),
                    ("sessionId", session),
                    ("videoId", "v-page"),
                ],
            );
        }
    }
    // Products: P-A seen twice and clicked once, P-Z seen twice and never clicked; each
    // product ad is one served ad seen by two shoppers, so it bills one impression (the
    // second is its repeat, issue 26).
    let product = |ad: &str, itype: &str, session: &str, code: &str, ts: &str| {
        ok_beacon(
            edge,
            &[
                ("adId", ad),
                ("interactionType", itype),
                ("timestamp", ts),
                ("sessionId", session),
                ("catalogId", CATALOG),
                ("productCode", code),
            ],
        );
    };
    for (ad, itype, session, code) in [
        (&ad_a, "productImpression", "s-1", "P-A"),
        (&ad_a, "productImpression", "s-2", "P-A"),
        (&ad_z, "productImpression", "s-1", "P-Z"),
        (&ad_z, "productImpression", "s-3", "P-Z"),
        (&ad_a, "productClick", "s-1", "P-A"),
        (&ad_other, "productImpression", "s-9", "P-O"),
        (&ad_rival, "productImpression", "s-9", "P-R"),
    ] {
        product(ad, itype, session, code, &at());
    }
    // Carts: P-A 1, 2, 3, 0 (one add, three units added, nothing left); P-B 2 worth 7.50.
    let mut cart = |ad: &str, session: &str, code: &str, units: &str, value: Option<&str>| {
        let ts = at();
        let mut p = vec![
            ("adId", ad),
            ("interactionType", "cart"),
            ("timestamp", ts.as_str()),
            ("sessionId", session),
            ("catalogId", CATALOG),
            ("productCode", code),
            ("units", units),
        ];
        if let Some(v) = value {
            p.push(("conversionValue", v));
        }
        ok_beacon(edge, &p);
    };
    for units in ["1", "2", "3", "0"] {
        cart(&ad_a, "s-1", "P-A", units, None);
    }
    cart(&ad_b, "s-2", "P-B", "2", Some("7.50"));
    // An order of 2 P-A by s-1 after its click: 12.50 credited to the campaign.
    let order = json!({"orders": [{"id": "o-page-1", "sessionId": "s-1",
        "orderDate": at(), "catalogId": CATALOG,
        "orderItems": [{"productCode": "P-A", "quantity": 2, "totalOrderItemPriceAfterDiscounts": 12.5}]}]});
    assert_eq!(common::post_orders(api, &order)["accepted"], 1);
}

fn report(api: SocketAddr, token: &str, path_and_query: &str) -> common::HttpResponse {
    let r = send(
        api,
        "GET",
        path_and_query,
        &[("Authorization", &format!("Bearer {token}"))],
        b"",
    )
    .unwrap();
    assert_eq!(
        r.status,
        200,
        "{path_and_query}: {}",
        String::from_utf8_lossy(&r.body)
    );
    r
}

/// Polls the JSON reports until the aggregator has stored everything fired.
fn wait_for_reports(api: SocketAddr, token: &str) {
    let q = format!("campaignId={CAMPAIGN}");
    let t = Instant::now();
    loop {
        let rows = |p: &str| -> Vec<Value> {
            report(api, token, &format!("/v1/reports/{p}?{q}")).json()["rows"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        };
        let sum =
            |rows: &[Value], k: &str| rows.iter().map(|r| r[k].as_u64().unwrap()).sum::<u64>();
        let funnel = rows("video-funnel");
        let products = rows("products");
        let carts = rows("carts/campaigns");
        let sales = rows("sales");
        let done = sum(&funnel, "creativeViews") == 3
            && sum(&funnel, "completes") == 1
            && sum(&products, "impressions") == 2
            && sum(&products, "clicks") == 1
            && sum(&carts, "unitsAdded") == 5
            && sum(&sales, "units") == 2;
        if done {
            return;
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "the reports did not show the fired events:\nfunnel {funnel:?}\nproducts {products:?}\ncarts {carts:?}\nsales {sales:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// CSV (no quoted fields in this data) as rows of name -> value.
fn csv_rows(text: &str) -> Vec<BTreeMap<String, String>> {
    assert!(!text.contains('"'), "{text}");
    let mut lines = text.split("\r\n").filter(|l| !l.is_empty());
    let Some(head) = lines.next() else {
        return Vec::new();
    };
    let names: Vec<&str> = head.split(',').collect();
    lines
        .map(|l| {
            let cells: Vec<&str> = l.split(',').collect();
            assert_eq!(cells.len(), names.len(), "{l}");
            names
                .iter()
                .zip(cells)
                .map(|(n, c)| ((*n).to_owned(), c.to_owned()))
                .collect()
        })
        .collect()
}

fn num(s: &str) -> f64 {
    s.parse().unwrap_or_else(|_| panic!("not a number: {s:?}"))
}

/// Checks the HTTP side of the page: types, ETag revalidation, security headers.
fn check_served_files(api: SocketAddr) {
    for (path, ctype) in [
        ("/reports", "text/html; charset=utf-8"),
        ("/reports/reports.js", "text/javascript; charset=utf-8"),
        ("/reports/reports.css", "text/css; charset=utf-8"),
    ] {
        let r = get(api, path).unwrap();
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(r.header("content-type"), Some(ctype), "{path}");
        assert_eq!(r.header("cache-control"), Some("no-cache"), "{path}");
        assert!(r
            .header("content-security-policy")
            .is_some_and(|c| c.contains("default-src 'none'")));
        let tag = r.header("etag").unwrap().to_owned();
        let again = send(api, "GET", path, &[("If-None-Match", &tag)], b"").unwrap();
        assert_eq!(again.status, 304, "{path}");
        assert!(again.body.is_empty());
    }
    assert_eq!(get(api, "/reports/other.js").unwrap().status, 404);
    let post = send(api, "POST", "/reports", &[], b"").unwrap();
    assert_eq!(post.status, 405);
}

#[test]
fn the_analyst_page_shows_what_the_campaign_did() {
    let node = Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if required_tool(node, "node (Node.js, with npm)").is_none() {
        return;
    }
    let browser = std::env::var_os("RM_CHROMIUM")
        .map_or_else(|| PathBuf::from("/usr/bin/chromium"), PathBuf::from);
    let what = format!(
        "chromium at {} (deploy/local/up.sh installs Debian's chromium; RM_CHROMIUM overrides the path)",
        browser.display()
    );
    if required_tool(browser.exists(), &what).is_none() {
        return;
    }
    let js = js_dir();
    if required_tool(
        playwright_core(&js),
        "playwright-core under tests/js/node_modules (npm ci --prefix tests/js)",
    )
    .is_none()
    {
        return;
    }

    let dir = tempfile::tempdir().unwrap();
    use base64::Engine as _;
    let key = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(KEY);
    let svc = Service::start("all", dir.path(), &[("RM_AD_ID_KEYS", key)]);
    svc.wait_ready(svc.api, Duration::from_secs(30));
    check_served_files(svc.api);

    let token = demo_token(svc.api);
    let rival_secret = namespaces(svc.api, &token);
    let t0 = chrono::Utc::now() - chrono::Duration::minutes(10);
    fire(svc.ingest, svc.api, t0);
    wait_for_reports(svc.api, &token);

    let shot = output_dir().join("analyst-page.png");
    let _ = std::fs::remove_file(&shot);
    let out = Command::new("node")
        .arg(js.join("analyst_page.mjs"))
        .arg("--api")
        .arg(format!("http://{}", svc.api))
        .arg("--campaign")
        .arg(CAMPAIGN)
        .arg("--screenshot")
        .arg(&shot)
        .arg("--chromium")
        .arg(&browser)
        .arg("--rival-client")
        .arg("rival-client")
        .arg("--rival-secret")
        .arg(&rival_secret)
        .output()
        .expect("run node analyst_page.mjs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    let page: Value = stdout
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("RESULT "))
        .map(|s| serde_json::from_str(s).unwrap())
        .unwrap_or_else(|| panic!("no RESULT line from analyst_page.mjs:\n{stdout}"));
    assert!(
        out.status.success() && page["failures"].as_array().is_some_and(Vec::is_empty),
        "the browser run failed: {:#}\nservice log:\n{}",
        page["failures"],
        svc.log()
    );
    println!("screenshot: {}", shot.display());
    assert!(shot.metadata().unwrap().len() > 10_000, "screenshot saved");

    // The page, the login and the picker.
    assert_eq!(page["page"]["status"], 200);
    assert_eq!(page["page"]["title"], "Campaign reports · retail-media");
    assert_eq!(page["loginVisible"], true);
    assert_eq!(page["filtersHiddenBeforeLogin"], true);
    assert_eq!(
        page["wrongSecretStatus"],
        "login failed: wrong client id or secret"
    );
    assert_eq!(page["wrongSecretIsError"], true);
    let options = page["campaignOptions"].as_array().unwrap();
    assert!(
        options.contains(&json!(CAMPAIGN)) && options.contains(&json!(OTHER)),
        "the picker offers both campaigns with rows: {options:?}"
    );
    assert!(
        !options.contains(&json!(RIVAL_CAMPAIGN)),
        "another namespace's campaign is not offered: {options:?}"
    );
    assert_eq!(
        page["loggedInAs"],
        "Logged in as demo-client (namespace demo)."
    );
    assert!(page["status"]
        .as_str()
        .unwrap()
        .starts_with(&format!("Showing campaign {CAMPAIGN}")));
    // The other namespace's client: only its campaign, its namespace named.
    let rival = &page["rival"];
    assert_eq!(
        rival["campaignOptions"],
        json!([RIVAL_CAMPAIGN]),
        "{rival:#}"
    );
    assert_eq!(
        rival["loggedInAs"],
        "Logged in as rival-client (namespace rival)."
    );
    assert_eq!(rival["namespace"], RIVAL_NS);
    let text = rival["text"].as_str().unwrap();
    for theirs in [CAMPAIGN, OTHER, "P-A", "P-Z", "P-B", "P-O"] {
        assert!(
            !text.contains(theirs),
            "the rival's page shows demo's '{theirs}': {text}"
        );
    }

    // The video funnel: counts and rates over plays.
    let funnel: Vec<(String, f64, Value, String)> = page["funnel"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["milestone"].as_str().unwrap().to_owned(),
                r["count"].as_f64().unwrap(),
                r["rate"].clone(),
                r["rateText"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let want = [
        ("creativeViews", 3.0, Value::Null, "—"),
        ("plays", 2.0, json!(1.0), "100.0%"),
        ("firstQuartiles", 2.0, json!(1.0), "100.0%"),
        ("midpoints", 1.0, json!(0.5), "50.0%"),
        ("thirdQuartiles", 1.0, json!(0.5), "50.0%"),
        ("completes", 1.0, json!(0.5), "50.0%"),
    ];
    assert_eq!(funnel.len(), want.len(), "{funnel:?}");
    for ((m, c, r, t), (wm, wc, wr, wt)) in funnel.iter().zip(want) {
        assert_eq!((m.as_str(), *c, t.as_str()), (wm, wc, wt));
        assert_eq!(r.as_f64(), wr.as_f64(), "{m} rate");
    }
    let bars: Vec<f64> = serde_json::from_value(page["funnelChart"].clone()).unwrap();
    assert_eq!(bars.len(), 6);
    assert!(
        bars[0] > bars[1] && bars[1] == bars[2] && bars[2] > bars[3] && bars[3] == bars[5],
        "bar widths follow the counts: {bars:?}"
    );

    // Products: the zero-click product is there with CTR 0; the other campaign's is not.
    let products = page["products"].as_array().unwrap();
    let product = |code: &str| {
        products
            .iter()
            .find(|r| r["productCode"] == code)
            .unwrap_or_else(|| panic!("no row for {code}: {products:?}"))
    };
    assert_eq!(products.len(), 2, "{products:?}");
    let shown = |r: &Value| {
        let f = |k: &str| r[k].as_f64().unwrap();
        let text = r["ctrText"].as_str().unwrap().to_owned();
        (f("impressions"), f("clicks"), f("ctr"), text)
    };
    assert_eq!(shown(product("P-A")), (1.0, 1.0, 1.0, "100.0%".to_owned()));
    assert_eq!(
        shown(product("P-Z")),
        (1.0, 0.0, 0.0, "0.0%".to_owned()),
        "the zero-click product"
    );
    let s = &page["sorting"];
    assert_eq!(s["initialSort"], "descending");
    assert_eq!(s["clicksDesc"], json!(["P-A", "P-Z"]));
    assert_eq!(s["clicksDescAria"], "descending");
    assert_eq!(s["clicksAsc"], json!(["P-Z", "P-A"]));
    assert_eq!(s["clicksAscAria"], "ascending");
    assert_eq!(s["productAsc"], json!(["P-A", "P-Z"]));
    assert_eq!(s["impressionsAriaAfter"], "none");

    // Carts and sales.
    let carts: BTreeMap<String, (f64, f64, f64)> = page["carts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let f = |k: &str| r[k].as_f64().unwrap();
            (
                r["productCode"].as_str().unwrap().to_owned(),
                (f("cartsAdded"), f("unitsAdded"), f("value")),
            )
        })
        .collect();
    assert_eq!(
        carts,
        BTreeMap::from([
            ("P-A".to_owned(), (1.0, 3.0, 0.0)),
            ("P-B".to_owned(), (1.0, 2.0, 7.5))
        ])
    );
    let sales = page["sales"].as_array().unwrap();
    assert_eq!(sales.len(), 1, "{sales:?}");
    let sale = &sales[0];
    let f = |k: &str| sale[k].as_f64().unwrap();
    let t = |k: &str| sale[k].as_str().unwrap();
    assert_eq!(
        (t("productCode"), f("orders"), f("units"), f("revenue")),
        ("P-A", 1.0, 2.0, 12.5)
    );
    assert_eq!(
        (f("roas"), t("roasText"), t("credits")),
        (2.5, "2.50", "1 / 0"),
        "12.50 of revenue over the campaign's $5.00 cost, credited to the click"
    );
    assert_eq!(page["salesTotal"]["roas"].as_f64(), Some(2.5));

    // Each CSV the browser saved is the api's CSV, and holds the rows the page shows.
    let q = format!(
        "campaignId={}&from={}&to={}&format=csv",
        enc(CAMPAIGN),
        page["from"].as_str().unwrap(),
        page["to"].as_str().unwrap()
    );
    let mut csv = BTreeMap::new();
    for route in ["video-funnel", "products", "carts/campaigns", "sales"] {
        let saved = &page["csv"][route];
        let text = saved["text"]
            .as_str()
            .unwrap_or_else(|| panic!("no CSV saved for {route}"));
        let api_csv = report(svc.api, &token, &format!("/v1/reports/{route}?{q}"));
        assert_eq!(text.as_bytes(), &api_csv.body[..], "{route} CSV");
        let name = saved["filename"].as_str().unwrap();
        assert!(
            name.starts_with(&format!("{}-{CAMPAIGN}-", route.replace('/', "-")))
                && name.ends_with(".csv"),
            "{name}"
        );
        csv.insert(route, csv_rows(text));
    }
    for (milestone, count, _, _) in &funnel {
        let sum: f64 = csv["video-funnel"].iter().map(|r| num(&r[milestone])).sum();
        assert_eq!(sum, *count, "{milestone} in the CSV");
    }
    let csv_products: BTreeMap<String, (f64, f64, f64)> = csv["products"]
        .iter()
        .map(|r| {
            (
                r["productCode"].clone(),
                (num(&r["impressions"]), num(&r["clicks"]), num(&r["ctr"])),
            )
        })
        .collect();
    let page_products: BTreeMap<String, (f64, f64, f64)> = products
        .iter()
        .map(|r| {
            let f = |k: &str| r[k].as_f64().unwrap();
            (
                r["productCode"].as_str().unwrap().to_owned(),
                (f("impressions"), f("clicks"), f("ctr")),
            )
        })
        .collect();
    assert_eq!(csv_products, page_products);
    let csv_carts: BTreeMap<String, (f64, f64, f64)> = csv["carts/campaigns"]
        .iter()
        .map(|r| {
            (
                r["productCode"].clone(),
                (
                    num(&r["cartsAdded"]),
                    num(&r["unitsAdded"]),
                    num(&r["value"]),
                ),
            )
        })
        .collect();
    assert_eq!(csv_carts, carts);
    assert_eq!(csv["sales"].len(), 1);
    assert_eq!(
        (
            num(&csv["sales"][0]["revenue"]),
            num(&csv["sales"][0]["roas"])
        ),
        (12.5, 2.5)
    );

    // Failures are said plainly.
    assert_eq!(
        page["refusedTokenStatus"],
        "login failed: the token was refused; log in again"
    );
    assert_eq!(page["filtersHiddenAfterRefusal"], true);
    assert!(
        page["offlineStatus"]
            .as_str()
            .unwrap()
            .starts_with("network down"),
        "{}",
        page["offlineStatus"]
    );
}
