//! The embedded log's small durable state: a tiny redb database `offsets.redb` in the
//! log directory, kept only for what changes rarely and must change atomically.
//!
//! - `__consumer_offsets`: `"group/topic"` -> next offset the group will read (the
//!   same table and keys as the previous format, copied over by the migration).
//! - `__log_start`: topic -> the first offset retention keeps. Retention removes whole
//!   group commits logically by raising it, then deletes the segment files wholly
//!   below it; a reopened log never shows a record below it.
//! - `__log_meta`: `"migrating"` -> 1 once a conversion of an `events.redb` began,
//!   `"migrated"` -> 1 once it completed (see [`super::migrate`]).
//!
//! Each write is one redb transaction with `Durability::Immediate` (fsync). redb
//! also locks the file: a second open of the same log fails until the first handle
//! is dropped, which is how the segment files are protected from two writers.

use std::path::Path;

use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};

use super::unavailable;
use crate::LogError;

/// Consumer offsets: `"group/topic"` -> next offset.
const OFFSETS: TableDefinition<&str, u64> = TableDefinition::new("__consumer_offsets");
/// Topic -> first retained offset.
const STARTS: TableDefinition<&str, u64> = TableDefinition::new("__log_start");
/// Markers.
const META: TableDefinition<&str, u64> = TableDefinition::new("__log_meta");
const MIGRATED: &str = "migrated";
const MIGRATING: &str = "migrating";

/// The state database.
pub(crate) struct State {
    db: Database,
}

/// The `__consumer_offsets` key of `group` on `topic`.
pub(crate) fn offset_key(group: &str, topic: &str) -> String {
    format!("{group}/{topic}")
}

impl State {
    /// Opens (or creates) the state of the log directory `dir`; fails while another
    /// handle has it open.
    pub(crate) fn open(dir: &Path) -> Result<Self, LogError> {
        let path = dir.join("offsets.redb");
        let db =
            Database::create(&path).map_err(|e| unavailable(format!("{}: {e}", path.display())))?;
        let w = db.begin_write().map_err(unavailable)?;
        w.open_table(OFFSETS).map_err(unavailable)?;
        w.open_table(STARTS).map_err(unavailable)?;
        w.open_table(META).map_err(unavailable)?;
        w.commit().map_err(unavailable)?;
        Ok(Self { db })
    }

    fn get(&self, table: TableDefinition<&str, u64>, key: &str) -> Result<Option<u64>, LogError> {
        let r = self.db.begin_read().map_err(unavailable)?;
        let t = r.open_table(table).map_err(unavailable)?;
        Ok(t.get(key).map_err(unavailable)?.map(|v| v.value()))
    }

    /// The next offset `group` reads on `topic` (0 when it never committed).
    pub(crate) fn committed(&self, group: &str, topic: &str) -> Result<u64, LogError> {
        Ok(self.get(OFFSETS, &offset_key(group, topic))?.unwrap_or(0))
    }

    /// Durably stores the next offset `group` reads on `topic`.
    pub(crate) fn commit(&self, group: &str, topic: &str, next: u64) -> Result<(), LogError> {
        self.put(&[(OFFSETS, offset_key(group, topic), next)])
    }

    /// The number of groups committed on `topic` and their lowest next offset.
    pub(crate) fn consumer_floor(&self, topic: &str) -> Result<(usize, Option<u64>), LogError> {
        let suffix = format!("/{topic}");
        let r = self.db.begin_read().map_err(unavailable)?;
        let t = r.open_table(OFFSETS).map_err(unavailable)?;
        let mut groups = 0;
        let mut floor: Option<u64> = None;
        for row in t.iter().map_err(unavailable)? {
            let (k, v) = row.map_err(unavailable)?;
            if k.value().ends_with(&suffix) {
                groups += 1;
                floor = Some(floor.map_or(v.value(), |f| f.min(v.value())));
            }
        }
        Ok((groups, floor))
    }

    /// The first retained offset of `topic` retention recorded, if any.
    pub(crate) fn start(&self, topic: &str) -> Result<Option<u64>, LogError> {
        self.get(STARTS, topic)
    }

    /// Durably records new first retained offsets.
    pub(crate) fn set_starts(&self, starts: &[(String, u64)]) -> Result<(), LogError> {
        let rows: Vec<_> = starts
            .iter()
            .map(|(t, s)| (STARTS, t.clone(), *s))
            .collect();
        self.put(&rows)
    }

    /// True once an `events.redb` was converted into this log.
    pub(crate) fn migrated(&self) -> Result<bool, LogError> {
        Ok(self.get(META, MIGRATED)?.is_some())
    }

    /// True once a conversion began (its partial segment files may be removed).
    pub(crate) fn migrating(&self) -> Result<bool, LogError> {
        Ok(self.get(META, MIGRATING)?.is_some())
    }

    /// Records that a conversion begins.
    pub(crate) fn begin_migration(&self) -> Result<(), LogError> {
        self.put(&[(META, MIGRATING.to_owned(), 1)])
    }

    /// Writes, in one transaction, the consumer offsets and first offsets a converted
    /// log carries over and the marker that the conversion is complete.
    pub(crate) fn finish_migration(
        &self,
        offsets: &[(String, u64)],
        starts: &[(String, u64)],
    ) -> Result<(), LogError> {
        let mut rows: Vec<_> = offsets
            .iter()
            .map(|(k, v)| (OFFSETS, k.clone(), *v))
            .collect();
        rows.extend(starts.iter().map(|(k, v)| (STARTS, k.clone(), *v)));
        rows.push((META, MIGRATED.to_owned(), 1));
        self.put(&rows)
    }

    fn put(&self, rows: &[(TableDefinition<&str, u64>, String, u64)]) -> Result<(), LogError> {
        let w = self.db.begin_write().map_err(unavailable)?;
        for (table, key, value) in rows {
            w.open_table(*table)
                .map_err(unavailable)?
                .insert(key.as_str(), *value)
                .map_err(unavailable)?;
        }
        w.commit().map_err(unavailable)
    }
}
