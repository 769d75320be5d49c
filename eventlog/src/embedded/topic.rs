//! One topic on disk and its in-memory index: the segment files of
//! `topics/<name>/`, each named by the offset of its first record
//! (`00000000000000000042.log`), and per segment the group commits it holds (offset,
//! position, length, record count, commit time: 32 bytes each in memory).
//!
//! **Recovery at open** reads every segment once, frame by frame ([`super::frame`]):
//! each frame must be whole, pass its CRC and continue the offsets of the one before.
//! In the last segment the first frame that does not is a torn write (the writer
//! died between `write` and `fdatasync`, or the disk kept only part of it): the file
//! is truncated there and synced. Nothing past it was acknowledged, because an append
//! is acknowledged only after the `fdatasync` of its frame and frames are written in
//! order. A bad frame in an earlier segment is not a torn write (a segment is synced
//! before the next one is created): the open fails rather than drop records.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::frame::{self, Parsed, OVERHEAD};
use super::unavailable;
use crate::LogError;

/// One group commit in a segment file.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Batch {
    pub base: u64,
    pub pos: u64,
    pub len: u32,
    pub count: u32,
    pub time_ms: u64,
}

impl Batch {
    /// The offset after its last record.
    pub fn end(&self) -> u64 {
        self.base + u64::from(self.count)
    }

    /// Its segment bytes (count, lengths and records), what retention counts.
    pub fn seg_bytes(&self) -> u64 {
        u64::from(self.len) - OVERHEAD as u64
    }
}

/// One segment file.
pub(crate) struct Segment {
    pub path: PathBuf,
    pub file: Arc<File>,
    /// Bytes of whole, synced frames.
    pub len: u64,
    /// Its group commits still retained, in order.
    pub batches: Vec<Batch>,
}

/// One topic.
pub(crate) struct Topic {
    pub dir: PathBuf,
    /// Segments by the offset of their first record.
    pub segments: BTreeMap<u64, Segment>,
    /// The first retained offset.
    pub start: u64,
    /// The offset the next record gets.
    pub next: u64,
    /// Segment bytes of the retained group commits.
    pub bytes: u64,
}

/// The directory of `topic` under the log directory `root`: `topics/t-<name>`, the
/// name kept where it is `[A-Za-z0-9_.-]` and `%XX`-escaped elsewhere.
pub(crate) fn topic_dir(root: &Path, topic: &str) -> PathBuf {
    let mut name = String::from("t-");
    for b in topic.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.') {
            name.push(b as char);
        } else {
            name.push_str(&format!("%{b:02X}"));
        }
    }
    root.join("topics").join(name)
}

/// The topic a directory name of [`topic_dir`] stands for.
pub(crate) fn topic_name(dir_name: &str) -> Option<String> {
    let s = dir_name.strip_prefix("t-")?.as_bytes();
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s[i] == b'%' {
            let hex = std::str::from_utf8(s.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(s[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn segment_path(dir: &Path, base: u64) -> PathBuf {
    dir.join(format!("{base:020}.log"))
}

/// Fsyncs a directory, so that a file created or removed in it stays so.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), LogError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| unavailable(format!("{}: {e}", dir.display())))
}

fn io_err(path: &Path, e: std::io::Error) -> LogError {
    unavailable(format!("{}: {e}", path.display()))
}

/// Creates an empty segment file for `base` and makes its name durable.
pub(crate) fn create_segment(dir: &Path, base: u64) -> Result<Segment, LogError> {
    let path = segment_path(dir, base);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .map_err(|e| io_err(&path, e))?;
    file.sync_all().map_err(|e| io_err(&path, e))?;
    sync_dir(dir)?;
    Ok(Segment {
        path,
        file: Arc::new(file),
        len: 0,
        batches: Vec::new(),
    })
}

/// What a scan of one segment file found.
struct Scan {
    batches: Vec<Batch>,
    /// The offset after the last whole frame.
    next: u64,
    /// Bytes of whole frames.
    valid: u64,
    /// Why the scan stopped before the end of the file, if it did.
    stopped: Option<&'static str>,
}

/// Reads a segment file frame by frame from its start.
fn scan(file: &File, base: u64) -> std::io::Result<Scan> {
    let mut reader = std::io::BufReader::with_capacity(1 << 20, file);
    let mut buf: Vec<u8> = Vec::with_capacity(1 << 20);
    let mut at = 0usize; // start of the unparsed bytes in `buf`
    let mut pos = 0u64; // file position of `buf[at]`
    let mut out = Scan {
        batches: Vec::new(),
        next: base,
        valid: 0,
        stopped: None,
    };
    let mut eof = false;
    loop {
        match frame::parse(&buf[at..]) {
            Parsed::Whole(f, len) => {
                if f.base != out.next {
                    out.stopped = Some("offsets do not continue");
                    return Ok(out);
                }
                out.batches.push(Batch {
                    base: f.base,
                    pos,
                    len: len as u32,
                    count: f.count,
                    time_ms: f.time_ms,
                });
                out.next += u64::from(f.count);
                at += len;
                pos += len as u64;
                out.valid = pos;
            }
            Parsed::Corrupt(why) => {
                out.stopped = Some(why);
                return Ok(out);
            }
            Parsed::Short if eof => {
                if at < buf.len() {
                    out.stopped = Some("partial frame");
                }
                return Ok(out);
            }
            Parsed::Short => {
                buf.drain(..at);
                at = 0;
                let have = buf.len();
                buf.resize(have + (1 << 20), 0);
                let n = reader.read(&mut buf[have..])?;
                buf.truncate(have + n);
                eof = n == 0;
            }
        }
    }
}

impl Topic {
    /// Creates a new, empty topic under `root`.
    pub(crate) fn create(root: &Path, topic: &str) -> Result<Self, LogError> {
        let dir = topic_dir(root, topic);
        std::fs::create_dir_all(&dir).map_err(|e| io_err(&dir, e))?;
        if let Some(parent) = dir.parent() {
            sync_dir(parent)?;
        }
        Self::with_first_segment(dir, 0)
    }

    /// A topic whose only segment is a new, empty one starting at `base`.
    pub(crate) fn with_first_segment(dir: PathBuf, base: u64) -> Result<Self, LogError> {
        let seg = create_segment(&dir, base)?;
        Ok(Self {
            dir,
            segments: BTreeMap::from([(base, seg)]),
            start: base,
            next: base,
            bytes: 0,
        })
    }

    /// Opens the topic in `dir`, recovering a torn tail; `start` is the first
    /// retained offset recorded by retention, if any.
    pub(crate) fn open(dir: PathBuf, start: Option<u64>) -> Result<Self, LogError> {
        let mut bases: Vec<u64> = Vec::new();
        for entry in std::fs::read_dir(&dir).map_err(|e| io_err(&dir, e))? {
            let name = entry.map_err(|e| io_err(&dir, e))?.file_name();
            let name = name.to_string_lossy();
            if let Some(b) = name.strip_suffix(".log").and_then(|b| b.parse().ok()) {
                bases.push(b);
            }
        }
        bases.sort_unstable();
        let Some(&last) = bases.last() else {
            // Only a crash while the topic was created leaves no segment.
            return Self::with_first_segment(dir, start.unwrap_or(0));
        };
        let mut segments = BTreeMap::new();
        let mut next = bases[0];
        for base in bases {
            let path = segment_path(&dir, base);
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .open(&path)
                .map_err(|e| io_err(&path, e))?;
            if base != next {
                return Err(unavailable(format!(
                    "{}: starts at offset {base}, the segment before ends at {next}",
                    path.display()
                )));
            }
            let s = scan(&file, base).map_err(|e| io_err(&path, e))?;
            if let Some(why) = s.stopped {
                if base != last {
                    return Err(unavailable(format!(
                        "{}: corrupt frame at byte {} ({why})",
                        path.display(),
                        s.valid
                    )));
                }
                let size = file.metadata().map_err(|e| io_err(&path, e))?.len();
                tracing::warn!(
                    file = %path.display(),
                    at = s.valid,
                    dropped_bytes = size - s.valid,
                    reason = why,
                    "event log: torn tail after a crash, truncated to the last whole frame"
                );
                file.set_len(s.valid).map_err(|e| io_err(&path, e))?;
                file.sync_all().map_err(|e| io_err(&path, e))?;
            }
            next = s.next;
            segments.insert(
                base,
                Segment {
                    path,
                    file: Arc::new(file),
                    len: s.valid,
                    batches: s.batches,
                },
            );
        }
        let first = segments.keys().next().copied().unwrap_or(0);
        let mut topic = Self {
            dir,
            segments,
            start: first,
            next,
            bytes: 0,
        };
        topic.bytes = topic.batches().map(Batch::seg_bytes).sum();
        let start = start.unwrap_or(first).clamp(first, next);
        for path in topic.remove_below(start) {
            std::fs::remove_file(&path).map_err(|e| io_err(&path, e))?;
        }
        Ok(topic)
    }

    /// The retained group commits, in order.
    pub(crate) fn batches(&self) -> impl Iterator<Item = &Batch> + '_ {
        self.segments.values().flat_map(|s| s.batches.iter())
    }

    /// Raises the first retained offset to `start` (a group-commit boundary): drops
    /// the group commits below it and returns the segment files now wholly below it
    /// (never the last one), for the caller to delete.
    pub(crate) fn remove_below(&mut self, start: u64) -> Vec<PathBuf> {
        self.start = self.start.max(start);
        let last = self.segments.keys().next_back().copied();
        let mut gone = Vec::new();
        let mut emptied = Vec::new();
        for (base, seg) in &mut self.segments {
            let keep = seg.batches.partition_point(|b| b.end() <= self.start);
            for b in seg.batches.drain(..keep) {
                self.bytes -= b.seg_bytes();
            }
            if seg.batches.is_empty() && Some(*base) != last {
                emptied.push(*base);
            }
            if seg.batches.first().is_some_and(|b| b.base >= self.start) {
                break;
            }
        }
        for base in emptied {
            if let Some(seg) = self.segments.remove(&base) {
                gone.push(seg.path);
            }
        }
        gone
    }

    /// The last segment: where appends go.
    pub(crate) fn tail(&mut self) -> Option<&mut Segment> {
        self.segments.values_mut().next_back()
    }

    /// The byte ranges to read for records from `from` (at least the first retained)
    /// on, up to `max` records: (file, position, length) per run of frames in one
    /// file, at most `chunk` bytes each.
    pub(crate) fn plan(&self, from: u64, max: usize, chunk: u64) -> Vec<(Arc<File>, u64, u64)> {
        let from = from.max(self.start);
        let mut out: Vec<(Arc<File>, u64, u64)> = Vec::new();
        let mut records = 0usize;
        let first_seg = self
            .segments
            .range(..=from)
            .next_back()
            .map_or(0, |(b, _)| *b);
        for seg in self.segments.range(first_seg..).map(|(_, s)| s) {
            let skip = seg.batches.partition_point(|b| b.end() <= from);
            let mut run: Option<(u64, u64)> = None;
            for b in &seg.batches[skip..] {
                if records >= max {
                    break;
                }
                records += (b.end() - b.base.max(from)) as usize;
                run = match run {
                    Some((pos, len)) if len + u64::from(b.len) <= chunk.max(u64::from(b.len)) => {
                        Some((pos, len + u64::from(b.len)))
                    }
                    Some((pos, len)) => {
                        out.push((Arc::clone(&seg.file), pos, len));
                        Some((b.pos, u64::from(b.len)))
                    }
                    None => Some((b.pos, u64::from(b.len))),
                };
            }
            if let Some((pos, len)) = run {
                out.push((Arc::clone(&seg.file), pos, len));
            }
            if records >= max {
                break;
            }
        }
        out
    }
}

/// Reads the planned ranges and returns the records from offset `from` on, at most
/// `max`, each frame's CRC checked again.
pub(crate) fn read_planned(
    plan: &[(Arc<File>, u64, u64)],
    from: u64,
    max: usize,
) -> Result<Vec<(u64, Vec<u8>)>, LogError> {
    let mut out = Vec::new();
    let mut buf = Vec::new();
    for (file, pos, len) in plan {
        buf.resize(*len as usize, 0);
        file.read_exact_at(&mut buf, *pos).map_err(unavailable)?;
        let mut at = 0;
        while at < buf.len() {
            let Parsed::Whole(f, flen) = frame::parse(&buf[at..]) else {
                return Err(unavailable("corrupt frame in a segment file"));
            };
            for (i, rec) in frame::decode_segment(f.segment)?.into_iter().enumerate() {
                let off = f.base + i as u64;
                if off >= from {
                    if out.len() >= max {
                        return Ok(out);
                    }
                    out.push((off, rec.to_vec()));
                }
            }
            at += flen;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_names_round_trip_through_directory_names() {
        for t in ["events", "retail-media.events", "a/b", "", "..", "é %"] {
            let dir = topic_dir(Path::new("/x"), t);
            let name = dir
                .file_name()
                .expect("name")
                .to_string_lossy()
                .into_owned();
            assert!(!name.contains('/') && name.starts_with("t-"), "{name}");
            assert_eq!(topic_name(&name).as_deref(), Some(t));
        }
    }
}
