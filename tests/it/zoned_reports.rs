//! The video funnel and the campaign summary in a time zone, against the real binary
//! on its embedded backends: a view and an ad impression fired now sit, by hour in
//! Asia/Kolkata (+05:30), in the local hour of their instant, and by day in
//! Pacific/Kiritimati (+14:00) on its local date; an unknown zone is a 400 naming
//! `timeZone`, as is a zone asked of the sales report (kept by UTC day).

#![allow(clippy::unwrap_used, missing_docs)]

use crate::common;

use std::time::{Duration, Instant};

use chrono::{DateTime, FixedOffset, Timelike, Utc};
use common::{beacon, demo_token, get, send, Service};
use serde_json::Value;

/// GET `path` with `token`: status and body.
fn report(api: std::net::SocketAddr, token: &str, path: &str) -> (u16, Value) {
    let r = send(
        api,
        "GET",
        path,
        &[("Authorization", &format!("Bearer {token}"))],
        b"",
    )
    .unwrap();
    (
        r.status,
        serde_json::from_slice(&r.body).unwrap_or(Value::Null),
    )
}

/// `t` in the zone `hours` (and `minutes`) east of UTC.
fn local(t: DateTime<Utc>, hours: i32, minutes: i32) -> DateTime<FixedOffset> {
    t.with_timezone(&FixedOffset::east_opt(hours * 3600 + minutes * 60).unwrap())
}

#[test]
fn the_funnel_and_the_campaign_summary_cut_periods_in_any_zone() {
    let dir = tempfile::tempdir().unwrap();
    let svc = Service::start(
        "all",
        dir.path(),
        &[("RM_AGGREGATOR_BATCH_MAX_WAIT_MS", "100".to_owned())],
    );
    let now = Utc::now();
    let ts = now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    for kind in ["videoCreativeView", "videoPlay"] {
        let params = [
            ("adId", "rm1.camp-zones.x"),
            ("interactionType", kind),
            ("timestamp", ts.as_str()),
            ("sessionId", "s-zones"),
            ("videoId", "vid-zones"),
        ];
        let r = get(svc.ingest, &beacon(&params)).unwrap();
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    }
    let token = demo_token(svc.api);
    let kolkata = local(now, 5, 30);
    let date = kolkata.format("%Y-%m-%d").to_string();
    let hour = kolkata
        .with_minute(0)
        .and_then(|t| t.with_second(0))
        .unwrap()
        .format("%Y-%m-%dT%H:%M:%S+05:30")
        .to_string();
    let hourly = |report_path: &str| {
        format!(
            "{report_path}?campaignId=camp-zones&timeZone=Asia/Kolkata&granularity=hour\
             &from={date}&to={date}"
        )
    };
    // The view, aggregated, in its local hour.
    let deadline = Instant::now() + Duration::from_secs(30);
    let funnel = loop {
        let (status, v) = report(svc.api, &token, &hourly("/v1/reports/video-funnel"));
        assert_eq!(status, 200, "{v}");
        let rows = v["rows"].as_array().cloned().unwrap_or_default();
        if !rows.is_empty() || Instant::now() > deadline {
            break rows;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(funnel.len(), 1, "{funnel:?}");
    assert_eq!(funnel[0]["periodStart"], hour.as_str());
    assert_eq!(funnel[0]["day"], date.as_str());
    assert_eq!(funnel[0]["videoId"], "vid-zones");
    // Of an id not ours: beside the funnel, not in it.
    assert_eq!(
        (
            funnel[0]["invalidViews"].as_u64(),
            funnel[0]["plays"].as_u64()
        ),
        (Some(1), Some(0))
    );
    let (status, v) = report(svc.api, &token, &hourly("/v1/reports/campaigns"));
    assert_eq!(status, 200, "{v}");
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["periodStart"], hour.as_str());
    assert_eq!(rows[0]["invalidVideoPlays"], 1);
    // By day where it is already tomorrow (or still today) for UTC.
    let kiritimati = local(now, 14, 0).format("%Y-%m-%d").to_string();
    let (status, v) = report(
        svc.api,
        &token,
        &format!(
            "/v1/reports/campaigns?campaignId=camp-zones&timeZone=Pacific/Kiritimati\
             &from={kiritimati}&to={kiritimati}"
        ),
    );
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["rows"][0]["day"], kiritimati.as_str(), "{v}");
    assert_eq!(
        v["rows"][0]["periodStart"],
        format!("{kiritimati}T00:00:00+14:00").as_str()
    );
    assert_eq!(v["rows"][0]["invalidVideoPlays"], 1);
    // An unknown zone, and a zone of a report kept by UTC day: 400s naming it.
    for path in [
        "/v1/reports/campaigns?timeZone=Mars/Olympus",
        "/v1/reports/video-funnel?timeZone=Mars/Olympus",
        "/v1/reports/sales?timeZone=Asia/Kolkata",
    ] {
        let (status, v) = report(svc.api, &token, path);
        assert_eq!(status, 400, "{path}: {v}");
        assert_eq!(
            v["details"][1]["fieldViolations"][0]["field"], "timeZone",
            "{path}: {v}"
        );
    }
}
