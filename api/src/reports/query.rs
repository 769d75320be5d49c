//! A report request's query string: the filter, the format, the page, and the date
//! range every report is bounded by.
//!
//! **Dates.** `from` and `to` are inclusive UTC days. A report covers at most
//! [`MAX_RANGE_DAYS`] days: a longer range is a 400 naming `from`. Without `from`,
//! the range starts [`MAX_RANGE_DAYS`] - 1 days before `to` (or before tomorrow,
//! without `to`: events may carry a timestamp slightly ahead); without `to`, it ends
//! [`MAX_RANGE_DAYS`] - 1 days after `from` (capped at tomorrow). So no request reads
//! more than that span of rows, whatever it asks.
//!
//! **Time zones and periods** (products, ads, funnel, campaigns). `timeZone` is an
//! IANA name (default `UTC`): `from` and `to` are then local dates of that zone, and
//! rows are cut by `granularity` (`hour`, `day` the default, `week`, `month`,
//! `summary`) in it (`rm_store::model::periods`); every count they read is kept per
//! UTC day and quarter hour. The other reports are by UTC day. Hourly rows cover at most [`MAX_HOURLY_DAYS`]
//! days. A drill-down by served ad (`adId`: products, ads and the funnel) reads the
//! stored facts: UTC days, at most [`MAX_DRILL_DOWN_DAYS`] (also its default range).

use http::{header, HeaderMap};
use rm_schemas::percent::{self, Rules};
use rm_store::model::parse_day;
use rm_store::model::periods::{self, Granularity, Periods};
use rm_store::ReportFilter;

use super::page::PageRequest;
use super::ReportKind;
use crate::error::ApiError;

/// Most days one report covers.
pub const MAX_RANGE_DAYS: i32 = 400;
/// Most days of an hourly report.
pub const MAX_HOURLY_DAYS: i32 = 31;
/// Most days of a drill-down by served ad id (read from the stored facts).
pub const MAX_DRILL_DOWN_DAYS: i32 = 31;

/// JSON or CSV.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `{"rows": [...], "nextPageToken": ...}`.
    Json,
    /// RFC 4180 with a header row.
    Csv,
}

/// A parsed report query.
#[derive(Debug)]
pub struct ReportQuery {
    /// Which rows.
    pub filter: ReportFilter,
    /// The answer's format.
    pub format: Format,
    /// Which page.
    pub page: PageRequest,
    /// The periods rows are cut in (products, ads, campaigns).
    pub periods: Periods,
}

/// The query parameters a report reads (documented in the OpenAPI document).
pub const PARAMS: &str = "campaignId, adId, catalogId, from, to, timeZone, granularity, namespaceId, format, pageSize, pageToken";

/// Decodes a report's query string (leniently, as `serde_urlencoded` would): the one
/// decoding of it, whose pairs [`namespace_of`] and [`from_pairs`] read.
pub fn decode(query: &str) -> Result<Vec<(String, String)>, ApiError> {
    percent::decode_pairs(query, Rules::LENIENT_FORM)
        .map_err(|e| ApiError::invalid("query", format!("not a valid query string: {e}")))
}

/// The `namespaceId` the decoded query names, if any.
pub fn namespace_of(pairs: &[(String, String)]) -> Option<&str> {
    pairs
        .iter()
        .find(|(k, _)| k == "namespaceId")
        .map(|(_, v)| v.as_str())
}

/// Parses `query` for report `kind`, `today` being the UTC day now.
pub fn parse(
    kind: ReportKind,
    query: &str,
    headers: &HeaderMap,
    today: i32,
) -> Result<ReportQuery, ApiError> {
    from_pairs(kind, decode(query)?, headers, today)
}

/// The query of report `kind` from its decoded pairs ([`decode`]).
pub fn from_pairs(
    kind: ReportKind,
    pairs: Vec<(String, String)>,
    headers: &HeaderMap,
    today: i32,
) -> Result<ReportQuery, ApiError> {
    let mut f = ReportFilter::default();
    let wants_csv = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("text/csv"));
    let mut format = if wants_csv { Format::Csv } else { Format::Json };
    let (mut size, mut token) = (None, None);
    let (mut tz, mut granularity) = (chrono_tz::Tz::UTC, Granularity::Day);
    for (k, v) in pairs {
        let day = |v: &str| {
            parse_day(v)
                .ok_or_else(|| ApiError::invalid(&k, format!("'{v}' is not a date YYYY-MM-DD")))
        };
        match k.as_str() {
            "campaignId" => f.campaign_id = Some(v),
            // Read by `namespace_of`, before the filter (tenancy comes first).
            "namespaceId" => {}
            "adId" => f.ad_id = Some(v),
            "catalogId" => f.catalog_id = Some(v),
            "from" => f.from_day = Some(day(&v)?),
            "to" => f.to_day = Some(day(&v)?),
            "timeZone" => {
                tz = periods::zone(&v).ok_or_else(|| {
                    ApiError::invalid(
                        "timeZone",
                        format!("'{v}' is not an IANA time zone (like UTC or Europe/Paris)"),
                    )
                })?
            }
            "granularity" => {
                granularity = Granularity::parse(&v).ok_or_else(|| {
                    ApiError::invalid(
                        "granularity",
                        format!("'{v}' is not hour, day, week, month or summary"),
                    )
                })?
            }
            "pageSize" => size = Some(v),
            "pageToken" => token = Some(v),
            "format" => {
                format = match v.as_str() {
                    "json" => Format::Json,
                    "csv" => Format::Csv,
                    other => {
                        return Err(ApiError::invalid(
                            "format",
                            format!("'{other}' is not json or csv"),
                        ))
                    }
                }
            }
            other => {
                return Err(ApiError::invalid(
                    other,
                    format!("unknown parameter; expected {PARAMS}"),
                ))
            }
        }
    }
    // A drill-down by served ad reads the facts: its default range is its bound.
    let drill_down = kind.drills_down() && f.ad_id.is_some();
    let span = if drill_down {
        MAX_DRILL_DOWN_DAYS
    } else {
        MAX_RANGE_DAYS
    };
    bound_range(&mut f, today, span)?;
    bound_periods(kind, &f, tz, granularity)?;
    let (from, to) = (f.from_day.unwrap_or(today), f.to_day.unwrap_or(today));
    let periods = Periods::new(tz, granularity, from, to);
    let cut = format!("{}|{}", tz.name(), granularity.as_str());
    let page = PageRequest::parse(
        kind.path(),
        &f,
        &cut,
        format,
        size.as_deref(),
        token.as_deref(),
    )?;
    Ok(ReportQuery {
        filter: f,
        format,
        page,
        periods,
    })
}

/// Checks that report `kind` can be cut in `tz` and `granularity` (module header).
fn bound_periods(
    kind: ReportKind,
    f: &ReportFilter,
    tz: chrono_tz::Tz,
    granularity: Granularity,
) -> Result<(), ApiError> {
    let utc_days = tz == chrono_tz::Tz::UTC && granularity == Granularity::Day;
    let days = f.to_day.zip(f.from_day).map_or(1, |(t, fr)| t - fr + 1);
    let field = if tz == chrono_tz::Tz::UTC {
        "granularity"
    } else {
        "timeZone"
    };
    match kind {
        _ if kind.drills_down() && f.ad_id.is_some() => {
            if !utc_days {
                return Err(ApiError::invalid(
                    field,
                    "a drill-down by adId reads the stored facts by UTC day",
                ));
            }
            if days > MAX_DRILL_DOWN_DAYS {
                return Err(ApiError::invalid(
                    "from",
                    format!("a drill-down by adId covers at most {MAX_DRILL_DOWN_DAYS} days (this range spans {days})"),
                ));
            }
        }
        ReportKind::Products
        | ReportKind::Ads
        | ReportKind::Campaigns
        | ReportKind::VideoFunnel => {}
        ReportKind::Carts | ReportKind::CartCampaigns | ReportKind::Sales => {
            if !utc_days {
                return Err(ApiError::invalid(
                    field,
                    "this report is by UTC day (timeZone and granularity apply to the products, \
                     ads, video funnel and campaigns reports)",
                ));
            }
        }
    }
    if granularity == Granularity::Hour && days > MAX_HOURLY_DAYS {
        return Err(ApiError::invalid(
            "from",
            format!("hourly rows cover at most {MAX_HOURLY_DAYS} days (this range spans {days})"),
        ));
    }
    Ok(())
}

/// Fills in and checks the date range (module header): a range left open spans
/// `default_days`.
fn bound_range(f: &mut ReportFilter, today: i32, default_days: i32) -> Result<(), ApiError> {
    let span = default_days - 1;
    let latest = today + 1;
    let (from, to) = match (f.from_day, f.to_day) {
        (Some(a), Some(b)) => (a, b),
        (Some(a), None) => (a, (a + span).min(latest).max(a)),
        (None, Some(b)) => (b - span, b),
        (None, None) => (latest - span, latest),
    };
    if from > to {
        return Err(ApiError::invalid("from", "from is after to"));
    }
    let days = to - from + 1;
    if days > MAX_RANGE_DAYS {
        return Err(ApiError::invalid(
            "from",
            format!("the range spans {days} days; a report covers at most {MAX_RANGE_DAYS} (ask for several ranges)"),
        ));
    }
    f.from_day = Some(from);
    f.to_day = Some(to);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const TODAY: i32 = 20_000;

    fn q(s: &str) -> Result<ReportQuery, ApiError> {
        parse(ReportKind::Ads, s, &HeaderMap::new(), TODAY)
    }

    #[test]
    fn filters_parse_and_bad_dates_name_the_field() {
        let r = q("campaignId=c1&from=2026-11-01&to=2026-11-02").expect("parses");
        assert_eq!(r.filter.campaign_id.as_deref(), Some("c1"));
        let f = &r.filter;
        assert_eq!(f.to_day.zip(f.from_day).map(|(t, fr)| t - fr), Some(1));
        assert!(q("from=2026-13-01").is_err());
        assert!(q("nope=1").is_err());
        assert!(q("from=2026-11-03&to=2026-11-01").is_err());
    }

    #[test]
    fn ranges_default_to_the_last_400_days_and_longer_ones_are_refused() {
        let f = q("").unwrap().filter;
        assert_eq!(
            (f.from_day, f.to_day),
            (Some(TODAY + 1 - 399), Some(TODAY + 1))
        );
        let f = q("to=2026-01-10").unwrap().filter;
        assert_eq!(
            f.to_day.zip(f.from_day).map(|(t, fr)| t - fr + 1),
            Some(400)
        );
        let f = q("from=2000-01-01").unwrap().filter;
        assert_eq!(
            f.to_day.zip(f.from_day).map(|(t, fr)| t - fr + 1),
            Some(400)
        );
        let e = q("from=2020-01-01&to=2026-01-01").unwrap_err();
        assert!(e.to_string().contains("at most 400"), "{e}");
        assert!(matches!(e, ApiError::InvalidArgument { ref field, .. } if field == "from"));
        assert!(
            q("from=2025-01-01&to=2026-02-04").is_ok(),
            "400 days exactly"
        );
        assert!(q("from=2025-01-01&to=2026-02-05").is_err(), "401 days");
    }

    #[test]
    fn time_zones_and_granularities_are_checked_per_report() {
        let at = |kind, s: &str| parse(kind, s, &HeaderMap::new(), TODAY);
        let field = |e: ApiError| match e {
            ApiError::InvalidArgument { field, .. } => field,
            other => panic!("{other:?}"),
        };
        let r = at(
            ReportKind::Products,
            "timeZone=Asia/Kolkata&granularity=hour&from=2026-11-01&to=2026-11-02",
        )
        .expect("products take any zone");
        assert_eq!(r.periods.plan().0, rm_store::model::tallies::Grain::Quarter);
        assert_eq!(
            field(at(ReportKind::Ads, "timeZone=Mars/Olympus").unwrap_err()),
            "timeZone"
        );
        assert_eq!(
            field(at(ReportKind::Ads, "granularity=fortnight").unwrap_err()),
            "granularity"
        );
        assert!(at(ReportKind::Campaigns, "granularity=month").is_ok());
        // The campaign summary and the funnel read quarter hours in a zone or by hour.
        for kind in [ReportKind::Campaigns, ReportKind::VideoFunnel] {
            let r = at(kind, "timeZone=Europe/Paris").expect("any zone");
            assert_eq!(r.periods.plan().0, rm_store::model::tallies::Grain::Quarter);
            let r = at(kind, "granularity=hour&from=2026-11-01&to=2026-11-01").expect("hours");
            assert_eq!(r.periods.plan().0, rm_store::model::tallies::Grain::Quarter);
            assert_eq!(
                field(at(kind, "timeZone=Mars/Olympus").unwrap_err()),
                "timeZone"
            );
        }
        assert!(at(ReportKind::VideoFunnel, "granularity=week").is_ok());
        assert_eq!(
            field(at(ReportKind::Sales, "timeZone=Europe/Paris").unwrap_err()),
            "timeZone"
        );
        assert_eq!(
            field(at(ReportKind::Carts, "granularity=week").unwrap_err()),
            "granularity"
        );
        assert_eq!(
            field(
                at(
                    ReportKind::Products,
                    "granularity=hour&from=2026-01-01&to=2026-03-01"
                )
                .unwrap_err()
            ),
            "from",
            "hours over two months"
        );
        assert_eq!(
            field(at(ReportKind::Products, "adId=x&from=2026-01-01&to=2026-03-01").unwrap_err()),
            "from",
            "a drill-down over two months"
        );
        assert_eq!(
            field(
                at(
                    ReportKind::Ads,
                    "adId=x&from=2026-01-01&to=2026-01-02&timeZone=Asia/Tokyo"
                )
                .unwrap_err()
            ),
            "timeZone"
        );
        assert!(at(ReportKind::Ads, "adId=x&from=2026-01-01&to=2026-01-02").is_ok());
        for kind in [
            ReportKind::Ads,
            ReportKind::Products,
            ReportKind::VideoFunnel,
            ReportKind::Sales,
        ] {
            let f = at(kind, "adId=x").expect("the last 31 days").filter;
            assert_eq!(f.to_day.zip(f.from_day).map(|(t, fr)| t - fr + 1), Some(31));
        }
    }

    proptest! {
        #[test]
        fn every_accepted_range_is_within_the_bound(a in 0i32..40_000, b in 0i32..40_000, which in 0u8..4) {
            let mut f = ReportFilter {
                from_day: (which & 1 == 1).then_some(a),
                to_day: (which & 2 == 2).then_some(b),
                ..ReportFilter::default()
            };
            if bound_range(&mut f, TODAY, MAX_RANGE_DAYS).is_ok() {
                let (from, to) = (f.from_day.unwrap(), f.to_day.unwrap());
                prop_assert!(from <= to && to - from < MAX_RANGE_DAYS);
            }
        }
    }
}
