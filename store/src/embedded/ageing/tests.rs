//! A pass over a store holding an old and a young row of every table it ages: the
//! old rows' ids are replaced (and found under their new keys, also after a
//! restart), the young rows keep theirs, a second pass replaces nothing, and a
//! later pass ages the facts received since the first (the watermark). A cart line
//! used again under the raw id after it was aged joins its aged line.

use redb::ReadableDatabase as _;

use super::*;
use crate::erase::EraseStore as _;
use crate::model::ageing::AgeingKey;
use crate::model::attribution::Credit;
use crate::model::carts::CartKey;
use crate::model::funnel::ViewKey;
use crate::model::traffic::shopper_hash;

mod rows;

use rows::{ad, cart, line, product, touch, view, DAY, OLD};

fn pass(before_day: i64) -> Ageing {
    Ageing::new(AgeingKey::new(b"test"), before_day * DAY)
}

/// Old rows (day 50) and young ones (day 150) of every table.
fn fill(store: &EmbeddedStore) {
    put(
        store,
        vec![view("old", 50), view("young", 150)],
        vec![],
        true,
    );
    put(
        store,
        vec![],
        vec![cart("old", &[40, 60]), cart("in-use", &[60, 120])],
        false,
    );
    let w = store.db.begin_write().expect("write");
    let (products, ads) = ([product(50), product(150)], [ad(50), ad(150)]);
    let products: Vec<_> = products
        .iter()
        .map(|p| (super::super::product_key(p), fact_val(p)))
        .collect();
    let ads: Vec<_> = ads
        .iter()
        .map(|a| (super::super::ad_key(a), fact_val(a)))
        .collect();
    overwrite(&w, PRODUCT_FACTS, &products).expect("products");
    overwrite(&w, AD_FACTS, &ads).expect("ads");
    let touches = [touch(50), touch(150)];
    let rows: Vec<_> = touches
        .iter()
        .map(|t| (super::super::touch_key(t), val(t)))
        .collect();
    overwrite(&w, TOUCHES, &rows).expect("touches");
    let lines = [line(50), line(150)];
    let mut states: Vec<OrderCredits> = lines
        .iter()
        .map(|l| OrderCredits::new(std::slice::from_ref(l)))
        .collect();
    for (s, t) in states.iter_mut().zip(touches.iter()) {
        s.lines[0].credit = Some((t.clone(), Credit::Click));
    }
    for (table, rows) in sales::rows(&states, &lines, &touches) {
        overwrite(&w, table, &rows).expect("index");
    }
    {
        let mut orders = w.open_table(ORDERS).expect("orders");
        for l in &lines {
            orders
                .insert(l.order_id.as_str(), val(&vec![l.clone()]).as_slice())
                .expect("order");
        }
    }
    w.commit().expect("commit");
}

/// The ids of every row a pass ages (but facts), a line per row, with `a`'s
/// pseudonyms of the shopper's two ids written `AGED` and `AGED-S`; each key checked
/// against its row.
fn snapshot(store: &EmbeddedStore, a: &Ageing) -> Vec<String> {
    let r = store.db.begin_read().expect("read");
    let rows = |table: Table| -> Vec<(Vec<u8>, Vec<u8>)> {
        let t = r.open_table(table).expect("table");
        t.iter()
            .expect("iter")
            .map(|row| {
                let (k, v) = row.expect("row");
                (k.value().to_vec(), v.value().to_vec())
            })
            .collect()
    };
    let mut out = Vec::new();
    for (_, v) in rows(VIEWS.rows) {
        let (row, _) = parse_view_row(&v).expect("view");
        out.push(format!("view {} {}", row.day, row.key.tracking_id));
    }
    for (_, v) in rows(CARTS.rows) {
        let rows: Vec<CartEventRow> = parse(&v).expect("cart");
        let k = &rows[0].key;
        assert!(rows.iter().all(|r| r.key == *k));
        out.push(format!(
            "cart {} {} {}",
            k.product_code,
            k.tracking_id,
            rows.len()
        ));
    }
    for (k, v) in rows(TOUCHES) {
        let t: Touch = parse(&v).expect("touch");
        assert_eq!(k, super::super::touch_key(&t));
        out.push(format!("touch {} {}", t.time_ms / DAY, t.shopper));
    }
    for (k, v) in rows(sales::TOUCH_SHOPPERS) {
        let t: Touch = parse(&v).expect("touch");
        assert_eq!(k, sales::touch_key(&t));
        out.push(format!("touch-index {} {}", t.time_ms / DAY, t.shopper));
    }
    for (k, v) in rows(sales::ORDER_SHOPPERS) {
        let o: ShopperOrder = parse(&v).expect("order");
        assert_eq!(k, sales::order_key(&o));
        out.push(format!("order-index {} {}", o.order_id, o.shopper));
    }
    for (_, v) in rows(sales::ORDER_CREDITS) {
        let s = OrderCredits::from_bytes(&v).expect("state");
        for l in &s.lines {
            let credit = l.credit.as_ref().map_or("-", |(t, _)| t.shopper.as_str());
            let l = &l.line;
            let ids = format!("{} {} {}", l.customer_id, l.session_id, credit);
            out.push(format!("state {} {ids}", l.order_id));
        }
    }
    let t = r.open_table(ORDERS).expect("orders");
    for row in t.iter().expect("iter") {
        let (k, v) = row.expect("row");
        for l in parse::<Vec<OrderLine>>(v.value()).expect("lines") {
            assert_eq!(l.order_id, k.value());
            out.push(format!(
                "order {} {} {}",
                l.order_id, l.customer_id, l.session_id
            ));
        }
    }
    let (aged, aged_session) = (a.pseudonym(OLD), a.pseudonym("session-1"));
    let mut out: Vec<String> = out
        .into_iter()
        .map(|l| l.replace(&aged, "AGED").replace(&aged_session, "AGED-S"))
        .collect();
    out.sort();
    out
}

/// What [`snapshot`] shows once the rows of day 50 are aged, and those of day 150
/// too when `all`.
fn expected(all: bool) -> Vec<String> {
    let (id, session) = if all {
        ("AGED", "AGED-S")
    } else {
        (OLD, "session-1")
    };
    let mut out = vec![
        "view 50 AGED".to_owned(),
        format!("view 150 {id}"),
        "cart old AGED 2".to_owned(),
        format!("cart in-use {id} 2"),
        "touch 50 customer:AGED".to_owned(),
        format!("touch 150 customer:{id}"),
        "touch-index 50 customer:AGED".to_owned(),
        format!("touch-index 150 customer:{id}"),
        "order-index o-50 customer:AGED".to_owned(),
        "order-index o-50 session:AGED-S".to_owned(),
        format!("order-index o-150 customer:{id}"),
        format!("order-index o-150 session:{session}"),
        "order o-50 AGED AGED-S".to_owned(),
        format!("order o-150 {id} {session}"),
        "state o-50 AGED AGED-S customer:AGED".to_owned(),
        format!("state o-150 {id} {session} customer:{id}"),
    ];
    out.sort();
    out
}

/// The shoppers of the facts, by receive day.
fn fact_shoppers(store: &EmbeddedStore) -> Vec<(i64, u64)> {
    let r = store.db.begin_read().expect("read");
    let mut out = Vec::new();
    for row in r.open_table(PRODUCT_FACTS).expect("t").iter().expect("i") {
        let p = parse_product_fact(row.expect("row").1.value()).expect("fact");
        out.push((p.received_ms / DAY, p.shopper));
    }
    for row in r.open_table(AD_FACTS).expect("t").iter().expect("i") {
        let f = parse_ad_fact(row.expect("row").1.value()).expect("fact");
        out.push((f.received_ms / DAY, f.shopper));
    }
    out.sort_unstable();
    out
}

/// The views and carts found by these tracking ids' keys.
fn found(store: &EmbeddedStore, id: &str) -> (usize, usize) {
    let views: Vec<Vec<u8>> = ["old", "young"]
        .map(|v| {
            key(&ViewKey {
                ad_id: "rm1.c.ad".into(),
                video_id: v.into(),
                tracking_id: id.into(),
            })
        })
        .to_vec();
    let carts: Vec<Vec<u8>> = ["old", "in-use"]
        .map(|p| {
            key(&CartKey {
                tracking_id: id.into(),
                catalog_id: "cat".into(),
                product_code: p.into(),
            })
        })
        .to_vec();
    let n = |kind, keys: &[Vec<u8>]| {
        entities::read(&store.db, &store.index, kind, keys, |_, _| Ok(()))
            .expect("read")
            .len()
    };
    (n(VIEWS, &views), n(CARTS, &carts))
}

#[tokio::test]
async fn a_pass_ages_the_old_rows_once_and_keeps_the_young_ones() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("store.redb");
    let store = EmbeddedStore::open(&path).expect("open");
    fill(&store);
    let a = pass(100);
    let aged = a.pseudonym(OLD);
    let erased = store.age(&a).await.expect("pass");
    assert_eq!(
        erased,
        Erased {
            views: 1,
            view_facts: 1,
            product_facts: 1,
            ad_facts: 1,
            cart_events: 2,
            touches: 1,
            order_lines: 1,
            order_states: 1,
            order_shoppers: 2,
            served_ads: 0,
        }
    );
    assert_eq!(snapshot(&store, &a), expected(false));
    let h = shopper_hash(OLD);
    assert_eq!(
        fact_shoppers(&store),
        [(50, a.hash(h)), (50, a.hash(h)), (150, h), (150, h)]
    );
    assert_eq!(found(&store, OLD), (1, 1), "the young view and cart line");
    assert_eq!(found(&store, &aged), (1, 1), "the old ones, moved");

    assert_eq!(store.age(&a).await.expect("again"), Erased::default());
    drop(store);
    let store = EmbeddedStore::open(&path).expect("reopen");
    assert_eq!(found(&store, OLD), (1, 1), "after a restart");
    assert_eq!(found(&store, &aged), (1, 1), "after a restart");

    // A later pass ages the rest, and the facts received since the first one.
    let later = store.age(&pass(200)).await.expect("later");
    assert_eq!(
        (
            later.views,
            later.cart_events,
            later.product_facts,
            later.ad_facts
        ),
        (1, 2, 1, 1)
    );
    assert_eq!(
        (later.touches, later.order_lines, later.order_states),
        (1, 1, 1)
    );
    assert_eq!(later.order_shoppers, 2);
    assert_eq!(snapshot(&store, &a), expected(true));
    assert_eq!(found(&store, OLD), (0, 0));
    assert_eq!(
        fact_shoppers(&store),
        [
            (50, a.hash(h)),
            (50, a.hash(h)),
            (150, a.hash(h)),
            (150, a.hash(h))
        ]
    );
    assert_eq!(
        store.age(&pass(200)).await.expect("again"),
        Erased::default()
    );
    assert_eq!(
        store.age(&pass(100)).await.expect("an earlier one"),
        Erased::default()
    );
}

/// Writes views and carts as the aggregator does, their index entries to the index
/// table (`to_table`) or kept in memory.
fn put(
    store: &EmbeddedStore,
    mut views: Vec<(Vec<u8>, Vec<u8>)>,
    mut carts: Vec<(Vec<u8>, Vec<u8>)>,
    to_table: bool,
) {
    views.sort();
    carts.sort();
    let w = store.db.begin_write().expect("write");
    let applied = [
        entities::upsert(&w, &store.index, VIEWS, &views, to_table).expect("views"),
        entities::upsert(&w, &store.index, CARTS, &carts, to_table).expect("carts"),
    ];
    w.commit().expect("commit");
    for u in applied {
        u.apply(&store.index).expect("apply");
    }
}

/// A shopper back, under the raw id, to a product whose line was aged: the new line,
/// once old, joins the aged one (both histories, one line, found by the aged key
/// wherever the index keeps it, also after a restart). A view of the same ad id and
/// video again is left as it is (two views are not one).
#[tokio::test]
async fn a_line_used_again_after_it_was_aged_joins_it() {
    for to_table in [true, false] {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("store.redb");
        let store = EmbeddedStore::open(&path).expect("open");
        put(
            &store,
            vec![view("old", 50)],
            vec![cart("old", &[40, 60])],
            to_table,
        );
        let a = pass(100);
        let first = store.age(&a).await.expect("pass");
        assert_eq!((first.views, first.cart_events), (1, 2));
        put(
            &store,
            vec![view("old", 110)],
            vec![cart("old", &[110])],
            !to_table,
        );
        assert_eq!(found(&store, OLD), (1, 1));

        let later = store.age(&pass(200)).await.expect("later");
        assert_eq!(
            later,
            Erased {
                cart_events: 1,
                ..Erased::default()
            }
        );
        let seen = |store: &EmbeddedStore| {
            let mut carts: Vec<String> = snapshot(store, &a);
            carts.retain(|l| l.starts_with("cart") || l.starts_with("view"));
            carts
        };
        let expected = ["cart old AGED 3", "view 110 shopper-1", "view 50 AGED"];
        assert_eq!(seen(&store), expected, "{to_table}");
        assert_eq!(found(&store, OLD), (1, 0), "{to_table}");
        assert_eq!(found(&store, &a.pseudonym(OLD)), (1, 1), "{to_table}");
        let days: Vec<i64> = {
            let r = store.db.begin_read().expect("read");
            let t = r.open_table(CARTS.rows).expect("rows");
            let (_, v) = t.first().expect("first").expect("a line");
            let rows: Vec<CartEventRow> = parse(v.value()).expect("rows");
            rows.iter().map(|r| r.fact.time_ms / DAY).collect()
        };
        assert_eq!(days, [40, 60, 110], "in time order");
        assert_eq!(
            store.age(&pass(200)).await.expect("again"),
            Erased::default()
        );

        drop(store);
        let store = EmbeddedStore::open(&path).expect("reopen");
        assert_eq!(found(&store, &a.pseudonym(OLD)), (1, 1), "after a restart");
        assert_eq!(found(&store, OLD), (1, 0), "after a restart");
        // The raw key is free again: a new line takes a fresh slot.
        put(&store, vec![], vec![cart("old", &[210])], false);
        assert_eq!(found(&store, OLD), (1, 1));
        assert_eq!(seen(&store).len(), 4);
    }
}
