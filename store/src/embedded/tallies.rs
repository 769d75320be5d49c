//! The embedded store's tallies ([`crate::model::tallies`]): the `tallies` table,
//! keyed by postcard of (campaign, day, metric, partition), so one campaign's rows
//! are one key range; the value is the [`Tally`] (absolute count and stamp). A batch's
//! tallies are written in its transaction (`write.rs`), with the served ads' states.

use redb::{Database, ReadableDatabase, ReadableTable};

use super::{err, key, parse, val, Table};
use crate::model::ads::AdReportRow;
use crate::model::tallies::{self, DayTally, Metric, Tally, TallyKey};
use crate::write::FastMap;
use crate::StoreError;

pub(super) const TALLIES: Table = redb::TableDefinition::new("tallies");

/// The table's rows of one batch.
pub(super) fn rows(tallies: &[(TallyKey, Tally)]) -> super::Rows {
    tallies.iter().map(|(k, t)| (key(k), val(t))).collect()
}

/// The current tallies of `keys` (absent ones left out).
pub(super) fn load(
    db: &Database,
    keys: &[TallyKey],
) -> Result<FastMap<TallyKey, Tally>, StoreError> {
    let r = db.begin_read().map_err(err)?;
    let t = r.open_table(TALLIES).map_err(err)?;
    let mut out = FastMap::default();
    for k in keys {
        if let Some(v) = t.get(key(k).as_slice()).map_err(err)? {
            out.insert(k.clone(), parse::<Tally>(v.value())?);
        }
    }
    Ok(out)
}

/// Whether the backfill marker is stored.
fn has_marker(t: &impl ReadableTable<&'static [u8], &'static [u8]>) -> Result<bool, StoreError> {
    Ok(t.get(key(&TallyKey::marker()).as_slice())
        .map_err(err)?
        .is_some())
}

/// `metric` per campaign and day of `campaigns` (all when `None`); `None` before the
/// backfill.
pub(super) fn read(
    db: &Database,
    metric: Metric,
    campaigns: Option<&std::collections::HashSet<String>>,
) -> Result<Option<Vec<DayTally>>, StoreError> {
    let r = db.begin_read().map_err(err)?;
    let t = r.open_table(TALLIES).map_err(err)?;
    if !has_marker(&t)? {
        return Ok(None);
    }
    let mut rows: Vec<(TallyKey, Tally)> = Vec::new();
    let mut take = |k: &[u8], v: &[u8]| -> Result<(), StoreError> {
        let k: TallyKey = postcard::from_bytes(k).map_err(super::codec::corrupt)?;
        if k.metric == metric {
            rows.push((k, parse(v)?));
        }
        Ok(())
    };
    match campaigns {
        None => {
            for row in t.iter().map_err(err)? {
                let (k, v) = row.map_err(err)?;
                take(k.value(), v.value())?;
            }
        }
        Some(campaigns) => {
            for c in campaigns {
                // A campaign's keys start with its length-prefixed id, which no other
                // id's keys start with.
                let prefix = key(c.as_str());
                for row in t.range(prefix.as_slice()..).map_err(err)? {
                    let (k, v) = row.map_err(err)?;
                    if !k.value().starts_with(&prefix) {
                        break;
                    }
                    take(k.value(), v.value())?;
                }
            }
        }
    }
    Ok(Some(tallies::sum(rows.iter().map(|(k, t)| (k, t)), metric)))
}

/// Writes the backfill once: `ads` is the ads report over the whole store, read by
/// the caller when [`needs_backfill`] said so.
pub(super) fn backfill(db: &Database, ads: &[AdReportRow]) -> Result<bool, StoreError> {
    let w = db.begin_write().map_err(err)?;
    {
        let mut t = w.open_table(TALLIES).map_err(err)?;
        if has_marker(&t)? {
            return Ok(false);
        }
        for (k, v) in tallies::backfill(ads)
            .into_iter()
            .chain([tallies::marker_row()])
        {
            t.insert(key(&k).as_slice(), val(&v).as_slice())
                .map_err(err)?;
        }
    }
    w.commit().map_err(err)?;
    Ok(true)
}

/// Whether the store still needs its backfill.
pub(super) fn needs_backfill(db: &Database) -> Result<bool, StoreError> {
    let r = db.begin_read().map_err(err)?;
    let t = r.open_table(TALLIES).map_err(err)?;
    Ok(!has_marker(&t)?)
}

/// Deletes every tally (the marker too).
pub(super) fn clear(db: &Database) -> Result<(), StoreError> {
    let w = db.begin_write().map_err(err)?;
    w.delete_table(TALLIES).map_err(err)?;
    w.open_table(TALLIES).map_err(err)?;
    w.commit().map_err(err)
}
