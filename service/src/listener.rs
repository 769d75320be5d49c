//! Connection hygiene settings every listener shares (`RM_HTTP_*`): how long a client
//! may take to send a request head, stay idle between requests and send a body, and
//! how many connections one listener keeps open at once. The binary flattens
//! [`ListenerConfig`] into its settings and hands each service the same
//! [`ServeOptions`], which [`crate::serve`] applies to each connection.

use std::time::Duration;

/// Default of `--http-header-timeout-secs`.
pub const DEFAULT_HEADER_TIMEOUT_SECS: u64 = 10;
/// Default of `--http-idle-timeout-secs`.
pub const DEFAULT_IDLE_TIMEOUT_SECS: u64 = 60;
/// Default of `--http-body-timeout-secs`.
pub const DEFAULT_BODY_TIMEOUT_SECS: u64 = 30;
/// Default of `--http-max-connections`.
pub const DEFAULT_MAX_CONNECTIONS: usize = 10_000;

/// Timeouts and the connection cap of every HTTP listener (edge, aggregator, api).
#[derive(Debug, Clone, clap::Args)]
pub struct ListenerConfig {
    /// Seconds a client has to send a whole request head (request line and headers),
    /// from its connection or from the first byte after an idle pause; then the
    /// connection is closed (nginx `client_header_timeout`).
    #[arg(
        long = "http-header-timeout-secs",
        env = "RM_HTTP_HEADER_TIMEOUT_SECS",
        default_value_t = DEFAULT_HEADER_TIMEOUT_SECS
    )]
    pub header_timeout_secs: u64,
    /// Seconds a keep-alive connection may sit without a request before it is closed
    /// (nginx `keepalive_timeout`).
    #[arg(
        long = "http-idle-timeout-secs",
        env = "RM_HTTP_IDLE_TIMEOUT_SECS",
        default_value_t = DEFAULT_IDLE_TIMEOUT_SECS
    )]
    pub idle_timeout_secs: u64,
    /// Seconds a request body has to arrive whole once its handler reads it; then the
    /// request ends with 408 and the connection is closed (nginx `client_body_timeout`).
    #[arg(
        long = "http-body-timeout-secs",
        env = "RM_HTTP_BODY_TIMEOUT_SECS",
        default_value_t = DEFAULT_BODY_TIMEOUT_SECS
    )]
    pub body_timeout_secs: u64,
    /// Most connections one listener keeps open; further clients wait in the kernel's
    /// accept backlog until one closes (nginx `worker_connections`).
    #[arg(
        long = "http-max-connections",
        env = "RM_HTTP_MAX_CONNECTIONS",
        default_value_t = DEFAULT_MAX_CONNECTIONS
    )]
    pub max_connections: usize,
    /// Most connections one source (an IPv4 address, an IPv6 /64) keeps open on one
    /// listener; more from it are closed at once, so one client cannot take every
    /// connection from the others. Unset: a quarter of `RM_HTTP_MAX_CONNECTIONS`; 0:
    /// no per-source bound (behind a reverse proxy, where every client is the proxy).
    #[arg(
        long = "http-max-connections-per-source",
        env = "RM_HTTP_MAX_CONNECTIONS_PER_SOURCE"
    )]
    pub max_connections_per_source: Option<usize>,
}

impl ListenerConfig {
    /// The serving options of every listener, with `drain` as the drain deadline.
    /// Zero timeouts and a zero cap are raised to 1 (a listener that closes every
    /// connection at once would serve nothing).
    pub fn serve_options(&self, drain: Duration) -> ServeOptions {
        let secs = |s: u64| Duration::from_secs(s.max(1));
        ServeOptions {
            drain_deadline: drain,
            header_timeout: secs(self.header_timeout_secs),
            idle_timeout: secs(self.idle_timeout_secs),
            body_timeout: secs(self.body_timeout_secs),
            max_connections: self.max_connections.max(1),
            max_connections_per_source: self
                .max_connections_per_source
                .unwrap_or(self.max_connections.max(1).div_ceil(4)),
            ..ServeOptions::default()
        }
    }
}

/// Default of `--drain-deadline-secs`: how long shutdown waits for in-flight requests.
pub const DEFAULT_DRAIN_DEADLINE_SECS: u64 = 10;

/// Serving options.
#[derive(Debug, Clone, Copy)]
pub struct ServeOptions {
    /// Largest request head (request line plus headers) in bytes.
    pub max_head_bytes: usize,
    /// How long shutdown waits for in-flight requests.
    pub drain_deadline: Duration,
    /// How long a client has to send a request head.
    pub header_timeout: Duration,
    /// How long a keep-alive connection may be idle between requests.
    pub idle_timeout: Duration,
    /// How long a request body has to arrive, once a handler reads it (the loop
    /// itself reads no bodies; handlers that do bound them with this).
    pub body_timeout: Duration,
    /// Most connections open at once on the listener.
    pub max_connections: usize,
    /// Most connections one source keeps open (0: no bound).
    pub max_connections_per_source: usize,
}

impl Default for ServeOptions {
    fn default() -> Self {
        Self {
            max_head_bytes: 16 * 1024,
            drain_deadline: Duration::from_secs(DEFAULT_DRAIN_DEADLINE_SECS),
            header_timeout: Duration::from_secs(DEFAULT_HEADER_TIMEOUT_SECS),
            idle_timeout: Duration::from_secs(DEFAULT_IDLE_TIMEOUT_SECS),
            body_timeout: Duration::from_secs(DEFAULT_BODY_TIMEOUT_SECS),
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_connections_per_source: DEFAULT_MAX_CONNECTIONS.div_ceil(4),
        }
    }
}
