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
