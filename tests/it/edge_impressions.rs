//! The edge's impression and click endpoints as a served ad fires them: the real
//! binary on its embedded log, ad ids minted with the same keys the service holds
//! (`RM_AD_ID_KEYS`), the log read back from disk.
#![allow(clippy::unwrap_used, missing_docs)]

use crate::common;

use common::{enc, get, read_embedded, Service};
use rm_schemas::ad_event::click_signature;
use rm_schemas::ad_id::AdIdKeys;
use rm_schemas::record::UnverifiedAdId;
use rm_schemas::InteractionType;

const TOPIC: &str = "ad-interactions";

fn keys() -> (String, AdIdKeys) {
    let key = AdIdKeys::generate_key();
    let keys = AdIdKeys::from_list(&key).unwrap();
    (key, keys)
}

fn later() -> i64 {
    chrono::Utc::now().timestamp() + 3_600
}

fn url(what: &str, params: &[(&str, &str)]) -> String {
    let q: Vec<String> = params
        .iter()
        .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
        .collect();
    format!("/v1/events/ad/{what}?{}", q.join("&"))
}

fn metric(metrics: &str, series: &str) -> f64 {
    metrics
        .lines()
        .find(|l| l.starts_with(series))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

#[test]
fn an_impression_counts_once_per_ad_id_and_a_click_once_per_firing() {
    let dir = tempfile::tempdir().unwrap();
    let (key, keys) = keys();
    // The dedup key alone, without the click window (tests/it/click_window.rs has it):
    // with the window, the click re-fired below with a new time would be the same
    // click.
    let svc = Service::start(
        "ingest",
        dir.path(),
        &[("RM_AD_ID_KEYS", key), ("RM_CLICK_WINDOW_SECS", "0".into())],
    );
    let ad = keys.mint("camp-1", "banner", later()).unwrap();
    let ad2 = keys.mint("camp-1", "banner", later()).unwrap();
    let t1 = "2026-11-22T10:15:30.250Z";
    let t2 = "2026-11-22T10:15:31.900Z";
    // The same impression re-fired with a new time and cache-buster: counted once.
    for (t, cb) in [(t1, "1"), (t2, "2"), (t1, "3")] {
        let r = get(
            svc.ingest,
            &url(
                "impression",
                &[
                    ("adId", &ad),
                    ("sessionId", "s-1"),
                    ("timestamp", t),
                    ("cb", cb),
                ],
            ),
        )
        .unwrap();
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        assert_eq!(r.header("content-type"), Some("image/gif"));
        assert_eq!(r.header("cache-control"), Some("no-store"));
        assert_eq!(r.header("access-control-allow-origin"), Some("*"));
    }
    let other = url(
        "impression",
        &[("adId", &ad2), ("sessionId", "s-1"), ("timestamp", t1)],
    );
    assert_eq!(get(svc.ingest, &other).unwrap().status, 200);
    // A click re-fired identically (another cache-buster) counts once; a new click again.
    for (t, cb) in [(t1, "1"), (t1, "2"), (t2, "3")] {
        let r = get(
            svc.ingest,
            &url(
                "click",
                &[
                    ("adId", &ad),
                    ("sessionId", "s-1"),
                    ("timestamp", t),
                    ("cachebuster", cb),
                ],
            ),
        )
        .unwrap();
        assert_eq!(r.status, 200);
    }
    // The ad events are not beacon types: the interaction endpoint refuses them.
    let r = get(
        svc.ingest,
        &common::beacon(&[
            ("adId", &ad),
            ("interactionType", "adImpression"),
            ("sessionId", "s-1"),
            ("timestamp", t1),
        ]),
    )
    .unwrap();
    assert_eq!(r.status, 400);
    assert_eq!(
        r.json()["details"][0]["metadata"]["reason"],
        "unknown_interaction_type"
    );
    // Same 400s as the beacon.
    let r = get(
        svc.ingest,
        &url("impression", &[("adId", &ad), ("timestamp", t1)]),
    )
    .unwrap();
    assert_eq!(r.status, 400);
    assert_eq!(
        r.json()["details"][0]["metadata"]["reason"],
        "no_tracking_id"
    );
    let r = get(
        svc.ingest,
        "/v1/events/ad/click?adId=a&sessionId=s&timestamp=[TIMESTAMP]",
    )
    .unwrap();
    assert_eq!(
        r.json()["details"][0]["metadata"]["reason"],
        "unexpanded_macro"
    );
    // Without RM_INGEST_JWKS_URL the edge does not serve the inspector, and says why.
    let r = get(svc.ingest, "/v1/debug/events?trackingId=s-1").unwrap();
    assert_eq!(r.status, 404);
    assert!(String::from_utf8_lossy(&r.body).contains("RM_INGEST_JWKS_URL"));
    let metrics = String::from_utf8(get(svc.ingest, "/metrics").unwrap().body).unwrap();
    assert_eq!(
        metric(
            &metrics,
            r#"ingest_events_accepted_total{interaction_type="adImpression"}"#
        ),
        2.0,
        "{metrics}"
    );
    assert_eq!(
        metric(
            &metrics,
            r#"ingest_events_accepted_total{interaction_type="adClick"}"#
        ),
        2.0
    );
    assert_eq!(
        metric(
            &metrics,
            r#"ingest_requests_total{route="impression",status="200"}"#
        ),
        4.0
    );
    assert_eq!(svc.terminate(), Some(0));

    let records = read_embedded(dir.path(), TOPIC);
    let of = |t: InteractionType| {
        records
            .iter()
            .filter(|r| r.event.interaction_type == t)
            .count()
    };
    assert_eq!(of(InteractionType::AdImpression), 2, "{records:#?}");
    assert_eq!(of(InteractionType::AdClick), 2, "{records:#?}");
    assert_eq!(records.len(), 4);
    assert!(
        records.iter().all(|r| r.ad_id_verdict.is_none()),
        "valid ids are unmarked"
    );
    assert!(records
        .iter()
        .all(|r| r.dedup_key == rm_schemas::DedupKey::of(&r.event)));
}

#[test]
fn a_signed_click_redirects_and_a_forged_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (key, keys) = keys();
    let svc = Service::start("ingest", dir.path(), &[("RM_AD_ID_KEYS", key)]);
    let ad = keys.mint("camp-1", "banner", later()).unwrap();
    let ad2 = keys.mint("camp-1", "banner", later()).unwrap();
    let dest = "https://shop.example/cta?p=1&q=a%20b";
    let sig = click_signature(&keys, &ad, dest);
    let ts = "2026-11-22T10:15:30.250Z";
    let click = |ad: &str, dest: &str, sig: Option<&str>| {
        let mut p = vec![
            ("adId", ad),
            ("sessionId", "s-1"),
            ("timestamp", ts),
            ("dest", dest),
        ];
        if let Some(s) = sig {
            p.push(("sig", s));
        }
        get(svc.ingest, &url("click", &p)).unwrap()
    };
    let r = click(&ad, dest, Some(&sig));
    assert_eq!(r.status, 302, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.header("location"), Some(dest));
    assert_eq!(r.header("cache-control"), Some("no-store"));
    // Re-fired identically: counted once, and the shopper still gets there.
    assert_eq!(click(&ad, dest, Some(&sig)).status, 302);

    let refused = |r: common::HttpResponse, reason: &str| {
        assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(&r.body));
        assert_eq!(r.header("location"), None);
        assert_eq!(r.json()["details"][0]["metadata"]["reason"], reason);
    };
    refused(
        click(&ad, "https://evil.example/", Some(&sig)),
        "unsigned_destination",
    );
    refused(click(&ad, dest, None), "unsigned_destination");
    refused(click(&ad2, dest, Some(&sig)), "unsigned_destination");
    // One flipped character in the middle of the signature.
    let flip = if sig.as_bytes()[5] == b'A' { "B" } else { "A" };
    let tampered = format!("{}{flip}{}", &sig[..5], &sig[6..]);
    refused(click(&ad, dest, Some(&tampered)), "unsigned_destination");
    let js = "javascript:alert(document.cookie)";
    refused(
        click(&ad, js, Some(&click_signature(&keys, &ad, js))),
        "invalid_destination",
    );
    let other_keys = AdIdKeys::from_list(&AdIdKeys::generate_key()).unwrap();
    refused(
        click(&ad, dest, Some(&click_signature(&other_keys, &ad, dest))),
        "unsigned_destination",
    );
    let metrics = String::from_utf8(get(svc.ingest, "/metrics").unwrap().body).unwrap();
    assert_eq!(
        metric(&metrics, r#"ingest_click_redirects_total{recorded="true"}"#),
        2.0,
        "{metrics}"
    );
    assert_eq!(
        metric(
            &metrics,
            r#"ingest_events_rejected_total{reason="unsigned_destination"}"#
        ),
        5.0
    );
    assert_eq!(svc.terminate(), Some(0));
    let records = read_embedded(dir.path(), TOPIC);
    assert_eq!(
        records.len(),
        1,
        "one click recorded, no refused one: {records:#?}"
    );
    assert_eq!(records[0].event.interaction_type, InteractionType::AdClick);
    assert_eq!(records[0].event.ad_id, ad);
}

/// A served ad's click URL kept after its campaign ended (or was rejected): the
/// signed link redirects while the ad id is valid and for the grace period after, then
/// answers 410 with a page and never redirects; the click is still recorded.
#[test]
fn a_signed_click_of_an_ad_that_ended_no_longer_redirects() {
    let dir = tempfile::tempdir().unwrap();
    let (key, keys) = keys();
    let env = [
        ("RM_AD_ID_KEYS", key),
        ("RM_INGEST_CLICK_REDIRECT_GRACE_SECS", "600".to_owned()),
    ];
    let svc = Service::start("ingest", dir.path(), &env);
    let now = chrono::Utc::now().timestamp();
    let dest = "https://shop.example/cta";
    let ts = "2026-11-22T10:15:30.250Z";
    let click = |expiry: i64, session: &str| {
        let ad = keys.mint("camp-1", "banner", expiry).unwrap();
        let sig = click_signature(&keys, &ad, dest);
        let p = [
            ("adId", ad.as_str()),
            ("sessionId", session),
            ("timestamp", ts),
            ("dest", dest),
            ("sig", sig.as_str()),
        ];
        get(svc.ingest, &url("click", &p)).unwrap()
    };
    let in_grace = click(now - 300, "s-grace");
    assert_eq!(in_grace.status, 302);
    let ended = click(now - 3_600, "s-ended");
    assert_eq!(
        ended.status,
        410,
        "{}",
        String::from_utf8_lossy(&ended.body)
    );
    assert_eq!(ended.header("location"), None);
    assert!(ended
        .header("content-type")
        .is_some_and(|c| c.starts_with("text/html")));
    assert!(String::from_utf8_lossy(&ended.body).contains("This ad has ended"));
    let metrics = String::from_utf8(get(svc.ingest, "/metrics").unwrap().body).unwrap();
    assert_eq!(metric(&metrics, "ingest_click_links_ended_total"), 1.0);
    assert_eq!(
        metric(
            &metrics,
            r#"ingest_requests_total{route="click",status="410"}"#
        ),
        1.0,
        "{metrics}"
    );
    assert_eq!(svc.terminate(), Some(0));
    let records = read_embedded(dir.path(), TOPIC);
    assert_eq!(records.len(), 2, "both clicks recorded: {records:#?}");
}

#[test]
fn unverified_ad_ids_are_accepted_marked_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let (key, keys) = keys();
    let svc = Service::start("ingest", dir.path(), &[("RM_AD_ID_KEYS", key)]);
    let expired = keys
        .mint("camp-1", "banner", chrono::Utc::now().timestamp() - 60)
        .unwrap();
    let valid = keys.mint("camp-1", "banner", later()).unwrap();
    let bad_sig = valid.replacen("camp-1", "camp-2", 1);
    let foreign = "ad-1".to_string();
    let ts = "2026-11-22T10:15:30.250Z";
    let cases = [
        (&expired, "s-expired", UnverifiedAdId::Expired),
        (&bad_sig, "s-bad", UnverifiedAdId::BadSignature),
        (&foreign, "s-foreign", UnverifiedAdId::Foreign),
    ];
    for (ad, session, _) in &cases {
        for what in ["impression", "click"] {
            let r = get(
                svc.ingest,
                &url(
                    what,
                    &[("adId", ad), ("sessionId", session), ("timestamp", ts)],
                ),
            )
            .unwrap();
            assert_eq!(r.status, 200, "{what} {ad}");
        }
        let r = get(
            svc.ingest,
            &common::beacon(&[
                ("adId", ad),
                ("interactionType", "videoPlay"),
                ("videoId", "v-1"),
                ("sessionId", session),
                ("timestamp", ts),
            ]),
        )
        .unwrap();
        assert_eq!(r.status, 200);
    }
    let metrics = String::from_utf8(get(svc.ingest, "/metrics").unwrap().body).unwrap();
    for v in ["expired", "bad_signature", "foreign"] {
        assert_eq!(
            metric(
                &metrics,
                &format!(r#"ingest_ad_id_unverified_total{{verdict="{v}"}}"#)
            ),
            3.0,
            "{v}: {metrics}"
        );
    }
    assert_eq!(svc.terminate(), Some(0));
    let records = read_embedded(dir.path(), TOPIC);
    assert_eq!(records.len(), 9);
    for (ad, _, verdict) in &cases {
        let mine: Vec<_> = records.iter().filter(|r| &&r.event.ad_id == ad).collect();
        assert_eq!(mine.len(), 3, "{ad}");
        assert!(
            mine.iter().all(|r| r.ad_id_verdict == Some(*verdict)),
            "{mine:#?}"
        );
    }
    // The marker is in the raw JSON as the aggregator reads it.
    let raw = common::read_embedded_raw(dir.path(), TOPIC);
    assert!(raw
        .iter()
        .any(|v| String::from_utf8_lossy(v).contains(r#""adIdVerdict":"bad_signature""#)));
}

#[test]
fn requiring_valid_ad_ids_refuses_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let (key, keys) = keys();
    let svc = Service::start(
        "ingest",
        dir.path(),
        &[
            ("RM_AD_ID_KEYS", key),
            ("RM_INGEST_REQUIRE_VALID_AD_IDS", "true".into()),
        ],
    );
    let ts = "2026-11-22T10:15:30.250Z";
    let expired = keys
        .mint("camp-1", "banner", chrono::Utc::now().timestamp() - 60)
        .unwrap();
    let valid = keys.mint("camp-1", "banner", later()).unwrap();
    for ad in [
        expired.as_str(),
        "ad-1",
        &valid.replacen("camp-1", "camp-9", 1),
    ] {
        let r = get(
            svc.ingest,
            &url(
                "impression",
                &[("adId", ad), ("sessionId", "s-1"), ("timestamp", ts)],
            ),
        )
        .unwrap();
        assert_eq!(r.status, 400, "{ad}");
        let body = r.json();
        assert_eq!(body["details"][0]["metadata"]["reason"], "unverified_ad_id");
        assert_eq!(body["details"][0]["metadata"]["field"], "adId");
    }
    let r = get(
        svc.ingest,
        &url(
            "impression",
            &[("adId", &valid), ("sessionId", "s-1"), ("timestamp", ts)],
        ),
    )
    .unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(svc.terminate(), Some(0));
    let records = read_embedded(dir.path(), TOPIC);
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].event.ad_id, valid);
}

#[test]
fn bad_edge_settings_fail_at_start_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    for (var, value, named) in [
        ("RM_INGEST_INSPECTOR", "sometimes", "ingest-inspector"),
        (
            "RM_INGEST_JWKS_URL",
            // Plain http off loopback: anyone on the path could swap the key set.
            "http://api.example/.well-known/jwks.json",
            "RM_INGEST_JWKS_URL",
        ),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_retail-media"))
            .arg("ingest")
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("RM_DATA_DIR", dir.path())
            .env(
                "RM_INGEST_ADDR",
                format!("127.0.0.1:{}", common::free_port()),
            )
            .env(var, value)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{var}={value} started");
        let err = String::from_utf8_lossy(&out.stderr).into_owned()
            + &String::from_utf8_lossy(&out.stdout);
        assert!(err.contains(named) && err.contains(value), "{var}: {err}");
    }
}
