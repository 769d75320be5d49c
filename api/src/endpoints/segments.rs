//! Segment operations: create, read and update (`POST /v1/segments`, `GET`/`PUT
//! /v1/segments/{segment.id}`, scope `segments`). A segment belongs to the namespace
//! of the client that creates it; another namespace's segment is answered as absent
//! (`crate::tenancy`). The update rule is in `model::segment`.

use http::Method;
use rm_service::Response;

use super::ok_json;
use crate::error::{parse_json, ApiError};
use crate::model::segment::{Segment, SegmentBody};
use crate::routes::{schema, Access, Call, Content, RequestBody, Route};
use crate::state::State;
use crate::tenancy::Caller;
use crate::Api;
use rm_auth::client::Scope;

/// The segment routes (scope `segments`).
pub(crate) fn routes() -> Vec<Route> {
    let seg: &'static [Scope] = &[Scope::Segments];
    vec![
        Route {
            method: Method::POST,
            path: "/v1/segments",
            op: "CreateSegment",
            handler: |api, call| Box::pin(create_segment(api, call)),
            access: Access::Bearer(seg),
            summary: "Create a segment (in the caller's namespace)",
            query: &[],
            request: RequestBody::Json(schema::<SegmentBody>),
            ok: 200,
            response: Content::Json(schema::<SegmentBody>),
            errors: &[400, 401, 403, 409],
        },
        Route {
            method: Method::GET,
            path: "/v1/segments/{segment.id}",
            op: "GetSegment",
            handler: |api, call| Box::pin(get_segment(api, call)),
            access: Access::Bearer(seg),
            summary: "Read a segment",
            query: &[],
            request: RequestBody::None,
            ok: 200,
            response: Content::Json(schema::<SegmentBody>),
            errors: &[401, 403, 404],
        },
        Route {
            method: Method::PUT,
            path: "/v1/segments/{segment.id}",
            op: "UpdateSegment",
            handler: |api, call| Box::pin(update_segment(api, call)),
            access: Access::Bearer(seg),
            summary: "Update a segment (the body replaces it)",
            query: &[],
            request: RequestBody::Json(schema::<SegmentBody>),
            ok: 200,
            response: Content::Json(schema::<SegmentBody>),
            errors: &[400, 401, 403, 404],
        },
    ]
}

/// `POST /v1/segments`.
async fn create_segment(api: &Api, call: Call) -> Result<Response, ApiError> {
    let caller = call.caller()?.clone();
    let body = api.body(call.body).await?;
    ok_json(&create(&api.state, &caller, &body).await?)
}

/// `GET /v1/segments/{segment.id}`.
async fn get_segment(api: &Api, call: Call) -> Result<Response, ApiError> {
    ok_json(&get(&api.state, call.caller()?, &call.id).await?)
}

/// `PUT /v1/segments/{segment.id}`.
async fn update_segment(api: &Api, call: Call) -> Result<Response, ApiError> {
    let caller = call.caller()?.clone();
    let body = api.body(call.body).await?;
    ok_json(&update(&api.state, &caller, &call.id, &body).await?)
}

fn not_found(id: &str) -> ApiError {
    ApiError::NotFound(format!("no segment has id '{id}'"))
}

/// `POST /v1/segments`: the body's `segment.id` or a new UUID; 409 when taken.
pub async fn create(state: &State, caller: &Caller, body: &[u8]) -> Result<SegmentBody, ApiError> {
    let mut b: SegmentBody = parse_json(body)?;
    if b.segment.id.is_empty() {
        b.segment.id = uuid::Uuid::now_v7().to_string();
    }
    b.segment.namespace_id =
        caller.acting_in(Some(&b.segment.namespace_id), "segment.namespaceId")?;
    b.segment.validate()?;
    if !state.create_segment(&b.segment).await? {
        return Err(ApiError::AlreadyExists(format!(
            "a segment with id '{}' exists",
            b.segment.id
        )));
    }
    Ok(b)
}

/// The segment `id` when the caller may see it.
async fn visible(state: &State, caller: &Caller, id: &str) -> Result<Segment, ApiError> {
    let segment = state.segment(id).await?.ok_or_else(|| not_found(id))?;
    caller.own(&segment.namespace_id, || not_found(id))?;
    Ok(segment)
}

/// `GET /v1/segments/{segment.id}`.
pub async fn get(state: &State, caller: &Caller, id: &str) -> Result<SegmentBody, ApiError> {
    Ok(SegmentBody {
        segment: visible(state, caller, id).await?,
    })
}

/// `PUT /v1/segments/{segment.id}`: replaces the segment (its namespace stays).
pub async fn update(
    state: &State,
    caller: &Caller,
    id: &str,
    body: &[u8],
) -> Result<SegmentBody, ApiError> {
    let b: SegmentBody = parse_json(body)?;
    if !b.segment.id.is_empty() && b.segment.id != id {
        return Err(ApiError::invalid(
            "segment.id",
            format!(
                "'{}' contradicts the path's segment id '{id}' (it is read-only; omit it)",
                b.segment.id
            ),
        ));
    }
    let stored = visible(state, caller, id).await?;
    if !b.segment.namespace_id.is_empty() && b.segment.namespace_id != stored.namespace_id {
        return Err(ApiError::invalid(
            "segment.namespaceId",
            "read-only: a segment stays in the namespace it was created in",
        ));
    }
    let segment = Segment {
        id: id.to_owned(),
        namespace_id: stored.namespace_id,
        ..b.segment
    };
    segment.validate()?;
    state.put_segment(&segment).await?;
    Ok(SegmentBody { segment })
}
