//! Starts the chosen services with their listeners, the shared event log and store,
//! and one shutdown token, and waits for all of them.
//!
//! In one process (`all`) the edge and the aggregator share one embedded log and the
//! aggregator and the api share one store. Run as separate processes, the services
//! need Kafka and ClickHouse (the embedded files are locked by the process that
//! opens them).
//!
//! With `RM_OPS_ADDR` the process also serves its operations listener
//! ([`rm_service::ops_listener`]) until every service has drained, and the public
//! ports stop serving `/metrics`.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use rm_aggregator::source::{AnySource, EmbeddedSource, KafkaSource};
use rm_eventlog::AnyLog;
use rm_schemas::topics;
use rm_store::Backend as _;
use tokio::net::TcpListener;

use crate::cli::Settings;

/// Which services this process runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    /// Everything.
    All,
    /// The edge.
    Ingest,
    /// The aggregator.
    Aggregate,
    /// The api.
    Api,
}

/// The ad id keys: from the setting, or a key generated once under the data dir.
pub fn ad_id_keys(settings: &Settings) -> anyhow::Result<rm_schemas::ad_id::AdIdKeys> {
    use rm_schemas::ad_id::AdIdKeys;
    if let Some(list) = settings
        .ad_id_keys
        .as_deref()
        .filter(|s| !s.trim().is_empty())
    {
        return AdIdKeys::from_list(list).context("RM_AD_ID_KEYS");
    }
    let path = settings.data_dir.join("ad-id.key");
    let key = stored_key(&path, "RM_AD_ID_KEYS")?;
    AdIdKeys::from_list(key.trim()).with_context(|| format!("ad id key in {}", path.display()))
}

/// The key kept at `path`, generated (a fresh random key) and written there on first
/// use; `setting` is the variable that replaces it on several machines.
fn stored_key(path: &std::path::Path, setting: &str) -> anyhow::Result<String> {
    match std::fs::read_to_string(path) {
        Ok(k) => Ok(k),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let k = rm_schemas::ad_id::AdIdKeys::generate_key();
            let tmp = path.with_extension("key.tmp");
            crate::private_files::write_new(&tmp, &k)
                .with_context(|| format!("writing {}", tmp.display()))?;
            std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))?;
            tracing::info!(path = %path.display(), "generated a key (set {setting} when services run on several machines)");
            Ok(k)
        }
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

/// The secret of the consent pseudonyms: from the setting, or a key generated once
/// under the data dir.
pub fn consent_key(settings: &Settings) -> anyhow::Result<Vec<u8>> {
    if let Some(k) = settings
        .consent_id_key
        .as_deref()
        .filter(|s| !s.trim().is_empty())
    {
        anyhow::ensure!(k.len() >= 16, "RM_CONSENT_ID_KEY: at least 16 bytes");
        return Ok(k.as_bytes().to_vec());
    }
    let key = stored_key(
        &settings.data_dir.join("consent-id.key"),
        "RM_CONSENT_ID_KEY",
    )?;
    Ok(key.trim().as_bytes().to_vec())
}

/// The secret of the ageing passes: from the setting, or a key generated once under
/// the data dir.
pub fn identifier_key(settings: &Settings) -> anyhow::Result<Vec<u8>> {
    if let Some(k) = settings
        .identifier_key
        .as_deref()
        .filter(|s| !s.trim().is_empty())
    {
        anyhow::ensure!(k.len() >= 16, "RM_IDENTIFIER_KEY: at least 16 bytes");
        return Ok(k.as_bytes().to_vec());
    }
    let key = stored_key(
        &settings.data_dir.join("identifier.key"),
        "RM_IDENTIFIER_KEY",
    )?;
    Ok(key.trim().as_bytes().to_vec())
}

async fn bind(addr: std::net::SocketAddr, what: &str) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding the {what} to {addr}"))
}

/// Runs `service` until SIGTERM/SIGINT, then drains.
pub async fn run(service: Service, settings: Settings) -> anyhow::Result<()> {
    // The recorder first: services register their series as they start.
    rm_service::telemetry::install();
    if settings.ops_addr.is_some() {
        // Before any service builds its ops endpoints: /metrics moves off their ports.
        rm_service::ops_listener::enable();
    }
    let shutdown = rm_service::shutdown::on_signal();
    let serve = settings
        .http
        .serve_options(Duration::from_secs(settings.drain_deadline_secs));
    let runs_edge = matches!(service, Service::All | Service::Ingest);
    let runs_aggregator = matches!(service, Service::All | Service::Aggregate);
    let runs_api = matches!(service, Service::All | Service::Api);
    crate::private_files::tighten(&settings.data_dir)
        .with_context(|| format!("creating data dir {}", settings.data_dir.display()))?;

    let ad_keys = ad_id_keys(&settings)?;
    // The integration inspector: the edge records, the api (in one process) serves it.
    // It judges rule 2 with the debounce the aggregator's funnel report counts with.
    let inspector = rm_ingest::Inspector::from_config(&settings.ingest, settings.debounce());

    // Bind first, so a port conflict fails fast before any state is opened.
    let ops_listener = match settings.ops_addr {
        Some(addr) => Some(bind(addr, "operations listener").await?),
        None => None,
    };
    let edge_listener = if runs_edge {
        Some(bind(settings.ingest.addr, "edge").await?)
    } else {
        None
    };
    let agg_listener = if runs_aggregator {
        Some(bind(settings.aggregator.addr, "aggregator").await?)
    } else {
        None
    };
    let api_listener = if runs_api {
        Some(bind(settings.api.addr, "api").await?)
    } else {
        None
    };

    let log = if runs_edge || runs_api || (runs_aggregator && settings.kafka.brokers.is_none()) {
        let topics = [
            settings.ingest.topic.clone(),
            settings.ingest.rejected_topic_name.clone(),
            topics::ORDERS.to_owned(),
        ];
        let log = rm_eventlog::open(&settings.kafka, &settings.log, &settings.data_dir, &topics)
            .await
            .context("opening the event log")?;
        tracing::info!(backend = log.backend(), "event log open");
        Some(Arc::new(log))
    } else {
        None
    };
    let store = if runs_aggregator || runs_api {
        let s = rm_store::open(&settings.store, &settings.data_dir)
            .await
            .context("opening the report store")?;
        tracing::info!(backend = s.backend(), "report store open");
        Some(Arc::new(s))
    } else {
        None
    };

    // The operations listener outlives the services: probes and scrapes see the drain.
    let ops_stop = rm_service::CancellationToken::new();
    let ops_task = ops_listener.map(|listener| {
        let expected = [runs_edge, runs_aggregator, runs_api]
            .iter()
            .filter(|r| **r)
            .count();
        tokio::spawn(rm_service::ops_listener::run(
            listener,
            expected,
            ops_stop.clone(),
            serve,
        ))
    });
    let mut tasks = tokio::task::JoinSet::new();
    if let (Some(listener), Some(log)) = (edge_listener, log.clone()) {
        let backend = log.backend();
        let (cfg, stop) = (settings.ingest.clone(), shutdown.clone());
        let deps = rm_ingest::EdgeDeps {
            ad_keys: ad_keys.clone(),
            inspector: inspector.clone(),
            consent_key: consent_key(&settings)?,
        };
        tasks.spawn(async move {
            rm_ingest::run(cfg, log, backend, listener, stop, serve, deps)
                .await
                .context("edge")
        });
    }
    if let (Some(listener), Some(store)) = (agg_listener, store.clone()) {
        let cfg = settings.aggregator.clone();
        let source = match log.as_deref() {
            Some(AnyLog::Embedded(l)) if settings.kafka.brokers.is_none() => {
                AnySource::Embedded(EmbeddedSource::new(l.clone(), &cfg.group, &cfg.topic)?)
            }
            _ => AnySource::Kafka(KafkaSource::connect(
                &settings.kafka,
                &cfg.group,
                &cfg.topic,
            )?),
        };
        let stop = shutdown.clone();
        let ageing_key = if cfg.identifier_retention_days > 0 {
            let k = identifier_key(&settings)?;
            Some(rm_store::model::ageing::AgeingKey::new(&k))
        } else {
            tracing::info!("RM_IDENTIFIER_RETENTION_DAYS=0: shopper ids are kept for ever");
            None
        };
        let shared = rm_aggregator::Shared {
            debounce: settings.debounce(),
            ad_ttl_secs: settings.ad_ttl_secs,
            windows: settings.store.attribution(),
            ageing_key,
        };
        cfg.check_retention(&shared).map_err(anyhow::Error::msg)?;
        tasks.spawn(async move {
            rm_aggregator::run(cfg, shared, source, store, listener, stop, serve)
                .await
                .context("aggregator")
        });
    }
    if let (Some(listener), Some(store)) = (api_listener, store) {
        let stop = shutdown.clone();
        let mut cfg = settings.api.clone();
        cfg.demo = settings.demo(service == Service::All);
        cfg.ad_ttl_secs = settings.ad_ttl_secs;
        let state = match cfg.database_url.as_deref().filter(|u| !u.trim().is_empty()) {
            Some(url) => rm_api::state::State::connect_postgres(url).await,
            None => rm_api::state::State::open_embedded(&settings.data_dir),
        }
        .context("opening the api's state")?;
        // A state file created just now: key material, so the service's user only.
        crate::private_files::tighten_new(&settings.data_dir)
            .with_context(|| format!("narrowing {}", settings.data_dir.display()))?;
        tracing::info!(backend = state.backend(), "api state open");
        let deps = rm_api::ApiDeps {
            store,
            state: Arc::new(state),
            log: log.clone(),
            ad_keys: ad_keys.clone(),
            windows: rm_store::model::attribution::Windows {
                // The reports window clicks as the edge does (`RM_CLICK_WINDOW_SECS`).
                billable_clicks: rm_store::model::traffic::ClickWindow::secs(
                    settings.ingest.click_window_secs,
                ),
                ..settings.store.attribution()
            },
            inspector: runs_edge.then(|| {
                let i = inspector.clone();
                Arc::new(move |query: &str, v: &rm_schemas::namespace::Viewer| {
                    rm_ingest::debug_answer(&i, query, v)
                }) as rm_api::InspectorFn
            }),
            inspector_forget: runs_edge.then(|| {
                let i = inspector.clone();
                Arc::new(move |id: &str, ns: Option<&str>| i.forget(id, ns)) as rm_api::ForgetFn
            }),
        };
        tasks.spawn(async move {
            rm_api::run(cfg, deps, listener, stop, serve)
                .await
                .context("api")
        });
    }
    let mut result = Ok(());
    while let Some(done) = tasks.join_next().await {
        let outcome = done.context("service task panicked").and_then(|r| r);
        if let Err(e) = outcome {
            tracing::error!(error = format!("{e:#}"), "service stopped with an error");
            shutdown.cancel();
            result = Err(e);
        } else if !shutdown.is_cancelled() {
            // A service ended on its own: stop the others too.
            shutdown.cancel();
        }
    }
    ops_stop.cancel();
    if let Some(task) = ops_task {
        match task.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "operations listener did not drain"),
            Err(e) => tracing::warn!(error = %e, "operations listener panicked"),
        }
    }
    result
}
