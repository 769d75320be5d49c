//! The admin subcommands `clients` and `keys`: manage OAuth clients and order API
//! keys in the api's embedded state (or PostgreSQL), each in its namespace, or print
//! hashed entries for a clients file; and `rebuild`, which recounts the report store's
//! tallies from its facts. A running api offers the same as the operator
//! API (`/v1/admin/...`); the embedded state is locked while the api runs. Client
//! ids and namespaces follow the one client rule (`rm_auth::client`).

use std::path::Path;

use anyhow::Context as _;
use rm_api::state::State;
use rm_auth::client::{self, ApiKey, Client, Scope};
use rm_auth::secret;

use crate::cli::{ClientsAction, KeysAction};

async fn open(data_dir: &Path, database_url: Option<&str>) -> anyhow::Result<State> {
    let state = match database_url.filter(|u| !u.trim().is_empty()) {
        Some(url) => State::connect_postgres(url)
            .await
            .context("connecting to the api's state in PostgreSQL")?,
        None => {
            crate::private_files::tighten(data_dir)
                .with_context(|| format!("narrowing {}", data_dir.display()))?;
            let state = State::open_embedded(data_dir).context("opening the api's state")?;
            crate::private_files::tighten_new(data_dir)
                .with_context(|| format!("narrowing {}", data_dir.display()))?;
            state
        }
    };
    rm_api::state::migrate::run(&state)
        .await
        .context("converting the api's state")?;
    Ok(state)
}

fn check_namespace(ns: &str) -> anyhow::Result<()> {
    client::check_namespace(ns).map_err(|e| anyhow::anyhow!("namespace '{ns}': {e}"))
}

fn check_client_id(id: &str) -> anyhow::Result<()> {
    client::check_client_id(id).map_err(|e| anyhow::anyhow!("client id {id:?}: {e}"))
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
        namespace,
        scopes: sc,
    } = &action
    {
        check_client_id(id)?;
        check_namespace(namespace)?;
        println!(
            "[[client]]\nid = {:?}\nnamespace = {:?}\nsecret_hash = {:?}\nscopes = {:?}",
            id,
            namespace,
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
                namespace,
                scopes: sc,
                secret: s,
            } => {
                check_client_id(&id)?;
                check_namespace(&namespace)?;
                let scopes = scopes(&sc)?;
                let plain = s.unwrap_or_else(secret::generate);
                state
                    .put_client(&Client {
                        id: id.clone(),
                        namespace: namespace.clone(),
                        secret_hash: secret::hash(&plain),
                        scopes: scopes.clone(),
                        created: chrono::Utc::now().to_rfc3339(),
                    })
                    .await?;
                println!(
                    "client_id={id}\nclient_secret={plain}\nnamespace={namespace}\nscopes={}",
                    names(&scopes)
                );
                eprintln!("the secret is shown once and stored only as a hash");
            }
            ClientsAction::List => {
                for c in state.clients().await? {
                    println!(
                        "{}\t{}\t{}\t{}",
                        c.id,
                        c.namespace,
                        names(&c.scopes),
                        c.created
                    );
                }
            }
            ClientsAction::Remove { id } => {
                anyhow::ensure!(state.client(&id).await?.is_some(), "no client '{id}'");
                state
                    .put_revocation(&id, chrono::Utc::now().timestamp())
                    .await?;
                state.remove_client(&id).await?;
                println!("removed client {id}");
            }
            ClientsAction::Hash { .. } => {}
        }
        Ok(())
    })
}

/// Runs `retail-media keys <action>`.
pub fn keys(action: KeysAction, data_dir: &Path, database_url: Option<&str>) -> anyhow::Result<()> {
    if let KeysAction::Hash {
        name,
        key,
        namespace,
    } = &action
    {
        check_namespace(namespace)?;
        println!(
            "[[api_key]]\nname = {:?}\nnamespace = {:?}\nlookup = {:?}\nkey_hash = {:?}",
            name,
            namespace,
            secret::lookup_digest(key),
            secret::hash(key)
        );
        return Ok(());
    }
    runtime()?.block_on(async {
        let state = open(data_dir, database_url).await?;
        match action {
            KeysAction::Add {
                name,
                namespace,
                key,
            } => {
                check_namespace(&namespace)?;
                let plain = key.unwrap_or_else(secret::generate);
                state
                    .put_api_key(&ApiKey {
                        key_id: name.clone(),
                        namespace: namespace.clone(),
                        name: name.clone(),
                        lookup: secret::lookup_digest(&plain),
                        key_hash: secret::hash(&plain),
                        created: chrono::Utc::now().to_rfc3339(),
                    })
                    .await?;
                println!("name={name}\nnamespace={namespace}\nkey={plain}");
                eprintln!(
                    "the key is shown once and stored only as a hash; send it as `curl -u KEY:`"
                );
            }
            KeysAction::List => {
                for k in state.api_keys().await? {
                    println!("{}\t{}\t{}", k.name, k.namespace, k.created);
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

/// Runs `retail-media rebuild`: every tally deleted and counted again from the stored
/// facts; prints what it counted.
pub fn rebuild(a: &crate::cli::RebuildArgs) -> anyhow::Result<()> {
    runtime()?.block_on(async {
        let store = rm_store::open(&a.store, &a.data_dir)
            .await
            .context("opening the report store (is an aggregator or `all` running on it?)")?;
        let window = rm_store::model::traffic::ClickWindow::secs(a.click_window_secs);
        store
            .rebuild_tallies(window, &a.store.attribution())
            .await
            .context("recounting the tallies")?;
        let clicks = rm_store::billable_clicks(&store, None)
            .await
            .context("reading the tallies back")?
            .unwrap_or_default();
        println!(
            "tallies rebuilt: {} billable clicks over {} campaign-days",
            clicks.iter().map(|d| d.value).sum::<i64>(),
            clicks.len()
        );
        Ok(())
    })
}
