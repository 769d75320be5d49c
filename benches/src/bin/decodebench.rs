//! Decoding a log record (the aggregator's read stage): `EventRecord::from_bytes`
//! against the derived decoder it replaced (the event under `#[serde(flatten)]`, which
//! buffers every field into serde's `Content` first), on the same 200,000 records in
//! the same run. `cargo run --release -p rm-benches --bin decodebench`.
use rm_schemas::{EventRecord, InteractionEvent};
use serde::Deserialize;
/// The record as the derived decoder read it (receive time left a string: the
/// baseline does less than the real decoder, never more).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
struct Old {
    v: u16,
    event_id: uuid::Uuid,
    dedup_key: String,
    received_at: String,
    #[serde(flatten)]
    event: InteractionEvent,
}
/// A video play of served ad `i` by a random session, as the edge writes it.
fn main() {
    let now = chrono::Utc::now();
    let recs: Vec<Vec<u8>> = (0..200_000)
        .map(|i| {
            let e = InteractionEvent {
                session_id: Some(uuid::Uuid::now_v7().to_string()),
                video_id: Some("v-1".into()),
                ..InteractionEvent::new(
                    format!("rm2.demo.camp-{}.ad{}", i % 21, i),
                    rm_schemas::InteractionType::VideoPlay,
                    now.fixed_offset(),
                )
            };
            EventRecord::new(e, uuid::Uuid::now_v7(), now).to_bytes()
        })
        .collect();
    for round in 0..3 {
        let t = std::time::Instant::now();
        let mut n = 0usize;
        for r in &recs {
            let o: Old = serde_json::from_slice(r).expect("a record the bench wrote");
            n += o.event.ad_id.len();
        }
        let old = t.elapsed().as_secs_f64() * 1e9 / recs.len() as f64;
        let t = std::time::Instant::now();
        for r in &recs {
            let o = EventRecord::from_bytes(r).expect("a record the bench wrote");
            n += o.event.ad_id.len();
        }
        let new = t.elapsed().as_secs_f64() * 1e9 / recs.len() as f64;
        println!(
            "round {round}: flatten {old:.0} ns/rec, EventRecord::from_bytes {new:.0} ns/rec ({n})"
        );
    }
}
