//! The deploy artifacts say what the Kafka failure tests prove: three brokers, topics
//! with three replicas and `min.insync.replicas` 2 (so one broker may die or restart
//! without losing an acknowledged beacon: `tests/it/kafka_broker_loss.rs`,
//! `tests/it/kafka_rolling_restart.rs`), and no more aggregators than partitions (the
//! rest would idle: `tests/it/kafka_group_failover.rs`). Read as text from compose, the
//! Kubernetes manifests, the local cluster's broker template and the service's own
//! defaults, so a change to one that the others do not follow fails here.
#![allow(clippy::unwrap_used, missing_docs)]

fn read(rel: &str) -> String {
    std::fs::read_to_string(format!("{}/{rel}", env!("CARGO_MANIFEST_DIR")))
        .unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The value of the first `key: value` (or `key=value`) line naming `key`, unquoted.
fn value_of(text: &str, key: &str) -> Option<String> {
    text.lines().map(str::trim).find_map(|l| {
        let rest = l.strip_prefix(key)?;
        let v = rest.strip_prefix(':').or_else(|| rest.strip_prefix('='))?;
        Some(v.trim().trim_matches('"').to_owned())
    })
}

#[test]
fn replication_and_partitions_agree_everywhere() {
    assert_eq!(rm_eventlog::config::DEFAULT_KAFKA_REPLICATION, 3);
    let defaults = rm_eventlog::KafkaConfig::default();
    assert_eq!(
        defaults.effective_min_insync_replicas(defaults.effective_replication(3)),
        Some(2)
    );

    let compose = read("deploy/compose.yaml");
    assert_eq!(
        compose.matches("KAFKA_NODE_ID:").count(),
        3,
        "three Kafka nodes"
    );
    assert_eq!(
        value_of(&compose, "RM_KAFKA_REPLICATION").as_deref(),
        Some("3")
    );
    assert_eq!(
        value_of(&compose, "RM_KAFKA_MIN_INSYNC_REPLICAS").as_deref(),
        Some("2")
    );
    assert_eq!(
        value_of(&compose, "KAFKA_MIN_INSYNC_REPLICAS").as_deref(),
        Some("2")
    );
    assert_eq!(
        value_of(&compose, "KAFKA_UNCLEAN_LEADER_ELECTION_ENABLE").as_deref(),
        Some("false")
    );
    let brokers = value_of(&compose, "RM_KAFKA_BROKERS").unwrap();
    assert_eq!(brokers.split(',').count(), 3, "{brokers}");

    let configmap = read("deploy/k8s/configmap.yaml");
    assert_eq!(
        value_of(&configmap, "RM_KAFKA_REPLICATION").as_deref(),
        Some("3")
    );
    assert_eq!(
        value_of(&configmap, "RM_KAFKA_MIN_INSYNC_REPLICAS").as_deref(),
        Some("2")
    );
    let partitions: u32 = value_of(&configmap, "RM_KAFKA_PARTITIONS")
        .unwrap()
        .parse()
        .unwrap();
    let aggregators: u32 = value_of(&read("deploy/k8s/aggregator.yaml"), "replicas")
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        aggregators <= partitions,
        "{aggregators} aggregators for {partitions} partitions: some would idle"
    );

    let local = read("deploy/local/kafka/server.properties");
    for (key, want) in [
        ("min.insync.replicas", "@MIN_ISR@"),
        ("default.replication.factor", "@RF@"),
        ("offsets.topic.replication.factor", "@RF@"),
        ("unclean.leader.election.enable", "false"),
        ("auto.create.topics.enable", "false"),
    ] {
        assert_eq!(value_of(&local, key).as_deref(), Some(want), "{key}");
    }
    let up = read("deploy/local/up.sh");
    assert!(
        up.contains("KAFKA_NODES=${RM_KAFKA_NODES:-3}"),
        "three local nodes"
    );
}
