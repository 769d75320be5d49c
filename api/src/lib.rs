//! The partner API service (port 8081 by default).
//!
//! Every partner route is one row of the route table naming its handler, written
//! beside the handler and its body types in its resource's module ([`endpoints`]):
//! the router ([`routes`]) matches the row, checks its access rule (bearer JWT scope
//! or the orders API key, with `rm_auth`; the token endpoint checks its OAuth client itself) and calls
//! the handler, which reads the body within a bound. The OpenAPI document
//! ([`openapi`]) is generated from the same table. Errors become the spec's error
//! status object (or the token endpoint's RFC 6749 body) in one place ([`error`]).
//! State (clients, keys, segments, campaigns, catalog, orders taken) lives behind
//! [`state`]; reports are read from the aggregator's store ([`reports`]). Ads are
//! decided by `rm_ads` from inputs the api reads for it ([`ads`]), with VAST from
//! `rm_vast`.

pub mod ads;
pub mod auth;
pub mod demo;
pub mod endpoints;
pub mod error;
pub mod metrics;
pub mod model;
pub mod openapi;
pub mod reports;
pub mod routes;
pub mod state;
pub mod tenancy;
pub use endpoints::sdk;

#[cfg(test)]
mod access_tests;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Method;
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use rm_eventlog::AnyLog;
use rm_service::ops::Ops;
use rm_service::serve::{Handler, ServeOptions};
use rm_service::Response;
use rm_store::{AnyStore, Backend};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use error::ApiError;
use routes::{Access, Call, Match, Route};
use state::State;

/// The api's settings.
#[derive(Debug, Clone, clap::Args)]
pub struct ApiConfig {
    /// Address the api listens on.
    #[arg(
        id = "api_addr",
        long = "api-addr",
        env = "RM_API_ADDR",
        default_value = "127.0.0.1:8081"
    )]
    pub addr: SocketAddr,
    /// Lifetime of issued access tokens, in seconds.
    #[arg(
        long = "api-token-ttl-secs",
        env = "RM_API_TOKEN_TTL_SECS",
        default_value_t = 3600
    )]
    pub token_ttl_secs: u64,
    /// `iss` of issued tokens; tokens from any other issuer are refused.
    #[arg(
        long = "api-token-issuer",
        env = "RM_API_TOKEN_ISSUER",
        default_value = "retail-media"
    )]
    pub token_issuer: String,
    /// `aud` of issued tokens; tokens for any other audience are refused.
    #[arg(
        long = "api-token-audience",
        env = "RM_API_TOKEN_AUDIENCE",
        default_value = "retail-media-partner-api"
    )]
    pub token_audience: String,
    /// Failed-authentication limits and the queue of secret checks.
    #[command(flatten)]
    pub limits: rm_auth::limiter::LimitSettings,
    /// Largest accepted request body, in bytes.
    #[arg(long = "api-max-body-bytes", env = "RM_API_MAX_BODY_BYTES", default_value_t = 4 << 20)]
    pub max_body_bytes: usize,
    /// Load the demo data set (demo client, orders key, catalog, campaigns, segment)
    /// at start, without overwriting. Set by the binary from `--api-demo` /
    /// `RM_API_DEMO`, whose default depends on the subcommand (on only for the quick
    /// start's `retail-media all`); off unless set.
    #[arg(skip)]
    pub demo: bool,
    /// Base URL of the beacon edge that served ads and VAST tags point at.
    #[arg(
        long = "api-beacon-base-url",
        env = "RM_API_BEACON_BASE_URL",
        default_value = "http://127.0.0.1:8080"
    )]
    pub beacon_base_url: String,
    /// Seconds a served ad stays billable (its realised id's expiry): the binary's
    /// `RM_API_AD_TTL_SECS`, which the aggregator reads too.
    #[arg(skip = rm_schemas::ad_id::DEFAULT_TTL_SECS)]
    pub ad_ttl_secs: i64,
    /// Seconds between rebuilds of the ads index from campaigns, catalog and spend.
    #[arg(
        long = "api-ads-refresh-secs",
        env = "RM_API_ADS_REFRESH_SECS",
        default_value_t = 5
    )]
    pub ads_refresh_secs: u64,
    /// Reports that run at once in all (`crate::reports::admission`).
    #[arg(
        long = "api-reports-concurrent",
        env = "RM_API_REPORTS_CONCURRENT",
        default_value_t = reports::admission::DEFAULT_CONCURRENT,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub reports_concurrent: u32,
    /// Reports one namespace runs at once; one more is a 429
    /// (`crate::reports::admission`).
    #[arg(
        long = "api-reports-per-namespace",
        env = "RM_API_REPORTS_PER_NAMESPACE",
        default_value_t = reports::admission::DEFAULT_PER_NAMESPACE,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub reports_per_namespace: u32,
    /// Seconds `DELETE /v1/shoppers/{trackingId}` waits for the aggregator to run the
    /// erasure before it answers 202 (pending) instead of 200.
    #[arg(
        long = "api-erasure-wait-secs",
        env = "RM_API_ERASURE_WAIT_SECS",
        default_value_t = 30
    )]
    pub erasure_wait_secs: u64,
    /// A TOML file of OAuth clients and API keys (with Argon2 hashes) to upsert at
    /// start; see `retail-media clients --help`.
    #[arg(long = "api-clients-file", env = "RM_API_CLIENTS_FILE")]
    pub clients_file: Option<PathBuf>,
    /// PostgreSQL URL of the api's state (`postgres://user:password@host:port/db`), so
    /// several api instances share it; unset: embedded under the data dir.
    #[arg(
        id = "api_database_url",
        long = "api-database-url",
        env = "RM_API_DATABASE_URL",
        hide_env_values = true
    )]
    pub database_url: Option<String>,
}

/// The shortest time between two rebuilds of the ads index after campaign changes.
const ADS_REBUILD_MIN_GAP: Duration = Duration::from_secs(1);

/// The api's request handler.
#[derive(Clone)]
pub struct ApiHandler {
    inner: Arc<Api>,
}

/// What every route handler runs on.
struct Api {
    ops: Ops,
    store: Arc<AnyStore>,
    state: Arc<State>,
    auth: rm_auth::Auth,
    log: Option<Arc<AnyLog>>,
    routes: Vec<Route>,
    openapi: Bytes,
    max_body: usize,
    body_timeout: Duration,
    ads: rm_ads::AdsEngine,
    serving: rm_ads::Serving,
    windows: rm_store::model::attribution::Windows,
    inspector: Option<InspectorFn>,
    inspector_forget: Option<ForgetFn>,
    erasure_wait: Duration,
    reports: reports::admission::Admission,
}

impl Handler for ApiHandler {
    async fn call(&self, req: http::Request<Incoming>) -> Response {
        let api = &*self.inner;
        if let Some(r) = api.ops.route(req.method(), req.uri().path()) {
            return r;
        }
        let started = Instant::now();
        let (route, captured) = match routes::find(&api.routes, req.method(), req.uri().path()) {
            Match::Found(r, c) => (r, c),
            Match::MethodNotAllowed(allowed) => {
                let allow: Vec<&str> = allowed.iter().map(Method::as_str).collect();
                metrics::request("other", 405, started.elapsed());
                return ApiError::MethodNotAllowed(allow.join(", ")).response();
            }
            Match::NotFound => {
                metrics::request("other", 404, started.elapsed());
                let path = req.uri().path();
                return ApiError::NotFound(format!("no route for {path}")).response();
            }
        };
        let r = api
            .serve(route, captured, req)
            .await
            .unwrap_or_else(|e| e.response());
        metrics::request(route.path, r.status().as_u16(), started.elapsed());
        r
    }
}

impl Api {
    /// The request body, read whole within the size bound and the body timeout (a
    /// body still arriving then is a 408, and the connection is closed).
    async fn body(&self, body: Incoming) -> Result<Bytes, ApiError> {
        let read = Limited::new(body, self.max_body).collect();
        let Ok(read) = tokio::time::timeout(self.body_timeout, read).await else {
            return Err(ApiError::BodyTimeout(self.body_timeout.as_secs()));
        };
        match read {
            Ok(c) => Ok(c.to_bytes()),
            Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(ApiError::invalid(
                "body",
                format!("larger than {} bytes", self.max_body),
            )),
            Err(e) => Err(ApiError::invalid("body", format!("could not be read: {e}"))),
        }
    }

    /// Checks the route's access rule, then calls its handler.
    async fn serve(
        &self,
        route: &Route,
        id: Option<String>,
        req: http::Request<Incoming>,
    ) -> Result<Response, ApiError> {
        let (parts, body) = req.into_parts();
        let caller = match route.access {
            Access::Bearer(scopes) => Some(
                self.auth
                    .bearer(parts.headers.get(http::header::AUTHORIZATION), scopes)?
                    .into(),
            ),
            Access::ApiKey => {
                let source = auth::peer_ip(&parts.extensions);
                let authorization = parts.headers.get(http::header::AUTHORIZATION);
                let key = self
                    .auth
                    .api_key(&*self.state, authorization, source)
                    .await?;
                Some(tenancy::Caller {
                    client_id: key.key_id,
                    namespace: key.namespace,
                    admin: false,
                })
            }
            // The token endpoint authenticates its client itself: RFC 6749 answers.
            Access::Public | Access::ClientBasic => None,
        };
        let call = Call {
            parts,
            caller,
            id: id.unwrap_or_default(),
            body,
        };
        (route.handler)(self, call).await
    }
}

/// Everything the api runs on.
pub struct ApiDeps {
    /// The report store.
    pub store: Arc<AnyStore>,
    /// The api's own state.
    pub state: Arc<State>,
    /// The event log orders are written to (none: `POST /v1/orders` answers 503).
    pub log: Option<Arc<AnyLog>>,
    /// Keys that sign realised ad ids and click destinations.
    pub ad_keys: rm_schemas::ad_id::AdIdKeys,
    /// Attribution windows of the sales report.
    pub windows: rm_store::model::attribution::Windows,
    /// The edge's integration inspector, when the edge runs in this process: a
    /// tracking id's report.
    pub inspector: Option<InspectorFn>,
    /// The edge's inspector forgetting a shopper's events (an erasure), when the edge
    /// runs in this process.
    pub inspector_forget: Option<ForgetFn>,
}

/// The integration inspector's route (`GET /v1/debug/events`), as the edge answers it
/// (`rm_ingest::debug_route::answer`: one implementation on both ports): the
/// answer to a request's query string for a verified viewer.
pub type InspectorFn = Arc<dyn Fn(&str, &rm_schemas::namespace::Viewer) -> Response + Send + Sync>;

/// The inspector forgetting the events of a tracking id of a namespace (`None`:
/// every one); how many it dropped (`rm_ingest::Inspector::forget`).
pub type ForgetFn = Arc<dyn Fn(&str, Option<&str>) -> usize + Send + Sync>;

/// Opens the token keys (their seeds sealed with a key derived from `ad_keys`, see
/// `rm_auth::seal`) and loads the demo data and clients file as configured.
pub async fn prepare(
    config: &ApiConfig,
    state: &State,
    ad_keys: &rm_schemas::ad_id::AdIdKeys,
) -> Result<rm_auth::Auth, ApiError> {
    state::migrate::run(state)
        .await
        .map_err(|e| ApiError::Internal(format!("converting the api state: {e}")))?;
    if config.demo {
        let added = demo::load(state)
            .await
            .map_err(|e| ApiError::Internal(format!("loading demo data: {e}")))?;
        tracing::warn!(
            added,
            "demo data loaded (client demo-client/demo-secret, operator demo-operator/demo-operator-secret with scope admin, orders key demo-orders-key): set RM_API_DEMO=false and remove them before exposing the api"
        );
    }
    if let Some(path) = &config.clients_file {
        let n = state::clients_file::apply(state, path)
            .await
            .map_err(|e| ApiError::Internal(format!("clients file {}: {e}", path.display())))?;
        tracing::info!(entries = n, path = %path.display(), "clients file applied");
    }
    let seal = rm_auth::seal::SeedSeal::from_ad_keys(ad_keys);
    let tokens = rm_auth::Tokens::load(
        state,
        &seal,
        &config.token_issuer,
        &config.token_audience,
        config.token_ttl_secs,
    )
    .await
    .map_err(|e| ApiError::Internal(format!("loading signing keys: {e}")))?;
    if tokens.resealed() > 0 {
        tracing::warn!(
            keys = tokens.resealed(),
            "token signing seeds found in clear (a state written before seeds were sealed) or sealed with an older ad id key: sealed again with the first of RM_AD_ID_KEYS"
        );
    }
    let auth = rm_auth::Auth::new(tokens, &config.limits);
    auth.refresh_revocations(state)
        .await
        .map_err(|e| ApiError::Internal(format!("loading revoked clients: {e}")))?;
    Ok(auth)
}

/// Runs the api on `listener` until `shutdown`, with `serve`'s timeouts, connection
/// cap and drain deadline (request bodies are read within its body timeout).
pub async fn run(
    config: ApiConfig,
    deps: ApiDeps,
    listener: TcpListener,
    shutdown: CancellationToken,
    serve: ServeOptions,
) -> Result<(), ApiError> {
    let auth = prepare(&config, &deps.state, &deps.ad_keys).await?;
    let routes = endpoints::table();
    metrics::register(&routes.iter().map(|r| r.path).collect::<Vec<_>>());
    let openapi = Bytes::from(openapi::document(&routes).to_string());
    let (ready_store, ready_state) = (Arc::clone(&deps.store), Arc::clone(&deps.state));
    let ops = Ops::until_shutdown(shutdown.clone(), move || {
        ready_state.readiness()?;
        ready_store.readiness()
    });
    let addr = listener.local_addr().ok();
    tracing::info!(?addr, state = deps.state.backend(), "api listening");
    if config.demo {
        if let Some(a) = addr {
            tracing::info!(
                "get a token: curl -s -u demo-client:demo-secret -d grant_type=client_credentials http://{a}/v1/oauth2/token"
            );
        }
    }
    let engine = rm_ads::AdsEngine::new();
    let inputs = ads::ApiInputs {
        state: &deps.state,
        store: &deps.store,
        click_window: deps.windows.billable_clicks,
    };
    if let Err(e) = engine.refresh(&inputs).await {
        tracing::warn!(error = %e, "ads: first index build failed; retrying in the background");
    }
    let serving = rm_ads::Serving {
        keys: deps.ad_keys.clone(),
        beacon_base: config.beacon_base_url.clone(),
        ad_ttl_secs: config.ad_ttl_secs,
    };
    let handler = ApiHandler {
        inner: Arc::new(Api {
            ops,
            store: deps.store,
            state: deps.state,
            auth,
            log: deps.log,
            routes,
            openapi,
            max_body: config.max_body_bytes,
            body_timeout: serve.body_timeout,
            ads: engine,
            serving,
            windows: deps.windows,
            inspector: deps.inspector,
            inspector_forget: deps.inspector_forget,
            erasure_wait: Duration::from_secs(config.erasure_wait_secs),
            reports: reports::admission::Admission::new(
                config.reports_concurrent as usize,
                config.reports_per_namespace as usize,
            ),
        }),
    };
    let refresher = {
        let inner = Arc::clone(&handler.inner);
        let stop = shutdown.clone();
        let every = Duration::from_secs(config.ads_refresh_secs.max(1));
        tokio::spawn(async move {
            let mut last = Instant::now();
            let mut revocations = Instant::now();
            loop {
                tokio::select! {
                    () = stop.cancelled() => break,
                    () = tokio::time::sleep(Duration::from_millis(200)) => {}
                }
                if revocations.elapsed() >= rm_auth::REVOCATIONS_REFRESH {
                    revocations = Instant::now();
                    if let Err(e) = inner.auth.refresh_revocations(&*inner.state).await {
                        tracing::warn!(error = %e, "revoked clients: reread failed; keeping the last list");
                    }
                }
                // Changes of every namespace coalesce: at most one rebuild a second
                // however often campaigns change, so no tenant's changes take the
                // rebuild from the others.
                let due = inner.ads.dirty() && last.elapsed() >= ADS_REBUILD_MIN_GAP;
                if due || last.elapsed() >= every {
                    last = Instant::now();
                    let inputs = ads::ApiInputs {
                        state: &inner.state,
                        store: &inner.store,
                        click_window: inner.windows.billable_clicks,
                    };
                    if let Err(e) = inner.ads.refresh(&inputs).await {
                        tracing::warn!(error = %e, "ads: index rebuild failed");
                    }
                }
            }
        })
    };
    rm_service::serve(listener, handler, shutdown, serve).await?;
    refresher.abort();
    Ok(())
}
