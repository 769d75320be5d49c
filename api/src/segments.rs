//! Segment operations: create, read and update (`POST /v1/segments`, `GET`/`PUT
//! /v1/segments/{segment.id}`, scope `segments`). A segment belongs to the namespace
//! of the client that creates it; another namespace's segment is answered as absent
//! (`crate::tenancy`). The update rule is in `model::segment`.

use crate::error::{parse_json, ApiError};
use crate::model::segment::{Segment, SegmentBody};
use crate::state::State;
use crate::tenancy::Caller;

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
