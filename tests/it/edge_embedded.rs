//! The edge on its embedded log, as a user runs it: the real binary, real sockets,
//! then the log read back from disk.
#![allow(clippy::unwrap_used, missing_docs)]

use crate::common;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{beacon, get, read_embedded, read_embedded_raw, request_raw, Service};

const TOPIC: &str = "ad-interactions";

fn play(ad: &str, session: &str, ts: &str) -> Vec<(&'static str, String)> {
    vec![
        ("adId", ad.to_string()),
        ("interactionType", "videoPlay".to_string()),
        ("timestamp", ts.to_string()),
        ("sessionId", session.to_string()),
        ("videoId", "vid-1".to_string()),
    ]
}

fn path(params: &[(&'static str, String)]) -> String {
    let p: Vec<(&str, &str)> = params.iter().map(|(k, v)| (*k, v.as_str())).collect();
    beacon(&p)
}

#[test]
fn the_same_beacon_in_any_order_is_written_once() {
    let dir = tempfile::tempdir().unwrap();
    let svc = Service::start("ingest", dir.path(), &[]);
    let mut params = play("ad-dup", "s-1", "2026-11-22T10:15:30.250+01:00");
    let first = get(svc.ingest, &path(&params)).unwrap();
    assert_eq!(first.status, 200);
    params.reverse();
    params.push(("cb", "81723".into()));
    assert_eq!(
        get(svc.ingest, &path(&params)).unwrap().status,
        200,
        "reordered + cache-buster"
    );
    params.retain(|(k, _)| *k != "cb");
    params.sort();
    params.push(("cachebuster", "99".into()));
    assert_eq!(
        get(svc.ingest, &path(&params)).unwrap().status,
        200,
        "rotated + other cache-buster"
    );
    // The same instant written in UTC is the same event.
    let utc = play("ad-dup", "s-1", "2026-11-22T09:15:30.250Z");
    assert_eq!(get(svc.ingest, &path(&utc)).unwrap().status, 200);
    // A different identifying field is a different event.
    let other = play("ad-dup", "s-2", "2026-11-22T10:15:30.250+01:00");
    assert_eq!(get(svc.ingest, &path(&other)).unwrap().status, 200);
    let metrics = String::from_utf8(get(svc.ingest, "/metrics").unwrap().body).unwrap();
    assert!(
        metrics.contains("ingest_events_duplicate_total 3"),
        "{metrics}"
    );
    assert_eq!(svc.terminate(), Some(0));

    let records = read_embedded(dir.path(), TOPIC);
    assert_eq!(records.len(), 2, "{records:#?}");
    let sessions: HashSet<_> = records
        .iter()
        .map(|r| r.event.session_id.clone().unwrap())
        .collect();
    assert_eq!(
        sessions,
        HashSet::from(["s-1".to_string(), "s-2".to_string()])
    );
    let r = records
        .iter()
        .find(|r| r.event.session_id.as_deref() == Some("s-1"))
        .unwrap();
    assert_eq!(r.event.ad_id, "ad-dup");
    assert_eq!(r.event.video_id.as_deref(), Some("vid-1"));
    assert_eq!(
        r.event.timestamp.to_rfc3339(),
        "2026-11-22T10:15:30.250+01:00"
    );
    assert_eq!(r.v, 1);
}

#[test]
fn bad_beacons_get_the_error_status_object_and_are_not_written() {
    let dir = tempfile::tempdir().unwrap();
    let svc = Service::start("ingest", dir.path(), &[]);
    let cases: Vec<(Vec<u8>, &str, &str)> = vec![
        (b"/v1/events/ad/interaction?adId=a&interactionType=videoPlay&timestamp=2026-11-22T10:15:30+01:00&sessionId=s&videoId=v".to_vec(), "timestamp", "invalid_timestamp"),
        (b"/v1/events/ad/interaction?adId=a&interactionType=videoPlay&timestamp=2026-11-22T10:15:30%2B01:00&videoId=v".to_vec(), "sessionId", "no_tracking_id"),
        (b"/v1/events/ad/interaction?adId=a&interactionType=videoJump&timestamp=2026-11-22T10:15:30Z&sessionId=s".to_vec(), "interactionType", "unknown_interaction_type"),
        (b"/v1/events/ad/interaction?adId=a b".to_vec(), "", ""),
        (b"/v1/events/ad/interaction?adId=a{b}&interactionType=videoPlay".to_vec(), "adId", "url_not_encoded"),
        (b"/v1/events/ad/interaction?adId=%E9&interactionType=videoPlay".to_vec(), "adId", "url_not_encoded"),
        (b"/v1/events/ad/interaction?adId=\xc3\xa9&interactionType=videoPlay".to_vec(), "adId", "url_not_encoded"),
        (b"/v1/events/ad/interaction?adId=a&interactionType=videoPlay&timestamp=[TIMESTAMP]&sessionId=s&videoId=v".to_vec(), "timestamp", "unexpanded_macro"),
        (b"/v1/events/ad/interaction?adId=a&interactionType=cart&timestamp=2026-11-22T10:15:30Z&sessionId=s&productCode=p&catalogId=c&units=-1".to_vec(), "units", "invalid_units"),
        (b"/v1/events/ad/interaction?adId=a&adId=b&interactionType=videoPlay&timestamp=2026-11-22T10:15:30Z&sessionId=s&videoId=v".to_vec(), "adId", "duplicate_parameter"),
        (b"/v1/events/ad/interaction?adId=a&interactionType=productClick&timestamp=2026-11-22T10:15:30Z&sessionId=s&productCode=p".to_vec(), "catalogId", "missing_parameter"),
    ];
    for (target, field, reason) in cases {
        let shown = String::from_utf8_lossy(&target).to_string();
        match request_raw(svc.ingest, "GET", &target) {
            Ok(r) => {
                assert_eq!(r.status, 400, "{shown}");
                if reason.is_empty() {
                    continue; // not even a valid HTTP request line: hyper's bare 400
                }
                let v = r.json();
                assert_eq!(v["code"], 3, "{shown}");
                assert_eq!(
                    v["details"][0]["metadata"]["reason"], reason,
                    "{shown}: {v}"
                );
                assert_eq!(
                    v["details"][1]["fieldViolations"][0]["field"], field,
                    "{shown}: {v}"
                );
                assert_eq!(r.header("access-control-allow-origin"), Some("*"));
            }
            Err(e) => panic!("{shown}: {e}"),
        }
    }
    let metrics = String::from_utf8(get(svc.ingest, "/metrics").unwrap().body).unwrap();
    assert!(
        metrics.contains(r#"ingest_events_rejected_total{reason="url_not_encoded"} 3"#),
        "{metrics}"
    );
    assert_eq!(svc.terminate(), Some(0));
    assert!(read_embedded(dir.path(), TOPIC).is_empty());
}

#[test]
fn http_surface_health_cors_and_bounds() {
    let dir = tempfile::tempdir().unwrap();
    let svc = Service::start("all", dir.path(), &[]);
    for addr in [svc.ingest, svc.api, svc.aggregator] {
        assert_eq!(get(addr, "/healthz").unwrap().status, 200);
        assert_eq!(get(addr, "/readyz").unwrap().status, 200);
        let m = get(addr, "/metrics").unwrap();
        assert_eq!(m.status, 200);
        assert!(m.header("content-type").unwrap().starts_with("text/plain"));
    }
    let ok = get(
        svc.ingest,
        &path(&play("ad-h", "s", "2026-11-22T10:15:30Z")),
    )
    .unwrap();
    assert_eq!(ok.status, 200);
    assert_eq!(ok.header("content-type"), Some("image/gif"));
    assert_eq!(ok.header("cache-control"), Some("no-store"));
    assert_eq!(ok.header("access-control-allow-origin"), Some("*"));
    assert_eq!(&ok.body[..6], b"GIF89a");

    let pre = request_raw(svc.ingest, "OPTIONS", b"/v1/events/ad/interaction").unwrap();
    assert_eq!(pre.status, 204);
    assert!(pre
        .header("access-control-allow-methods")
        .unwrap()
        .contains("GET"));
    let post = request_raw(svc.ingest, "POST", b"/v1/events/ad/interaction?a=b").unwrap();
    assert_eq!(post.status, 405);
    assert!(post.header("allow").unwrap().contains("GET"));
    assert_eq!(post.json()["code"], 12);
    let missing = get(svc.ingest, "/v1/events/ad/nope").unwrap();
    assert_eq!(missing.status, 404);
    assert_eq!(missing.json()["code"], 5);
    let long = format!("/v1/events/ad/interaction?cb={}", "x".repeat(9_000));
    assert_eq!(get(svc.ingest, &long).unwrap().status, 414);
    let huge = format!("/v1/events/ad/interaction?cb={}", "x".repeat(70_000));
    let r = get(svc.ingest, &huge).unwrap();
    assert!(r.status == 431 || r.status == 414, "{}", r.status);
    // Still serving after all of that.
    assert_eq!(get(svc.ingest, "/healthz").unwrap().status, 200);
    let metrics = String::from_utf8(get(svc.ingest, "/metrics").unwrap().body).unwrap();
    for series in [
        "ingest_log_write_seconds_bucket",
        "ingest_events_accepted_total{interaction_type=\"cart\"}",
        "ingest_dedup_keys",
    ] {
        assert!(metrics.contains(series), "missing {series}");
    }
    assert_eq!(svc.terminate(), Some(0), "graceful shutdown exits 0");
}

/// Fire beacons from several threads, `kill -9` the edge mid-stream, restart: every
/// beacon that got a 200 is in the log, none twice.
#[test]
fn kill_9_loses_no_acknowledged_event() {
    let dir = tempfile::tempdir().unwrap();
    let acked: Arc<Mutex<Vec<String>>> = Arc::default();
    let mut total_acked = 0;
    for round in 0..3 {
        let svc = Service::start("ingest", dir.path(), &[]);
        let stop = Arc::new(AtomicBool::new(false));
        let threads: Vec<_> = (0..6)
            .map(|t| {
                let (addr, acked, stop) = (svc.ingest, Arc::clone(&acked), Arc::clone(&stop));
                std::thread::spawn(move || {
                    let mut i = 0u64;
                    while !stop.load(Ordering::Relaxed) && i < 100_000 {
                        let session = format!("r{round}-t{t}-{i}");
                        let p = play("ad-kill", &session, "2026-11-22T10:15:30.250Z");
                        if let Ok(r) = get(addr, &path(&p)) {
                            if r.status == 200 {
                                acked.lock().unwrap().push(session);
                            }
                        }
                        i += 1;
                    }
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(700 + 300 * round));
        svc.kill9();
        stop.store(true, Ordering::Relaxed);
        for t in threads {
            t.join().unwrap();
        }
        let now = acked.lock().unwrap().len();
        assert!(now > total_acked, "round {round} acknowledged nothing");
        total_acked = now;
    }
    let records = read_embedded(dir.path(), TOPIC);
    let written: Vec<String> = records
        .iter()
        .map(|r| r.event.session_id.clone().unwrap())
        .collect();
    let unique: HashSet<&String> = written.iter().collect();
    assert_eq!(unique.len(), written.len(), "an event was written twice");
    let ids: HashSet<_> = records.iter().map(|r| r.event_id).collect();
    assert_eq!(ids.len(), records.len(), "event ids are unique");
    let acked = acked.lock().unwrap();
    let missing: Vec<_> = acked.iter().filter(|s| !unique.contains(s)).collect();
    assert!(
        missing.is_empty(),
        "{} acknowledged events lost, e.g. {:?}",
        missing.len(),
        missing.first()
    );
    eprintln!(
        "acknowledged {} events over 3 kill -9 rounds; log holds {}",
        acked.len(),
        records.len()
    );
}

/// With `RM_REJECTED_TOPIC` on, rejected beacons land as "bad rows" (reason, field,
/// truncated query) in `ad-interactions-rejected`, rate-limited.
#[test]
fn rejected_beacons_become_bad_rows_when_enabled() {
    let dir = tempfile::tempdir().unwrap();
    let env = [
        ("RM_REJECTED_TOPIC", "true".to_string()),
        ("RM_REJECTED_ROWS_PER_SEC", "5".to_string()),
    ];
    let svc = Service::start("ingest", dir.path(), &env);
    let long = format!(
        "/v1/events/ad/interaction?adId=a&interactionType=nope&cb={}",
        "x".repeat(3000)
    );
    assert_eq!(get(svc.ingest, &long).unwrap().status, 400);
    for i in 0..20 {
        let r = get(
            svc.ingest,
            &format!("/v1/events/ad/interaction?adId=a{i}&interactionType=videoPlay"),
        )
        .unwrap();
        assert_eq!(r.status, 400);
    }
    std::thread::sleep(Duration::from_millis(300));
    let metrics = String::from_utf8(get(svc.ingest, "/metrics").unwrap().body).unwrap();
    assert_eq!(svc.terminate(), Some(0));
    let rows: Vec<serde_json::Value> = read_embedded_raw(dir.path(), "ad-interactions-rejected")
        .iter()
        .map(|v| serde_json::from_slice(v).unwrap())
        .collect();
    // 21 rejections within about a second, at most 5 rows a second.
    assert!(!rows.is_empty() && rows.len() <= 10, "{} rows", rows.len());
    let first = &rows[0];
    assert_eq!(first["reason"], "unknown_interaction_type");
    assert_eq!(first["field"], "interactionType");
    assert_eq!(first["truncated"], true);
    assert_eq!(first["query"].as_str().unwrap().len(), 2048);
    assert!(
        metrics.contains("ingest_rejected_rows_dropped_total"),
        "{metrics}"
    );
    assert!(read_embedded(dir.path(), "ad-interactions").is_empty());
}
