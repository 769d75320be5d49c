//! The embedded log's writer thread: group commit.
//!
//! Appends arrive through a bounded queue; the writer takes everything waiting (up to
//! `batch_max`), writes one segment per topic of the batch in one write transaction
//! together with its commit time (`logtime/<topic>`) and the topic's new high-water
//! mark and byte count (`__log_topics`), commits with `Durability::Immediate` (fsync),
//! then acknowledges every append of the batch. It owns no retention: that is
//! [`super::retention`], on its own thread, which this thread stops by dropping
//! `_retention_stop` when it ends.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;

use redb::{Durability, ReadableTable};
use tokio::sync::oneshot;

use super::format::{
    encode_segment, log_name, log_table, now_ms, segment_count, time_name, time_table, TopicMeta,
    TOPICS,
};
use super::{unavailable, Shared, COMMIT_RECORDS, COMMIT_SECONDS};
use crate::LogError;

pub(crate) struct Append {
    pub topic: String,
    pub value: Vec<u8>,
    pub ack: oneshot::Sender<Result<u64, LogError>>,
}

pub(crate) enum Command {
    Append(Append),
    Flush(oneshot::Sender<()>),
}

pub(crate) struct Writer {
    pub shared: Arc<Shared>,
    pub batch_max: usize,
    /// Dropped when the writer ends, which stops the retention thread.
    pub _retention_stop: Sender<()>,
}

impl Writer {
    pub(crate) fn run(self, rx: Receiver<Command>) {
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

    fn write_batch(&self, batch: &mut Vec<Append>) {
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
                for a in batch.drain(..) {
                    let _ = a.ack.send(Err(e.clone()));
                }
            }
        }
    }

    fn commit(&self, batch: &[Append]) -> Result<Vec<u64>, LogError> {
        let mut w = self.shared.db.begin_write().map_err(unavailable)?;
        w.set_durability(Durability::Immediate)
            .map_err(unavailable)?;
        let mut offsets = vec![0; batch.len()];
        let now = now_ms();
        {
            let mut topics = w.open_table(TOPICS).map_err(unavailable)?;
            // One segment per topic of the batch, records in arrival order.
            let mut by_topic: HashMap<&str, Vec<usize>> = HashMap::new();
            for (i, a) in batch.iter().enumerate() {
                by_topic.entry(a.topic.as_str()).or_default().push(i);
            }
            for (topic, idx) in by_topic {
                let name = log_name(topic);
                let mut t = w.open_table(log_table(&name)).map_err(unavailable)?;
                let meta = match topics.get(topic).map_err(unavailable)? {
                    Some(row) => TopicMeta::from_row(row.value()),
                    // A topic this version has not seen: new (the previous format's
                    // topics were adopted at open), so its table is empty; derive the
                    // end from it anyway rather than trust that.
                    None => TopicMeta {
                        next: t
                            .last()
                            .map_err(unavailable)?
                            .map_or(0, |(k, v)| k.value() + segment_count(v.value())),
                        bytes: 0,
                        adopted_ms: now,
                    },
                };
                let first = meta.next;
                let records: Vec<&[u8]> = idx.iter().map(|i| batch[*i].value.as_slice()).collect();
                let segment = encode_segment(&records);
                t.insert(first, segment.as_slice()).map_err(unavailable)?;
                let tname = time_name(topic);
                w.open_table(time_table(&tname))
                    .map_err(unavailable)?
                    .insert(first, now)
                    .map_err(unavailable)?;
                let meta = TopicMeta {
                    next: first + idx.len() as u64,
                    bytes: meta.bytes + segment.len() as u64,
                    ..meta
                };
                topics.insert(topic, meta.row()).map_err(unavailable)?;
                for (n, i) in idx.iter().enumerate() {
                    offsets[*i] = first + n as u64;
                }
            }
        }
        w.commit().map_err(unavailable)?;
        Ok(offsets)
    }
}
