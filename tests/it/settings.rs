//! Settings come from flags, `RM_*` variables and a TOML file, in that order of
//! precedence, and a bad file fails at start with a message naming the key.
#![allow(clippy::unwrap_used, missing_docs)]

use crate::common;

use std::process::{Command, Stdio};

use common::{free_port, get, Service};

#[test]
fn file_then_environment_then_flag() {
    let dir = tempfile::tempdir().unwrap();
    let (file_port, env_port) = (free_port(), free_port());
    let config = dir.path().join("rm.toml");
    std::fs::write(
        &config,
        format!("dedup_ttl_secs = 60\ningest_addr = \"127.0.0.1:{file_port}\"\n\n[ingest]\nmax_query_bytes = 100\n\n[kafka]\nlinger_ms = 3\n"),
    )
    .unwrap();
    // The file alone sets the edge's address and its query bound.
    let svc = Service::start_with_args(
        "ingest",
        dir.path(),
        &[("RM_CONFIG", config.display().to_string())],
        &[],
        Some(file_port),
    );
    let long = format!("/v1/events/ad/interaction?cb={}", "x".repeat(150));
    assert_eq!(
        get(svc.ingest, &long).unwrap().status,
        414,
        "file setting max_query_bytes = 100 applies"
    );
    assert_eq!(svc.terminate(), Some(0));
    // The environment beats the file.
    let env = [
        ("RM_CONFIG", config.display().to_string()),
        ("RM_INGEST_ADDR", format!("127.0.0.1:{env_port}")),
    ];
    let svc = Service::start_with_args("ingest", dir.path(), &env, &[], Some(env_port));
    assert_eq!(get(svc.ingest, "/healthz").unwrap().status, 200);
    assert_eq!(svc.terminate(), Some(0));
    // A flag beats both.
    let flag_port = free_port();
    let addr = format!("127.0.0.1:{flag_port}");
    let svc = Service::start_with_args(
        "ingest",
        dir.path(),
        &env,
        &["--ingest-addr", &addr],
        Some(flag_port),
    );
    assert_eq!(get(svc.ingest, "/healthz").unwrap().status, 200);
    assert_eq!(svc.terminate(), Some(0));
}

#[test]
fn an_unknown_setting_fails_at_start_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("bad.toml");
    std::fs::write(&config, "[kafka]\nbrokerz = \"x:9092\"\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_retail-media"))
        .args([
            "ingest",
            "--config",
            config.to_str().unwrap(),
            "--data-dir",
            dir.path().to_str().unwrap(),
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("kafka_brokerz"), "{err}");
    let bad_value = Command::new(env!("CARGO_BIN_EXE_retail-media"))
        .args([
            "ingest",
            "--ingest-addr",
            "not-an-address",
            "--data-dir",
            dir.path().to_str().unwrap(),
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!bad_value.status.success());
    assert!(String::from_utf8_lossy(&bad_value.stderr).contains("--ingest-addr"));
}

/// An identifier or fact retention that attribution or late events would outlive is
/// refused at start, naming the setting and the shortest it may be (issues 25, 26); a
/// key too short to key anything is refused too.
#[test]
fn a_retention_shorter_than_attribution_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_retail-media"))
            .arg("aggregate")
            .args(args)
            .args(["--data-dir", dir.path().to_str().unwrap()])
            .env_remove("RM_KAFKA_BROKERS")
            .env_remove("RM_CLICKHOUSE_URL")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let out = run(&["--identifier-retention-days", "45"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("RM_IDENTIFIER_RETENTION_DAYS=45") && err.contains("60 days"),
        "{err}"
    );
    let out = run(&["--fact-retention-days", "30"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("RM_FACT_RETENTION_DAYS=30") && err.contains("60 days"),
        "{err}"
    );
    let out = run(&["--identifier-key", "short"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("RM_IDENTIFIER_KEY"), "{err}");
}

/// `--help` shows where a secret comes from, never its value (issue 23): the
/// ClickHouse password and the librdkafka properties (SASL passwords) set in the
/// environment, as an operator's shell would have them.
#[test]
fn help_never_prints_a_secret_from_the_environment() {
    for sub in ["all", "ingest", "aggregate", "api"] {
        let out = Command::new(env!("CARGO_BIN_EXE_retail-media"))
            .args([sub, "--help"])
            .env("RM_CLICKHOUSE_PASSWORD", "ch-secret-4711")
            .env("RM_KAFKA_PROPERTIES", "sasl.password=kafka-secret-4712")
            .env(
                "RM_API_DATABASE_URL",
                "postgres://u:pg-secret-4713@127.0.0.1/db",
            )
            .env("RM_AD_ID_KEYS", "k1:adid-secret-4714")
            .env("RM_CONSENT_ID_KEY", "consent-secret-4715")
            .env("RM_IDENTIFIER_KEY", "identifier-secret-4716")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success(), "{sub} --help");
        let text = String::from_utf8_lossy(&out.stdout);
        for secret in ["4711", "4712", "4713", "4714", "4715", "4716"] {
            assert!(
                !text.contains(secret),
                "{sub} --help prints a secret:\n{text}"
            );
        }
    }
}

/// Key material is the service user's only (issue 23): a fresh data dir is `0700`,
/// the ad id key and the api's state `0600`; a data dir and a key left
/// world-readable by an earlier version are narrowed at start, with a warning.
/// The token signing seed is sealed in the api's state: a copy of the state file
/// mints nothing. A state an earlier version wrote, its seed in clear, keeps its key
/// (tokens it issued still verify: the JWK set publishes the same public key) and holds
/// it sealed after the first start.
#[test]
fn the_token_signing_seed_is_sealed_at_rest_and_an_earlier_clear_one_is_converted() {
    use base64::Engine as _;
    let b64 = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
    let dir = tempfile::tempdir().unwrap();
    let seed = [42u8; 32];
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let state = rm_api::state::State::open_embedded(dir.path()).unwrap();
        let old = rm_auth::StoredSigningKey {
            kid: "k1".into(),
            seed: b64(&seed),
            created: "2026-11-01T00:00:00Z".into(),
        };
        assert!(state.add_signing_key(&old).await.unwrap());
    });
    let svc = Service::start("all", dir.path(), &[]);
    svc.wait_ready(svc.api, std::time::Duration::from_secs(60));
    let jwks = get(svc.api, "/.well-known/jwks.json").unwrap().json();
    let public = ed25519_dalek::SigningKey::from_bytes(&seed)
        .verifying_key()
        .to_bytes();
    assert_eq!(jwks["keys"][0]["kid"], "k1");
    assert_eq!(jwks["keys"][0]["x"], b64(&public), "{jwks}");
    // The api signs and verifies with it as before.
    let token = common::demo_token(svc.api);
    common::api_json(svc.api, &format!("Bearer {token}"), "/v1/admin/clients");
    let log = svc.log();
    assert!(log.contains("sealed again"), "{log}");
    svc.terminate();
    rt.block_on(async {
        let state = rm_api::state::State::open_embedded(dir.path()).unwrap();
        let keys = state.signing_keys().await.unwrap();
        assert_eq!(keys.len(), 1);
        assert!(keys[0].seed.starts_with(rm_auth::seal::SEALED), "{keys:?}");
        assert!(!keys[0].seed.contains(&b64(&seed)));
    });
    // A copy of the state with another deployment's ad id key opens nothing: the api
    // refuses to start, naming the key.
    let copy = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(copy.path().join("api")).unwrap();
    std::fs::copy(
        dir.path().join("api/state.redb"),
        copy.path().join("api/state.redb"),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_retail-media"))
        .arg("api")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("RM_DATA_DIR", copy.path())
        .env("RM_API_ADDR", format!("127.0.0.1:{}", free_port()))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("k1") && err.contains("RM_AD_ID_KEYS"), "{err}");
}

#[test]
fn key_material_is_readable_by_the_service_user_only() {
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let dir = tempfile::tempdir().unwrap();
    let svc = Service::start("all", dir.path(), &[]);
    svc.wait_ready(svc.api, std::time::Duration::from_secs(60));
    assert_eq!(mode(dir.path()), 0o700, "data dir");
    assert_eq!(mode(&dir.path().join("ad-id.key")), 0o600, "ad id key");
    assert_eq!(
        mode(&dir.path().join("identifier.key")),
        0o600,
        "identifier ageing key"
    );
    assert_eq!(mode(&dir.path().join("api/state.redb")), 0o600, "api state");
    svc.terminate();

    let old = tempfile::tempdir().unwrap();
    std::fs::write(
        old.path().join("ad-id.key"),
        "q1Tj0Ks3n7uLr6SqUEOhJtSz5mEFuDuSGk2rqhwWP0c",
    )
    .unwrap();
    for p in [old.path().to_path_buf(), old.path().join("ad-id.key")] {
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let svc = Service::start("all", old.path(), &[]);
    svc.wait_ready(svc.api, std::time::Duration::from_secs(60));
    assert_eq!(mode(old.path()), 0o700);
    assert_eq!(mode(&old.path().join("ad-id.key")), 0o600);
    let log = svc.log();
    assert!(
        log.contains("narrowed the permissions of a path holding key material"),
        "{log}"
    );
    svc.terminate();
}
