//! The edge's answers when the log cannot make an event durable: 503 for beacons and
//! impressions, a redirect anyway for a signed click (counted as not recorded), and
//! what the inspector shows. (The real logs' failure modes are tested in
//! `tests/it/edge_kafka.rs`; here a log that refuses every write drives the edge's logic.)

use std::sync::Arc;
use std::time::Duration;

use rm_eventlog::{EventLog, LogError};
use rm_schemas::ad_event::click_signature;
use rm_schemas::ad_id::AdIdKeys;
use rm_schemas::agent::Traffic;
use rm_schemas::InteractionType;
use rm_service::ops::Ops;

use crate::edge::{Edge, Shared};
use crate::inspector::{Inspector, Sampling};
use crate::metrics::EdgeMetrics;

struct DownLog;

impl EventLog for DownLog {
    async fn append(&self, _: &str, _: &[u8], _: Vec<u8>) -> Result<(), LogError> {
        Err(LogError::Unavailable("test: the log is down".into()))
    }
    fn readiness(&self) -> Result<(), String> {
        Err("down".into())
    }
    async fn flush(&self, _: Duration) -> Result<(), LogError> {
        Ok(())
    }
}

fn config() -> crate::IngestConfig {
    use clap::Parser;
    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        c: crate::IngestConfig,
    }
    Cli::parse_from(["test"]).c
}

fn edge(keys: &AdIdKeys) -> (Edge<DownLog>, Arc<Inspector>) {
    let inspector = Inspector::new(Sampling::On, 50, 1 << 20);
    let ops = Ops::new(
        rm_service::telemetry::install(),
        Arc::new(|| Ok::<(), String>(())),
    );
    let e = Edge::new(
        config(),
        Arc::new(DownLog),
        EdgeMetrics::register("test"),
        ops,
        Shared {
            ad_keys: keys.clone(),
            inspector: Arc::clone(&inspector),
            bearer: None,
            consent: crate::consent::ConsentStage::new(None, b"0123456789abcdef"),
        },
    );
    (e, inspector)
}

const TS: &str = "2026-11-22T10%3A15%3A30.250Z";

#[tokio::test]
async fn a_signed_click_redirects_even_when_the_log_is_down() {
    let keys = AdIdKeys::new(vec![b"0123456789abcdef-test".to_vec()]).expect("keys");
    let (edge, inspector) = edge(&keys);
    let ad = keys.mint("camp-1", "banner", i64::MAX / 2).expect("mint");
    let dest = "https://shop.example/cta?x=1";
    let sig = click_signature(&keys, &ad, dest);
    let q = format!(
        "adId={ad}&timestamp={TS}&sessionId=s-1&dest={}&sig={sig}",
        "https%3A%2F%2Fshop.example%2Fcta%3Fx%3D1"
    );
    let r = edge
        .ad_event(InteractionType::AdClick, &q, Traffic::BROWSER)
        .await;
    assert_eq!(r.status(), 302);
    assert_eq!(r.headers()["location"], dest);
    let r = edge
        .ad_event(
            InteractionType::AdImpression,
            &format!("adId={ad}&timestamp={TS}&sessionId=s-1"),
            Traffic::BROWSER,
        )
        .await;
    assert_eq!(r.status(), 503);
    assert!(r.headers().contains_key("retry-after"));
    let r = edge
        .beacon(
            &format!("adId={ad}&interactionType=videoPlay&videoId=v&timestamp={TS}&sessionId=s-1"),
            Traffic::BROWSER,
        )
        .await;
    assert_eq!(r.status(), 503);
    let report = crate::inspector_report::report(
        &inspector,
        "s-1",
        &rm_schemas::namespace::Viewer::Operator,
    );
    let events = report["events"].as_array().expect("events");
    assert_eq!(events.len(), 3, "{report}");
    assert!(
        events.iter().all(|e| e["outcome"] == "not_recorded"),
        "{report}"
    );
    assert_eq!(events[0]["endpoint"], "click");
    assert!(events[0]["message"]
        .as_str()
        .unwrap_or("")
        .contains("redirected"));
}

#[tokio::test]
async fn a_forged_click_never_redirects() {
    let keys = AdIdKeys::new(vec![b"0123456789abcdef-test".to_vec()]).expect("keys");
    let (edge, _) = edge(&keys);
    let q =
        format!("adId=a&timestamp={TS}&sessionId=s&dest=https%3A%2F%2Fevil.example%2F&sig=AAAA");
    let r = edge
        .ad_event(InteractionType::AdClick, &q, Traffic::BROWSER)
        .await;
    assert_eq!(r.status(), 400);
    assert!(!r.headers().contains_key("location"));
}

/// A signed click redirects while its ad id is valid and within the grace period
/// after it expired; later it is a 410 page, never a redirect.
#[tokio::test]
async fn a_signed_click_stops_redirecting_after_its_ad_ended_and_the_grace_period() {
    let keys = AdIdKeys::new(vec![b"0123456789abcdef-test".to_vec()]).expect("keys");
    let (edge, inspector) = edge(&keys);
    let now = chrono::Utc::now().timestamp();
    let grace = crate::config::DEFAULT_CLICK_REDIRECT_GRACE_SECS as i64;
    let dest = "https://shop.example/cta";
    let click = |expiry: i64, session: &str| {
        let ad = keys.mint("camp-1", "banner", expiry).expect("mint");
        let sig = click_signature(&keys, &ad, dest);
        format!(
            "adId={ad}&timestamp={TS}&sessionId={session}&dest=https%3A%2F%2Fshop.example%2Fcta&sig={sig}"
        )
    };
    for (expiry, session, status) in [
        (now + 600, "live", 302),
        (now - grace + 600, "in-grace", 302),
        (now - grace - 600, "ended", 410),
    ] {
        let r = edge
            .ad_event(
                InteractionType::AdClick,
                &click(expiry, session),
                Traffic::BROWSER,
            )
            .await;
        assert_eq!(r.status(), status, "{session}");
        assert_eq!(r.headers().contains_key("location"), status == 302);
    }
    let report = crate::inspector_report::report(
        &inspector,
        "ended",
        &rm_schemas::namespace::Viewer::Operator,
    );
    assert!(
        report["events"][0]["message"]
            .as_str()
            .unwrap_or("")
            .contains("410"),
        "{report}"
    );
}
