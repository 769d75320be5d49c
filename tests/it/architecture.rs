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

/// The top-level modules of the crate rooted at `src` and, for each, the other
/// top-level modules its non-test code names (`crate::x`, or `super::x` in a file
/// directly under the root). Code after a `#[cfg(test)]` line and test-only files
/// (`tests.rs`, `*_tests.rs`, `proptests.rs`, anything under a `tests/` folder) are
/// left out: tests may reach anywhere.
fn module_graph(src: &std::path::Path) -> Graph {
    let root = ["lib.rs", "main.rs"]
        .iter()
        .map(|f| src.join(f))
        .find(|p| p.exists())
        .expect("a lib.rs or main.rs");
    let root_text = std::fs::read_to_string(&root).expect("read crate root");
    let top: Vec<String> = non_test(&root_text)
        .lines()
        .filter_map(|l| {
            let l = l.trim();
            let l = l.strip_prefix("pub ").unwrap_or(l);
            let l = l.strip_prefix("pub(crate) ").unwrap_or(l);
            l.strip_prefix("mod ")?.strip_suffix(';').map(str::to_owned)
        })
        .collect();
    let mut graph = Graph::new();
    for m in &top {
        let mut files = Vec::new();
        let file = src.join(format!("{m}.rs"));
        let direct = file.exists();
        if direct {
            files.push(file);
        }
        collect_rs(&src.join(m), &mut files);
        let mut refs: Vec<String> = Vec::new();
        for f in &files {
            let name = f.file_name().and_then(|n| n.to_str()).unwrap_or("");
            let rel = f.strip_prefix(src).unwrap_or(f);
            let in_tests = rel.components().any(|c| c.as_os_str() == "tests");
            if in_tests
                || name == "tests.rs"
                || name.ends_with("_tests.rs")
                || name == "proptests.rs"
            {
                continue;
            }
            let text = std::fs::read_to_string(f).expect("read module file");
            let at_top = f.parent() == Some(src);
            let named = named_modules(non_test(&text), at_top);
            refs.extend(
                top.iter()
                    .filter(|o| *o != m && named.contains(*o))
                    .cloned(),
            );
        }
        refs.sort();
        refs.dedup();
        graph.insert(m.clone(), refs);
    }
    graph
}

/// The first path segments after `crate::` (and `super::` in a file directly under the
/// root) in code, comments left out: `crate::a::b` names `a`, `crate::{a, b::c}` names
/// `a` and `b`.
fn named_modules(text: &str, at_top: bool) -> std::collections::BTreeSet<String> {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut out = std::collections::BTreeSet::new();
    let code: String = text
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    {
        let code = code.as_str();
        let mut prefixes = vec!["crate::"];
        if at_top {
            prefixes.push("super::");
        }
        for prefix in prefixes {
            for (i, _) in code.match_indices(prefix) {
                if code[..i]
                    .chars()
                    .next_back()
                    .is_some_and(|c| ident(c) || c == ':')
                {
                    continue;
                }
                let rest = &code[i + prefix.len()..];
                if let Some(group) = rest.strip_prefix('{') {
                    // The items at the group's top level.
                    let mut depth = 0;
                    let mut item = String::new();
                    let mut items = Vec::new();
                    for c in group.chars() {
                        match c {
                            '{' => depth += 1,
                            '}' if depth == 0 => break,
                            '}' => depth -= 1,
                            ',' if depth == 0 => items.push(std::mem::take(&mut item)),
                            _ if depth == 0 => item.push(c),
                            _ => {}
                        }
                    }
                    items.push(item);
                    for it in items {
                        let first: String = it.trim().chars().take_while(|c| ident(*c)).collect();
                        if !first.is_empty() {
                            out.insert(first);
                        }
                    }
                } else {
                    let first: String = rest.chars().take_while(|c| ident(*c)).collect();
                    out.insert(first);
                }
            }
        }
    }
    out
}

/// The text before the first `#[cfg(test)]` line.
fn non_test(text: &str) -> &str {
    text.find("#[cfg(test)]").map_or(text, |i| &text[..i])
}

fn collect_rs(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            collect_rs(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Every cycle's modules (strongly connected components of more than one module).
fn cycles(g: &Graph) -> Vec<Vec<String>> {
    // Reachability by depth-first search from each node: graphs here are tiny.
    let reach = |from: &str| {
        let mut seen = std::collections::BTreeSet::new();
        let mut stack = vec![from.to_owned()];
        while let Some(n) = stack.pop() {
            for d in g.get(&n).into_iter().flatten() {
                if seen.insert(d.clone()) {
                    stack.push(d.clone());
                }
            }
        }
        seen
    };
    let mut out: Vec<Vec<String>> = Vec::new();
    for n in g.keys() {
        let from_n = reach(n);
        if !from_n.contains(n) || out.iter().any(|c| c.contains(n)) {
            continue;
        }
        let comp: Vec<String> = g
            .keys()
            .filter(|m| from_n.contains(*m) && reach(m).contains(n))
            .cloned()
            .collect();
        out.push(comp);
    }
    out
}

#[test]
fn the_cycle_finder_finds_cycles() {
    let g: Graph = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("d", vec!["a"]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.into_iter().map(str::to_owned).collect()))
    .collect();
    assert_eq!(cycles(&g), vec![vec!["a", "b", "c"]]);
}

/// No crate's top-level modules import each other in a circle: if two need each
/// other, something belongs in a third (STYLE.md, "Layers point one way").
#[test]
fn no_crate_has_a_cycle_among_its_top_level_modules() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = Vec::new();
    for krate in workspace_graph().keys() {
        let dir = if krate == "retail-media" {
            root.to_path_buf()
        } else {
            root.join(krate.trim_start_matches("rm-"))
        };
        let src = dir.join("src");
        if !src.exists() {
            continue;
        }
        for c in cycles(&module_graph(&src)) {
            found.push(format!("{krate}: {}", c.join(" <-> ")));
        }
    }
    assert!(found.is_empty(), "module cycles:\n{}", found.join("\n"));
}
