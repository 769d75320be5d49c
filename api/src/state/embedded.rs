//! The embedded state backend: one redb file, one table per namespace, every write
//! its own durable transaction, run on the blocking pool.

use std::path::Path;
use std::sync::Arc;

use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};

use super::{KvStore, Ns, StateError};

fn table(ns: Ns) -> TableDefinition<'static, &'static str, &'static [u8]> {
    TableDefinition::new(ns.name())
}

fn backend(e: impl std::fmt::Display) -> StateError {
    StateError::Backend(e.to_string())
}

/// The redb state.
#[derive(Clone)]
pub struct EmbeddedKv {
    db: Arc<Database>,
}

impl EmbeddedKv {
    /// Opens (creating) the file at `path` and its tables.
    pub fn open(path: &Path) -> Result<EmbeddedKv, StateError> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| backend(format!("creating {}: {e}", dir.display())))?;
        }
        let db = Database::create(path).map_err(|e| {
            backend(format!(
                "opening {}: {e} (is another retail-media process using this data dir?)",
                path.display()
            ))
        })?;
        let tx = db.begin_write().map_err(backend)?;
        for ns in Ns::ALL {
            tx.open_table(table(ns)).map_err(backend)?;
        }
        tx.commit().map_err(backend)?;
        Ok(EmbeddedKv { db: Arc::new(db) })
    }

    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Database) -> Result<T, StateError> + Send + 'static,
    ) -> Result<T, StateError> {
        let db = Arc::clone(&self.db);
        tokio::task::spawn_blocking(move || f(&db))
            .await
            .map_err(|e| backend(format!("state task failed: {e}")))?
    }

    fn write<T>(
        db: &Database,
        ns: Ns,
        f: impl FnOnce(&mut redb::Table<'_, &'static str, &'static [u8]>) -> Result<T, StateError>,
    ) -> Result<T, StateError> {
        let tx = db.begin_write().map_err(backend)?;
        let out = {
            let mut t = tx.open_table(table(ns)).map_err(backend)?;
            f(&mut t)?
        };
        tx.commit().map_err(backend)?;
        Ok(out)
    }
}

impl KvStore for EmbeddedKv {
    async fn get(&self, ns: Ns, key: &str) -> Result<Option<Vec<u8>>, StateError> {
        let key = key.to_owned();
        self.blocking(move |db| {
            let tx = db.begin_read().map_err(backend)?;
            let t = tx.open_table(table(ns)).map_err(backend)?;
            Ok(t.get(key.as_str())
                .map_err(backend)?
                .map(|v| v.value().to_vec()))
        })
        .await
    }

    async fn put(&self, ns: Ns, key: &str, value: Vec<u8>) -> Result<(), StateError> {
        let key = key.to_owned();
        self.blocking(move |db| {
            Self::write(db, ns, |t| {
                t.insert(key.as_str(), value.as_slice()).map_err(backend)?;
                Ok(())
            })
        })
        .await
    }

    async fn insert_new(&self, ns: Ns, key: &str, value: Vec<u8>) -> Result<bool, StateError> {
        let key = key.to_owned();
        self.blocking(move |db| {
            Self::write(db, ns, |t| {
                if t.get(key.as_str()).map_err(backend)?.is_some() {
                    return Ok(false);
                }
                t.insert(key.as_str(), value.as_slice()).map_err(backend)?;
                Ok(true)
            })
        })
        .await
    }

    async fn remove(&self, ns: Ns, key: &str) -> Result<bool, StateError> {
        let key = key.to_owned();
        self.blocking(move |db| {
            Self::write(db, ns, |t| {
                Ok(t.remove(key.as_str()).map_err(backend)?.is_some())
            })
        })
        .await
    }

    async fn scan(&self, ns: Ns) -> Result<Vec<(String, Vec<u8>)>, StateError> {
        self.blocking(move |db| {
            let tx = db.begin_read().map_err(backend)?;
            let t = tx.open_table(table(ns)).map_err(backend)?;
            let mut out = Vec::new();
            for row in t.iter().map_err(backend)? {
                let (k, v) = row.map_err(backend)?;
                out.push((k.value().to_owned(), v.value().to_vec()));
            }
            Ok(out)
        })
        .await
    }

    async fn put_many(&self, ns: Ns, entries: Vec<(String, Vec<u8>)>) -> Result<(), StateError> {
        self.blocking(move |db| {
            Self::write(db, ns, |t| {
                for (k, v) in &entries {
                    t.insert(k.as_str(), v.as_slice()).map_err(backend)?;
                }
                Ok(())
            })
        })
        .await
    }

    fn readiness(&self) -> Result<(), String> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn operations_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.redb");
        {
            let kv = EmbeddedKv::open(&path).unwrap();
            assert!(kv
                .insert_new(Ns::Segments, "a", b"1".to_vec())
                .await
                .unwrap());
            assert!(!kv
                .insert_new(Ns::Segments, "a", b"2".to_vec())
                .await
                .unwrap());
            kv.put(Ns::Segments, "b", b"3".to_vec()).await.unwrap();
            assert!(kv.remove(Ns::Segments, "b").await.unwrap());
            assert!(!kv.remove(Ns::Segments, "b").await.unwrap());
            kv.put(Ns::Clients, "c", b"4".to_vec()).await.unwrap();
        }
        let kv = EmbeddedKv::open(&path).unwrap();
        assert_eq!(
            kv.get(Ns::Segments, "a").await.unwrap(),
            Some(b"1".to_vec())
        );
        assert_eq!(kv.get(Ns::Segments, "b").await.unwrap(), None);
        assert_eq!(
            kv.scan(Ns::Clients).await.unwrap(),
            vec![("c".to_owned(), b"4".to_vec())]
        );
    }
}
