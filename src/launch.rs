//! Starts the chosen services with their listeners, the shared event log and one
//! shutdown token, and waits for all of them.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use rm_schemas::topics;
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

async fn bind(addr: std::net::SocketAddr, what: &str) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding the {what} to {addr}"))
}

/// Runs `service` until SIGTERM/SIGINT, then drains.
pub async fn run(service: Service, settings: Settings) -> anyhow::Result<()> {
    let shutdown = rm_service::shutdown::on_signal();
    let drain = Duration::from_secs(settings.drain_deadline_secs);
    let runs_edge = matches!(service, Service::All | Service::Ingest);
    let runs_aggregator = matches!(service, Service::All | Service::Aggregate);
    let runs_api = matches!(service, Service::All | Service::Api);
    std::fs::create_dir_all(&settings.data_dir)
        .with_context(|| format!("creating data dir {}", settings.data_dir.display()))?;

    let mut tasks = tokio::task::JoinSet::new();
    if runs_edge {
        let listener = bind(settings.ingest.addr, "edge").await?;
        let log = rm_eventlog::open(
            &settings.kafka,
            &settings.log,
            &settings.data_dir,
            &[
                settings.ingest.topic.clone(),
                settings.ingest.rejected_topic_name.clone(),
                topics::ORDERS.to_owned(),
            ],
        )
        .await
        .context("opening the event log")?;
        let backend = log.backend();
        let (cfg, stop) = (settings.ingest.clone(), shutdown.clone());
        tasks.spawn(async move {
            rm_ingest::run(cfg, Arc::new(log), backend, listener, stop, drain)
                .await
                .context("edge")
        });
    }
    if runs_aggregator {
        let listener = bind(settings.aggregator.addr, "aggregator").await?;
        let stop = shutdown.clone();
        tasks.spawn(async move {
            rm_aggregator::run(listener, stop, drain)
                .await
                .context("aggregator")
        });
    }
    if runs_api {
        let listener = bind(settings.api.addr, "api").await?;
        let stop = shutdown.clone();
        tasks.spawn(async move { rm_api::run(listener, stop, drain).await.context("api") });
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
    result
}
