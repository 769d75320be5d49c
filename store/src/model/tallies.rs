//! Tallies: counts decided once, as events arrive, kept as sums per place (campaign,
//! creative, catalog, product, time bucket) and log partition (issue 26). The reports
//! and the spend refresher read these sums, never the events behind them: a report
//! costs the rows it returns times the buckets in its range, whatever the volume.
//!
//! **What is counted** ([`Metric`]): the distinct ad impressions, ad clicks, product
//! impressions and product clicks, each under the reason its best copy is not
//! billable (`None`: billable), and, beside that, those whose ad id did not verify by
//! status (a row's `adIdStatus`). Each distinct event counts in three places
//! ([`moves::places`]): its campaign's per UTC day, and its creative's (with the
//! catalog and product for a product event, [`Scope::Product`]) per UTC day and per
//! quarter hour ([`Grain`]); the quarter hours make a report in any IANA time zone
//! exact, the days make a UTC one cheap.
//!
//! **Who decides.** The aggregator's fold, as each record arrives: the served-ad rules
//! judge it ([`super::served`]) and the served ad remembers the distinct events it
//! counted ([`super::served::ServedAd::judge`]), so a copy of one moves nothing, and a
//! better copy (a browser's after a prefetch's) moves the event from the old reason
//! to the new one ([`moves::moves`]).
//!
//! **Exactly once, without a transaction across the log and the store.** A tally is
//! kept per log partition, as an absolute value stamped with the offset of the last
//! record that moved it ([`Tally::add`]). Records of one ad id share a partition
//! (they are keyed by ad id), so one consumer owns each partition's tallies; the
//! store keeps the newest stamp of each (ClickHouse: `ReplacingMergeTree(stamp)`,
//! read with `argMax`; embedded: overwritten in the batch's transaction). A batch
//! writes its tallies **before** the served ads' states that decided them (ClickHouse
//! inserts them first; the embedded store writes both in one transaction). So after a
//! crash anywhere:
//! - tallies not written: neither are the states, the records are replayed and decide
//!   the same way again;
//! - tallies written, states not: the replayed records decide the same way (the old
//!   states), and every record at or below a tally's stamp is skipped for that tally;
//! - both written, offsets not committed: the replayed records find themselves
//!   remembered by their served ad (copies: no move), and are at or below the stamps
//!   anyway.
//!
//! A record's moves are netted per tally before they are applied (one stamp per
//! record and tally). A replayed batch may be cut at other offsets than the first
//! time; the stamp is per record, so that changes nothing.
//!
//! **Two writers of one partition.** A consumer that lost a partition in a rebalance
//! may still write a batch of it it had read (Kafka cannot fence a store it does not
//! own), after the new owner loaded and cached that partition's tallies. Both fold
//! the same records in the same order from states of the same prefix, so each writes
//! the values of a prefix, and the newest stamp (the longer prefix) wins. What must
//! not happen is a fold that mixes the two: a served ad's state loaded after the
//! other writer remembered events in it, beside tallies cached before it counted
//! them (those events would count nowhere). So each batch also writes its
//! partitions' progress ([`Metric::Progress`], the offset of the last record folded,
//! at [`Place::progress`]) with its tallies, before its states; a fold reads the
//! progress after the states, and when another writer has gone further than its
//! cache, it drops the cache and folds the batch again from the store (the
//! aggregator's pipeline).
//!
//! **Stores written before tallies** ([`BACKFILL_PARTITION`]): the store's facts are
//! counted once, at the aggregator's first start on it ([`backfill`]), under a
//! partition no log has, with a marker ([`Metric::Backfilled`]); readers use tallies
//! only once the marker is there. Aggregators started together on such a store
//! (replicas of one deployment on ClickHouse) may each write a backfill; the smallest
//! count of each key wins there, the one read before any of them wrote a batch (a
//! later one would count that batch's events twice).

use serde::{Deserialize, Serialize};

use super::status::AdIdStatus;
use super::traffic::Invalid;

pub mod backfill;
pub mod carts;
pub mod hours;
pub mod moves;
pub mod page;
pub mod sales;
pub mod views;
pub mod zones;

use carts::CartField;
use sales::SaleField;
use views::ViewField;

/// What kind of distinct event a tally counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Kind {
    /// `adImpression` (the edge's impression endpoint).
    AdImpression,
    /// `adClick` (the edge's click endpoint).
    AdClick,
    /// `productImpression`.
    ProductImpression,
    /// `productClick`.
    ProductClick,
}

impl Kind {
    /// Every kind, in code order.
    pub const ALL: [Kind; 4] = [
        Self::AdImpression,
        Self::AdClick,
        Self::ProductImpression,
        Self::ProductClick,
    ];

    /// Whether it is a product event (counted with its catalog and product).
    pub fn is_product(self) -> bool {
        matches!(self, Self::ProductImpression | Self::ProductClick)
    }
}

/// Every reason in code order (the index + 1 is its code in a [`Metric`]; stored:
/// never reorder [`Invalid::ALL`]).
const REASONS: [Invalid; 8] = Invalid::ALL;

/// What a tally counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Metric {
    /// Distinct events of a kind whose best copy is billable (`None`) or invalid for
    /// this reason.
    Events(Kind, Option<Invalid>),
    /// Distinct events of a kind whose best copy's ad id has this status (never
    /// `Verified`: what a row's `adIdStatus` is made of).
    Status(Kind, AdIdStatus),
    /// The marker: the store's earlier facts are counted (one row, value 1).
    Backfilled,
    /// A count of the video funnel ([`views`]): views' rows summed.
    View(ViewField),
    /// Cart lines' adds ([`carts`]).
    Cart(CartField),
    /// Orders' sales by credited campaign ([`sales`]).
    Sale(SaleField),
    /// The marker of the sales' backfill: the store's earlier orders are attributed
    /// and counted (one row, value 1, at [`Place::sales_marker`]).
    SalesBackfilled,
    /// The marker of the cart products' backfill: the store's earlier cart lines are
    /// counted at their product places (one row, value 1, at [`Place::carts_marker`]).
    CartsBackfilled,
    /// The marker of the carts report's index: the store's earlier cart lines have
    /// their entries (`cart_lines`, [`crate::model::carts::lines`]; one row, value 1,
    /// at [`Place::carts_marker`]).
    LinesBackfilled,
    /// The marker of the zones' backfill: the store's earlier events, views, cart
    /// adds and attributed sales are counted at their campaigns' and videos' quarter
    /// hours, so the campaign summary and the video funnel read in any zone (one row,
    /// value 1, at [`Place::zones_marker`]).
    ZonesBackfilled,
    /// The marker of the hours' backfill: the store's quarter hours of the scopes
    /// kept by hour ([`Scope::by_hour`]) are summed into their hours ([`hours`]; one
    /// row, value 1, at [`Place::zones_marker`]).
    HoursBackfilled,
    /// The offset of the last record of a partition folded (value and stamp), at
    /// [`Place::progress`]: how far the writers of the partition got.
    Progress,
}

impl Metric {
    /// Billable ad clicks: what spend is made of.
    pub const BILLABLE_CLICKS: Metric = Metric::Events(Kind::AdClick, None);

    /// The lowest code that is not a count: the markers' and the progress' codes are
    /// at or above it, every count's below ([`Self::code`]).
    pub const FIRST_NOT_COUNT: u16 = 249;

    /// The stored code: `kind * 16 + reason` (0 billable, 1.. the reasons in order)
    /// for events, `64 + kind * 16 + status` for statuses, `128 + field` for the
    /// video funnel, `192 + field` for cart lines, `224 + field` for sales, 255 for
    /// the marker, 254 for a partition's progress, 253 for the sales' marker, 252
    /// for the cart products' marker, 251 for the carts report's index's, 250 for the
    /// zones', 249 for the hours'.
    pub fn code(self) -> u16 {
        match self {
            Self::Events(kind, why) => {
                let r = why.map_or(0, |w| {
                    REASONS.iter().position(|x| *x == w).unwrap_or(0) as u16 + 1
                });
                kind as u16 * 16 + r
            }
            Self::Status(kind, status) => 64 + kind as u16 * 16 + u16::from(status.rank()),
            Self::View(f) => 128 + f.index() as u16,
            Self::Cart(f) => 192 + f.index() as u16,
            Self::Sale(f) => 224 + f.index() as u16,
            Self::SalesBackfilled => 253,
            Self::CartsBackfilled => 252,
            Self::LinesBackfilled => 251,
            Self::ZonesBackfilled => 250,
            Self::HoursBackfilled => 249,
            Self::Backfilled => 255,
            Self::Progress => 254,
        }
    }

    /// Whether it counts events (not the marker or a partition's progress).
    pub fn is_count(self) -> bool {
        matches!(
            self,
            Self::Events(..) | Self::Status(..) | Self::View(..) | Self::Cart(..) | Self::Sale(..)
        )
    }

    /// The metric of a stored code (`None` when unknown).
    pub fn from_code(code: u16) -> Option<Self> {
        match code {
            255 => return Some(Self::Backfilled),
            254 => return Some(Self::Progress),
            253 => return Some(Self::SalesBackfilled),
            252 => return Some(Self::CartsBackfilled),
            251 => return Some(Self::LinesBackfilled),
            250 => return Some(Self::ZonesBackfilled),
            249 => return Some(Self::HoursBackfilled),
            224.. => {
                return SaleField::ALL
                    .get(usize::from(code - 224))
                    .map(|f| Self::Sale(*f))
            }
            192.. => {
                return CartField::ALL
                    .get(usize::from(code - 192))
                    .map(|f| Self::Cart(*f))
            }
            128.. => {
                return ViewField::ALL
                    .get(usize::from(code - 128))
                    .map(|f| Self::View(*f))
            }
            _ => {}
        }
        let (status, rest) = if code >= 64 {
            (true, code - 64)
        } else {
            (false, code)
        };
        let kind = *Kind::ALL.get(usize::from(rest / 16))?;
        let sub = rest % 16;
        if status {
            let s = AdIdStatus::from_rank(u8::try_from(sub).ok()?)?;
            (s != AdIdStatus::Verified).then_some(Self::Status(kind, s))
        } else if sub == 0 {
            Some(Self::Events(kind, None))
        } else {
            Some(Self::Events(
                kind,
                Some(*REASONS.get(usize::from(sub - 1))?),
            ))
        }
    }

    /// The kind of event it counts (`None` for views, the marker and progress).
    pub fn kind(self) -> Option<Kind> {
        match self {
            Self::Events(k, _) | Self::Status(k, _) => Some(k),
            Self::View(_)
            | Self::Cart(_)
            | Self::Sale(_)
            | Self::Backfilled
            | Self::SalesBackfilled
            | Self::CartsBackfilled
            | Self::LinesBackfilled
            | Self::ZonesBackfilled
            | Self::HoursBackfilled
            | Self::Progress => None,
        }
    }
}

/// Whose count a place holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Scope {
    /// The campaign's (creative, catalog and product empty): the campaign summary and
    /// spend.
    Campaign,
    /// A creative's ad events (catalog and product empty): the ads report.
    Creative,
    /// A creative's product events, with their catalog and product: the products
    /// report (apart from the ad events, so neither report reads the other's tallies).
    Product,
    /// A video creative's views (the creative is the view's video id, catalog and
    /// product empty): the video funnel.
    Video,
    /// Sales of a product per credited campaign ("" unattributed): the catalog is
    /// scoped by the order's namespace, the `creative` column holds the currency
    /// ([`sales`]): the sales report.
    Sales,
    /// A campaign's attributed sales (the `creative` column holds the currency,
    /// catalog and product empty): the campaign summary.
    CampaignSales,
    /// A campaign's cart lines of a product (the catalog scoped by the line's
    /// namespace, [`carts`]): the carts-per-campaign report.
    CartProduct,
}

impl Scope {
    /// The scopes counted per quarter hour since the zones' backfill
    /// ([`Metric::ZonesBackfilled`]); products and ads were from the start.
    pub const ZONED: [Scope; 3] = [Self::Campaign, Self::Video, Self::CampaignSales];

    /// The scopes counted per quarter hour beside UTC days.
    pub fn by_quarter(self) -> bool {
        matches!(self, Self::Creative | Self::Product) || Self::ZONED.contains(&self)
    }

    /// The scopes counted per UTC hour too ([`Grain::Hour`]), since the hours'
    /// backfill ([`Metric::HoursBackfilled`]): the zoned ones, whose reports (the
    /// campaign summary and the video funnel) read whole in any zone.
    pub fn by_hour(self) -> bool {
        Self::ZONED.contains(&self)
    }

    /// Every scope.
    pub const ALL: [Scope; 7] = [
        Self::Campaign,
        Self::Creative,
        Self::Product,
        Self::Video,
        Self::Sales,
        Self::CampaignSales,
        Self::CartProduct,
    ];

    /// The scope of a stored code (`scope as u8`), `None` when unknown.
    pub fn from_code(code: u8) -> Option<Self> {
        Self::ALL.into_iter().find(|s| *s as u8 == code)
    }
}

/// How long a place's time bucket is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Grain {
    /// A UTC day (days since 1970-01-01).
    Day,
    /// A quarter hour (quarter hours since 1970-01-01 UTC): every IANA zone's offset
    /// is a whole number of them, so local hours and days are sums of quarters.
    Quarter,
    /// A UTC hour (hours since 1970-01-01 UTC), the sum of its four quarters, kept
    /// for the scopes [`Scope::by_hour`] names so a zone whose offset is not whole
    /// hours reads the hours that leave a UTC day instead of their quarters
    /// ([`hours`]).
    Hour,
}

impl Grain {
    /// Every grain.
    pub const ALL: [Grain; 3] = [Self::Day, Self::Quarter, Self::Hour];

    /// The grain of a stored code (`grain as u8`), `None` when unknown.
    pub fn from_code(code: u8) -> Option<Self> {
        Self::ALL.into_iter().find(|g| *g as u8 == code)
    }
}

/// Milliseconds in a quarter hour.
pub const QUARTER_MS: i64 = 900_000;
/// Quarter hours in a day.
pub const QUARTERS_PER_DAY: i32 = 96;
/// Milliseconds in an hour.
pub const HOUR_MS: i64 = 3_600_000;
/// Quarter hours in an hour.
pub const QUARTERS_PER_HOUR: i32 = 4;

impl Grain {
    /// The bucket of an instant (ms since the epoch).
    pub fn bucket(self, time_ms: i64) -> i32 {
        match self {
            Self::Day => super::day_of(time_ms),
            Self::Quarter => i32::try_from(time_ms.div_euclid(QUARTER_MS))
                .unwrap_or(if time_ms < 0 { i32::MIN } else { i32::MAX }),
            Self::Hour => i32::try_from(time_ms.div_euclid(HOUR_MS)).unwrap_or(if time_ms < 0 {
                i32::MIN
            } else {
                i32::MAX
            }),
        }
    }

    /// Buckets in a UTC day.
    pub fn per_day(self) -> i32 {
        match self {
            Self::Day => 1,
            Self::Quarter => QUARTERS_PER_DAY,
            Self::Hour => QUARTERS_PER_DAY / QUARTERS_PER_HOUR,
        }
    }

    /// The UTC day a bucket falls in.
    pub fn day_of_bucket(self, bucket: i32) -> i32 {
        bucket.div_euclid(self.per_day())
    }

    /// The first bucket of UTC `day`, within `i32`.
    pub fn first_of_day(self, day: i32) -> i32 {
        let b = i64::from(day) * i64::from(self.per_day());
        i32::try_from(b.clamp(i64::from(i32::MIN), i64::from(i32::MAX))).unwrap_or(i32::MIN)
    }

    /// The first bucket that does not end before UTC `hour` (hours since the epoch)
    /// starts, within `i32`: the buckets before it lie wholly in the hours before.
    /// A day is before hour `h` only once all of it is.
    pub fn first_of_hour(self, hour: i32) -> i32 {
        let b = (i64::from(hour) * i64::from(self.per_day())).div_euclid(24);
        i32::try_from(b.clamp(i64::from(i32::MIN), i64::from(i32::MAX))).unwrap_or(i32::MIN)
    }

    /// The first instant of a bucket, ms since the epoch.
    pub fn start_ms(self, bucket: i32) -> i64 {
        match self {
            Self::Day => i64::from(bucket) * super::DAY_MS,
            Self::Quarter => i64::from(bucket) * QUARTER_MS,
            Self::Hour => i64::from(bucket) * HOUR_MS,
        }
    }
}

/// The partition the counts of a store's earlier facts are kept under (no log has it).
pub const BACKFILL_PARTITION: i32 = i32::MIN;

/// A place's text (campaign, creative, catalog, product): kept inline up to 24
/// bytes, so the aggregator's map of places compares and clones places without
/// following a pointer per field (the fold looks places up several times per event).
pub type Text = compact_str::CompactString;

/// Where tallies count: what a report row is made of, one time bucket, one log
/// partition. Its tallies are loaded and kept together (one per metric).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Place {
    /// Campaign (`rm_store::model::ad_id_campaign`: empty for an id not shaped like
    /// ours).
    pub campaign_id: Text,
    /// The campaign's or a creative's.
    pub scope: Scope,
    /// Day or quarter hour.
    pub grain: Grain,
    /// The bucket ([`Grain::bucket`]).
    pub bucket: i32,
    /// The creative the ad id names (empty at campaign scope, or when the id names
    /// none).
    pub creative: Text,
    /// The catalog of a product event (else empty).
    pub catalog_id: Text,
    /// The product of a product event (else empty).
    pub product_code: Text,
    /// The log partition whose records moved it (`-1`: the embedded log).
    pub partition: i32,
}

impl Place {
    /// The backfill marker's place.
    pub fn marker() -> Self {
        Self {
            campaign_id: Text::default(),
            scope: Scope::Campaign,
            grain: Grain::Day,
            bucket: 0,
            creative: Text::default(),
            catalog_id: Text::default(),
            product_code: Text::default(),
            partition: BACKFILL_PARTITION,
        }
    }

    /// Where a log partition's progress is kept (beside no count: its metric is
    /// [`Metric::Progress`]).
    pub fn progress(partition: i32) -> Self {
        Self {
            partition,
            ..Self::marker()
        }
    }

    /// Where a partition of the orders topic keeps its progress.
    pub fn order_progress(partition: i32) -> Self {
        Self {
            scope: Scope::Sales,
            ..Self::progress(partition)
        }
    }

    /// The sales' backfill marker's place.
    pub fn sales_marker() -> Self {
        Self {
            scope: Scope::Sales,
            ..Self::marker()
        }
    }

    /// The cart products' backfill marker's place.
    pub fn carts_marker() -> Self {
        Self {
            scope: Scope::CartProduct,
            ..Self::marker()
        }
    }

    /// The zones' backfill marker's place.
    pub fn zones_marker() -> Self {
        Self {
            scope: Scope::Video,
            ..Self::marker()
        }
    }
}

/// One tally: a metric at a place.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TallyKey {
    /// Where.
    pub place: Place,
    /// What.
    pub metric: Metric,
}

impl TallyKey {
    /// The backfill marker's key.
    pub fn marker() -> Self {
        Self {
            place: Place::marker(),
            metric: Metric::Backfilled,
        }
    }

    /// A log partition's progress.
    pub fn progress(partition: i32) -> Self {
        Self {
            place: Place::progress(partition),
            metric: Metric::Progress,
        }
    }

    /// The sales' backfill marker's key.
    pub fn sales_marker() -> Self {
        Self {
            place: Place::sales_marker(),
            metric: Metric::SalesBackfilled,
        }
    }

    /// The cart products' backfill marker's key.
    pub fn carts_marker() -> Self {
        Self {
            place: Place::carts_marker(),
            metric: Metric::CartsBackfilled,
        }
    }

    /// The carts report's index's marker's key.
    pub fn lines_marker() -> Self {
        Self {
            place: Place::carts_marker(),
            metric: Metric::LinesBackfilled,
        }
    }

    /// The zones' backfill marker's key.
    pub fn zones_marker() -> Self {
        Self {
            place: Place::zones_marker(),
            metric: Metric::ZonesBackfilled,
        }
    }

    /// The hours' backfill marker's key.
    pub fn hours_marker() -> Self {
        Self {
            place: Place::zones_marker(),
            metric: Metric::HoursBackfilled,
        }
    }
}

/// A tally's value and the offset of the last record that moved it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Tally {
    /// The count.
    pub value: i64,
    /// Offset of the last record applied (`-1`: none).
    pub stamp: i64,
}

impl Tally {
    /// An empty tally (nothing applied).
    pub const EMPTY: Self = Self {
        value: 0,
        stamp: -1,
    };

    /// A marker's tally (a backfill done: [`TallyKey::marker`] and its kin).
    pub const MARKED: Self = Self { value: 1, stamp: 0 };

    /// Adds `delta` for the record at `offset`, unless a record at or after it was
    /// applied already (a replay); true when it moved.
    pub fn add(&mut self, offset: i64, delta: i64) -> bool {
        if offset <= self.stamp {
            return false;
        }
        self.value += delta;
        self.stamp = offset;
        true
    }

    /// Records a partition's progress to `offset` ([`Metric::Progress`]); true when
    /// it went further.
    pub fn advance(&mut self, offset: i64) -> bool {
        if offset <= self.stamp {
            return false;
        }
        *self = Self {
            value: offset,
            stamp: offset,
        };
        true
    }
}

/// The tallies of one place, by metric (a few: the metrics its events moved), and
/// which of them moved since the batch's rows were last taken
/// ([`moves::dirty_rows`]): the fold marks a tally where it moves it, so no set of
/// moved keys is hashed and compared again for every move.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlaceTallies(pub Vec<(Metric, Tally)>, Moved);

/// Which tallies of a place moved: bit `i` for the `i`-th (the last bit for every
/// one from there on, so a place of more metrics than bits only writes some
/// unmoved tallies again). Not part of a place's equality.
#[derive(Debug, Clone, Copy, Default)]
pub struct Moved(u64);

impl PartialEq for Moved {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for Moved {}

impl Moved {
    fn bit(i: usize) -> u64 {
        1u64 << i.min(63)
    }
}

impl PlaceTallies {
    fn index(&mut self, metric: Metric) -> usize {
        match self.0.iter().position(|(m, _)| *m == metric) {
            Some(i) => i,
            None => {
                self.0.push((metric, Tally::EMPTY));
                self.0.len() - 1
            }
        }
    }

    /// The tally of `metric` (empty when absent, inserted).
    pub fn get_mut(&mut self, metric: Metric) -> &mut Tally {
        let i = self.index(metric);
        &mut self.0[i].1
    }

    /// Marks the tally of `metric` as moved (inserted empty when absent).
    pub fn mark(&mut self, metric: Metric) {
        let i = self.index(metric);
        self.1 .0 |= Moved::bit(i);
    }

    /// Moves the tally of `metric` by `delta` at `offset` ([`Tally::add`]), marking
    /// it when it moved; true when it did.
    pub fn add(&mut self, metric: Metric, offset: i64, delta: i64) -> bool {
        let i = self.index(metric);
        let moved = self.0[i].1.add(offset, delta);
        if moved {
            self.1 .0 |= Moved::bit(i);
        }
        moved
    }

    /// The tallies marked as moved, the marks cleared.
    pub fn take_moved(&mut self) -> impl Iterator<Item = (Metric, Tally)> + '_ {
        let mask = std::mem::take(&mut self.1).0;
        self.0
            .iter()
            .enumerate()
            .filter(move |(i, _)| mask & Moved::bit(*i) != 0)
            .map(|(_, mt)| *mt)
    }

    /// Whether any tally is marked as moved.
    pub fn any_moved(&self) -> bool {
        self.1 .0 != 0
    }

    /// The tally of `metric`, when present.
    pub fn get(&self, metric: Metric) -> Option<Tally> {
        self.0.iter().find(|(m, _)| *m == metric).map(|(_, t)| *t)
    }
}

/// A tally summed over partitions: what a reader gets.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct SummedTally {
    /// Where (its partition is unused: 0).
    pub place: Place,
    /// What.
    pub metric: Metric,
    /// The count, all partitions.
    pub value: i64,
}

/// `rows` in place and metric order (their `Ord`). Sorting the rows themselves
/// compares their four texts (a call to `memcmp` each) and moves rows of a hundred
/// bytes some `log n` times each, and a report by hour in a zone reads 60,000 of them
/// (measured: half the reader's time, BENCHMARKS.md). So each distinct text (a few
/// hundred) is ranked once, the rows are sorted as small keys of ranks, and each row
/// is moved once.
pub fn sort_summed(rows: Vec<SummedTally>) -> Vec<SummedTally> {
    fn texts(s: &SummedTally) -> [&str; 4] {
        let p = &s.place;
        [&p.campaign_id, &p.creative, &p.catalog_id, &p.product_code].map(Text::as_str)
    }
    let mut distinct: Vec<&str> = rows
        .iter()
        .flat_map(texts)
        .collect::<super::FastSet<&str>>()
        .into_iter()
        .collect();
    distinct.sort_unstable();
    let rank: super::FastMap<&str, usize> =
        distinct.iter().enumerate().map(|(i, t)| (*t, i)).collect();
    let mut keys: Vec<_> = rows
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let [campaign, creative, catalog, product] = texts(s).map(|t| rank[t]);
            let p = &s.place;
            let place = (
                campaign, p.scope, p.grain, p.bucket, creative, catalog, product,
            );
            ((place, p.partition, s.metric, s.value), i)
        })
        .collect();
    keys.sort_unstable();
    let mut slots: Vec<Option<SummedTally>> = rows.into_iter().map(Some).collect();
    keys.into_iter()
        .filter_map(|(_, i)| slots[i].take())
        .collect()
}

/// Billable clicks of a campaign on a UTC day, all partitions: what spend reads.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct DayTally {
    /// Campaign.
    pub campaign_id: String,
    /// UTC day.
    pub day: i32,
    /// The count, all partitions.
    pub value: i64,
}

/// Which tallies a reader wants, summed over partitions: one scope and grain, a
/// range of buckets, some campaigns, kinds and catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TallyQuery {
    /// These campaigns (`None`: every campaign).
    pub campaigns: Option<std::collections::BTreeSet<String>>,
    /// Campaign or creative tallies.
    pub scope: Scope,
    /// Days or quarter hours.
    pub grain: Grain,
    /// First bucket.
    pub from: i32,
    /// Last bucket (inclusive).
    pub to: i32,
    /// Events of these kinds (empty: every kind, and the video funnel's counts).
    pub kinds: Vec<Kind>,
    /// Only this catalog (product events).
    pub catalog_id: Option<String>,
    /// Only the places of this page ([`page`]; `None`: every place).
    pub page: Option<page::PlacePage>,
    /// Only the buckets of these inclusive ranges, within `from..=to` (empty: all of
    /// them): the hours or the quarters a report in a zone reads beside whole days
    /// (`super::periods::Mixed`).
    pub only: Vec<(i32, i32)>,
    /// Which buckets the reader sums together (a store may sum them first, and move
    /// fewer rows).
    pub group: Group,
}

/// Which buckets of a [`TallyQuery`] its reader sums together: a store may return each
/// group's tallies of a place summed, under the group's first bucket it read (the
/// embedded store reads each bucket apart; ClickHouse sums on the server).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Group {
    /// Each bucket apart.
    #[default]
    Each,
    /// Every bucket of the range together (a report over its whole range).
    Whole,
    /// The buckets `b` with the same `(b + shift) / width` (rounded down) together:
    /// the quarters of one local hour, day or week in a zone whose offset holds over
    /// the range ([`super::periods::Periods::group`]).
    Every {
        /// Buckets a group spans.
        width: i32,
        /// Where groups start: `shift` is in `0..width`.
        shift: i32,
    },
}

impl Group {
    /// Whether every group holds whole days of quarters or more (a summary, or a
    /// local day or week): a UTC day's quarters fall in at most two of them.
    pub fn spans_days(self) -> bool {
        match self {
            Self::Each => false,
            Self::Whole => true,
            Self::Every { width, .. } => width >= QUARTERS_PER_DAY,
        }
    }

    /// Which group `bucket` is in (buckets of one group have the same number; each
    /// bucket is its own under [`Group::Each`]).
    pub fn of(self, bucket: i32) -> i64 {
        match self {
            Self::Each => i64::from(bucket),
            Self::Whole => 0,
            Self::Every { width, shift } => {
                (i64::from(bucket) + i64::from(shift)).div_euclid(i64::from(width.max(1)))
            }
        }
    }

    /// Whether every group holds an hour of quarters or more (a local hour, day or
    /// week, or a summary): a UTC day's quarters fall in at most 25 of them.
    pub fn spans_hours(self) -> bool {
        match self {
            Self::Each => false,
            Self::Whole => true,
            Self::Every { width, .. } => width >= QUARTERS_PER_HOUR,
        }
    }
}

impl TallyQuery {
    /// Billable clicks per campaign and UTC day, all history, of `campaigns` (every
    /// campaign when `None`): what spend reads ([`billable_clicks`]).
    pub fn spend(campaigns: Option<std::collections::BTreeSet<String>>) -> Self {
        Self {
            campaigns,
            ..Self::history(Scope::Campaign, Grain::Day, vec![Kind::AdClick])
        }
    }

    /// Every campaign's `kinds` at `scope`, per bucket of `grain`, all history.
    pub fn history(scope: Scope, grain: Grain, kinds: Vec<Kind>) -> Self {
        Self {
            campaigns: None,
            scope,
            grain,
            from: i32::MIN,
            to: i32::MAX,
            kinds,
            catalog_id: None,
            page: None,
            only: Vec::new(),
            group: Group::Each,
        }
    }

    /// The marker whose presence says the query's tallies are complete: the hours'
    /// for hours, the zones' for the quarter hours of campaigns, videos and campaigns' sales, the sales'
    /// for sales, else the backfill's.
    pub fn marker(&self) -> TallyKey {
        if self.grain == Grain::Hour {
            return TallyKey::hours_marker();
        }
        if self.grain == Grain::Quarter && Scope::ZONED.contains(&self.scope) {
            return TallyKey::zones_marker();
        }
        match self.scope {
            Scope::Sales | Scope::CampaignSales => TallyKey::sales_marker(),
            Scope::CartProduct => TallyKey::carts_marker(),
            _ => TallyKey::marker(),
        }
    }

    /// Whether a stored tally is one the query wants.
    pub fn wants(&self, k: &TallyKey) -> bool {
        self.wants_metric(k.metric) && self.wants_place(&k.place)
    }

    /// Whether the query reads `metric` (of any place): a count of its kinds.
    pub fn wants_metric(&self, metric: Metric) -> bool {
        metric.is_count()
            && (self.kinds.is_empty()
                || metric.kind().is_some_and(|kind| self.kinds.contains(&kind)))
    }

    /// Whether the query reads the tallies of place `p` (of any partition).
    pub fn wants_place(&self, p: &Place) -> bool {
        p.scope == self.scope
            && p.grain == self.grain
            && (self.from..=self.to).contains(&p.bucket)
            && (self.only.is_empty()
                || self.only.iter().any(|(a, b)| (*a..=*b).contains(&p.bucket)))
            && self
                .campaigns
                .as_ref()
                .is_none_or(|c| c.contains(p.campaign_id.as_str()))
            && self.catalog_id.as_deref().is_none_or(|c| c == p.catalog_id)
    }

    /// The codes of every metric of the query's kinds (all kinds and the video
    /// funnel's counts when empty).
    pub fn metric_codes(&self) -> Vec<u16> {
        let kinds: &[Kind] = if self.kinds.is_empty() {
            &Kind::ALL
        } else {
            &self.kinds
        };
        let mut codes = Vec::new();
        for &kind in kinds {
            codes.push(Metric::Events(kind, None).code());
            codes.extend(
                REASONS
                    .iter()
                    .map(|r| Metric::Events(kind, Some(*r)).code()),
            );
            codes.extend(
                AdIdStatus::ALL[1..]
                    .iter()
                    .map(|s| Metric::Status(kind, *s).code()),
            );
        }
        if self.kinds.is_empty() {
            codes.extend(ViewField::ALL.iter().map(|f| Metric::View(*f).code()));
            codes.extend(CartField::ALL.iter().map(|f| Metric::Cart(*f).code()));
            codes.extend(SaleField::ALL.iter().map(|f| Metric::Sale(*f).code()));
        }
        codes
    }
}

/// Sums tallies over partitions (the partition of each summed place is 0), in place
/// and metric order; the marker and progress are left out. What a store's read of a
/// [`TallyQuery`] returns, by definition: the embedded store streams the same sums
/// (`embedded::tallies`, tested against this one).
pub fn sum<'a>(rows: impl IntoIterator<Item = (&'a TallyKey, &'a Tally)>) -> Vec<SummedTally> {
    let mut by: std::collections::BTreeMap<(Place, Metric), i64> = Default::default();
    for (k, t) in rows {
        if !k.metric.is_count() {
            continue;
        }
        let place = Place {
            partition: 0,
            ..k.place.clone()
        };
        *by.entry((place, k.metric)).or_default() += t.value;
    }
    by.into_iter()
        .map(|((place, metric), value)| SummedTally {
            place,
            metric,
            value,
        })
        .collect()
}

/// Billable clicks per campaign and UTC day from summed tallies (campaign scope, day
/// grain), in (campaign, day) order.
pub fn billable_clicks(summed: &[SummedTally]) -> Vec<DayTally> {
    let mut out: Vec<DayTally> = summed
        .iter()
        .filter(|s| {
            s.metric == Metric::BILLABLE_CLICKS
                && s.place.scope == Scope::Campaign
                && s.place.grain == Grain::Day
        })
        .map(|s| DayTally {
            campaign_id: s.place.campaign_id.to_string(),
            day: s.place.bucket,
            value: s.value,
        })
        .collect();
    out.sort();
    out
}

/// The backfill's marker row (written last, once the counts are).
pub fn marker_row() -> (TallyKey, Tally) {
    (TallyKey::marker(), Tally::MARKED)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Sorted by their order, each row once, as a sort of the rows themselves.
        #[test]
        fn summed_rows_sort_as_their_order(
            rows in proptest::collection::vec(
                (0u8..4, 0i32..4, (0u8..4, 0u8..4), 0u16..3, -2i64..3),
                0..80,
            ),
        ) {
            // One pool for every field: a text ranks as it compares in each.
            let text = |n: u8| Text::from(["", "b", "camp-1", "camp-10"][usize::from(n)]);
            let rows: Vec<SummedTally> = rows
                .into_iter()
                .map(|(campaign, bucket, (creative, product), metric, value)| SummedTally {
                    place: Place {
                        campaign_id: text(campaign),
                        bucket,
                        creative: text(creative),
                        product_code: text(product),
                        ..Place::marker()
                    },
                    metric: Metric::from_code(metric).unwrap_or(Metric::BILLABLE_CLICKS),
                    value,
                })
                .collect();
            let mut expected = rows.clone();
            expected.sort();
            prop_assert_eq!(sort_summed(rows), expected);
        }

        /// Applying a partition's records, then any replays of any suffix of them
        /// (a crash after the tally was written, before the offsets were committed),
        /// counts every record once.
        #[test]
        fn replays_of_any_suffix_count_once(
            deltas in proptest::collection::vec(0i64..3, 0..40),
            replays in proptest::collection::vec(0usize..40, 0..4),
        ) {
            let mut t = Tally::EMPTY;
            for (o, d) in deltas.iter().enumerate() {
                t.add(o as i64, *d);
            }
            for from in replays {
                for (o, d) in deltas.iter().enumerate().skip(from) {
                    prop_assert!(!t.add(o as i64, *d));
                }
            }
            prop_assert_eq!(t.value, deltas.iter().sum::<i64>());
        }

        /// Quarter hours tile days: a day's bucket is its quarters' buckets / 96.
        #[test]
        fn quarters_tile_days(ms in -10_000_000_000_000i64..10_000_000_000_000) {
            let q = Grain::Quarter.bucket(ms);
            prop_assert_eq!(q.div_euclid(QUARTERS_PER_DAY), Grain::Day.bucket(ms));
            prop_assert!(Grain::Quarter.start_ms(q) <= ms);
            prop_assert!(ms < Grain::Quarter.start_ms(q) + QUARTER_MS);
        }
    }

    fn place(c: &str, bucket: i32, partition: i32) -> Place {
        Place {
            campaign_id: c.into(),
            bucket,
            partition,
            ..Place::marker()
        }
    }

    #[test]
    fn sums_partitions_per_place_and_metric() {
        let k = |c: &str, day, partition| TallyKey {
            place: place(c, day, partition),
            metric: Metric::BILLABLE_CLICKS,
        };
        let t = |value| Tally { value, stamp: 9 };
        let rows = [
            (k("a", 1, 0), t(2)),
            (k("a", 1, 1), t(3)),
            (k("a", 2, 0), t(1)),
            (k("b", 1, BACKFILL_PARTITION), t(7)),
            (TallyKey::marker(), t(1)),
        ];
        let summed = sum(rows.iter().map(|(k, t)| (k, t)));
        let got: Vec<(String, i32, i64)> = billable_clicks(&summed)
            .into_iter()
            .map(|d| (d.campaign_id, d.day, d.value))
            .collect();
        assert_eq!(
            got,
            [("a".into(), 1, 5), ("a".into(), 2, 1), ("b".into(), 1, 7)]
        );
        assert_eq!(summed.len(), 3, "the marker is not a count");
    }

    #[test]
    fn metric_codes_round_trip_and_are_distinct() {
        let mut all = vec![
            Metric::Backfilled,
            Metric::Progress,
            Metric::SalesBackfilled,
            Metric::CartsBackfilled,
            Metric::LinesBackfilled,
            Metric::ZonesBackfilled,
            Metric::HoursBackfilled,
        ];
        all.extend(SaleField::ALL.iter().map(|f| Metric::Sale(*f)));
        all.extend(ViewField::ALL.iter().map(|f| Metric::View(*f)));
        all.extend(CartField::ALL.iter().map(|f| Metric::Cart(*f)));
        for kind in Kind::ALL {
            all.push(Metric::Events(kind, None));
            all.extend(REASONS.iter().map(|r| Metric::Events(kind, Some(*r))));
            all.extend(
                AdIdStatus::ALL[1..]
                    .iter()
                    .map(|s| Metric::Status(kind, *s)),
            );
        }
        let mut codes: Vec<u16> = all.iter().map(|m| m.code()).collect();
        for m in &all {
            assert_eq!(Metric::from_code(m.code()), Some(*m), "{m:?}");
        }
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), all.len());
        assert_eq!(
            Metric::from_code(64),
            None,
            "a verified status is no metric"
        );
        assert_eq!(Metric::from_code(9 + 16 * 3 + 1), None);
        assert_eq!(Metric::from_code(248), None);
        assert_eq!(Metric::from_code(192 + 7), None);
        for m in [
            Metric::Backfilled,
            Metric::SalesBackfilled,
            Metric::CartsBackfilled,
            Metric::LinesBackfilled,
            Metric::Progress,
        ] {
            assert_eq!(Metric::from_code(m.code()), Some(m));
            assert!(!m.is_count());
        }
        assert_eq!(Metric::from_code(224 + 6), None);
        for code in 0..=u16::from(u8::MAX) {
            if let Some(m) = Metric::from_code(code) {
                assert_eq!(
                    m.is_count(),
                    code < Metric::FIRST_NOT_COUNT,
                    "{m:?} ({code})"
                );
            }
        }
        for s in Scope::ALL {
            assert_eq!(Scope::from_code(s as u8), Some(s));
        }
        for g in Grain::ALL {
            assert_eq!(Grain::from_code(g as u8), Some(g));
        }
        assert_eq!(Grain::from_code(2), Some(Grain::Hour));
        assert_eq!((Scope::from_code(7), Grain::from_code(3)), (None, None));
        assert_eq!(Scope::from_code(5), Some(Scope::CampaignSales));
        assert_eq!(Scope::from_code(3), Some(Scope::Video));
        assert_eq!(Metric::from_code(128 + 19), None);
    }
}
