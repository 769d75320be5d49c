//! `kill -9` durability of the embedded log, retention running: a child process (this
//! test executable, switched by [`CHILD_ENV`]) appends from several tasks and prints
//! each acknowledged offset; the parent SIGKILLs it mid-stream, three times, then
//! checks that every acknowledged record is in the log exactly once, in order, and
//! that retention never removed a record the (lagging) consumer group had not committed.
//!
//! The workspace's `tests/it/edge_embedded.rs` kills the whole edge and checks that every
//! 200 is in the log once; this one works on the log alone, checks offsets and order,
//! and runs retention and consumer commits during the kills.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::config::EmbeddedLogConfig;
use crate::embedded::EmbeddedLog;

/// Set to the log's path, turns [`crash_child`] into the appending child.
const CHILD_ENV: &str = "RM_EVENTLOG_CRASH_CHILD";
/// The child's round, part of every value it writes.
const ROUND_ENV: &str = "RM_EVENTLOG_CRASH_ROUND";
const TOPIC: &str = "crash";
const GROUP: &str = "lagging";
const WRITERS: u32 = 4;

fn child_config() -> EmbeddedLogConfig {
    EmbeddedLogConfig {
        retention_hours: 0,
        retention_bytes: 1,
        retention_check_secs: 1,
        ..EmbeddedLogConfig::default()
    }
}

/// The child: appends `round:writer:seq` records until killed, printing
/// `acked <offset> <round> <writer> <seq>` once each is durable, while a consumer
/// group commits 200 records behind the end and retention removes what it may.
#[test]
fn crash_child() {
    let (Ok(path), Ok(round)) = (std::env::var(CHILD_ENV), std::env::var(ROUND_ENV)) else {
        return;
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let log = EmbeddedLog::open(Path::new(&path), &child_config()).expect("open");
        let mut tasks = Vec::new();
        for writer in 0..WRITERS {
            let (log, round) = (log.clone(), round.clone());
            tasks.push(tokio::spawn(async move {
                for seq in 0u64.. {
                    let value = format!("{round}:{writer}:{seq}");
                    loop {
                        match log.append_offset(TOPIC, value.clone().into_bytes()).await {
                            Ok(off) => {
                                println!("acked {off} {round} {writer} {seq}");
                                break;
                            }
                            Err(e) if e.is_retryable() => {
                                tokio::time::sleep(Duration::from_millis(1)).await;
                            }
                            Err(e) => panic!("append: {e}"),
                        }
                    }
                }
            }));
        }
        loop {
            tokio::time::sleep(Duration::from_millis(20)).await;
            let l = log.clone();
            tokio::task::spawn_blocking(move || {
                let end = l.end_offset(TOPIC).expect("end");
                l.commit(GROUP, TOPIC, end.saturating_sub(200))
                    .expect("commit");
            })
            .await
            .expect("join");
        }
    });
}

/// One acknowledged record: (round, writer, seq).
type Acked = HashMap<u64, (u32, u32, u64)>;

/// Runs the child until it acknowledged `min_acks` (and at least `min_time` passed),
/// SIGKILLs it and returns what it acknowledged.
fn run_and_kill(path: &Path, round: u32, min_acks: usize, min_time: Duration) -> Acked {
    let mut child = Command::new(std::env::current_exe().expect("test executable"))
        .args([
            "embedded::tests::crash::crash_child",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, path)
        .env(ROUND_ENV, round.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn child");
    let stdout = child.stdout.take().expect("stdout");
    let mut acked = Acked::new();
    let started = Instant::now();
    let mut killed = false;
    for line in BufReader::new(stdout).lines() {
        let line = line.expect("line");
        let Some(rest) = line.strip_prefix("acked ") else {
            continue;
        };
        let f: Vec<u64> = rest
            .split(' ')
            .map(|x| x.parse().expect("number"))
            .collect();
        let prev = acked.insert(f[0], (f[1] as u32, f[2] as u32, f[3]));
        assert!(prev.is_none(), "offset {} acknowledged twice", f[0]);
        if !killed && acked.len() >= min_acks && started.elapsed() >= min_time {
            child.kill().expect("SIGKILL"); // Child::kill is SIGKILL on Unix
            killed = true;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "child too slow"
        );
    }
    // The pipe closed: the child is dead; what it printed before was acknowledged.
    let status = child.wait().expect("wait");
    assert!(killed, "child exited by itself: {status}");
    acked
}

#[test]
fn kill_9_keeps_every_acknowledged_record_once_in_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("log");
    let mut acked = Acked::new();
    for round in 0..3 {
        let got = run_and_kill(&path, round, 500, Duration::from_millis(1300));
        for (off, rec) in got {
            assert!(
                acked.insert(off, rec).is_none(),
                "offset {off} reused after a crash"
            );
        }
    }
    let log = EmbeddedLog::open(&path, &EmbeddedLogConfig::default()).expect("reopen");
    let st = log.retention_status(TOPIC).expect("status").expect("topic");
    let floor = st.committed_floor.expect("the group committed");
    assert!(
        st.first_offset <= floor,
        "removed past the committed offset: {st:?}"
    );
    assert!(
        st.first_offset > 0,
        "retention ran during the rounds: {st:?}"
    );
    let rows = log.read(TOPIC, 0, usize::MAX).expect("read");
    assert_eq!(rows.first().map(|r| r.0), Some(st.first_offset));
    let mut seen: HashMap<(u32, u32, u64), u64> = HashMap::new();
    let mut last_seq: HashMap<(u32, u32), u64> = HashMap::new();
    for (off, value) in &rows {
        let v = String::from_utf8(value.clone()).expect("utf8");
        let f: Vec<u64> = v.split(':').map(|x| x.parse().expect("number")).collect();
        let rec = (f[0] as u32, f[1] as u32, f[2]);
        assert!(seen.insert(rec, *off).is_none(), "{v} written twice");
        // One writer's records are in the order it appended them.
        if let Some(prev) = last_seq.insert((rec.0, rec.1), rec.2) {
            assert!(rec.2 > prev, "{v} after seq {prev}");
        }
        if let Some(a) = acked.get(off) {
            assert_eq!(a, &rec, "offset {off} holds another record");
        }
    }
    let retained: Vec<_> = acked
        .iter()
        .filter(|(off, _)| **off >= st.first_offset)
        .collect();
    for (off, rec) in &retained {
        assert_eq!(
            seen.get(rec),
            Some(*off),
            "acknowledged {rec:?} at {off} is lost"
        );
    }
    let max_acked = acked.keys().max().copied().unwrap_or(0);
    assert!(st.end_offset > max_acked, "offsets went back: {st:?}");
    eprintln!(
        "3 kill -9 rounds: {} appends acknowledged, {} still retained (first offset {}, group at {floor}), all present once, in order",
        acked.len(),
        retained.len(),
        st.first_offset
    );
}
