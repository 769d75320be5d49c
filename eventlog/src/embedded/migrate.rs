//! Conversion of a log written by the previous version (`events.redb` in the log
//! directory, the [`super::legacy`] format) into segment files, once, at open.
//!
//! Every retained row (group commit) becomes one frame with the same first offset and
//! its commit time (rows of a log older than retention have none: they are dated now,
//! as the previous version dated them), so every record keeps its offset; a topic whose
//! records were all removed keeps its next offset as an empty segment named by it. The
//! consumer offsets are copied as they are, and the first retained offset of each
//! topic is recorded, in one transaction together with the marker that the
//! conversion is complete. Only then is `events.redb` renamed `events.redb.migrated`
//! (kept, for a downgrade or a look; it can be deleted).
//!
//! A crash before the marker leaves `events.redb` in place and the next open starts
//! the conversion over (the partial `topics/` is removed first: a `"migrating"` mark,
//! written before the first segment file, says it is partial); a crash between the
//! marker and the rename only redoes the rename. An `events.redb` found beside segment
//! files no conversion wrote is refused, not merged.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use redb::{Database, ReadableDatabase, ReadableTable, TableHandle};

use super::frame;
use super::legacy::format::{
    log_table, segment_count, time_name, time_table, TopicMeta, LOG_PREFIX, OFFSETS, TOPICS,
};
use super::retention::now_ms;
use super::state::State;
use super::topic::{create_segment, sync_dir, topic_dir};
use super::unavailable;
use crate::LogError;

/// The previous version's log file in the log directory.
pub const LEGACY_FILE: &str = "events.redb";
/// What it is renamed to once converted.
pub const MIGRATED_FILE: &str = "events.redb.migrated";

/// Converts `root/events.redb` when there is one.
pub(crate) fn run_if_needed(
    root: &Path,
    state: &State,
    segment_bytes: u64,
) -> Result<(), LogError> {
    let legacy = root.join(LEGACY_FILE);
    if !legacy.exists() {
        return Ok(());
    }
    if !state.migrated()? {
        let topics = root.join("topics");
        let has_segments = std::fs::read_dir(&topics).is_ok_and(|mut d| d.next().is_some());
        if has_segments && !state.migrating()? {
            // Segment files this version wrote, and an old file put beside them.
            return Err(unavailable(format!(
                "{} holds both segment files and {LEGACY_FILE}: move one of them away",
                root.display()
            )));
        }
        state.begin_migration()?;
        if topics.exists() {
            std::fs::remove_dir_all(&topics).map_err(unavailable)?;
        }
        let (offsets, starts) = convert(&legacy, root, segment_bytes)?;
        state.finish_migration(&offsets, &starts)?;
        tracing::info!(
            topics = starts.len(),
            consumer_offsets = offsets.len(),
            "event log: converted {} to segment files",
            legacy.display()
        );
    }
    std::fs::rename(&legacy, root.join(MIGRATED_FILE)).map_err(unavailable)?;
    sync_dir(root)
}

type Rows = Vec<(String, u64)>;

/// Writes the segment files of every topic of `legacy`; returns its consumer offsets
/// and each topic's first retained offset.
fn convert(legacy: &Path, root: &Path, segment_bytes: u64) -> Result<(Rows, Rows), LogError> {
    let db =
        Database::open(legacy).map_err(|e| unavailable(format!("{}: {e}", legacy.display())))?;
    let r = db.begin_read().map_err(unavailable)?;
    let names: Vec<String> = r
        .list_tables()
        .map_err(unavailable)?
        .map(|h| h.name().to_owned())
        .filter(|n| n.starts_with(LOG_PREFIX))
        .collect();
    let metas = match r.open_table(TOPICS) {
        Ok(t) => Some(t),
        Err(redb::TableError::TableDoesNotExist(_)) => None,
        Err(e) => return Err(unavailable(e)),
    };
    let adopted = now_ms();
    let mut starts = Vec::new();
    for name in names {
        let topic = &name[LOG_PREFIX.len()..];
        let meta = match &metas {
            Some(t) => t
                .get(topic)
                .map_err(unavailable)?
                .map(|m| TopicMeta::from_row(m.value())),
            None => None,
        };
        let adopted_ms = meta.map_or(adopted, |m| m.adopted_ms);
        let log = r.open_table(log_table(&name)).map_err(unavailable)?;
        let tname = time_name(topic);
        let times = match r.open_table(time_table(&tname)) {
            Ok(t) => Some(t),
            Err(redb::TableError::TableDoesNotExist(_)) => None,
            Err(e) => return Err(unavailable(e)),
        };
        let dir = topic_dir(root, topic);
        std::fs::create_dir_all(&dir).map_err(unavailable)?;
        let mut first = None;
        let mut next = 0u64;
        let mut out: Option<(BufWriter<File>, u64)> = None;
        let mut buf = Vec::new();
        for row in log.iter().map_err(unavailable)? {
            let (k, v) = row.map_err(unavailable)?;
            let (base, seg) = (k.value(), v.value());
            if first.is_some() && base != next {
                return Err(unavailable(format!(
                    "{}: topic {topic} has a gap at offset {next} (next row at {base})",
                    legacy.display()
                )));
            }
            first.get_or_insert(base);
            let time = match &times {
                Some(t) => t.get(base).map_err(unavailable)?.map(|t| t.value()),
                None => None,
            }
            .unwrap_or(adopted_ms);
            let records = frame::decode_segment(seg)?;
            frame::encode(&mut buf, base, time, records.iter().copied());
            let (w, len) = match out.take() {
                Some((w, len)) if len < segment_bytes => (w, len),
                previous => {
                    if let Some((w, _)) = previous {
                        finish(w)?;
                    }
                    let s = create_segment(&dir, base)?;
                    let f = std::sync::Arc::try_unwrap(s.file)
                        .map_err(|_| unavailable("segment file shared"))?;
                    (BufWriter::with_capacity(1 << 20, f), 0)
                }
            };
            let mut w = w;
            w.write_all(&buf).map_err(unavailable)?;
            out = Some((w, len + buf.len() as u64));
            next = base + segment_count(seg);
        }
        if let Some((w, _)) = out {
            finish(w)?;
        }
        let end = meta.map_or(next, |m| m.next.max(next));
        if first.is_none() {
            create_segment(&dir, end)?;
        }
        sync_dir(&dir)?;
        starts.push((topic.to_owned(), first.unwrap_or(end)));
    }
    if let Some(parent) = topic_dir(root, "").parent() {
        if parent.exists() {
            sync_dir(parent)?;
        }
    }
    let mut offsets = Vec::new();
    match r.open_table(OFFSETS) {
        Ok(t) => {
            for row in t.iter().map_err(unavailable)? {
                let (k, v) = row.map_err(unavailable)?;
                offsets.push((k.value().to_owned(), v.value()));
            }
        }
        Err(redb::TableError::TableDoesNotExist(_)) => {}
        Err(e) => return Err(unavailable(e)),
    }
    Ok((offsets, starts))
}

fn finish(w: BufWriter<File>) -> Result<(), LogError> {
    let f = w.into_inner().map_err(|e| unavailable(e.error()))?;
    f.sync_all().map_err(unavailable)
}
