//! The embedded log's unit tests: the basics here, then one file per concern: a
//! writer killed mid-commit
//! (`crash`), the redb log of an earlier version converted at open (`migration`), old
//! group commits removed once every consumer is past them (`retention`), and a torn
//! tail cut back at open (`torn_tail`).

mod crash;
mod migration;
mod retention;
mod torn_tail;

use crate::embedded::*;

#[tokio::test]
async fn appends_are_read_back_in_order_and_survive_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("log");
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
