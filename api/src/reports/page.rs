//! Pages of report rows: `pageSize` (1 to [`MAX_PAGE_SIZE`], default
//! [`DEFAULT_PAGE_SIZE`]) and an opaque `pageToken` from the previous answer's
//! `nextPageToken` (JSON; absent on the last page).
//!
//! The token is base64url of `v1.<offset>.<fingerprint>`: the offset of the page's
//! first row and a hash of the request it continues (path, filter, format; the
//! namespace is the caller's, so a token carries nothing of another's). A token
//! used with another request, or one that does not decode, is a 400 naming
//! `pageToken`. Rows come from the store in a stable order, so pages of an unchanged
//! report are disjoint and complete; rows written between two pages may shift them
//! (ask again from the first page for a consistent copy). CSV answers every row of
//! the (date-bounded) range unless `pageSize` is given.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
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
    /// The first row.
    pub offset: usize,
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
        let offset = match token {
            None | Some("") => 0,
            Some(t) => {
                let raw = URL_SAFE_NO_PAD.decode(t).map_err(|_| bad_token())?;
                let text = String::from_utf8(raw).map_err(|_| bad_token())?;
                let mut parts = text.split('.');
                let (Some("v1"), Some(o), Some(h), None) =
                    (parts.next(), parts.next(), parts.next(), parts.next())
                else {
                    return Err(bad_token());
                };
                if h.parse::<u64>().ok() != Some(fp) {
                    return Err(bad_token());
                }
                o.parse().map_err(|_| bad_token())?
            }
        };
        Ok(PageRequest {
            size,
            offset,
            fingerprint: fp,
        })
    }

    /// The requested page of `rows`, and the token of the next one when there are
    /// more rows.
    pub fn apply<T>(&self, mut rows: Vec<T>) -> (Vec<T>, Option<String>) {
        let start = self.offset.min(rows.len());
        rows.drain(..start);
        let Some(size) = self.size else {
            return (rows, None);
        };
        if rows.len() <= size {
            return (rows, None);
        }
        rows.truncate(size);
        let next = format!("v1.{}.{}", self.offset + size, self.fingerprint);
        (rows, Some(URL_SAFE_NO_PAD.encode(next)))
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
        let (_, next) = req(Some("2"), None).unwrap().apply(vec![1, 2, 3]);
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

    proptest! {
        #[test]
        fn pages_cover_every_row_once(n in 0usize..300, size in 1usize..50) {
            let rows: Vec<usize> = (0..n).collect();
            let s = size.to_string();
            let mut seen = Vec::new();
            let mut token: Option<String> = None;
            loop {
                let p = req(Some(&s), token.as_deref()).unwrap();
                let (page, next) = p.apply(rows.clone());
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
