//! The api's own state: OAuth clients, order API keys, signing keys, segments,
//! campaigns, the catalog, the ids of orders already taken, and revoked clients.
//! Products and orders are keyed by their scoped id
//! (`rm_schemas::namespace::scoped`): catalog and order ids are unique within a
//! namespace, and keys of the `default` namespace are those written before
//! namespaces. Stores written before namespaces are converted at start
//! ([`migrate`]).
//!
//! Mechanism apart from policy: backends implement [`KvStore`], a small namespaced
//! key-value trait with one atomic primitive (`insert_new`), and [`State`] maps the
//! typed resources onto it (JSON values). The embedded backend is redb
//! ([`embedded`]); a server database implements the same five operations, so every
//! line above the trait is shared.

pub mod clients_file;
pub mod embedded;
pub mod migrate;
pub mod postgres;

use std::future::Future;
use std::path::Path;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::model::segment::Segment;
use rm_ads::model::campaign::BannerXCampaign;
use rm_ads::model::catalog::Product;
use rm_auth::client::{ApiKey, Client};

/// A namespace of the state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ns {
    /// OAuth clients by id.
    Clients,
    /// Order API keys by SHA-256 lookup.
    ApiKeys,
    /// Token signing keys by `kid`.
    SigningKeys,
    /// Segments by id.
    Segments,
    /// Campaigns by id.
    Campaigns,
    /// Products by `catalogId \u{1f} productCode`.
    Products,
    /// Orders taken, by scoped order id.
    Orders,
    /// Removed clients, by client id: Unix seconds of removal.
    Revocations,
    /// The state's format version ([`migrate`]).
    Meta,
}

impl Ns {
    /// Every namespace.
    pub const ALL: [Ns; 9] = [
        Ns::Clients,
        Ns::ApiKeys,
        Ns::SigningKeys,
        Ns::Segments,
        Ns::Campaigns,
        Ns::Products,
        Ns::Orders,
        Ns::Revocations,
        Ns::Meta,
    ];

    /// The namespace's table name.
    pub const fn name(self) -> &'static str {
        match self {
            Ns::Clients => "clients",
            Ns::ApiKeys => "api_keys",
            Ns::SigningKeys => "signing_keys",
            Ns::Segments => "segments",
            Ns::Campaigns => "campaigns",
            Ns::Products => "products",
            Ns::Orders => "orders",
            Ns::Revocations => "revocations",
            Ns::Meta => "meta",
        }
    }
}

/// A failure of the state backend.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// The backend failed; the text says how.
    #[error("state backend: {0}")]
    Backend(String),
    /// A stored value does not decode (a bug or a foreign writer).
    #[error("stored value in {ns} under '{key}' does not decode: {message}")]
    Corrupt {
        /// Namespace.
        ns: &'static str,
        /// Key.
        key: String,
        /// Decoder message.
        message: String,
    },
}

/// A namespaced key-value store: what a state backend implements.
pub trait KvStore: Send + Sync + 'static {
    /// The value under `key`.
    fn get(
        &self,
        ns: Ns,
        key: &str,
    ) -> impl Future<Output = Result<Option<Vec<u8>>, StateError>> + Send;
    /// Sets `key` to `value`.
    fn put(
        &self,
        ns: Ns,
        key: &str,
        value: Vec<u8>,
    ) -> impl Future<Output = Result<(), StateError>> + Send;
    /// Sets `key` to `value` only if absent; whether it was absent. Atomic.
    fn insert_new(
        &self,
        ns: Ns,
        key: &str,
        value: Vec<u8>,
    ) -> impl Future<Output = Result<bool, StateError>> + Send;
    /// Removes `key`; whether it was there.
    fn remove(&self, ns: Ns, key: &str) -> impl Future<Output = Result<bool, StateError>> + Send;
    /// Every entry of `ns`, in key order.
    fn scan(
        &self,
        ns: Ns,
    ) -> impl Future<Output = Result<Vec<(String, Vec<u8>)>, StateError>> + Send;
    /// Sets many keys at once (one transaction where the backend has them).
    fn put_many(
        &self,
        ns: Ns,
        entries: Vec<(String, Vec<u8>)>,
    ) -> impl Future<Output = Result<(), StateError>> + Send {
        async move {
            for (k, v) in entries {
                self.put(ns, &k, v).await?;
            }
            Ok(())
        }
    }
    /// `Ok` when the backend answers.
    fn readiness(&self) -> Result<(), String>;
}

/// The state backends.
pub enum AnyKv {
    /// redb under the data dir.
    Embedded(embedded::EmbeddedKv),
    /// PostgreSQL, shared by several api instances.
    Postgres(postgres::PostgresKv),
}

macro_rules! each {
    ($self:ident, $kv:ident => $e:expr) => {
        match $self {
            AnyKv::Embedded($kv) => $e,
            AnyKv::Postgres($kv) => $e,
        }
    };
}

impl KvStore for AnyKv {
    async fn get(&self, ns: Ns, key: &str) -> Result<Option<Vec<u8>>, StateError> {
        each!(self, kv => kv.get(ns, key).await)
    }
    async fn put(&self, ns: Ns, key: &str, value: Vec<u8>) -> Result<(), StateError> {
        each!(self, kv => kv.put(ns, key, value).await)
    }
    async fn insert_new(&self, ns: Ns, key: &str, value: Vec<u8>) -> Result<bool, StateError> {
        each!(self, kv => kv.insert_new(ns, key, value).await)
    }
    async fn remove(&self, ns: Ns, key: &str) -> Result<bool, StateError> {
        each!(self, kv => kv.remove(ns, key).await)
    }
    async fn scan(&self, ns: Ns) -> Result<Vec<(String, Vec<u8>)>, StateError> {
        each!(self, kv => kv.scan(ns).await)
    }
    async fn put_many(&self, ns: Ns, entries: Vec<(String, Vec<u8>)>) -> Result<(), StateError> {
        each!(self, kv => kv.put_many(ns, entries).await)
    }
    fn readiness(&self) -> Result<(), String> {
        each!(self, kv => kv.readiness())
    }
}

/// Typed access to the state.
pub struct State {
    kv: AnyKv,
}

pub use rm_auth::StoredSigningKey;

fn encode<T: Serialize>(v: &T) -> Vec<u8> {
    serde_json::to_vec(v).unwrap_or_default()
}

fn decode<T: DeserializeOwned>(ns: Ns, key: &str, bytes: &[u8]) -> Result<T, StateError> {
    serde_json::from_slice(bytes).map_err(|e| StateError::Corrupt {
        ns: ns.name(),
        key: key.to_owned(),
        message: e.to_string(),
    })
}

/// The key of a product of namespace `ns`.
pub fn product_key(ns: &str, catalog_id: &str, product_code: &str) -> String {
    rm_schemas::namespace::scoped(ns, &format!("{catalog_id}\u{1f}{product_code}"))
}

fn product_ns(p: &Product) -> &str {
    if p.namespace_id.is_empty() {
        rm_schemas::namespace::DEFAULT
    } else {
        &p.namespace_id
    }
}

impl State {
    /// Opens the embedded state under `data_dir/api/state.redb`.
    pub fn open_embedded(data_dir: &Path) -> Result<State, StateError> {
        Ok(State {
            kv: AnyKv::Embedded(embedded::EmbeddedKv::open(
                &data_dir.join("api").join("state.redb"),
            )?),
        })
    }

    /// Connects to the PostgreSQL state at `url`, creating its table if missing.
    pub async fn connect_postgres(url: &str) -> Result<State, StateError> {
        Ok(State {
            kv: AnyKv::Postgres(postgres::PostgresKv::connect(url).await?),
        })
    }

    /// Wraps a backend.
    pub fn new(kv: AnyKv) -> State {
        State { kv }
    }

    /// The backend's name.
    pub fn backend(&self) -> &'static str {
        match self.kv {
            AnyKv::Embedded(_) => "embedded",
            AnyKv::Postgres(_) => "postgres",
        }
    }

    /// `Ok` when the backend answers.
    pub fn readiness(&self) -> Result<(), String> {
        self.kv.readiness()
    }

    pub(crate) fn kv(&self) -> &AnyKv {
        &self.kv
    }

    async fn get_typed<T: DeserializeOwned>(
        &self,
        ns: Ns,
        key: &str,
    ) -> Result<Option<T>, StateError> {
        match self.kv.get(ns, key).await? {
            Some(b) => decode(ns, key, &b).map(Some),
            None => Ok(None),
        }
    }

    async fn scan_typed<T: DeserializeOwned + Send + 'static>(
        &self,
        ns: Ns,
    ) -> Result<Vec<T>, StateError> {
        let rows = self.kv.scan(ns).await?;
        // Decoding a whole namespace (a catalog of a million products) takes seconds
        // of CPU: on the blocking pool, never on a request worker.
        tokio::task::spawn_blocking(move || {
            rows.iter()
                .map(|(k, v)| decode(ns, k, v))
                .collect::<Result<Vec<T>, _>>()
        })
        .await
        .map_err(|e| StateError::Backend(format!("decoding task failed: {e}")))?
    }

    /// The campaigns with a digest of their stored form (keys and values), decoded
    /// only when the digest differs from `known`: one read, and no decoding when
    /// nothing changed.
    pub async fn campaigns_if_changed(
        &self,
        known: Option<u64>,
    ) -> Result<(u64, Option<Vec<BannerXCampaign>>), StateError> {
        let rows = self.kv.scan(Ns::Campaigns).await?;
        tokio::task::spawn_blocking(move || {
            let mut h = xxhash_rust::xxh3::Xxh3::new();
            for (k, v) in &rows {
                h.update(&(k.len() as u64).to_le_bytes());
                h.update(k.as_bytes());
                h.update(&(v.len() as u64).to_le_bytes());
                h.update(v);
            }
            let digest = h.digest();
            if known == Some(digest) {
                return Ok((digest, None));
            }
            let campaigns = rows
                .iter()
                .map(|(k, v)| decode(Ns::Campaigns, k, v))
                .collect::<Result<Vec<_>, _>>()?;
            Ok((digest, Some(campaigns)))
        })
        .await
        .map_err(|e| StateError::Backend(format!("campaign read task failed: {e}")))?
    }

    /// The client `id`.
    pub async fn client(&self, id: &str) -> Result<Option<Client>, StateError> {
        self.get_typed(Ns::Clients, id).await
    }
    /// Every client.
    pub async fn clients(&self) -> Result<Vec<Client>, StateError> {
        self.scan_typed(Ns::Clients).await
    }
    /// Creates a client; false when its id is taken.
    pub async fn create_client(&self, c: &Client) -> Result<bool, StateError> {
        self.kv.insert_new(Ns::Clients, &c.id, encode(c)).await
    }
    /// Adds or replaces a client.
    pub async fn put_client(&self, c: &Client) -> Result<(), StateError> {
        self.kv.put(Ns::Clients, &c.id, encode(c)).await
    }
    /// Removes a client; whether it existed.
    pub async fn remove_client(&self, id: &str) -> Result<bool, StateError> {
        self.kv.remove(Ns::Clients, id).await
    }

    /// The API key with this lookup digest.
    pub async fn api_key(&self, lookup: &str) -> Result<Option<ApiKey>, StateError> {
        self.get_typed(Ns::ApiKeys, lookup).await
    }
    /// Every API key.
    pub async fn api_keys(&self) -> Result<Vec<ApiKey>, StateError> {
        self.scan_typed(Ns::ApiKeys).await
    }
    /// Adds or replaces an API key.
    pub async fn put_api_key(&self, k: &ApiKey) -> Result<(), StateError> {
        self.kv.put(Ns::ApiKeys, &k.lookup, encode(k)).await
    }
    /// Removes the API key with id `key_id` (or, for keys made before key ids, that
    /// name); whether one was removed.
    pub async fn remove_api_key_id(&self, key_id: &str) -> Result<bool, StateError> {
        for k in self.api_keys().await? {
            let id = if k.key_id.is_empty() {
                &k.name
            } else {
                &k.key_id
            };
            if id == key_id {
                return self.kv.remove(Ns::ApiKeys, &k.lookup).await;
            }
        }
        Ok(false)
    }
    /// Removes every API key named `name`; how many.
    pub async fn remove_api_key(&self, name: &str) -> Result<usize, StateError> {
        let mut n = 0;
        for k in self.api_keys().await? {
            if k.name == name && self.kv.remove(Ns::ApiKeys, &k.lookup).await? {
                n += 1;
            }
        }
        Ok(n)
    }

    /// Records that client `id` was removed at `at` (Unix seconds).
    pub async fn put_revocation(&self, id: &str, at: i64) -> Result<(), StateError> {
        self.kv.put(Ns::Revocations, id, encode(&at)).await
    }
    /// Every removed client with the time of its removal.
    pub async fn revocations(&self) -> Result<Vec<(String, i64)>, StateError> {
        let rows = self.kv.scan(Ns::Revocations).await?;
        rows.iter()
            .map(|(k, v)| decode(Ns::Revocations, k, v).map(|at| (k.clone(), at)))
            .collect()
    }

    /// Every signing key.
    pub async fn signing_keys(&self) -> Result<Vec<StoredSigningKey>, StateError> {
        self.scan_typed(Ns::SigningKeys).await
    }
    /// Replaces a signing key's stored form (its seed sealed again).
    pub async fn replace_signing_key(&self, k: &StoredSigningKey) -> Result<(), StateError> {
        self.kv.put(Ns::SigningKeys, &k.kid, encode(k)).await
    }
    /// Adds a signing key unless one with its `kid` exists.
    pub async fn add_signing_key(&self, k: &StoredSigningKey) -> Result<bool, StateError> {
        self.kv.insert_new(Ns::SigningKeys, &k.kid, encode(k)).await
    }

    /// The segment `id`.
    pub async fn segment(&self, id: &str) -> Result<Option<Segment>, StateError> {
        self.get_typed(Ns::Segments, id).await
    }
    /// Creates a segment; false when its id is taken.
    pub async fn create_segment(&self, s: &Segment) -> Result<bool, StateError> {
        self.kv.insert_new(Ns::Segments, &s.id, encode(s)).await
    }
    /// Stores a segment.
    pub async fn put_segment(&self, s: &Segment) -> Result<(), StateError> {
        self.kv.put(Ns::Segments, &s.id, encode(s)).await
    }

    /// The campaign `id`.
    pub async fn campaign(&self, id: &str) -> Result<Option<BannerXCampaign>, StateError> {
        self.get_typed(Ns::Campaigns, id).await
    }
    /// Every campaign.
    pub async fn campaigns(&self) -> Result<Vec<BannerXCampaign>, StateError> {
        self.scan_typed(Ns::Campaigns).await
    }
    /// Creates a campaign; false when its id is taken.
    pub async fn create_campaign(&self, c: &BannerXCampaign) -> Result<bool, StateError> {
        self.kv.insert_new(Ns::Campaigns, &c.id, encode(c)).await
    }
    /// Stores a campaign.
    pub async fn put_campaign(&self, c: &BannerXCampaign) -> Result<(), StateError> {
        self.kv.put(Ns::Campaigns, &c.id, encode(c)).await
    }

    /// Adds or replaces a product (in its `namespace_id`).
    pub async fn put_product(&self, p: &Product) -> Result<(), StateError> {
        self.kv
            .put(
                Ns::Products,
                &product_key(product_ns(p), &p.catalog_id, &p.product_code),
                encode(p),
            )
            .await
    }
    /// Adds or replaces many products in one write.
    pub async fn put_products(&self, ps: &[Product]) -> Result<(), StateError> {
        let entries = ps
            .iter()
            .map(|p| {
                let key = product_key(product_ns(p), &p.catalog_id, &p.product_code);
                (key, encode(p))
            })
            .collect();
        self.kv.put_many(Ns::Products, entries).await
    }
    /// Adds or replaces many campaigns in one write.
    pub async fn put_campaigns(&self, cs: &[BannerXCampaign]) -> Result<(), StateError> {
        let entries = cs.iter().map(|c| (c.id.clone(), encode(c))).collect();
        self.kv.put_many(Ns::Campaigns, entries).await
    }
    /// Every product of every catalog.
    pub async fn products(&self) -> Result<Vec<Product>, StateError> {
        self.scan_typed(Ns::Products).await
    }
    /// The product `product_code` of `catalog_id` in namespace `ns`.
    pub async fn product(
        &self,
        ns: &str,
        catalog_id: &str,
        product_code: &str,
    ) -> Result<Option<Product>, StateError> {
        self.get_typed(Ns::Products, &product_key(ns, catalog_id, product_code))
            .await
    }

    /// Whether the order id was taken before in namespace `ns`.
    pub async fn order_taken(&self, ns: &str, order_id: &str) -> Result<bool, StateError> {
        let key = rm_schemas::namespace::scoped(ns, order_id);
        Ok(self.kv.get(Ns::Orders, &key).await?.is_some())
    }
    /// Records an order id of namespace `ns` as taken (after its record is durable in
    /// the log).
    pub async fn mark_order(
        &self,
        ns: &str,
        order_id: &str,
        received_at: &str,
    ) -> Result<(), StateError> {
        let key = rm_schemas::namespace::scoped(ns, order_id);
        self.kv
            .insert_new(Ns::Orders, &key, encode(&received_at))
            .await
            .map(|_| ())
    }
}
