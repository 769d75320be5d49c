//! The command line: subcommands, settings, and where each setting comes from.
//!
//! Precedence, highest first: command-line flag, `RM_*` environment variable, TOML
//! file (`--config FILE` or `RM_CONFIG`), built-in default. A file key maps to the
//! variable of the same name: `kafka_brokers = "..."` at the top level, or
//! `brokers = "..."` in a `[kafka]` table, both set `RM_KAFKA_BROKERS`. An unknown
//! key in the file is an error that names it.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, CommandFactory, Parser, Subcommand};
use rm_aggregator::AggregatorConfig;
use rm_api::ApiConfig;
use rm_eventlog::{EmbeddedLogConfig, KafkaConfig};
use rm_ingest::IngestConfig;
use rm_service::listener::ListenerConfig;
use rm_store::StoreConfig;

/// Retail media partner platform: beacon edge, aggregator and partner API.
#[derive(Debug, Parser)]
#[command(name = "retail-media", version, args_conflicts_with_subcommands = true)]
pub struct Cli {
    /// What to run (default: all).
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Settings for the default `all`.
    #[command(flatten)]
    pub settings: Settings,
}

/// The services.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the edge, the aggregator and the api in one process (the default).
    All(Settings),
    /// Run only the beacon edge.
    Ingest(Settings),
    /// Run only the aggregator.
    Aggregate(Settings),
    /// Run only the partner api.
    Api(Settings),
    /// Manage OAuth clients (stored as Argon2 hashes in the api's state).
    Clients(AdminArgs<ClientsAction>),
    /// Manage the orders endpoint's API keys.
    Keys(AdminArgs<KeysAction>),
    /// Recount the report store's tallies (billable clicks per campaign and day, what
    /// spend reads) from its stored facts, after a rule or click window change. Stop
    /// the aggregators first (the embedded store is locked while one runs).
    Rebuild(RebuildArgs),
}

/// Arguments of `retail-media rebuild`.
#[derive(Debug, Args)]
pub struct RebuildArgs {
    /// Directory of the embedded store, when the store is embedded.
    #[arg(long = "data-dir", env = "RM_DATA_DIR", default_value = "./data")]
    pub data_dir: PathBuf,
    /// The click window the stored clicks are counted with (the reports' and the
    /// edge's `RM_CLICK_WINDOW_SECS`; 0 turns it off).
    #[arg(
        long = "click-window-secs",
        env = "RM_CLICK_WINDOW_SECS",
        default_value_t = rm_ingest::config::DEFAULT_CLICK_WINDOW_SECS
    )]
    pub click_window_secs: u64,
    /// Report store settings.
    #[command(flatten)]
    pub store: StoreConfig,
}

/// Arguments of the admin subcommands: where the api's state is, and the action.
#[derive(Debug, Args)]
pub struct AdminArgs<A: Subcommand> {
    /// What to do.
    #[command(subcommand)]
    pub action: A,
    /// Directory of the api's embedded state (stop the api first: the file is
    /// locked while it runs).
    #[arg(long = "data-dir", env = "RM_DATA_DIR", default_value = "./data")]
    pub data_dir: PathBuf,
    /// PostgreSQL URL of the api's state, when it lives there.
    #[arg(
        id = "admin_database_url",
        long = "api-database-url",
        env = "RM_API_DATABASE_URL",
        hide_env_values = true
    )]
    pub database_url: Option<String>,
}

/// `retail-media clients ...`.
#[derive(Debug, Subcommand)]
pub enum ClientsAction {
    /// Add a client (or replace its secret and scopes); prints the secret once.
    Add {
        /// The client id.
        id: String,
        /// The namespace (tenant) it acts in: `[a-z0-9_-]{1,64}`.
        #[arg(long, default_value = rm_schemas::namespace::DEFAULT)]
        namespace: String,
        /// Scopes, comma-separated: ads, segments, campaigns, reports, admin.
        #[arg(long, default_value = "ads")]
        scopes: String,
        /// The secret (default: a new random one).
        #[arg(long)]
        secret: Option<String>,
    },
    /// List clients, their namespaces and scopes.
    List,
    /// Remove a client (its tokens are refused from now on).
    Remove {
        /// The client id.
        id: String,
    },
    /// Print a `[[client]]` entry for RM_API_CLIENTS_FILE (hash only).
    Hash {
        /// The client id.
        id: String,
        /// The secret to hash.
        secret: String,
        /// The namespace (tenant) it acts in: `[a-z0-9_-]{1,64}`.
        #[arg(long, default_value = rm_schemas::namespace::DEFAULT)]
        namespace: String,
        /// Scopes, comma-separated.
        #[arg(long, default_value = "ads")]
        scopes: String,
    },
}

/// `retail-media keys ...`.
#[derive(Debug, Subcommand)]
pub enum KeysAction {
    /// Add an API key; prints the key once.
    Add {
        /// A name for the key.
        name: String,
        /// The namespace (tenant) its orders belong to: `[a-z0-9_-]{1,64}`.
        #[arg(long, default_value = rm_schemas::namespace::DEFAULT)]
        namespace: String,
        /// The key (default: a new random one).
        #[arg(long)]
        key: Option<String>,
    },
    /// List key names and namespaces.
    List,
    /// Remove every key with this name.
    Remove {
        /// The key's name.
        name: String,
    },
    /// Print an `[[api_key]]` entry for RM_API_CLIENTS_FILE (hash only).
    Hash {
        /// A name for the key.
        name: String,
        /// The key to hash.
        key: String,
        /// The namespace (tenant) its orders belong to: `[a-z0-9_-]{1,64}`.
        #[arg(long, default_value = rm_schemas::namespace::DEFAULT)]
        namespace: String,
    },
}

/// Every setting, shared by all subcommands.
#[derive(Debug, Clone, Args)]
pub struct Settings {
    /// TOML settings file (keys as the RM_ variables without the prefix, lower-case).
    #[arg(long = "config", env = "RM_CONFIG")]
    pub config: Option<PathBuf>,
    /// Directory for local state (embedded log, embedded store).
    #[arg(long = "data-dir", env = "RM_DATA_DIR", default_value = "./data")]
    pub data_dir: PathBuf,
    /// Seconds shutdown may take to drain in-flight work.
    #[arg(
        long = "drain-deadline-secs",
        env = "RM_DRAIN_DEADLINE_SECS",
        default_value_t = rm_service::serve::DEFAULT_DRAIN_DEADLINE_SECS
    )]
    pub drain_deadline_secs: u64,
    /// Log filter (tracing EnvFilter syntax), for example `info` or `rm_ingest=debug`.
    #[arg(long = "log-level", env = "RM_LOG", default_value = "info")]
    pub log_level: String,
    /// Keys that sign realised ad ids and click destinations: comma-separated
    /// base64url, at least 16 bytes each; the first signs, all verify. Every service
    /// of a deployment needs the same list. Unset: a key generated once and kept in
    /// `<data-dir>/ad-id.key` (fine for one machine).
    #[arg(long = "ad-id-keys", env = "RM_AD_ID_KEYS", hide_env_values = true)]
    pub ad_id_keys: Option<String>,
    /// The secret of the daily keyed hashes that replace the tracking ids of events
    /// whose consent string refuses our processing (`RM_TCF_VENDOR_ID`): any text of
    /// at least 16 bytes. Every edge of a deployment needs the same one (copies of one
    /// beacon then hash alike on every edge). Unset: a key generated once and kept in
    /// `<data-dir>/consent-id.key` (fine for one machine).
    #[arg(
        long = "consent-id-key",
        env = "RM_CONSENT_ID_KEY",
        hide_env_values = true
    )]
    pub consent_id_key: Option<String>,
    /// The secret of the keyed hashes that replace shopper ids past their retention
    /// (`RM_IDENTIFIER_RETENTION_DAYS`): any text of at least 16 bytes. Every
    /// aggregator of a deployment needs the same one (a shopper's aged rows then
    /// agree). Unset: a key generated once and kept in `<data-dir>/identifier.key`
    /// (fine for one machine). Keep it apart from the report store: with it, a known
    /// id can be found among aged rows.
    #[arg(
        long = "identifier-key",
        env = "RM_IDENTIFIER_KEY",
        hide_env_values = true
    )]
    pub identifier_key: Option<String>,
    /// Two controls of one video view closer than this (ms) are a rapid toggle (spec
    /// rule 2): the funnel report counts repeats of one control within it once, and the
    /// edge's inspector flags them. Give the aggregator and the edge the same value.
    #[arg(
        long = "control-debounce-ms",
        env = "RM_CONTROL_DEBOUNCE_MS",
        default_value_t = rm_schemas::video_funnel::DEFAULT_DEBOUNCE_MS
    )]
    pub control_debounce_ms: i64,
    /// Seconds a served ad stays billable (its realised id's expiry). The api mints
    /// ad ids with it and the aggregator judges when an ad was served by it (an event
    /// dated before is not billable): give both the same value.
    #[arg(
        long = "api-ad-ttl-secs",
        env = "RM_API_AD_TTL_SECS",
        default_value_t = rm_schemas::ad_id::DEFAULT_TTL_SECS
    )]
    pub ad_ttl_secs: i64,
    /// Address of the operations listener: `/healthz`, `/readyz` with the reasons a
    /// service is not ready, and `/metrics`, for probes and Prometheus inside the
    /// cluster. Set, the public ports stop serving `/metrics`. Unset (the quick
    /// start), every port serves `/metrics`; public `/readyz` never says why.
    #[arg(long = "ops-addr", env = "RM_OPS_ADDR")]
    pub ops_addr: Option<SocketAddr>,
    /// Load the api's demo data set (clients `demo-client` and `demo-operator` with
    /// published secrets, orders key, catalog, campaigns, segment) at start, without
    /// overwriting. Default: on for `retail-media all` (the quick start), off for
    /// `retail-media api`.
    #[arg(long = "api-demo", env = "RM_API_DEMO", action = clap::ArgAction::Set)]
    pub api_demo: Option<bool>,
    /// Timeouts and connection cap of every HTTP listener.
    #[command(flatten)]
    pub http: ListenerConfig,
    /// Kafka settings.
    #[command(flatten)]
    pub kafka: KafkaConfig,
    /// Embedded log settings.
    #[command(flatten)]
    pub log: EmbeddedLogConfig,
    /// Edge settings.
    #[command(flatten)]
    pub ingest: IngestConfig,
    /// Aggregator settings.
    #[command(flatten)]
    pub aggregator: AggregatorConfig,
    /// Report store settings (the aggregator writes it, the api reads it).
    #[command(flatten)]
    pub store: StoreConfig,
    /// Api settings.
    #[command(flatten)]
    pub api: ApiConfig,
}

impl Settings {
    /// Whether the api loads the demo data: as set, else only in the quick start
    /// (`all`, which `cargo run --release` runs).
    pub fn demo(&self, quick_start: bool) -> bool {
        self.api_demo.unwrap_or(quick_start)
    }

    /// The video funnel's control debounce, shared by the aggregator and the edge.
    pub fn debounce(&self) -> rm_schemas::video_funnel::Debounce {
        rm_schemas::video_funnel::Debounce::from_ms(self.control_debounce_ms)
    }
}

/// Every `RM_*` variable the binary reads.
pub fn known_env_vars() -> Vec<String> {
    let cmd = Cli::command();
    let mut vars: Vec<String> = cmd
        .get_arguments()
        .filter_map(|a| a.get_env().and_then(|e| e.to_str()).map(str::to_owned))
        .collect();
    vars.sort();
    vars.dedup();
    vars
}

/// Reads the settings file named by `--config`/`RM_CONFIG` (looked up before clap
/// parses) and returns the `RM_*` variables it sets that the environment does not.
pub fn file_settings(args: &[String]) -> anyhow::Result<Vec<(String, String)>> {
    let from_flag = args.iter().enumerate().find_map(|(i, a)| {
        a.strip_prefix("--config=").map(str::to_owned).or_else(|| {
            (a == "--config")
                .then(|| args.get(i + 1).cloned())
                .flatten()
        })
    });
    let Some(path) = from_flag.or_else(|| std::env::var("RM_CONFIG").ok()) else {
        return Ok(Vec::new());
    };
    let text = std::fs::read_to_string(&path)
        .map_err(|e| anyhow::anyhow!("reading settings file {path}: {e}"))?;
    let table: toml::Table = text
        .parse()
        .map_err(|e| anyhow::anyhow!("settings file {path}: {e}"))?;
    let known = known_env_vars();
    let mut out = Vec::new();
    flatten(&table, "", &mut out);
    let mut vars = Vec::new();
    for (key, value) in out {
        let var = format!("RM_{}", key.to_ascii_uppercase().replace('-', "_"));
        if !known.contains(&var) {
            anyhow::bail!(
                "settings file {path}: unknown setting '{key}' (no {var} variable exists)"
            );
        }
        if std::env::var_os(&var).is_none() {
            vars.push((var, value));
        }
    }
    Ok(vars)
}

fn flatten(table: &toml::Table, prefix: &str, out: &mut Vec<(String, String)>) {
    for (k, v) in table {
        let key = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}_{k}")
        };
        match v {
            toml::Value::Table(t) => flatten(t, &key, out),
            toml::Value::String(s) => out.push((key, s.clone())),
            toml::Value::Array(items) => out.push((
                key,
                items
                    .iter()
                    .map(|i| match i {
                        toml::Value::String(s) => s.clone(),
                        other => other.to_string(),
                    })
                    .collect::<Vec<_>>()
                    .join(","),
            )),
            other => out.push((key, other.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn every_setting_has_an_rm_variable() {
        let vars = known_env_vars();
        assert!(vars.contains(&"RM_KAFKA_BROKERS".to_string()));
        assert!(vars.contains(&"RM_DATA_DIR".to_string()));
        assert!(vars.iter().all(|v| v.starts_with("RM_")));
    }

    #[test]
    fn every_service_takes_the_one_control_debounce() {
        for sub in ["all", "ingest", "aggregate"] {
            let cli = Cli::try_parse_from(["retail-media", sub, "--control-debounce-ms", "300"])
                .expect("parses");
            let Some(Command::All(s) | Command::Ingest(s) | Command::Aggregate(s)) = cli.command
            else {
                panic!("{sub}: {:?}", cli.command);
            };
            assert_eq!(s.debounce().ms(), 300, "{sub}");
        }
        let cli =
            Cli::try_parse_from(["retail-media", "--control-debounce-ms=-5"]).expect("parses");
        assert_eq!(cli.settings.debounce().ms(), 0);
        if std::env::var_os("RM_CONTROL_DEBOUNCE_MS").is_none() {
            let cli = Cli::try_parse_from(["retail-media", "api"]).expect("parses");
            let Some(Command::Api(s)) = cli.command else {
                panic!("{:?}", cli.command);
            };
            assert_eq!(s.control_debounce_ms, 1_000);
        }
    }

    #[test]
    fn demo_data_only_by_default_in_the_quick_start() {
        if std::env::var_os("RM_API_DEMO").is_some() {
            return;
        }
        let settings = |args: &[&str]| match Cli::try_parse_from(args).expect("parses").command {
            None => panic!("no subcommand"),
            Some(
                Command::All(s) | Command::Api(s) | Command::Ingest(s) | Command::Aggregate(s),
            ) => s,
            Some(other) => panic!("{other:?}"),
        };
        assert_eq!(settings(&["retail-media", "all"]).api_demo, None);
        assert!(Cli::try_parse_from(["retail-media"])
            .expect("parses")
            .settings
            .demo(true));
        assert!(!settings(&["retail-media", "api"]).demo(false));
        assert!(settings(&["retail-media", "api", "--api-demo", "true"]).demo(false));
        assert!(!settings(&["retail-media", "all", "--api-demo=false"]).demo(true));
    }

    #[test]
    fn nested_tables_map_to_variables() {
        let t: toml::Table =
            "kafka_linger_ms = 7\n[kafka]\nbrokers = \"b:9092\"\n[dedup]\nmax_keys = 10\n"
                .parse()
                .expect("toml");
        let mut out = Vec::new();
        flatten(&t, "", &mut out);
        out.sort();
        assert_eq!(
            out,
            vec![
                ("dedup_max_keys".to_string(), "10".to_string()),
                ("kafka_brokers".to_string(), "b:9092".to_string()),
                ("kafka_linger_ms".to_string(), "7".to_string()),
            ]
        );
    }
}
