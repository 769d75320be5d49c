//! The process-wide Prometheus recorder. Installed once; every service renders the
//! same registry on its own `/metrics`. Histogram buckets are explicit, per metric
//! name suffix, so no histogram falls back to a summary.

use std::sync::OnceLock;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// Buckets (seconds) for request and write latencies: 50 us to 10 s.
pub const LATENCY_BUCKETS: [f64; 16] = [
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
    2.5, 10.0,
];

/// Buckets for batch sizes (records per batch).
pub const BATCH_BUCKETS: [f64; 12] = [
    1.0, 2.0, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 5000.0, 20000.0,
];

/// Installs the recorder (first call) and returns its handle.
pub fn install() -> PrometheusHandle {
    HANDLE
        .get_or_init(|| {
            let builder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &LATENCY_BUCKETS)
                .and_then(|b| {
                    b.set_buckets_for_metric(Matcher::Suffix("_records".into()), &BATCH_BUCKETS)
                });
            match builder.and_then(|b| b.install_recorder()) {
                Ok(handle) => handle,
                Err(e) => {
                    // Another recorder is installed (a test harness): render an empty registry.
                    tracing::warn!(error = %e, "prometheus recorder not installed");
                    PrometheusBuilder::new().build_recorder().handle()
                }
            }
        })
        .clone()
}
