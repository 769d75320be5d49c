//! The PostgreSQL state backend, so several api instances can serve one deployment.
//!
//! One table, `api_state(ns, key, value)`, created at connect; keys collate as `"C"`
//! so scans come back in the byte order of their UTF-8, like redb's. `insert_new` is
//! one `INSERT .. ON CONFLICT DO NOTHING`, `put_many` one statement over arrays, so no
//! operation needs a transaction and a connection can pipeline concurrent calls.
//!
//! A few connections ([`POOL_SIZE`]), each reopened on its next use once it has
//! closed (the server restarted, the network dropped it). A background probe
//! (`SELECT 1` each [`PROBE_EVERY`]) keeps [`KvStore::readiness`] current while the
//! api is idle, and brings it back when the server returns. While the server is
//! away every call fails with [`StateError::Backend`], which the api answers 503.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex as StdMutex, Weak};
use std::time::Duration;

use tokio::sync::Mutex;
use tokio_postgres::{Client, Config, NoTls, Statement};

use super::{KvStore, Ns, StateError};

/// Connections kept open per api instance.
pub const POOL_SIZE: usize = 4;
/// How often the background probe checks the server.
pub const PROBE_EVERY: Duration = Duration::from_secs(1);
/// Longest wait for a connection to open (unless the URL sets `connect_timeout`).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest wait for one operation before it fails.
const OP_TIMEOUT: Duration = Duration::from_secs(10);
/// Serialises concurrent `CREATE TABLE IF NOT EXISTS` of instances starting together
/// (PostgreSQL can otherwise fail one of them on `pg_type`'s unique index).
const SCHEMA_LOCK: i64 = 0x726d_5f61_7069; // "rm_api"

const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS api_state (
    ns text NOT NULL,
    key text COLLATE \"C\" NOT NULL,
    value bytea NOT NULL,
    PRIMARY KEY (ns, key)
)";

/// One open connection with its prepared statements.
struct Conn {
    client: Client,
    get: Statement,
    put: Statement,
    insert_new: Statement,
    remove: Statement,
    scan: Statement,
    put_many: Statement,
}

struct Inner {
    config: Config,
    slots: Vec<Mutex<Option<Arc<Conn>>>>,
    next: AtomicUsize,
    ready: Arc<AtomicBool>,
    last_error: Arc<StdMutex<String>>,
}

/// The PostgreSQL state.
#[derive(Clone)]
pub struct PostgresKv {
    inner: Arc<Inner>,
}

fn backend(e: impl std::fmt::Display) -> StateError {
    StateError::Backend(format!("postgres: {e}"))
}

/// The error with its causes (tokio-postgres shows the server's message only as a
/// source: "db error: FATAL: password authentication failed ...").
fn describe(e: &tokio_postgres::Error) -> String {
    let mut out = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        out.push_str(": ");
        out.push_str(&c.to_string());
        cause = c.source();
    }
    out
}

/// A NUL cannot be stored in a PostgreSQL `text`; such a key is never present.
fn storable(key: &str) -> bool {
    !key.contains('\0')
}

/// The entries of a batch as key and value arrays, each key once with its last value
/// (one statement may not touch a row twice), in key order.
fn last_wins(entries: Vec<(String, Vec<u8>)>) -> (Vec<String>, Vec<Vec<u8>>) {
    entries
        .into_iter()
        .collect::<BTreeMap<_, _>>()
        .into_iter()
        .unzip()
}

fn nul_key(ns: Ns) -> StateError {
    StateError::Backend(format!(
        "postgres: a key of {} contains NUL, which PostgreSQL text cannot hold",
        ns.name()
    ))
}

impl PostgresKv {
    /// Connects to the database at `url` (`postgres://user:password@host:port/db`,
    /// or key=value form), creating the table if it is missing. Fails when the
    /// server does not answer: a misconfigured api should not start.
    pub async fn connect(url: &str) -> Result<PostgresKv, StateError> {
        let mut config: Config = url
            .parse()
            .map_err(|e| backend(format!("the database URL does not parse: {}", describe(&e))))?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name("retail-media-api");
        }
        let inner = Arc::new(Inner {
            config,
            slots: (0..POOL_SIZE).map(|_| Mutex::new(None)).collect(),
            next: AtomicUsize::new(0),
            ready: Arc::new(AtomicBool::new(false)),
            last_error: Arc::new(StdMutex::new("not connected yet".to_owned())),
        });
        inner.create_schema().await?;
        // Open one pooled connection now, so a bad URL or password fails here.
        inner.conn().await?;
        inner.ready.store(true, Ordering::Release);
        tokio::spawn(probe(Arc::downgrade(&inner)));
        Ok(PostgresKv { inner })
    }

    /// Runs `f` on a pooled connection within [`OP_TIMEOUT`], keeping readiness current.
    async fn run<T, F>(&self, what: &str, f: impl FnOnce(Arc<Conn>) -> F) -> Result<T, StateError>
    where
        F: std::future::Future<Output = Result<T, tokio_postgres::Error>>,
    {
        let inner = &self.inner;
        let conn = inner.conn().await?;
        match tokio::time::timeout(OP_TIMEOUT, f(conn)).await {
            Ok(Ok(v)) => {
                inner.ready.store(true, Ordering::Release);
                Ok(v)
            }
            Ok(Err(e)) => {
                let e_text = describe(&e);
                // No SQLSTATE: the connection failed, not the statement.
                if e.code().is_none() {
                    inner.not_ready(&e_text);
                }
                Err(backend(format!("{what}: {e_text}")))
            }
            Err(_) => {
                let e = format!("{what}: no answer within {OP_TIMEOUT:?}");
                inner.not_ready(&e);
                Err(backend(e))
            }
        }
    }
}

impl Inner {
    fn not_ready(&self, e: &dyn std::fmt::Display) {
        self.ready.store(false, Ordering::Release);
        if let Ok(mut last) = self.last_error.lock() {
            *last = e.to_string();
        }
    }

    /// Opens a connection and spawns its driver task.
    async fn open_client(&self) -> Result<Client, StateError> {
        let (client, connection) = match self.config.connect(NoTls).await {
            Ok(c) => c,
            Err(e) => {
                let e = describe(&e);
                self.not_ready(&e);
                return Err(backend(format!("connecting: {e}")));
            }
        };
        let (ready, last_error) = (Arc::clone(&self.ready), Arc::clone(&self.last_error));
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                let e = describe(&e);
                tracing::warn!(error = %e, "postgres connection closed");
                ready.store(false, Ordering::Release);
                if let Ok(mut last) = last_error.lock() {
                    *last = e;
                }
            }
        });
        Ok(client)
    }

    async fn create_schema(&self) -> Result<(), StateError> {
        let client = self.open_client().await?;
        let sql = format!("BEGIN; SELECT pg_advisory_xact_lock({SCHEMA_LOCK}); {SCHEMA}; COMMIT;");
        match tokio::time::timeout(OP_TIMEOUT, client.batch_execute(&sql)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(backend(format!(
                "creating the table api_state: {}",
                describe(&e)
            ))),
            Err(_) => Err(backend("creating the table api_state: no answer")),
        }
    }

    async fn open(&self) -> Result<Conn, StateError> {
        let client = self.open_client().await?;
        let prepared = async {
            tokio::try_join!(
                client.prepare("SELECT value FROM api_state WHERE ns = $1 AND key = $2"),
                client.prepare(
                    "INSERT INTO api_state (ns, key, value) VALUES ($1, $2, $3) \
                     ON CONFLICT (ns, key) DO UPDATE SET value = excluded.value"
                ),
                client.prepare(
                    "INSERT INTO api_state (ns, key, value) VALUES ($1, $2, $3) \
                     ON CONFLICT (ns, key) DO NOTHING"
                ),
                client.prepare("DELETE FROM api_state WHERE ns = $1 AND key = $2"),
                client.prepare(
                    "SELECT key, value FROM api_state WHERE ns = $1 ORDER BY key COLLATE \"C\""
                ),
                client.prepare(
                    "INSERT INTO api_state (ns, key, value) \
                     SELECT $1, k, v FROM unnest($2::text[], $3::bytea[]) AS t(k, v) \
                     ON CONFLICT (ns, key) DO UPDATE SET value = excluded.value"
                ),
            )
        };
        let (get, put, insert_new, remove, scan, put_many) =
            match tokio::time::timeout(OP_TIMEOUT, prepared).await {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => {
                    return Err(backend(format!("preparing statements: {}", describe(&e))))
                }
                Err(_) => return Err(backend("preparing statements: no answer")),
            };
        Ok(Conn {
            client,
            get,
            put,
            insert_new,
            remove,
            scan,
            put_many,
        })
    }

    /// A pooled connection, reopened if it has closed.
    async fn conn(&self) -> Result<Arc<Conn>, StateError> {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.slots.len();
        let mut slot = self.slots[i].lock().await;
        if let Some(c) = slot.as_ref().filter(|c| !c.client.is_closed()) {
            return Ok(Arc::clone(c));
        }
        *slot = None;
        let c = Arc::new(self.open().await?);
        *slot = Some(Arc::clone(&c));
        Ok(c)
    }

    /// Forgets every pooled connection (after a failed probe: they may hang).
    fn drop_connections(&self) {
        for slot in &self.slots {
            if let Ok(mut s) = slot.try_lock() {
                *s = None;
            }
        }
    }
}

/// Probes the server every [`PROBE_EVERY`] until the store is dropped.
async fn probe(inner: Weak<Inner>) {
    loop {
        tokio::time::sleep(PROBE_EVERY).await;
        let Some(inner) = inner.upgrade() else { return };
        let answer = async {
            let c = inner.conn().await?;
            c.client
                .simple_query("SELECT 1")
                .await
                .map_err(|e| backend(describe(&e)))?;
            Ok::<(), StateError>(())
        };
        match tokio::time::timeout(OP_TIMEOUT, answer).await {
            Ok(Ok(())) => inner.ready.store(true, Ordering::Release),
            Ok(Err(e)) => {
                inner.not_ready(&e);
                inner.drop_connections();
            }
            Err(_) => {
                inner.not_ready(&"the server does not answer");
                inner.drop_connections();
            }
        }
    }
}

impl KvStore for PostgresKv {
    async fn get(&self, ns: Ns, key: &str) -> Result<Option<Vec<u8>>, StateError> {
        if !storable(key) {
            return Ok(None);
        }
        self.run("get", |c| async move {
            let row = c.client.query_opt(&c.get, &[&ns.name(), &key]).await?;
            row.map(|r| r.try_get::<_, Vec<u8>>(0)).transpose()
        })
        .await
    }

    async fn put(&self, ns: Ns, key: &str, value: Vec<u8>) -> Result<(), StateError> {
        if !storable(key) {
            return Err(nul_key(ns));
        }
        self.run("put", |c| async move {
            c.client
                .execute(&c.put, &[&ns.name(), &key, &value])
                .await
                .map(|_| ())
        })
        .await
    }

    async fn insert_new(&self, ns: Ns, key: &str, value: Vec<u8>) -> Result<bool, StateError> {
        if !storable(key) {
            return Err(nul_key(ns));
        }
        self.run("insert", |c| async move {
            let n = c
                .client
                .execute(&c.insert_new, &[&ns.name(), &key, &value])
                .await?;
            Ok(n == 1)
        })
        .await
    }

    async fn remove(&self, ns: Ns, key: &str) -> Result<bool, StateError> {
        if !storable(key) {
            return Ok(false);
        }
        self.run("remove", |c| async move {
            let n = c.client.execute(&c.remove, &[&ns.name(), &key]).await?;
            Ok(n == 1)
        })
        .await
    }

    async fn scan(&self, ns: Ns) -> Result<Vec<(String, Vec<u8>)>, StateError> {
        self.run("scan", |c| async move {
            c.client
                .query(&c.scan, &[&ns.name()])
                .await?
                .iter()
                .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
                .collect()
        })
        .await
    }

    async fn put_many(&self, ns: Ns, entries: Vec<(String, Vec<u8>)>) -> Result<(), StateError> {
        if entries.iter().any(|(k, _)| !storable(k)) {
            return Err(nul_key(ns));
        }
        let (keys, values) = last_wins(entries);
        if keys.is_empty() {
            return Ok(());
        }
        self.run("put_many", |c| async move {
            c.client
                .execute(&c.put_many, &[&ns.name(), &keys, &values])
                .await
                .map(|_| ())
        })
        .await
    }

    fn readiness(&self) -> Result<(), String> {
        if self.inner.ready.load(Ordering::Acquire) {
            return Ok(());
        }
        let last = self
            .inner
            .last_error
            .lock()
            .map(|s| s.clone())
            .unwrap_or_default();
        Err(format!("postgres state store unavailable: {last}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn a_batch_keeps_each_key_once_with_its_last_value(
            entries in prop::collection::vec(("[a-c]{0,2}", prop::collection::vec(any::<u8>(), 0..3)), 0..20)
        ) {
            let (keys, values) = last_wins(entries.clone());
            prop_assert_eq!(keys.len(), values.len());
            prop_assert!(keys.windows(2).all(|w| w[0] < w[1]));
            for (k, v) in keys.iter().zip(&values) {
                let last = entries.iter().rev().find(|(ek, _)| ek == k).map(|(_, ev)| ev);
                prop_assert_eq!(Some(v), last);
            }
            for (k, _) in &entries {
                prop_assert!(keys.contains(k));
            }
        }
    }

    #[tokio::test]
    async fn a_bad_url_is_a_clear_error() {
        let Err(e) = PostgresKv::connect("postgres://u@h:notaport/db").await else {
            panic!("connected with a bad URL");
        };
        assert!(e.to_string().contains("does not parse"), "{e}");
    }

    #[tokio::test]
    async fn an_absent_server_fails_connect_with_a_backend_error() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .unwrap_or(1);
        let url = format!("postgres://u:p@127.0.0.1:{port}/db?connect_timeout=2");
        match PostgresKv::connect(&url).await {
            Err(StateError::Backend(m)) => assert!(m.contains("connecting"), "{m}"),
            Err(e) => panic!("wrong error: {e}"),
            Ok(_) => panic!("connected to nothing"),
        }
    }

    #[test]
    fn nul_keys_are_refused_clearly() {
        assert!(storable("a\u{1f}b"));
        assert!(!storable("a\0b"));
        assert!(nul_key(Ns::Segments).to_string().contains("segments"));
    }
}
