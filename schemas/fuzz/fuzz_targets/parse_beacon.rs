//! Fuzz target for `rm_schemas::parse_beacon`, the strict query-string parser of the
//! interaction beacon.
//!
//! Input bytes that are UTF-8 are parsed as a raw query string. Parsing must never
//! panic, and when a beacon is accepted:
//! - parsing the same query again gives the same event and the same dedup key;
//! - the event re-encoded as a query (`serde_urlencoded`, as a well-behaved client
//!   would send it) parses back to the same dedup key;
//! - the log record built from it round-trips through its bytes with that key.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rm_schemas::{parse_beacon, DedupKey, EventRecord};

fuzz_target!(|data: &[u8]| {
    let Ok(query) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(event) = parse_beacon(query) else {
        return;
    };
    let key = DedupKey::of(&event);

    let again = parse_beacon(query).expect("a query accepted once is accepted again");
    assert_eq!(again, event, "re-parse changed the event");
    assert_eq!(DedupKey::of(&again), key, "re-parse changed the dedup key");

    let reencoded = serde_urlencoded::to_string(&event).expect("an event encodes as a query");
    let back = parse_beacon(&reencoded)
        .unwrap_or_else(|r| panic!("re-encoded event {reencoded:?} refused: {r}"));
    assert_eq!(
        DedupKey::of(&back),
        key,
        "re-encoding changed the key: {reencoded:?}"
    );

    let record = EventRecord::new(event, uuid::Uuid::nil(), chrono::DateTime::UNIX_EPOCH);
    let bytes = record.to_bytes();
    let decoded = EventRecord::from_bytes(&bytes).unwrap_or_else(|e| {
        panic!(
            "record does not round-trip: {e}: {}",
            String::from_utf8_lossy(&bytes)
        )
    });
    assert_eq!(decoded, record, "record round trip changed the record");
    assert_eq!(
        DedupKey::of(&decoded.event),
        key,
        "record round trip changed the key"
    );
});
