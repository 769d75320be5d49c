//! Retention of the embedded log: removes whole segments from the front of a topic.
//!
//! A segment is removed when (a) it is older than the retention time **or** the topic
//! holds more than its byte budget (oldest first), **and** (b) every record in it is
//! below the committed offset of every consumer group that has committed on the topic.
//! A record some group has not committed is never removed, whatever the limits. A
//! topic on which no group has ever committed keeps everything: nobody has said what
//! it has read, so removing would be guessing ([`RetentionStatus::committed_floor`] is
//! `None` then, `eventlog_retention_consumer_groups` is 0 and a warning is logged once
//! the topic is past a limit).
//!
//! **Time of a segment.** New segments have a `logtime/<topic>` row (the commit time).
//! Segments written by the version before retention have none; they are dated by the
//! topic's `adopted_ms`, the moment this version first opened the log. That is the
//! conservative choice: an old segment is kept at least the retention time after the
//! upgrade, never removed by time earlier (the size budget still applies at once).
//!
//! **Offsets stay monotonic.** The next offset lives in `__log_topics`, not in the last
//! segment, so a topic emptied by retention continues where it ended. A reader asking
//! for an offset below the earliest retained one gets the earliest retained records
//! ([`super::RedbLog::read`]), like Kafka's `auto.offset.reset=earliest`.
//!
//! **Where it runs.** On its own thread (`eventlog-retention`), waking every check
//! interval, rather than on the writer between commits: the writer sleeps in `recv`
//! while no appends come, and retention still has work then (a consumer catching up
//! after traffic stopped unblocks segments). redb serialises write transactions, so a
//! pass and a group commit never interleave; a pass removes at most
//! [`CHUNK_SEGMENTS`] segments per transaction, so an append waits for at most one
//! short transaction. The thread ends when the writer does.
//!
//! **Disk.** redb reuses the pages a removal frees, so under steady traffic the file
//! plateaus instead of growing; it does not shrink (`long_stream_file_plateaus` in the
//! tests measures it).

use std::collections::HashSet;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::Duration;

use redb::{Database, ReadableDatabase, ReadableTable, TableHandle, WriteTransaction};

use super::format::{
    log_name, log_table, now_ms, segment_count, time_name, time_table, TopicMeta, LOG_PREFIX,
    OFFSETS, TOPICS,
};
use super::{unavailable, Shared};
use crate::config::EmbeddedLogConfig;
use crate::LogError;

/// Segments removed per write transaction at most.
pub const CHUNK_SEGMENTS: u64 = 2048;

/// Records removed by retention, per topic.
pub const REMOVED_RECORDS: &str = "eventlog_retention_removed_records_total";
/// Segment bytes removed by retention, per topic.
pub const REMOVED_BYTES: &str = "eventlog_retention_removed_bytes_total";
/// Segment bytes retained, per topic.
pub const RETAINED_BYTES: &str = "eventlog_retained_bytes";
/// Age of the oldest retained segment, per topic.
pub const OLDEST_RETAINED_AGE: &str = "eventlog_oldest_retained_age_seconds";
/// Consumer groups bounding retention, per topic (0: retention removes nothing).
pub const CONSUMER_GROUPS: &str = "eventlog_retention_consumer_groups";

/// The retention limits, from [`EmbeddedLogConfig`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Policy {
    max_age_ms: Option<u64>,
    max_bytes: Option<u64>,
    interval: Duration,
}

impl Policy {
    pub(crate) fn new(config: &EmbeddedLogConfig) -> Self {
        Self {
            max_age_ms: (config.retention_hours > 0)
                .then(|| config.retention_hours.saturating_mul(3_600_000)),
            max_bytes: (config.retention_bytes > 0).then_some(config.retention_bytes),
            interval: Duration::from_secs(config.retention_check_secs.max(1)),
        }
    }

    /// True when a topic in `status` is past a limit at `now`.
    fn exceeded(&self, status: &RetentionStatus, now: u64) -> bool {
        self.max_bytes.is_some_and(|b| status.retained_bytes > b)
            || self
                .max_age_ms
                .is_some_and(|a| status.oldest_ms.is_some_and(|t| t < now.saturating_sub(a)))
    }
}

/// What one retention pass removed from one topic.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Removed {
    /// Segments (group commits) removed.
    pub segments: u64,
    /// Records removed.
    pub records: u64,
    /// Segment bytes removed.
    pub bytes: u64,
}

/// Where retention stands on one topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetentionStatus {
    /// Consumer groups that have committed on the topic.
    pub consumer_groups: usize,
    /// The lowest offset those groups committed: nothing at or above it is removed.
    /// `None` when no group has committed: then nothing at all is removed.
    pub committed_floor: Option<u64>,
    /// The earliest retained offset (the end offset when nothing is retained).
    pub first_offset: u64,
    /// The offset the next append gets.
    pub end_offset: u64,
    /// Bytes of the retained segments.
    pub retained_bytes: u64,
    /// Commit time (unix millis) of the oldest retained segment, if any.
    pub oldest_ms: Option<u64>,
}

/// The number of groups committed on `topic` and their lowest next offset.
fn consumer_floor(
    offsets: &impl ReadableTable<&'static str, u64>,
    topic: &str,
) -> Result<(usize, Option<u64>), LogError> {
    let suffix = format!("/{topic}");
    let mut groups = 0;
    let mut floor: Option<u64> = None;
    for row in offsets.iter().map_err(unavailable)? {
        let (k, v) = row.map_err(unavailable)?;
        if k.value().ends_with(&suffix) {
            groups += 1;
            floor = Some(floor.map_or(v.value(), |f| f.min(v.value())));
        }
    }
    Ok((groups, floor))
}

/// Rebuilds the `__log_topics` row of every topic written before it existed (one scan
/// of such a topic, once, at open); their segments are dated `now`.
pub(crate) fn adopt_topics(w: &WriteTransaction) -> Result<(), LogError> {
    let names: Vec<String> = w
        .list_tables()
        .map_err(unavailable)?
        .map(|h| h.name().to_owned())
        .filter(|n| n.starts_with(LOG_PREFIX))
        .collect();
    let mut topics = w.open_table(TOPICS).map_err(unavailable)?;
    for name in names {
        let topic = &name[LOG_PREFIX.len()..];
        if topics.get(topic).map_err(unavailable)?.is_some() {
            continue;
        }
        let t = w.open_table(log_table(&name)).map_err(unavailable)?;
        let (mut bytes, mut next) = (0u64, 0u64);
        for row in t.iter().map_err(unavailable)? {
            let (k, v) = row.map_err(unavailable)?;
            bytes += v.value().len() as u64;
            next = k.value() + segment_count(v.value());
        }
        let meta = TopicMeta {
            next,
            bytes,
            adopted_ms: now_ms(),
        };
        topics.insert(topic, meta.row()).map_err(unavailable)?;
        tracing::info!(
            topic,
            next,
            bytes,
            "adopted a log topic written before retention"
        );
    }
    Ok(())
}

/// Where retention stands on `topic` (`None` for a topic never written).
pub(crate) fn status(db: &Database, topic: &str) -> Result<Option<RetentionStatus>, LogError> {
    let r = db.begin_read().map_err(unavailable)?;
    let topics = r.open_table(TOPICS).map_err(unavailable)?;
    let Some(meta) = topics.get(topic).map_err(unavailable)? else {
        return Ok(None);
    };
    let meta = TopicMeta::from_row(meta.value());
    let (consumer_groups, committed_floor) =
        consumer_floor(&r.open_table(OFFSETS).map_err(unavailable)?, topic)?;
    let name = log_name(topic);
    let log = r.open_table(log_table(&name)).map_err(unavailable)?;
    let first = log.first().map_err(unavailable)?.map(|(k, _)| k.value());
    let oldest_ms = match first {
        None => None,
        Some(k) => {
            let tname = time_name(topic);
            Some(match r.open_table(time_table(&tname)) {
                Ok(t) => t
                    .get(k)
                    .map_err(unavailable)?
                    .map_or(meta.adopted_ms, |v| v.value()),
                Err(redb::TableError::TableDoesNotExist(_)) => meta.adopted_ms,
                Err(e) => return Err(unavailable(e)),
            })
        }
    };
    Ok(Some(RetentionStatus {
        consumer_groups,
        committed_floor,
        first_offset: first.unwrap_or(meta.next),
        end_offset: meta.next,
        retained_bytes: meta.bytes,
        oldest_ms,
    }))
}

/// Removes up to [`CHUNK_SEGMENTS`] segments of `topic` in one transaction.
fn remove_chunk(
    db: &Database,
    topic: &str,
    policy: &Policy,
    now: u64,
) -> Result<Removed, LogError> {
    let w = db.begin_write().map_err(unavailable)?;
    let mut removed = Removed::default();
    {
        let (_, floor) = consumer_floor(&w.open_table(OFFSETS).map_err(unavailable)?, topic)?;
        let mut topics = w.open_table(TOPICS).map_err(unavailable)?;
        let meta = topics.get(topic).map_err(unavailable)?.map(|m| m.value());
        let (Some(floor), Some(meta)) = (floor, meta) else {
            return Ok(removed);
        };
        let mut meta = TopicMeta::from_row(meta);
        let (name, tname) = (log_name(topic), time_name(topic));
        let mut log = w.open_table(log_table(&name)).map_err(unavailable)?;
        let mut times = w.open_table(time_table(&tname)).map_err(unavailable)?;
        let cutoff = policy.max_age_ms.map(|a| now.saturating_sub(a));
        while removed.segments < CHUNK_SEGMENTS {
            let Some((first, count, len)) = log
                .first()
                .map_err(unavailable)?
                .map(|(k, v)| (k.value(), segment_count(v.value()), v.value().len() as u64))
            else {
                break;
            };
            if first + count > floor {
                break; // a group has not committed all of it
            }
            let time = times
                .get(first)
                .map_err(unavailable)?
                .map_or(meta.adopted_ms, |t| t.value());
            let too_old = cutoff.is_some_and(|c| time < c);
            let too_big = policy.max_bytes.is_some_and(|b| meta.bytes > b);
            if !(too_old || too_big) {
                break;
            }
            log.remove(first).map_err(unavailable)?;
            times.remove(first).map_err(unavailable)?;
            meta.bytes = meta.bytes.saturating_sub(len);
            removed.segments += 1;
            removed.records += count;
            removed.bytes += len;
        }
        if removed.segments > 0 {
            topics.insert(topic, meta.row()).map_err(unavailable)?;
        }
    }
    if removed.segments > 0 {
        w.commit().map_err(unavailable)?;
    } else {
        w.abort().map_err(unavailable)?;
    }
    Ok(removed)
}

/// One retention pass over every topic at time `now` (unix millis); updates the
/// retention metrics and returns what it removed, per topic.
pub(crate) fn enforce(
    db: &Database,
    policy: &Policy,
    now: u64,
) -> Result<Vec<(String, Removed, RetentionStatus)>, LogError> {
    let topics: Vec<String> = {
        let r = db.begin_read().map_err(unavailable)?;
        let t = r.open_table(TOPICS).map_err(unavailable)?;
        let mut names = Vec::new();
        for row in t.iter().map_err(unavailable)? {
            names.push(row.map_err(unavailable)?.0.value().to_owned());
        }
        names
    };
    let mut out = Vec::with_capacity(topics.len());
    for topic in topics {
        let mut total = Removed::default();
        loop {
            let r = remove_chunk(db, &topic, policy, now)?;
            total.segments += r.segments;
            total.records += r.records;
            total.bytes += r.bytes;
            if r.segments < CHUNK_SEGMENTS {
                break;
            }
        }
        let Some(st) = status(db, &topic)? else {
            continue;
        };
        let label = [("topic", topic.clone())];
        metrics::counter!(REMOVED_RECORDS, &label).increment(total.records);
        metrics::counter!(REMOVED_BYTES, &label).increment(total.bytes);
        metrics::gauge!(RETAINED_BYTES, &label).set(st.retained_bytes as f64);
        metrics::gauge!(CONSUMER_GROUPS, &label).set(st.consumer_groups as f64);
        let age = st.oldest_ms.map_or(0, |t| now.saturating_sub(t));
        metrics::gauge!(OLDEST_RETAINED_AGE, &label).set(age as f64 / 1000.0);
        if total.segments > 0 {
            tracing::debug!(
                topic,
                records = total.records,
                bytes = total.bytes,
                "log retention removed segments"
            );
        }
        out.push((topic, total, st));
    }
    Ok(out)
}

/// Starts the retention thread; it ends when `stop` disconnects (the writer ended).
pub(crate) fn spawn(
    shared: Arc<Shared>,
    policy: Policy,
    stop: Receiver<()>,
) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("eventlog-retention".into())
        .spawn(move || {
            // Topics past a limit that no group bounds: warned about once each.
            let mut warned: HashSet<String> = HashSet::new();
            while let Err(RecvTimeoutError::Timeout) = stop.recv_timeout(policy.interval) {
                let now = now_ms();
                match enforce(&shared.db, &policy, now) {
                    Ok(topics) => {
                        for (topic, _, st) in topics {
                            if st.committed_floor.is_none() && policy.exceeded(&st, now) {
                                if warned.insert(topic.clone()) {
                                    tracing::warn!(
                                        topic,
                                        retained_bytes = st.retained_bytes,
                                        "log topic past its retention limits but no consumer group has committed on it: nothing is removed"
                                    );
                                }
                            } else {
                                warned.remove(&topic);
                            }
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "log retention pass failed"),
                }
            }
            tracing::debug!("event log retention stopped");
        })
        .map(|_| ())
}
