//! The workspace's layering, read from `cargo metadata` and the console's sources: no
//! crate cycle (dev-dependencies included, which cargo itself allows to loop), the library
//! knows no other crate of the workspace, a deployable links only the library, and the
//! console calls AWS only through the library.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::Value;

/// Workspace crates → (their workspace dependencies of any kind, of the normal kind).
struct Graph {
    all: BTreeMap<String, BTreeSet<String>>,
    normal: BTreeMap<String, BTreeSet<String>>,
    external: BTreeMap<String, BTreeSet<String>>,
    dirs: BTreeMap<String, PathBuf>,
}

fn graph() -> Graph {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: Value = serde_json::from_slice(&out.stdout).unwrap();
    let packages = meta["packages"].as_array().unwrap();
    let names: BTreeSet<String> = packages
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect();
    let mut g = Graph {
        all: BTreeMap::new(),
        normal: BTreeMap::new(),
        external: BTreeMap::new(),
        dirs: BTreeMap::new(),
    };
    for p in packages {
        let name = p["name"].as_str().unwrap().to_string();
        let manifest = PathBuf::from(p["manifest_path"].as_str().unwrap());
        g.dirs
            .insert(name.clone(), manifest.parent().unwrap().to_path_buf());
        for d in p["dependencies"].as_array().unwrap() {
            let dep = d["name"].as_str().unwrap().to_string();
            let normal = d["kind"].is_null();
            if names.contains(&dep) {
                g.all.entry(name.clone()).or_default().insert(dep.clone());
                if normal {
                    g.normal.entry(name.clone()).or_default().insert(dep);
                }
            } else if normal {
                g.external.entry(name.clone()).or_default().insert(dep);
            }
        }
    }
    g
}

/// A path from `from` back to itself through `edges`, if there is one.
fn cycle_through(from: &str, edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    let mut stack = vec![vec![from.to_string()]];
    let mut seen = BTreeSet::new();
    while let Some(path) = stack.pop() {
        let last = path.last().unwrap();
        for next in edges.get(last).into_iter().flatten() {
            if next == from {
                return Some([path.clone(), vec![next.clone()]].concat());
            }
            if seen.insert(next.clone()) {
                stack.push([path.clone(), vec![next.clone()]].concat());
            }
        }
    }
    None
}

#[test]
fn no_crate_cycle_and_each_room_depends_only_downwards() {
    let g = graph();
    for name in g.dirs.keys() {
        assert_eq!(cycle_through(name, &g.all), None, "a crate cycle");
    }
    assert_eq!(
        g.all.get("schedkit"),
        None,
        "the library must know no deployable, screen or emulator"
    );
    for (name, dir) in &g.dirs {
        if dir.parent().and_then(Path::file_name) == Some("functions".as_ref()) {
            assert_eq!(
                g.normal.get(name).cloned().unwrap_or_default(),
                BTreeSet::from(["schedkit".to_string()]),
                "a Lambda links only the library (no CLI, no local kit)"
            );
        }
    }
}

#[test]
fn the_console_calls_aws_only_through_the_library() {
    let g = graph();
    let sdk: Vec<_> = g.external["schedkit-console"]
        .iter()
        .filter(|d| d.starts_with("aws-") || d.starts_with("aws_"))
        .collect();
    assert!(sdk.is_empty(), "the console depends on {sdk:?}");
    let mut offending = Vec::new();
    let mut dirs = vec![g.dirs["schedkit-console"].join("src")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            for (i, line) in text.lines().enumerate() {
                // An SDK call ends its fluent builder with `.send()`; the SDK's crates are
                // named `aws_sdk_*` and `aws_config`.
                if ["aws_sdk_", "aws_config::", ".send()"]
                    .iter()
                    .any(|p| line.contains(p))
                {
                    offending.push(format!("{}:{}: {}", path.display(), i + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        offending.is_empty(),
        "AWS calls in the console:\n{}",
        offending.join("\n")
    );
}
