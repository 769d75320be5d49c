//! Sales attributed as orders arrive (`rm_store::model::tallies::sales`) equal the
//! sales attributed at read time from the stored orders and touches, on every backend:
//! for the rollups suite's streams of events (genuine, expired and forged ad ids,
//! bots, prefetches, copies, events days early) and orders of their shoppers
//! (products they saw and clicked and others, before, between and after their
//! touches, one re-sent), interleaved in batches cut anywhere, each written batch's
//! lookups appended to an orders "log" as offers the way the pipeline appends them,
//! through crashes: after the sales tallies' write without the orders' states (then
//! the batch is folded again), and after a batch's write without its offers (then the
//! batch is replayed, and its copies looked up again).

use std::collections::VecDeque;

use rm_aggregator::sales::{self, Lookups, OrderIn, OrderMsg};
use rm_schemas::{EventRecord, InteractionType as T};
use rm_store::model::attribution::Windows;
use rm_store::BatchWrite;

use super::rollups::{fold_loaded, stream, Rng};
use super::{filter, Store, D0};

/// The orders of a stream's shoppers: `n` orders of `s-0`..`s-2` (session ids), of
/// the products the stream's ads carry and one they do not, dated through the stream.
fn orders(seed: u64, events: &[EventRecord]) -> Vec<OrderMsg> {
    let mut rng = Rng(seed.wrapping_mul(0x2545_F491) | 1);
    let times: Vec<i64> = events
        .iter()
        .filter(|r| {
            matches!(
                r.event.interaction_type,
                T::ProductClick | T::ProductImpression
            )
        })
        .map(|r| r.event.timestamp.timestamp_millis())
        .collect();
    let (lo, hi) = (
        times.iter().copied().min().unwrap_or(0),
        times.iter().copied().max().unwrap_or(0),
    );
    let mut out = Vec::new();
    for i in 0..8u64 {
        let ms = lo
            + i64::try_from(rng.below(u64::try_from(hi - lo + 1).unwrap_or(1) + 600_000))
                .unwrap_or(0);
        let at = chrono::DateTime::from_timestamp_millis(ms)
            .expect("time")
            .to_rfc3339();
        let items: Vec<String> = (0..1 + rng.below(3))
            .map(|k| {
                format!(
                    r#"{{"productCode":"sku-{}","quantity":{},"totalOrderItemPriceAfterDiscounts":{}.{:02}}}"#,
                    if rng.chance(15) { 9 } else { rng.below(4) },
                    1 + k,
                    1 + rng.below(90),
                    rng.below(100)
                )
            })
            .collect();
        let json = format!(
            r#"{{"v":1,"receivedAt":"{at}","id":"o-{i}","orderDate":"{at}","catalogId":"cat","sessionId":"s-{}","currency":"USD","orderItems":[{}]}}"#,
            rng.below(3),
            items.join(",")
        );
        out.push(OrderMsg::decode(json.as_bytes()).expect("an order record"));
    }
    // A re-sent order (other content): nothing moves.
    let again = out[0].clone();
    out.push(again);
    out
}

/// The orders "log": records with their positions in two partitions, read in order.
#[derive(Default)]
struct OrdersLog {
    records: Vec<OrderIn>,
    next: [i64; 2],
    read: usize,
}

impl OrdersLog {
    fn append(&mut self, msg: OrderMsg) {
        let id = msg.order_id();
        let p = usize::from(id.len() % 2 == 1);
        self.next[p] += 1;
        self.records.push(OrderIn {
            msg,
            at: (p as i32, self.next[p] - 1),
        });
    }

    fn unread(&self) -> usize {
        self.records.len() - self.read
    }
}

/// Folds a batch of the orders topic from the store.
async fn fold_orders(store: &impl Store, batch: &[OrderIn], w: &Windows) -> sales::SalesFold {
    let mut states = store
        .load_orders(&sales::order_ids(batch))
        .await
        .expect("load orders");
    let mut places = sales::places(batch, &states, w);
    places.extend(sales::progress_places(batch));
    let mut tallies = store.load_tallies(&places).await.expect("load tallies");
    sales::fold(batch, &mut states, &mut tallies, w)
}

/// The offers a written batch's lookups make (as the pipeline looks them up).
async fn offers(store: &impl Store, l: &Lookups, w: &Windows) -> Vec<OrderMsg> {
    let offers = l.offers(store, w).await.expect("offers");
    offers.into_iter().map(OrderMsg::Offer).collect()
}

/// Ingests the stream and its orders, interleaved, through crashes; then checks the
/// sales tallies against the read-time attribution. Returns a transcript.
pub(crate) async fn attributed_as_the_reports_attribute(
    store: &impl Store,
    seed: u64,
) -> Vec<String> {
    let w = Windows::default();
    let (records, positions) = stream(seed);
    let mut pending: VecDeque<OrderMsg> = orders(seed, &records).into();
    let mut log = OrdersLog::default();
    let mut rng = Rng(seed ^ 0x5A1E5);
    let mut i = 0;
    let mut crashes = 0;
    while i < records.len() || !pending.is_empty() || log.unread() > 0 {
        // Orders reach the log at random points of the stream.
        while rng.chance(40) {
            match pending.pop_front() {
                Some(o) => log.append(o),
                None => break,
            }
        }
        if i >= records.len() {
            while let Some(o) = pending.pop_front() {
                log.append(o);
            }
        }
        if i < records.len() && rng.chance(60) {
            let end = (i + 1 + rng.below(30) as usize).min(records.len());
            let write = fold_loaded(store, &records[i..end], &positions[i..end]).await;
            store.write(&write).await.expect("write events");
            let l = Lookups {
                orders: Vec::new(),
                touches: write.touches.clone(),
            };
            for o in offers(store, &l, &w).await {
                log.append(o);
            }
            i = end;
        } else if log.unread() > 0 {
            let from = log.read;
            let end = (from + 1 + rng.below(6) as usize).min(log.records.len());
            let batch = log.records[from..end].to_vec();
            let f = fold_orders(store, &batch, &w).await;
            let written = |f: sales::SalesFold| BatchWrite {
                order_lines: f.lines,
                order_states: f.states,
                tallies: f.tallies,
                ..BatchWrite::default()
            };
            match rng.below(4) {
                0 => {
                    // A crash after the tallies' write (ClickHouse inserts them first),
                    // before the states: the batch is folded again from the store.
                    crashes += 1;
                    let partial = BatchWrite {
                        tallies: f.tallies.clone(),
                        ..BatchWrite::default()
                    };
                    store.write(&partial).await.expect("write part");
                    let again = fold_orders(store, &batch, &w).await;
                    let l = Lookups {
                        orders: again.orders.clone(),
                        touches: Vec::new(),
                    };
                    store
                        .write(&written(again))
                        .await
                        .expect("write the replay");
                    for o in offers(store, &l, &w).await {
                        log.append(o);
                    }
                }
                1 => {
                    // Written, the offers lost with a crash: replayed (nothing was
                    // committed), its orders now copies that are looked up again.
                    crashes += 1;
                    store.write(&written(f)).await.expect("write");
                    let again = fold_orders(store, &batch, &w).await;
                    assert!(
                        again
                            .tallies
                            .iter()
                            .all(|(k, _)| k.metric == rm_store::model::tallies::Metric::Progress),
                        "a replay moves no sales"
                    );
                    let l = Lookups {
                        orders: again.orders.clone(),
                        touches: Vec::new(),
                    };
                    store
                        .write(&written(again))
                        .await
                        .expect("write the replay");
                    for o in offers(store, &l, &w).await {
                        log.append(o);
                    }
                }
                _ => {
                    let l = Lookups {
                        orders: f.orders.clone(),
                        touches: Vec::new(),
                    };
                    store.write(&written(f)).await.expect("write");
                    for o in offers(store, &l, &w).await {
                        log.append(o);
                    }
                }
            }
            log.read = end;
        }
    }
    assert!(
        crashes > 0 || log.records.len() < 8,
        "seed {seed}: crashes happen"
    );
    let mut transcript = Vec::new();
    let mut attributed = 0;
    for (c, cat, from, to) in [
        (None, None, None, None),
        (Some("c1"), None, None, None),
        (Some(""), None, None, None),
        (None, Some("cat"), Some(D0), Some(D0)),
    ] {
        let f = filter(c, None, cat, from, to);
        let tallied = rm_store::sums::sales_report(store, &f, &w)
            .await
            .expect("sales from the rollups");
        let facts = store.sales(&f, &w).await.expect("sales from the facts");
        assert_eq!(tallied, facts, "seed {seed}: {f:?}");
        // Pages by key give the whole report.
        for size in [1, 3] {
            let f = &f;
            let paged = super::pages::by_pages(size, |cursor| async move {
                let at = rm_store::sums::PageAt {
                    cursor: &cursor,
                    size,
                };
                rm_store::sums::sales_page(store, f, Some(at)).await
            })
            .await;
            assert_eq!(paged, tallied, "seed {seed}: {f:?} by pages of {size}");
        }
        attributed += tallied.iter().filter(|r| !r.campaign_id.is_empty()).count();
        transcript.extend(tallied.iter().map(|r| format!("{f:?} {r:?}")));
    }
    let (tallied, facts) = super::sales::campaign_sales_both_ways(store).await;
    assert_eq!(tallied, facts, "seed {seed}: campaigns");
    transcript.push(format!("attributed rows {attributed}"));
    transcript
}
