//! Retention of the embedded log against real segment files in a temp dir: the
//! limits, the consumer-group floor, reads below the earliest record, monotonic
//! offsets, the disk use under a long stream, and a log written (by the redb version)
//! before retention existed.

use std::path::Path;
use std::time::Duration;

use redb::Database;

use crate::config::EmbeddedLogConfig;
use crate::embedded::legacy::format::{encode_segment, log_name, log_table, OFFSETS};
use crate::embedded::retention::now_ms;
use crate::embedded::EmbeddedLog;

const HOUR_MS: u64 = 3_600_000;

fn config(hours: u64, bytes: u64) -> EmbeddedLogConfig {
    EmbeddedLogConfig {
        retention_hours: hours,
        retention_bytes: bytes,
        // Passes are run by the tests themselves.
        retention_check_secs: 3600,
        ..EmbeddedLogConfig::default()
    }
}

/// Opens the log, waiting for a dropped one's threads to release the file.
fn open(path: &Path, config: &EmbeddedLogConfig) -> EmbeddedLog {
    for _ in 0..100 {
        if let Ok(l) = EmbeddedLog::open(path, config) {
            return l;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    EmbeddedLog::open(path, config).expect("open")
}

/// Appends `n` records one at a time: one segment (group commit) each.
async fn append_segments(log: &EmbeddedLog, topic: &str, n: usize, size: usize) -> Vec<u64> {
    let mut offsets = Vec::new();
    for i in 0..n {
        let mut v = vec![b'x'; size];
        v[..8.min(size)].copy_from_slice(&(i as u64).to_be_bytes()[..8.min(size)]);
        offsets.push(log.append_offset(topic, v).await.expect("append"));
    }
    offsets
}

fn first_offset(log: &EmbeddedLog, topic: &str) -> u64 {
    log.retention_status(topic)
        .expect("status")
        .expect("topic")
        .first_offset
}

fn offsets_read(log: &EmbeddedLog, topic: &str, from: u64) -> Vec<u64> {
    log.read(topic, from, usize::MAX)
        .expect("read")
        .into_iter()
        .map(|(o, _)| o)
        .collect()
}

#[tokio::test]
async fn time_retention_removes_only_committed_segments() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = open(&dir.path().join("log"), &config(1, 0));
    assert_eq!(
        append_segments(&log, "t", 10, 50).await,
        (0..10).collect::<Vec<_>>()
    );
    log.commit("g", "t", 6).expect("commit");
    let now = now_ms();
    let none = log.enforce_retention_at(now).expect("pass");
    assert_eq!(none[0].1.records, 0, "nothing is an hour old yet");
    let passed = log.enforce_retention_at(now + 2 * HOUR_MS).expect("pass");
    assert_eq!((passed[0].1.segments, passed[0].1.records), (6, 6));
    assert_eq!(first_offset(&log, "t"), 6);
    assert_eq!(offsets_read(&log, "t", 0), (6..10).collect::<Vec<_>>());
}

#[tokio::test]
async fn size_retention_removes_oldest_committed_segments() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A segment of one 100-byte record is 108 bytes: the budget holds three.
    let log = open(&dir.path().join("log"), &config(0, 330));
    append_segments(&log, "t", 10, 100).await;
    let st = log.retention_status("t").expect("status").expect("topic");
    assert_eq!(st.retained_bytes, 1080);
    log.commit("g", "t", 5).expect("commit");
    log.enforce_retention().expect("pass");
    assert_eq!(
        first_offset(&log, "t"),
        5,
        "bounded by the group, not the budget"
    );
    log.commit("g", "t", 10).expect("commit");
    log.enforce_retention().expect("pass");
    let st = log.retention_status("t").expect("status").expect("topic");
    assert_eq!((st.first_offset, st.retained_bytes), (7, 324));
    assert_eq!(offsets_read(&log, "t", 0), vec![7, 8, 9]);
}

#[tokio::test]
async fn uncommitted_tail_is_never_removed_even_past_both_limits() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = open(&dir.path().join("log"), &config(1, 1));
    append_segments(&log, "t", 10, 100).await;
    append_segments(&log, "nobody-reads", 10, 100).await;
    log.commit("g", "t", 4).expect("commit");
    log.enforce_retention_at(now_ms() + 1000 * HOUR_MS)
        .expect("pass");
    assert_eq!(offsets_read(&log, "t", 0), (4..10).collect::<Vec<_>>());
    // No group has committed on this topic: nothing is removed, and the status says why.
    let st = log
        .retention_status("nobody-reads")
        .expect("status")
        .expect("topic");
    assert_eq!((st.consumer_groups, st.committed_floor), (0, None));
    assert_eq!((st.first_offset, st.end_offset), (0, 10));
    assert_eq!(offsets_read(&log, "nobody-reads", 0).len(), 10);
}

#[tokio::test]
async fn the_slower_group_bounds_retention() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = open(&dir.path().join("log"), &config(0, 1));
    append_segments(&log, "t", 10, 20).await;
    log.commit("fast", "t", 8).expect("commit");
    log.commit("slow", "t", 3).expect("commit");
    // Another topic's group with a name ending like this one's does not count.
    log.commit("fast", "t-other", 0).expect("commit");
    log.enforce_retention().expect("pass");
    let st = log.retention_status("t").expect("status").expect("topic");
    assert_eq!((st.consumer_groups, st.committed_floor), (2, Some(3)));
    assert_eq!(st.first_offset, 3);
    log.commit("slow", "t", 9).expect("commit");
    log.enforce_retention().expect("pass");
    assert_eq!(first_offset(&log, "t"), 8);
}

#[tokio::test]
async fn reads_from_a_removed_offset_resume_at_the_earliest_retained() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = open(&dir.path().join("log"), &config(0, 1));
    // Multi-record segments: 5 commits of 4 records each.
    for _ in 0..5 {
        let tasks: Vec<_> = (0..4u8)
            .map(|i| {
                let l = log.clone();
                tokio::spawn(async move { l.append_offset("t", vec![i]).await })
            })
            .collect();
        for t in tasks {
            t.await.expect("join").expect("append");
        }
    }
    assert_eq!(log.end_offset("t").expect("end"), 20);
    log.commit("g", "t", 11).expect("commit");
    log.enforce_retention().expect("pass");
    let first = first_offset(&log, "t");
    assert!(
        first <= 11 && first > 0,
        "removed whole segments below 11: {first}"
    );
    for from in [0, first.saturating_sub(1)] {
        let rows = log.read("t", from, 3).expect("read");
        let offs: Vec<u64> = rows.iter().map(|(o, _)| *o).collect();
        assert_eq!(offs, vec![first, first + 1, first + 2], "from {from}");
    }
    // A new group (committed offset 0) reads everything retained.
    assert_eq!(log.committed("new", "t").expect("committed"), 0);
    assert_eq!(offsets_read(&log, "t", 0), (first..20).collect::<Vec<_>>());
}

#[tokio::test]
async fn offsets_keep_increasing_after_everything_is_removed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("log");
    {
        let log = open(&path, &config(0, 1));
        append_segments(&log, "t", 5, 10).await;
        log.commit("g", "t", 5).expect("commit");
        log.enforce_retention().expect("pass");
        let st = log.retention_status("t").expect("status").expect("topic");
        assert_eq!(
            (st.first_offset, st.end_offset, st.retained_bytes),
            (5, 5, 0)
        );
        assert!(log.read("t", 0, 10).expect("read").is_empty());
        assert_eq!(log.end_offset("t").expect("end"), 5);
        assert_eq!(
            log.append_offset("t", b"a".to_vec()).await.expect("append"),
            5
        );
        log.commit("g", "t", 6).expect("commit");
        log.enforce_retention().expect("pass");
    }
    let log = open(&path, &config(0, 1));
    assert_eq!(log.end_offset("t").expect("end"), 6);
    assert_eq!(
        log.append_offset("t", b"b".to_vec()).await.expect("append"),
        6
    );
    assert_eq!(offsets_read(&log, "t", 0), vec![6]);
}

#[tokio::test]
async fn the_retention_thread_runs_every_check_interval() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = EmbeddedLogConfig {
        retention_check_secs: 1,
        ..config(0, 1)
    };
    let log = open(&dir.path().join("log"), &cfg);
    append_segments(&log, "t", 3, 10).await;
    log.commit("g", "t", 3).expect("commit");
    let started = std::time::Instant::now();
    while first_offset(&log, "t") < 3 {
        assert!(started.elapsed() < Duration::from_secs(10), "no pass ran");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Bytes of the files under `dir`.
fn disk_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| {
            let e = e.expect("entry");
            let m = e.metadata().expect("metadata");
            if m.is_dir() {
                disk_bytes(&e.path())
            } else {
                m.len()
            }
        })
        .sum()
}

/// 200,000 records of 300 bytes (about 60 MB) in 200 rounds of commits, a consumer
/// committing as it goes and a 1 MiB budget: disk use plateaus, old segments deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn long_stream_file_plateaus() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("log");
    let log = open(&path, &config(0, 1 << 20));
    let (rounds, per_round) = (200usize, 1000usize);
    let mut sizes = Vec::new();
    for round in 0..rounds {
        let tasks: Vec<_> = (0..per_round)
            .map(|i| {
                let l = log.clone();
                let mut v = vec![b'r'; 300];
                v[..8].copy_from_slice(&((round * per_round + i) as u64).to_be_bytes());
                tokio::spawn(async move { l.append_offset("t", v).await })
            })
            .collect();
        for t in tasks {
            t.await.expect("join").expect("append");
        }
        let end = log.end_offset("t").expect("end");
        log.commit("consumer", "t", end).expect("commit");
        if round % 5 == 4 {
            let l = log.clone();
            tokio::task::spawn_blocking(move || l.enforce_retention())
                .await
                .expect("join")
                .expect("pass");
        }
        sizes.push(disk_bytes(&path));
    }
    eprintln!(
        "file size every 20k records (MiB): {:?}",
        sizes
            .iter()
            .step_by(20)
            .map(|b| b >> 20)
            .collect::<Vec<_>>()
    );
    assert_eq!(
        log.end_offset("t").expect("end"),
        (rounds * per_round) as u64
    );
    let st = log.retention_status("t").expect("status").expect("topic");
    assert!(st.retained_bytes <= 1 << 20, "{st:?}");
    let mib = |b: u64| b as f64 / f64::from(1 << 20);
    let at = |q: usize| sizes[rounds * q / 4 - 1];
    eprintln!(
        "file size after 50k/100k/150k/200k records: {:.1}/{:.1}/{:.1}/{:.1} MiB (max {:.1}), retained {:.2} MiB",
        mib(at(1)),
        mib(at(2)),
        mib(at(3)),
        mib(at(4)),
        mib(*sizes.iter().max().expect("sizes")),
        mib(st.retained_bytes)
    );
    // About 60 MB went through; with retention the files stay at the budget plus
    // what arrives between two passes plus one segment (an eighth of the budget,
    // at least 1 MiB), the bound the redb version was held to as well.
    let max = sizes.iter().copied().max().unwrap_or(0);
    assert!(max < 12 << 20, "file grew to {max} bytes: {sizes:?}");
}

/// A log written the way the version before retention wrote it (redb segments only,
/// no time or topic rows) is converted at open, reads, continues its offsets and is
/// retained.
#[tokio::test]
async fn a_log_written_before_retention_opens_reads_and_is_retained() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("log");
    let mut seg_bytes = 0;
    std::fs::create_dir_all(&path).expect("mkdir");
    {
        let db = Database::create(path.join("events.redb")).expect("create");
        let w = db.begin_write().expect("write");
        {
            let name = log_name("t");
            let mut t = w.open_table(log_table(&name)).expect("table");
            for s in 0..10u64 {
                let recs: Vec<Vec<u8>> = (0..3).map(|i| vec![(s * 3 + i) as u8; 40]).collect();
                let refs: Vec<&[u8]> = recs.iter().map(Vec::as_slice).collect();
                let seg = encode_segment(&refs);
                seg_bytes += seg.len() as u64;
                t.insert(s * 3, seg.as_slice()).expect("insert");
            }
            let mut o = w.open_table(OFFSETS).expect("offsets");
            o.insert("g/t", 15).expect("insert");
        }
        w.commit().expect("commit");
    }
    let log = open(&path, &config(1, 0));
    let rows = log.read("t", 0, usize::MAX).expect("read");
    assert_eq!(rows.len(), 30);
    assert!(rows.iter().all(|(o, v)| v[0] as u64 == *o && v.len() == 40));
    assert_eq!(log.end_offset("t").expect("end"), 30);
    let st = log.retention_status("t").expect("status").expect("topic");
    assert_eq!(st.retained_bytes, seg_bytes);
    let adopted = st.oldest_ms.expect("dated");
    assert!(adopted.abs_diff(now_ms()) < 60_000, "dated by the upgrade");
    // Undated segments count as written at the upgrade: not removed by time before
    // the retention time has passed since then.
    log.enforce_retention().expect("pass");
    assert_eq!(first_offset(&log, "t"), 0);
    log.enforce_retention_at(adopted + 2 * HOUR_MS)
        .expect("pass");
    assert_eq!(
        first_offset(&log, "t"),
        15,
        "only below the committed offset"
    );
    assert_eq!(
        log.append_offset("t", vec![30; 40]).await.expect("append"),
        30
    );
    let offs = offsets_read(&log, "t", 0);
    assert_eq!(offs, (15..31).collect::<Vec<_>>());
}

/// Segment files of the topic, by name.
fn segment_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir.join("topics").join("t-t"))
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Small segments: appends roll files named by their first offset, reads cross them,
/// retention deletes the files wholly below the first retained offset (never the
/// last), and a reopened log reads the same.
#[tokio::test]
async fn segments_roll_and_retention_deletes_whole_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("log");
    let cfg = config(0, 1);
    {
        // 100-byte records, one per group commit (132 bytes a frame): 4 per 500-byte file.
        let log = EmbeddedLog::open_with(&path, &cfg, 500).expect("open");
        append_segments(&log, "t", 10, 100).await;
        assert_eq!(
            segment_files(&path),
            vec![
                "00000000000000000000.log",
                "00000000000000000004.log",
                "00000000000000000008.log"
            ]
        );
        assert_eq!(offsets_read(&log, "t", 3), (3..10).collect::<Vec<_>>());
        assert_eq!(log.read("t", 2, 4).expect("read").len(), 4);
        log.commit("g", "t", 6).expect("commit");
        log.enforce_retention().expect("pass");
        assert_eq!(first_offset(&log, "t"), 6);
        assert_eq!(
            segment_files(&path),
            vec!["00000000000000000004.log", "00000000000000000008.log"],
            "the first file went whole; the second holds 6 and 7 still"
        );
        log.commit("g", "t", 10).expect("commit");
        log.enforce_retention().expect("pass");
        assert_eq!(segment_files(&path), vec!["00000000000000000008.log"]);
        assert!(log.read("t", 0, 10).expect("read").is_empty());
    }
    let log = open(&path, &cfg);
    assert_eq!(log.end_offset("t").expect("end"), 10);
    assert!(log.read("t", 0, 10).expect("read").is_empty());
    assert_eq!(
        log.append_offset("t", vec![1; 10]).await.expect("append"),
        10
    );
    assert_eq!(offsets_read(&log, "t", 0), vec![10]);
}
