//! The embedded log's previous format, kept as the migration reader and as the
//! baseline of `logbench`: an append-only log per topic in one redb database
//! (`<data-dir>/log/events.redb` before the segment-file log).
//!
//! Each topic is a table `log/<topic>`: one row per group commit, keyed by the offset
//! of its first record, holding the records as a segment (a `u32` count, then per
//! record a `u32` length and the bytes). Consumer offsets are a table
//! `"group/topic" -> next offset`. The writer commits each batch with
//! `Durability::Immediate`; retention removes rows from the front (`retention.rs`).
//! The tables and their encoding are in `format.rs`; [`super::migrate`] reads them.
//!
//! Nothing opens this log in production any more: [`super::EmbeddedLog::open`]
//! converts an `events.redb` it finds. [`RedbLog`] still implements [`EventLog`] so
//! that `benches/src/bin/logbench.rs` can measure both formats in one run.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redb::{Database, ReadableDatabase};
use tokio::sync::{oneshot, Notify};

use crate::config::EmbeddedLogConfig;
use crate::{EventLog, LogError};

pub(crate) mod format;
pub(crate) mod retention;
mod writer;

use format::{decode_segment, log_name, log_table, offset_key, TopicMeta, OFFSETS, TOPICS};
pub use retention::{Removed, RetentionStatus};
use writer::{Append, Command, Writer};

use super::{COMMIT_RECORDS, COMMIT_SECONDS};

pub(crate) struct Shared {
    pub db: Database,
    pub healthy: AtomicBool,
    pub last_error: Mutex<Option<String>>,
    pub appended: Notify,
}

/// The redb log. Cheap to clone; all clones share one writer.
#[derive(Clone)]
pub struct RedbLog {
    tx: SyncSender<Command>,
    shared: Arc<Shared>,
    policy: retention::Policy,
}

pub(crate) fn unavailable(e: impl std::fmt::Display) -> LogError {
    LogError::Unavailable(e.to_string())
}

impl RedbLog {
    /// Opens (or creates) the log at `path` and starts its writer and retention
    /// threads. A log written before retention existed is adopted (one scan of each
    /// topic, once).
    pub fn open(path: &Path, config: &EmbeddedLogConfig) -> Result<Self, LogError> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| unavailable(format!("{}: {e}", dir.display())))?;
        }
        let db =
            Database::create(path).map_err(|e| unavailable(format!("{}: {e}", path.display())))?;
        let w = db.begin_write().map_err(unavailable)?;
        w.open_table(OFFSETS).map_err(unavailable)?;
        retention::adopt_topics(&w)?;
        w.commit().map_err(unavailable)?;
        let shared = Arc::new(Shared {
            db,
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
    /// Blocking: call it from a blocking context.
    pub fn read(
        &self,
        topic: &str,
        from: u64,
        max: usize,
    ) -> Result<Vec<(u64, Vec<u8>)>, LogError> {
        let r = self.shared.db.begin_read().map_err(unavailable)?;
        let name = log_name(topic);
        let table = match r.open_table(log_table(&name)) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
            Err(e) => return Err(unavailable(e)),
        };
        let mut out = Vec::with_capacity(max.min(4096));
        // The segment holding `from` starts at or before it; when there is none,
        // `from` was removed (or never written) and the range starts at the earliest.
        let first = match table.range(..=from).map_err(unavailable)?.next_back() {
            Some(row) => row.map_err(unavailable)?.0.value(),
            None => from,
        };
        for row in table.range(first..).map_err(unavailable)? {
            let (k, v) = row.map_err(unavailable)?;
            for (i, rec) in decode_segment(v.value())?.into_iter().enumerate() {
                let off = k.value() + i as u64;
                if off >= from {
                    if out.len() >= max {
                        return Ok(out);
                    }
                    out.push((off, rec.to_vec()));
                }
            }
        }
        Ok(out)
    }

    /// The offset the next appended record of `topic` will get (0 when never written).
    /// It never decreases, also when retention removed every record.
    pub fn end_offset(&self, topic: &str) -> Result<u64, LogError> {
        let r = self.shared.db.begin_read().map_err(unavailable)?;
        let t = r.open_table(TOPICS).map_err(unavailable)?;
        Ok(t.get(topic)
            .map_err(unavailable)?
            .map_or(0, |m| TopicMeta::from_row(m.value()).next))
    }

    /// The next offset consumer `group` will read from `topic` (0 when it never committed).
    pub fn committed(&self, group: &str, topic: &str) -> Result<u64, LogError> {
        let r = self.shared.db.begin_read().map_err(unavailable)?;
        let t = r.open_table(OFFSETS).map_err(unavailable)?;
        Ok(t.get(offset_key(group, topic).as_str())
            .map_err(unavailable)?
            .map_or(0, |v| v.value()))
    }

    /// Durably stores the next offset consumer `group` will read from `topic`. From
    /// then on the group bounds retention on `topic`: nothing at or above its committed
    /// offset is removed.
    pub fn commit(&self, group: &str, topic: &str, next: u64) -> Result<(), LogError> {
        let w = self.shared.db.begin_write().map_err(unavailable)?;
        {
            let mut t = w.open_table(OFFSETS).map_err(unavailable)?;
            t.insert(offset_key(group, topic).as_str(), next)
                .map_err(unavailable)?;
        }
        w.commit().map_err(unavailable)
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
        retention::status(&self.shared.db, topic)
    }

    /// Runs one retention pass now (the retention thread runs one every check
    /// interval) and returns what it removed per topic. Blocking.
    pub fn enforce_retention(&self) -> Result<Vec<(String, Removed)>, LogError> {
        self.enforce_retention_at(format::now_ms())
    }

    /// As [`Self::enforce_retention`], as if the clock read `now_ms` (tests).
    pub(crate) fn enforce_retention_at(
        &self,
        now_ms: u64,
    ) -> Result<Vec<(String, Removed)>, LogError> {
        Ok(retention::enforce(&self.shared.db, &self.policy, now_ms)?
            .into_iter()
            .map(|(topic, removed, _)| (topic, removed))
            .collect())
    }
}

impl EventLog for RedbLog {
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
