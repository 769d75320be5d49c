//! `retail-media`: the one binary. Reads settings, sets up telemetry, binds, and
//! hands each service its listener and the shutdown token. Everything else is
//! library code.

mod admin_cli;
mod cli;
mod launch;
mod private_files;

use clap::Parser;

/// jemalloc: the aggregator allocates and frees many small keys and fact sets per
/// batch on three threads (read, fold, store write); glibc's allocator spent about a
/// fifth of the CPU there and mimalloc, returning freed pages to the system at once,
/// had the kernel zero them again for every batch (BENCHMARKS.md, aggregator).
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    // Settings-file values become RM_ variables that are not already set, so clap
    // applies the documented precedence: flag > environment > file > default.
    // Done before any thread exists.
    for (var, value) in cli::file_settings(&args)? {
        std::env::set_var(var, value);
    }
    let cli = cli::Cli::parse_from(&args);
    let (command, settings) = match cli.command {
        None => (launch::Service::All, cli.settings),
        Some(cli::Command::All(s)) => (launch::Service::All, s),
        Some(cli::Command::Ingest(s)) => (launch::Service::Ingest, s),
        Some(cli::Command::Aggregate(s)) => (launch::Service::Aggregate, s),
        Some(cli::Command::Api(s)) => (launch::Service::Api, s),
        Some(cli::Command::Clients(a)) => {
            return admin_cli::clients(a.action, &a.data_dir, a.database_url.as_deref())
        }
        Some(cli::Command::Keys(a)) => {
            return admin_cli::keys(a.action, &a.data_dir, a.database_url.as_deref())
        }
        Some(cli::Command::Rebuild(a)) => return admin_cli::rebuild(&a),
    };
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_new(&settings.log_level)?)
        .with_target(false)
        .init();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(launch::run(command, settings))
}
