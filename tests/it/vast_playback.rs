//! An independent VAST client proves the served `adm`: `@dailymotion/vast-client`
//! parses the banner X video ad from `POST /v1/ads/generate`, finds one tracking
//! block per creative with that creative's UniversalAdId, plays both creatives
//! through its `VASTTracker` (which expands `[TIMESTAMP]` and `[CACHEBUSTING]`),
//! and every URL it fires is accepted by the running edge; the video funnel report
//! then shows exactly those two views.
#![allow(clippy::unwrap_used, missing_docs)]

use crate::common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{demo_token, free_port, get, required_setting, send, Service};
use serde_json::{json, Value};

fn node_ready(js: &std::path::Path) -> Option<()> {
    let have_node = Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !have_node {
        required_setting(
            "RM_NODE_REQUIRED_BUT_MISSING",
            "node (Node.js) for the VAST client test",
        )?;
    }
    if !js.join("node_modules/@dailymotion/vast-client").exists() {
        let ok = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--prefix"])
            .arg(js)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            required_setting("RM_NPM_REQUIRED_BUT_FAILED", "npm ci in tests/js")?;
        }
    }
    Some(())
}

#[test]
fn vast_client_playback_is_accepted_and_counted_once() {
    let js = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/js");
    if node_ready(&js).is_none() {
        eprintln!("SKIPPED: node or the npm packages are unavailable");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let svc = Service::start_with_args(
        "all",
        dir.path(),
        &[
            ("RM_INGEST_ADDR", format!("127.0.0.1:{port}")),
            ("RM_API_BEACON_BASE_URL", format!("http://127.0.0.1:{port}")),
            ("RM_AGGREGATOR_BATCH_MAX_WAIT_MS", "100".into()),
        ],
        &[],
        Some(port),
    );
    svc.wait_ready(svc.api, Duration::from_secs(60));
    let tok = demo_token(svc.api);
    let body = json!({"sessionId": "vast-s1", "placement": "category", "catalogId": "demo-catalog", "maxNumberOfAds": 5});
    let r = send(
        svc.api,
        "POST",
        "/v1/ads/generate",
        &[
            ("Authorization", &format!("Bearer {tok}")),
            ("Content-Type", "application/json"),
        ],
        &serde_json::to_vec(&body).unwrap(),
    )
    .unwrap();
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let ads = r.json();
    assert!(
        !ads["ads"].as_array().unwrap().is_empty(),
        "at least one product ad: {ads}"
    );
    let video = ads["banners"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["adm"].is_string())
        .expect("a banner X video ad")
        .clone();
    let ad_id = video["partnerAdId"].as_str().unwrap().to_owned();
    let adm_path = dir.path().join("adm.xml");
    std::fs::write(&adm_path, video["adm"].as_str().unwrap()).unwrap();

    let out = Command::new("node")
        .arg(js.join("vast_playback.mjs"))
        .arg(&adm_path)
        .current_dir(&js)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "node: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let played: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(played["errors"], json!([]));
    let creatives = played["creatives"].as_array().unwrap();
    assert_eq!(creatives.len(), 2);
    let ids: Vec<&str> = creatives
        .iter()
        .map(|c| c["universalAdIds"][0].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["demo-crunch-15s", "demo-dip-30s"]);
    let mut mapped = vec![
        "complete",
        "creativeView",
        "firstQuartile",
        "midpoint",
        "mute",
        "pause",
        "resume",
        "skip",
        "start",
        "thirdQuartile",
        "unmute",
    ];
    mapped.sort_unstable();
    for c in creatives {
        assert_eq!(
            c["trackingEvents"],
            json!(mapped),
            "rule 5 and 6: exactly the mapped events"
        );
    }

    // Every fired URL reaches the edge, macros expanded, and is accepted.
    let fired = played["fired"].as_array().unwrap();
    let mut interaction = 0;
    for u in fired {
        let u = u.as_str().unwrap();
        assert!(
            !u.contains("[TIMESTAMP]") && !u.contains("[CACHEBUSTING]"),
            "{u}"
        );
        let path = &u[u.find("/v1/").unwrap()..];
        let r = get(svc.ingest, path).unwrap();
        assert_eq!(
            r.status,
            200,
            "{path}: {}",
            String::from_utf8_lossy(&r.body)
        );
        if path.starts_with("/v1/events/ad/interaction") {
            interaction += 1;
        }
    }
    // Per creative: creativeView, start, pause, resume, mute, unmute, 3 quartiles and
    // two completes: vast-client fires `complete` again on the second `complete()`
    // call, as a looping player would; the funnel still counts one (rule 1).
    assert_eq!(interaction, 2 * 11, "fired: {fired:#?}");

    // The banner's click URL redirects to its signed ctaLink, once durable; a forged
    // destination is refused, so the edge is never an open redirect.
    let click = video["clickUrl"].as_str().unwrap();
    let click_path = &click[click.find("/v1/").unwrap()..];
    // Fired now, as the player's own clicks were (a fixed date would land on a day
    // row of its own once that day has passed).
    let now = chrono::Utc::now().format("%Y-%m-%dT%H%%3A%M%%3A%S.%3fZ");
    let click_path = click_path.replace("[TIMESTAMP]", &now.to_string());
    let r = get(svc.ingest, &click_path).unwrap();
    assert_eq!(r.status, 302, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.header("location"), Some("https://shop.example/snacks"));
    let forged = click_path.replace("shop.example", "evil.example");
    assert_eq!(get(svc.ingest, &forged).unwrap().status, 400);

    // The funnel shows exactly one view per creative.
    let t = Instant::now();
    let rows = loop {
        let r = send(
            svc.api,
            "GET",
            // The served ad's own rows (a drill-down by adId, from its stored views).
            &format!("/v1/reports/video-funnel?campaignId=demo-video&adId={ad_id}"),
            &[("Authorization", &format!("Bearer {tok}"))],
            b"",
        )
        .unwrap();
        let rows = r.json()["rows"].as_array().cloned().unwrap_or_default();
        let done = rows.len() == 2 && rows.iter().all(|r| r["completes"] == 1);
        if done || t.elapsed() > Duration::from_secs(30) {
            break rows;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(rows.len(), 2, "{rows:#?}");
    for row in &rows {
        assert_eq!(row["adId"], ad_id.as_str());
        for k in [
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
        ] {
            assert_eq!(row[k], 1, "{k} in {row}");
        }
        assert_eq!(row["completionRate"], 1.0);
    }
    // The ad's impression (fired by both creatives' trackers) counts once; its clicks
    // (one ClickTracking per creative, and the redirect above, by the same shopper
    // within the click window) once; spend is billable clicks x the campaign's maxBid
    // ($2.50).
    let report = |path: &str| {
        send(
            svc.api,
            "GET",
            path,
            &[("Authorization", &format!("Bearer {tok}"))],
            b"",
        )
        .unwrap()
        .json()["rows"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    let t = Instant::now();
    let ad_rows = loop {
        let rows = report(&format!(
            "/v1/reports/ads?campaignId=demo-video&adId={ad_id}"
        ));
        if rows.first().is_some_and(|r| r["clicks"] == 1) || t.elapsed() > Duration::from_secs(30) {
            break rows;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(ad_rows.len(), 1, "{ad_rows:#?}");
    assert_eq!(ad_rows[0]["impressions"], 1);
    assert_eq!(ad_rows[0]["clicks"], 1);
    assert_eq!(ad_rows[0]["adIdStatus"], "verified");
    let campaign = report("/v1/reports/campaigns?campaignId=demo-video");
    assert_eq!(campaign.len(), 1, "{campaign:#?}");
    assert_eq!(campaign[0]["impressions"], 1);
    assert_eq!(campaign[0]["clicks"], 1);
    assert_eq!(campaign[0]["videoPlays"], 2);
    // Exact money: a decimal string in the campaign's currency.
    assert_eq!(
        (&campaign[0]["spend"], &campaign[0]["currency"]),
        (&serde_json::json!("2.50"), &serde_json::json!("USD"))
    );
    svc.terminate();
}
