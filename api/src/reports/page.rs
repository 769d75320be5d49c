//! Pages of report rows: `pageSize` (1 to [`MAX_PAGE_SIZE`], default
//! [`DEFAULT_PAGE_SIZE`]) and an opaque `pageToken` from the previous answer's
//! `nextPageToken` (JSON; absent on the last page).
//!
//! The reports read from the rollups (products, ads, the video funnel) page **by
//! key**: the token is base64url of `v2.<fingerprint>.<skip>.<place>`, the place
//! (campaign, creative, catalog, product, as JSON) of the page's first row and how
//! many of that place's rows earlier pages gave; the store reads only the page's
//! places (`rm_store::model::tallies::page`), so a page costs its rows, never the
//! report again, and rows written between two pages never shift them (a place
//! counted meanwhile shows with its new counts if it is after the key). The carts
//! report pages by key too: `v3.<fingerprint>.<place>`, the place of the page's
//! first line (campaign and day of its latest event, then its key, as JSON:
//! `rm_store::model::carts::lines`). The others (smaller answers, or a drill-down's
//! bounded range) page by offset: base64url of
//! `v1.<offset>.<fingerprint>`. The fingerprint is a hash of the request a token
//! continues (path, filter, format, cut; the namespace is the caller's, so a token
//! carries nothing of another's). A token used with another request, one of the other
//! kind, or one that does not decode, is a 400 naming `pageToken`. CSV answers every
//! row of the (date-bounded) range unless `pageSize` is given.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use rm_store::model::carts::lines::LinePlace;
use rm_store::model::tallies::page::{PageCursor, PlaceKey};
use rm_store::sums::PageAt;
use rm_store::ReportFilter;

use super::query::Format;
use crate::error::ApiError;

/// Most rows in one page.
pub const MAX_PAGE_SIZE: usize = 10_000;
/// Rows in a page when `pageSize` is left out (JSON).
pub const DEFAULT_PAGE_SIZE: usize = 1_000;

/// Which rows of a report to answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageRequest {
    /// Rows per page (`None`: all, for a CSV download without `pageSize`).
    pub size: Option<usize>,
    /// The first row (a page by offset).
    pub offset: usize,
    /// Where the page starts (a page by key: `None` before the first).
    pub cursor: Option<PageCursor>,
    /// Where the page starts (a page of the carts report by key: `None` before the
    /// first).
    pub line: Option<LinePlace>,
    fingerprint: u64,
}

fn fingerprint(path: &str, f: &ReportFilter, cut: &str, format: Format) -> u64 {
    let text = format!(
        "{path}|{:?}|{:?}|{:?}|{:?}|{:?}|{cut}|{:?}",
        f.campaign_id, f.ad_id, f.catalog_id, f.from_day, f.to_day, format
    );
    xxhash_rust::xxh3::xxh3_64(text.as_bytes())
}

fn bad_token() -> ApiError {
    ApiError::invalid(
        "pageToken",
        "not a token this report gave (use nextPageToken with the same query)",
    )
}

impl PageRequest {
    /// Reads `pageSize` and `pageToken` for the request at `path` with filter `f`,
    /// its rows cut as `cut` says (time zone and granularity).
    pub fn parse(
        path: &str,
        f: &ReportFilter,
        cut: &str,
        format: Format,
        size: Option<&str>,
        token: Option<&str>,
    ) -> Result<PageRequest, ApiError> {
        let size = match size {
            Some(s) => Some(
                s.parse::<usize>()
                    .ok()
                    .filter(|n| (1..=MAX_PAGE_SIZE).contains(n))
                    .ok_or_else(|| {
                        ApiError::invalid(
                            "pageSize",
                            format!("'{s}' is not a number from 1 to {MAX_PAGE_SIZE}"),
                        )
                    })?,
            ),
            None if format == Format::Json => Some(DEFAULT_PAGE_SIZE),
            None => None,
        };
        let fp = fingerprint(path, f, cut, format);
        let mut page = PageRequest {
            size,
            offset: 0,
            cursor: None,
            line: None,
            fingerprint: fp,
        };
        let Some(t) = token.filter(|t| !t.is_empty()) else {
            return Ok(page);
        };
        let raw = URL_SAFE_NO_PAD.decode(t).map_err(|_| bad_token())?;
        let text = String::from_utf8(raw).map_err(|_| bad_token())?;
        if let Some(rest) = text.strip_prefix("v3.") {
            let (h, place) = rest.split_once('.').ok_or_else(bad_token)?;
            if h.parse::<u64>().ok() != Some(fp) {
                return Err(bad_token());
            }
            page.line = Some(serde_json::from_str(place).map_err(|_| bad_token())?);
            return Ok(page);
        }
        if let Some(rest) = text.strip_prefix("v2.") {
            let mut parts = rest.splitn(3, '.');
            let (Some(h), Some(skip), Some(place)) = (parts.next(), parts.next(), parts.next())
            else {
                return Err(bad_token());
            };
            if h.parse::<u64>().ok() != Some(fp) {
                return Err(bad_token());
            }
            page.cursor = Some(PageCursor {
                place: serde_json::from_str::<PlaceKey>(place).map_err(|_| bad_token())?,
                skip: skip.parse().map_err(|_| bad_token())?,
            });
            return Ok(page);
        }
        let mut parts = text.split('.');
        let (Some("v1"), Some(o), Some(h), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(bad_token());
        };
        if h.parse::<u64>().ok() != Some(fp) {
            return Err(bad_token());
        }
        page.offset = o.parse().map_err(|_| bad_token())?;
        Ok(page)
    }

    /// The page of a report paged by key (`None`: the whole report, a CSV download
    /// without `pageSize`); a token by offset is not one of its tokens.
    pub fn at(&self) -> Result<Option<PageAt<'_>>, ApiError> {
        if self.offset > 0 || self.line.is_some() {
            return Err(bad_token());
        }
        const FIRST: &PageCursor = &PageCursor {
            place: PlaceKey {
                campaign_id: String::new(),
                creative: String::new(),
                catalog_id: String::new(),
                product_code: String::new(),
            },
            skip: 0,
        };
        Ok(self.size.map(|size| PageAt {
            cursor: self.cursor.as_ref().unwrap_or(FIRST),
            size,
        }))
    }

    /// The page of the carts report (paged by key): where it starts (`None`: the
    /// first) and its size (`None`: every row); a token of another kind is not one
    /// of its tokens.
    pub fn line_at(&self) -> Result<(Option<&LinePlace>, Option<usize>), ApiError> {
        if self.offset > 0 || self.cursor.is_some() {
            return Err(bad_token());
        }
        Ok((self.line.as_ref(), self.size))
    }

    /// The token of the carts report's page at `next`.
    pub fn line_token(&self, next: &LinePlace) -> String {
        let place = serde_json::to_string(next).unwrap_or_default();
        URL_SAFE_NO_PAD.encode(format!("v3.{}.{place}", self.fingerprint))
    }

    /// The token of the page at `next`.
    pub fn token_at(&self, next: &PageCursor) -> String {
        let place = serde_json::to_string(&next.place).unwrap_or_default();
        URL_SAFE_NO_PAD.encode(format!("v2.{}.{}.{place}", self.fingerprint, next.skip))
    }

    /// The requested page of `rows`, and the token of the next one when there are
    /// more rows.
    pub fn apply<T>(&self, mut rows: Vec<T>) -> Result<(Vec<T>, Option<String>), ApiError> {
        if self.cursor.is_some() || self.line.is_some() {
            return Err(bad_token());
        }
        let start = self.offset.min(rows.len());
        rows.drain(..start);
        let Some(size) = self.size else {
            return Ok((rows, None));
        };
        if rows.len() <= size {
            return Ok((rows, None));
        }
        rows.truncate(size);
        let next = format!("v1.{}.{}", self.offset + size, self.fingerprint);
        Ok((rows, Some(URL_SAFE_NO_PAD.encode(next))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn req(size: Option<&str>, token: Option<&str>) -> Result<PageRequest, ApiError> {
        PageRequest::parse(
            "/p",
            &ReportFilter::default(),
            "",
            Format::Json,
            size,
            token,
        )
    }

    #[test]
    fn sizes_are_bounded_and_tokens_bound_to_their_query() {
        assert!(req(Some("0"), None).is_err());
        assert!(req(Some("10001"), None).is_err());
        assert!(req(Some("x"), None).is_err());
        assert_eq!(req(None, None).unwrap().size, Some(DEFAULT_PAGE_SIZE));
        let csv = PageRequest::parse("/p", &ReportFilter::default(), "", Format::Csv, None, None);
        assert_eq!(csv.unwrap().size, None, "a CSV download is whole");
        let (_, next) = req(Some("2"), None).unwrap().apply(vec![1, 2, 3]).unwrap();
        let next = next.expect("more rows");
        assert_eq!(req(Some("2"), Some(&next)).unwrap().offset, 2);
        let other = ReportFilter {
            campaign_id: Some("c".into()),
            ..ReportFilter::default()
        };
        let e = PageRequest::parse("/p", &other, "", Format::Json, Some("2"), Some(&next));
        assert!(e.is_err(), "a token of another query");
        let e = PageRequest::parse(
            "/p",
            &ReportFilter::default(),
            "Asia/Kolkata|day",
            Format::Json,
            Some("2"),
            Some(&next),
        );
        assert!(e.is_err(), "a token of another time zone");
        assert!(req(None, Some("!!")).is_err());
        assert!(req(None, Some(&URL_SAFE_NO_PAD.encode("v2.1.1"))).is_err());
    }

    #[test]
    fn key_tokens_round_trip_and_are_not_offsets() {
        let p = req(Some("2"), None).unwrap();
        let at = p.at().unwrap().expect("a page");
        assert_eq!(at.cursor, &PageCursor::default());
        assert_eq!(at.size, 2);
        let next = PageCursor {
            place: PlaceKey {
                campaign_id: "c.1".into(),
                creative: "a\"b.".into(),
                ..PlaceKey::default()
            },
            skip: 3,
        };
        let t = p.token_at(&next);
        let back = req(Some("2"), Some(&t)).unwrap();
        assert_eq!(back.cursor.as_ref(), Some(&next));
        assert_eq!(back.at().unwrap().expect("a page").cursor, &next);
        assert!(
            back.apply(vec![1]).is_err(),
            "a key token on a report by offset"
        );
        let (_, offset) = req(Some("1"), None).unwrap().apply(vec![1, 2]).unwrap();
        let by_offset = req(Some("1"), offset.as_deref()).unwrap();
        assert!(
            by_offset.at().is_err(),
            "an offset token on a report by key"
        );
        let other = ReportFilter {
            campaign_id: Some("c".into()),
            ..ReportFilter::default()
        };
        let e = PageRequest::parse("/p", &other, "", Format::Json, Some("2"), Some(&t));
        assert!(e.is_err(), "a key token of another query");
        let forged = URL_SAFE_NO_PAD.encode(format!("v2.{}.1.not json", p.fingerprint));
        assert!(req(Some("2"), Some(&forged)).is_err());
        let csv = PageRequest::parse("/p", &ReportFilter::default(), "", Format::Csv, None, None);
        assert!(
            csv.unwrap().at().unwrap().is_none(),
            "a CSV download is whole"
        );
    }

    proptest! {
        #[test]
        fn pages_cover_every_row_once(n in 0usize..300, size in 1usize..50) {
            let rows: Vec<usize> = (0..n).collect();
            let s = size.to_string();
            let mut seen = Vec::new();
            let mut token: Option<String> = None;
            loop {
                let p = req(Some(&s), token.as_deref()).unwrap();
                let (page, next) = p.apply(rows.clone()).unwrap();
                prop_assert!(page.len() <= size);
                seen.extend(page);
                match next {
                    Some(t) => token = Some(t),
                    None => break,
                }
            }
            prop_assert_eq!(seen, rows);
        }
    }
}
