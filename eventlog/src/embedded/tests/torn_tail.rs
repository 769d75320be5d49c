//! A log whose last group commit was torn by `kill -9` recovers to exactly the
//! acknowledged records. A child process (this test executable, switched by
//! [`CHILD_ENV`]) appends ~400-byte records from four tasks and prints each
//! acknowledged offset; the parent SIGKILLs it mid-stream, then tears the tail
//! explicitly as a crash inside a write could (the last frame cut short, a bit flipped
//! in it, a zero-filled tail), reopening after each: every acknowledged record is
//! there exactly once at its offset, nothing but whole frames of the child's records,
//! and new appends continue right after the last whole frame.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::config::EmbeddedLogConfig;
use crate::embedded::frame::{self, Parsed};
use crate::embedded::EmbeddedLog;

/// Set to the log's path, turns [`torn_child`] into the appending child.
const CHILD_ENV: &str = "RM_EVENTLOG_TORN_CHILD";
const TOPIC: &str = "torn";

fn value(writer: u32, seq: u64) -> Vec<u8> {
    let mut v = format!("{writer}:{seq}:").into_bytes();
    v.resize(400, b'r');
    v
}

/// (writer, seq) of a value the child wrote.
fn id(v: &[u8]) -> (u32, u64) {
    let s = std::str::from_utf8(v).expect("utf8");
    let mut f = s.split(':');
    let w = f.next().and_then(|x| x.parse().ok()).expect("writer");
    let q = f.next().and_then(|x| x.parse().ok()).expect("seq");
    (w, q)
}

/// The child: appends until killed, printing `acked <offset> <writer> <seq>`.
#[test]
fn torn_child() {
    let Ok(path) = std::env::var(CHILD_ENV) else {
        return;
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let log = EmbeddedLog::open(Path::new(&path), &EmbeddedLogConfig::default()).expect("open");
        let tasks: Vec<_> = (0..4u32)
            .map(|writer| {
                let log = log.clone();
                tokio::spawn(async move {
                    for seq in 0u64.. {
                        match log.append_offset(TOPIC, value(writer, seq)).await {
                            Ok(off) => println!("acked {off} {writer} {seq}"),
                            Err(e) if e.is_retryable() => {
                                tokio::time::sleep(Duration::from_millis(1)).await;
                            }
                            Err(e) => panic!("append: {e}"),
                        }
                    }
                })
            })
            .collect();
        for t in tasks {
            let _ = t.await;
        }
    });
}

/// Runs the child until it acknowledged `min_acks`, SIGKILLs it, returns the acks.
fn run_and_kill(path: &Path, min_acks: usize) -> HashMap<u64, (u32, u64)> {
    let mut child = Command::new(std::env::current_exe().expect("test executable"))
        .args([
            "embedded::tests::torn_tail::torn_child",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn child");
    let stdout = child.stdout.take().expect("stdout");
    let started = Instant::now();
    let mut acked = HashMap::new();
    let mut killed = false;
    for line in BufReader::new(stdout).lines() {
        let line = line.expect("line");
        let Some(rest) = line.strip_prefix("acked ") else {
            continue;
        };
        let f: Vec<u64> = rest.split(' ').map(|x| x.parse().expect("n")).collect();
        assert!(acked.insert(f[0], (f[1] as u32, f[2])).is_none());
        if !killed && acked.len() >= min_acks {
            child.kill().expect("SIGKILL");
            killed = true;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "child too slow"
        );
    }
    child.wait().expect("wait");
    assert!(killed, "child exited by itself");
    acked
}

/// The topic's last segment file.
fn last_segment(dir: &Path) -> PathBuf {
    let tdir = dir.join("topics").join(format!("t-{TOPIC}"));
    let mut files: Vec<PathBuf> = std::fs::read_dir(&tdir)
        .expect("read_dir")
        .map(|e| e.expect("entry").path())
        .collect();
    files.sort();
    files.pop().expect("a segment")
}

/// (position, first offset, count) of every whole frame at the start of `bytes`.
fn frames(bytes: &[u8]) -> Vec<(usize, u64, u32)> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Parsed::Whole(f, len) = frame::parse(&bytes[at..]) {
        out.push((at, f.base, f.count));
        at += len;
    }
    out
}

fn open(path: &Path) -> EmbeddedLog {
    for _ in 0..100 {
        if let Ok(l) = EmbeddedLog::open(path, &EmbeddedLogConfig::default()) {
            return l;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    EmbeddedLog::open(path, &EmbeddedLogConfig::default()).expect("open")
}

/// Reopens the log and checks it holds every acknowledged record once, at its offset,
/// and only whole frames of the child's records; returns the end offset.
fn check(path: &Path, acked: &HashMap<u64, (u32, u64)>, what: &str) -> u64 {
    let log = open(path);
    let rows = log.read(TOPIC, 0, usize::MAX).expect("read");
    let end = log.end_offset(TOPIC).expect("end");
    assert_eq!(
        rows.len() as u64,
        end,
        "{what}: offsets 0..end, none missing"
    );
    let mut seen = HashMap::new();
    for (i, (off, v)) in rows.iter().enumerate() {
        assert_eq!(*off, i as u64, "{what}: offsets are dense");
        let rec = id(v);
        assert_eq!(v, &value(rec.0, rec.1), "{what}: a record the child wrote");
        assert!(seen.insert(rec, *off).is_none(), "{what}: {rec:?} twice");
    }
    for (off, rec) in acked {
        assert_eq!(
            seen.get(rec),
            Some(off),
            "{what}: acknowledged {rec:?} at {off} lost"
        );
    }
    // What the file holds now is whole frames only (the torn tail was cut).
    let bytes = std::fs::read(last_segment(path)).expect("read segment");
    let whole = frames(&bytes);
    let len = whole
        .last()
        .map_or(0, |(at, _, _)| at + frame::parse(&bytes[*at..]).len());
    assert_eq!(len, bytes.len(), "{what}: the file ends at a whole frame");
    end
}

impl Parsed<'_> {
    fn len(&self) -> usize {
        match self {
            Parsed::Whole(_, len) => *len,
            _ => 0,
        }
    }
}

/// Appends `bytes` to the last segment file.
fn append_raw(dir: &Path, bytes: &[u8]) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(last_segment(dir))
        .expect("open segment");
    f.write_all(bytes).expect("write");
}

/// A frame continuing the log at `end` with records no one acknowledged.
fn unacknowledged_frame(end: u64) -> Vec<u8> {
    let recs: Vec<Vec<u8>> = (0..5).map(|i| value(99, i)).collect();
    let mut f = Vec::new();
    frame::encode(&mut f, end, 1, recs.iter().map(Vec::as_slice));
    f
}

#[test]
fn a_commit_torn_by_kill_9_recovers_to_exactly_the_acknowledged_records() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("log");
    let acked = run_and_kill(&dir, 2000);
    let max_acked = acked.keys().max().copied().expect("acks");

    // 1. As the kill left it: a frame written but not yet synced may be whole (the
    //    page cache outlives the process); then its records are there, once.
    let mut end = check(&dir, &acked, "after kill -9");
    assert!(end > max_acked);

    // 2. The last frame cut short, if nothing in it was acknowledged (a frame the
    //    kill interrupted between write and fdatasync, never acknowledged).
    let bytes = std::fs::read(last_segment(&dir)).expect("read");
    let (at, base, count) = *frames(&bytes).last().expect("a frame");
    let unacked = (base..base + u64::from(count)).all(|o| !acked.contains_key(&o));
    if unacked {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(last_segment(&dir))
            .expect("open");
        f.set_len((at + (bytes.len() - at) / 2) as u64)
            .expect("truncate");
        drop(f);
        end = check(&dir, &acked, "last unacknowledged frame cut short");
        assert_eq!(end, base, "the cut frame is gone whole");
    }

    // 3. Tears made by hand, each after the last whole frame: half a frame, a whole
    //    frame with one bit flipped, a frame header alone, a zero-filled tail.
    let f = unacknowledged_frame(end);
    let mut flipped = f.clone();
    flipped[f.len() / 2] ^= 0x10;
    let cases: [(&str, Vec<u8>); 4] = [
        ("half a frame", f[..f.len() / 2].to_vec()),
        ("a bit flipped", flipped),
        ("a header alone", f[..frame::HEADER].to_vec()),
        ("a zero-filled tail", vec![0; 4096]),
    ];
    for (what, tail) in cases {
        append_raw(&dir, &tail);
        assert_eq!(
            check(&dir, &acked, what),
            end,
            "{what}: the end is unchanged"
        );
    }

    // 4. New appends continue right after the last whole frame, and survive.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let log = open(&dir);
    let off = rt
        .block_on(log.append_offset(TOPIC, value(7, 7)))
        .expect("append");
    assert_eq!(off, end);
    drop(log);
    let mut acked = acked;
    acked.insert(end, (7, 7));
    assert_eq!(check(&dir, &acked, "after a new append"), end + 1);
    eprintln!(
        "kill -9 after {} acknowledged appends (last offset {max_acked}); recovered {end} records; the torn frame {} acknowledged records",
        acked.len() - 1,
        if unacked { "held no" } else { "was whole and held" }
    );
}
