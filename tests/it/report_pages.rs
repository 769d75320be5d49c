//! Bounded report answers against the real binary on its embedded backends: 2,500
//! product rows read in pages of 1,000 (the default) and of 700, every row once and
//! in the order of the whole CSV download (streamed, chunked); a row counted between
//! two pages does not shift the next (pages by key); a range longer than
//! 400 days, a bad `pageSize` and a token of another query are 400s naming the
//! parameter.

#![allow(clippy::unwrap_used, missing_docs)]

use crate::common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::{beacon, demo_token, get, send, Service};
use serde_json::Value;

const ROWS: usize = 2_500;

fn report(api: SocketAddr, token: &str, path: &str) -> common::HttpResponse {
    send(
        api,
        "GET",
        path,
        &[("Authorization", &format!("Bearer {token}"))],
        b"",
    )
    .unwrap()
}

/// `retail-media all` batching every 100 ms.
fn start(dir: &std::path::Path) -> Service {
    Service::start(
        "all",
        dir,
        &[("RM_AGGREGATOR_BATCH_MAX_WAIT_MS", "100".to_owned())],
    )
}

/// Fires one beacon of `params`; it must be taken.
fn fire(svc: &Service, params: &[(&str, &str)]) {
    let r = get(svc.ingest, &beacon(params)).unwrap();
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
}

#[test]
fn reports_page_through_every_row_once_and_bound_their_range() {
    let dir = tempfile::tempdir().unwrap();
    let svc = start(dir.path());
    let ts = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    // One product impression of `code`: one row of the report.
    let impression = |code: &str| {
        fire(
            &svc,
            &[
                ("adId", "rm1.camp-pages.x"),
                ("interactionType", "productImpression"),
                ("timestamp", &ts),
                ("sessionId", "s-pages"),
                ("catalogId", "cat-pages"),
                ("productCode", code),
            ],
        );
    };
    for i in 0..ROWS {
        impression(&format!("p{i:05}"));
    }
    let token = demo_token(svc.api);
    let base = "/v1/reports/products?campaignId=camp-pages";
    // The whole CSV download (streamed): a header and one line per row.
    let t = Instant::now();
    let csv = loop {
        let r = report(svc.api, &token, &format!("{base}&format=csv"));
        assert_eq!(r.status, 200);
        let text = String::from_utf8(r.body).unwrap();
        if text.lines().count() == ROWS + 1 {
            assert!(
                r.headers
                    .iter()
                    .all(|(k, _)| !k.eq_ignore_ascii_case("content-length")),
                "a streamed download has no length up front"
            );
            break text;
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "{} rows so far",
            text.lines().count()
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let column = csv
        .lines()
        .next()
        .and_then(|h| h.split(',').position(|c| c == "productCode"))
        .expect("a productCode column");
    let want: Vec<String> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(column).unwrap().to_owned())
        .collect();
    for size in [None, Some(700)] {
        let mut codes = Vec::new();
        let mut token_q = String::new();
        let mut pages = 0;
        loop {
            let size_q = size.map(|s| format!("&pageSize={s}")).unwrap_or_default();
            let r = report(svc.api, &token, &format!("{base}{size_q}{token_q}"));
            assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
            let v: Value = r.json();
            let rows = v["rows"].as_array().unwrap();
            assert!(rows.len() <= size.unwrap_or(1000));
            codes.extend(
                rows.iter()
                    .map(|r| r["productCode"].as_str().unwrap().to_owned()),
            );
            pages += 1;
            match v["nextPageToken"].as_str() {
                Some(t) => token_q = format!("&pageToken={t}"),
                None => break,
            }
        }
        assert_eq!(codes, want, "pages of {size:?}: every row once, in order");
        assert_eq!(pages, ROWS.div_ceil(size.unwrap_or(1000)));
    }
    // Pages by key: a row counted between two pages does not shift the next one
    // (an offset would repeat the first page's last row).
    let first = report(svc.api, &token, &format!("{base}&pageSize=700")).json();
    let next = first["nextPageToken"].as_str().unwrap().to_owned();
    impression("p00001a");
    let t = Instant::now();
    while report(svc.api, &token, &format!("{base}&format=csv"))
        .body
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .count()
        < ROWS + 2
    {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "the new row is counted"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let second = report(
        svc.api,
        &token,
        &format!("{base}&pageSize=700&pageToken={next}"),
    )
    .json();
    assert_eq!(
        second["rows"][0]["productCode"], want[700],
        "the second page starts where it did"
    );
    // Bounds, each a 400 naming its parameter.
    let first = report(svc.api, &token, &format!("{base}&pageSize=10")).json();
    let next = first["nextPageToken"].as_str().unwrap();
    for (q, field) in [
        ("&from=2020-01-01&to=2026-01-01".to_owned(), "from"),
        ("&pageSize=10001".to_owned(), "pageSize"),
        ("&pageSize=0".to_owned(), "pageSize"),
        (format!("&catalogId=other&pageToken={next}"), "pageToken"),
        ("&pageToken=garbage".to_owned(), "pageToken"),
    ] {
        let r = report(svc.api, &token, &format!("{base}{q}"));
        assert_eq!(r.status, 400, "{q}: {}", String::from_utf8_lossy(&r.body));
        let v = r.json();
        assert_eq!(
            v["details"][1]["fieldViolations"][0]["field"], field,
            "{q}: {v}"
        );
    }
}

/// The carts report pages by key too (`cart_lines`): 250 shoppers' lines read in
/// pages of 100 are every line once, in the order of the whole CSV download; a line
/// added between two pages before the next page's first does not shift it; a carts
/// token on another report, or another report's on carts, is a 400.
#[test]
fn the_carts_report_pages_by_key() {
    const LINES: usize = 250;
    let dir = tempfile::tempdir().unwrap();
    let svc = start(dir.path());
    let ts = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let cart = |shopper: &str| {
        fire(
            &svc,
            &[
                ("adId", "rm1.camp-carts.x"),
                ("interactionType", "cart"),
                ("timestamp", &ts),
                ("sessionId", shopper),
                ("catalogId", "cat-carts"),
                ("productCode", "p1"),
                ("units", "2"),
            ],
        );
    };
    for i in 0..LINES {
        cart(&format!("s{i:04}"));
    }
    let token = demo_token(svc.api);
    let base = "/v1/reports/carts?campaignId=camp-carts";
    let shoppers = |lines: usize| {
        let t = Instant::now();
        loop {
            let r = report(svc.api, &token, &format!("{base}&format=csv"));
            assert_eq!(r.status, 200);
            let text = String::from_utf8(r.body).unwrap();
            if text.lines().count() == lines + 1 {
                let column = text
                    .lines()
                    .next()
                    .and_then(|h| h.split(',').position(|c| c == "trackingId"))
                    .expect("a trackingId column");
                return text
                    .lines()
                    .skip(1)
                    .map(|l| l.split(',').nth(column).unwrap().to_owned())
                    .collect::<Vec<String>>();
            }
            assert!(t.elapsed() < Duration::from_secs(60), "{text}");
            std::thread::sleep(Duration::from_millis(200));
        }
    };
    let want = shoppers(LINES);
    let mut got = Vec::new();
    let mut token_q = String::new();
    let mut tokens = Vec::new();
    loop {
        let r = report(svc.api, &token, &format!("{base}&pageSize=100{token_q}"));
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        let v: Value = r.json();
        let rows = v["rows"].as_array().unwrap();
        assert!(rows.len() <= 100);
        got.extend(
            rows.iter()
                .map(|r| r["trackingId"].as_str().unwrap().to_owned()),
        );
        match v["nextPageToken"].as_str() {
            Some(t) => {
                tokens.push(t.to_owned());
                token_q = format!("&pageToken={t}");
            }
            None => break,
        }
    }
    assert_eq!(got, want, "every line once, in order");
    assert_eq!(tokens.len(), 2, "three pages");
    // A line before the second page's first (s0000a sorts after s0000) does not
    // shift it.
    cart("s0000a");
    shoppers(LINES + 1);
    let second = report(
        svc.api,
        &token,
        &format!("{base}&pageSize=100&pageToken={}", tokens[0]),
    )
    .json();
    assert_eq!(second["rows"][0]["trackingId"], want[100].as_str());
    // Tokens are their report's.
    let products = report(
        svc.api,
        &token,
        "/v1/reports/products?campaignId=camp-carts&pageSize=1",
    );
    assert_eq!(products.status, 200);
    for path in [
        format!(
            "/v1/reports/products?campaignId=camp-carts&pageToken={}",
            tokens[0]
        ),
        format!(
            "{base}&catalogId=other&pageSize=100&pageToken={}",
            tokens[0]
        ),
        format!("{base}&pageToken=djEuMTAuMQ"),
    ] {
        let r = report(svc.api, &token, &path);
        assert_eq!(
            r.status,
            400,
            "{path}: {}",
            String::from_utf8_lossy(&r.body)
        );
        assert_eq!(
            r.json()["details"][1]["fieldViolations"][0]["field"],
            "pageToken",
            "{path}"
        );
    }
}
