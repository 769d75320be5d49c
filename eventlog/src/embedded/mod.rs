//! The embedded event log: append-only segment files per topic, in the log directory
//! `<data-dir>/log/`.
//!
//! ```text
//! <data-dir>/log/
//!   topics/t-<topic>/00000000000000000000.log   segment files, named by first offset
//!   topics/t-<topic>/00000000000004194304.log
//!   offsets.redb                                consumer offsets, first retained offsets
//!   events.redb.migrated                        the previous format, once converted
//! ```
//!
//! **Format** (`frame.rs`): one frame per group commit and topic, `u32` length, `u32`
//! CRC32C, then the first offset, the commit time and the records (count, then
//! length-prefixed bytes), little-endian. Every record has its own offset (first
//! offset + position in the frame). A segment file is rolled once it passes an eighth
//! of the retention byte budget (between 1 and 64 MiB); its name is the offset of its
//! first record, so the last one also holds the next offset when retention emptied
//! the topic. The index (per group commit: offset, position, length, time; 32 bytes)
//! is in memory, rebuilt at open by reading every retained frame once (`topic.rs`).
//!
//! **Group commit** (`writer.rs`): appends go through a bounded queue to one writer
//! thread, which takes everything waiting (up to `batch_max`), writes one frame per
//! topic with one positioned `write`, `fdatasync`s, then publishes the frames to
//! readers and acknowledges every append of the batch. An append is acknowledged only
//! after its frame is on disk: a `kill -9` loses no acknowledged record. A full queue
//! is back-pressure, refused at once.
//!
//! **Recovery**: frames are written in order and acknowledged after their sync, so a
//! crash can only leave a torn frame at the end of the last segment, never an
//! acknowledged one; the open truncates the last segment after its last whole frame
//! (length fits, CRC matches, offsets continue) and logs what it dropped.
//!
//! **Retention** ([`retention`]) removes whole group commits from the front of a topic
//! once they are past the age or size limit **and** every consumer group that
//! committed on the topic has committed past them; a topic no group has committed on
//! keeps everything. Consumer offsets and the first retained offsets live in a tiny
//! redb database (`state.rs`): small, rare, atomic writes.
//!
//! **Why not redb for the records** (as before, [`legacy`]): a B-tree commit rewrote
//! and fsynced about 48 KB of pages per group commit for a few KB of records; a frame
//! appended to a file is written once, plus the file's size in the `fdatasync`.
//! `benches/src/bin/logbench.rs` measures both in one run (BENCHMARKS.md): about 0.3x
//! the bytes written and 0.55x the CPU per record at 64 records per commit, 0.16x the
//! bytes at 8. A log written by the previous version is converted at open, offsets
//! preserved ([`migrate`]).
//!
//! The directory is locked by the process that opens it (through `offsets.redb`):
//! services sharing the embedded log run in one process (`retail-media all`);
//! separate processes use Kafka.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::{oneshot, Notify};

use crate::config::EmbeddedLogConfig;
use crate::{EventLog, LogError};

mod frame;
pub mod legacy;
pub mod migrate;
pub mod retention;
mod state;
mod topic;
mod writer;

#[cfg(test)]
mod tests;

pub use retention::{Removed, RetentionStatus};
use state::State;
use topic::Topic;
use writer::{Append, Command, Writer};

/// Time of one group commit (write + fdatasync).
pub const COMMIT_SECONDS: &str = "eventlog_commit_seconds";
/// Records per group commit.
pub const COMMIT_RECORDS: &str = "eventlog_commit_records";

/// Largest segment file before the next one is started.
const MAX_SEGMENT_BYTES: u64 = 64 << 20;
/// Smallest segment size retention rolls at.
const MIN_SEGMENT_BYTES: u64 = 1 << 20;
/// Bytes read per `pread` at most.
const READ_CHUNK: u64 = 4 << 20;

pub(crate) struct Shared {
    pub dir: PathBuf,
    pub topics: Mutex<HashMap<String, Topic>>,
    pub state: State,
    pub segment_bytes: u64,
    /// Held by a retention pass.
    pub retention: Mutex<()>,
    pub healthy: AtomicBool,
    pub last_error: Mutex<Option<String>>,
    pub appended: Notify,
}

/// The embedded log. Cheap to clone; all clones share one writer.
#[derive(Clone)]
pub struct EmbeddedLog {
    tx: SyncSender<Command>,
    shared: Arc<Shared>,
    policy: retention::Policy,
}

pub(crate) fn unavailable(e: impl std::fmt::Display) -> LogError {
    LogError::Unavailable(e.to_string())
}

/// Locks a mutex, also when a thread panicked holding it (the data stays consistent:
/// every critical section is a few assignments).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The segment size for a configuration: an eighth of the byte budget, 1 to 64 MiB.
fn segment_bytes(config: &EmbeddedLogConfig) -> u64 {
    match config.retention_bytes {
        0 => MAX_SEGMENT_BYTES,
        b => (b / 8).clamp(MIN_SEGMENT_BYTES, MAX_SEGMENT_BYTES),
    }
}

impl EmbeddedLog {
    /// Opens (or creates) the log in the directory `path` (see
    /// [`EmbeddedLogConfig::path`]) and starts its writer and retention threads. A
    /// torn tail is truncated; an `events.redb` of the previous version in the
    /// directory is converted first ([`migrate`]). Fails while another handle (in this
    /// or another process) has the directory open.
    pub fn open(path: &Path, config: &EmbeddedLogConfig) -> Result<Self, LogError> {
        Self::open_with(path, config, segment_bytes(config))
    }

    /// As [`Self::open`], rolling segments at `segment_bytes` (tests).
    pub(crate) fn open_with(
        path: &Path,
        config: &EmbeddedLogConfig,
        segment_bytes: u64,
    ) -> Result<Self, LogError> {
        if path.is_file() {
            return Err(unavailable(format!(
                "{} is a file: the embedded log is a directory (its previous redb file is converted when found as events.redb inside it)",
                path.display()
            )));
        }
        std::fs::create_dir_all(path)
            .map_err(|e| unavailable(format!("{}: {e}", path.display())))?;
        let state = State::open(path)?;
        migrate::run_if_needed(path, &state, segment_bytes)?;
        let mut topics = HashMap::new();
        let root = path.join("topics");
        if root.exists() {
            for entry in std::fs::read_dir(&root).map_err(unavailable)? {
                let entry = entry.map_err(unavailable)?;
                let Some(name) = topic::topic_name(&entry.file_name().to_string_lossy()) else {
                    continue;
                };
                let start = state.start(&name)?;
                topics.insert(name, Topic::open(entry.path(), start)?);
            }
        }
        let shared = Arc::new(Shared {
            dir: path.to_owned(),
            topics: Mutex::new(topics),
            state,
            segment_bytes: segment_bytes.max(1),
            retention: Mutex::new(()),
            healthy: AtomicBool::new(true),
            last_error: Mutex::new(None),
            appended: Notify::new(),
        });
        let policy = retention::Policy::new(config);
        let (stop_tx, stop_rx) = mpsc::channel();
        retention::spawn(Arc::clone(&shared), policy, stop_rx).map_err(unavailable)?;
        let (tx, rx) = mpsc::sync_channel(config.queue_max.max(1));
        let writer = Writer {
            shared: Arc::clone(&shared),
            batch_max: config.batch_max.max(1),
            _retention_stop: stop_tx,
        };
        std::thread::Builder::new()
            .name("eventlog-writer".into())
            .spawn(move || writer.run(rx))
            .map_err(unavailable)?;
        Ok(Self { tx, shared, policy })
    }

    /// Reads up to `max` records of `topic` starting at offset `from`. When retention
    /// removed `from`, reading starts at the earliest retained record (as Kafka's
    /// `auto.offset.reset=earliest`): the returned offsets say where it resumed.
    /// Only acknowledged (synced) records are read. Blocking: call it from a blocking
    /// context.
    pub fn read(
        &self,
        topic: &str,
        from: u64,
        max: usize,
    ) -> Result<Vec<(u64, Vec<u8>)>, LogError> {
        let (plan, from) = {
            let topics = lock(&self.shared.topics);
            let Some(t) = topics.get(topic) else {
                return Ok(Vec::new());
            };
            (t.plan(from, max, READ_CHUNK), from.max(t.start))
        };
        topic::read_planned(&plan, from, max)
    }

    /// The offset the next appended record of `topic` will get (0 when never written).
    /// It never decreases, also when retention removed every record.
    pub fn end_offset(&self, topic: &str) -> Result<u64, LogError> {
        Ok(lock(&self.shared.topics).get(topic).map_or(0, |t| t.next))
    }

    /// The next offset consumer `group` will read from `topic` (0 when it never committed).
    pub fn committed(&self, group: &str, topic: &str) -> Result<u64, LogError> {
        self.shared.state.committed(group, topic)
    }

    /// Durably stores the next offset consumer `group` will read from `topic`. From
    /// then on the group bounds retention on `topic`: nothing at or above its committed
    /// offset is removed.
    pub fn commit(&self, group: &str, topic: &str, next: u64) -> Result<(), LogError> {
        self.shared.state.commit(group, topic, next)
    }

    /// Resolves after the next group commit (for consumers waiting on new records).
    /// Wake-ups count from the moment this is called, not from its first poll.
    pub fn appended(&self) -> tokio::sync::futures::Notified<'_> {
        self.shared.appended.notified()
    }

    /// Appends one record and returns its offset once it is durable.
    pub async fn append_offset(&self, topic: &str, value: Vec<u8>) -> Result<u64, LogError> {
        let (ack, done) = oneshot::channel();
        let cmd = Command::Append(Append {
            topic: topic.to_owned(),
            value,
            ack,
        });
        match self.tx.try_send(cmd) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                return Err(LogError::Backpressure("writer queue full".into()))
            }
            Err(TrySendError::Disconnected(_)) => return Err(LogError::Closed),
        }
        done.await.map_err(|_| LogError::Closed)?
    }

    /// Where retention stands on `topic` (`None` for a topic never written).
    /// Blocking: call it from a blocking context.
    pub fn retention_status(&self, topic: &str) -> Result<Option<RetentionStatus>, LogError> {
        retention::status(&self.shared, topic)
    }

    /// Runs one retention pass now (the retention thread runs one every check
    /// interval) and returns what it removed per topic. Blocking.
    pub fn enforce_retention(&self) -> Result<Vec<(String, Removed)>, LogError> {
        self.enforce_retention_at(retention::now_ms())
    }

    /// As [`Self::enforce_retention`], as if the clock read `now_ms` (tests).
    pub(crate) fn enforce_retention_at(
        &self,
        now_ms: u64,
    ) -> Result<Vec<(String, Removed)>, LogError> {
        Ok(retention::enforce(&self.shared, &self.policy, now_ms)?
            .into_iter()
            .map(|(topic, removed, _)| (topic, removed))
            .collect())
    }
}

impl EventLog for EmbeddedLog {
    async fn append(&self, topic: &str, _key: &[u8], value: Vec<u8>) -> Result<(), LogError> {
        self.append_offset(topic, value).await.map(|_offset| ())
    }

    fn readiness(&self) -> Result<(), String> {
        if self.shared.healthy.load(Ordering::Relaxed) {
            Ok(())
        } else {
            let why = self
                .shared
                .last_error
                .lock()
                .map(|e| e.clone())
                .unwrap_or(None);
            Err(format!("embedded log failing: {}", why.unwrap_or_default()))
        }
    }

    async fn flush(&self, deadline: Duration) -> Result<(), LogError> {
        // Every append is durable before it is acknowledged; a flush waits for the
        // writer to drain what is queued.
        let (ack, done) = oneshot::channel();
        let tx = self.tx.clone();
        // The queue may be full: hand the blocking send to a blocking thread.
        let send = tokio::task::spawn_blocking(move || tx.send(Command::Flush(ack)).is_ok());
        match tokio::time::timeout(deadline, async {
            send.await.unwrap_or(false) && done.await.is_ok()
        })
        .await
        {
            Ok(true) => Ok(()),
            Ok(false) => Err(LogError::Closed),
            Err(_) => Err(LogError::Unavailable("flush deadline passed".into())),
        }
    }
}
