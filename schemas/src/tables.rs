//! ClickHouse DDL of the report tables (the store of step 7).
//!
//! The statements name no database: the store runs them with the connection's
//! database set (`database=` on the HTTP request), so the same text creates the tables
//! in `retail_media`, in a per-test database, or in an embedded engine. Every
//! statement is `CREATE TABLE IF NOT EXISTS`, so applying [`ALL`] again is harmless.
//!
//! They are written for the oldest server we run (ClickHouse 18.16) and the newest
//! (production): plain `MergeTree`-family engines with the `ORDER BY` syntax, column
//! types `String`, `Int32`, `Int64`, `UInt8`, `UInt32`, `UInt64`, `Float64`,
//! `Nullable(Float64)`, `Array(String)`. No `Bool`, `DateTime64`, `Map`, `LowCardinality` or TTL.
//!
//! # Why the writes are idempotent and the reads exact without merges
//!
//! The aggregator writes, per entity it touched, the entity's complete set of facts
//! and rows derived from that set (see `rm_store::write` and the aggregator's `batch` fold). Writing a batch again
//! inserts rows equal to ones already there, so every table is a
//! `ReplacingMergeTree` whose sorting key identifies one fact or one entity:
//!
//! | table | sorting key (= identity) | version | read with |
//! |---|---|---|---|
//! | [`VIEW_FACTS`] | view, dedup key | none (copies are equal) | `FINAL` |
//! | [`VIEWS`] | view | `version` (facts in the set) | `FINAL` |
//! | [`PRODUCT_FACTS`] | group, action, dedup key | none | `uniqExact(dedup_key)` |
//! | [`CART_EVENTS`] | cart, dedup key | `version` (facts in the cart) | `FINAL` |
//! | [`ORDER_LINES`] | order id, line | none (copies are equal) | distinct (order id, line) |
//! | [`ATTRIBUTION_TOUCHES`] | shopper, event time, dedup key | none (copies are equal) | distinct (dedup key) |
//! | [`AD_FACTS`] | campaign, ad, action, dedup key, event time, status | none (copies are equal) | one fact per dedup key: earliest time, best status |
//! | [`SERVED_ADS`] | ad id | `version` (grows with every change) | `argMax(state, version)` |
//! | [`ROLLUPS`] | place, log partition, metric | `stamp` (the record's offset + 1) | `argMax(value, stamp)`, summed over partitions |
//! | [`ROLLUPS_CLOSED`] | place, metric | `generation` (the compaction's time) | `argMax(value, generation)`, for closed days of places not flagged late |
//! | [`ROLLUPS_LATE`] | write time, place | none (copies are equal) | the places flagged since a compaction |
//! | [`ROLLUPS_DAYS`] | place (day, no bucket), metric | `generation` (the compaction's time) | `argMax(quarters, generation)`, the closed quarters of a place's day as one array |
//! | [`RETENTION`] | mark name | none (a row per pass) | `max(value)` per name |
//!
//! An order id is written once: the aggregator looks the batch's order ids up first
//! and writes only the orders the table does not hold, so a re-sent order (same id,
//! any content) changes nothing and every copy of a line is equal. The sales report
//! reads lines and touches and attributes them in Rust (the 18.16 server has no
//! `ASOF JOIN` or window functions), dropping copies as it reads.
//!
//! Background merges only save space: every read either uses `FINAL` (which replaces
//! at read time, keeping the row with the highest version) or counts distinct dedup
//! keys, so a report is exact right after the `INSERT` returns. A fact set only grows,
//! so a higher version is always the newer row, and rows of equal version are equal.
//!
//! No table is partitioned: `ReplacingMergeTree` only replaces rows within one
//! partition, and a view's day (its earliest event) can move when a late event
//! arrives, so a partition key derived from it would keep stale versions.
//!
//! **Ad id status.** `ad_id_status` (`UInt8`) is how the event's realised ad id
//! verified at the edge, as a rank from best to worst: 0 verified, 1 expired,
//! 2 bad signature, 3 foreign (`rm_store::model::status`). Reports show the
//! worst status of a row's events, each event taking the best status of its copies.
//! The column was added to `view_facts`, `views`, `product_facts` and `cart_events`
//! after they first shipped: [`ADDED_COLUMNS`] lists it, and the store adds it (with
//! its default, 0 = verified) to a table created before. ClickHouse 18.16 has no
//! `ADD COLUMN IF NOT EXISTS`, so the store reads `system.columns` first. On a cluster
//! built from `deploy/clickhouse/cluster.sql` before that, run `ALTER TABLE
//! retail_media.<t>_local ON CLUSTER '{cluster}' ADD COLUMN ad_id_status UInt8` and
//! the same on `retail_media.<t>` for each of those tables before upgrading. In a
//! table created before the column, copies of one event that differ only in status
//! may be merged to one of them (the status is not in that table's sorting key).
//!
//! **Traffic class, shopper, receive time** (issue 15). `product_facts` and `ad_facts`
//! keep each copy's traffic class as the edge classified it (`traffic`: 0 valid, 1
//! known bot, 2 non-browser, 3 prefetch; `rm_store::model::traffic`), the shopper (a
//! 64-bit XXH3 of the tracking id) and the edge's receive time (`received_ms`): the
//! reports flag invalid traffic by reason and apply the click window on them. They are
//! in [`ADDED_COLUMNS`]; a row written before reads 0, 0, 0: valid and not windowed,
//! so it counts as it did. On a cluster, add them with `ALTER TABLE ... ON CLUSTER`
//! as above. The columns are not in the sorting keys: copies of one event that differ
//! only in them may be merged to one of them.
//!
//! **Aged shoppers** (issue 25). `aged` is 1 once a fact's `shopper` was replaced
//! by its keyed hash past the identifier retention (`rm_store::model::ageing`): the
//! hash carries no mark of its own, so the column makes a pass idempotent. It is in
//! [`ADDED_COLUMNS`]; a row written before reads 0 (not aged yet).
//!
//! **Exact money** (issue 15). `order_lines` keeps a line's revenue as the text of
//! its exact decimal (`revenue_exact`, a `String`: no `Decimal` column, whose
//! precision and text form differ between 18.16 and later servers) and its currency
//! (`currency`, an ISO 4217 code); `revenue` (`Float64`) is still written, for
//! dashboards. Both are in [`ADDED_COLUMNS`]; a row written before reads `''` and
//! `''`: its `revenue` as before (the `f64`'s shortest text) in USD
//! (`rm_schemas::money::DEFAULT_CURRENCY`). On a cluster, add them with `ALTER TABLE
//! ... ON CLUSTER` as above.
//!
//! Dedup keys are stored as 32 lower-case hex digits (`format!("{:032x}")`): fixed
//! width, so their string order is their numeric order. Days are `Int32` days since
//! 1970-01-01 (UTC), exactly the aggregator's day numbers.

/// Every distinct event of a video view: the view's fact set.
pub const VIEW_FACTS: &str = "CREATE TABLE IF NOT EXISTS view_facts (
    ad_id String,
    video_id String,
    tracking_id String,
    dedup_key String,
    kind String,
    time_ms Int64,
    ad_id_status UInt8
) ENGINE = ReplacingMergeTree
ORDER BY (ad_id, video_id, tracking_id, dedup_key)";

/// One row per view, derived from its fact set; `version` is the number of facts.
pub const VIEWS: &str = "CREATE TABLE IF NOT EXISTS views (
    ad_id String,
    video_id String,
    tracking_id String,
    campaign_id String,
    day Int32,
    version UInt32,
    creative_view UInt8,
    play UInt8,
    first_quartile UInt8,
    midpoint UInt8,
    third_quartile UInt8,
    complete UInt8,
    skips UInt32,
    pauses UInt32,
    resumes UInt32,
    mutes UInt32,
    unmutes UInt32,
    funnel_gaps UInt32,
    repeated_milestones UInt32,
    ad_id_status UInt8,
    served_repeat UInt8
) ENGINE = ReplacingMergeTree(version)
ORDER BY (ad_id, video_id, tracking_id)";

/// Every distinct product impression and click (`action` is `impression` or `click`).
pub const PRODUCT_FACTS: &str = "CREATE TABLE IF NOT EXISTS product_facts (
    campaign_id String,
    ad_id String,
    catalog_id String,
    product_code String,
    day Int32,
    action String,
    dedup_key String,
    ad_id_status UInt8,
    traffic UInt8,
    shopper UInt64,
    received_ms Int64,
    time_ms Int64,
    aged UInt8
) ENGINE = ReplacingMergeTree
ORDER BY (campaign_id, ad_id, catalog_id, product_code, day, action, dedup_key, ad_id_status)";

/// Every distinct cart event with the transition it caused, derived from the cart's
/// fact set; `version` is the number of facts of the cart when derived. `transition`
/// is `add`, `increment`, `decrement`, `removal` or `unchanged`.
pub const CART_EVENTS: &str = "CREATE TABLE IF NOT EXISTS cart_events (
    tracking_id String,
    catalog_id String,
    product_code String,
    dedup_key String,
    time_ms Int64,
    units UInt64,
    value Nullable(Float64),
    campaign_id String,
    ad_id String,
    prev_units UInt64,
    transition String,
    version UInt32,
    ad_id_status UInt8
) ENGINE = ReplacingMergeTree(version)
ORDER BY (tracking_id, catalog_id, product_code, dedup_key)";

/// Every line of every order the partner API accepted. `customer_id` and
/// `session_id` are "" when absent; `revenue_exact` is
/// `totalOrderItemPriceAfterDiscounts` as exact decimal text and `currency` the
/// order's ("" in rows written before them: `revenue`, the `Float64`, in USD);
/// `ad_id` is the line's `adId` ("" when absent), `order_ad_ids` the order's `adIds`.
pub const ORDER_LINES: &str = "CREATE TABLE IF NOT EXISTS order_lines (
    order_id String,
    line UInt32,
    customer_id String,
    session_id String,
    time_ms Int64,
    catalog_id String,
    product_code String,
    quantity UInt64,
    revenue Float64,
    ad_id String,
    order_ad_ids Array(String),
    revenue_exact String,
    currency String
) ENGINE = ReplacingMergeTree
ORDER BY (order_id, line)";

/// Every distinct product impression, product click and creative click, once per
/// shopper id of the event (`shopper` is `customer:<id>` or `session:<id>`); `kind`
/// is the interaction type. Read by shopper and time range for attribution.
pub const ATTRIBUTION_TOUCHES: &str = "CREATE TABLE IF NOT EXISTS attribution_touches (
    shopper String,
    time_ms Int64,
    dedup_key String,
    kind String,
    ad_id String,
    campaign_id String,
    catalog_id String,
    product_code String
) ENGINE = ReplacingMergeTree
ORDER BY (shopper, time_ms, dedup_key)";

/// Every distinct copy of an ad impression or click (the edge's impression and click
/// endpoints; `action` is `impression` or `click`). An impression's dedup key leaves
/// its timestamp out, so copies of one impression may differ in `time_ms` (and `day`,
/// the UTC day of `time_ms`) and in `ad_id_status`: all are kept, and the report
/// makes one fact per dedup key, on the day of its earliest copy
/// (`argMin(day, time_ms)`) with its best status (`min(ad_id_status)`).
pub const AD_FACTS: &str = "CREATE TABLE IF NOT EXISTS ad_facts (
    campaign_id String,
    ad_id String,
    action String,
    dedup_key String,
    time_ms Int64,
    day Int32,
    ad_id_status UInt8,
    traffic UInt8,
    shopper UInt64,
    received_ms Int64,
    aged UInt8
) ENGINE = ReplacingMergeTree
ORDER BY (campaign_id, ad_id, action, dedup_key, time_ms, ad_id_status)";

/// The aggregator's state per served ad (realised ad id): which event took each of
/// its billable units, and the shoppers seen (`rm_store::model::served`), as hex of
/// its binary form. The state only grows, and `version` with it; the newest row is
/// the state (`argMax(state, version)`); a replayed write inserts a row equal to one
/// already there. `expires_at` is the ad id's expiry (Unix seconds; the largest
/// `Int64` for an id that is not ours): states of ads long expired are deleted.
pub const SERVED_ADS: &str = "CREATE TABLE IF NOT EXISTS served_ads (
    ad_id String,
    state String,
    version UInt64,
    expires_at Int64
) ENGINE = ReplacingMergeTree(version)
ORDER BY ad_id";

/// Each order's state (`rm_store::model::tallies::sales`: its lines and their
/// credits), as hex of its bytes; the newest `version` of an order is its state.
pub const ORDER_CREDITS: &str = "CREATE TABLE IF NOT EXISTS order_credits (
    order_id String,
    state String,
    version UInt64
) ENGINE = ReplacingMergeTree(version)
ORDER BY order_id";

/// The stored orders by shopper (`customer:<id>` or `session:<id>`, as touches), so a
/// touch that arrives after an order finds it.
pub const ORDER_SHOPPERS: &str = "CREATE TABLE IF NOT EXISTS order_shoppers (
    shopper String,
    time_ms Int64,
    order_id String
) ENGINE = ReplacingMergeTree
ORDER BY (shopper, time_ms, order_id)";

/// Counts decided as events arrive (`rm_store::model::tallies`): per campaign, scope
/// (0 the campaign's, 1 a creative's ad events, 2 its product events), grain (0 a UTC day, 1 a quarter hour), time
/// bucket, creative, catalog, product, log partition and metric, each row an absolute
/// count stamped with the offset (plus one) of the last record of its partition that
/// moved it. The highest stamp of a key is its value (`argMax(value, stamp)`); a
/// replayed write inserts a row equal to one already there. Readers sum those over
/// partitions: a report reads its rows' buckets, whatever the volume behind them. The
/// sorting key starts with (scope, grain, bucket), in small granules, so a report's
/// range is one slice of the index whatever the table's history holds (a table of an
/// earlier version, sorted by campaign first, is re-sorted at the aggregator's start:
/// `rm_store`'s `clickhouse/resort.rs`).
pub const ROLLUPS: &str = "CREATE TABLE IF NOT EXISTS rollups (
    campaign_id String,
    scope UInt8,
    grain UInt8,
    bucket Int32,
    creative String,
    catalog_id String,
    product_code String,
    log_partition Int32,
    metric UInt16,
    value Int64,
    stamp UInt64
) ENGINE = ReplacingMergeTree(stamp)
ORDER BY (scope, grain, bucket, campaign_id, creative, catalog_id, product_code, log_partition, metric)
SETTINGS index_granularity = 1024";

/// The rollups of closed days summed over the log partitions
/// (`rm_store`'s compaction): one row per place (no partition) and metric, the
/// newest `generation` (the compaction's time, ms) wins; one row with `scope` 255
/// per compaction (`bucket`: the first day still open, `value`: the write time from
/// which a flag in [`ROLLUPS_LATE`] makes a closed place dirty). Sorted by scope,
/// grain and bucket first, in small granules: a read wants one scope and grain over
/// a range of buckets, and a few thousand rows of it.
pub const ROLLUPS_CLOSED: &str = "CREATE TABLE IF NOT EXISTS rollups_closed (
    campaign_id String,
    scope UInt8,
    grain UInt8,
    bucket Int32,
    creative String,
    catalog_id String,
    product_code String,
    metric UInt16,
    value Int64,
    generation UInt64
) ENGINE = ReplacingMergeTree(generation)
ORDER BY (scope, grain, bucket, campaign_id, creative, catalog_id, product_code, metric)
SETTINGS index_granularity = 1024";

/// A flag per place of a day that may be closed, written (at `written`, ms, the
/// writer's clock) before the tallies that move it: a closed place flagged after its
/// compaction is read from [`ROLLUPS`] until the next one sums it again. Partitioned
/// by the day written: a compaction drops the days no read or compaction needs.
pub const ROLLUPS_LATE: &str = "CREATE TABLE IF NOT EXISTS rollups_late (
    written Int64,
    campaign_id String,
    scope UInt8,
    grain UInt8,
    bucket Int32,
    creative String,
    catalog_id String,
    product_code String
) ENGINE = MergeTree()
PARTITION BY intDiv(written, 86400000)
ORDER BY (written, campaign_id, scope, grain, bucket, creative, catalog_id, product_code)";

/// The closed quarter hours of [`ROLLUPS_CLOSED`], a row per place, metric and UTC
/// day (`rm_store`'s compaction): `quarters` holds the day's 96 closed sums in order
/// (0 where none), the newest `generation` wins; one row with `scope` 255 once every
/// closed day is kept here (a store compacted by an earlier version is converted at
/// its next compaction). A read by local hour, day or week sums slices of a day's
/// array on the server: a row per place and day instead of one per quarter.
pub const ROLLUPS_DAYS: &str = "CREATE TABLE IF NOT EXISTS rollups_days (
    campaign_id String,
    scope UInt8,
    creative String,
    catalog_id String,
    product_code String,
    metric UInt16,
    day Int32,
    quarters Array(Int64),
    generation UInt64
) ENGINE = ReplacingMergeTree(generation)
ORDER BY (scope, day, campaign_id, creative, catalog_id, product_code, metric)
SETTINGS index_granularity = 1024";

/// The audit log of erasures of a shopper's identifiers (`rm_store::model::erasure`):
/// one row per request, the newest `version` its state (0 requested, 1 run).
/// `namespace` is "" for an operator's erasure (every namespace); `tracking_id` is
/// the erased id only until the erasure settles (an `ALTER ... UPDATE` empties it),
/// `digest` and `hash` (its SHA-256 and 64-bit hash) stay; `erased` is what the run
/// replaced, as JSON.
pub const ERASURES: &str = "CREATE TABLE IF NOT EXISTS erasures (
    request_id String,
    namespace String,
    tracking_id String,
    digest String,
    hash UInt64,
    replacement String,
    client_id String,
    requested_ms Int64,
    done_ms Int64,
    erased String,
    version UInt64
) ENGINE = ReplacingMergeTree(version)
ORDER BY request_id";

/// The carts report's lines by place (`rm_store::model::carts::lines`): each cart
/// line's state under the campaign and UTC day of its latest event and its key, so a
/// page of the report is a range of the sorting key. Written with the line's
/// `cart_events` rows (before them), at the line's `version`; a line whose latest
/// event moved to another campaign or day also gets a row at its old place with its
/// new version and `gone = 1`, which replaces the entry there. Reads use `FINAL`
/// with conditions on the sorting key only, then drop `gone` rows. Granules of 1,024
/// rows: a page reads a day or two of one campaign in every part, and a granule of
/// the default 8,192 rows per part was most of what it read (`rm_store`'s
/// `clickhouse/resort.rs` converts a table of the default).
pub const CART_LINES: &str = "CREATE TABLE IF NOT EXISTS cart_lines (
    campaign_id String,
    day Int32,
    tracking_id String,
    catalog_id String,
    product_code String,
    version UInt32,
    gone UInt8,
    last_ms Int64,
    units UInt64,
    last_value Nullable(Float64),
    adds UInt64,
    increments UInt64,
    decrements UInt64,
    removals UInt64,
    ad_id String,
    ad_id_status UInt8
) ENGINE = ReplacingMergeTree(version)
ORDER BY (campaign_id, day, tracking_id, catalog_id, product_code)
SETTINGS index_granularity = 1024";

/// The campaign days that hold lines of the carts report: `cart_lines`' campaign and
/// day of every place a line was written at (`rm_store`'s `clickhouse/line_days.rs`),
/// a row each (equal rows are one). A page of the carts report reads it to find the
/// campaigns and days it reaches, instead of the campaign of every line of its range.
/// Written with each batch's `cart_lines` rows; never pruned (a day whose lines left
/// or were removed costs a read that finds none). The row `('', -2147483648)` marks a
/// store whose earlier lines are listed.
pub const CART_LINE_DAYS: &str = "CREATE TABLE IF NOT EXISTS cart_line_days (
    campaign_id String,
    day Int32
) ENGINE = ReplacingMergeTree
ORDER BY (campaign_id, day)";

/// Fact retention's marks (`rm_store::model::retention`): the cut before which raw
/// rows were removed (`facts_retired_before_ms`) and the recount floor
/// (`recount_from_ms`), a row per pass and name; a name's mark is its highest value.
pub const RETENTION: &str = "CREATE TABLE IF NOT EXISTS retention (
    name String,
    value Int64
) ENGINE = MergeTree()
ORDER BY name";

/// Every statement, in the order to apply them.
pub const ALL: [&str; 18] = [
    VIEW_FACTS,
    VIEWS,
    PRODUCT_FACTS,
    CART_EVENTS,
    ORDER_LINES,
    ATTRIBUTION_TOUCHES,
    AD_FACTS,
    SERVED_ADS,
    ROLLUPS,
    ORDER_CREDITS,
    ORDER_SHOPPERS,
    ROLLUPS_CLOSED,
    ROLLUPS_LATE,
    ROLLUPS_DAYS,
    ERASURES,
    CART_LINES,
    CART_LINE_DAYS,
    RETENTION,
];

/// Columns added to a table after it first shipped: (table, column, type). Each is
/// also in the table's statement above; the store adds the ones a table created
/// earlier lacks (the type's default fills the old rows).
pub const ADDED_COLUMNS: [(&str, &str, &str); 16] = [
    ("view_facts", "ad_id_status", "UInt8"),
    ("views", "ad_id_status", "UInt8"),
    ("product_facts", "ad_id_status", "UInt8"),
    ("cart_events", "ad_id_status", "UInt8"),
    ("product_facts", "traffic", "UInt8"),
    ("product_facts", "shopper", "UInt64"),
    ("product_facts", "received_ms", "Int64"),
    ("ad_facts", "traffic", "UInt8"),
    ("ad_facts", "shopper", "UInt64"),
    ("ad_facts", "received_ms", "Int64"),
    ("order_lines", "revenue_exact", "String"),
    ("order_lines", "currency", "String"),
    ("views", "served_repeat", "UInt8"),
    ("product_facts", "time_ms", "Int64"),
    ("product_facts", "aged", "UInt8"),
    ("ad_facts", "aged", "UInt8"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_are_idempotent_and_portable() {
        for ddl in ALL {
            assert!(ddl.starts_with("CREATE TABLE IF NOT EXISTS "), "{ddl}");
            // A `?` would be taken for a bind placeholder by the client.
            assert!(!ddl.contains('?'), "{ddl}");
            for modern_only in ["Bool", "DateTime64", "Map(", "LowCardinality", "TTL"] {
                assert!(!ddl.contains(modern_only), "{modern_only} in {ddl}");
            }
        }
    }

    #[test]
    fn added_columns_are_in_their_tables() {
        for (table, column, ty) in ADDED_COLUMNS {
            let ddl = ALL
                .iter()
                .find(|d| d.starts_with(&format!("CREATE TABLE IF NOT EXISTS {table} (")))
                .unwrap_or_else(|| panic!("no table {table}"));
            assert!(
                ddl.contains(&format!("    {column} {ty}\n"))
                    || ddl.contains(&format!("    {column} {ty},\n")),
                "{table}.{column}"
            );
        }
    }
}
