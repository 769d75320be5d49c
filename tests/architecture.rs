//! The crate graph in `ARCHITECTURE.md` is the workspace's: every workspace crate's
//! normal dependencies on other workspace crates, as `cargo metadata` reads them from
//! the manifests, equal the ```deps block of the document, and no crate depends on one
//! downstream of it in the pipeline (the api never on the aggregator).

use std::collections::BTreeMap;
use std::process::Command;

type Graph = BTreeMap<String, Vec<String>>;

/// The graph the manifests describe.
fn workspace_graph() -> Graph {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run cargo metadata");
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("metadata JSON");
    let packages = meta["packages"].as_array().expect("packages");
    let names: Vec<&str> = packages.iter().filter_map(|p| p["name"].as_str()).collect();
    packages
        .iter()
        .map(|p| {
            let mut deps: Vec<String> = p["dependencies"]
                .as_array()
                .expect("dependencies")
                .iter()
                .filter(|d| d["kind"].is_null())
                .filter_map(|d| d["name"].as_str())
                .filter(|d| names.contains(d))
                .map(str::to_owned)
                .collect();
            deps.sort();
            deps.dedup();
            (p["name"].as_str().expect("name").to_owned(), deps)
        })
        .collect()
}

/// The graph `ARCHITECTURE.md` shows.
fn documented_graph() -> Graph {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/ARCHITECTURE.md");
    let doc = std::fs::read_to_string(path).expect("read ARCHITECTURE.md");
    let block = doc
        .split("```deps\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("ARCHITECTURE.md has a ```deps block");
    block
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let (name, deps) = l.split_once("->").expect("`crate -> deps` lines");
            let mut deps: Vec<String> = deps.split_whitespace().map(str::to_owned).collect();
            deps.sort();
            (name.trim().to_owned(), deps)
        })
        .collect()
}

#[test]
fn the_documented_crate_graph_is_the_workspace_graph() {
    assert_eq!(documented_graph(), workspace_graph());
}

#[test]
fn nothing_depends_on_a_later_stage() {
    let g = workspace_graph();
    let deps = |c: &str| g.get(c).cloned().unwrap_or_default();
    assert!(!deps("rm-api").contains(&"rm-aggregator".to_owned()));
    assert!(!deps("rm-api").contains(&"rm-ingest".to_owned()));
    assert!(!deps("rm-store").iter().any(|d| d != "rm-schemas"));
    assert!(!deps("rm-ingest").contains(&"rm-store".to_owned()));
    assert!(
        !deps("rm-vast").iter().any(|d| d != "rm-schemas"),
        "VAST is pure: the contract only"
    );
    assert!(
        !deps("rm-ads")
            .iter()
            .any(|d| d == "rm-store" || d == "rm-api"),
        "the ads take their inputs through a trait the api implements"
    );
    assert!(
        deps("rm-schemas").is_empty(),
        "the contract depends on nothing"
    );
}
