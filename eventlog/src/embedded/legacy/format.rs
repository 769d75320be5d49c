//! The embedded log's on-disk format: table names, the segment encoding and the
//! per-topic bookkeeping row. No I/O beyond redb table handles.
//!
//! - `log/<topic>`: first offset (`u64`) -> **segment**: a `u32` count, then per record
//!   a `u32` length and the bytes (little-endian). One row per group commit.
//! - `logtime/<topic>` (added with retention): first offset -> commit time in unix
//!   milliseconds, written in the same transaction as the segment. Segments written
//!   before it existed have no row; retention dates them by the topic's `adopted_ms`.
//! - `__log_topics` (added with retention): topic -> ([`TopicMeta`]) next offset,
//!   retained segment bytes, adopted-at millis. The next offset is the high-water mark:
//!   it survives retention emptying the topic, so offsets never go back.
//! - `__consumer_offsets`: `"group/topic"` -> next offset the group will read.
//!
//! The first two tables are unchanged from the format before retention, so a log
//! written by an earlier version opens as is; the missing `__log_topics` rows are
//! rebuilt once at open ([`super::retention::adopt_topics`]).

use redb::TableDefinition;

use crate::LogError;

/// Consumer offsets: `"group/topic"` -> next offset.
pub(crate) const OFFSETS: TableDefinition<&str, u64> = TableDefinition::new("__consumer_offsets");

/// Per-topic bookkeeping, see [`TopicMeta`].
pub(crate) const TOPICS: TableDefinition<&str, (u64, u64, u64)> =
    TableDefinition::new("__log_topics");

/// Prefix of the segment tables.
pub(crate) const LOG_PREFIX: &str = "log/";

/// A table of `u64` offsets to segments.
pub(crate) fn log_table(name: &str) -> TableDefinition<'_, u64, &'static [u8]> {
    TableDefinition::new(name)
}

/// A table of `u64` offsets to commit times (unix millis).
pub(crate) fn time_table(name: &str) -> TableDefinition<'_, u64, u64> {
    TableDefinition::new(name)
}

/// Name of the segment table of `topic`.
pub(crate) fn log_name(topic: &str) -> String {
    format!("{LOG_PREFIX}{topic}")
}

/// Name of the commit-time table of `topic`.
pub(crate) fn time_name(topic: &str) -> String {
    format!("logtime/{topic}")
}

/// The `__consumer_offsets` key of `group` on `topic`.
pub(crate) fn offset_key(group: &str, topic: &str) -> String {
    format!("{group}/{topic}")
}

/// What `__log_topics` holds for one topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct TopicMeta {
    /// The offset the next appended record gets (the high-water mark).
    pub next: u64,
    /// Bytes of the segments still in `log/<topic>`.
    pub bytes: u64,
    /// When this version first opened the topic: the time of segments without a
    /// `logtime` row.
    pub adopted_ms: u64,
}

impl TopicMeta {
    pub(crate) fn from_row(row: (u64, u64, u64)) -> Self {
        Self {
            next: row.0,
            bytes: row.1,
            adopted_ms: row.2,
        }
    }

    pub(crate) fn row(self) -> (u64, u64, u64) {
        (self.next, self.bytes, self.adopted_ms)
    }
}

/// Encodes records as one segment.
pub(crate) fn encode_segment(records: &[&[u8]]) -> Vec<u8> {
    let size: usize = records.iter().map(|r| r.len() + 4).sum();
    let mut out = Vec::with_capacity(4 + size);
    out.extend_from_slice(&(records.len() as u32).to_le_bytes());
    for r in records {
        out.extend_from_slice(&(r.len() as u32).to_le_bytes());
        out.extend_from_slice(r);
    }
    out
}

/// The records of a segment, in order.
pub(crate) fn decode_segment(seg: &[u8]) -> Result<Vec<&[u8]>, LogError> {
    let corrupt = || LogError::Unavailable("corrupt log segment".into());
    let word = |at: usize| -> Result<usize, LogError> {
        let b: [u8; 4] = seg
            .get(at..at + 4)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(corrupt)?;
        Ok(u32::from_le_bytes(b) as usize)
    };
    let count = word(0)?;
    let mut out = Vec::with_capacity(count);
    let mut at = 4;
    for _ in 0..count {
        let len = word(at)?;
        out.push(seg.get(at + 4..at + 4 + len).ok_or_else(corrupt)?);
        at += 4 + len;
    }
    Ok(out)
}

/// Records in a segment, without decoding them.
pub(crate) fn segment_count(seg: &[u8]) -> u64 {
    seg.get(0..4)
        .and_then(|b| <[u8; 4]>::try_from(b).ok())
        .map_or(0, |b| u64::from(u32::from_le_bytes(b)))
}

/// Milliseconds since the unix epoch (0 if the clock is before it).
pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_round_trip_and_refuse_truncation() {
        let recs: Vec<&[u8]> = vec![b"a", b"", b"hello"];
        let seg = encode_segment(&recs);
        assert_eq!(segment_count(&seg), 3);
        assert_eq!(decode_segment(&seg).expect("decodes"), recs);
        assert!(decode_segment(&seg[..seg.len() - 1]).is_err());
        assert!(decode_segment(&[]).is_err());
    }
}
