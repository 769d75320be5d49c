//! Invalid traffic against the real binary on its embedded log: a stream of shoppers'
//! beacons, impressions and clicks mixed with crawlers, a headless browser,
//! non-browser agents (`curl/8`, `python-requests`, no agent), server-side insertion
//! (a non-browser agent forwarding a browser's `X-Device-User-Agent`), prefetches and
//! an unverified ad id. Every request is answered as before and written; each record
//! carries its class, and `ingest_events_invalid_total{reason}` counts what was sent.

#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::collections::HashMap;

use common::{enc, get, read_embedded, send, Service};
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
    let ad = keys
        .mint("camp-ivt", "p1", chrono::Utc::now().timestamp() + 3_600)
        .unwrap();
    let forged = "rm1.camp-ivt.not-signed";
    let ts = enc(&chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
    let kinds = kinds();
    // Per kind, a few shoppers, each an impression, a product click and a click.
    let shoppers = 3;
    let mut expected_reasons: HashMap<&str, u64> = HashMap::new();
    for k in &kinds {
        let ad = if k.forged { forged } else { ad.as_str() };
        for s in 0..shoppers {
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
        kinds.len() * shoppers * 3,
        "every request written"
    );
    for r in &records {
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
        3 * shoppers * 3,
        "chrome, safari and server-side shoppers"
    );
}
