//! Topic creation settings, pure and against the local Apache Kafka cluster (three
//! nodes from `deploy/local/up.sh`, found through `RM_KAFKA_BROKERS`; without it the
//! broker tests print `SKIPPED` and pass, unless `RM_REQUIRE_SERVICES=1`).

use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, ResourceSpecifier};
use rdkafka::client::DefaultClientContext;
use rdkafka::error::RDKafkaErrorCode;

use super::{client_config, create_with_fallback, ensure_topics, refuses_config, topic_configs};
use crate::config::KafkaConfig;
use crate::LogError;

fn brokers() -> Option<String> {
    match std::env::var("RM_KAFKA_BROKERS") {
        Ok(b) if !b.is_empty() => Some(b),
        _ => {
            assert!(
                std::env::var("RM_REQUIRE_SERVICES").as_deref() != Ok("1"),
                "RM_KAFKA_BROKERS is not set but RM_REQUIRE_SERVICES=1 (deploy/local/up.sh starts a broker)"
            );
            eprintln!(
                "SKIPPED: RM_KAFKA_BROKERS is not set; start a broker with deploy/local/up.sh"
            );
            None
        }
    }
}

fn fresh_topic(name: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("test-{name}-{}-{nanos}", std::process::id())
}

#[test]
fn topic_configs_follow_the_settings() {
    let with = |replication, min_insync| KafkaConfig {
        replication,
        min_insync_replicas: min_insync,
        ..KafkaConfig::default()
    };
    let configs = |c: KafkaConfig, brokers| topic_configs(&c, c.effective_replication(brokers));
    assert!(
        configs(with(1, None), 3).is_empty(),
        "unreplicated: broker default"
    );
    let two = vec![("min.insync.replicas", "2".to_string())];
    assert_eq!(configs(with(2, None), 3), two);
    assert_eq!(configs(with(3, None), 3), two);
    assert_eq!(configs(KafkaConfig::default(), 3), two, "the default");
    // One development broker: one replica, the broker's default.
    assert_eq!(KafkaConfig::default().effective_replication(1), 1);
    assert!(configs(KafkaConfig::default(), 1).is_empty());
    assert_eq!(configs(with(3, None), 2), two);
    assert_eq!(
        configs(with(3, Some(1)), 3),
        vec![("min.insync.replicas", "1".to_string())]
    );
    let retained = KafkaConfig {
        retention_ms: Some(86_400_000),
        retention_bytes: Some(-1),
        ..KafkaConfig::default()
    };
    assert_eq!(
        topic_configs(&retained, 1),
        vec![
            ("retention.ms", "86400000".to_string()),
            ("retention.bytes", "-1".to_string())
        ]
    );
}

#[test]
fn only_config_errors_fall_back() {
    assert!(refuses_config(RDKafkaErrorCode::InvalidConfig));
    assert!(refuses_config(RDKafkaErrorCode::PolicyViolation));
    assert!(!refuses_config(RDKafkaErrorCode::TopicAlreadyExists));
    assert!(!refuses_config(RDKafkaErrorCode::InvalidReplicationFactor));
}

/// A broker that refuses the configs (Kafka does for `min.insync.replicas=0`, see
/// below), driven here by a stand-in for the admin call to check both branches.
#[tokio::test]
async fn refused_configs_are_dropped_with_a_warning() {
    let configs = vec![("min.insync.replicas", "2".to_string())];
    let calls = std::sync::Mutex::new(Vec::new());
    let topics = vec!["a".to_string(), "b".to_string()];
    create_with_fallback(topics.clone(), &configs, |names, with| {
        calls.lock().expect("lock").push((names.clone(), with));
        async move {
            Ok(if with {
                // "a" already exists; "b" is refused for its configs.
                vec![("b".to_string(), RDKafkaErrorCode::InvalidConfig)]
            } else {
                Vec::new()
            })
        }
    })
    .await
    .expect("falls back");
    assert_eq!(
        *calls.lock().expect("lock"),
        vec![(topics, true), (vec!["b".to_string()], false)]
    );
    // Refused again without configs: an error naming the topic.
    let err = create_with_fallback(vec!["c".to_string()], &configs, |_, _| async {
        Ok(vec![("c".to_string(), RDKafkaErrorCode::PolicyViolation)])
    })
    .await
    .expect_err("refused twice");
    assert!(
        matches!(&err, LogError::Unavailable(m) if m.contains("topic c")),
        "{err}"
    );
}

/// The configs of `topic` as the broker describes them (`None`: it cannot).
async fn describe(config: &KafkaConfig, topic: &str) -> Option<Vec<(String, Option<String>)>> {
    let admin: AdminClient<DefaultClientContext> = client_config(config).ok()?.create().ok()?;
    let opts = AdminOptions::new().request_timeout(Some(Duration::from_secs(10)));
    let res = admin
        .describe_configs(&[ResourceSpecifier::Topic(topic)], &opts)
        .await
        .ok()?;
    let r = res.into_iter().next()?.ok()?;
    Some(r.entries.into_iter().map(|e| (e.name, e.value)).collect())
}

/// The replica count of each of `topic`'s partitions, and the brokers the cluster shows.
async fn replicas(config: &KafkaConfig, topic: &str) -> (Vec<usize>, usize) {
    let (config, topic) = (config.clone(), topic.to_owned());
    tokio::task::spawn_blocking(move || {
        let consumer: rdkafka::consumer::BaseConsumer = client_config(&config)
            .expect("config")
            .create()
            .expect("consumer");
        use rdkafka::consumer::Consumer;
        let md = consumer
            .fetch_metadata(Some(&topic), Duration::from_secs(10))
            .expect("metadata");
        let counts = md
            .topics()
            .iter()
            .filter(|t| t.name() == topic)
            .flat_map(|t| t.partitions().iter().map(|p| p.replicas().len()))
            .collect();
        (counts, md.brokers().len())
    })
    .await
    .expect("metadata task")
}

async fn exists(config: &KafkaConfig, topic: &str) -> bool {
    let (config, topic) = (config.clone(), topic.to_owned());
    tokio::task::spawn_blocking(move || {
        let consumer: rdkafka::consumer::BaseConsumer = client_config(&config)
            .expect("config")
            .create()
            .expect("consumer");
        use rdkafka::consumer::Consumer;
        consumer
            .fetch_metadata(Some(&topic), Duration::from_secs(10))
            .map(|md| {
                md.topics()
                    .iter()
                    .any(|t| t.name() == topic && t.error().is_none() && !t.partitions().is_empty())
            })
            .unwrap_or(false)
    })
    .await
    .unwrap_or(false)
}

#[tokio::test]
async fn topics_are_created_with_their_configs() {
    let Some(brokers) = brokers() else { return };
    let config = KafkaConfig {
        brokers: Some(brokers),
        partitions: 1,
        min_insync_replicas: Some(1),
        retention_ms: Some(3_600_000),
        retention_bytes: Some(1 << 20),
        ..KafkaConfig::default()
    };
    let topic = fresh_topic("configs");
    ensure_topics(&config, std::slice::from_ref(&topic))
        .await
        .expect("create");
    assert!(
        exists(&config, &topic).await,
        "topic {topic} was not created"
    );
    // The default replication, 3, capped by the brokers: 3 on the local cluster.
    let (counts, brokers) = replicas(&config, &topic).await;
    let want = config.effective_replication(brokers);
    assert!(
        !counts.is_empty() && counts.iter().all(|c| *c == want as usize),
        "{topic}: replicas {counts:?}, {brokers} brokers"
    );
    eprintln!("{topic}: {want} replicas on {brokers} brokers");
    // Again: an existing topic is kept.
    ensure_topics(&config, std::slice::from_ref(&topic))
        .await
        .expect("create again");
    match describe(&config, &topic).await {
        Some(entries) => {
            eprintln!("{topic}: {entries:?}");
            for (k, v) in topic_configs(&config, config.replication) {
                if let Some((_, got)) = entries.iter().find(|(n, _)| n == k) {
                    assert_eq!(got.as_deref(), Some(v.as_str()), "{k}");
                }
            }
        }
        None => eprintln!("the broker does not describe topic configs; created {topic}"),
    }
}

#[tokio::test]
async fn invalid_configs_still_create_the_topic() {
    let Some(brokers) = brokers() else { return };
    // Kafka refuses `min.insync.replicas=0` (it must be at least 1), so the topic is
    // created without the configs. Either way the topic exists.
    let config = KafkaConfig {
        brokers: Some(brokers),
        partitions: 1,
        min_insync_replicas: Some(0),
        retention_ms: Some(-7),
        ..KafkaConfig::default()
    };
    let topic = fresh_topic("refused");
    ensure_topics(&config, std::slice::from_ref(&topic))
        .await
        .expect("created, with or without the configs");
    assert!(
        exists(&config, &topic).await,
        "topic {topic} was not created"
    );
    eprintln!("{topic}: {:?}", describe(&config, &topic).await);
}
