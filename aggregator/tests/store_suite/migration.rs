//! Stores written by the previous version (JSON keys; a view's facts and derived row
//! in two tables; values in JSON or postcard) are converted at open: every report is
//! unchanged, the pipeline still finds every entity's facts, and the old tables are
//! gone.
//!
//! [`downgrade`] rewrites a store of this version into the previous version's layout,
//! with the previous version's keys exactly, so the suites' stores can be converted
//! back and compared.

use std::path::Path;

use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition, TableHandle};
use rm_store::model::ads::AdFact;
use rm_store::model::attribution::Touch;
use rm_store::model::carts::CartEventRow;
use rm_store::model::funnel::{ViewFact, ViewRow};
use rm_store::model::products::ProductFact;
use serde::de::DeserializeOwned;
use serde::Serialize;

type New = TableDefinition<'static, &'static [u8], &'static [u8]>;
type Old = TableDefinition<'static, &'static str, &'static [u8]>;

/// The tables of the previous version.
pub const OLD: [&str; 6] = [
    "view_facts",
    "views",
    "product_facts",
    "carts",
    "touches",
    "ad_facts",
];

fn json<T: Serialize>(v: &T) -> String {
    serde_json::to_string(v).expect("json")
}

/// The previous version's postcard value: tag 1, then postcard.
fn tagged<T: Serialize>(v: &T) -> Vec<u8> {
    postcard::to_extend(v, vec![1]).expect("postcard")
}

fn untag<'a, T: serde::Deserialize<'a>>(b: &'a [u8]) -> T {
    // Tag 1: postcard; tag 2: a product or ad fact with its traffic class; tag 3: a
    // view's row with `served_repeat`.
    assert!(matches!(b[0], 1..=3), "new rows are postcard");
    postcard::from_bytes(&b[1..]).expect("postcard row")
}

fn rows<T: DeserializeOwned>(db: &Database, name: &'static str) -> Vec<T> {
    let r = db.begin_read().expect("read");
    let t = r.open_table(New::new(name)).expect(name);
    t.iter()
        .expect("iter")
        .map(|row| untag(row.expect("row").1.value()))
        .collect()
}

/// The product and ad facts the served-ad rules judged (a repeat, an event before its
/// ad was served, a product not in its ad), as the previous version stored them: with
/// the edge's class only. Written beside the judged copies, they make the store count
/// what the previous version counted (a fact's best copy is the valid one), so its
/// reports can be compared with the converted store's.
pub fn undecided_facts(path: &Path) -> rm_store::BatchWrite {
    use rm_store::model::traffic::TrafficClass;
    let decided = |c: TrafficClass| {
        matches!(
            c,
            TrafficClass::Repeat | TrafficClass::BeforeServe | TrafficClass::NotInAd
        )
    };
    let db = Database::create(path).expect("open redb");
    let products: Vec<ProductFact> = rows(&db, "product_facts_v2");
    let ads: Vec<AdFact> = rows(&db, "ad_facts_v2");
    rm_store::BatchWrite {
        product_facts: products
            .into_iter()
            .filter(|p| decided(p.traffic))
            .map(|p| ProductFact {
                traffic: TrafficClass::Valid,
                ..p
            })
            .collect(),
        ad_facts: ads
            .into_iter()
            .filter(|a| decided(a.traffic))
            .map(|a| AdFact {
                traffic: TrafficClass::Valid,
                ..a
            })
            .collect(),
        ..rm_store::BatchWrite::default()
    }
}

/// Rewrites the store at `path` into the previous version's tables and keys; views
/// and carts with JSON values, the rest postcard (the previous version read both).
pub fn downgrade(path: &Path) {
    let db = Database::create(path).expect("open redb");
    let views: Vec<Vec<u8>> = {
        let r = db.begin_read().expect("read");
        let t = r.open_table(New::new("views_v2")).expect("views_v2");
        t.iter()
            .expect("iter")
            .map(|row| row.expect("row").1.value().to_vec())
            .collect()
    };
    let products: Vec<ProductFact> = rows(&db, "product_facts_v2");
    let ads: Vec<AdFact> = rows(&db, "ad_facts_v2");
    let carts: Vec<Vec<CartEventRow>> = rows(&db, "carts_v2");
    let touches: Vec<Touch> = rows(&db, "touches_v2");
    let w = db.begin_write().expect("write");
    {
        let mut vt = w.open_table(Old::new("views")).expect("views");
        let mut ft = w.open_table(Old::new("view_facts")).expect("view_facts");
        for v in &views {
            let (row, facts): (ViewRow, Vec<ViewFact>) = untag(v);
            let k = json(&row.key);
            vt.insert(k.as_str(), json(&row).as_bytes())
                .expect("insert");
            ft.insert(k.as_str(), tagged(&facts).as_slice())
                .expect("insert");
        }
        let mut pt = w.open_table(Old::new("product_facts")).expect("products");
        for p in &products {
            let k = json(&(&p.group, p.action, p.dedup_key.to_string(), p.status));
            // The previous version's `ProductFact`: no event time.
            let old = (&p.group, p.action, p.dedup_key, p.status);
            pt.insert(k.as_str(), tagged(&old).as_slice())
                .expect("insert");
        }
        let mut at = w.open_table(Old::new("ad_facts")).expect("ads");
        for a in &ads {
            let k = json(&(
                &a.campaign_id,
                &a.ad_id,
                a.action,
                format!("{:032x}", a.dedup_key),
                a.time_ms,
                a.status,
            ));
            // The previous version's `AdFact`: no traffic class, shopper, receive time.
            let old = (
                &a.campaign_id,
                &a.ad_id,
                a.action,
                a.dedup_key,
                a.time_ms,
                a.status,
            );
            at.insert(k.as_str(), tagged(&old).as_slice())
                .expect("insert");
        }
        let mut ct = w.open_table(Old::new("carts")).expect("carts");
        for c in &carts {
            let k = json(&c[0].key);
            ct.insert(k.as_str(), json(c).as_bytes()).expect("insert");
        }
        let mut tt = w.open_table(Old::new("touches")).expect("touches");
        for t in &touches {
            let k = json(&(&t.shopper, t.time_ms, format!("{:032x}", t.dedup_key)));
            tt.insert(k.as_str(), tagged(t).as_slice()).expect("insert");
        }
    }
    for t in [
        "views_v2",
        "product_facts_v2",
        "ad_facts_v2",
        "carts_v2",
        "touches_v2",
        "view_slots",
        "cart_slots",
    ] {
        assert!(w.delete_table(New::new(t)).expect("delete"), "{t} existed");
    }
    w.commit().expect("commit");
}

/// The tables a store file holds.
pub fn tables(path: &Path) -> Vec<String> {
    let db = Database::create(path).expect("open redb");
    let r = db.begin_read().expect("read");
    let mut names: Vec<String> = r
        .list_tables()
        .expect("list")
        .map(|t| t.name().to_owned())
        .collect();
    names.sort();
    names
}

/// Deletes the `rollups` table: the store as a version before tallies left it.
/// Deletes what this version keeps of orders beside their lines (their states and the
/// indexes by shopper), as the previous version's store lacks them.
pub fn drop_sales_state(path: &Path) {
    let db = Database::create(path).expect("open redb");
    let w = db.begin_write().expect("write");
    for t in ["order_credits", "order_shoppers", "touches_by_shopper"] {
        assert!(w.delete_table(New::new(t)).expect("delete"), "{t}");
    }
    w.commit().expect("commit");
}

pub fn drop_tallies(path: &Path) {
    let db = Database::create(path).expect("open redb");
    let w = db.begin_write().expect("write");
    assert!(
        w.delete_table(New::new("rollups")).expect("delete"),
        "a rollups table"
    );
    w.commit().expect("commit");
}

/// Deletes the rollups' rows whose key `doomed` picks (given the key and its scope
/// and grain bytes); there must be some.
fn drop_rollups(path: &Path, what: &str, doomed: impl Fn(&[u8], u8, u8) -> bool) {
    let db = Database::create(path).expect("open redb");
    let w = db.begin_write().expect("write");
    {
        let mut t = w.open_table(New::new("rollups")).expect("a rollups table");
        let keys: Vec<Vec<u8>> = t
            .iter()
            .expect("iterate")
            .map(|r| r.expect("row").0.value().to_vec())
            .filter(|k| {
                let len = u32::from_be_bytes(k[..4].try_into().expect("a length")) as usize;
                doomed(k, k[4 + len], k[5 + len])
            })
            .collect();
        assert!(!keys.is_empty(), "{what}");
        for k in keys {
            t.remove(k.as_slice()).expect("remove");
        }
    }
    w.commit().expect("commit");
}

/// Deletes the campaigns', videos' and campaigns' sales' quarter hours and the zones'
/// marker, and their hours (what the versions before them kept: those scopes by UTC
/// day only).
pub fn drop_zones(path: &Path) {
    use rm_store::model::tallies::{Grain, Metric, Scope};
    drop_hours(path);
    let marker = Metric::ZonesBackfilled.code().to_be_bytes();
    drop_rollups(path, "the zones' marker", |k, scope, grain| {
        let zoned = Scope::ZONED.iter().any(|s| *s as u8 == scope) && grain == Grain::Quarter as u8;
        zoned || k[k.len() - 2..] == marker
    });
}

/// Deletes the hours and the hours' marker (what the versions before them kept).
pub fn drop_hours(path: &Path) {
    use rm_store::model::tallies::{Grain, Metric};
    let marker = Metric::HoursBackfilled.code().to_be_bytes();
    drop_rollups(path, "the hours' marker", |k, _, grain| {
        grain == Grain::Hour as u8 || k[k.len() - 2..] == marker
    });
}

/// Deletes the cart lines' product tallies and their marker (what the version before
/// them kept: its rollups counted cart adds per campaign only).
pub fn drop_cart_products(path: &Path) {
    let cart_product = rm_store::model::tallies::Scope::CartProduct as u8;
    drop_rollups(path, "the cart products' marker", |_, scope, _| {
        scope == cart_product
    });
}
