//! The api's state, one suite for every backend: the key-value contract (get, put,
//! atomic `insert_new` under 20 concurrent callers, remove, byte-ordered scans,
//! `put_many`) and the typed [`State`] operations run against embedded redb always and
//! against PostgreSQL when `RM_API_DATABASE_URL` is set (`deploy/local/up.sh` starts
//! one); each PostgreSQL test gets a database of its own, dropped after it.
//!
//! PostgreSQL only: two handles on one database share writes and race fairly; a
//! server restart through `up.sh postgres-stop`/`postgres-start` turns calls into
//! `StateError::Backend` and the api's answers into 503, then both recover; two
//! `retail-media api` processes on one database share segments, tokens and orders.

#![allow(clippy::unwrap_used, missing_docs)]

use crate::common;

use base64::Engine as _;
use std::net::SocketAddr;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{send, HttpResponse, Service};
use rm_ads::model::campaign::BannerXCampaign;
use rm_ads::model::catalog::Product;
use rm_api::model::segment::Segment;
use rm_api::state::embedded::EmbeddedKv;
use rm_api::state::postgres::PostgresKv;
use rm_api::state::{AnyKv, KvStore, Ns, State, StateError, StoredSigningKey};
use rm_auth::client::{ApiKey, Client, Scope};
use serde_json::{json, Value};

/// Tests that use the shared server hold this for reading; the restart test holds it
/// for writing, so it never pulls the server from under another test.
static SERVER: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

const UP_SH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/local/up.sh");

// ---------------------------------------------------------------------------------
// fixtures

/// Runs one SQL statement with psql against `url`.
fn psql(url: &str, sql: &str) -> Result<(), String> {
    let out = Command::new("psql")
        .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", url, "-c", sql])
        .env("PGCONNECT_TIMEOUT", "5")
        .output()
        .map_err(|e| format!("running psql (Debian's postgresql-client): {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "psql {sql:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// `url` with its database replaced by `db` (URL form only).
fn with_database(url: &str, db: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, format!("?{q}")),
        None => (url, String::new()),
    };
    let rest = base
        .strip_prefix("postgres://")
        .or_else(|| base.strip_prefix("postgresql://"))
        .unwrap_or_else(|| panic!("RM_API_DATABASE_URL must be a postgres:// URL for this suite"));
    let host = rest.split_once('/').map_or(rest, |(h, _)| h);
    format!("postgres://{host}/{db}{query}")
}

/// A database of its own for one test, dropped (connections and all) with it.
struct TestDb {
    admin: String,
    name: String,
    url: String,
}

impl TestDb {
    fn create() -> Option<TestDb> {
        static N: AtomicUsize = AtomicUsize::new(0);
        let admin = common::required_setting("RM_API_DATABASE_URL", "PostgreSQL")?;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let name = format!(
            "rm_test_{}_{}_{nanos}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        psql(&admin, &format!("CREATE DATABASE {name}")).unwrap();
        let url = with_database(&admin, &name);
        Some(TestDb { admin, name, url })
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if let Err(e) = psql(
            &self.admin,
            &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name),
        ) {
            eprintln!("could not drop test database {}: {e}", self.name);
        }
    }
}

/// One backend, opened on fresh storage.
enum Fixture {
    Embedded {
        _dir: tempfile::TempDir,
        kv: EmbeddedKv,
    },
    Postgres {
        _db: TestDb,
        kv: PostgresKv,
    },
}

impl Fixture {
    fn embedded() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let kv = EmbeddedKv::open(&dir.path().join("state.redb")).unwrap();
        Fixture::Embedded { _dir: dir, kv }
    }

    async fn postgres() -> Option<Fixture> {
        let db = TestDb::create()?;
        let kv = PostgresKv::connect(&db.url).await.unwrap();
        Some(Fixture::Postgres { _db: db, kv })
    }

    /// A handle on the backend (clones share the storage).
    fn kv(&self) -> AnyKv {
        match self {
            Fixture::Embedded { kv, .. } => AnyKv::Embedded(kv.clone()),
            Fixture::Postgres { kv, .. } => AnyKv::Postgres(kv.clone()),
        }
    }

    fn state(&self) -> State {
        State::new(self.kv())
    }
}

/// Generates one test per case and backend: `embedded::case` and `postgres::case`.
macro_rules! suite {
    ($($case:ident),* $(,)?) => {
        mod embedded {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $case() {
                    super::$case(&super::Fixture::embedded()).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $case() {
                    let _server = super::SERVER.read().await;
                    let Some(f) = super::Fixture::postgres().await else { return };
                    super::$case(&f).await;
                }
            )*
        }
    };
}

suite!(
    kv_get_put_remove,
    kv_namespaces_are_separate,
    kv_insert_new_is_atomic_under_concurrency,
    kv_scan_is_in_byte_order,
    kv_put_many_writes_all_last_wins,
    kv_is_ready,
    state_clients_and_api_keys,
    state_signing_keys_are_insert_once,
    state_segments_and_campaigns,
    state_products_and_orders,
    state_corrupt_values_are_reported,
);

// ---------------------------------------------------------------------------------
// the key-value contract

async fn kv_get_put_remove(f: &Fixture) {
    let kv = f.kv();
    assert_eq!(kv.get(Ns::Segments, "a").await.unwrap(), None);
    kv.put(Ns::Segments, "a", b"1".to_vec()).await.unwrap();
    assert_eq!(
        kv.get(Ns::Segments, "a").await.unwrap(),
        Some(b"1".to_vec())
    );
    kv.put(Ns::Segments, "a", b"2".to_vec()).await.unwrap();
    assert_eq!(
        kv.get(Ns::Segments, "a").await.unwrap(),
        Some(b"2".to_vec())
    );
    // Every byte value survives; an empty value is a value.
    let all: Vec<u8> = (0..=255).collect();
    kv.put(Ns::Segments, "bytes", all.clone()).await.unwrap();
    assert_eq!(kv.get(Ns::Segments, "bytes").await.unwrap(), Some(all));
    kv.put(Ns::Segments, "empty", Vec::new()).await.unwrap();
    assert_eq!(
        kv.get(Ns::Segments, "empty").await.unwrap(),
        Some(Vec::new())
    );
    assert!(kv.remove(Ns::Segments, "a").await.unwrap());
    assert!(!kv.remove(Ns::Segments, "a").await.unwrap());
    assert_eq!(kv.get(Ns::Segments, "a").await.unwrap(), None);
    assert!(!kv.remove(Ns::Segments, "never").await.unwrap());
    // insert_new on a removed key inserts again.
    assert!(kv
        .insert_new(Ns::Segments, "a", b"3".to_vec())
        .await
        .unwrap());
    assert!(!kv
        .insert_new(Ns::Segments, "a", b"4".to_vec())
        .await
        .unwrap());
    assert_eq!(
        kv.get(Ns::Segments, "a").await.unwrap(),
        Some(b"3".to_vec())
    );
}

async fn kv_namespaces_are_separate(f: &Fixture) {
    let kv = f.kv();
    for (i, ns) in Ns::ALL.iter().enumerate() {
        kv.put(*ns, "same-key", vec![i as u8]).await.unwrap();
    }
    for (i, ns) in Ns::ALL.iter().enumerate() {
        assert_eq!(kv.get(*ns, "same-key").await.unwrap(), Some(vec![i as u8]));
        assert_eq!(
            kv.scan(*ns).await.unwrap(),
            vec![("same-key".to_owned(), vec![i as u8])]
        );
    }
    assert!(kv.remove(Ns::Orders, "same-key").await.unwrap());
    assert_eq!(kv.get(Ns::Orders, "same-key").await.unwrap(), None);
    assert_eq!(
        kv.get(Ns::Products, "same-key").await.unwrap(),
        Some(vec![5])
    );
}

async fn kv_insert_new_is_atomic_under_concurrency(f: &Fixture) {
    for round in 0..3 {
        let kv = Arc::new(f.kv());
        let key = format!("order-{round}");
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..20u8 {
            let (kv, key) = (Arc::clone(&kv), key.clone());
            tasks.spawn(async move { (i, kv.insert_new(Ns::Orders, &key, vec![i]).await) });
        }
        let mut winners = Vec::new();
        while let Some(done) = tasks.join_next().await {
            let (i, inserted) = done.unwrap();
            if inserted.unwrap() {
                winners.push(i);
            }
        }
        assert_eq!(winners.len(), 1, "round {round}: winners {winners:?}");
        // The stored value is the winner's.
        assert_eq!(
            kv.get(Ns::Orders, &key).await.unwrap(),
            Some(vec![winners[0]])
        );
    }
}

async fn kv_scan_is_in_byte_order(f: &Fixture) {
    let kv = f.kv();
    assert_eq!(kv.scan(Ns::Campaigns).await.unwrap(), Vec::new());
    let keys = [
        "b",
        "a",
        "B",
        "é",
        "z",
        "a\u{1f}b",
        "a b",
        "ab",
        "",
        "10",
        "9",
        "ü",
        "\u{7f}",
        "Z",
        "a-b",
        "a_b",
        "日本",
        "\u{1f600}",
    ];
    for (i, k) in keys.iter().enumerate() {
        kv.put(Ns::Campaigns, k, vec![i as u8]).await.unwrap();
    }
    kv.put(Ns::Segments, "other", b"x".to_vec()).await.unwrap();
    let mut want: Vec<(String, Vec<u8>)> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| ((*k).to_owned(), vec![i as u8]))
        .collect();
    want.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    assert_eq!(kv.scan(Ns::Campaigns).await.unwrap(), want);
}

async fn kv_put_many_writes_all_last_wins(f: &Fixture) {
    let kv = f.kv();
    kv.put(Ns::Products, "p-000", b"old".to_vec())
        .await
        .unwrap();
    kv.put_many(Ns::Products, Vec::new()).await.unwrap();
    let mut entries: Vec<(String, Vec<u8>)> = (0..500)
        .map(|i| (format!("p-{i:03}"), format!("v{i}").into_bytes()))
        .collect();
    // A key twice in one batch: the later value is the one kept.
    entries.push(("p-007".to_owned(), b"again".to_vec()));
    kv.put_many(Ns::Products, entries).await.unwrap();
    let all = kv.scan(Ns::Products).await.unwrap();
    assert_eq!(all.len(), 500);
    assert_eq!(all[0], ("p-000".to_owned(), b"v0".to_vec()));
    assert_eq!(all[7], ("p-007".to_owned(), b"again".to_vec()));
    assert_eq!(all[499], ("p-499".to_owned(), b"v499".to_vec()));
}

async fn kv_is_ready(f: &Fixture) {
    let kv = f.kv();
    assert_eq!(kv.readiness(), Ok(()));
    assert_eq!(f.state().readiness(), Ok(()));
    let backend = f.state().backend();
    match f {
        Fixture::Embedded { .. } => assert_eq!(backend, "embedded"),
        Fixture::Postgres { .. } => assert_eq!(backend, "postgres"),
    }
}

// ---------------------------------------------------------------------------------
// the typed state

fn client(id: &str, scopes: Vec<Scope>) -> Client {
    Client {
        id: id.to_owned(),
        namespace: "acme".to_owned(),
        secret_hash: format!("hash-of-{id}"),
        scopes,
        created: "2026-11-22T00:00:00Z".to_owned(),
    }
}

fn api_key(name: &str, lookup: &str) -> ApiKey {
    ApiKey {
        name: name.to_owned(),
        key_id: name.to_owned(),
        namespace: "acme".to_owned(),
        lookup: lookup.to_owned(),
        key_hash: format!("hash-{lookup}"),
        created: "2026-11-22T00:00:00Z".to_owned(),
    }
}

async fn state_clients_and_api_keys(f: &Fixture) {
    let s = f.state();
    assert_eq!(s.client("c2").await.unwrap(), None);
    s.put_client(&client("c2", vec![Scope::Ads])).await.unwrap();
    s.put_client(&client("c1", vec![Scope::Admin]))
        .await
        .unwrap();
    s.put_client(&client("c2", vec![Scope::Ads, Scope::Reports]))
        .await
        .unwrap();
    assert_eq!(
        s.client("c2").await.unwrap(),
        Some(client("c2", vec![Scope::Ads, Scope::Reports]))
    );
    let ids: Vec<String> = s
        .clients()
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.id)
        .collect();
    assert_eq!(ids, ["c1", "c2"]);
    assert!(s.remove_client("c1").await.unwrap());
    assert!(!s.remove_client("c1").await.unwrap());
    assert_eq!(s.clients().await.unwrap().len(), 1);

    for (name, lookup) in [("shop", "l1"), ("shop", "l2"), ("pos", "l3")] {
        s.put_api_key(&api_key(name, lookup)).await.unwrap();
    }
    assert_eq!(s.api_key("l2").await.unwrap(), Some(api_key("shop", "l2")));
    assert_eq!(s.remove_api_key("shop").await.unwrap(), 2);
    assert_eq!(s.remove_api_key("shop").await.unwrap(), 0);
    assert_eq!(s.api_keys().await.unwrap(), vec![api_key("pos", "l3")]);
}

async fn state_signing_keys_are_insert_once(f: &Fixture) {
    let s = f.state();
    let k = |kid: &str, seed: &str| StoredSigningKey {
        kid: kid.to_owned(),
        seed: seed.to_owned(),
        created: "2026-11-22T00:00:00Z".to_owned(),
    };
    assert!(s.add_signing_key(&k("k1", "seed-a")).await.unwrap());
    assert!(!s.add_signing_key(&k("k1", "seed-b")).await.unwrap());
    assert!(s.add_signing_key(&k("k2", "seed-c")).await.unwrap());
    assert_eq!(
        s.signing_keys().await.unwrap(),
        vec![k("k1", "seed-a"), k("k2", "seed-c")]
    );
    // Tokens::load on a shared state: every loader ends up with the same signing key.
    let empty = match f {
        Fixture::Embedded { .. } => Fixture::embedded(),
        Fixture::Postgres { .. } => match Fixture::postgres().await {
            Some(p) => p,
            None => return,
        },
    };
    let state = Arc::new(empty.state());
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let state = Arc::clone(&state);
        tasks.spawn(async move {
            let keys = rm_schemas::ad_id::AdIdKeys::new(vec![b"0123456789abcdef-suite".to_vec()]);
            let seal = rm_auth::seal::SeedSeal::from_ad_keys(&keys.unwrap());
            rm_auth::Tokens::load(&*state, &seal, "iss", "aud", 60)
                .await
                .unwrap()
        });
    }
    let mut loaded = Vec::new();
    while let Some(t) = tasks.join_next().await {
        loaded.push(t.unwrap());
    }
    assert_eq!(state.signing_keys().await.unwrap().len(), 1);
    for a in &loaded {
        let tok = a.issue("c1", "acme", &[Scope::Ads]).unwrap();
        for b in &loaded {
            assert_eq!(b.verify(&tok).unwrap().sub, "c1");
        }
    }
    // Every seed is stored sealed; a seed an earlier version stored in clear (k9 here)
    // loads as the same key and is sealed in place.
    let stored = state.signing_keys().await.unwrap();
    assert!(
        stored[0].seed.starts_with(rm_auth::seal::SEALED),
        "{stored:?}"
    );
    let clear = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode([3u8; 32]);
    let mut old = k("k9", &clear);
    old.created = "2030-01-01T00:00:00Z".to_owned();
    assert!(state.add_signing_key(&old).await.unwrap());
    let keys = rm_schemas::ad_id::AdIdKeys::new(vec![b"0123456789abcdef-suite".to_vec()]);
    let seal = rm_auth::seal::SeedSeal::from_ad_keys(&keys.unwrap());
    let t = rm_auth::Tokens::load(&*state, &seal, "iss", "aud", 60)
        .await
        .unwrap();
    assert_eq!(t.resealed(), 1);
    let public = ed25519_dalek::SigningKey::from_bytes(&[3u8; 32])
        .verifying_key()
        .to_bytes();
    assert_eq!(t.public_key("k9"), Some(public.to_vec()));
    for k in state.signing_keys().await.unwrap() {
        assert!(k.seed.starts_with(rm_auth::seal::SEALED), "{k:?}");
        assert!(!k.seed.contains(&clear));
    }
}

fn segment(id: &str, name: &str) -> Segment {
    Segment {
        id: id.to_owned(),
        name: name.to_owned(),
        category: vec!["sport".to_owned()],
        ..Segment::default()
    }
}

fn campaign(id: &str, name: &str) -> BannerXCampaign {
    BannerXCampaign {
        id: id.to_owned(),
        name: name.to_owned(),
        catalog_ids: vec!["cat".to_owned()],
        ..BannerXCampaign::default()
    }
}

async fn state_segments_and_campaigns(f: &Fixture) {
    let s = f.state();
    assert!(s.create_segment(&segment("s1", "Runners")).await.unwrap());
    assert!(!s.create_segment(&segment("s1", "Other")).await.unwrap());
    assert_eq!(
        s.segment("s1").await.unwrap(),
        Some(segment("s1", "Runners"))
    );
    s.put_segment(&segment("s1", "Trail runners"))
        .await
        .unwrap();
    assert_eq!(
        s.segment("s1").await.unwrap().unwrap().name,
        "Trail runners"
    );
    assert_eq!(s.segment("nope").await.unwrap(), None);

    assert!(s.create_campaign(&campaign("c2", "Two")).await.unwrap());
    assert!(!s.create_campaign(&campaign("c2", "Again")).await.unwrap());
    s.put_campaigns(&[campaign("c1", "One"), campaign("c3", "Three")])
        .await
        .unwrap();
    s.put_campaign(&campaign("c2", "Two v2")).await.unwrap();
    let names: Vec<String> = s
        .campaigns()
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.name)
        .collect();
    assert_eq!(names, ["One", "Two v2", "Three"]);
    assert_eq!(
        s.campaign("c3").await.unwrap(),
        Some(campaign("c3", "Three"))
    );
}

fn product(catalog: &str, code: &str, price: &str) -> Product {
    Product {
        catalog_id: catalog.to_owned(),
        product_code: code.to_owned(),
        name: format!("{code} name"),
        price: price.to_owned(),
        ..Product::default()
    }
}

async fn state_products_and_orders(f: &Fixture) {
    let s = f.state();
    s.put_products(&[
        product("cat-b", "p1", "1.00"),
        product("cat-a", "p2", "2.00"),
        product("cat-a", "p1", "3.00"),
    ])
    .await
    .unwrap();
    s.put_product(&product("cat-a", "p2", "2.50"))
        .await
        .unwrap();
    assert_eq!(
        s.product("default", "cat-a", "p2").await.unwrap(),
        Some(product("cat-a", "p2", "2.50"))
    );
    assert_eq!(s.product("default", "cat-c", "p1").await.unwrap(), None);
    // Products come back by catalog, then code.
    let keys: Vec<(String, String)> = s
        .products()
        .await
        .unwrap()
        .into_iter()
        .map(|p| (p.catalog_id, p.product_code))
        .collect();
    let want = [("cat-a", "p1"), ("cat-a", "p2"), ("cat-b", "p1")]
        .map(|(c, p)| (c.to_owned(), p.to_owned()));
    assert_eq!(keys, want);

    assert!(!s.order_taken("default", "o-1").await.unwrap());
    s.mark_order("default", "o-1", "2026-11-22T10:00:00Z")
        .await
        .unwrap();
    s.mark_order("default", "o-1", "2026-11-22T11:00:00Z")
        .await
        .unwrap();
    assert!(s.order_taken("default", "o-1").await.unwrap());
    assert!(!s.order_taken("default", "o-2").await.unwrap());
    // The first mark is kept.
    assert_eq!(
        f.kv().get(Ns::Orders, "o-1").await.unwrap(),
        Some(b"\"2026-11-22T10:00:00Z\"".to_vec())
    );
}

async fn state_corrupt_values_are_reported(f: &Fixture) {
    f.kv()
        .put(Ns::Segments, "bad", b"{not json".to_vec())
        .await
        .unwrap();
    match f.state().segment("bad").await {
        Err(StateError::Corrupt { ns, key, .. }) => {
            assert_eq!((ns, key.as_str()), ("segments", "bad"));
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
    let e = rm_api::ApiError::from(f.state().segment("bad").await.unwrap_err());
    assert_eq!(e.response().status(), 503);
}

// ---------------------------------------------------------------------------------
// PostgreSQL only

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_handles_share_one_database_and_race_fairly() {
    let _server = SERVER.read().await;
    let Some(db) = TestDb::create() else { return };
    // Four instances connect at once to a database without the table.
    let mut connecting = tokio::task::JoinSet::new();
    for _ in 0..4 {
        let url = db.url.clone();
        connecting.spawn(async move { PostgresKv::connect(&url).await });
    }
    let mut handles = Vec::new();
    while let Some(c) = connecting.join_next().await {
        handles.push(Arc::new(c.unwrap().unwrap()));
    }
    handles[0]
        .put(Ns::Segments, "s", b"from 0".to_vec())
        .await
        .unwrap();
    for h in &handles {
        assert_eq!(
            h.get(Ns::Segments, "s").await.unwrap(),
            Some(b"from 0".to_vec())
        );
    }
    // 20 callers on each of the four handles, one key: one winner in all.
    let mut tasks = tokio::task::JoinSet::new();
    for (n, h) in handles.iter().enumerate() {
        for i in 0..20u8 {
            let h = Arc::clone(h);
            tasks.spawn(async move {
                h.insert_new(Ns::Orders, "o", vec![n as u8, i])
                    .await
                    .unwrap()
            });
        }
    }
    let mut wins = 0;
    while let Some(w) = tasks.join_next().await {
        wins += usize::from(w.unwrap());
    }
    assert_eq!(wins, 1);
    assert!(handles[3].remove(Ns::Orders, "o").await.unwrap());
    assert_eq!(handles[1].get(Ns::Orders, "o").await.unwrap(), None);
    // A key PostgreSQL text cannot hold is refused clearly, never stored.
    let e = handles[0]
        .put(Ns::Segments, "a\0b", b"x".to_vec())
        .await
        .unwrap_err();
    assert!(e.to_string().contains("NUL"), "{e}");
    assert_eq!(handles[0].get(Ns::Segments, "a\0b").await.unwrap(), None);
}

#[tokio::test]
async fn postgres_bad_settings_fail_clearly() {
    let _server = SERVER.read().await;
    let Some(url) = common::required_setting("RM_API_DATABASE_URL", "PostgreSQL") else {
        return;
    };
    let wrong_password = url.replacen(":retail_media@", ":wrong@", 1);
    if wrong_password != url {
        let e = PostgresKv::connect(&wrong_password).await.err().unwrap();
        assert!(e.to_string().contains("password"), "{e}");
    }
    let missing_db = with_database(&url, "rm_no_such_database");
    let e = PostgresKv::connect(&missing_db).await.err().unwrap();
    assert!(e.to_string().contains("rm_no_such_database"), "{e}");
}

/// Runs `deploy/local/up.sh CMD`.
fn up_sh(cmd: &str) {
    let st = Command::new("bash")
        .args([UP_SH, cmd])
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(st.success(), "up.sh {cmd} failed");
}

/// Starts the server again even when the test fails midway.
struct StartOnDrop;

impl Drop for StartOnDrop {
    fn drop(&mut self) {
        up_sh("postgres-start");
    }
}

fn bearer_get(api: SocketAddr, path: &str, tok: &str) -> HttpResponse {
    send(
        api,
        "GET",
        path,
        &[("Authorization", &format!("Bearer {tok}"))],
        b"",
    )
    .unwrap()
}

/// Polls `check` every 100 ms until it holds or `within` passes.
async fn eventually(within: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let t = Instant::now();
    while !check() {
        assert!(t.elapsed() < within, "not within {within:?}: {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_restart_fails_calls_then_recovers() {
    let _server = SERVER.write().await;
    let Some(db) = TestDb::create() else { return };
    let port = std::env::var("RM_POSTGRES_PORT").unwrap_or_else(|_| "5433".to_owned());
    if !db.admin.contains(&format!("@127.0.0.1:{port}/")) {
        eprintln!("SKIPPED: RM_API_DATABASE_URL is not up.sh's server on 127.0.0.1:{port}; not restarting it");
        return;
    }
    let kv = PostgresKv::connect(&db.url).await.unwrap();
    kv.put(Ns::Segments, "kept", b"1".to_vec()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let svc = Service::start_with_args(
        "api",
        dir.path(),
        &[("RM_API_DATABASE_URL", db.url.clone())],
        &[],
        None,
    );
    let tok = common::demo_token(svc.api);
    let seg = "/v1/segments/demo-segment";
    assert_eq!(bearer_get(svc.api, seg, &tok).status, 200);

    common::servers::exclusive();
    let restart = StartOnDrop;
    let stopped = tokio::task::spawn_blocking(|| up_sh("postgres-stop"));
    stopped.await.unwrap();
    // Every call fails as a backend error; readiness follows within the probe period.
    match kv.get(Ns::Segments, "kept").await {
        Err(StateError::Backend(m)) => assert!(m.starts_with("postgres"), "{m}"),
        other => panic!("expected a backend error, got {other:?}"),
    }
    assert!(matches!(
        kv.put(Ns::Segments, "x", b"2".to_vec()).await,
        Err(StateError::Backend(_))
    ));
    eventually(Duration::from_secs(5), "kv readiness fails", || {
        kv.readiness().is_err()
    })
    .await;
    let r = bearer_get(svc.api, seg, &tok);
    assert_eq!(r.status, 503, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["code"], 14, "{}", String::from_utf8_lossy(&r.body));
    let api = svc.api;
    eventually(Duration::from_secs(5), "/readyz answers 503", || {
        common::get(api, "/readyz").is_ok_and(|r| r.status == 503)
    })
    .await;

    tokio::task::spawn_blocking(move || drop(restart))
        .await
        .unwrap();
    eventually(Duration::from_secs(10), "kv readiness recovers", || {
        kv.readiness().is_ok()
    })
    .await;
    assert_eq!(
        kv.get(Ns::Segments, "kept").await.unwrap(),
        Some(b"1".to_vec())
    );
    eventually(Duration::from_secs(10), "/readyz answers 200", || {
        common::get(api, "/readyz").is_ok_and(|r| r.status == 200)
    })
    .await;
    assert_eq!(bearer_get(svc.api, seg, &tok).status, 200);

    // `postgres-restart` in one step: the same handle and the api come back by themselves.
    let _again = StartOnDrop;
    tokio::task::spawn_blocking(|| up_sh("postgres-restart"))
        .await
        .unwrap();
    let t = Instant::now();
    loop {
        match kv.get(Ns::Segments, "kept").await {
            Ok(v) => break assert_eq!(v, Some(b"1".to_vec())),
            Err(StateError::Backend(m)) if t.elapsed() < Duration::from_secs(10) => {
                eprintln!("after restart, still: {m}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("no recovery after postgres-restart: {e}"),
        }
    }
    eventually(
        Duration::from_secs(10),
        "the api answers after a restart",
        || bearer_get(api, seg, &tok).status == 200,
    )
    .await;
    svc.terminate();
}

// ---------------------------------------------------------------------------------
// two api processes on one database

fn call(api: SocketAddr, method: &str, path: &str, tok: &str, body: &Value) -> HttpResponse {
    let auth = format!("Bearer {tok}");
    send(
        api,
        method,
        path,
        &[
            ("Content-Type", "application/json"),
            ("Authorization", &auth),
        ],
        &serde_json::to_vec(body).unwrap(),
    )
    .unwrap()
}

fn order(api: SocketAddr, id: &str) -> Value {
    let body = json!({"orders": [{"id": id, "customerId": "cust-1", "sessionId": "sess-1",
        "orderDate": "2026-11-22T10:00:00Z", "catalogId": "demo-catalog", "teamId": "demo-team",
        "orderItems": [{"productCode": "cola-1l", "quantity": 1, "regularUnitPrice": 1.29,
            "totalOrderItemPriceAfterDiscounts": 1.29}]}]});
    let r = send(
        api,
        "POST",
        "/v1/orders",
        &[
            ("Content-Type", "application/json"),
            ("Authorization", "Basic demo-orders-key"),
        ],
        &serde_json::to_vec(&body).unwrap(),
    )
    .unwrap();
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    r.json()
}

/// One deployment's ad id key (`RM_AD_ID_KEYS`), given to both api processes.
const SHARED_AD_KEY: &str = "q1Tj0Ks3n7uLr6SqUEOhJtSz5mEFuDuSGk2rqhwWP0c";

#[test]
fn two_api_processes_share_one_database() {
    let _server = SERVER.blocking_read();
    let Some(db) = TestDb::create() else { return };
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // Both start at once on the empty database: both create the table, load the demo
    // set and race for the first signing key.
    let start = |dir: std::path::PathBuf, url: String| {
        std::thread::spawn(move || {
            // Instances of one deployment share the ad id keys (the seeds are sealed
            // with a key derived from them).
            let env = [
                ("RM_API_DATABASE_URL", url),
                ("RM_AD_ID_KEYS", SHARED_AD_KEY.to_owned()),
            ];
            Service::start_with_args("api", &dir, &env, &[], None)
        })
    };
    let a = start(dir_a.path().to_path_buf(), db.url.clone());
    let b = start(dir_b.path().to_path_buf(), db.url.clone());
    let (a, b) = (a.join().unwrap(), b.join().unwrap());
    for s in [&a, &b] {
        let log = s.log();
        let line = log.lines().find(|l| l.contains("api state open"));
        assert!(line.is_some_and(|l| l.contains("postgres")), "{log}");
    }

    // The same signing key on both: each verifies the other's tokens, one JWKS.
    let tok_a = common::demo_token(a.api);
    let tok_b = common::demo_token(b.api);
    let jwks = |api| common::get(api, "/.well-known/jwks.json").unwrap().json();
    assert_eq!(jwks(a.api), jwks(b.api));
    assert_eq!(jwks(a.api)["keys"].as_array().unwrap().len(), 1);
    assert_eq!(
        bearer_get(b.api, "/v1/segments/demo-segment", &tok_a).status,
        200
    );
    assert_eq!(
        bearer_get(a.api, "/v1/segments/demo-segment", &tok_b).status,
        200
    );

    // A segment created on one is read and updated on the other.
    let body = json!({"segment": {"id": "shared-1", "name": "Runners", "category": ["sport"],
        "description": "Runs", "retailerTeamId": "t1", "segmentId": "ext-1", "sourceId": "crm"}});
    let r = call(a.api, "POST", "/v1/segments", &tok_a, &body);
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(
        call(b.api, "POST", "/v1/segments", &tok_b, &body).status,
        409
    );
    let r = bearer_get(b.api, "/v1/segments/shared-1", &tok_b);
    assert_eq!(r.status, 200);
    let mut stored = body.clone();
    stored["segment"]["namespaceId"] = json!("demo");
    assert_eq!(r.json(), stored);
    let upd = json!({"segment": {"name": "Trail runners", "category": ["sport", "outdoor"],
        "description": "d", "retailerTeamId": "t1", "segmentId": "ext-1", "sourceId": "crm"}});
    let r = call(b.api, "PUT", "/v1/segments/shared-1", &tok_b, &upd);
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let r = bearer_get(a.api, "/v1/segments/shared-1", &tok_a);
    assert_eq!(r.json()["segment"]["name"], "Trail runners");

    // An order id taken on one is a duplicate on the other.
    let r = order(a.api, "shared-order-1");
    assert_eq!(r["accepted"], 1, "{r}");
    let r = order(b.api, "shared-order-1");
    assert_eq!(r["duplicates"], 1, "{r}");
    assert_eq!(r["orders"][0]["status"], "duplicate", "{r}");
    let r = order(b.api, "shared-order-2");
    assert_eq!(r["accepted"], 1, "{r}");
    assert_eq!(order(a.api, "shared-order-2")["duplicates"], 1);

    a.terminate();
    b.terminate();
}
