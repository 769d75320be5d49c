//! The embedded report store: redb tables in `<data-dir>/store/store.redb`.
//!
//! Why redb: the same well-kept, crash-safe embedded B-tree store the embedded log
//! uses, with ACID write transactions, so a batch is all-or-nothing without any code
//! of ours. Keys are binary: postcard of the identifying fields (length-prefixed
//! strings, so unambiguous whatever the ids hold, and exact: no hashing), after an
//! 8-byte event time for facts, or an 8-byte slot for views and carts; values are
//! postcard behind a one-byte tag (postcard writes enum variants by position, so a
//! test pins the bytes). Tables:
//!
//! | table | key | value |
//! |---|---|---|
//! | `views_v2` | slot | the derived `ViewRow`, then the view's fact set |
//! | `view_slots` | view key | slot |
//! | `product_facts_v2` | event time, dedup key, action, ad id status, group | the `ProductFact` |
//! | `ad_facts_v2` | event time, campaign, ad, action, dedup key, ad id status | the `AdFact` (one copy) |
//! | `carts_v2` | slot | the cart's derived event rows (complete) |
//! | `cart_slots` | cart key | slot |
//! | `cart_lines` | campaign, day, cart key of each line's latest event (bytes in place order) | the line's slot (`cart_lines.rs`: the carts report's index, kept with `carts_v2`) |
//! | `orders_v2` | order id (raw) | the order's lines (`OrderLine`s, exact money) |
//! | `touches_v2` | event time, shopper, dedup key | the `Touch` |
//! | `rollups` | campaign, scope, grain, bucket, creative, catalog, product, log partition, metric | the `Tally` (count, stamp; `tallies.rs`) |
//! | `erasures` | request id | the erasure, JSON (`erase.rs`: the audit log of erasures) |
//! | `erasures_by_time` | request time, request id | - |
//! | `ageing` | mark name | ms (`ageing.rs`: the facts' watermark of identifier ageing) |
//!
//! The three fact tables only ever grow, and their keys start with the event time
//! (8 bytes, big-endian, sign bit flipped, so byte order is time order): a batch's new
//! facts land at the end of each B-tree, on a few pages, instead of on a page of every
//! group. Keyed by group (the first layout), every batch rewrote nearly every page of
//! those tables, and the write slowed as the store grew (aggbench, 1M records,
//! sequential session ids: 0.43-0.53x of the consume-only rate before, 0.54-0.74x
//! after, same session). Every fact keeps all of its identity in its key, so a
//! rewritten batch replaces its own rows.
//!
//! Views and carts are updated in place; their rows are stored by slot, in the order
//! they were first written, and found through a slot index by entity key
//! (`entities.rs`), because their natural keys start with random tracking ids.
//!
//! One row per view holds both what the funnel report reads (the `ViewRow`, decoded
//! alone with `postcard::take_from_bytes`) and what the next batch folds into (the
//! facts), so a touched view is one insert. Stores written by earlier versions (JSON
//! keys, views and their facts in two tables) are converted once at open, in one
//! transaction (`migrate.rs`), and so are order lines with `f64` revenue (the
//! `orders` table, `migrate_money.rs`).
//!
//! Files by concern: this one opens the store (creating its tables, converting an
//! older layout through `migrate.rs`); `codec.rs` encodes keys and values;
//! `entities.rs` keeps the views' and carts' slot index; `write.rs` loads fact sets
//! and writes a batch (encoded ahead of time, [`Encoded`], by
//! [`crate::WriteStore::prepare`] on the pipeline's fold stage, rows sorted by key so
//! neighbouring inserts share B-tree pages; the write itself only inserts and
//! commits); `reports/` answers the reports, one file per report family, by scanning
//! the tables and rolling up with the same pure functions as ClickHouse's answers.
//! The sales reports read the orders of the filter (a scan), then the touches in the
//! time range the attribution windows allow before them (one key range); the ad
//! report scans `ad_facts_v2` (narrowed by campaign and ad, which every copy of a fact
//! shares), resolves the copies and then applies the days.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use redb::{Database, TableDefinition};

use crate::{Backend, StoreError};

mod ageing;
mod cart_lines;
mod codec;
mod entities;
mod erase;
mod hours;
mod migrate;
mod migrate_money;
mod reports;
mod retention;
mod sales;
mod tallies;
mod write;
mod zones;

use codec::{ad_key, corrupt, key, parse, product_key, touch_key, val, view_val};
use entities::Index;
pub use erase::tables_content;
pub use write::Encoded;

/// A table keyed by postcard bytes.
type Table = TableDefinition<'static, &'static [u8], &'static [u8]>;

const PRODUCT_FACTS: Table = TableDefinition::new("product_facts_v2");
const TOUCHES: Table = TableDefinition::new("touches_v2");
const AD_FACTS: Table = TableDefinition::new("ad_facts_v2");
const ORDERS: TableDefinition<&str, &[u8]> = TableDefinition::new("orders_v2");
/// Cart lines' rows by slot (`entities::CARTS`'s), also read by the carts report's
/// index (`cart_lines.rs`), which `entities.rs` keeps: named here so neither of the
/// two modules depends on the other both ways.
const CART_ROWS: Table = TableDefinition::new("carts_v2");

/// Encoded rows of one table: key and value.
type Rows = Vec<(Vec<u8>, Vec<u8>)>;

/// The embedded store. Cheap to clone.
#[derive(Clone)]
pub struct EmbeddedStore {
    db: Arc<Database>,
    /// The newest part of the views' and carts' slot index.
    index: Arc<Index>,
}

fn err(e: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(e.to_string())
}

impl EmbeddedStore {
    /// Where the store lives under a data directory.
    pub fn path(data_dir: &Path) -> PathBuf {
        data_dir.join("store").join("store.redb")
    }

    /// Opens (or creates) the store at `path`.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| err(format!("{}: {e}", dir.display())))?;
        }
        let db = Database::create(path).map_err(|e| err(format!("{}: {e}", path.display())))?;
        let w = db.begin_write().map_err(err)?;
        migrate::from_json_keys(&w)?;
        migrate_money::orders(&w)?;
        entities::create(&w)?;
        for t in [PRODUCT_FACTS, TOUCHES, AD_FACTS, tallies::ROLLUPS] {
            w.open_table(t).map_err(err)?;
        }
        tallies::mark_if_new(&w)?;
        w.open_table(ORDERS).map_err(err)?;
        for t in [
            sales::ORDER_CREDITS,
            sales::ORDER_SHOPPERS,
            sales::TOUCH_SHOPPERS,
        ] {
            w.open_table(t).map_err(err)?;
        }
        erase::create(&w)?;
        ageing::create(&w)?;
        sales::index_if_missing(&w)?;
        cart_lines::index_if_missing(&w)?;
        sales::mark_if_new(&w)?;
        zones::mark_if_new(&w)?;
        w.commit().map_err(err)?;
        let index = Index::recover(&db)?;
        Ok(Self {
            db: Arc::new(db),
            index: Arc::new(index),
        })
    }

    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Database) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let db = Arc::clone(&self.db);
        tokio::task::spawn_blocking(move || f(&db))
            .await
            .map_err(err)?
    }
}

impl Backend for EmbeddedStore {
    fn backend(&self) -> &'static str {
        "embedded"
    }

    fn readiness(&self) -> Result<(), String> {
        Ok(())
    }
}
