//! Views and carts: rows stored in the order they were first written, found through
//! a slot index.
//!
//! Both are updated in place, and their natural keys start with tracking ids, which
//! are random (the SDK's `crypto.randomUUID()`). Keyed by those, every batch inserted
//! its new entities all over the table and redb rewrote nearly every page of it at
//! each commit. So each entity gets a slot when it is first stored (one more than
//! the table's last) and its row lives under the slot (8 bytes, big-endian): new
//! entities append, and the updates of a batch hit the recent pages they were
//! appended to. The slot index (entity key -> slot) still takes random inserts, but
//! of a few dozen bytes per entity, once. aggbench, 1M records with random session
//! ids, alternating runs in one session: 0.33-0.43x of the consume-only rate with the
//! rows keyed by their tracking ids, 0.38-0.47x with slots (an experiment without the
//! index, which cannot find an entity again, gave 0.60-0.64x: the index's random
//! inserts are most of what is left).
//!
//! Slots are assigned inside the write transaction, so a write that is retried or
//! undone by a crash assigns them again; nothing outside the store ever sees one.

use redb::{ReadOnlyTable, ReadableTable, TableDefinition, WriteTransaction};

use super::{err, StoreError, Table};

/// One kind of entity: its rows by slot and its slot index.
#[derive(Clone, Copy)]
pub(super) struct Entities {
    /// Slot -> the entity's row.
    pub rows: Table,
    /// Entity key -> slot.
    pub slots: Table,
}

pub(super) const VIEWS: Entities = Entities {
    rows: TableDefinition::new("views_v2"),
    slots: TableDefinition::new("view_slots"),
};

pub(super) const CARTS: Entities = Entities {
    rows: TableDefinition::new("carts_v2"),
    slots: TableDefinition::new("cart_slots"),
};

fn slot_of(b: &[u8]) -> Result<u64, StoreError> {
    let bytes: [u8; 8] = b
        .try_into()
        .map_err(|_| super::corrupt(format!("a slot of {} bytes", b.len())))?;
    Ok(u64::from_be_bytes(bytes))
}

/// Writes each `(entity key, row)` over the entity's row, or as a new entity at the
/// next slot.
pub(super) fn upsert(
    w: &WriteTransaction,
    kind: Entities,
    rows: &[(Vec<u8>, Vec<u8>)],
) -> Result<(), StoreError> {
    if rows.is_empty() {
        return Ok(());
    }
    let mut slots = w.open_table(kind.slots).map_err(err)?;
    let mut table = w.open_table(kind.rows).map_err(err)?;
    let mut next = match table.last().map_err(err)? {
        Some((k, _)) => slot_of(k.value())? + 1,
        None => 0,
    };
    let mut placed: Vec<(u64, &[u8])> = Vec::with_capacity(rows.len());
    for (k, v) in rows {
        let found = match slots.get(k.as_slice()).map_err(err)? {
            Some(s) => Some(slot_of(s.value())?),
            None => None,
        };
        let slot = match found {
            Some(s) => s,
            None => {
                let s = next;
                next += 1;
                slots
                    .insert(k.as_slice(), s.to_be_bytes().as_slice())
                    .map_err(err)?;
                s
            }
        };
        placed.push((slot, v));
    }
    placed.sort_unstable_by_key(|p| p.0);
    for (slot, v) in placed {
        table
            .insert(slot.to_be_bytes().as_slice(), v)
            .map_err(err)?;
    }
    Ok(())
}

/// Reads entities' rows by entity key.
pub(super) struct Reader {
    slots: ReadOnlyTable<&'static [u8], &'static [u8]>,
    rows: ReadOnlyTable<&'static [u8], &'static [u8]>,
}

impl Reader {
    pub(super) fn open(r: &redb::ReadTransaction, kind: Entities) -> Result<Self, StoreError> {
        Ok(Self {
            slots: r.open_table(kind.slots).map_err(err)?,
            rows: r.open_table(kind.rows).map_err(err)?,
        })
    }

    /// The row of the entity with this key, if stored; `f` reads it.
    pub(super) fn get<T>(
        &self,
        key: &[u8],
        f: impl FnOnce(&[u8]) -> Result<T, StoreError>,
    ) -> Result<Option<T>, StoreError> {
        let Some(slot) = self.slots.get(key).map_err(err)? else {
            return Ok(None);
        };
        let slot = slot.value().to_vec();
        match self.rows.get(slot.as_slice()).map_err(err)? {
            Some(row) => f(row.value()).map(Some),
            None => Err(super::corrupt("a slot without its row")),
        }
    }
}
