//! The edge's click window against the real binary on its embedded log: 100 clicks
//! on one ad by one shopper with timestamps 1 ms apart (a retrying player that
//! rebuilds the URL, or a re-firing script) are one click: each answered 200, one
//! record written, one click in the products and ads reports. Another shopper's click
//! and another product's click are written apart; the other shopper's, on the same
//! served ad, is that ad's repeat in the reports (one billable click per served ad
//! and product, issue 26), the other product's counts. With `RM_CLICK_WINDOW_SECS=0`
//! every click is written, as before.

#![allow(clippy::unwrap_used, missing_docs)]

use crate::common;

use std::time::{Duration, Instant};

use common::{beacon, demo_token, enc, get, read_embedded, send, Service};
use rm_schemas::ad_id::AdIdKeys;
use rm_schemas::InteractionType;

const TOPIC: &str = "ad-interactions";

fn at(base: chrono::DateTime<chrono::Utc>, ms: i64) -> String {
    (base + chrono::Duration::milliseconds(ms)).to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

fn product_click(edge: std::net::SocketAddr, ad: &str, session: &str, product: &str, ts: &str) {
    let r = get(
        edge,
        &beacon(&[
            ("adId", ad),
            ("interactionType", "productClick"),
            ("timestamp", ts),
            ("sessionId", session),
            ("catalogId", "cat-cw"),
            ("productCode", product),
        ]),
    )
    .unwrap();
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
}

fn ad_click(edge: std::net::SocketAddr, ad: &str, session: &str, ts: &str) {
    let r = get(
        edge,
        &format!(
            "/v1/events/ad/click?adId={}&sessionId={}&timestamp={}",
            enc(ad),
            enc(session),
            enc(ts)
        ),
    )
    .unwrap();
    assert!(
        r.status < 400,
        "{} {}",
        r.status,
        String::from_utf8_lossy(&r.body)
    );
}

/// Fires the clicks; how many product and ad click records the log holds after.
fn run(window: Option<&str>) -> (usize, usize, Option<(u64, u64)>) {
    let dir = tempfile::tempdir().unwrap();
    let key = AdIdKeys::generate_key();
    let keys = AdIdKeys::from_list(&key).unwrap();
    let mut env = vec![
        ("RM_AD_ID_KEYS", key),
        ("RM_AGGREGATOR_BATCH_MAX_WAIT_MS", "100".to_owned()),
    ];
    if let Some(w) = window {
        env.push(("RM_CLICK_WINDOW_SECS", w.to_owned()));
    }
    let svc = Service::start("all", dir.path(), &env);
    let ad = keys
        .mint("camp-cw", "p1", chrono::Utc::now().timestamp() + 3_600)
        .unwrap();
    let t0 = chrono::Utc::now() - chrono::Duration::seconds(5);
    for i in 0..100 {
        product_click(svc.ingest, &ad, "s-1", "p1", &at(t0, i));
        ad_click(svc.ingest, &ad, "s-1", &at(t0, i));
    }
    // Apart: another shopper, another product.
    product_click(svc.ingest, &ad, "s-2", "p1", &at(t0, 0));
    product_click(svc.ingest, &ad, "s-1", "p2", &at(t0, 0));
    // The report once the aggregator caught up (with the window on).
    let report = window.is_none().then(|| {
        let tok = demo_token(svc.api);
        let until = Instant::now() + Duration::from_secs(60);
        loop {
            let r = send(
                svc.api,
                "GET",
                "/v1/reports/products?campaignId=camp-cw",
                &[("Authorization", &format!("Bearer {tok}"))],
                b"",
            )
            .unwrap();
            let rows = r.json()["rows"].as_array().cloned().unwrap_or_default();
            let sum = |p: &str, f: &dyn Fn(&serde_json::Value) -> u64| {
                rows.iter()
                    .filter(|x| x["productCode"] == p)
                    .map(f)
                    .sum::<u64>()
            };
            let clicks = |p: &str| sum(p, &|x| x["clicks"].as_u64().unwrap());
            let repeats = |p: &str| {
                sum(p, &|x| {
                    x["invalidClicks"]["servedAdRepeat"].as_u64().unwrap()
                })
            };
            if clicks("p1") == 1 && repeats("p1") == 1 && clicks("p2") == 1 {
                break (clicks("p1"), clicks("p2"));
            }
            assert!(Instant::now() < until, "products report: {rows:?}");
            std::thread::sleep(Duration::from_millis(200));
        }
    });
    let metrics = get(svc.ingest, "/metrics").unwrap();
    let text = String::from_utf8_lossy(&metrics.body).into_owned();
    assert_eq!(svc.terminate(), Some(0));
    let records = read_embedded(dir.path(), TOPIC);
    let count = |t: InteractionType| {
        records
            .iter()
            .filter(|r| r.event.interaction_type == t)
            .count()
    };
    if window.is_none() {
        assert!(text.contains("ingest_clicks_in_window_total 198"), "{text}");
    }
    (
        count(InteractionType::ProductClick),
        count(InteractionType::AdClick),
        report,
    )
}

#[test]
fn clicks_re_fired_within_the_window_count_once() {
    let (product, ad, report) = run(None);
    assert_eq!(product, 3, "s-1 on p1 once, s-2 on p1, s-1 on p2");
    assert_eq!(ad, 1, "100 ad clicks 1 ms apart are one");
    assert_eq!(report, Some((1, 1)));
}

#[test]
fn a_window_of_zero_writes_every_click() {
    let (product, ad, _) = run(Some("0"));
    assert_eq!((product, ad), (102, 100));
}
