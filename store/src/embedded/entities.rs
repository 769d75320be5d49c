//! Views, carts and served ads: rows stored in the order they were first written, found through
//! a slot index whose newest part is kept in memory.
//!
//! Both are updated in place, and their natural keys start with tracking ids, which
//! are random (the SDK's `crypto.randomUUID()`). Keyed by those, every batch inserted
//! its new entities all over the table and redb rewrote nearly every page of it at
//! each commit. So each entity gets a slot when it is first stored (one more than
//! the table's last) and its row lives under the slot (8 bytes, big-endian): new
//! entities append, and the updates of a batch hit the recent pages they were
//! appended to.
//!
//! The slot index (entity key -> slot) takes random inserts by nature, so it is
//! written in bulk: entities stored since the last index write are looked up in
//! memory ([`Index`]), and once there are [`INDEX_EVERY`] of them a batch's
//! transaction also inserts them all into the index table and moves the kind's
//! high-water mark (every slot below it is in the table) with them. The rows are the
//! authority: at open, the rows at or above the mark (which hold their own keys) are
//! read back into memory, so a crash loses nothing of the index. A load looks in
//! memory before it opens its read transaction, so an entry the index write moves
//! from memory to the table is found in one place or the other.
//!
//! Measured (aggbench, 1M records, random session ids, alternating runs in one
//! session, ratio to the consume-only rate): rows keyed by tracking id 0.33-0.43x;
//! slots with every index entry inserted at once 0.38-0.47x (then 0.44-0.53x in a
//! later pair of runs); with the index written in bulk 0.48-0.58x. Once the index
//! table is much larger than [`INDEX_EVERY`] entries, a bulk write still changes
//! about one page per entry (random keys), as single inserts did: the gain is then
//! the fewer commits that touch the index, and memory holds at most that many entries
//! per kind.

use std::sync::Mutex;

use redb::{ReadableDatabase, ReadableTable, TableDefinition, WriteTransaction};

use super::{err, StoreError, Table};
use crate::write::FastMap;

/// Entries kept in memory per kind before they are written to the index table.
pub(super) const INDEX_EVERY: usize = 100_000;

/// One kind of entity: its rows by slot and its slot index.
#[derive(Clone, Copy)]
pub(super) struct Entities {
    /// Slot -> the entity's row.
    pub rows: Table,
    /// Entity key -> slot.
    pub slots: Table,
    /// Position in [`Index`] and name of its high-water mark.
    id: usize,
    mark: &'static str,
    /// The entity key a row holds.
    key_of: fn(&[u8]) -> Result<Vec<u8>, StoreError>,
    /// Rows of this kind may be removed ([`remove_oldest`]): a read that finds an
    /// index entry whose row a removal took in between takes the entity as absent.
    removable: bool,
    /// Keeps what is derived from a row ([`super::cart_lines::follow`]) with it: called
    /// with the row a write replaced or removed and the row it wrote, in its
    /// transaction, by every function here that writes rows.
    follow: Option<Follow>,
}

/// See [`Entities::follow`].
type Follow = fn(&WriteTransaction, u64, Option<&[u8]>, Option<&[u8]>) -> Result<(), StoreError>;

impl Entities {
    /// Calls the kind's [`Entities::follow`], if any.
    fn followed(
        &self,
        w: &WriteTransaction,
        slot: u64,
        old: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> Result<(), StoreError> {
        match self.follow {
            Some(f) => f(w, slot, old, new),
            None => Ok(()),
        }
    }
}

/// Per kind, the slot below which every entity is in the index table.
const MARKS: TableDefinition<&str, u64> = TableDefinition::new("slot_index_marks");

pub(super) const VIEWS: Entities = Entities {
    rows: TableDefinition::new("views_v2"),
    slots: TableDefinition::new("view_slots"),
    id: 0,
    mark: "views",
    key_of: |v| Ok(super::key(&super::codec::parse_view_row(v)?.0.key)),
    // Past the facts' retention (`retention.rs`).
    removable: true,
    follow: None,
};

pub(super) const CARTS: Entities = Entities {
    rows: super::CART_ROWS,
    slots: TableDefinition::new("cart_slots"),
    id: 1,
    mark: "carts",
    key_of: |v| {
        let rows: Vec<crate::model::carts::CartEventRow> = super::parse(v)?;
        let first = rows
            .first()
            .ok_or_else(|| super::corrupt("an empty cart"))?;
        Ok(super::key(&first.key))
    },
    // Past the facts' retention (`retention.rs`).
    removable: true,
    follow: Some(super::cart_lines::follow),
};

/// Served ads (the aggregator's state per realised ad id): a row is the ad id and its
/// state.
pub(super) const SERVED: Entities = Entities {
    rows: TableDefinition::new("served_ads"),
    slots: TableDefinition::new("served_slots"),
    id: 2,
    mark: "served",
    key_of: |v| {
        let (ad_id, _) = super::codec::parse_served(v)?;
        Ok(super::key(&ad_id))
    },
    removable: true,
    follow: None,
};

/// Every kind.
const KINDS: [Entities; 3] = [VIEWS, CARTS, SERVED];

/// The newest part of each kind's slot index (not yet in its table).
#[derive(Default)]
pub(super) struct Index {
    recent: Mutex<[FastMap<Vec<u8>, u64>; 3]>,
}

impl Index {
    /// Reads back the entities stored since each kind's index was last written.
    pub(super) fn recover(db: &redb::Database) -> Result<Self, StoreError> {
        let index = Self::default();
        let r = db.begin_read().map_err(err)?;
        let marks = r.open_table(MARKS).map_err(err)?;
        let mut recent = index.recent.lock().map_err(err)?;
        for kind in KINDS {
            let mark = marks.get(kind.mark).map_err(err)?.map_or(0, |m| m.value());
            let rows = r.open_table(kind.rows).map_err(err)?;
            for row in rows.range(mark.to_be_bytes().as_slice()..).map_err(err)? {
                let (slot, v) = row.map_err(err)?;
                recent[kind.id].insert((kind.key_of)(v.value())?, slot_of(slot.value())?);
            }
        }
        drop(recent);
        Ok(index)
    }

    /// The slots of these keys held in memory, and how many entries memory holds.
    fn slots<'k>(
        &self,
        kind: Entities,
        keys: impl Iterator<Item = &'k Vec<u8>>,
    ) -> Result<(Vec<Option<u64>>, usize), StoreError> {
        let recent = self.recent.lock().map_err(err)?;
        let map = &recent[kind.id];
        Ok((keys.map(|k| map.get(k).copied()).collect(), map.len()))
    }
}

/// An entity's slot: the one memory holds (`held`), else the index table's.
fn find(
    held: Option<u64>,
    slots: &impl ReadableTable<&'static [u8], &'static [u8]>,
    key: &[u8],
) -> Result<Option<u64>, StoreError> {
    if held.is_some() {
        return Ok(held);
    }
    match slots.get(key).map_err(err)? {
        Some(s) => slot_of(s.value()).map(Some),
        None => Ok(None),
    }
}

/// The tables [`Index::recover`] and [`upsert`] use, created at open.
pub(super) fn create(w: &WriteTransaction) -> Result<(), StoreError> {
    w.open_table(MARKS).map_err(err)?;
    for kind in KINDS {
        w.open_table(kind.rows).map_err(err)?;
        w.open_table(kind.slots).map_err(err)?;
    }
    Ok(())
}

fn slot_of(b: &[u8]) -> Result<u64, StoreError> {
    let bytes: [u8; 8] = b
        .try_into()
        .map_err(|_| super::corrupt(format!("a slot of {} bytes", b.len())))?;
    Ok(u64::from_be_bytes(bytes))
}

/// What [`upsert`] changed in the index, for [`Upserted::apply`] once its
/// transaction has committed.
#[must_use]
pub(super) struct Upserted {
    kind: Entities,
    /// New entities, when they stay in memory.
    new: Vec<(Vec<u8>, u64)>,
    /// The memory part was written to the table (and is to be dropped).
    written: bool,
}

impl Upserted {
    /// Brings the memory part of the index up to the committed transaction.
    pub(super) fn apply(self, index: &Index) -> Result<(), StoreError> {
        let mut recent = index.recent.lock().map_err(err)?;
        let map = &mut recent[self.kind.id];
        if self.written {
            map.clear();
        } else {
            map.extend(self.new);
        }
        Ok(())
    }
}

/// Writes each `(entity key, row)` (sorted by key) over the entity's row, or as a new
/// entity at the next slot; with `write_index` (or enough entries in memory) the
/// memory part of the index goes to its table in the same transaction.
pub(super) fn upsert(
    w: &WriteTransaction,
    index: &Index,
    kind: Entities,
    rows: &[(Vec<u8>, Vec<u8>)],
    write_index: bool,
) -> Result<Upserted, StoreError> {
    let mut slots = w.open_table(kind.slots).map_err(err)?;
    let mut table = w.open_table(kind.rows).map_err(err)?;
    let mut next = match table.last().map_err(err)? {
        Some((k, _)) => slot_of(k.value())? + 1,
        None => 0,
    };
    let (in_memory, held) = index.slots(kind, rows.iter().map(|(k, _)| k))?;
    let mut new = Vec::new();
    let mut placed: Vec<(u64, &[u8])> = Vec::with_capacity(rows.len());
    for ((k, v), in_memory) in rows.iter().zip(in_memory) {
        let slot = match find(in_memory, &slots, k)? {
            Some(s) => s,
            None => {
                new.push((k.clone(), next));
                next += 1;
                next - 1
            }
        };
        placed.push((slot, v));
    }
    placed.sort_unstable_by_key(|p| p.0);
    for (slot, v) in placed {
        let old = table
            .insert(slot.to_be_bytes().as_slice(), v)
            .map_err(err)?
            .map(|o| o.value().to_vec());
        kind.followed(w, slot, old.as_deref(), Some(v))?;
    }
    let written = write_index || held + new.len() >= INDEX_EVERY;
    if written {
        let mut all: Vec<(Vec<u8>, u64)> = index.recent.lock().map_err(err)?[kind.id]
            .iter()
            .map(|(k, s)| (k.clone(), *s))
            .collect();
        all.extend(new.iter().cloned());
        all.sort_unstable();
        for (k, s) in &all {
            slots
                .insert(k.as_slice(), s.to_be_bytes().as_slice())
                .map_err(err)?;
        }
        let mut marks = w.open_table(MARKS).map_err(err)?;
        marks.insert(kind.mark, next).map_err(err)?;
    }
    Ok(Upserted { kind, new, written })
}

/// What [`remove_oldest`] removed from the index, for [`Removed::apply`] once its
/// transaction has committed.
#[must_use]
pub(super) struct Removed {
    kind: Entities,
    keys: Vec<Vec<u8>>,
}

impl Removed {
    /// Drops the removed entities from the memory part of the index.
    pub(super) fn apply(self, index: &Index) -> Result<usize, StoreError> {
        let mut recent = index.recent.lock().map_err(err)?;
        let map = &mut recent[self.kind.id];
        for k in &self.keys {
            map.remove(k);
        }
        Ok(self.keys.len())
    }
}

/// Removes entities of `kind` from the oldest slot up, while `gone` says so of their
/// row, at most `limit` of them: their rows and their index entries (the table's now,
/// memory's once [`Removed::apply`]d). Slots are given in first-write order, so the
/// oldest entities are the first rows; the scan stops at the first one to keep.
pub(super) fn remove_oldest(
    w: &WriteTransaction,
    kind: Entities,
    limit: usize,
    gone: impl Fn(&[u8]) -> Result<bool, StoreError>,
) -> Result<Removed, StoreError> {
    let mut n = 0;
    let doomed = doomed(w, kind, |row| {
        if n >= limit || !gone(row)? {
            return Ok(None);
        }
        n += 1;
        Ok(Some(true))
    })?;
    remove(w, kind, doomed)
}

/// Removes every entity of `kind` whose row `gone` says so of (a scan of the whole
/// table) but the newest (see [`doomed`]). Only for a kind whose reads allow it
/// ([`Entities::removable`]).
pub(super) fn remove_where(
    w: &WriteTransaction,
    kind: Entities,
    mut gone: impl FnMut(&[u8]) -> Result<bool, StoreError>,
) -> Result<Removed, StoreError> {
    if !kind.removable {
        return Err(StoreError::Refused(format!(
            "{}: rows of this kind are never removed",
            kind.mark
        )));
    }
    let doomed = doomed(w, kind, |row| gone(row).map(Some))?;
    remove(w, kind, doomed)
}

/// The slot and key of each row of `kind`, oldest first, that `pick` says goes
/// (`Some(true)`), until it says stop (`None`). The newest row stays whatever it
/// holds: the next slot is one past it, and slots must never be given twice (an
/// index entry below the mark is the table's).
fn doomed(
    w: &WriteTransaction,
    kind: Entities,
    mut pick: impl FnMut(&[u8]) -> Result<Option<bool>, StoreError>,
) -> Result<Vec<(u64, Vec<u8>)>, StoreError> {
    let table = w.open_table(kind.rows).map_err(err)?;
    let Some(last) = last_slot(&table)? else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for row in table.iter().map_err(err)? {
        let (slot, v) = row.map_err(err)?;
        let slot = slot_of(slot.value())?;
        if slot >= last {
            break;
        }
        match pick(v.value())? {
            None => break,
            Some(true) => out.push((slot, (kind.key_of)(v.value())?)),
            Some(false) => {}
        }
    }
    Ok(out)
}

/// The newest slot of a kind's rows, `None` when it has none.
fn last_slot(
    table: &impl ReadableTable<&'static [u8], &'static [u8]>,
) -> Result<Option<u64>, StoreError> {
    match table.last().map_err(err)? {
        Some((k, _)) => slot_of(k.value()).map(Some),
        None => Ok(None),
    }
}

/// Removes these entities (slot, key): their rows, following them, and their index
/// table entries (memory's once [`Removed::apply`]d).
fn remove(
    w: &WriteTransaction,
    kind: Entities,
    doomed: Vec<(u64, Vec<u8>)>,
) -> Result<Removed, StoreError> {
    let mut table = w.open_table(kind.rows).map_err(err)?;
    let mut slots = w.open_table(kind.slots).map_err(err)?;
    for (slot, key) in &doomed {
        let old = table
            .remove(slot.to_be_bytes().as_slice())
            .map_err(err)?
            .map(|o| o.value().to_vec());
        kind.followed(w, *slot, old.as_deref(), None)?;
        slots.remove(key.as_slice()).map_err(err)?;
    }
    Ok(Removed {
        kind,
        keys: doomed.into_iter().map(|(_, k)| k).collect(),
    })
}

/// What [`rekey`] moved in the index, for [`Rekeyed::apply`] once its transaction
/// has committed.
#[must_use]
pub(super) struct Rekeyed {
    kind: Entities,
    moved: Vec<(Vec<u8>, Vec<u8>, u64)>,
}

impl Rekeyed {
    /// Moves the memory part of the index to the new keys.
    pub(super) fn apply(self, index: &Index) -> Result<(), StoreError> {
        let mut recent = index.recent.lock().map_err(err)?;
        let map = &mut recent[self.kind.id];
        for (old, new, slot) in self.moved {
            if map.remove(&old).is_some() {
                map.insert(new, slot);
            }
        }
        Ok(())
    }
}

/// The slot of an entity, wherever its index entry is (memory or table), within a
/// write transaction.
pub(super) fn slot_in(
    w: &WriteTransaction,
    index: &Index,
    kind: Entities,
    key: &[u8],
) -> Result<Option<u64>, StoreError> {
    let (held, _) = index.slots(kind, std::iter::once(&key.to_vec()))?;
    let slots = w.open_table(kind.slots).map_err(err)?;
    find(held[0], &slots, key)
}

/// An entity given a new key: its old key, new key, slot and new row.
pub(super) type Move = (Vec<u8>, Vec<u8>, u64, Vec<u8>);

/// Gives entities new keys, each keeping its slot, with its new row. A new key that already names another entity is refused (the
/// caller's keys are fresh, so it would be a store written by two writers at once).
pub(super) fn rekey(
    w: &WriteTransaction,
    index: &Index,
    kind: Entities,
    moves: Vec<Move>,
) -> Result<Rekeyed, StoreError> {
    let mut moved = Vec::with_capacity(moves.len());
    for (old, new, slot, row) in moves {
        if slot_in(w, index, kind, &new)?.is_some() {
            return Err(StoreError::Refused(format!(
                "{}: the new key of slot {slot} already names an entity",
                kind.mark
            )));
        }
        let mut slots = w.open_table(kind.slots).map_err(err)?;
        if slots.remove(old.as_slice()).map_err(err)?.is_some() {
            slots
                .insert(new.as_slice(), slot.to_be_bytes().as_slice())
                .map_err(err)?;
        }
        let mut rows = w.open_table(kind.rows).map_err(err)?;
        let replaced = rows
            .insert(slot.to_be_bytes().as_slice(), row.as_slice())
            .map_err(err)?
            .map(|o| o.value().to_vec());
        kind.followed(w, slot, replaced.as_deref(), Some(&row))?;
        moved.push((old, new, slot));
    }
    Ok(Rekeyed { kind, moved })
}

/// An entity joining another: its key and slot, the other's key and slot, and their
/// joint row (under the other's key).
pub(super) type Join = (Vec<u8>, u64, Vec<u8>, u64, Vec<u8>);

/// What [`merge`] changed in the index, for [`Merged::apply`] once its transaction
/// has committed.
#[must_use]
pub(super) struct Merged {
    kind: Entities,
    /// The key that left, the joint key, the joint slot.
    joined: Vec<(Vec<u8>, Vec<u8>, u64)>,
}

impl Merged {
    /// Drops the keys that left from the memory part of the index, and points the
    /// joint key at the joint slot when the entity of that slot had its entry there.
    pub(super) fn apply(self, index: &Index) -> Result<(), StoreError> {
        let mut recent = index.recent.lock().map_err(err)?;
        let map = &mut recent[self.kind.id];
        for (old, new, slot) in self.joined {
            let (a, b) = (map.remove(&old), map.remove(&new));
            if a == Some(slot) || b == Some(slot) {
                map.insert(new, slot);
            }
        }
        Ok(())
    }
}

/// Joins entities to others (each `Join`: an entity whose new key already names
/// another): the joint entity keeps the other's key and the newer of the two slots,
/// with the joint row; the older row and the leaving key's entry go. The older row
/// is never the table's newest, so no slot is given twice.
pub(super) fn merge(
    w: &WriteTransaction,
    kind: Entities,
    joins: Vec<Join>,
) -> Result<Merged, StoreError> {
    let mut joined = Vec::with_capacity(joins.len());
    for (old, old_slot, new, slot, row) in joins {
        let (keep, gone) = (old_slot.max(slot), old_slot.min(slot));
        if keep == gone {
            return Err(super::corrupt(format!(
                "{}: two keys of slot {keep}",
                kind.mark
            )));
        }
        let mut slots = w.open_table(kind.slots).map_err(err)?;
        let mut in_table = false;
        for k in [&old, &new] {
            let removed = slots.remove(k.as_slice()).map_err(err)?;
            if let Some(s) = removed.map(|s| slot_of(s.value())).transpose()? {
                in_table |= s == keep;
            }
        }
        if in_table {
            slots
                .insert(new.as_slice(), keep.to_be_bytes().as_slice())
                .map_err(err)?;
        }
        let mut rows = w.open_table(kind.rows).map_err(err)?;
        let left = rows
            .remove(gone.to_be_bytes().as_slice())
            .map_err(err)?
            .map(|o| o.value().to_vec());
        kind.followed(w, gone, left.as_deref(), None)?;
        let replaced = rows
            .insert(keep.to_be_bytes().as_slice(), row.as_slice())
            .map_err(err)?
            .map(|o| o.value().to_vec());
        kind.followed(w, keep, replaced.as_deref(), Some(&row))?;
        joined.push((old, new, keep));
    }
    Ok(Merged { kind, joined })
}

/// Replaces the rows of these slots (the entities keep their keys).
pub(super) fn rewrite(
    w: &WriteTransaction,
    kind: Entities,
    rows: &[(u64, Vec<u8>)],
) -> Result<(), StoreError> {
    let mut table = w.open_table(kind.rows).map_err(err)?;
    for (slot, row) in rows {
        let old = table
            .insert(slot.to_be_bytes().as_slice(), row.as_slice())
            .map_err(err)?
            .map(|o| o.value().to_vec());
        kind.followed(w, *slot, old.as_deref(), Some(row))?;
    }
    Ok(())
}

/// Every row of `kind` for which `f` gives a value, with its slot.
pub(super) fn scan<T>(
    w: &WriteTransaction,
    kind: Entities,
    mut f: impl FnMut(&[u8]) -> Result<Option<T>, StoreError>,
) -> Result<Vec<(u64, T)>, StoreError> {
    let table = w.open_table(kind.rows).map_err(err)?;
    let mut out = Vec::new();
    for row in table.iter().map_err(err)? {
        let (slot, v) = row.map_err(err)?;
        if let Some(t) = f(v.value())? {
            out.push((slot_of(slot.value())?, t));
        }
    }
    Ok(out)
}

/// The rows of the entities with these keys that are stored, read by `f`, each with
/// its key's position in `keys`.
pub(super) fn read<T>(
    db: &redb::Database,
    index: &Index,
    kind: Entities,
    keys: &[Vec<u8>],
    mut f: impl FnMut(usize, &[u8]) -> Result<T, StoreError>,
) -> Result<Vec<T>, StoreError> {
    // Memory first, then the read transaction: an entry the index write moves to the
    // table in between is then in that transaction's view.
    let (in_memory, _) = index.slots(kind, keys.iter())?;
    let r = db.begin_read().map_err(err)?;
    let slots = r.open_table(kind.slots).map_err(err)?;
    let rows = r.open_table(kind.rows).map_err(err)?;
    let mut out = Vec::new();
    for (i, (k, in_memory)) in keys.iter().zip(in_memory).enumerate() {
        let Some(slot) = find(in_memory, &slots, k)? else {
            continue;
        };
        let row = rows.get(slot.to_be_bytes().as_slice()).map_err(err)?;
        let row = match row {
            Some(row) => row,
            None if kind.removable => continue,
            None => {
                return Err(super::corrupt(format!(
                    "{} slot {slot} without its row",
                    kind.mark
                )))
            }
        };
        out.push(f(i, row.value())?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::funnel::{ViewKey, ViewRow};

    fn view(i: u32, version: u32) -> (Vec<u8>, Vec<u8>) {
        let row = ViewRow {
            key: ViewKey {
                ad_id: format!("rm1.c.ad-{i}"),
                video_id: "v".into(),
                tracking_id: format!("{i:08x}-random"),
            },
            campaign_id: "c".into(),
            day: 20_000,
            version,
            milestones: [1, 1, 0, 0, 0, 0],
            controls: [0; 5],
            funnel_gaps: 0,
            repeated_milestones: 0,
            ad_id_status: Default::default(),
            served_repeat: false,
        };
        (
            super::super::key(&row.key),
            super::super::view_val(&row, &[]),
        )
    }

    fn write(
        db: &redb::Database,
        index: &Index,
        mut rows: Vec<(Vec<u8>, Vec<u8>)>,
        to_table: bool,
    ) {
        rows.sort();
        let w = db.begin_write().expect("write");
        create(&w).expect("create");
        let u = upsert(&w, index, VIEWS, &rows, to_table).expect("upsert");
        w.commit().expect("commit");
        u.apply(index).expect("apply");
    }

    /// Every stored view, read back by key, as `(key position, row)`.
    fn read_all(db: &redb::Database, index: &Index, n: u32) -> Vec<(usize, Vec<u8>)> {
        let keys: Vec<Vec<u8>> = (0..n).map(|i| view(i, 0).0).collect();
        read(db, index, VIEWS, &keys, |i, row| Ok((i, row.to_vec()))).expect("read")
    }

    fn rows_in_table(db: &redb::Database) -> Vec<u64> {
        let r = db.begin_read().expect("read");
        let t = r.open_table(VIEWS.rows).expect("rows");
        t.iter()
            .expect("iter")
            .map(|row| slot_of(row.expect("row").0.value()).expect("slot"))
            .collect()
    }

    /// The oldest entities go while the predicate says so, never the newest row (its
    /// slot sets the next one), and the index forgets them wherever their entry was:
    /// a read finds neither them nor an error, the rest as before, also after a
    /// restart; new entities take fresh slots.
    #[test]
    fn removed_entities_leave_no_trace_and_slots_are_never_given_twice() {
        let served = |i: u32| -> (Vec<u8>, Vec<u8>) {
            let ad = format!("ad-{i}");
            (
                super::super::key(&ad),
                super::super::codec::served_val(&ad, &crate::model::served::ServedAd::default()),
            )
        };
        let dir = tempfile::tempdir().expect("tempdir");
        let db = redb::Database::create(dir.path().join("s.redb")).expect("db");
        let index = Index::default();
        let put = |index: &Index, rows: Vec<(Vec<u8>, Vec<u8>)>, to_table: bool| {
            let w = db.begin_write().expect("write");
            create(&w).expect("create");
            let u = upsert(&w, index, SERVED, &rows, to_table).expect("upsert");
            w.commit().expect("commit");
            u.apply(index).expect("apply");
        };
        // Ads 0-4 with their index entries in the table, 5-7 in memory.
        put(&index, (0..5).map(served).collect(), true);
        put(&index, (5..8).map(served).collect(), false);
        let below = |n: u32| {
            move |row: &[u8]| -> Result<bool, StoreError> {
                let (ad, _) = super::super::codec::parse_served(row)?;
                Ok(ad["ad-".len()..].parse::<u32>().expect("n") < n)
            }
        };
        let remove = |index: &Index, n: u32, limit: usize| {
            let w = db.begin_write().expect("write");
            let r = remove_oldest(&w, SERVED, limit, below(n)).expect("remove");
            w.commit().expect("commit");
            r.apply(index).expect("apply")
        };
        assert_eq!(remove(&index, 3, 2), 2, "the limit holds");
        assert_eq!(remove(&index, 7, 100), 5, "through the mark, into memory");
        assert_eq!(remove(&index, 100, 100), 0, "never the newest row");
        let found = |index: &Index| -> Vec<usize> {
            let keys: Vec<Vec<u8>> = (0..10).map(|i| served(i).0).collect();
            read(&db, index, SERVED, &keys, |i, _| Ok(i)).expect("read")
        };
        assert_eq!(found(&index), vec![7]);
        let index = Index::recover(&db).expect("recover");
        assert_eq!(found(&index), vec![7], "after a restart");
        put(&index, vec![served(8), served(0)], false);
        assert_eq!(found(&index), vec![0, 7, 8]);
        let r = db.begin_read().expect("read");
        let t = r.open_table(SERVED.rows).expect("rows");
        let slots: Vec<u64> = t
            .iter()
            .expect("iter")
            .map(|row| slot_of(row.expect("row").0.value()).expect("slot"))
            .collect();
        assert_eq!(slots, vec![7, 8, 9], "fresh slots after the newest");
    }

    /// An entity keeps its slot across updates, whether its index entry is in memory,
    /// in the table or read back after a restart; new ones append.
    #[test]
    fn entities_keep_their_slots_wherever_their_index_entry_is() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = redb::Database::create(dir.path().join("s.redb")).expect("db");
        let index = Index::default();
        write(&db, &index, vec![view(5, 1), view(1, 1), view(3, 1)], false);
        assert_eq!(rows_in_table(&db), vec![0, 1, 2]);
        // In memory: view 3 updated in place, view 0 appended.
        write(&db, &index, vec![view(3, 2), view(0, 1)], false);
        assert_eq!(rows_in_table(&db), vec![0, 1, 2, 3]);
        let stored = read_all(&db, &index, 6);
        let found: Vec<usize> = stored.iter().map(|(i, _)| *i).collect();
        assert_eq!(found, vec![0, 1, 3, 5]);
        assert_eq!(stored[2].1, view(3, 2).1);

        // A restart reads the entries back from the rows.
        let index = Index::recover(&db).expect("recover");
        assert_eq!(read_all(&db, &index, 6), stored);
        // The memory part goes to the table with a batch that adds view 2.
        write(&db, &index, vec![view(2, 1), view(1, 2)], true);
        assert!(index.recent.lock().expect("lock")[VIEWS.id].is_empty());
        assert_eq!(rows_in_table(&db), vec![0, 1, 2, 3, 4]);
        let after = read_all(&db, &index, 6);
        assert_eq!(after.len(), 5);
        assert_eq!(after[1].1, view(1, 2).1);
        // Nothing above the mark: a restart holds nothing in memory and finds all.
        let index = Index::recover(&db).expect("recover");
        assert!(index.recent.lock().expect("lock")[VIEWS.id].is_empty());
        assert_eq!(read_all(&db, &index, 6), after);
        write(&db, &index, vec![view(4, 1), view(2, 2)], false);
        assert_eq!(rows_in_table(&db), vec![0, 1, 2, 3, 4, 5]);
        assert_eq!(read_all(&db, &index, 6).len(), 6);
    }
}
