//! End to end: ad impressions and clicks fired at the real edge (`retail-media all` on
//! its embedded log and store), with beacons, a cart and an order, through the real
//! aggregator, read back from the api's `/v1/reports/ads`, `/v1/reports/campaigns`
//! and `/v1/reports/video-funnel` with a bearer token: exact rows.
//!
//! Ad ids are minted with the keys the service holds (`RM_AD_ID_KEYS`) for the
//! campaign `camp-e2e`, which the api does not know (so its `maxBid`, and the spend,
//! are unknown: `null`):
//!
//! | ad | what is fired | expected |
//! |---|---|---|
//! | `A` (valid) | impression of s-1, re-fired 5 s later (a re-render); impression of s-2; click of s-1 twice identically; click of s-2; video creativeView, play, complete of s-1; product impression and click of c-1; a cart of c-1 (2 units) | 1 impression, 1 click, CTR 1: one served ad bills once; s-2's impression and click are its repeats (`servedAdRepeat`) |
//! | `X` (expired) | impression of s-3 | 1 not-billable impression, `expired` |
//! | `B` (A's signature tampered with) | impression of s-4 | 1 not-billable impression, `bad_signature` |
//! | `ext-ad-e2e` (foreign) | impression of s-5 | under the empty campaign, `foreign` |
//!
//! An order of c-1 (cola-1l, 2.58) after the product click is credited to camp-e2e.
//! (The shopper and the order id are unique per run: the `orders` topic of a Kafka
//! broker is shared by every test run.)
//!
//! The embedded variant always runs; the Kafka + ClickHouse variant needs
//! `RM_KAFKA_BROKERS` and `RM_CLICKHOUSE_URL` (`deploy/local/up.sh` prints them) and
//! uses a fresh topic and database (dropped at the end); without them it is skipped,
//! unless `RM_REQUIRE_SERVICES=1`, where it fails.
#![allow(clippy::unwrap_used, missing_docs)]

use crate::common;

use std::time::{Duration, Instant};

use chrono::{SecondsFormat, Utc};
use common::{demo_token, enc, get, send, Service};
use rm_schemas::ad_id::AdIdKeys;
use serde_json::{json, Value};

const CAMPAIGN: &str = "camp-e2e";
const FOREIGN: &str = "ext-ad-e2e";

fn fire(svc: &Service, path: &str, params: &[(&str, &str)]) {
    let q: Vec<String> = params
        .iter()
        .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
        .collect();
    let r = get(svc.ingest, &format!("{path}?{}", q.join("&"))).unwrap();
    assert_eq!(
        r.status,
        200,
        "{path}: {}",
        String::from_utf8_lossy(&r.body)
    );
}

fn report(svc: &Service, token: &str, path_and_query: &str) -> Value {
    common::api_json(svc.api, &format!("Bearer {token}"), path_and_query)
}

/// Polls `path_and_query` until it answers `want` (the aggregator works
/// asynchronously), failing with the last answer after a while.
fn converge(svc: &Service, token: &str, path_and_query: &str, want: &Value) {
    let t = Instant::now();
    loop {
        let got = report(svc, token, path_and_query);
        if &got == want {
            return;
        }
        if t.elapsed() > Duration::from_secs(60) {
            assert_eq!(&got, want, "{path_and_query}; log:\n{}", svc.log());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn metric(text: &str, series: &str) -> f64 {
    text.lines()
        .find(|l| l.starts_with(series))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

fn nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

#[test]
fn embedded_log_and_store() {
    scenario(Vec::new());
}

#[test]
fn kafka_and_clickhouse() {
    let Some((env, _drop_database)) = common::kafka_clickhouse_env("ads", 1) else {
        return;
    };
    scenario(env);
}

fn scenario(mut env: Vec<(&str, String)>) {
    let dir = tempfile::tempdir().unwrap();
    let key = AdIdKeys::generate_key();
    let keys = AdIdKeys::from_list(&key).unwrap();
    env.push(("RM_AD_ID_KEYS", key));
    let svc = Service::start("all", dir.path(), &env);
    let run = nanos();
    let shopper = format!("c-{run}");
    let order_id = format!("o-e2e-{run}");
    svc.wait_ready(svc.api, Duration::from_secs(60));
    svc.wait_ready(svc.aggregator, Duration::from_secs(60));
    let token = demo_token(svc.api);

    let now = Utc::now().timestamp();
    // The demo orders key's namespace: an order is credited only to its own
    // namespace's ads.
    let a = keys
        .mint_in("demo", CAMPAIGN, "banner", now + 3_600)
        .unwrap();
    let x = keys
        .mint_in("demo", CAMPAIGN, "banner", now - 3_600)
        .unwrap();
    // Another valid-looking id of the campaign whose signature does not verify: one
    // character in the middle of the signature changed (the last one may only hold
    // padding bits).
    let (head, sig) = a.rsplit_once('.').unwrap();
    let mut sig: Vec<char> = sig.chars().collect();
    let mid = sig.len() / 2;
    sig[mid] = if sig[mid] == 'A' { 'B' } else { 'A' };
    let b = format!("{head}.{}", sig.into_iter().collect::<String>());

    // Event times: a minute that does not cross midnight, a few minutes ago.
    let mut base = Utc::now() - chrono::Duration::minutes(5);
    if base.date_naive() != (base + chrono::Duration::seconds(90)).date_naive() {
        base -= chrono::Duration::minutes(3);
    }
    let day = base.format("%Y-%m-%d").to_string();
    let ts =
        |s: i64| (base + chrono::Duration::seconds(s)).to_rfc3339_opts(SecondsFormat::Millis, true);
    let imp = "/v1/events/ad/impression";
    let click = "/v1/events/ad/click";
    let beacon = "/v1/events/ad/interaction";

    fire(
        &svc,
        imp,
        &[
            ("adId", &a),
            ("sessionId", "s-1"),
            ("timestamp", &ts(0)),
            ("cb", "1"),
        ],
    );
    fire(
        &svc,
        imp,
        &[
            ("adId", &a),
            ("sessionId", "s-1"),
            ("timestamp", &ts(5)),
            ("cb", "2"),
        ],
    );
    fire(
        &svc,
        imp,
        &[("adId", &a), ("sessionId", "s-2"), ("timestamp", &ts(10))],
    );
    for cb in ["1", "2"] {
        fire(
            &svc,
            click,
            &[
                ("adId", &a),
                ("sessionId", "s-1"),
                ("timestamp", &ts(20)),
                ("cb", cb),
            ],
        );
    }
    fire(
        &svc,
        click,
        &[("adId", &a), ("sessionId", "s-2"), ("timestamp", &ts(30))],
    );
    fire(
        &svc,
        imp,
        &[("adId", &x), ("sessionId", "s-3"), ("timestamp", &ts(40))],
    );
    fire(
        &svc,
        imp,
        &[("adId", &b), ("sessionId", "s-4"), ("timestamp", &ts(41))],
    );
    fire(
        &svc,
        imp,
        &[
            ("adId", FOREIGN),
            ("sessionId", "s-5"),
            ("timestamp", &ts(42)),
        ],
    );
    for (i, kind) in ["videoCreativeView", "videoPlay", "videoComplete"]
        .iter()
        .enumerate()
    {
        let t = ts(1 + i as i64);
        fire(
            &svc,
            beacon,
            &[
                ("adId", &a),
                ("interactionType", kind),
                ("sessionId", "s-1"),
                ("videoId", "v-1"),
                ("timestamp", &t),
            ],
        );
    }
    for (kind, s) in [("productImpression", 50), ("productClick", 51)] {
        fire(
            &svc,
            beacon,
            &[
                ("adId", &a),
                ("interactionType", kind),
                ("customerId", &shopper),
                ("catalogId", "demo-catalog"),
                ("productCode", "cola-1l"),
                ("timestamp", &ts(s)),
            ],
        );
    }
    fire(
        &svc,
        beacon,
        &[
            ("adId", &a),
            ("interactionType", "cart"),
            ("customerId", &shopper),
            ("catalogId", "demo-catalog"),
            ("productCode", "cola-1l"),
            ("units", "2"),
            ("timestamp", &ts(52)),
        ],
    );
    let order = json!({"orders": [{"id": order_id, "customerId": shopper, "orderDate": ts(60),
        "catalogId": "demo-catalog",
        "orderItems": [{"productCode": "cola-1l", "quantity": 2, "totalOrderItemPriceAfterDiscounts": 2.58}]}]});
    common::post_orders(svc.api, &order);

    // `nb`: not billable for an unverified ad id (issue 15's reasons); `rep`: the
    // served ad's repeats (issue 26).
    let row = |ad: &str,
               campaign: &str,
               billable: (u64, u64),
               nb: (u64, u64),
               rep: (u64, u64),
               status: &str| {
        let ctr = if billable.0 == 0 {
            0.0
        } else {
            billable.1 as f64 / billable.0 as f64
        };
        let invalid = |unverified: u64, repeats: u64| {
            json!({"knownBot": 0, "nonBrowser": 0, "prefetch": 0, "unverifiedAdId": unverified,
                   "beforeServe": 0, "productNotInAd": 0, "servedAdRepeat": repeats,
                   "clickWindow": 0})
        };
        let creative = rm_store::model::ad_id_campaign::creative_of(ad);
        json!({"campaignId": campaign, "creativeId": creative, "adId": ad, "day": day,
               "periodStart": format!("{day}T00:00:00Z"), "impressions": billable.0,
               "clicks": billable.1, "ctr": ctr, "notBillableImpressions": nb.0 + rep.0,
               "notBillableClicks": nb.1 + rep.1, "adIdStatus": status,
               "invalidImpressions": invalid(nb.0, rep.0),
               "invalidClicks": invalid(nb.1, rep.1)})
    };
    let ad_row = |ad: &str, campaign: &str, billable: (u64, u64), nb: (u64, u64), status: &str| {
        row(ad, campaign, billable, nb, (0, 0), status)
    };
    // The drill-down: each served ad's own row, from the stored facts.
    for (ad, want) in [
        (&a, row(&a, CAMPAIGN, (1, 1), (0, 0), (1, 1), "verified")),
        (&x, ad_row(&x, CAMPAIGN, (0, 0), (1, 0), "expired")),
        (&b, ad_row(&b, CAMPAIGN, (0, 0), (1, 0), "bad_signature")),
    ] {
        let q = format!("/v1/reports/ads?campaignId={CAMPAIGN}&adId={}", enc(ad));
        converge(&svc, &token, &q, &json!({"rows": [want]}));
    }
    // The report: the three served ads of one creative (`banner`) in one row, from the
    // rollups.
    let mut creative = row("", CAMPAIGN, (1, 1), (2, 0), (1, 1), "bad_signature");
    creative["creativeId"] = json!("banner");
    converge(
        &svc,
        &token,
        &format!("/v1/reports/ads?campaignId={CAMPAIGN}"),
        &json!({"rows": [creative]}),
    );
    let foreign = json!({"rows": [ad_row(FOREIGN, "", (0, 0), (1, 0), "foreign")]});
    converge(
        &svc,
        &token,
        &format!("/v1/reports/ads?adId={FOREIGN}"),
        &foreign,
    );

    // Not billable: A's repeated impression and click, X's and B's impressions.
    let campaign = json!({"rows": [{"campaignId": CAMPAIGN, "day": day,
        "periodStart": format!("{day}T00:00:00Z"), "impressions": 1,
        "clicks": 1, "ctr": 1.0, "notBillableImpressions": 3, "notBillableClicks": 1,
        "videoPlays": 1, "invalidVideoPlays": 0, "completionRate": 1.0,
        "productImpressions": 1, "productClicks": 1, "cartsAdded": 1, "invalidCartsAdded": 0,
        "attributedOrders": 1, "revenue": "2.58", "currency": "USD", "spend": null,
        "roas": null}]});
    let q = format!("/v1/reports/campaigns?campaignId={CAMPAIGN}&from={day}&to={day}");
    converge(&svc, &token, &q, &campaign);

    let funnel = report(
        &svc,
        &token,
        &format!("/v1/reports/video-funnel?adId={}", enc(&a)),
    );
    let f = &funnel["rows"][0];
    assert_eq!(funnel["rows"].as_array().unwrap().len(), 1, "{funnel}");
    assert_eq!(
        (
            &f["views"],
            &f["impressions"],
            &f["plays"],
            &f["completes"],
            &f["adIdStatus"]
        ),
        (
            &json!(1),
            &json!(1),
            &json!(1),
            &json!(1),
            &json!("verified")
        )
    );

    // CSV, and the filters the summary does not take.
    let r = send(
        svc.api,
        "GET",
        &format!("{q}&format=csv"),
        &[("Authorization", &format!("Bearer {token}"))],
        b"",
    )
    .unwrap();
    let csv = String::from_utf8(r.body).unwrap();
    assert_eq!(
        csv,
        format!(
            "campaignId,day,periodStart,impressions,clicks,ctr,notBillableImpressions,\
             notBillableClicks,videoPlays,invalidVideoPlays,completionRate,productImpressions,\
             productClicks,cartsAdded,invalidCartsAdded,attributedOrders,revenue,currency,spend,\
             roas\r\n\
             {CAMPAIGN},{day},{day}T00:00:00Z,1,1,1.0,3,1,1,0,1.0,1,1,1,0,1,2.58,USD,,\r\n"
        )
    );
    let r = send(
        svc.api,
        "GET",
        "/v1/reports/campaigns?catalogId=demo-catalog",
        &[("Authorization", &format!("Bearer {token}"))],
        b"",
    )
    .unwrap();
    assert_eq!(r.status, 400);
    let r = get(svc.api, "/v1/reports/ads").unwrap();
    assert_eq!(r.status, 401, "reports need a token");

    // Unverified events are counted by verdict.
    let m = String::from_utf8(get(svc.aggregator, "/metrics").unwrap().body).unwrap();
    for v in ["expired", "bad_signature", "foreign"] {
        let series = format!("aggregator_unverified_events_total{{verdict=\"{v}\"}}");
        assert_eq!(metric(&m, &series), 1.0, "{series}\n{m}");
    }
}
