//! The OpenAPI 3.0 document at `/openapi.json`, generated at start from the route
//! table (the rows of `crate::endpoints`) and the schemars schemas of the types the
//! handlers serialise and parse (each beside its endpoint, or the contract's own, as
//! `rm_schemas::order`), so it cannot drift from what the router serves and what serde
//! accepts. Also the two error bodies every route documents.

use schemars::generate::SchemaSettings;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::routes::{Access, Content, QueryParam, RequestBody, Route};
use rm_auth::client::Scope;

/// Token endpoint error body (RFC 6749 5.2).
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct OAuthError {
    /// `invalid_request`, `invalid_client`, `unsupported_grant_type`, `invalid_scope`, `slow_down`.
    pub error: String,
    /// Human-readable detail.
    #[serde(default)]
    pub error_description: String,
}

/// The error status object.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Status {
    /// gRPC status code.
    pub code: i32,
    /// Developer-facing message.
    pub message: String,
    /// Details, each with an `@type`.
    pub details: Vec<Map<String, Value>>,
}

fn status_text(code: u16) -> &'static str {
    match code {
        200 => "OK",
        400 => "Input problem",
        401 => "Login failed or token not valid",
        403 => "Login failed or token not valid (missing scope)",
        404 => "Not found",
        409 => "Already exists",
        429 => "Too many requests",
        503 => "Unavailable; retry later",
        _ => "Error",
    }
}

/// A query parameter's OpenAPI object.
fn query_parameter(q: &QueryParam) -> Value {
    let mut p = Map::new();
    p.insert("name".into(), json!(q.name));
    p.insert("in".into(), json!("query"));
    if q.required {
        p.insert("required".into(), json!(true));
    }
    let schema = serde_json::from_str(q.schema).unwrap_or_else(|_| json!({"type": "string"}));
    p.insert("schema".into(), schema);
    Value::Object(p)
}

/// Builds the document.
pub fn document(routes: &[Route]) -> Value {
    let mut g = SchemaSettings::openapi3().into_generator();
    let status_ref = serde_json::to_value(g.subschema_for::<Status>()).unwrap_or_default();
    let oauth_error = serde_json::to_value(g.subschema_for::<OAuthError>()).unwrap_or_default();
    let mut paths: Map<String, Value> = Map::new();
    for r in routes {
        let mut op = Map::new();
        op.insert(
            "operationId".into(),
            json!(r.op.to_lowercase() + &r.path.replace(['/', '{', '}', '.', ':', '-'], "_")),
        );
        op.insert("summary".into(), json!(r.summary));
        let mut parameters = Vec::new();
        if let Some(name) = r.path.split('{').nth(1).and_then(|s| s.split('}').next()) {
            parameters.push(json!({"name": name, "in": "path", "required": true, "schema": {"type": "string", "minLength": 1}}));
        }
        parameters.extend(r.query.iter().map(query_parameter));
        if !parameters.is_empty() {
            op.insert("parameters".into(), Value::Array(parameters));
        }
        match r.request {
            RequestBody::None => {}
            RequestBody::Form(schema) => {
                op.insert(
                    "requestBody".into(),
                    json!({"required": true, "content": {"application/x-www-form-urlencoded": {"schema": schema()}}}),
                );
            }
            RequestBody::Json(f) => {
                let s = serde_json::to_value(f(&mut g)).unwrap_or_default();
                op.insert(
                    "requestBody".into(),
                    json!({"required": true, "content": {"application/json": {"schema": s}}}),
                );
            }
        }
        let mut responses = Map::new();
        let ok_content = match r.response {
            Content::JsonOrCsv(f) => {
                let s = serde_json::to_value(f(&mut g)).unwrap_or_default();
                json!({"application/json": {"schema": s}, "text/csv": {"schema": {"type": "string"}}})
            }
            Content::Json(f) => {
                let s = serde_json::to_value(f(&mut g)).unwrap_or_default();
                json!({"application/json": {"schema": s}})
            }
            Content::Text(media) => {
                let mut m = Map::new();
                m.insert(media.to_owned(), json!({"schema": {"type": "string"}}));
                Value::Object(m)
            }
            Content::AnyJson => json!({"application/json": {"schema": {"type": "object"}}}),
        };
        responses.insert(
            r.ok.to_string(),
            json!({"description": status_text(r.ok), "content": ok_content}),
        );
        let err_schema = if r.access == Access::ClientBasic {
            &oauth_error
        } else {
            &status_ref
        };
        for code in r.errors {
            // Another success (a 202 while the work goes on) has the success body.
            let content = if (200..300).contains(code) {
                ok_content.clone()
            } else {
                json!({"application/json": {"schema": err_schema}})
            };
            responses.insert(
                code.to_string(),
                json!({"description": status_text(*code), "content": content}),
            );
        }
        responses.insert(
            "default".into(),
            json!({"description": "Unexpected error", "content": {"application/json": {"schema": err_schema}}}),
        );
        op.insert("responses".into(), Value::Object(responses));
        match r.access {
            Access::Public => {
                op.insert("security".into(), json!([]));
            }
            Access::ClientBasic => {
                op.insert("security".into(), json!([{"clientBasic": []}]));
            }
            Access::ApiKey => {
                op.insert("security".into(), json!([{"apiKeyBasic": []}]));
            }
            Access::Bearer(scopes) => {
                let names: Vec<&str> = scopes.iter().map(|s| s.as_str()).collect();
                op.insert("security".into(), json!([{"oauth2": names}]));
            }
        }
        let entry = paths
            .entry(r.path.to_owned())
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(m) = entry {
            m.insert(r.method.as_str().to_lowercase(), Value::Object(op));
        }
    }
    let scopes: Map<String, Value> = Scope::ALL
        .iter()
        .map(|s| {
            (
                s.as_str().to_owned(),
                json!(format!("{} operations", s.as_str())),
            )
        })
        .collect();
    json!({
        "openapi": "3.0.3",
        "info": {
            "title": "Retail media partner API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Segments, banner X campaigns, OAuth 2.0 tokens, ads, orders and campaign reports. Errors are the error status object {code, message, details}."
        },
        "paths": paths,
        "components": {
            "schemas": Value::Object(g.take_definitions(true)),
            "securitySchemes": {
                "oauth2": {"type": "oauth2", "flows": {"clientCredentials": {"tokenUrl": "/v1/oauth2/token", "scopes": scopes}}},
                "clientBasic": {"type": "http", "scheme": "basic", "description": "client_id:client_secret, each form-urlencoded"},
                "apiKeyBasic": {"type": "http", "scheme": "basic", "description": "The secret API key as user name, empty password"}
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_is_documented_with_resolvable_refs() {
        let routes = crate::endpoints::table();
        let doc = document(&routes);
        for r in &routes {
            let op = &doc["paths"][r.path][r.method.as_str().to_lowercase()];
            assert!(op.is_object(), "{} {} missing", r.method, r.path);
            assert!(op["responses"]["default"].is_object());
        }
        let text = doc.to_string();
        for piece in text.split("\"$ref\":\"#/components/schemas/").skip(1) {
            let name = piece.split('"').next().unwrap();
            assert!(
                doc["components"]["schemas"][name].is_object(),
                "dangling $ref {name}"
            );
        }
        assert!(
            doc["components"]["schemas"]["BannerXCampaign"]["properties"]["bannerXConfig"]
                .is_object()
        );
    }

    #[test]
    fn every_operation_is_one_row_with_its_access_and_parameters() {
        let routes = crate::endpoints::table();
        let doc = document(&routes);
        let operations: usize = doc["paths"]
            .as_object()
            .unwrap()
            .values()
            .map(|p| p.as_object().unwrap().len())
            .sum();
        assert_eq!(operations, routes.len(), "one operation per row, no other");
        let mut ids = std::collections::HashSet::new();
        for r in &routes {
            let at = format!("{} {}", r.method, r.path);
            let op = &doc["paths"][r.path][r.method.as_str().to_lowercase()];
            let id = op["operationId"].as_str().unwrap();
            assert!(ids.insert(id.to_owned()), "{at}: operationId {id} twice");
            let security = match r.access {
                Access::Public => json!([]),
                Access::ClientBasic => json!([{"clientBasic": []}]),
                Access::ApiKey => json!([{"apiKeyBasic": []}]),
                Access::Bearer(scopes) => {
                    let names: Vec<&str> = scopes.iter().map(|s| s.as_str()).collect();
                    json!([{"oauth2": names}])
                }
            };
            assert_eq!(op["security"], security, "{at}");
            let responses = &op["responses"];
            let guarded = r.access != Access::Public;
            assert_eq!(responses["401"].is_object(), guarded, "{at}: 401");
            if let Access::Bearer(_) = r.access {
                assert!(responses["403"].is_object(), "{at}: 403");
            }
            let params: Vec<&str> = op["parameters"]
                .as_array()
                .map(|a| a.iter().map(|p| p["name"].as_str().unwrap()).collect())
                .unwrap_or_default();
            let captured = r.path.contains('{');
            let query: Vec<&str> = r.query.iter().map(|q| q.name).collect();
            assert_eq!(
                params[usize::from(captured)..],
                query[..],
                "{at}: parameters"
            );
            for q in r.query {
                assert!(
                    serde_json::from_str::<Value>(q.schema).is_ok(),
                    "{at}: {q:?}"
                );
            }
        }
    }

    #[test]
    fn order_schema_names_every_member_of_the_order_contract() {
        let body = br#"{"orders":[{"id":"o","customerId":"c","sessionId":"s","orderDate":"2026-11-22T10:00:00Z","catalogId":"k","teamId":"t","adIds":["a"],"currency":"EUR","orderItems":[{"productCode":"p","quantity":1,"regularUnitPrice":1.0,"totalOrderItemPriceAfterDiscounts":1.0,"adId":"a","sellerId":"x"}]}]}"#;
        let orders = rm_schemas::order::parse_orders(body).unwrap();
        let wire = serde_json::to_value(&orders[0]).unwrap();
        let doc = document(&crate::endpoints::table());
        let props = &doc["components"]["schemas"]["Order"]["properties"];
        for k in wire.as_object().unwrap().keys() {
            assert!(props[k].is_object(), "Order lacks {k}");
        }
        let item_props = &doc["components"]["schemas"]["OrderItem"]["properties"];
        for k in wire["orderItems"][0].as_object().unwrap().keys() {
            assert!(item_props[k].is_object(), "OrderItem lacks {k}");
        }
    }
}
