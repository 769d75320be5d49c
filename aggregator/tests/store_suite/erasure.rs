//! A shopper's identifiers erased on request (`rm_store::EraseStore`), on every
//! backend: after a store holds a stream's events and orders (views, carts, product
//! and ad facts, touches, order lines and their credits, served ads' states), an
//! erasure of one session id replaces it everywhere it covers, every report reads as
//! before (the carts report naming the replacement instead of the id), running it
//! again changes nothing, a tenant's erasure covers its namespace only, and once it
//! settles the audit log keeps only the id's digest. The backend's test then searches
//! every table of the store for the id (`erased_id_is_nowhere`).

use rm_store::model::erasure::{self, Erasure};
use rm_store::model::traffic::shopper_hash;
use rm_store::EraseStore;

use super::{all, Store};

/// The shopper the test erases (a session id of the stream, `s-0`..`s-2`).
pub(crate) const ERASED: &str = "s-1";

/// A store the test writes, reads and erases in.
pub(crate) trait Erasing: Store + EraseStore {}
impl<T: Store + EraseStore> Erasing for T {}

/// Every report that reads facts or sums, with the erased id read as `as_id`.
pub(crate) async fn reports(store: &impl Erasing) -> Vec<String> {
    let mut out = super::rollups::transcript(store, 3, false).await;
    out.push(format!("{:?}", store.funnel(&all()).await.expect("funnel")));
    out.push(format!(
        "{:?}",
        store.products(&all()).await.expect("products")
    ));
    // One line per cart: the replacement sorts elsewhere than the id.
    out.extend(
        store
            .carts(&all())
            .await
            .expect("carts")
            .iter()
            .map(|c| format!("{c:?}")),
    );
    out.push(format!(
        "{:?}",
        store.cart_campaigns(&all()).await.expect("rollup")
    ));
    let w = rm_store::model::attribution::Windows::default();
    out.push(format!(
        "{:?}",
        store.sales(&all(), &w).await.expect("sales")
    ));
    out.push(format!(
        "{:?}",
        rm_store::sums::sales_report(store, &all(), &w)
            .await
            .expect("sales sums")
    ));
    out.sort();
    out
}

/// Fails naming only the lines that differ (the transcripts are long).
pub(crate) fn same(got: &[String], want: &[String], what: &str) {
    let missing: Vec<&String> = want.iter().filter(|l| !got.contains(l)).collect();
    let extra: Vec<&String> = got.iter().filter(|l| !want.contains(l)).collect();
    assert!(
        missing.is_empty() && extra.is_empty() && got.len() == want.len(),
        "{what}: missing {missing:#?}\nextra {extra:#?}"
    );
}

fn request(id: &str, namespace: Option<&str>, at: i64) -> Erasure {
    Erasure::new(
        uuid::Uuid::now_v7().to_string(),
        namespace.map(str::to_owned),
        id,
        "privacy-desk".into(),
        at,
        None,
    )
}

/// Runs the erasures; returns the erasure (settled) for the backend's search.
pub(crate) async fn erased_as_asked(store: &impl Erasing) -> Erasure {
    super::offers::attributed_as_the_reports_attribute(store, 3).await;
    let before = reports(store).await;
    let now = chrono::Utc::now().timestamp_millis();

    // Another namespace's tenant: the stream's ads and orders are `default`'s.
    let foreign = request(ERASED, Some("acme"), now);
    store.request_erasure(&foreign).await.expect("record");
    let nothing = store.erase(&foreign).await.expect("erase in acme");
    assert_eq!(
        nothing.total(),
        0,
        "another namespace's rows stay: {nothing:?}"
    );
    same(
        &reports(store).await,
        &before,
        "another namespace's erasure",
    );

    let e = request(ERASED, None, now + 1);
    store.request_erasure(&e).await.expect("record");
    let pending = store
        .erasure(&e.request_id)
        .await
        .expect("read")
        .expect("recorded");
    assert_eq!((pending.done_ms, &pending.tracking_id), (0, &e.tracking_id));
    let erased = store.erase(&e).await.expect("erase");
    for (what, n) in [
        ("views", erased.views),
        ("view facts", erased.view_facts),
        ("product facts", erased.product_facts),
        ("ad facts", erased.ad_facts),
        ("cart events", erased.cart_events),
        ("touches", erased.touches),
        ("order lines", erased.order_lines),
        ("order states", erased.order_states),
        ("orders by shopper", erased.order_shoppers),
        ("served ads", erased.served_ads),
    ] {
        assert!(n > 0, "the stream stores the shopper's {what}: {erased:?}");
    }
    store
        .finish_erasure(&e, now + 2, erased)
        .await
        .expect("finish");
    let done = store
        .erasure(&e.request_id)
        .await
        .expect("read")
        .expect("recorded");
    assert_eq!((done.done_ms, done.erased), (now + 2, erased));

    // Counts stay; the carts report names the replacement where it named the id.
    let after = reports(store).await;
    let renamed: Vec<String> = before
        .iter()
        .map(|l| l.replace(&format!("\"{ERASED}\""), &format!("\"{}\"", e.replacement)))
        .collect();
    same(&after, &renamed, "every report reads as before");
    assert!(
        after.iter().any(|l| l.contains(&e.replacement)),
        "the carts report shows the replacement"
    );

    let again = store.erase(&e).await.expect("erase again");
    assert_eq!(again.total(), 0, "a second run finds nothing: {again:?}");
    store
        .finish_erasure(&e, now + 3, again)
        .await
        .expect("finish again");
    let kept = store
        .erasure(&e.request_id)
        .await
        .expect("read")
        .expect("recorded");
    assert_eq!(kept.done_ms, now + 2, "the first run's record stays");

    let listed = store.erasures_since(now).await.expect("list");
    let ids: Vec<&str> = listed.iter().map(|x| x.request_id.as_str()).collect();
    assert_eq!(
        ids,
        vec![foreign.request_id.as_str(), e.request_id.as_str()]
    );
    assert!(store
        .erasures_since(now + 5)
        .await
        .expect("list")
        .is_empty());

    assert_eq!(store.settle_erasures(now + 2).await.expect("settle"), 2);
    assert_eq!(store.settle_erasures(now + 2).await.expect("settle"), 0);
    let settled = store
        .erasure(&e.request_id)
        .await
        .expect("read")
        .expect("recorded");
    assert!(!settled.holds_id());
    assert_eq!(settled.digest, erasure::digest(ERASED));
    assert!(
        store.erase(&settled).await.is_err(),
        "a settled erasure cannot run"
    );
    same(&reports(store).await, &after, "settled");
    settled
}

/// The forms the id takes in stored bytes: as a postcard string (its length, 3,
/// first), inside a shopper (`session:s-1`), as a TSV field or a JSON string; its
/// hash as postcard, as fixed little- and big-endian integers, and as text. (A bare
/// `s-1` is too short to search binary data for without finding it by chance.)
pub(crate) fn traces() -> Vec<(&'static str, Vec<u8>)> {
    traces_of(ERASED, shopper_hash(ERASED))
}

/// The forms of any id and hash (see [`traces`]).
pub(crate) fn traces_of(id: &str, h: u64) -> Vec<(&'static str, Vec<u8>)> {
    let mut varint = Vec::new();
    let mut v = h;
    while v >= 0x80 {
        varint.push((v as u8) | 0x80);
        v >>= 7;
    }
    varint.push(v as u8);
    let len = u8::try_from(id.len()).expect("a short id");
    let id = id.as_bytes();
    let framed = |before: &[u8], after: &[u8]| [before, id, after].concat();
    vec![
        ("the id, postcard", framed(&[len], &[])),
        ("the id, in a shopper", framed(b":", &[])),
        ("the id, a TSV field", framed(b"\t", &[])),
        ("the id, a first TSV field", framed(&[], b"\t")),
        ("the id, JSON", framed(b"\"", b"\"")),
        ("its hash, varint", varint),
        ("its hash, LE", h.to_le_bytes().to_vec()),
        ("its hash, BE", h.to_be_bytes().to_vec()),
        ("its hash, decimal", h.to_string().into_bytes()),
    ]
}

/// Where in `bytes` (a table's content) a trace of the id is, if anywhere; the
/// audit log (`erasures`) may keep the hash, never the id.
pub(crate) fn trace_in(table: &str, bytes: &[u8]) -> Option<&'static str> {
    trace_of_in(&traces(), table, bytes)
}

/// Where in `bytes` one of `traces` is (the audit log may keep the hash).
pub(crate) fn trace_of_in(
    traces: &[(&'static str, Vec<u8>)],
    table: &str,
    bytes: &[u8],
) -> Option<&'static str> {
    traces
        .iter()
        .filter(|(what, _)| table != "erasures" || what.starts_with("the id"))
        .find(|(_, t)| bytes.windows(t.len()).any(|w| w == t.as_slice()))
        .map(|(what, _)| *what)
}

#[test]
fn traces_are_found_where_they_are() {
    assert_eq!(
        trace_in("views", b"xx\ts-1\tyy"),
        Some("the id, a TSV field")
    );
    assert_eq!(
        trace_in("views", b"session:s-1"),
        Some("the id, in a shopper")
    );
    assert_eq!(trace_in("views", b"\x03s-1"), Some("the id, postcard"));
    assert_eq!(trace_in("views", b"\ts-2\t"), None);
    let h = shopper_hash(ERASED).to_string();
    assert_eq!(trace_in("erasures", h.as_bytes()), None);
    assert!(trace_in("product_facts", h.as_bytes()).is_some());
}
