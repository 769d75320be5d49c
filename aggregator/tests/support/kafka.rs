//! The Kafka cluster the pipeline's Kafka tests use (three brokers, started by
//! `deploy/local/up.sh`): skipped, saying so, without `RM_KAFKA_BROKERS`, unless
//! `RM_REQUIRE_SERVICES=1`, which makes a missing cluster a failure.

use rm_eventlog::KafkaConfig;

/// The value of `var`, or `None` (the test skips, saying so) when it is unset.
pub fn service(var: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(v) if !v.is_empty() => Some(v),
        _ => {
            assert!(
                std::env::var("RM_REQUIRE_SERVICES").as_deref() != Ok("1"),
                "{var} is not set but RM_REQUIRE_SERVICES=1: start the services with deploy/local/up.sh"
            );
            eprintln!("SKIPPED: {var} is not set; deploy/local/up.sh starts Kafka and ClickHouse");
            None
        }
    }
}

/// A test's own settings on the cluster (one partition, no replication, a short
/// linger) and a tag naming its topics and groups apart from every other run's;
/// `None` when the test skips.
pub fn kafka() -> Option<(KafkaConfig, String)> {
    let brokers = service("RM_KAFKA_BROKERS")?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_nanos();
    let kafka = KafkaConfig {
        brokers: Some(brokers),
        partitions: 1,
        replication: 1,
        compression: "lz4".into(),
        linger_ms: 1,
        queue_max_messages: 10_000,
        message_timeout_ms: 10_000,
        properties: Vec::new(),
        ..KafkaConfig::default()
    };
    Some((kafka, format!("{}_{nanos}", std::process::id())))
}
