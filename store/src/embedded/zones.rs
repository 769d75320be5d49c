//! The zones' backfill on the embedded store ([`crate::model::tallies::zones`]): the
//! quarter hours of campaigns, videos and campaigns' sales that a store an earlier
//! version wrote lacks, counted once from its tallies and entities, with their
//! marker, in one transaction. A store with nothing in it is marked at open (for
//! the hours' backfill too, `super::hours`).

use redb::{Database, ReadableDatabase, ReadableTable};

use super::codec::{parse_view_facts, parse_view_row};
use super::tallies::{decode, has, tally_key, ROLLUPS};
use super::{err, parse, val};
use crate::model::tallies::sales::OrderCredits;
use crate::model::tallies::views::{self, Counted};
use crate::model::tallies::{zones, Metric, Scope, Tally, TallyKey};
use crate::StoreError;

/// Whether the marker is stored.
pub(super) fn needs_backfill(db: &Database) -> Result<bool, StoreError> {
    let r = db.begin_read().map_err(err)?;
    let t = r.open_table(ROLLUPS).map_err(err)?;
    Ok(!has(&t, &TallyKey::zones_marker())?)
}

/// The rows of the backfill: the campaigns' quarter hours of events from the stored
/// tallies, and those of views, cart adds and sales from the stored entities.
fn counts(db: &Database) -> Result<Vec<(TallyKey, Tally)>, StoreError> {
    let r = db.begin_read().map_err(err)?;
    let mut tallies = Vec::new();
    let mut progress = std::collections::BTreeMap::new();
    for row in r.open_table(ROLLUPS).map_err(err)?.iter().map_err(err)? {
        let (k, v) = row.map_err(err)?;
        let k = decode(k.value())?;
        let t: Tally = parse(v.value())?;
        match (k.metric, k.place.scope) {
            // The event log's partitions' (the orders topic's are at `Sales`).
            (Metric::Progress, Scope::Campaign) => {
                progress.insert(k.place.partition, t.value);
            }
            (Metric::Progress, _) => {}
            // Only what the sums read is held, not every tally of the store.
            _ if zones::sums_into_campaigns(&k) => tallies.push((k, t)),
            _ => {}
        }
    }
    let mut out = zones::campaign_events(tallies, &progress);
    let mut stored_views = Vec::new();
    let views_table = r.open_table(super::entities::VIEWS.rows).map_err(err)?;
    for row in views_table.iter().map_err(err)? {
        let (_, v) = row.map_err(err)?;
        let (view, _) = parse_view_row(v.value())?;
        let first_ms = views::first_ms(&parse_view_facts(v.value())?);
        stored_views.push((view, first_ms));
    }
    out.extend(zones::views(stored_views.iter().map(|(row, first_ms)| {
        Counted {
            row,
            first_ms: *first_ms,
        }
    })));
    let cart_rows = super::reports::cart_rows(db)?;
    out.extend(crate::model::tallies::carts::backfill_rows_of(
        &cart_rows,
        zones::is_zoned,
    ));
    let mut states = Vec::new();
    for row in r
        .open_table(super::sales::ORDER_CREDITS)
        .map_err(err)?
        .iter()
        .map_err(err)?
    {
        let (_, v) = row.map_err(err)?;
        states.push(OrderCredits::from_bytes(v.value()).map_err(super::codec::corrupt)?);
    }
    out.extend(zones::sales(&states));
    Ok(out)
}

/// Writes the zones' backfill once (the rows, then the marker, in one
/// transaction): `None` when the marker was there. Called by the aggregator before
/// its first write, after the other backfills.
pub(super) fn backfill(db: &Database) -> Result<Option<usize>, StoreError> {
    if !needs_backfill(db)? {
        return Ok(None);
    }
    let rows = counts(db)?;
    let w = db.begin_write().map_err(err)?;
    let rows = super::tallies::recounted(&w, rows)?;
    let n = rows.len();
    {
        let mut t = w.open_table(ROLLUPS).map_err(err)?;
        let marker = TallyKey::zones_marker();
        if has(&t, &marker)? {
            return Ok(None);
        }
        super::tallies::put_backfilled(&mut t, rows, &marker)?;
    }
    w.commit().map_err(err)?;
    Ok(Some(n))
}

/// Marks a store that holds no facts and no orders (nothing to backfill) as counted
/// by the zones' and the hours' backfills, in the transaction that opens it.
pub(super) fn mark_if_new(w: &redb::WriteTransaction) -> Result<(), StoreError> {
    if super::tallies::holds_facts(w)? {
        return Ok(());
    }
    let orders = w.open_table(super::ORDERS).map_err(err)?;
    if orders.first().map_err(err)?.is_some() {
        return Ok(());
    }
    let mut t = w.open_table(ROLLUPS).map_err(err)?;
    for marker in [TallyKey::zones_marker(), TallyKey::hours_marker()] {
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
