//! Campaign reports for analysts (step 8), answered from the report store only.
//!
//! | route | rows |
//! |---|---|
//! | `GET /v1/reports/video-funnel` | per campaign, ad, creative (videoId) and day: views, milestones, rates over plays, debounced controls, rule violations |
//! | `GET /v1/reports/products` | per campaign, ad, catalog, product and day: impressions, clicks, CTR (zero-click rows included) |
//! | `GET /v1/reports/carts` | per cart line (tracking id, catalog, product): units now, last value, adds, increments, decrements, removals |
//! | `GET /v1/reports/carts/campaigns` | per campaign and product: carts added, units added, value |
//!
//! Query parameters (all optional): `campaignId`, `adId`, `catalogId`, `from` and
//! `to` (inclusive UTC days, `YYYY-MM-DD`), `format` (`json`, the default, or `csv`;
//! `Accept: text/csv` works too). JSON answers `{"rows": [...]}` with camelCase
//! fields; CSV has a header row with the same names.

use http::{header, HeaderMap, HeaderValue, StatusCode};
use rm_aggregator::aggregate::parse_day;
use rm_aggregator::store::{ReportFilter, Store, StoreError};
use rm_schemas::rpc_status::{Code, RpcStatus};
use rm_service::{response, Response};
use serde::Serialize;

/// The report routes.
pub const ROUTES: [&str; 4] = [
    "/v1/reports/video-funnel",
    "/v1/reports/products",
    "/v1/reports/carts",
    "/v1/reports/carts/campaigns",
];

/// A query parameter at fault.
#[derive(Debug)]
struct BadParam {
    field: String,
    message: String,
}

fn bad(field: &str, message: String) -> BadParam {
    BadParam {
        field: field.to_owned(),
        message,
    }
}

impl BadParam {
    fn response(&self) -> Response {
        let mut s = RpcStatus::new(
            Code::InvalidArgument,
            "invalid_argument",
            format!("{}: {}", self.field, self.message),
        );
        s.details.push(serde_json::json!({
            "@type": "type.googleapis.com/google.rpc.BadRequest",
            "fieldViolations": [{"field": self.field, "description": self.message}],
        }));
        response::status(&s)
    }
}

enum Format {
    Json,
    Csv,
}

fn parse_query(query: &str, headers: &HeaderMap) -> Result<(ReportFilter, Format), BadParam> {
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query)
        .map_err(|e| bad("query", format!("not a valid query string: {e}")))?;
    let mut f = ReportFilter::default();
    let wants_csv = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("text/csv"));
    let mut format = if wants_csv { Format::Csv } else { Format::Json };
    for (k, v) in pairs {
        let day = |v: &str| {
            parse_day(v).ok_or_else(|| bad(&k, format!("'{v}' is not a date YYYY-MM-DD")))
        };
        match k.as_str() {
            "campaignId" => f.campaign_id = Some(v),
            "adId" => f.ad_id = Some(v),
            "catalogId" => f.catalog_id = Some(v),
            "from" => f.from_day = Some(day(&v)?),
            "to" => f.to_day = Some(day(&v)?),
            "format" => {
                format = match v.as_str() {
                    "json" => Format::Json,
                    "csv" => Format::Csv,
                    other => return Err(bad("format", format!("'{other}' is not json or csv"))),
                }
            }
            other => {
                return Err(bad(
                    other,
                    "unknown parameter; expected campaignId, adId, catalogId, from, to, format"
                        .into(),
                ))
            }
        }
    }
    if let (Some(a), Some(b)) = (f.from_day, f.to_day) {
        if a > b {
            return Err(bad("from", "from is after to".into()));
        }
    }
    Ok((f, format))
}

fn store_error(e: &StoreError) -> Response {
    tracing::warn!(error = %e, "report query failed");
    response::unavailable(
        "store_unavailable",
        "the report store is unavailable; retry later",
        5,
    )
}

fn render<T: Serialize>(rows: &[T], format: &Format) -> Response {
    match format {
        Format::Json => {
            let body = serde_json::to_vec(&serde_json::json!({ "rows": rows })).unwrap_or_default();
            response::json(StatusCode::OK, body)
        }
        Format::Csv => {
            let mut r =
                response::with_body(StatusCode::OK, "text/csv; charset=utf-8", to_csv(rows));
            r.headers_mut().insert(
                header::CONTENT_DISPOSITION,
                HeaderValue::from_static("attachment"),
            );
            r
        }
    }
}

/// Rows as CSV: the header from the first row's field names, RFC 4180 quoting.
pub fn to_csv<T: Serialize>(rows: &[T]) -> String {
    let values: Vec<serde_json::Map<String, serde_json::Value>> = rows
        .iter()
        .filter_map(|r| match serde_json::to_value(r) {
            Ok(serde_json::Value::Object(m)) => Some(m),
            _ => None,
        })
        .collect();
    let Some(first) = values.first() else {
        return String::new();
    };
    let names: Vec<&String> = first.keys().collect();
    let mut out = names.iter().map(|n| quote(n)).collect::<Vec<_>>().join(",");
    out.push_str("\r\n");
    for m in &values {
        let line: Vec<String> = names
            .iter()
            .map(|n| match m.get(*n) {
                Some(serde_json::Value::String(s)) => quote(s),
                Some(serde_json::Value::Null) | None => String::new(),
                Some(v) => v.to_string(),
            })
            .collect();
        out.push_str(&line.join(","));
        out.push_str("\r\n");
    }
    out
}

fn quote(s: &str) -> String {
    if s.contains([',', '"', '\r', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}

/// Answers a report route.
pub async fn answer<S: Store>(store: &S, path: &str, query: &str, headers: &HeaderMap) -> Response {
    let (f, format) = match parse_query(query, headers) {
        Ok(x) => x,
        Err(bad) => return bad.response(),
    };
    match path {
        "/v1/reports/video-funnel" => store
            .funnel(&f)
            .await
            .map_or_else(|e| store_error(&e), |r| render(&r, &format)),
        "/v1/reports/products" => store
            .products(&f)
            .await
            .map_or_else(|e| store_error(&e), |r| render(&r, &format)),
        "/v1/reports/carts" => store
            .carts(&f)
            .await
            .map_or_else(|e| store_error(&e), |r| render(&r, &format)),
        _ => store
            .cart_campaigns(&f)
            .await
            .map_or_else(|e| store_error(&e), |r| render(&r, &format)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Row {
        product_code: String,
        ctr: f64,
        value: Option<f64>,
    }

    #[test]
    fn csv_quotes_and_keeps_field_order() {
        let rows = vec![
            Row {
                product_code: "a,b".into(),
                ctr: 0.5,
                value: None,
            },
            Row {
                product_code: "q\"x".into(),
                ctr: 0.0,
                value: Some(1.25),
            },
        ];
        let csv = to_csv(&rows);
        assert_eq!(
            csv,
            "productCode,ctr,value\r\n\"a,b\",0.5,\r\n\"q\"\"x\",0.0,1.25\r\n"
        );
        assert_eq!(to_csv::<Row>(&[]), "");
    }

    #[test]
    fn filters_parse_and_bad_dates_name_the_field() {
        let (f, _) = parse_query(
            "campaignId=c1&from=2026-11-01&to=2026-11-02",
            &HeaderMap::new(),
        )
        .expect("parses");
        assert_eq!(f.campaign_id.as_deref(), Some("c1"));
        assert_eq!(f.to_day.zip(f.from_day).map(|(t, fr)| t - fr), Some(1));
        assert!(parse_query("from=2026-13-01", &HeaderMap::new()).is_err());
        assert!(parse_query("nope=1", &HeaderMap::new()).is_err());
        assert!(parse_query("from=2026-11-03&to=2026-11-01", &HeaderMap::new()).is_err());
    }
}
