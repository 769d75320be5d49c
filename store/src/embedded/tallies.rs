//! The embedded store's tallies ([`crate::model::tallies`]): the `rollups` table. A
//! key is the tally's place and metric in an order-preserving layout: campaign
//! (length-prefixed), scope, grain, bucket (big-endian, sign bit flipped), creative,
//! catalog and product (length-prefixed), partition, metric; so a report's range of
//! one campaign is one key range, and a place's tallies (every metric) are another.
//! The value is the [`Tally`] (absolute count and stamp). A batch's tallies are
//! written in its transaction (`write.rs`), with the served ads' states.

use redb::{Database, ReadableDatabase, ReadableTable};

use super::{err, parse, val, Table};
use crate::model::ads::AdFact;
use crate::model::campaigns::CartAddsRow;
use crate::model::funnel::ViewRow;
use crate::model::products::ProductFact;
use crate::model::retention;
use crate::model::tallies::backfill::Counts;
use crate::model::tallies::{
    self, page::PlaceKey, Grain, Metric, Place, PlaceTallies, Scope, SummedTally, Tally, TallyKey,
    TallyQuery,
};
use crate::model::traffic::ClickWindow;
use crate::write::FastMap;
use crate::StoreError;

pub(super) const ROLLUPS: Table = redb::TableDefinition::new("rollups");

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend(u32::try_from(s.len()).unwrap_or(u32::MAX).to_be_bytes());
    out.extend(s.as_bytes());
}

fn flip(i: i32) -> [u8; 4] {
    ((i as u32) ^ 0x8000_0000).to_be_bytes()
}

fn unflip(b: [u8; 4]) -> i32 {
    (u32::from_be_bytes(b) ^ 0x8000_0000) as i32
}

/// The prefix of every key of a campaign.
fn campaign_prefix(campaign: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(campaign.len() + 4);
    put_str(&mut k, campaign);
    k
}

/// The prefix of a campaign's keys of one scope and grain (then the bucket).
fn slice_prefix(campaign: &str, scope: Scope, grain: Grain) -> Vec<u8> {
    let mut k = campaign_prefix(campaign);
    k.extend([scope as u8, grain as u8]);
    k
}

/// A place's key: every metric of it follows (two more bytes).
fn place_key(p: &Place) -> Vec<u8> {
    let mut k = slice_prefix(&p.campaign_id, p.scope, p.grain);
    k.extend(flip(p.bucket));
    put_str(&mut k, &p.creative);
    put_str(&mut k, &p.catalog_id);
    put_str(&mut k, &p.product_code);
    k.extend(flip(p.partition));
    k
}

pub(super) fn tally_key(k: &TallyKey) -> Vec<u8> {
    let mut out = place_key(&k.place);
    out.extend(k.metric.code().to_be_bytes());
    out
}

/// A cursor over a key's bytes.
struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

fn bad() -> StoreError {
    super::codec::corrupt("a tally key of no known layout")
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], StoreError> {
        let s = self.b.get(self.at..self.at + n).ok_or_else(bad)?;
        self.at += n;
        Ok(s)
    }

    fn four(&mut self) -> Result<[u8; 4], StoreError> {
        self.take(4)?.try_into().map_err(|_| bad())
    }

    fn string(&mut self) -> Result<String, StoreError> {
        let len = u32::from_be_bytes(self.four()?) as usize;
        String::from_utf8(self.take(len)?.to_vec()).map_err(|_| bad())
    }
}

/// Reads a place's key back, up to its partition (left 0).
fn read_place(r: &mut Reader<'_>) -> Result<Place, StoreError> {
    let campaign_id = r.string()?;
    let sg = r.take(2)?;
    let scope = Scope::from_code(sg[0]).ok_or_else(bad)?;
    let grain = Grain::from_code(sg[1]).ok_or_else(bad)?;
    let bucket = unflip(r.four()?);
    Ok(Place {
        campaign_id: campaign_id.into(),
        scope,
        grain,
        bucket,
        creative: r.string()?.into(),
        catalog_id: r.string()?.into(),
        product_code: r.string()?.into(),
        partition: 0,
    })
}

/// Reads a key's metric (its last two bytes).
fn read_metric(m: &[u8]) -> Result<Metric, StoreError> {
    match m {
        [a, b] => Metric::from_code(u16::from_be_bytes([*a, *b])).ok_or_else(bad),
        _ => Err(bad()),
    }
}

/// Reads a key back.
pub(super) fn decode(b: &[u8]) -> Result<TallyKey, StoreError> {
    let mut r = Reader { b, at: 0 };
    let mut place = read_place(&mut r)?;
    place.partition = unflip(r.four()?);
    let metric = read_metric(r.take(2)?)?;
    if r.at != b.len() {
        return Err(bad());
    }
    Ok(TallyKey { place, metric })
}

/// The table's rows of one batch.
pub(super) fn rows(tallies: &[(TallyKey, Tally)]) -> super::Rows {
    tallies
        .iter()
        .map(|(k, t)| (tally_key(k), val(t)))
        .collect()
}

/// Every stored tally of `places` (absent places left out).
pub(super) fn load(
    db: &Database,
    places: &[Place],
) -> Result<FastMap<Place, PlaceTallies>, StoreError> {
    let r = db.begin_read().map_err(err)?;
    let t = r.open_table(ROLLUPS).map_err(err)?;
    let mut out: FastMap<Place, PlaceTallies> = FastMap::default();
    for p in places {
        let from = place_key(p);
        let mut to = from.clone();
        to.extend([0xFF, 0xFF, 0xFF]);
        for row in t.range(from.as_slice()..to.as_slice()).map_err(err)? {
            let (k, v) = row.map_err(err)?;
            let k = decode(k.value())?;
            out.entry(p.clone())
                .or_default()
                .0
                .push((k.metric, parse::<Tally>(v.value())?));
        }
    }
    Ok(out)
}

/// Whether the backfill marker is stored.
fn has_marker(t: &impl ReadableTable<&'static [u8], &'static [u8]>) -> Result<bool, StoreError> {
    has(t, &TallyKey::marker())
}

/// Whether a marker is stored.
pub(super) fn has(
    t: &impl ReadableTable<&'static [u8], &'static [u8]>,
    marker: &TallyKey,
) -> Result<bool, StoreError> {
    Ok(t.get(tally_key(marker).as_slice()).map_err(err)?.is_some())
}

/// The tallies `q` wants, summed over partitions; `None` before the backfill. Each
/// campaign's range is read alone (every campaign, found by skipping from one
/// campaign's keys to the next, when `q` names none).
pub(super) fn read(db: &Database, q: &TallyQuery) -> Result<Option<Vec<SummedTally>>, StoreError> {
    let r = db.begin_read().map_err(err)?;
    let t = r.open_table(ROLLUPS).map_err(err)?;
    if !has(&t, &q.marker())? {
        return Ok(None);
    }
    let mut rows: Vec<SummedTally> = Vec::new();
    // The query's range, or each of its sub-ranges (`TallyQuery::only`).
    let ranges: Vec<(i32, i32)> = if q.only.is_empty() {
        vec![(q.from, q.to)]
    } else {
        q.only.clone()
    };
    // Each campaign's sums, in (place, metric) order: campaigns are read in order.
    let campaign = |c: &str, rows: &mut Vec<SummedTally>| -> Result<(), StoreError> {
        let prefix = slice_prefix(c, q.scope, q.grain);
        let before = rows.len();
        let mut sums = Sums::new(q, rows);
        for (a, b) in &ranges {
            let mut from = prefix.clone();
            from.extend(flip(*a));
            let mut to = prefix.clone();
            to.extend(flip(*b));
            to.push(0xFF);
            for row in t.range(from.as_slice()..to.as_slice()).map_err(err)? {
                let (k, v) = row.map_err(err)?;
                sums.add(k.value(), v.value())?;
            }
        }
        sums.finish()?;
        in_order(&mut rows[before..]);
        Ok(())
    };
    let mut campaigns: Vec<String> = match &q.campaigns {
        Some(campaigns) => campaigns.iter().cloned().collect(),
        None => {
            let mut found = Vec::new();
            let mut cursor: Vec<u8> = Vec::new();
            loop {
                let next = t
                    .range(cursor.as_slice()..)
                    .map_err(err)?
                    .next()
                    .transpose()
                    .map_err(err)?;
                let Some((k, _)) = next else { break };
                let c = decode(k.value())?.place.campaign_id.to_string();
                // Past every key of `c`: its scope byte is at most 1.
                cursor = campaign_prefix(&c);
                cursor.push(0xFF);
                found.push(c);
            }
            found
        }
    };
    campaigns.sort_unstable();
    let Some(page) = &q.page else {
        for c in &campaigns {
            campaign(c, &mut rows)?;
        }
        return Ok(Some(rows));
    };
    // A page: its campaigns in key order, from the page's first, until a campaign
    // ends with the page's places found (a later campaign's places all follow).
    let mut places: std::collections::BTreeSet<PlaceKey> = std::collections::BTreeSet::new();
    for c in campaigns
        .iter()
        .filter(|c| c.as_str() >= page.from.campaign_id.as_str())
    {
        let before = rows.len();
        campaign(c, &mut rows)?;
        places.extend(
            rows[before..]
                .iter()
                .map(|s| PlaceKey::of(&s.place))
                .filter(|k| k >= &page.from),
        );
        if places.len() >= page.places {
            break;
        }
    }
    Ok(Some(page.select(rows)))
}

/// A read's tallies summed over partitions as they stream from a key range, in key
/// order. A place's tallies of every partition and metric are adjacent there (the
/// partition and the metric are a key's last six bytes), so each place's key is
/// decoded once, when the next place begins, and its metrics are summed in a short
/// list: no map of places, and no row held past its place.
struct Sums<'a> {
    q: &'a TallyQuery,
    /// The current place's key, less its partition and metric.
    head: Vec<u8>,
    /// Its wanted metrics so far, summed.
    metrics: Vec<(Metric, i64)>,
    out: &'a mut Vec<SummedTally>,
}

impl<'a> Sums<'a> {
    fn new(q: &'a TallyQuery, out: &'a mut Vec<SummedTally>) -> Self {
        Self {
            q,
            head: Vec::new(),
            metrics: Vec::new(),
            out,
        }
    }

    /// Adds a stored row (its key's and value's bytes).
    fn add(&mut self, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        let at = key.len().checked_sub(6).ok_or_else(bad)?;
        let (head, tail) = key.split_at(at);
        if head != self.head.as_slice() {
            self.flush()?;
            self.head.clear();
            self.head.extend_from_slice(head);
        }
        let metric = read_metric(&tail[4..])?;
        if !self.q.wants_metric(metric) {
            return Ok(());
        }
        let value = parse::<Tally>(value)?.value;
        match self.metrics.iter_mut().find(|(m, _)| *m == metric) {
            Some((_, sum)) => *sum += value,
            None => self.metrics.push((metric, value)),
        }
        Ok(())
    }

    /// Ends the current place: its sums out when the query wants it.
    fn flush(&mut self) -> Result<(), StoreError> {
        if self.metrics.is_empty() {
            return Ok(());
        }
        let mut r = Reader {
            b: &self.head,
            at: 0,
        };
        let place = read_place(&mut r)?;
        if r.at != self.head.len() {
            return Err(bad());
        }
        if self.q.wants_place(&place) {
            for (metric, value) in self.metrics.drain(..) {
                self.out.push(SummedTally {
                    place: place.clone(),
                    metric,
                    value,
                });
            }
        }
        self.metrics.clear();
        Ok(())
    }

    fn finish(mut self) -> Result<(), StoreError> {
        self.flush()
    }
}

/// Sorts one campaign's sums of one scope and grain into (place, metric) order. Key
/// order is bucket order already, but a key's text is length-prefixed (a shorter
/// creative first), so places of a bucket may be out of their text's order; the
/// campaign, scope, grain and partition are the same throughout, so not compared.
/// Each (place, metric) is there once: a campaign's ranges are disjoint.
fn in_order(rows: &mut [SummedTally]) {
    rows.sort_by(|a, b| {
        let (p, q) = (&a.place, &b.place);
        (
            p.bucket,
            &p.creative,
            &p.catalog_id,
            &p.product_code,
            a.metric,
        )
            .cmp(&(
                q.bucket,
                &q.creative,
                &q.catalog_id,
                &q.product_code,
                b.metric,
            ))
    });
}

/// Writes the backfill once: the store's facts, read by the caller when
/// [`needs_backfill`] said so.
pub(super) fn backfill(
    db: &Database,
    ads: &[AdFact],
    products: &[ProductFact],
    views: &[ViewRow],
    carts: &[CartAddsRow],
    window: ClickWindow,
) -> Result<Option<usize>, StoreError> {
    let mut counts = Counts::default();
    counts.ads(ads, window);
    counts.products(products, window);
    counts.views(views);
    counts.cart_adds(carts);
    let w = db.begin_write().map_err(err)?;
    let n;
    {
        let mut t = w.open_table(ROLLUPS).map_err(err)?;
        if has_marker(&t)? {
            return Ok(None);
        }
        let rows = recounted(&w, counts.rows())?;
        n = rows.len();
        for (k, v) in rows.into_iter().chain([tallies::marker_row()]) {
            t.insert(tally_key(&k).as_slice(), val(&v).as_slice())
                .map_err(err)?;
        }
    }
    w.commit().map_err(err)?;
    Ok(Some(n))
}

/// Writes the cart products' backfill (`rows`, then its marker) once, in one
/// transaction: `None` when the marker was there.
pub(super) fn backfill_carts(
    db: &Database,
    rows: Vec<(TallyKey, Tally)>,
) -> Result<Option<usize>, StoreError> {
    let w = db.begin_write().map_err(err)?;
    let rows = recounted(&w, rows)?;
    let n = rows.len();
    {
        let mut t = w.open_table(ROLLUPS).map_err(err)?;
        if has(&t, &TallyKey::carts_marker())? {
            return Ok(None);
        }
        for (k, v) in rows
            .into_iter()
            .chain([(TallyKey::carts_marker(), Tally::MARKED)])
        {
            t.insert(tally_key(&k).as_slice(), val(&v).as_slice())
                .map_err(err)?;
        }
    }
    w.commit().map_err(err)?;
    Ok(Some(n))
}

/// Whether the store still needs its cart products' backfill.
pub(super) fn needs_carts_backfill(db: &Database) -> Result<bool, StoreError> {
    let r = db.begin_read().map_err(err)?;
    let t = r.open_table(ROLLUPS).map_err(err)?;
    Ok(!has(&t, &TallyKey::carts_marker())?)
}

/// Marks a store that holds no facts as counted (nothing to backfill), in the
/// transaction that opens it; a store with facts and no marker waits for the
/// aggregator's backfill.
pub(super) fn mark_if_new(w: &redb::WriteTransaction) -> Result<(), StoreError> {
    if holds_facts(w)? {
        return Ok(());
    }
    let mut t = w.open_table(ROLLUPS).map_err(err)?;
    for marker in [TallyKey::marker(), TallyKey::carts_marker()] {
        if !has(&t, &marker)? {
            t.insert(
                tally_key(&marker).as_slice(),
                val(&Tally::MARKED).as_slice(),
            )
            .map_err(err)?;
        }
    }
    Ok(())
}

/// Writes a backfill's rows, then its marker, in `t` (of the caller's transaction).
pub(super) fn put_backfilled(
    t: &mut redb::Table<&[u8], &[u8]>,
    rows: Vec<(TallyKey, Tally)>,
    marker: &TallyKey,
) -> Result<(), StoreError> {
    for (k, v) in rows {
        t.insert(tally_key(&k).as_slice(), val(&v).as_slice())
            .map_err(err)?;
    }
    t.insert(tally_key(marker).as_slice(), val(&Tally::MARKED).as_slice())
        .map_err(err)?;
    Ok(())
}

/// Whether the store holds any fact, view or cart line.
pub(super) fn holds_facts(w: &redb::WriteTransaction) -> Result<bool, StoreError> {
    let facts = [
        super::AD_FACTS,
        super::PRODUCT_FACTS,
        super::entities::VIEWS.rows,
        super::entities::CARTS.rows,
    ];
    for table in facts {
        if w.open_table(table)
            .map_err(err)?
            .first()
            .map_err(err)?
            .is_some()
        {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Whether the store still needs its backfill.
pub(super) fn needs_backfill(db: &Database) -> Result<bool, StoreError> {
    let r = db.begin_read().map_err(err)?;
    let t = r.open_table(ROLLUPS).map_err(err)?;
    Ok(!has_marker(&t)?)
}

/// The rows a backfill writes: those the store's recount floor lets it count again
/// ([`crate::model::retention::recounted`]: every row, where no fact was ever
/// removed).
pub(super) fn recounted(
    w: &redb::WriteTransaction,
    rows: Vec<(TallyKey, Tally)>,
) -> Result<Vec<(TallyKey, Tally)>, StoreError> {
    let floor = super::retention::floor(w)?;
    Ok(rows
        .into_iter()
        .filter(|(k, _)| retention::recounted(k, floor))
        .collect())
}

/// Deletes every tally (the markers too) but, in a store that lost facts to their
/// retention, the counts of the buckets before its recount floor: their facts may
/// be gone, so they stay as the fold counted them.
pub(super) fn clear(db: &Database) -> Result<(), StoreError> {
    let w = db.begin_write().map_err(err)?;
    match super::retention::floor(&w)? {
        None => {
            w.delete_table(ROLLUPS).map_err(err)?;
            w.open_table(ROLLUPS).map_err(err)?;
        }
        Some(f) => {
            let mut t = w.open_table(ROLLUPS).map_err(err)?;
            t.retain(|k, _| decode(k).is_ok_and(|k| !retention::recounted(&k, Some(f))))
                .map_err(err)?;
        }
    }
    w.commit().map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn key(c: &str, bucket: i32, creative: &str, partition: i32, metric: Metric) -> TallyKey {
        TallyKey {
            place: Place {
                campaign_id: c.into(),
                scope: Scope::Product,
                grain: Grain::Quarter,
                bucket,
                creative: creative.into(),
                catalog_id: "cat".into(),
                product_code: "p".into(),
                partition,
            },
            metric,
        }
    }

    proptest! {
        /// Keys read back as written, and their bytes sort by (campaign's length and
        /// bytes, scope, grain, bucket, ...): a bucket range is a key range.
        #[test]
        fn keys_round_trip_and_buckets_sort(
            a in -100_000i32..100_000, b in -100_000i32..100_000,
            part in proptest::option::of(-1i32..64),
            c in "[a-z0-9]{0,12}",
        ) {
            let m = Metric::Events(tallies::Kind::ProductClick, None);
            let part = part.unwrap_or(tallies::BACKFILL_PARTITION);
            let (ka, kb) = (key(&c, a, "x", part, m), key(&c, b, "x", part, m));
            prop_assert_eq!(decode(&tally_key(&ka)).expect("decodes"), ka.clone());
            prop_assert_eq!(a.cmp(&b), tally_key(&ka).cmp(&tally_key(&kb)));
            prop_assert!(tally_key(&ka).starts_with(&place_key(&ka.place)));
        }
    }

    proptest! {
        /// A read of stored rows (several campaigns, partitions and metrics, a query's
        /// buckets and kinds, whole or as sub-ranges) equals every wanted row decoded
        /// and summed over partitions in a map (`tallies::sum`), in the same order.
        #[test]
        fn streamed_sums_are_the_mapped_sums(
            written in proptest::collection::vec(
                (0usize..3, 0i32..6, 0usize..4, -1i32..4, 0usize..4, -5i64..50),
                0..80,
            ),
            from in 0i32..4,
            split in proptest::bool::ANY,
            kinds in proptest::sample::subsequence(vec![
                tallies::Kind::ProductImpression,
                tallies::Kind::ProductClick,
            ], 0..=2),
        ) {
            let metrics = [
                Metric::Events(tallies::Kind::ProductClick, None),
                Metric::Events(tallies::Kind::ProductImpression, None),
                Metric::Events(tallies::Kind::AdClick, None),
                Metric::Backfilled,
            ];
            let mut stored: Vec<(TallyKey, Tally)> = vec![(TallyKey::marker(), Tally::MARKED)];
            for (c, bucket, creative, part, m, value) in written {
                let creative = ["", "p:9", "p:10", "banner"][creative];
                let mut k = key(["bb", "a", "c"][c], bucket, creative, part, metrics[m]);
                k.place.grain = Grain::Day;
                stored.push((k, Tally { value, stamp: 1 }));
            }
            let dir = tempfile::tempdir().expect("a directory");
            let db = Database::create(dir.path().join("t.redb")).expect("a store");
            let w = db.begin_write().expect("a transaction");
            {
                let mut t = w.open_table(ROLLUPS).expect("the table");
                for (k, v) in rows(&stored) {
                    t.insert(k.as_slice(), v.as_slice()).expect("a row");
                }
            }
            w.commit().expect("committed");
            let q = TallyQuery {
                campaigns: None,
                scope: Scope::Product,
                grain: Grain::Day,
                from,
                to: 4,
                kinds,
                catalog_id: None,
                page: None,
                only: if split { vec![(0, 1), (3, 4)] } else { Vec::new() },
                group: crate::model::tallies::Group::Each,
            };
            let latest: std::collections::BTreeMap<Vec<u8>, &(TallyKey, Tally)> =
                stored.iter().map(|r| (tally_key(&r.0), r)).collect();
            let mapped = tallies::sum(
                latest.values().filter(|(k, _)| q.wants(k)).map(|(k, t)| (k, t)),
            );
            prop_assert_eq!(read(&db, &q).expect("a read"), Some(mapped));
        }
    }

    #[test]
    fn a_truncated_key_is_an_error_not_a_panic() {
        let k = tally_key(&key("c", 1, "x", 0, Metric::Backfilled));
        for n in 0..k.len() {
            assert!(decode(&k[..n]).is_err(), "{n}");
        }
    }
}
