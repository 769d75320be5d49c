//! Retention of the embedded log: removes whole group commits from the front of a topic.
//!
//! A group commit is removed when (a) it is older than the retention time **or** the
//! topic holds more than its byte budget (oldest first), **and** (b) every record in it
//! is below the committed offset of every consumer group that has committed on the
//! topic. A record some group has not committed is never removed, whatever the limits.
//! A topic on which no group has ever committed keeps everything: nobody has said what
//! it has read, so removing would be guessing ([`RetentionStatus::committed_floor`] is
//! `None` then, `eventlog_retention_consumer_groups` is 0 and a warning is logged once
//! the topic is past a limit). These are the rules of the previous (redb) format; the
//! byte budget counts the same bytes (each group commit's segment: count, lengths and
//! records), not the 24 bytes of framing per commit.
//!
//! **How.** A pass first records the topic's new first retained offset durably
//! (`__log_start` in `offsets.redb`), then drops the group commits below it from the
//! index and deletes the segment files wholly below it (never the last one). A crash
//! in between leaves files that the next open deletes; a reopened log never shows a
//! record below the recorded start. Disk use is thus the retained bytes plus at most
//! about one segment: segments roll at an eighth of the byte budget (1 to 64 MiB).
//!
//! **Offsets stay monotonic**: the last segment is never deleted and is named by its
//! first offset, so a topic emptied by retention continues where it ended. A reader
//! asking for an offset below the earliest retained one gets the earliest retained
//! records ([`super::EmbeddedLog::read`]), like Kafka's `auto.offset.reset=earliest`.
//!
//! **Where it runs.** On its own thread (`eventlog-retention`), waking every check
//! interval; it ends when the writer does. A pass holds the index lock only to decide
//! and to drop entries, never during I/O, so appends do not wait on it.

use std::collections::HashSet;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::Duration;

use super::topic::sync_dir;
use super::{lock, Shared};
use crate::config::EmbeddedLogConfig;
use crate::LogError;

/// Records removed by retention, per topic.
pub const REMOVED_RECORDS: &str = "eventlog_retention_removed_records_total";
/// Segment bytes removed by retention, per topic.
pub const REMOVED_BYTES: &str = "eventlog_retention_removed_bytes_total";
/// Segment bytes retained, per topic.
pub const RETAINED_BYTES: &str = "eventlog_retained_bytes";
/// Age of the oldest retained group commit, per topic.
pub const OLDEST_RETAINED_AGE: &str = "eventlog_oldest_retained_age_seconds";
/// Consumer groups bounding retention, per topic (0: retention removes nothing).
pub const CONSUMER_GROUPS: &str = "eventlog_retention_consumer_groups";

/// Milliseconds since the unix epoch (0 if the clock is before it).
pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

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
    /// Group commits removed.
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
    /// Segment bytes of the retained group commits.
    pub retained_bytes: u64,
    /// Commit time (unix millis) of the oldest retained group commit, if any.
    pub oldest_ms: Option<u64>,
}

/// Where retention stands on `topic` (`None` for a topic never written).
pub(crate) fn status(shared: &Shared, topic: &str) -> Result<Option<RetentionStatus>, LogError> {
    let (consumer_groups, committed_floor) = shared.state.consumer_floor(topic)?;
    let topics = lock(&shared.topics);
    let Some(t) = topics.get(topic) else {
        return Ok(None);
    };
    let oldest_ms = t.batches().next().map(|b| b.time_ms);
    Ok(Some(RetentionStatus {
        consumer_groups,
        committed_floor,
        first_offset: t.start,
        end_offset: t.next,
        retained_bytes: t.bytes,
        oldest_ms,
    }))
}

/// What a pass would remove from `topic` and the first offset it would keep.
fn plan(shared: &Shared, topic: &str, floor: u64, policy: &Policy, now: u64) -> (Removed, u64) {
    let topics = lock(&shared.topics);
    let mut removed = Removed::default();
    let Some(t) = topics.get(topic) else {
        return (removed, 0);
    };
    let cutoff = policy.max_age_ms.map(|a| now.saturating_sub(a));
    let mut start = t.start;
    for b in t.batches() {
        if b.end() > floor {
            break; // a group has not committed all of it
        }
        let too_old = cutoff.is_some_and(|c| b.time_ms < c);
        let too_big = policy
            .max_bytes
            .is_some_and(|m| t.bytes - removed.bytes > m);
        if !(too_old || too_big) {
            break;
        }
        start = b.end();
        removed.segments += 1;
        removed.records += u64::from(b.count);
        removed.bytes += b.seg_bytes();
    }
    (removed, start)
}

/// Removes what retention allows from `topic`.
fn remove(shared: &Shared, topic: &str, policy: &Policy, now: u64) -> Result<Removed, LogError> {
    let (_, floor) = shared.state.consumer_floor(topic)?;
    let Some(floor) = floor else {
        return Ok(Removed::default());
    };
    let (removed, start) = plan(shared, topic, floor, policy, now);
    if removed.segments == 0 {
        return Ok(removed);
    }
    shared.state.set_starts(&[(topic.to_owned(), start)])?;
    let (files, dir) = {
        let mut topics = lock(&shared.topics);
        match topics.get_mut(topic) {
            Some(t) => (t.remove_below(start), t.dir.clone()),
            None => return Ok(removed),
        }
    };
    if !files.is_empty() {
        for f in &files {
            if let Err(e) = std::fs::remove_file(f) {
                tracing::warn!(error = %e, file = %f.display(), "event log: cannot delete a removed segment");
            }
        }
        sync_dir(&dir)?;
    }
    Ok(removed)
}

/// One retention pass over every topic at time `now` (unix millis); updates the
/// retention metrics and returns what it removed, per topic.
pub(crate) fn enforce(
    shared: &Shared,
    policy: &Policy,
    now: u64,
) -> Result<Vec<(String, Removed, RetentionStatus)>, LogError> {
    let _one_pass_at_a_time = lock(&shared.retention);
    let mut topics: Vec<String> = lock(&shared.topics).keys().cloned().collect();
    topics.sort_unstable();
    let mut out = Vec::with_capacity(topics.len());
    for topic in topics {
        let total = remove(shared, &topic, policy, now)?;
        let Some(st) = status(shared, &topic)? else {
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
                "log retention removed group commits"
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
                match enforce(&shared, &policy, now) {
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
