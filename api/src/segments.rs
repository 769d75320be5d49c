//! Segment operations: create (`POST /v1/segments`, scope `admin`), read and update
//! (`GET`/`PUT /v1/segments/{segment.id}`, scope `segments`). The update rule is in
//! `model::segment`.

use crate::error::{parse_json, ApiError};
use crate::model::segment::{Segment, SegmentBody};
use crate::state::State;

/// `POST /v1/segments`: the body's `segment.id` or a new UUID; 409 when taken.
pub async fn create(state: &State, body: &[u8]) -> Result<SegmentBody, ApiError> {
    let mut b: SegmentBody = parse_json(body)?;
    if b.segment.id.is_empty() {
        b.segment.id = uuid::Uuid::now_v7().to_string();
    }
    b.segment.validate()?;
    if !state.create_segment(&b.segment).await? {
        return Err(ApiError::AlreadyExists(format!(
            "a segment with id '{}' exists",
            b.segment.id
        )));
    }
    Ok(b)
}

/// `GET /v1/segments/{segment.id}`.
pub async fn get(state: &State, id: &str) -> Result<SegmentBody, ApiError> {
    let segment = state
        .segment(id)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no segment has id '{id}'")))?;
    Ok(SegmentBody { segment })
}

/// `PUT /v1/segments/{segment.id}`: replaces the segment.
pub async fn update(state: &State, id: &str, body: &[u8]) -> Result<SegmentBody, ApiError> {
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
    let segment = Segment {
        id: id.to_owned(),
        ..b.segment
    };
    segment.validate()?;
    if state.segment(id).await?.is_none() {
        return Err(ApiError::NotFound(format!("no segment has id '{id}'")));
    }
    state.put_segment(&segment).await?;
    Ok(SegmentBody { segment })
}
