//! The conversion of a log written by the previous (redb) version, with the fixture
//! `eventlog/tests/fixtures/events-v1.redb` that version wrote (its README says how):
//! every retained record keeps its offset and bytes, consumer offsets and retention
//! bounds carry over, appends continue at the old end, and an interrupted conversion
//! is redone or finished at the next open.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::config::EmbeddedLogConfig;
use crate::embedded::legacy::RedbLog;
use crate::embedded::migrate::{LEGACY_FILE, MIGRATED_FILE};
use crate::embedded::EmbeddedLog;

const TOPICS: [&str; 2] = ["events", "orders"];

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/events-v1.redb")
}

/// A log directory holding a copy of the fixture as `events.redb`.
fn log_dir_with_fixture(tmp: &Path) -> PathBuf {
    let dir = tmp.join("log");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::copy(fixture(), dir.join(LEGACY_FILE)).expect("copy fixture");
    dir
}

type Records = Vec<(u64, Vec<u8>)>;

/// What the previous version itself reads from the fixture.
fn legacy_view() -> (Vec<Records>, Vec<u64>) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = tmp.path().join("copy.redb");
    std::fs::copy(fixture(), &path).expect("copy");
    // No retention: read it as it is.
    let cfg = EmbeddedLogConfig {
        retention_hours: 0,
        retention_bytes: 0,
        ..EmbeddedLogConfig::default()
    };
    let old = RedbLog::open(&path, &cfg).expect("open legacy");
    let records = TOPICS
        .iter()
        .map(|t| old.read(t, 0, usize::MAX).expect("read legacy"))
        .collect();
    let committed = [
        ("aggregator", "events"),
        ("aggregator", "orders"),
        ("slow/reader", "events"),
    ]
    .iter()
    .map(|(g, t)| old.committed(g, t).expect("committed"))
    .collect();
    (records, committed)
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

#[tokio::test]
async fn a_redb_log_of_the_previous_version_is_converted_with_its_offsets() {
    let (old_records, old_committed) = legacy_view();
    // What the fixture's README says it holds.
    let offsets = |r: &Records| r.iter().map(|(o, _)| *o).collect::<Vec<_>>();
    assert_eq!(offsets(&old_records[0]), (80..120).collect::<Vec<_>>());
    assert_eq!(offsets(&old_records[1]), (0..30).collect::<Vec<_>>());
    assert_eq!(old_committed, vec![90, 25, 100]);

    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = log_dir_with_fixture(tmp.path());
    {
        let log = open(&dir);
        assert!(!dir.join(LEGACY_FILE).exists(), "renamed once converted");
        assert!(dir.join(MIGRATED_FILE).exists());
        for (topic, old) in TOPICS.iter().zip(&old_records) {
            let new = log.read(topic, 0, usize::MAX).expect("read");
            assert_eq!(&new, old, "{topic}: same offsets, same bytes");
        }
        assert_eq!(log.committed("aggregator", "events").expect("c"), 90);
        assert_eq!(log.committed("aggregator", "orders").expect("c"), 25);
        assert_eq!(log.committed("slow/reader", "events").expect("c"), 100);
        // The aggregator resumes from its committed offset.
        let resumed = log.read("events", 90, 5).expect("read");
        assert_eq!(resumed, old_records[0][10..15].to_vec());
        let st = log
            .retention_status("events")
            .expect("status")
            .expect("topic");
        assert_eq!((st.first_offset, st.end_offset), (80, 120));
        assert_eq!((st.consumer_groups, st.committed_floor), (2, Some(90)));
        assert_eq!(
            st.retained_bytes, 16136,
            "the bytes the old version counted"
        );
        assert_eq!(
            log.append_offset("events", b"new".to_vec())
                .await
                .expect("append"),
            120
        );
        assert_eq!(
            log.append_offset("orders", b"new".to_vec())
                .await
                .expect("append"),
            30
        );
    }
    // Reopened: converted once, the new record kept, nothing doubled.
    let log = open(&dir);
    let events = log.read("events", 0, usize::MAX).expect("read");
    assert_eq!(events.len(), 41);
    assert_eq!(events[..40], old_records[0][..]);
    assert_eq!(events[40], (120, b"new".to_vec()));
}

#[tokio::test]
async fn an_interrupted_conversion_is_redone_or_finished() {
    let (old_records, _) = legacy_view();
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = log_dir_with_fixture(tmp.path());
    // A crash before the conversion was marked complete left partial segment files.
    crate::embedded::state::State::open(&dir)
        .expect("state")
        .begin_migration()
        .expect("mark");
    let partial = dir.join("topics").join("t-events");
    std::fs::create_dir_all(&partial).expect("mkdir");
    std::fs::write(partial.join("00000000000000000080.log"), b"partial").expect("write");
    {
        let log = open(&dir);
        assert_eq!(
            log.read("events", 0, usize::MAX).expect("read"),
            old_records[0]
        );
        log.append_offset("events", b"after".to_vec())
            .await
            .expect("append");
    }
    // A crash after the marker but before the rename: only the rename is redone.
    std::fs::rename(dir.join(MIGRATED_FILE), dir.join(LEGACY_FILE)).expect("rename back");
    let log = open(&dir);
    assert!(dir.join(MIGRATED_FILE).exists() && !dir.join(LEGACY_FILE).exists());
    let events = log.read("events", 0, usize::MAX).expect("read");
    assert_eq!(events.len(), 41, "not converted twice");
    assert_eq!(events[40], (120, b"after".to_vec()));
}

#[tokio::test]
async fn an_old_file_beside_segment_files_is_refused_not_merged() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("log");
    {
        let log = open(&dir);
        log.append_offset("events", b"kept".to_vec())
            .await
            .expect("append");
    }
    std::fs::copy(fixture(), dir.join(LEGACY_FILE)).expect("copy fixture");
    let mut refused = None;
    for _ in 0..100 {
        match EmbeddedLog::open(&dir, &EmbeddedLogConfig::default()) {
            Err(e) if e.to_string().contains("move one of them away") => {
                refused = Some(e);
                break;
            }
            _ => std::thread::sleep(Duration::from_millis(20)),
        }
    }
    assert!(refused.is_some(), "refused");
    std::fs::remove_file(dir.join(LEGACY_FILE)).expect("rm");
    let log = open(&dir);
    assert_eq!(
        log.read("events", 0, 10).expect("read"),
        vec![(0, b"kept".to_vec())]
    );
}
