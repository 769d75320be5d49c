//! The embedded event log: an append-only log per topic in one redb database.
//!
//! Why redb: a pure-Rust, well-kept, crash-safe B-tree store with ACID transactions
//! and a stable file format, so no hand-written file format or recovery code is
//! needed here. Each topic is a table `log/<topic>`: one row per group commit, keyed
//! by the offset of its first record, holding the records as a **segment**: a `u32`
//! count, then per record a `u32` length and the bytes (little-endian). One row per
//! commit rather than one per record keeps the B-tree pages a commit rewrites (and
//! fsyncs) few: the measured write amplification of a row per record was about 10x.
//! Every record still has its own offset (first offset + position in the segment).
//! Consumer offsets are a table `"group/topic" -> next offset`.
//!
//! **Group commit.** Appends go through a bounded queue to one writer thread, which
//! takes everything waiting (up to `batch_max`), inserts it in one write transaction
//! and commits with `Durability::Immediate` (fsync), then acknowledges every append
//! of the batch. One fsync per batch, not per event, and an append is acknowledged
//! only after its batch is on disk: a `kill -9` loses no acknowledged record. A full
//! queue is back-pressure, refused at once.
//!
//! The database file is locked by the process that opens it: services sharing the
//! embedded log run in one process (`retail-media all`); separate processes use Kafka.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition};
use tokio::sync::{oneshot, Notify};

use crate::config::EmbeddedLogConfig;
use crate::{EventLog, LogError};

/// Time of one group commit (insert + fsync).
pub const COMMIT_SECONDS: &str = "eventlog_commit_seconds";
/// Records per group commit.
pub const COMMIT_RECORDS: &str = "eventlog_commit_records";

const OFFSETS: TableDefinition<&str, u64> = TableDefinition::new("__consumer_offsets");

fn topic_table(name: &str) -> TableDefinition<'_, u64, &'static [u8]> {
    TableDefinition::new(name)
}

fn table_name(topic: &str) -> String {
    format!("log/{topic}")
}

/// Encodes records as one segment.
fn encode_segment(records: &[&[u8]]) -> Vec<u8> {
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
fn decode_segment(seg: &[u8]) -> Result<Vec<&[u8]>, LogError> {
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
fn segment_count(seg: &[u8]) -> u64 {
    seg.get(0..4)
        .and_then(|b| <[u8; 4]>::try_from(b).ok())
        .map_or(0, |b| u64::from(u32::from_le_bytes(b)))
}

struct Append {
    topic: String,
    value: Vec<u8>,
    ack: oneshot::Sender<Result<u64, LogError>>,
}

enum Command {
    Append(Append),
    Flush(oneshot::Sender<()>),
}

struct Shared {
    db: Database,
    healthy: AtomicBool,
    last_error: Mutex<Option<String>>,
    appended: Notify,
}

/// The embedded log. Cheap to clone; all clones share one writer.
#[derive(Clone)]
pub struct EmbeddedLog {
    tx: SyncSender<Command>,
    shared: Arc<Shared>,
}

fn unavailable(e: impl std::fmt::Display) -> LogError {
    LogError::Unavailable(e.to_string())
}

impl EmbeddedLog {
    /// Opens (or creates) the log at `path` and starts its writer thread.
    pub fn open(path: &Path, config: &EmbeddedLogConfig) -> Result<Self, LogError> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| unavailable(format!("{}: {e}", dir.display())))?;
        }
        let db =
            Database::create(path).map_err(|e| unavailable(format!("{}: {e}", path.display())))?;
        let w = db.begin_write().map_err(unavailable)?;
        w.open_table(OFFSETS).map_err(unavailable)?;
        w.commit().map_err(unavailable)?;
        let shared = Arc::new(Shared {
            db,
            healthy: AtomicBool::new(true),
            last_error: Mutex::new(None),
            appended: Notify::new(),
        });
        let (tx, rx) = mpsc::sync_channel(config.queue_max.max(1));
        let writer = Writer {
            shared: Arc::clone(&shared),
            next: HashMap::new(),
            batch_max: config.batch_max.max(1),
        };
        std::thread::Builder::new()
            .name("eventlog-writer".into())
            .spawn(move || writer.run(rx))
            .map_err(unavailable)?;
        Ok(Self { tx, shared })
    }

    /// Reads up to `max` records of `topic` starting at offset `from`.
    /// Blocking: call it from a blocking context.
    pub fn read(
        &self,
        topic: &str,
        from: u64,
        max: usize,
    ) -> Result<Vec<(u64, Vec<u8>)>, LogError> {
        let r = self.shared.db.begin_read().map_err(unavailable)?;
        let name = table_name(topic);
        let table = match r.open_table(topic_table(&name)) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
            Err(e) => return Err(unavailable(e)),
        };
        let mut out = Vec::with_capacity(max.min(4096));
        // The segment holding `from` starts at or before it.
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

    /// The offset the next appended record of `topic` will get (0 when empty).
    pub fn end_offset(&self, topic: &str) -> Result<u64, LogError> {
        let r = self.shared.db.begin_read().map_err(unavailable)?;
        let name = table_name(topic);
        match r.open_table(topic_table(&name)) {
            Ok(t) => Ok(t
                .last()
                .map_err(unavailable)?
                .map_or(0, |(k, v)| k.value() + segment_count(v.value()))),
            Err(redb::TableError::TableDoesNotExist(_)) => Ok(0),
            Err(e) => Err(unavailable(e)),
        }
    }

    /// The next offset consumer `group` will read from `topic` (0 when it never committed).
    pub fn committed(&self, group: &str, topic: &str) -> Result<u64, LogError> {
        let r = self.shared.db.begin_read().map_err(unavailable)?;
        let t = r.open_table(OFFSETS).map_err(unavailable)?;
        Ok(t.get(format!("{group}/{topic}").as_str())
            .map_err(unavailable)?
            .map_or(0, |v| v.value()))
    }

    /// Durably stores the next offset consumer `group` will read from `topic`.
    pub fn commit(&self, group: &str, topic: &str, next: u64) -> Result<(), LogError> {
        let w = self.shared.db.begin_write().map_err(unavailable)?;
        {
            let mut t = w.open_table(OFFSETS).map_err(unavailable)?;
            t.insert(format!("{group}/{topic}").as_str(), next)
                .map_err(unavailable)?;
        }
        w.commit().map_err(unavailable)
    }

    /// Resolves after the next group commit (for consumers waiting on new records).
    /// Wake-ups count from the moment this is called, not from its first poll.
    pub fn appended(&self) -> tokio::sync::futures::Notified<'_> {
        self.shared.appended.notified()
    }
}

impl EventLog for EmbeddedLog {
    async fn append(&self, topic: &str, _key: &[u8], value: Vec<u8>) -> Result<(), LogError> {
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
        done.await.map_err(|_| LogError::Closed)?.map(|_offset| ())
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

struct Writer {
    shared: Arc<Shared>,
    next: HashMap<String, u64>,
    batch_max: usize,
}

impl Writer {
    fn run(mut self, rx: Receiver<Command>) {
        let mut batch: Vec<Append> = Vec::with_capacity(self.batch_max);
        let mut flushes = Vec::new();
        while let Ok(first) = rx.recv() {
            let mut cmd = Some(first);
            while let Some(c) = cmd.take() {
                match c {
                    Command::Append(a) => batch.push(a),
                    Command::Flush(f) => flushes.push(f),
                }
                if batch.len() < self.batch_max {
                    cmd = rx.try_recv().ok();
                }
            }
            if !batch.is_empty() {
                self.write_batch(&mut batch);
            }
            for f in flushes.drain(..) {
                let _ = f.send(());
            }
        }
        tracing::debug!("event log writer stopped");
    }

    fn write_batch(&mut self, batch: &mut Vec<Append>) {
        let started = std::time::Instant::now();
        let committed = self.commit(batch);
        metrics::histogram!(COMMIT_SECONDS).record(started.elapsed().as_secs_f64());
        metrics::histogram!(COMMIT_RECORDS).record(batch.len() as f64);
        match committed {
            Ok(offsets) => {
                self.shared.healthy.store(true, Ordering::Relaxed);
                for (a, off) in batch.drain(..).zip(offsets) {
                    let _ = a.ack.send(Ok(off));
                }
                self.shared.appended.notify_waiters();
            }
            Err(e) => {
                tracing::error!(error = %e, records = batch.len(), "event log commit failed");
                self.shared.healthy.store(false, Ordering::Relaxed);
                if let Ok(mut last) = self.shared.last_error.lock() {
                    *last = Some(e.to_string());
                }
                // Offsets handed out in the failed transaction were not written.
                self.next.clear();
                for a in batch.drain(..) {
                    let _ = a.ack.send(Err(e.clone()));
                }
            }
        }
    }

    fn commit(&mut self, batch: &[Append]) -> Result<Vec<u64>, LogError> {
        let mut w = self.shared.db.begin_write().map_err(unavailable)?;
        w.set_durability(Durability::Immediate)
            .map_err(unavailable)?;
        let mut offsets = vec![0; batch.len()];
        {
            // One segment per topic of the batch, records in arrival order.
            let mut by_topic: HashMap<&str, Vec<usize>> = HashMap::new();
            for (i, a) in batch.iter().enumerate() {
                by_topic.entry(a.topic.as_str()).or_default().push(i);
            }
            for (topic, idx) in by_topic {
                let name = table_name(topic);
                let mut t = w.open_table(topic_table(&name)).map_err(unavailable)?;
                let first = match self.next.get(topic) {
                    Some(n) => *n,
                    None => t
                        .last()
                        .map_err(unavailable)?
                        .map_or(0, |(k, v)| k.value() + segment_count(v.value())),
                };
                let records: Vec<&[u8]> = idx.iter().map(|i| batch[*i].value.as_slice()).collect();
                t.insert(first, encode_segment(&records).as_slice())
                    .map_err(unavailable)?;
                for (n, i) in idx.iter().enumerate() {
                    offsets[*i] = first + n as u64;
                }
                self.next.insert(topic.to_owned(), first + idx.len() as u64);
            }
        }
        w.commit().map_err(unavailable)?;
        Ok(offsets)
    }
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

    #[tokio::test]
    async fn appends_are_read_back_in_order_and_survive_reopen() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("log.redb");
        {
            let log = EmbeddedLog::open(&path, &EmbeddedLogConfig::default()).expect("open");
            let mut tasks = Vec::new();
            for i in 0..500u32 {
                let l = log.clone();
                tasks.push(tokio::spawn(async move {
                    l.append("t", b"k", i.to_be_bytes().to_vec()).await
                }));
            }
            for t in tasks {
                t.await.expect("join").expect("append");
            }
            log.flush(Duration::from_secs(5)).await.expect("flush");
            assert_eq!(log.end_offset("t").expect("end"), 500);
            log.commit("g", "t", 123).expect("commit");
        }
        // Reopen: a dropped log's writer thread releases the file once its channel closes.
        let mut reopened = None;
        for _ in 0..50 {
            match EmbeddedLog::open(&path, &EmbeddedLogConfig::default()) {
                Ok(l) => {
                    reopened = Some(l);
                    break;
                }
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
        let log = reopened.expect("reopen");
        let rows = log.read("t", 0, 1000).expect("read");
        assert_eq!(rows.len(), 500);
        assert!(rows
            .iter()
            .enumerate()
            .all(|(i, (off, _))| *off == i as u64));
        let mut values: Vec<u32> = rows
            .iter()
            .map(|(_, v)| u32::from_be_bytes(v.as_slice().try_into().expect("4 bytes")))
            .collect();
        values.sort_unstable();
        assert_eq!(values, (0..500).collect::<Vec<_>>());
        assert_eq!(log.committed("g", "t").expect("committed"), 123);
        assert_eq!(log.committed("other", "t").expect("committed"), 0);
        assert_eq!(log.read("t", 498, 10).expect("tail").len(), 2);
        assert!(log
            .read("missing", 0, 10)
            .expect("missing topic")
            .is_empty());
        log.append("t", b"k", b"x".to_vec())
            .await
            .expect("append after reopen");
        assert_eq!(log.end_offset("t").expect("end"), 501);
    }
}
