//! A route row and the router: every partner route is a [`Route`] with its method,
//! path template, handler, access rule, query parameters, request and response bodies
//! and documented statuses, written beside its handler in its resource's module
//! (`crate::endpoints`, which assembles the table). The router matches requests
//! against the table and calls the row's handler; the OpenAPI document
//! (`crate::openapi`) is generated from the same rows, so the two cannot drift. Path
//! captures are percent-decoded by `rm_schemas::percent` (`Rules::PATH_SEGMENT`: `+`
//! is itself; a malformed escape or bytes that are not UTF-8 match no route).
//!
//! A handler is a plain `async fn(&Api, Call) -> Result<Response, ApiError>`; the
//! row holds it as a fn pointer through a closure that boxes its future:
//!
//! ```text
//! handler: |api, call| Box::pin(get_segment(api, call)),
//! ```

use std::future::Future;
use std::pin::Pin;

use http::Method;
use hyper::body::Incoming;
use rm_schemas::percent::{self, Rules};
use rm_service::Response;
use schemars::{JsonSchema, Schema, SchemaGenerator};

use crate::{Api, ApiError};
use rm_auth::client::Scope;

/// A matched request, as its handler gets it (after the route's access rule passed).
pub(crate) struct Call {
    /// Method, URI and headers.
    pub parts: http::request::Parts,
    /// Who is calling: set for `Bearer` and `ApiKey` routes (from the token or the
    /// key, never from the request).
    pub caller: Option<crate::tenancy::Caller>,
    /// The path template's captured parameter, percent-decoded; empty without one.
    pub id: String,
    /// The body, unread: `Api::body` reads it within the size bound.
    pub body: Incoming,
}

impl Call {
    /// The caller of a route with access `Bearer` or `ApiKey`.
    pub fn caller(&self) -> Result<&crate::tenancy::Caller, ApiError> {
        self.caller.as_ref().ok_or_else(|| {
            ApiError::Internal("a route without access rule reads its caller".into())
        })
    }
}

/// What a handler returns: its answer, or the error `error` turns into one.
pub(crate) type HandlerFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Response, ApiError>> + Send + 'a>>;

/// A route's handler: an `async fn(&Api, Call) -> Result<Response, ApiError>` beside
/// its row, boxed by a closure in the row: `|api, call| Box::pin(name(api, call))`.
pub(crate) type Handler = for<'a> fn(&'a Api, Call) -> HandlerFuture<'a>;

/// Who may call a route. The router checks `Bearer` and `ApiKey` before the handler
/// runs; the token endpoint authenticates its client itself (its errors are RFC 6749
/// bodies).
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

/// A route's request body, for the document.
#[derive(Clone, Copy)]
pub enum RequestBody {
    /// None.
    None,
    /// JSON of this type.
    Json(SchemaFn),
    /// `application/x-www-form-urlencoded` with this (OpenAPI) schema.
    Form(fn() -> serde_json::Value),
}

/// A route's success body, for the document.
#[derive(Clone, Copy)]
pub enum Content {
    /// JSON of this type.
    Json(SchemaFn),
    /// JSON of this type, or CSV (`format=csv`).
    JsonOrCsv(SchemaFn),
    /// Some JSON object.
    AnyJson,
    /// Text of this media type.
    Text(&'static str),
}

/// A documented query parameter.
#[derive(Debug, Clone, Copy)]
pub struct QueryParam {
    /// Name.
    pub name: &'static str,
    /// Whether the route refuses a request without it.
    pub required: bool,
    /// Its OpenAPI schema, as JSON text.
    pub schema: &'static str,
}

/// One route: everything the router, the access check, the handler call and the
/// OpenAPI document need.
#[derive(Clone)]
pub struct Route {
    /// Method.
    pub method: Method,
    /// Path template; `{id}` captures one segment, `{id}:verb` one ending in `:verb`.
    pub path: &'static str,
    /// The operation's name (the stem of its `operationId`).
    pub op: &'static str,
    /// Answers the request.
    pub(crate) handler: Handler,
    /// Who may call it.
    pub access: Access,
    /// One line for the document.
    pub summary: &'static str,
    /// Query parameters it reads.
    pub query: &'static [QueryParam],
    /// Request body.
    pub request: RequestBody,
    /// Success status.
    pub ok: u16,
    /// Success body.
    pub response: Content,
    /// Error statuses it documents (besides `default`).
    pub errors: &'static [u16],
}

/// The schema of `T`, for a row's [`RequestBody::Json`] or [`Content::Json`].
pub(crate) fn schema<T: JsonSchema>(g: &mut SchemaGenerator) -> Schema {
    g.subschema_for::<T>()
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
                    captured = Some(
                        percent::decode(value, Rules::PATH_SEGMENT)
                            .ok()?
                            .into_owned(),
                    );
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
        let t = crate::endpoints::table();
        let Match::Found(r, id) = find(&t, &Method::POST, "/v3/bannerx-campaigns/c-1:approve")
        else {
            panic!("no match")
        };
        assert_eq!((r.op, id.as_deref()), ("ApproveCampaign", Some("c-1")));
        let Match::Found(r, id) = find(&t, &Method::PUT, "/v1/segments/a%20b") else {
            panic!("no match")
        };
        assert_eq!((r.op, id.as_deref()), ("UpdateSegment", Some("a b")));
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
            matches!(find(&t, &Method::GET, "/v3/bannerx-campaigns/c:approve"), Match::Found(r, _) if r.op == "GetCampaign")
        );
    }
}
