//! The embedded log's writer thread: group commit.
//!
//! Appends arrive through a bounded queue; the writer takes everything waiting (up to
//! `batch_max` records or [`BATCH_BYTES`]), encodes one frame per topic of the batch,
//! writes each with one positioned write at the end of its topic's last segment, then
//! `fdatasync`s each file written, and only then publishes the frames to readers and
//! acknowledges every append of the batch. A segment past its size is then closed and
//! the next one created (its name, the next offset, synced into the directory).
//! Retention is not here: see [`super::retention`], whose thread this one stops by
//! dropping `_retention_stop` when it ends.

use std::os::unix::fs::FileExt;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;

use tokio::sync::oneshot;

use super::frame;
use super::retention::now_ms;
use super::topic::{create_segment, Batch, Topic};
use super::{lock, unavailable, Shared, COMMIT_RECORDS, COMMIT_SECONDS};
use crate::LogError;

/// A batch stops taking appends past this many record bytes.
pub(crate) const BATCH_BYTES: usize = 64 << 20;

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

/// The frame of one topic of a batch, written but not yet synced.
struct Pending {
    topic: String,
    /// `None` when the topic's segment could not be opened.
    file: Option<Arc<std::fs::File>>,
    batch: Batch,
    /// Indexes of the batch's appends in this frame, in order.
    appends: Vec<usize>,
    result: Result<(), LogError>,
}

impl Writer {
    pub(crate) fn run(self, rx: Receiver<Command>) {
        let mut batch: Vec<Append> = Vec::with_capacity(self.batch_max);
        let mut flushes = Vec::new();
        let mut buf = Vec::new();
        while let Ok(first) = rx.recv() {
            let mut cmd = Some(first);
            let mut bytes = 0;
            while let Some(c) = cmd.take() {
                match c {
                    Command::Append(a) => {
                        bytes += a.value.len();
                        batch.push(a);
                    }
                    Command::Flush(f) => flushes.push(f),
                }
                if batch.len() < self.batch_max && bytes < BATCH_BYTES {
                    cmd = rx.try_recv().ok();
                }
            }
            if !batch.is_empty() {
                self.write_batch(&mut batch, &mut buf);
            }
            for f in flushes.drain(..) {
                let _ = f.send(());
            }
        }
        tracing::debug!("event log writer stopped");
    }

    fn write_batch(&self, batch: &mut Vec<Append>, buf: &mut Vec<u8>) {
        let started = std::time::Instant::now();
        let mut pending = self.write_frames(batch, buf);
        // One fdatasync per file written, after all the writes.
        for p in &mut pending {
            if let (Ok(()), Some(f)) = (&p.result, &p.file) {
                p.result = f.sync_data().map_err(unavailable);
            }
        }
        let mut offsets: Vec<Option<Result<u64, LogError>>> = Vec::new();
        offsets.resize_with(batch.len(), || None);
        let mut failed = None;
        for p in pending {
            match p.result {
                Ok(()) => {
                    self.publish(&p.topic, p.batch);
                    for (n, i) in p.appends.iter().enumerate() {
                        offsets[*i] = Some(Ok(p.batch.base + n as u64));
                    }
                }
                Err(e) => {
                    // Drop what may have reached the file: the next frame goes there.
                    if let Some(f) = &p.file {
                        let _ = f.set_len(p.batch.pos);
                    }
                    for i in &p.appends {
                        offsets[*i] = Some(Err(e.clone()));
                    }
                    failed = Some(e);
                }
            }
        }
        metrics::histogram!(COMMIT_SECONDS).record(started.elapsed().as_secs_f64());
        metrics::histogram!(COMMIT_RECORDS).record(batch.len() as f64);
        match &failed {
            None => self.shared.healthy.store(true, Ordering::Relaxed),
            Some(e) => {
                tracing::error!(error = %e, records = batch.len(), "event log commit failed");
                self.shared.healthy.store(false, Ordering::Relaxed);
                if let Ok(mut last) = self.shared.last_error.lock() {
                    *last = Some(e.to_string());
                }
            }
        }
        for (a, off) in batch.drain(..).zip(offsets) {
            let _ = a.ack.send(off.unwrap_or(Err(LogError::Closed)));
        }
        self.shared.appended.notify_waiters();
    }

    /// Writes one frame per topic of the batch (records in arrival order).
    fn write_frames(&self, batch: &[Append], buf: &mut Vec<u8>) -> Vec<Pending> {
        let mut by_topic: Vec<(&str, Vec<usize>)> = Vec::new();
        for (i, a) in batch.iter().enumerate() {
            match by_topic.iter_mut().find(|(t, _)| *t == a.topic) {
                Some((_, idx)) => idx.push(i),
                None => by_topic.push((a.topic.as_str(), vec![i])),
            }
        }
        let now = now_ms();
        let mut out = Vec::with_capacity(by_topic.len());
        for (topic, appends) in by_topic {
            let tail = self.tail(topic);
            let (file, pos, base) = match tail {
                Ok(t) => t,
                Err(e) => {
                    out.push(Pending {
                        topic: topic.to_owned(),
                        file: None,
                        batch: Batch {
                            base: 0,
                            pos: 0,
                            len: 0,
                            count: 0,
                            time_ms: now,
                        },
                        appends,
                        result: Err(e),
                    });
                    continue;
                }
            };
            frame::encode(
                buf,
                base,
                now,
                appends.iter().map(|i| batch[*i].value.as_slice()),
            );
            let result = file.write_all_at(buf, pos).map_err(unavailable);
            out.push(Pending {
                topic: topic.to_owned(),
                file: Some(file),
                batch: Batch {
                    base,
                    pos,
                    len: buf.len() as u32,
                    count: appends.len() as u32,
                    time_ms: now,
                },
                appends,
                result,
            });
        }
        out
    }

    /// The last segment of `topic` (created with the topic when new), where it ends
    /// and the offset of the next record.
    fn tail(&self, topic: &str) -> Result<(Arc<std::fs::File>, u64, u64), LogError> {
        let mut topics = lock(&self.shared.topics);
        if !topics.contains_key(topic) {
            let t = Topic::create(&self.shared.dir, topic)?;
            topics.insert(topic.to_owned(), t);
        }
        let t = topics
            .get_mut(topic)
            .ok_or_else(|| unavailable("topic vanished"))?;
        let next = t.next;
        let seg = t
            .tail()
            .ok_or_else(|| unavailable("topic without segment"))?;
        Ok((Arc::clone(&seg.file), seg.len, next))
    }

    /// Makes a synced frame visible to readers and rolls the segment when full.
    fn publish(&self, topic: &str, batch: Batch) {
        let mut topics = lock(&self.shared.topics);
        let Some(t) = topics.get_mut(topic) else {
            return;
        };
        t.next = batch.end();
        t.bytes += batch.seg_bytes();
        let dir = t.dir.clone();
        let Some(seg) = t.tail() else {
            return;
        };
        seg.len = batch.pos + u64::from(batch.len);
        seg.batches.push(batch);
        if seg.len >= self.shared.segment_bytes {
            match create_segment(&dir, batch.end()) {
                Ok(s) => {
                    t.segments.insert(batch.end(), s);
                }
                Err(e) => tracing::warn!(error = %e, topic, "event log: cannot roll segment"),
            }
        }
    }
}
