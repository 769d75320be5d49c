//! The route table: every partner route with its method, path template, access
//! rule, request and response types and documented statuses. The router matches
//! requests against it and the OpenAPI document (`openapi`) is generated from it,
//! so the two cannot drift.

use http::Method;
use schemars::{JsonSchema, Schema, SchemaGenerator};

use crate::model::client::Scope;

/// What a route does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// OAuth token.
    Token,
    /// JWK set.
    Jwks,
    /// The OpenAPI document.
    OpenApi,
    /// The browser SDK.
    Sdk,
    /// Create a segment.
    CreateSegment,
    /// Read a segment.
    GetSegment,
    /// Update a segment.
    UpdateSegment,
    /// Create a campaign.
    CreateCampaign,
    /// Read a campaign.
    GetCampaign,
    /// Approve or reject a campaign.
    ApproveCampaign,
    /// Upsert catalog products.
    UpsertProducts,
    /// Take orders.
    Orders,
    /// Generate ads.
    GenerateAds,
    /// The integration inspector.
    DebugEvents,
    /// A campaign report (the path picks which).
    Report,
    /// The analyst page and its assets (the path picks which).
    Web,
}

/// Who may call a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Anyone.
    Public,
    /// HTTP Basic client authentication (the token endpoint).
    ClientBasic,
    /// `Bearer` JWT holding one of these scopes (or `admin`).
    Bearer(&'static [Scope]),
    /// HTTP Basic with an order API key.
    ApiKey,
}

/// A schema function for the OpenAPI document.
pub type SchemaFn = fn(&mut SchemaGenerator) -> Schema;

/// One route.
#[derive(Clone)]
pub struct Route {
    /// Method.
    pub method: Method,
    /// Path template; `{id}` captures one segment, `{id}:verb` one ending in `:verb`.
    pub path: &'static str,
    /// What it does.
    pub op: Op,
    /// Who may call it.
    pub access: Access,
    /// One line for the document.
    pub summary: &'static str,
    /// Request body type (JSON), if any.
    pub request: Option<SchemaFn>,
    /// Success status.
    pub ok: u16,
    /// Success body type (JSON), if JSON.
    pub response: Option<SchemaFn>,
    /// Error statuses it documents (besides `default`).
    pub errors: &'static [u16],
}

fn schema<T: JsonSchema>(g: &mut SchemaGenerator) -> Schema {
    g.subschema_for::<T>()
}

use crate::model::campaign::{ApproveBody, CampaignBody};
use crate::model::segment::SegmentBody;
use crate::openapi::{
    Jwks, OrdersAccepted, OrdersRequest, ProductsBody, ProductsUpserted, ReportRows, TokenResponse,
};

const BEARER_ERRORS: &[u16] = &[400, 401, 403];

/// Every partner route (the ops routes `/healthz`, `/readyz`, `/metrics` are
/// answered before this table).
pub fn table() -> Vec<Route> {
    let seg: &'static [Scope] = &[Scope::Segments];
    let camp: &'static [Scope] = &[Scope::Campaigns];
    let admin: &'static [Scope] = &[Scope::Admin];
    let reports: &'static [Scope] = &[Scope::Reports];
    let mut t = vec![
        Route {
            method: Method::POST,
            path: "/v1/oauth2/token",
            op: Op::Token,
            access: Access::ClientBasic,
            summary: "Request an access token (OAuth 2.0 client credentials, HTTP Basic client authentication)",
            request: None,
            ok: 200,
            response: Some(schema::<TokenResponse>),
            errors: &[400, 401, 429],
        },
        Route {
            method: Method::GET,
            path: "/.well-known/jwks.json",
            op: Op::Jwks,
            access: Access::Public,
            summary: "Public keys that verify access tokens (JWK set)",
            request: None,
            ok: 200,
            response: Some(schema::<Jwks>),
            errors: &[],
        },
        Route {
            method: Method::GET,
            path: "/openapi.json",
            op: Op::OpenApi,
            access: Access::Public,
            summary: "This document",
            request: None,
            ok: 200,
            response: None,
            errors: &[],
        },
        Route {
            method: Method::GET,
            path: "/sdk/beacon.js",
            op: Op::Sdk,
            access: Access::Public,
            summary: "The browser tracking snippet",
            request: None,
            ok: 200,
            response: None,
            errors: &[],
        },
        Route {
            method: Method::POST,
            path: "/v1/segments",
            op: Op::CreateSegment,
            access: Access::Bearer(admin),
            summary: "Create a segment",
            request: Some(schema::<SegmentBody>),
            ok: 200,
            response: Some(schema::<SegmentBody>),
            errors: &[400, 401, 403, 409],
        },
        Route {
            method: Method::GET,
            path: "/v1/segments/{segment.id}",
            op: Op::GetSegment,
            access: Access::Bearer(seg),
            summary: "Read a segment",
            request: None,
            ok: 200,
            response: Some(schema::<SegmentBody>),
            errors: &[401, 403, 404],
        },
        Route {
            method: Method::PUT,
            path: "/v1/segments/{segment.id}",
            op: Op::UpdateSegment,
            access: Access::Bearer(seg),
            summary: "Update a segment (the body replaces it)",
            request: Some(schema::<SegmentBody>),
            ok: 200,
            response: Some(schema::<SegmentBody>),
            errors: &[400, 401, 403, 404],
        },
        Route {
            method: Method::POST,
            path: "/v3/bannerx-campaigns",
            op: Op::CreateCampaign,
            access: Access::Bearer(admin),
            summary: "Create a banner X campaign",
            request: Some(schema::<CampaignBody>),
            ok: 200,
            response: Some(schema::<CampaignBody>),
            errors: &[400, 401, 403, 409],
        },
        Route {
            method: Method::GET,
            path: "/v3/bannerx-campaigns/{id}",
            op: Op::GetCampaign,
            access: Access::Bearer(admin),
            summary: "Read a banner X campaign",
            request: None,
            ok: 200,
            response: Some(schema::<CampaignBody>),
            errors: &[401, 403, 404],
        },
        Route {
            method: Method::POST,
            path: "/v3/bannerx-campaigns/{id}:approve",
            op: Op::ApproveCampaign,
            access: Access::Bearer(camp),
            summary: "Approve or reject a banner X campaign",
            request: Some(schema::<ApproveBody>),
            ok: 200,
            response: Some(schema::<CampaignBody>),
            errors: &[400, 401, 403, 404],
        },
        Route {
            method: Method::POST,
            path: "/v1/products",
            op: Op::UpsertProducts,
            access: Access::Bearer(admin),
            summary: "Add or replace catalog products",
            request: Some(schema::<ProductsBody>),
            ok: 200,
            response: Some(schema::<ProductsUpserted>),
            errors: &[400, 401, 403],
        },
        Route {
            method: Method::POST,
            path: "/v1/ads/generate",
            op: Op::GenerateAds,
            access: Access::Bearer(&[Scope::Ads]),
            summary: "Generate ads for a placement: product ads and banner X ads (video ones with a VAST 4.0 adm)",
            request: Some(schema::<crate::ads::AdsRequest>),
            ok: 200,
            response: Some(schema::<crate::ads::AdsResponse>),
            errors: &[400, 401, 403],
        },
        Route {
            method: Method::GET,
            path: "/v1/debug/events",
            op: Op::DebugEvents,
            access: Access::Bearer(&[Scope::Reports]),
            summary: "The integration inspector: a tracking id's latest events, their outcomes, and the spec's rule checks (query: trackingId)",
            request: None,
            ok: 200,
            response: Some(schema::<crate::openapi::InspectorReport>),
            errors: &[400, 401, 403, 404],
        },
        Route {
            method: Method::POST,
            path: "/v1/orders",
            op: Op::Orders,
            access: Access::ApiKey,
            summary: "Report orders (HTTP Basic with the secret API key); idempotent by order id",
            request: Some(schema::<OrdersRequest>),
            ok: 200,
            response: Some(schema::<OrdersAccepted>),
            errors: &[400, 401, 429, 503],
        },
    ];
    for path in crate::reports::ROUTES {
        t.push(Route {
            method: Method::GET,
            path,
            op: Op::Report,
            access: Access::Bearer(reports),
            summary: "Campaign report rows (JSON, or CSV with format=csv)",
            request: None,
            ok: 200,
            response: Some(schema::<ReportRows>),
            errors: BEARER_ERRORS,
        });
    }
    for asset in &crate::web::ASSETS {
        t.push(Route {
            method: Method::GET,
            path: asset.path,
            op: Op::Web,
            access: Access::Public,
            summary: "The analyst page (static; it reads the report routes with a token)",
            request: None,
            ok: 200,
            response: None,
            errors: &[],
        });
    }
    t
}

/// The outcome of matching a request.
pub enum Match<'a> {
    /// A route, with its captured path parameter (percent-decoded).
    Found(&'a Route, Option<String>),
    /// The path exists with other methods.
    MethodNotAllowed(Vec<Method>),
    /// No such path.
    NotFound,
}

fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = |c: u8| (c as char).to_digit(16);
            let hi = b.get(i + 1).copied().and_then(hex)?;
            let lo = b.get(i + 2).copied().and_then(hex)?;
            out.push(u8::try_from(hi * 16 + lo).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Matches `path` against a template; `Some(capture)` on a match.
fn capture(template: &str, path: &str) -> Option<Option<String>> {
    let mut t = template.split('/');
    let mut p = path.split('/');
    let mut captured = None;
    loop {
        match (t.next(), p.next()) {
            (None, None) => return Some(captured),
            (Some(ts), Some(ps)) => {
                if let Some(inner) = ts.strip_prefix('{') {
                    let (_, rest) = inner.split_once('}')?;
                    let value = if rest.is_empty() {
                        ps
                    } else {
                        ps.strip_suffix(rest)?
                    };
                    if value.is_empty() {
                        return None;
                    }
                    captured = Some(percent_decode(value)?);
                } else if ts != ps {
                    return None;
                }
            }
            _ => return None,
        }
    }
}

/// Finds the route for `method` and `path`.
pub fn find<'a>(table: &'a [Route], method: &Method, path: &str) -> Match<'a> {
    let mut allowed = Vec::new();
    let mut best: Option<(&Route, Option<String>)> = None;
    for r in table {
        if let Some(c) = capture(r.path, path) {
            // A literal `:verb` template is more specific than a bare capture.
            let specific = r.path.contains("}:");
            if r.method == *method || (r.method == Method::GET && *method == Method::HEAD) {
                let better = best
                    .as_ref()
                    .is_none_or(|(b, _)| specific && !b.path.contains("}:"));
                if better {
                    best = Some((r, c));
                }
            } else if !allowed.contains(&r.method) {
                allowed.push(r.method.clone());
            }
        }
    }
    match best {
        Some((r, c)) => Match::Found(r, c),
        None if !allowed.is_empty() => Match::MethodNotAllowed(allowed),
        None => Match::NotFound,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_capture_ids_and_verbs() {
        let t = table();
        let Match::Found(r, id) = find(&t, &Method::POST, "/v3/bannerx-campaigns/c-1:approve")
        else {
            panic!("no match")
        };
        assert_eq!((r.op, id.as_deref()), (Op::ApproveCampaign, Some("c-1")));
        let Match::Found(r, id) = find(&t, &Method::PUT, "/v1/segments/a%20b") else {
            panic!("no match")
        };
        assert_eq!((r.op, id.as_deref()), (Op::UpdateSegment, Some("a b")));
        assert!(
            matches!(find(&t, &Method::DELETE, "/v1/segments/x"), Match::MethodNotAllowed(m) if m.len() == 2)
        );
        assert!(matches!(
            find(&t, &Method::GET, "/v1/segments/x/y"),
            Match::NotFound
        ));
        assert!(matches!(
            find(&t, &Method::GET, "/v1/segments/"),
            Match::NotFound
        ));
        assert!(
            matches!(find(&t, &Method::GET, "/v3/bannerx-campaigns/c:approve"), Match::Found(r, _) if r.op == Op::GetCampaign)
        );
    }
}
