//! Invalid traffic against the real binary on its embedded log: a stream of shoppers'
//! beacons, impressions and clicks mixed with crawlers, a headless browser,
//! non-browser agents (`curl/8`, `python-requests`, no agent), server-side insertion
//! (a non-browser agent forwarding a browser's `X-Device-User-Agent`), prefetches and
//! an unverified ad id. Every request is answered as before and written; each record
//! carries its class, and `ingest_events_invalid_total{reason}` counts what was sent.
//! The reports' billable counts are the shoppers' alone, and their invalid counts by
//! reason are what was sent; a forged ad id or a crawler naming a real shopper's
//! `customerId` never credits that shopper's order.

#![allow(clippy::unwrap_used, missing_docs)]

use crate::common;

use std::collections::HashMap;

use std::time::{Duration, Instant};

use common::{demo_token, enc, get, read_embedded, report_rows, send, Service};
use rm_schemas::ad_id::AdIdKeys;
use rm_schemas::agent::{AgentClass, InvalidReason};

const TOPIC: &str = "ad-interactions";

const CHROME: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 \
    (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36";
const SAFARI: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) \
    AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1";

/// One kind of traffic: its headers, the record it must produce, its invalid reason.
struct Kind {
    name: &'static str,
    headers: &'static [(&'static str, &'static str)],
    agent: AgentClass,
    prefetch: bool,
    server_side: bool,
    reason: Option<InvalidReason>,
    /// Fire with an ad id that does not verify.
    forged: bool,
}

const fn kind(
    name: &'static str,
    headers: &'static [(&'static str, &'static str)],
    agent: AgentClass,
    reason: Option<InvalidReason>,
) -> Kind {
    Kind {
        name,
        headers,
        agent,
        prefetch: false,
        server_side: false,
        reason,
        forged: false,
    }
}

fn kinds() -> Vec<Kind> {
    use AgentClass::*;
    use InvalidReason as R;
    vec![
        kind("chrome", &[("User-Agent", CHROME)], Browser, None),
        kind("safari", &[("User-Agent", SAFARI)], Browser, None),
        kind(
            "googlebot",
            &[(
                "User-Agent",
                "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
            )],
            KnownBot,
            Some(R::KnownBot),
        ),
        kind(
            "bingbot",
            &[(
                "User-Agent",
                "Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)",
            )],
            KnownBot,
            Some(R::KnownBot),
        ),
        kind(
            "ahrefs",
            &[(
                "User-Agent",
                "Mozilla/5.0 (compatible; AhrefsBot/7.0; +http://ahrefs.com/robot/)",
            )],
            KnownBot,
            Some(R::KnownBot),
        ),
        kind(
            "headless",
            &[(
                "User-Agent",
                "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) \
                 HeadlessChrome/131.0.0.0 Safari/537.36",
            )],
            KnownBot,
            Some(R::KnownBot),
        ),
        kind(
            "curl",
            &[("User-Agent", "curl/8.5.0")],
            NonBrowser,
            Some(R::NonBrowser),
        ),
        kind(
            "python",
            &[("User-Agent", "python-requests/2.32.3")],
            NonBrowser,
            Some(R::NonBrowser),
        ),
        kind("no-agent", &[], Missing, Some(R::NonBrowser)),
        Kind {
            server_side: true,
            ..kind(
                "ssai",
                &[
                    ("User-Agent", "Go-http-client/1.1"),
                    ("X-Device-User-Agent", SAFARI),
                ],
                Browser,
                None,
            )
        },
        Kind {
            prefetch: true,
            ..kind(
                "sec-purpose",
                &[
                    ("User-Agent", CHROME),
                    ("Sec-Purpose", "prefetch;prerender"),
                ],
                Browser,
                Some(R::Prefetch),
            )
        },
        Kind {
            prefetch: true,
            ..kind(
                "purpose",
                &[("User-Agent", CHROME), ("Purpose", "prefetch")],
                Browser,
                Some(R::Prefetch),
            )
        },
        Kind {
            forged: true,
            ..kind(
                "forged",
                &[("User-Agent", CHROME)],
                Browser,
                Some(R::UnverifiedAdId),
            )
        },
    ]
}

fn metric(metrics: &str, series: &str) -> u64 {
    metrics
        .lines()
        .find(|l| l.starts_with(series))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

#[test]
fn invalid_traffic_is_written_flagged_and_counted_by_reason() {
    let dir = tempfile::tempdir().unwrap();
    let key = AdIdKeys::generate_key();
    let keys = AdIdKeys::from_list(&key).unwrap();
    let svc = Service::start("all", dir.path(), &[("RM_AD_ID_KEYS", key)]);
    // Namespace demo, whose orders key the test posts orders with. Every shopper is
    // served an ad of their own (one served ad bills once, whoever fires it).
    let mint = || {
        keys.mint_in(
            "demo",
            "camp-ivt",
            "p1",
            chrono::Utc::now().timestamp() + 3_600,
        )
        .unwrap()
    };
    let forged = "rm2.demo.camp-ivt.not-signed";
    let ts = enc(&chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
    let kinds = kinds();
    // Per kind, a few shoppers, each an impression, a product click and a click.
    let shoppers = 3;
    let mut expected_reasons: HashMap<&str, u64> = HashMap::new();
    for k in &kinds {
        for s in 0..shoppers {
            let served = mint();
            let ad = if k.forged { forged } else { served.as_str() };
            let session = format!("{}-{s}", k.name);
            let targets = [
                format!(
                    "/v1/events/ad/impression?adId={}&sessionId={session}&timestamp={ts}",
                    enc(ad)
                ),
                format!(
                    "/v1/events/ad/interaction?adId={}&interactionType=productClick\
                     &sessionId={session}&timestamp={ts}&catalogId=cat-ivt&productCode=p1",
                    enc(ad)
                ),
                format!(
                    "/v1/events/ad/click?adId={}&sessionId={session}&timestamp={ts}",
                    enc(ad)
                ),
            ];
            for t in &targets {
                let r = send(svc.ingest, "GET", t, k.headers, b"").unwrap();
                assert_eq!(
                    r.status,
                    200,
                    "{} {t}: {}",
                    k.name,
                    String::from_utf8_lossy(&r.body)
                );
                if let Some(reason) = k.reason {
                    *expected_reasons.entry(reason.as_str()).or_default() += 1;
                }
            }
        }
    }
    let metrics = String::from_utf8(get(svc.ingest, "/metrics").unwrap().body).unwrap();
    reports_count_the_shoppers_alone(&svc, &mint, forged, &ts);
    assert_eq!(svc.terminate(), Some(0));

    for reason in InvalidReason::ALL {
        let series = format!(
            "ingest_events_invalid_total{{reason=\"{}\"}}",
            reason.as_str()
        );
        assert_eq!(
            metric(&metrics, &series),
            expected_reasons.get(reason.as_str()).copied().unwrap_or(0),
            "{series}\n{metrics}"
        );
    }
    assert_eq!(
        metric(
            &metrics,
            "ingest_events_invalid_total{reason=\"known_bot\"}"
        ),
        4 * 3 * 3
    );

    let records = read_embedded(dir.path(), TOPIC);
    assert_eq!(
        records.len(),
        kinds.len() * shoppers * 3 + 3,
        "every request written (and the attribution test's three clicks)"
    );
    for r in records.iter().filter(|r| r.event.session_id.is_some()) {
        let session = r.event.session_id.as_deref().unwrap();
        let name = session.rsplit_once('-').unwrap().0;
        let k = kinds.iter().find(|k| k.name == name).unwrap();
        assert_eq!(r.agent, Some(k.agent), "{session}");
        assert_eq!(r.prefetch, k.prefetch, "{session}");
        assert_eq!(r.server_side, k.server_side, "{session}");
        assert_eq!(r.invalid_reason(), k.reason, "{session}");
    }
    let valid = records
        .iter()
        .filter(|r| r.invalid_reason().is_none())
        .count();
    assert_eq!(
        valid,
        3 * shoppers * 3 + 1,
        "chrome, safari and server-side shoppers, and the attributed shopper"
    );
}

/// Sums `field` (a nested one as `a.b`) over rows.
fn sum(rows: &[serde_json::Value], field: &str) -> u64 {
    rows.iter()
        .map(|r| field.split('.').fold(r, |v, k| &v[k]).as_u64().unwrap_or(0))
        .sum()
}

/// The reports once the aggregator caught up: billable counts are the chrome, safari
/// and server-side shoppers' (3 kinds x 3 shoppers), invalid counts by reason what was
/// sent. Then orders of three shoppers, each the `customerId` of one product click:
/// a browser's on a forged ad id, a crawler's on the real one, a browser's on the real
/// one; only the last is credited to the campaign.
fn reports_count_the_shoppers_alone(
    svc: &Service,
    mint: &dyn Fn() -> String,
    forged: &str,
    ts: &str,
) {
    let auth = format!("Bearer {}", demo_token(svc.api));
    let rows = |path: &str| report_rows(svc.api, &auth, path);
    // Every kind's 3 impressions and 3 clicks reached the ads report.
    let all_ads = kinds().len() as u64 * 3 * 2;
    let t = Instant::now();
    let ads = loop {
        let ads = rows("/v1/reports/ads?campaignId=camp-ivt");
        let seen = sum(&ads, "impressions")
            + sum(&ads, "clicks")
            + sum(&ads, "notBillableImpressions")
            + sum(&ads, "notBillableClicks");
        if seen == all_ads || t.elapsed() > Duration::from_secs(60) {
            break ads;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let shoppers = 3 * 3;
    for action in ["Impressions", "Clicks"] {
        let valid = sum(&ads, &action.to_lowercase());
        assert_eq!(valid, shoppers, "valid {action}: {ads:#?}");
        let invalid = |reason: &str| sum(&ads, &format!("invalid{action}.{reason}"));
        assert_eq!(
            invalid("knownBot"),
            4 * 3,
            "googlebot, bingbot, ahrefs, headless"
        );
        assert_eq!(invalid("nonBrowser"), 3 * 3, "curl, python, no agent");
        assert_eq!(invalid("prefetch"), 2 * 3, "Sec-Purpose, Purpose");
        assert_eq!(invalid("unverifiedAdId"), 3, "the forged ad id");
        assert_eq!(invalid("clickWindow"), 0, "one click per shopper");
        assert_eq!(
            sum(&ads, &format!("notBillable{action}")),
            (4 + 3 + 2 + 1) * 3
        );
    }
    let products = rows("/v1/reports/products?campaignId=camp-ivt");
    assert_eq!(sum(&products, "clicks"), shoppers, "{products:#?}");
    assert_eq!(sum(&products, "invalidClicks.knownBot"), 4 * 3);
    assert_eq!(sum(&products, "invalidClicks.nonBrowser"), 3 * 3);
    assert_eq!(sum(&products, "invalidClicks.prefetch"), 2 * 3);
    assert_eq!(sum(&products, "invalidClicks.unverifiedAdId"), 3);
    let campaigns = rows("/v1/reports/campaigns?campaignId=camp-ivt");
    assert_eq!(sum(&campaigns, "clicks"), shoppers, "{campaigns:#?}");
    assert_eq!(sum(&campaigns, "impressions"), shoppers);
    assert_eq!(sum(&campaigns, "productClicks"), shoppers);

    // Attribution: three shoppers named by customer id.
    let chrome = [("User-Agent", CHROME)];
    let bot = [(
        "User-Agent",
        "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
    )];
    let (crawled, shopped) = (mint(), mint());
    for (customer, ad, headers) in [
        ("victim-forged", forged, &chrome[..]),
        ("victim-crawled", crawled.as_str(), &bot[..]),
        ("shopper", shopped.as_str(), &chrome[..]),
    ] {
        let t = format!(
            "/v1/events/ad/interaction?adId={}&interactionType=productClick\
             &customerId={customer}&timestamp={ts}&catalogId=cat-ivt&productCode=p1",
            enc(ad)
        );
        let r = send(svc.ingest, "GET", &t, headers, b"").unwrap();
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    }
    // The three clicks are stored before the orders are sent, so a wrongly credited
    // one could not hide behind a slow aggregator.
    let t = Instant::now();
    loop {
        let p = rows("/v1/reports/products?campaignId=camp-ivt");
        let stored = sum(&p, "clicks") == shoppers + 1
            && sum(&p, "invalidClicks.unverifiedAdId") == 3 + 1
            && sum(&p, "invalidClicks.knownBot") == 4 * 3 + 1;
        if stored {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(60), "{p:#?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    // To the millisecond: the clicks are dated `ts` (ms), and an order dated in
    // whole seconds could fall before them when the test reaches this line within
    // the second it started (a touch after its order never credits it).
    let order_date = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let orders: Vec<serde_json::Value> = ["victim-forged", "victim-crawled", "shopper"]
        .iter()
        .map(|c| {
            serde_json::json!({
                "id": format!("ivt-{c}"),
                "customerId": c,
                "orderDate": order_date,
                "catalogId": "cat-ivt",
                "orderItems": [{"productCode": "p1", "quantity": 1,
                                "totalOrderItemPriceAfterDiscounts": 2.5}],
            })
        })
        .collect();
    common::post_orders(svc.api, &serde_json::json!({ "orders": orders }));
    let orders_in = |sales: &[serde_json::Value], campaign: &str| {
        sales
            .iter()
            .filter(|r| r["campaignId"] == campaign)
            .map(|r| r["orders"].as_u64().unwrap_or(0))
            .sum::<u64>()
    };
    // Until the orders and the shopper's click are both stored (attribution is read
    // from both, in whatever order they arrived).
    let t = Instant::now();
    let sales = loop {
        let sales = rows("/v1/reports/sales?catalogId=cat-ivt");
        let done = sum(&sales, "orders") >= 3 && orders_in(&sales, "camp-ivt") >= 1;
        if done || t.elapsed() > Duration::from_secs(60) {
            break sales;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let orders_of = |campaign: &str| orders_in(&sales, campaign);
    assert_eq!(orders_of("camp-ivt"), 1, "only the shopper's: {sales:#?}");
    assert_eq!(
        orders_of(""),
        2,
        "the forged and the crawled are unattributed"
    );
}
