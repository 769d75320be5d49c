//! The frame codec of the segment files: pure, no I/O.
//!
//! One frame per group commit and topic:
//!
//! ```text
//! u32 body length | u32 CRC32C of the body | body
//! body = u64 first offset | u64 commit time (unix ms) | segment
//! segment = u32 record count | per record: u32 length | bytes
//! ```
//!
//! All integers little-endian. The segment is byte for byte the previous (redb)
//! format's row value, so the retained byte counts of retention are unchanged. A frame
//! is accepted only whole: its length fits, its CRC matches and its segment's lengths
//! add up exactly to the body; anything else at the end of a file is a torn write.

use crate::LogError;

/// Bytes before the body: length and CRC.
pub(crate) const HEADER: usize = 8;
/// Bytes of the body before the segment: first offset and commit time.
const BODY_HEAD: usize = 16;
/// Bytes of a frame that are not the segment.
pub(crate) const OVERHEAD: usize = HEADER + BODY_HEAD;
/// The largest body accepted (the writer keeps a batch far below it).
pub(crate) const MAX_BODY: usize = 1 << 30;

/// One whole frame, borrowed from the buffer it was parsed from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Frame<'a> {
    /// Offset of the first record.
    pub base: u64,
    /// Commit time, unix milliseconds.
    pub time_ms: u64,
    /// Records in the frame.
    pub count: u32,
    /// The segment (count, then length-prefixed records).
    pub segment: &'a [u8],
}

/// What the start of a buffer holds.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Parsed<'a> {
    /// A whole, valid frame of `len` bytes.
    Whole(Frame<'a>, usize),
    /// The start of a frame whose declared length runs past the buffer.
    Short,
    /// Not a valid frame (bad length, CRC or segment).
    Corrupt(&'static str),
}

/// Encodes one frame of `records` into `out` (cleared first).
pub(crate) fn encode<'a>(
    out: &mut Vec<u8>,
    base: u64,
    time_ms: u64,
    records: impl Iterator<Item = &'a [u8]> + Clone,
) {
    let count = records.clone().count();
    let size: usize = records.clone().map(|r| r.len() + 4).sum();
    out.clear();
    out.reserve(OVERHEAD + 4 + size);
    out.extend_from_slice(&[0; HEADER]);
    out.extend_from_slice(&base.to_le_bytes());
    out.extend_from_slice(&time_ms.to_le_bytes());
    out.extend_from_slice(&(count as u32).to_le_bytes());
    for r in records {
        out.extend_from_slice(&(r.len() as u32).to_le_bytes());
        out.extend_from_slice(r);
    }
    let body_len = (out.len() - HEADER) as u32;
    let crc = crc32c::crc32c(&out[HEADER..]);
    out[0..4].copy_from_slice(&body_len.to_le_bytes());
    out[4..8].copy_from_slice(&crc.to_le_bytes());
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// Parses the frame at the start of `buf`.
pub(crate) fn parse(buf: &[u8]) -> Parsed<'_> {
    let Some(len) = u32_at(buf, 0) else {
        return Parsed::Short;
    };
    let len = len as usize;
    if !(BODY_HEAD + 4..=MAX_BODY).contains(&len) {
        return Parsed::Corrupt("frame length out of range");
    }
    let Some(body) = buf.get(HEADER..HEADER + len) else {
        return Parsed::Short;
    };
    if u32_at(buf, 4) != Some(crc32c::crc32c(body)) {
        return Parsed::Corrupt("CRC mismatch");
    }
    let segment = &body[BODY_HEAD..];
    let Some(count) = segment_len(segment) else {
        return Parsed::Corrupt("record lengths do not add up");
    };
    let (Some(base), Some(time_ms)) = (u64_at(body, 0), u64_at(body, 8)) else {
        return Parsed::Corrupt("short body");
    };
    Parsed::Whole(
        Frame {
            base,
            time_ms,
            count,
            segment,
        },
        HEADER + len,
    )
}

/// The record count of `segment` if its lengths cover it exactly.
fn segment_len(segment: &[u8]) -> Option<u32> {
    let count = u32_at(segment, 0)?;
    let mut at = 4usize;
    for _ in 0..count {
        let len = u32_at(segment, at)? as usize;
        at = at.checked_add(4 + len)?;
        if at > segment.len() {
            return None;
        }
    }
    (at == segment.len()).then_some(count)
}

/// Encodes records as one segment (the previous format's row value).
#[cfg(test)]
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
    let count = u32_at(seg, 0).ok_or_else(corrupt)? as usize;
    let mut out = Vec::with_capacity(count.min(seg.len() / 4));
    let mut at = 4;
    for _ in 0..count {
        let len = u32_at(seg, at).ok_or_else(corrupt)? as usize;
        out.push(seg.get(at + 4..at + 4 + len).ok_or_else(corrupt)?);
        at += 4 + len;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn frame_of(records: &[Vec<u8>], base: u64, time: u64) -> Vec<u8> {
        let mut out = Vec::new();
        encode(&mut out, base, time, records.iter().map(Vec::as_slice));
        out
    }

    #[test]
    fn a_frame_is_its_segment_plus_24_bytes() {
        let recs: Vec<&[u8]> = vec![b"a", b"", b"hello"];
        let owned: Vec<Vec<u8>> = recs.iter().map(|r| r.to_vec()).collect();
        let f = frame_of(&owned, 7, 9);
        assert_eq!(f.len(), OVERHEAD + encode_segment(&recs).len());
        let Parsed::Whole(frame, len) = parse(&f) else {
            panic!("not whole")
        };
        assert_eq!(len, f.len());
        assert_eq!(frame.segment, encode_segment(&recs).as_slice());
        assert_eq!(decode_segment(frame.segment).expect("decodes"), recs);
        assert_eq!(
            parse(&[0; 64]),
            Parsed::Corrupt("frame length out of range")
        );
        assert_eq!(parse(&[]), Parsed::Short);
    }

    proptest! {
        /// Any records round trip, followed by anything.
        #[test]
        fn any_records_round_trip(
            records in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 0..20),
            base in any::<u64>(),
            time in any::<u64>(),
            trailing in proptest::collection::vec(any::<u8>(), 0..40),
        ) {
            let mut f = frame_of(&records, base, time);
            let whole = f.len();
            f.extend_from_slice(&trailing);
            let Parsed::Whole(frame, len) = parse(&f) else {
                return Err(TestCaseError::fail("not whole"));
            };
            prop_assert_eq!(len, whole);
            prop_assert_eq!((frame.base, frame.time_ms, frame.count as usize), (base, time, records.len()));
            let got: Vec<Vec<u8>> = decode_segment(frame.segment).expect("decodes").into_iter().map(<[u8]>::to_vec).collect();
            prop_assert_eq!(got, records);
        }

        /// Any truncation of a frame is short or corrupt, never a whole frame.
        #[test]
        fn any_truncation_is_detected(
            records in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 0..20),
            cut in any::<proptest::sample::Index>(),
        ) {
            let f = frame_of(&records, 1, 2);
            let keep = cut.index(f.len());
            prop_assert!(!matches!(parse(&f[..keep]), Parsed::Whole(..)));
        }

        /// Any single bit flipped anywhere in a frame is detected.
        #[test]
        fn any_bit_flip_is_detected(
            records in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 0..20),
            at in any::<proptest::sample::Index>(),
            bit in 0u8..8,
        ) {
            let mut f = frame_of(&records, 1, 2);
            let i = at.index(f.len());
            f[i] ^= 1 << bit;
            prop_assert!(!matches!(parse(&f), Parsed::Whole(..)));
        }
    }
}
