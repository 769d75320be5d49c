//! One shopper's 100 clicks on one ad, timestamps 1 ms apart (a player that rebuilds
//! the URL on every retry, or a script re-firing one valid ad id), are one billable
//! click: in the ads, products and campaign reports and in spend, also when no single
//! edge saw them all. On the embedded backends the edge is restarted (`kill -9`)
//! mid-stream, so its in-memory click window forgets the first click; on Kafka +
//! ClickHouse they arrive through two edges and the aggregator is `kill -9`ed while it
//! works through them. Either way more than one click reaches the log, and the
//! aggregator's served-ad rule (one billable click per served ad, issue 26; before it,
//! the reports' click window) counts them once, the rest as
//! `invalidClicks.servedAdRepeat`, through every kill. The tally the spend refresher
//! reads (billable clicks per campaign and day, `rm_store::model::tallies`) holds that
//! one click too, read from the store itself once the services stopped.

#![allow(clippy::unwrap_used, missing_docs)]

use crate::common;

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use common::{beacon, demo_token, enc, get, report_rows, send, Service};
use rm_schemas::ad_id::AdIdKeys;

use crate::common::sessions;

use crate::common::exact;

use exact::{fire_all, metric};

/// `demo-products`, whose `maxBid` is $1.20 (the quick start's demo data).
const CAMPAIGN: &str = "demo-products";

fn at(base: chrono::DateTime<chrono::Utc>, ms: i64) -> String {
    (base + chrono::Duration::milliseconds(ms)).to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// Click `i` of the stream: an ad click and a product click, 1 ms after click `i - 1`.
fn click(edge: SocketAddr, ad: &str, t0: chrono::DateTime<chrono::Utc>, i: i64) {
    let ts = at(t0, i);
    let r = get(
        edge,
        &format!(
            "/v1/events/ad/click?adId={}&sessionId=s-billable&timestamp={}",
            enc(ad),
            enc(&ts)
        ),
    )
    .unwrap();
    assert!(r.status < 400, "{}", String::from_utf8_lossy(&r.body));
    let r = get(
        edge,
        &beacon(&[
            ("adId", ad),
            ("interactionType", "productClick"),
            ("timestamp", &ts),
            ("sessionId", "s-billable"),
            ("catalogId", "demo-catalog"),
            ("productCode", "cola-1l"),
        ]),
    )
    .unwrap();
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
}

fn rows(api: SocketAddr, path: &str) -> Vec<serde_json::Value> {
    report_rows(api, &format!("Bearer {}", demo_token(api)), path)
}

/// A money value of a report as a number, whichever form it is written in (a JSON
/// number, or a decimal string with its currency symbol or code).
pub(crate) fn amount(v: &serde_json::Value) -> f64 {
    match v {
        serde_json::Value::Number(n) => n.as_f64().unwrap(),
        serde_json::Value::String(s) => s
            .trim_matches(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-'))
            .parse()
            .unwrap_or_else(|_| panic!("not an amount: {s}")),
        other => panic!("not an amount: {other}"),
    }
}

/// Reads the report at `path` until its rows' clicks (each row's `clicks` of every
/// kind, as `count` says) add up to `records`, for at most 90 s from `t`.
fn rows_counting(
    api: SocketAddr,
    path: &str,
    records: u64,
    t: Instant,
    count: impl Fn(&serde_json::Value) -> u64,
) -> Vec<serde_json::Value> {
    loop {
        let got = rows(api, path);
        if got.iter().map(&count).sum::<u64>() == records {
            return got;
        }
        assert!(
            t.elapsed() < Duration::from_secs(90),
            "{records} clicks expected of {path}: {got:#?}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Waits until the reports hold every click that reached the log (`records` ad clicks
/// and as many product clicks), then checks there is one billable click of each.
fn one_billable_click(api: SocketAddr, ad: &str, records: u64) {
    assert!(records > 1, "the test needs clicks past one edge's window");
    let t = Instant::now();
    let ads = rows_counting(
        api,
        &format!("/v1/reports/ads?adId={}", enc(ad)),
        records,
        t,
        |r| r["clicks"].as_u64().unwrap() + r["notBillableClicks"].as_u64().unwrap(),
    );
    assert_eq!(ads.len(), 1, "{ads:#?}");
    assert_eq!(ads[0]["clicks"], 1, "{ads:#?}");
    assert_eq!(ads[0]["invalidClicks"]["servedAdRepeat"], records - 1);
    // The product clicks are records of their own, perhaps of a later batch.
    let path = format!("/v1/reports/products?adId={}", enc(ad));
    let products = rows_counting(api, &path, records, t, |r| {
        let invalid = r["invalidClicks"].as_object().map_or(0, |o| {
            o.values()
                .filter_map(serde_json::Value::as_u64)
                .sum::<u64>()
        });
        r["clicks"].as_u64().unwrap() + invalid
    });
    assert_eq!(products.len(), 1, "{products:#?}");
    assert_eq!(products[0]["clicks"], 1, "{products:#?}");
    assert_eq!(products[0]["invalidClicks"]["servedAdRepeat"], records - 1);
    let campaigns = rows(api, &format!("/v1/reports/campaigns?campaignId={CAMPAIGN}"));
    assert_eq!(campaigns.len(), 1, "{campaigns:#?}");
    assert_eq!(campaigns[0]["clicks"], 1);
    assert_eq!(campaigns[0]["productClicks"], 1);
    assert_eq!(amount(&campaigns[0]["spend"]), 1.2, "1 click x $1.20");
    // Read as CSV, the same counts.
    let auth = format!("Bearer {}", demo_token(api));
    let csv = send(
        api,
        "GET",
        &format!("/v1/reports/ads?adId={}&format=csv", enc(ad)),
        &[("Authorization", &auth)],
        b"",
    )
    .unwrap();
    let text = String::from_utf8(csv.body).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let row: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| row[header.iter().position(|h| *h == name).unwrap()];
    assert_eq!(col("clicks"), "1", "{text}");
    assert_eq!(
        col("invalidClicks.servedAdRepeat"),
        (records - 1).to_string()
    );
}

/// The billable ad clicks the aggregator tallied (what spend reads): (campaign, day,
/// clicks), every campaign.
fn tallied(store: &rm_store::AnyStore) -> Vec<(String, String, i64)> {
    let rows = crate::auth_limits::runtime()
        .block_on(rm_store::billable_clicks(store, None))
        .unwrap()
        .expect("the aggregator counted the store into tallies at its start");
    rows.into_iter()
        .map(|d| (d.campaign_id, rm_store::model::format_day(d.day), d.value))
        .collect()
}

/// One billable click of [`CAMPAIGN`] on the day of `t0`, nothing else.
fn one_tallied_click(store: &rm_store::AnyStore, t0: chrono::DateTime<chrono::Utc>) {
    one_tallied_campaign(store, &t0.format("%Y-%m-%d").to_string(), 1);
}

/// `clicks` billable clicks of [`CAMPAIGN`] on `day`, nothing else.
fn one_tallied_campaign(store: &rm_store::AnyStore, day: &str, clicks: i64) {
    assert_eq!(
        tallied(store),
        vec![(CAMPAIGN.to_owned(), day.to_owned(), clicks)]
    );
}

/// The ad clicks of the ad in the log.
fn ad_clicks_logged(edge: SocketAddr) -> u64 {
    metric(
        edge,
        "ingest_events_accepted_total{interaction_type=\"adClick\"}",
    )
    .unwrap_or(0.0) as u64
}

fn mint(keys: &AdIdKeys) -> String {
    keys.mint_in(
        "demo",
        CAMPAIGN,
        "cola-1l",
        chrono::Utc::now().timestamp() + 3_600,
    )
    .unwrap()
}

/// A fresh ad id key (and the keys that mint with it) and the settings of an
/// embedded `all` that stores each batch within 50 ms.
fn embedded_setup() -> (AdIdKeys, [(&'static str, String); 2]) {
    let key = AdIdKeys::generate_key();
    let keys = AdIdKeys::from_list(&key).unwrap();
    let env = [
        ("RM_AD_ID_KEYS", key),
        ("RM_AGGREGATOR_BATCH_MAX_WAIT_MS", "50".to_owned()),
    ];
    (keys, env)
}

#[test]
fn embedded_one_billable_click_through_an_edge_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (keys, env) = embedded_setup();
    let ad = mint(&keys);
    let t0 = chrono::Utc::now() - chrono::Duration::seconds(5);
    let mut logged = 0;
    // Three process lives, each killed without warning after its share: each new
    // edge's window is empty, so each writes the first click it sees.
    for (from, to) in [(0, 40), (40, 70), (70, 100)] {
        let svc = Service::start("all", dir.path(), &env);
        for i in from..to {
            click(svc.ingest, &ad, t0, i);
        }
        logged += ad_clicks_logged(svc.ingest);
        svc.kill9();
    }
    assert_eq!(logged, 3, "one ad click per edge life");
    let svc = Service::start("all", dir.path(), &env);
    one_billable_click(svc.api, &ad, logged);
    assert_eq!(svc.terminate(), Some(0));
    let path = rm_store::embedded::EmbeddedStore::path(dir.path());
    let store = rm_store::embedded::EmbeddedStore::open(&path).unwrap();
    one_tallied_click(&rm_store::AnyStore::Embedded(store), t0);
}

#[test]
fn kafka_clickhouse_one_billable_click_through_two_edges_and_aggregator_kills() {
    let Some((mut env, _drop)) = common::kafka_clickhouse_env("billable", 2) else {
        return;
    };
    let key = AdIdKeys::generate_key();
    let keys = AdIdKeys::from_list(&key).unwrap();
    env.push(("RM_AD_ID_KEYS", key));
    env.push(("RM_AGGREGATOR_BATCH_MAX_WAIT_MS", "20".to_owned()));
    let dir = tempfile::tempdir().unwrap();
    let edges = [
        Service::start("ingest", &dir.path().join("edge-1"), &env),
        Service::start("ingest", &dir.path().join("edge-2"), &env),
    ];
    // A backlog of realistic sessions first, so the aggregator is mid-stream when the
    // clicks come and when it is killed.
    let (beacons, _) = sessions::generate(31, 300, 200);
    fire_all(edges[0].ingest, &beacons);
    let ad = mint(&keys);
    let t0 = chrono::Utc::now() - chrono::Duration::seconds(5);
    for i in 0..100 {
        click(edges[(i % 2) as usize].ingest, &ad, t0, i);
    }
    let logged: u64 = edges.iter().map(|e| ad_clicks_logged(e.ingest)).sum();
    assert_eq!(logged, 2, "one ad click per edge");
    let mut slow = env.clone();
    slow.push(("RM_AGGREGATOR_BATCH_MAX_RECORDS", "2".to_owned()));
    aggregate_with_kills(&dir.path().join("aggregator"), &slow, 3);
    let agg = Service::start("aggregate", &dir.path().join("aggregator"), &env);
    let api = Service::start("api", &dir.path().join("api"), &env);
    one_billable_click(api.api, &ad, logged);
    assert_eq!(agg.terminate(), Some(0));
    assert_eq!(api.terminate(), Some(0));
    let setting = |k: &str| env.iter().find(|(n, _)| *n == k).unwrap().1.clone();
    let config = rm_store::clickhouse::ClickHouseConfig {
        url: Some(setting("RM_CLICKHOUSE_URL")),
        database: setting("RM_CLICKHOUSE_DATABASE"),
        user: "default".to_owned(),
        password: String::new(),
    };
    let rt = crate::auth_limits::runtime();
    let store = rt
        .block_on(rm_store::clickhouse::ClickHouseStore::connect(&config))
        .unwrap();
    let store = rm_store::AnyStore::ClickHouse(store);
    one_tallied_click(&store, t0);
    // Recounted from the stored clicks on ClickHouse (the table dropped and made
    // again): the same one click.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_retail-media"))
        .arg("rebuild")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("RM_DATA_DIR", dir.path().join("rebuild"))
        .env("RM_CLICKHOUSE_URL", setting("RM_CLICKHOUSE_URL"))
        .env("RM_CLICKHOUSE_DATABASE", setting("RM_CLICKHOUSE_DATABASE"))
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("1 billable clicks over 1 campaign-days"),
        "{text}"
    );
    one_tallied_click(&store, t0);
}

/// `retail-media rebuild` with the embedded store in `dir`: (exit success, output).
fn rebuild(dir: &Path) -> (bool, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_retail-media"))
        .arg("rebuild")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("RM_DATA_DIR", dir)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

/// `retail-media rebuild` recounts the tallies from the stored clicks (here: after
/// they were lost), refuses while the store is in use, and the aggregator started
/// after it adds a new served ad's click once: nothing is counted twice across it.
#[test]
fn rebuild_recounts_the_tallies_from_the_stored_clicks() {
    let dir = tempfile::tempdir().unwrap();
    let (keys, env) = embedded_setup();
    let t0 = chrono::Utc::now() - chrono::Duration::seconds(5);
    let day = t0.format("%Y-%m-%d").to_string();
    let billable = |api: SocketAddr, want: u64| {
        let t = Instant::now();
        loop {
            let ads = rows(api, &format!("/v1/reports/ads?campaignId={CAMPAIGN}"));
            let clicks: u64 = ads.iter().map(|r| r["clicks"].as_u64().unwrap()).sum();
            if clicks == want {
                return;
            }
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "{want} clicks: {ads:#?}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    };
    let svc = Service::start("all", dir.path(), &env);
    // Three served ads, each clicked twice (one billable click each).
    for n in 0..3 {
        let ad = mint(&keys);
        click(svc.ingest, &ad, t0, 10 * n);
        click(svc.ingest, &ad, t0, 10 * n + 5);
    }
    billable(svc.api, 3);
    let (ok, out) = rebuild(dir.path());
    assert!(!ok, "rebuild ran beside a running store: {out}");
    assert!(out.contains("report store"), "{out}");
    assert_eq!(svc.terminate(), Some(0));

    // The tallies lost (as after a rule change that voids them), then rebuilt.
    let path = rm_store::embedded::EmbeddedStore::path(dir.path());
    {
        let db = redb::Database::create(&path).unwrap();
        let w = db.begin_write().unwrap();
        let tallies: redb::TableDefinition<&[u8], &[u8]> = redb::TableDefinition::new("rollups");
        w.delete_table(tallies).unwrap();
        w.commit().unwrap();
    }
    let (ok, out) = rebuild(dir.path());
    assert!(ok, "{out}");
    assert!(
        out.contains("3 billable clicks over 1 campaign-days"),
        "{out}"
    );
    let store = rm_store::embedded::EmbeddedStore::open(&path).unwrap();
    one_tallied_campaign(&rm_store::AnyStore::Embedded(store), &day, 3);

    // Started again: a new served ad's click adds one; the old ones are not recounted.
    let svc = Service::start("all", dir.path(), &env);
    let ad = mint(&keys);
    click(svc.ingest, &ad, t0, 100);
    billable(svc.api, 4);
    assert_eq!(svc.terminate(), Some(0));
    let store = rm_store::embedded::EmbeddedStore::open(&path).unwrap();
    one_tallied_campaign(&rm_store::AnyStore::Embedded(store), &day, 4);
}

/// Starts the aggregator and `kill -9`s it while it works (lag above zero), `kills`
/// times.
fn aggregate_with_kills(dir: &Path, env: &[(&str, String)], kills: usize) {
    for i in 0..kills {
        let agg = Service::start("aggregate", dir, env);
        let t = Instant::now();
        while metric(agg.aggregator, "aggregator_consumer_lag_records").unwrap_or(0.0) <= 0.0 {
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "kill {}: no lag seen; make the stream longer",
                i + 1
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(50 + 40 * i as u64));
        agg.kill9();
    }
}
