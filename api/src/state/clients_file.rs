//! Clients and API keys from configuration: a TOML file named by
//! `RM_API_CLIENTS_FILE`, upserted into the state at start. It holds hashes only,
//! never secrets; `retail-media clients hash` and `retail-media keys hash` print the
//! lines to paste. Client ids and namespaces follow the one client rule
//! (`rm_auth::client`, as the admin API and the `clients` subcommand do): a file
//! whose client id breaks it is refused at start.
//!
//! ```toml
//! [[client]]
//! id = "partner-a"
//! namespace = "acme"          # optional: default
//! secret_hash = "$argon2id$v=19$m=19456,t=2,p=1$..."
//! scopes = ["ads", "reports"]
//!
//! [[api_key]]
//! name = "erp"
//! namespace = "acme"          # optional: default
//! lookup = "<hex SHA-256 of the key>"
//! key_hash = "$argon2id$v=19$..."
//! ```

use std::path::Path;

use serde::Deserialize;

use super::{State, StateError};
use rm_auth::client::{self, ApiKey, Client, Scope};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileClient {
    id: String,
    #[serde(default = "default_ns")]
    namespace: String,
    secret_hash: String,
    scopes: Vec<Scope>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileKey {
    name: String,
    #[serde(default = "default_ns")]
    namespace: String,
    lookup: String,
    key_hash: String,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    client: Vec<FileClient>,
    #[serde(default)]
    api_key: Vec<FileKey>,
}

fn default_ns() -> String {
    rm_schemas::namespace::DEFAULT.to_owned()
}

fn check_ns(what: &str, ns: &str) -> Result<(), StateError> {
    client::check_namespace(ns)
        .map_err(|e| StateError::Backend(format!("{what}: namespace '{ns}': {e}")))
}

fn check_client_id(id: &str) -> Result<(), StateError> {
    client::check_client_id(id)
        .map_err(|e| StateError::Backend(format!("client {id:?}: client id {e}")))
}

fn check_phc(what: &str, phc: &str) -> Result<(), StateError> {
    rm_auth::secret::check_phc(phc)
        .map_err(|e| StateError::Backend(format!("{what}: not an Argon2 PHC string: {e}")))
}

/// Parses the file and upserts its entries; how many.
pub async fn apply(state: &State, path: &Path) -> Result<usize, StateError> {
    let text =
        std::fs::read_to_string(path).map_err(|e| StateError::Backend(format!("reading: {e}")))?;
    let file: File =
        toml::from_str(&text).map_err(|e| StateError::Backend(format!("parsing: {e}")))?;
    let now = chrono::Utc::now().to_rfc3339();
    let mut n = 0;
    for c in file.client {
        check_client_id(&c.id)?;
        check_phc(&format!("client {}", c.id), &c.secret_hash)?;
        check_ns(&format!("client {}", c.id), &c.namespace)?;
        state
            .put_client(&Client {
                id: c.id,
                namespace: c.namespace,
                secret_hash: c.secret_hash,
                scopes: c.scopes,
                created: now.clone(),
            })
            .await?;
        n += 1;
    }
    for k in file.api_key {
        check_phc(&format!("api_key {}", k.name), &k.key_hash)?;
        check_ns(&format!("api_key {}", k.name), &k.namespace)?;
        if k.lookup.len() != 64 || !k.lookup.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(StateError::Backend(format!(
                "api_key {}: lookup must be 64 hex digits (SHA-256 of the key)",
                k.name
            )));
        }
        state
            .put_api_key(&ApiKey {
                key_id: k.name.clone(),
                name: k.name,
                namespace: k.namespace,
                lookup: k.lookup.to_ascii_lowercase(),
                key_hash: k.key_hash,
                created: now.clone(),
            })
            .await?;
        n += 1;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rm_auth::secret;

    #[tokio::test]
    async fn file_entries_authenticate() {
        let dir = tempfile::tempdir().unwrap();
        let state = State::open_embedded(dir.path()).unwrap();
        let path = dir.path().join("clients.toml");
        std::fs::write(
            &path,
            format!(
                "[[client]]\nid = \"p\"\nsecret_hash = \"{}\"\nscopes = [\"ads\"]\n\n[[api_key]]\nname = \"erp\"\nlookup = \"{}\"\nkey_hash = \"{}\"\n",
                secret::hash("s"),
                secret::lookup_digest("k"),
                secret::hash("k")
            ),
        )
        .unwrap();
        assert_eq!(apply(&state, &path).await.unwrap(), 2);
        let c = state.client("p").await.unwrap().unwrap();
        assert!(secret::verify("s", &c.secret_hash));
        assert_eq!(c.scopes, vec![Scope::Ads]);
        let k = state
            .api_key(&secret::lookup_digest("k"))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(k.name, "erp");
        std::fs::write(
            &path,
            "[[client]]\nid = \"p\"\nsecret_hash = \"plain\"\nscopes = []\n",
        )
        .unwrap();
        assert!(apply(&state, &path).await.is_err());
    }

    /// The client rule the admin API and the `clients` subcommand apply: a client id
    /// with ':' (HTTP Basic could not send it) is refused here too.
    #[tokio::test]
    async fn client_ids_follow_the_client_rule() {
        let dir = tempfile::tempdir().unwrap();
        let state = State::open_embedded(dir.path()).unwrap();
        let path = dir.path().join("clients.toml");
        std::fs::write(
            &path,
            format!(
                "[[client]]\nid = \"a:b\"\nsecret_hash = \"{}\"\nscopes = [\"ads\"]\n",
                secret::hash("s")
            ),
        )
        .unwrap();
        let e = apply(&state, &path).await.unwrap_err().to_string();
        assert!(e.contains("must not contain ':'"), "{e}");
        assert!(state.client("a:b").await.unwrap().is_none());
    }
}
