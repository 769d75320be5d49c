//! Spend limits against the budget-drain attack (issue 26): spend is billable clicks x
//! `maxBid`, and the ads index reads the billable clicks from the tallies the
//! aggregator keeps (`rm_store::model::tallies`). A competitor who saw one served ad
//! and fires its click URL with 40 `customerId`s of its choice makes one billable
//! click, $1.00 of a $2.50 daily limit: the campaign is still served. Genuine clicks
//! on two more served ads bring it to $3.00: within seconds the campaign is no longer
//! served, and the campaign summary says the same spend.

#![allow(clippy::unwrap_used, missing_docs)]

use crate::common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::billable_clicks::amount;
use common::{enc, get, report_rows, send, token, Service};
use serde_json::{json, Value};

const CATALOG: &str = "spend-cat";
const PRODUCT: &str = "spend-p1";
const CAMPAIGN: &str = "spend-camp";

fn post(api: SocketAddr, tok: &str, path: &str, body: &Value) -> Value {
    let r = send(
        api,
        "POST",
        path,
        &[
            ("Authorization", &format!("Bearer {tok}")),
            ("Content-Type", "application/json"),
        ],
        &serde_json::to_vec(body).unwrap(),
    )
    .unwrap();
    assert_eq!(
        r.status,
        200,
        "{path}: {}",
        String::from_utf8_lossy(&r.body)
    );
    r.json()
}

/// The campaign's ad for `shopper`, if the index serves one now: its realised id.
fn served(api: SocketAddr, tok: &str, shopper: &str) -> Option<String> {
    let req = json!({"sessionId": shopper, "placement": "category", "catalogId": CATALOG, "maxNumberOfAds": 5});
    let r = post(api, tok, "/v1/ads/generate", &req);
    r["ads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["campaignId"] == CAMPAIGN)
        .map(|a| a["partnerAdId"].as_str().unwrap().to_owned())
}

/// Waits until the index serves the campaign (`true`) or stops serving it (`false`).
fn wait_served(api: SocketAddr, tok: &str, want: bool, shopper: &str) -> Option<String> {
    let t = Instant::now();
    loop {
        let ad = served(api, tok, shopper);
        if ad.is_some() == want {
            return ad;
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "the campaign is {}served after 30 s",
            if want { "not " } else { "still " }
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// A click on served ad `ad` through the edge's click endpoint, by `customer`.
fn click(edge: SocketAddr, ad: &str, customer: &str) {
    let ts = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let r = get(
        edge,
        &format!(
            "/v1/events/ad/click?adId={}&customerId={}&timestamp={}",
            enc(ad),
            enc(customer),
            enc(&ts)
        ),
    )
    .unwrap();
    assert!(r.status < 400, "{}", String::from_utf8_lossy(&r.body));
}

/// The campaign's billable clicks and spend in its summary, once `clicks` show.
fn summary(api: SocketAddr, tok: &str, clicks: u64) -> Value {
    let t = Instant::now();
    loop {
        let rows = report_rows(
            api,
            &format!("Bearer {tok}"),
            &format!("/v1/reports/campaigns?campaignId={CAMPAIGN}"),
        );
        if rows.first().is_some_and(|r| r["clicks"] == clicks) {
            return rows[0].clone();
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "{clicks} clicks: {rows:#?}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[test]
fn a_drained_click_url_spends_one_bid_and_genuine_clicks_stop_the_campaign() {
    let dir = tempfile::tempdir().unwrap();
    let env = [
        ("RM_API_ADS_REFRESH_SECS", "1".to_owned()),
        ("RM_AGGREGATOR_BATCH_MAX_WAIT_MS", "50".to_owned()),
    ];
    let svc = Service::start("all", dir.path(), &env);
    let tok = token(svc.api, "demo-client", "demo-secret", None);
    post(
        svc.api,
        &tok,
        "/v1/products",
        &json!({"products": [{"catalogId": CATALOG, "productCode": PRODUCT,
                 "name": "spend product", "categories": ["food"]}]}),
    );
    post(
        svc.api,
        &tok,
        "/v3/bannerx-campaigns",
        &json!({"bannerXCampaign": {
            "id": CAMPAIGN, "name": "spend campaign",
            "campaignState": "CAMPAIGN_STATE_ACTIVE", "catalogIds": [CATALOG],
            "approval": {"state": "APPROVAL_STATE_APPROVED"},
            "settings": {"campaignType": "CAMPAIGN_TYPE_SPONSORED_PRODUCTS", "isWildcard": true},
            "fixedCosts": {"dataCost": "$10.00"},
            "strategy": {"auction": {"maxBid": "$1.00", "spendLimit": {"daily": "$2.50"}}}}}),
    );

    // The drain: one served ad's click URL fired with 40 customer ids.
    let seen = wait_served(svc.api, &tok, true, "shopper-0").unwrap();
    for i in 0..40 {
        click(svc.ingest, &seen, &format!("victim-{i}"));
    }
    let row = summary(svc.api, &tok, 1);
    assert_eq!(amount(&row["spend"]), 1.0, "{row}");
    // Several refreshes later the campaign is still served.
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        served(svc.api, &tok, "shopper-1").is_some(),
        "one billable click must not stop a $2.50 campaign"
    );

    // Two more shoppers each click the ad served to them: $3.00 of $2.50.
    for shopper in ["shopper-2", "shopper-3"] {
        let ad = wait_served(svc.api, &tok, true, shopper).unwrap();
        click(svc.ingest, &ad, shopper);
    }
    let row = summary(svc.api, &tok, 3);
    assert_eq!(amount(&row["spend"]), 3.0, "{row}");
    wait_served(svc.api, &tok, false, "shopper-4");
    assert_eq!(svc.terminate(), Some(0));
}
