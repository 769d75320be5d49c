//! The hours' backfill on the embedded store ([`crate::model::tallies::hours`]): the
//! UTC hours of the scopes kept by hour that a store an earlier version wrote lacks,
//! summed once from its stored quarter hours, with their marker, in one
//! transaction (read and written in it, so no write lands between). A store with
//! nothing in it is marked at open (`super::zones::mark_if_new`).

use redb::{Database, ReadableTable};

use super::tallies::{decode, has, ROLLUPS};
use super::{err, parse};
use crate::model::tallies::{hours, Tally, TallyKey};
use crate::StoreError;

/// Writes the hours' backfill once: `None` when the marker was there, else the rows
/// written. Called by the aggregator before its first write, after every other
/// backfill (the zones' writes quarters this one sums).
pub(super) fn backfill(db: &Database) -> Result<Option<usize>, StoreError> {
    let w = db.begin_write().map_err(err)?;
    let quarters = {
        let t = w.open_table(ROLLUPS).map_err(err)?;
        if has(&t, &TallyKey::hours_marker())? {
            return Ok(None);
        }
        let mut quarters = Vec::new();
        for row in t.iter().map_err(err)? {
            let (k, v) = row.map_err(err)?;
            let k = decode(k.value())?;
            if hours::sums_into_hours(&k) {
                let t: Tally = parse(v.value())?;
                quarters.push((k, t));
            }
        }
        quarters
    };
    let rows = super::tallies::recounted(&w, hours::of_quarters(quarters))?;
    let n = rows.len();
    {
        let mut t = w.open_table(ROLLUPS).map_err(err)?;
        super::tallies::put_backfilled(&mut t, rows, &TallyKey::hours_marker())?;
    }
    w.commit().map_err(err)?;
    Ok(Some(n))
}
