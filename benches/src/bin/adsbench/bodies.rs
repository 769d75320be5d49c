//! What `adsbench run` sends and how it checks the answers.
//!
//! Requests: a pool of varied `POST /v1/ads/generate` bodies built before the clock
//! starts (placement `category` 55 % / `search` 45 %; 0, 1 or 2 filter groups
//! (30/45/25 %) of 1-3 `category:` paths at depth 1-3 of the generated tree; filter
//! mode absent, `OrAnd` or `AndOr`; `maxNumberOfAds` 1-20 or absent), each with a
//! tracking id spliced in per request: a random `customerId` (half the requests) or
//! a `sessionId` unique to the run and the request. The baselines send `GET /healthz`
//! (no auth) or `GET /v1/segments/demo-segment` (bearer check plus one state read).
//!
//! Answers: a complete HTTP/1.1 response (`rm_benches::http`) with status 200; for
//! generate also `content-type: application/json` and a body that decodes as
//! `{ads: [...], banners: [...]}`, whose ads, banners and video `adm`s are counted.

use serde::Deserialize;

use super::gen::{category_path, LEAVES};
use super::rng::Rng;

/// Which route a run loads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Route {
    /// `POST /v1/ads/generate`.
    Generate,
    /// `GET /healthz`: the server's floor (no auth, no state).
    Healthz,
    /// `GET /v1/segments/demo-segment`: a bearer check and one state read.
    Segment,
}

/// One request body with a slot for its tracking id: `head`, the id, `tail`.
#[derive(Debug, Clone)]
pub struct Template {
    head: String,
    tail: String,
    customer: bool,
}

/// Builds `n` varied templates for `catalog`.
pub fn pool(n: usize, seed: u64, run_id: u64, catalog: &str) -> Vec<Template> {
    let mut rng = Rng::new(seed);
    (0..n.max(1))
        .map(|_| template(&mut rng, run_id, catalog))
        .collect()
}

fn template(rng: &mut Rng, run_id: u64, catalog: &str) -> Template {
    let customer = rng.chance(0.5);
    let head = if customer {
        r#"{"customerId":"c-"#.to_owned()
    } else {
        format!(r#"{{"sessionId":"s-{run_id:x}-"#)
    };
    let placement = if rng.chance(0.55) {
        "category"
    } else {
        "search"
    };
    let mut tail = format!(r#"","placement":"{placement}","catalogId":"{catalog}""#);
    let groups = match rng.below(100) {
        0..30 => 0,
        30..75 => 1,
        _ => 2,
    };
    if groups > 0 {
        let g: Vec<String> = (0..groups)
            .map(|_| {
                let paths: Vec<String> = (0..1 + rng.below(3))
                    .map(|_| {
                        let depth = 1 + rng.below(3) as u32;
                        format!(r#""category:{}""#, category_path(rng.below(LEAVES), depth))
                    })
                    .collect();
                format!("[{}]", paths.join(","))
            })
            .collect();
        tail.push_str(&format!(r#","productFilters":[{}]"#, g.join(",")));
    }
    match rng.below(3) {
        0 => {}
        1 => tail.push_str(r#","options":{"filterMode":"OrAnd"}"#),
        _ => tail.push_str(r#","options":{"filterMode":"AndOr"}"#),
    }
    if rng.below(5) > 0 {
        tail.push_str(&format!(r#","maxNumberOfAds":{}"#, 1 + rng.below(20)));
    }
    tail.push('}');
    Template {
        head,
        tail,
        customer,
    }
}

impl Template {
    /// The body for request number `seq`.
    pub fn body(&self, seq: u64, out: &mut Vec<u8>) {
        out.extend_from_slice(self.head.as_bytes());
        let id = if self.customer {
            // Customers come back: 100k distinct ones.
            seq.wrapping_mul(0x9E37_79B9_7F4A_7C15) % 100_000
        } else {
            seq
        };
        out.extend_from_slice(id.to_string().as_bytes());
        out.extend_from_slice(self.tail.as_bytes());
    }
}

/// Writes the whole HTTP request for `route` into `out` (cleared first).
pub fn request(
    route: Route,
    host: &str,
    token: &str,
    t: &Template,
    seq: u64,
    body: &mut Vec<u8>,
    out: &mut Vec<u8>,
) {
    out.clear();
    match route {
        Route::Generate => {
            body.clear();
            t.body(seq, body);
            out.extend_from_slice(
                format!(
                    "POST /v1/ads/generate HTTP/1.1\r\nhost: {host}\r\nauthorization: Bearer {token}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                    body.len()
                )
                .as_bytes(),
            );
            out.extend_from_slice(body);
        }
        Route::Healthz => {
            out.extend_from_slice(format!("GET /healthz HTTP/1.1\r\nhost: {host}\r\n\r\n").as_bytes())
        }
        Route::Segment => out.extend_from_slice(
            format!(
                "GET /v1/segments/demo-segment HTTP/1.1\r\nhost: {host}\r\nauthorization: Bearer {token}\r\n\r\n"
            )
            .as_bytes(),
        ),
    }
}

/// What a generate answer held.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counted {
    /// Product ads.
    pub ads: u64,
    /// Banners.
    pub banners: u64,
    /// Banners with a VAST `adm`.
    pub video: u64,
}

#[derive(Deserialize)]
struct Banner {
    #[serde(default)]
    adm: Option<serde::de::IgnoredAny>,
}

#[derive(Deserialize)]
struct Answer {
    ads: Vec<serde::de::IgnoredAny>,
    banners: Vec<Banner>,
}

/// The body of the complete response of `len` bytes at the front of `buf`, de-chunked
/// when needed; `None` when the head or a chunk is malformed.
pub fn body_of(buf: &[u8], len: usize) -> Option<(&[u8], Vec<u8>)> {
    let head_end = buf.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&buf[..head_end])
        .ok()?
        .to_ascii_lowercase();
    let raw = &buf[head_end + 4..len];
    if !head.contains("transfer-encoding: chunked") {
        return Some((&buf[..head_end], raw.to_vec()));
    }
    let mut out = Vec::with_capacity(raw.len());
    let mut at = 0;
    loop {
        let eol = at + raw.get(at..)?.windows(2).position(|w| w == b"\r\n")?;
        let size_text = std::str::from_utf8(&raw[at..eol]).ok()?;
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        if size == 0 {
            return Some((&buf[..head_end], out));
        }
        out.extend_from_slice(raw.get(eol + 2..eol + 2 + size)?);
        at = eol + 2 + size + 2;
    }
}

/// Checks a generate answer (head and body); what it held, or why it is wrong.
pub fn check_generate(head: &[u8], body: &[u8]) -> Result<Counted, String> {
    let head = String::from_utf8_lossy(head).to_ascii_lowercase();
    if !head.contains("content-type: application/json") {
        return Err("not application/json".into());
    }
    let a: Answer = serde_json::from_slice(body).map_err(|e| format!("body: {e}"))?;
    Ok(Counted {
        ads: a.ads.len() as u64,
        banners: a.banners.len() as u64,
        video: a.banners.iter().filter(|b| b.adm.is_some()).count() as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_valid_and_varied() {
        let p = pool(2000, 1, 0xabc, "bench-catalog");
        let (mut filtered, mut two, mut and_or, mut customers) = (0, 0, 0, 0);
        let mut buf = Vec::new();
        for (i, t) in p.iter().enumerate() {
            buf.clear();
            t.body(i as u64, &mut buf);
            let v: serde_json::Value = serde_json::from_slice(&buf).expect("json");
            assert_eq!(v["catalogId"], "bench-catalog");
            let groups = v["productFilters"].as_array().map_or(0, Vec::len);
            filtered += usize::from(groups > 0);
            two += usize::from(groups == 2);
            and_or += usize::from(v["options"]["filterMode"] == "AndOr");
            customers += usize::from(v.get("customerId").is_some());
            if let Some(n) = v["maxNumberOfAds"].as_u64() {
                assert!((1..=20).contains(&n));
            }
            for g in v["productFilters"].as_array().into_iter().flatten() {
                for f in g.as_array().expect("group") {
                    assert!(f.as_str().expect("str").starts_with("category:d"));
                }
            }
        }
        assert!((1300..1500).contains(&filtered), "{filtered}");
        assert!(two > 400 && and_or > 550 && customers > 900);
    }

    #[test]
    fn answers_are_checked() {
        let body = br#"{"ads":[{"partnerAdId":"x"}],"banners":[{"adm":"<VAST/>"},{}]}"#;
        let resp = [
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ".as_slice(),
            body.len().to_string().as_bytes(),
            b"\r\n\r\n",
            body,
        ]
        .concat();
        let (head, b) = body_of(&resp, resp.len()).expect("body");
        assert_eq!(
            check_generate(head, &b),
            Ok(Counted {
                ads: 1,
                banners: 2,
                video: 1
            })
        );
        let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n5\r\n{\"ads\r\n12\r\n\":[],\"banners\":[]}\r\n0\r\n\r\n";
        let (head, b) = body_of(chunked, chunked.len()).expect("chunked");
        assert_eq!(check_generate(head, &b), Ok(Counted::default()));
        assert!(check_generate(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain", b"{}").is_err());
        assert!(check_generate(b"content-type: application/json", b"{\"ads\":[]}").is_err());
    }
}
