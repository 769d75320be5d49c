//! The admin subcommands `clients` and `keys`: manage OAuth clients and order API
//! keys in the api's embedded state, or print hashed entries for a clients file.

use std::path::Path;

use anyhow::Context as _;
use rm_api::auth::secret;
use rm_api::model::client::{ApiKey, Client, Scope};
use rm_api::state::State;

use crate::cli::{ClientsAction, KeysAction};

async fn open(data_dir: &Path, database_url: Option<&str>) -> anyhow::Result<State> {
    match database_url.filter(|u| !u.trim().is_empty()) {
        Some(url) => State::connect_postgres(url)
            .await
            .context("connecting to the api's state in PostgreSQL"),
        None => State::open_embedded(data_dir).context("opening the api's state"),
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

fn scopes(s: &str) -> anyhow::Result<Vec<Scope>> {
    Scope::parse_list(s).map_err(anyhow::Error::msg)
}

fn names(s: &[Scope]) -> String {
    s.iter().map(|x| x.as_str()).collect::<Vec<_>>().join(",")
}

/// Runs `retail-media clients <action>`.
pub fn clients(
    action: ClientsAction,
    data_dir: &Path,
    database_url: Option<&str>,
) -> anyhow::Result<()> {
    if let ClientsAction::Hash {
        id,
        secret: s,
        scopes: sc,
    } = &action
    {
        println!(
            "[[client]]\nid = {:?}\nsecret_hash = {:?}\nscopes = {:?}",
            id,
            secret::hash(s),
            scopes(sc)?.iter().map(|x| x.as_str()).collect::<Vec<_>>()
        );
        return Ok(());
    }
    runtime()?.block_on(async {
        let state = open(data_dir, database_url).await?;
        match action {
            ClientsAction::Add {
                id,
                scopes: sc,
                secret: s,
            } => {
                anyhow::ensure!(
                    !id.is_empty() && !id.contains(':'),
                    "a client id must be non-empty and have no ':'"
                );
                let scopes = scopes(&sc)?;
                let plain = s.unwrap_or_else(secret::generate);
                state
                    .put_client(&Client {
                        id: id.clone(),
                        secret_hash: secret::hash(&plain),
                        scopes: scopes.clone(),
                        created: chrono::Utc::now().to_rfc3339(),
                    })
                    .await?;
                println!(
                    "client_id={id}\nclient_secret={plain}\nscopes={}",
                    names(&scopes)
                );
                eprintln!("the secret is shown once and stored only as a hash");
            }
            ClientsAction::List => {
                for c in state.clients().await? {
                    println!("{}\t{}\t{}", c.id, names(&c.scopes), c.created);
                }
            }
            ClientsAction::Remove { id } => {
                anyhow::ensure!(state.remove_client(&id).await?, "no client '{id}'");
                println!("removed client {id}");
            }
            ClientsAction::Hash { .. } => {}
        }
        Ok(())
    })
}

/// Runs `retail-media keys <action>`.
pub fn keys(action: KeysAction, data_dir: &Path, database_url: Option<&str>) -> anyhow::Result<()> {
    if let KeysAction::Hash { name, key } = &action {
        println!(
            "[[api_key]]\nname = {:?}\nlookup = {:?}\nkey_hash = {:?}",
            name,
            secret::lookup_digest(key),
            secret::hash(key)
        );
        return Ok(());
    }
    runtime()?.block_on(async {
        let state = open(data_dir, database_url).await?;
        match action {
            KeysAction::Add { name, key } => {
                let plain = key.unwrap_or_else(secret::generate);
                state
                    .put_api_key(&ApiKey {
                        name: name.clone(),
                        lookup: secret::lookup_digest(&plain),
                        key_hash: secret::hash(&plain),
                        created: chrono::Utc::now().to_rfc3339(),
                    })
                    .await?;
                println!("name={name}\nkey={plain}");
                eprintln!(
                    "the key is shown once and stored only as a hash; send it as `curl -u KEY:`"
                );
            }
            KeysAction::List => {
                for k in state.api_keys().await? {
                    println!("{}\t{}", k.name, k.created);
                }
            }
            KeysAction::Remove { name } => {
                let n = state.remove_api_key(&name).await?;
                anyhow::ensure!(n > 0, "no key named '{name}'");
                println!("removed {n} key(s) named {name}");
            }
            KeysAction::Hash { .. } => {}
        }
        Ok(())
    })
}
