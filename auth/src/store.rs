//! The seam between authentication and the api's state: the few reads and writes
//! authentication needs, implemented by the api's `State` (and by a map in tests).
//! Nothing here knows how or where the state is kept.

use std::future::Future;

use crate::client::ApiKey;
use serde::{Deserialize, Serialize};

/// A token signing key as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredSigningKey {
    /// Key id (`kid`).
    pub kid: String,
    /// Ed25519 seed, sealed (`crate::seal`; base64url in clear in states written
    /// before seeds were sealed).
    pub seed: String,
    /// Creation time (RFC 3339).
    pub created: String,
}

/// What authentication reads from (and, for the first signing key, writes to) the
/// api's state.
pub trait AuthStore: Sync {
    /// The store's own error, kept as the cause of [`crate::AuthError::Store`].
    type Error: std::error::Error + Send + Sync + 'static;

    /// The orders API key with this lookup digest (hex SHA-256 of the key).
    fn api_key(
        &self,
        lookup: &str,
    ) -> impl Future<Output = Result<Option<ApiKey>, Self::Error>> + Send;

    /// Every token signing key.
    fn signing_keys(
        &self,
    ) -> impl Future<Output = Result<Vec<StoredSigningKey>, Self::Error>> + Send;

    /// Adds a signing key unless one with its `kid` exists; whether it was added.
    /// Atomic: of instances adding the same `kid` at once, exactly one wins.
    fn add_signing_key(
        &self,
        key: &StoredSigningKey,
    ) -> impl Future<Output = Result<bool, Self::Error>> + Send;

    /// Replaces the stored form of an existing signing key (its seed sealed again).
    fn replace_signing_key(
        &self,
        key: &StoredSigningKey,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send;

    /// Every removed client with the Unix seconds of its removal.
    fn revocations(&self) -> impl Future<Output = Result<Vec<(String, i64)>, Self::Error>> + Send;
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    use super::*;

    /// A store in memory.
    #[derive(Default)]
    pub(crate) struct MemStore {
        pub(crate) keys: Mutex<BTreeMap<String, StoredSigningKey>>,
        pub(crate) api_keys: Mutex<BTreeMap<String, ApiKey>>,
        pub(crate) revoked: Mutex<Vec<(String, i64)>>,
    }

    #[derive(Debug, thiserror::Error)]
    #[error("never")]
    pub(crate) struct Never;

    impl AuthStore for MemStore {
        type Error = Never;
        async fn api_key(&self, lookup: &str) -> Result<Option<ApiKey>, Never> {
            Ok(self.api_keys.lock().unwrap().get(lookup).cloned())
        }
        async fn signing_keys(&self) -> Result<Vec<StoredSigningKey>, Never> {
            Ok(self.keys.lock().unwrap().values().cloned().collect())
        }
        async fn replace_signing_key(&self, key: &StoredSigningKey) -> Result<(), Never> {
            self.keys
                .lock()
                .unwrap()
                .insert(key.kid.clone(), key.clone());
            Ok(())
        }
        async fn add_signing_key(&self, key: &StoredSigningKey) -> Result<bool, Never> {
            let mut keys = self.keys.lock().unwrap();
            if keys.contains_key(&key.kid) {
                return Ok(false);
            }
            keys.insert(key.kid.clone(), key.clone());
            Ok(true)
        }
        async fn revocations(&self) -> Result<Vec<(String, i64)>, Never> {
            Ok(self.revoked.lock().unwrap().clone())
        }
    }
}
