//! Schemathesis (PyPI) against the running api with a valid token: it generates
//! requests from `/openapi.json` for every operation (examples, coverage, fuzzing and
//! stateful phases) and checks that no answer is a 5xx and none contradicts the
//! document (status codes, content types, headers, bodies against the schemas, 405
//! with `Allow` for undocumented methods).
//!
//! One rewrite before the run: schemathesis formats path templates with Python's
//! `str.format`, which reads `{segment.id}` (the spec's parameter name, kept in the
//! served document) as an attribute access, so the copy it reads names that
//! parameter `segment_id`.
#![allow(clippy::unwrap_used, missing_docs)]

use crate::common;

use std::process::Command;
use std::time::Duration;

use common::{demo_token, get, required_setting, Service};

#[test]
fn schemathesis_finds_no_server_error_and_no_contradiction() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let st = Command::new("bash")
        .arg(root.join("deploy/local/schemathesis.sh"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
    let Some(st) = st.or_else(|| {
        required_setting(
            "RM_SCHEMATHESIS_REQUIRED_BUT_MISSING",
            "schemathesis (deploy/local/schemathesis.sh)",
        )
    }) else {
        eprintln!("SKIPPED: schemathesis could not be installed");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // Erasures answer at once (202) instead of waiting for the aggregator's run:
    // every generated DELETE of a shopper would wait a tick otherwise.
    let svc = Service::start(
        "all",
        dir.path(),
        &[("RM_API_ERASURE_WAIT_SECS", "0".to_owned())],
    );
    svc.wait_ready(svc.api, Duration::from_secs(60));
    let token = demo_token(svc.api);
    let doc = String::from_utf8(get(svc.api, "/openapi.json").unwrap().body).unwrap();
    assert!(
        doc.contains("{segment.id}"),
        "the served document keeps the spec's name"
    );
    let path = dir.path().join("openapi.json");
    std::fs::write(&path, doc.replace("segment.id", "segment_id")).unwrap();
    let out = Command::new(&st)
        .arg("run")
        .arg(&path)
        .args(["--url", &format!("http://{}", svc.api)])
        .args(["-H", &format!("Authorization: Bearer {token}")])
        .args([
            "--checks",
            "not_a_server_error,status_code_conformance,content_type_conformance,response_headers_conformance,response_schema_conformance,unsupported_method",
        ])
        .args(["--max-examples", "25", "--no-color"])
        .env("SCHEMATHESIS_HOOKS", "")
        .current_dir(dir.path())
        .output()
        .unwrap();
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{text}");
    assert!(out.status.success(), "schemathesis found problems:\n{text}");
    assert!(
        text.contains("17 selected") || text.contains("selected /"),
        "{text}"
    );
    assert!(
        !text.contains("Errored:") || text.contains("Errored: 0"),
        "{text}"
    );
    let log = svc.log();
    assert!(!log.contains("panicked"), "the api panicked:\n{log}");
    svc.terminate();
}
