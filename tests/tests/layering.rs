//! The workspace's layering, read from `cargo metadata` and the console's sources: no
//! crate cycle (dev-dependencies included, which cargo itself allows to loop), the library
//! knows no other crate of the workspace (but, behind a feature, the code-free `schedkit-unified-features`), a deployable links only the library, the console
//! calls AWS only through the library (and, for `schedkit engine`, the local firing engine),
//! and no integration test file is left out of its crate's one test binary.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use schedkit_testkit::graph::cycle_through;
use serde_json::Value;

/// Workspace crates → (their workspace dependencies of any kind, of the normal kind).
struct Graph {
    /// Each test target's main file (`tests/main.rs`), by crate.
    test_mains: Vec<PathBuf>,
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
        test_mains: Vec::new(),
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
        for t in p["targets"].as_array().unwrap() {
            let src = PathBuf::from(t["src_path"].as_str().unwrap());
            if t["kind"][0] == "test" && src.file_name() == Some("main.rs".as_ref()) {
                g.test_mains.push(src);
            }
        }
        for d in p["dependencies"].as_array().unwrap() {
            let dep = d["name"].as_str().unwrap().to_string();
            let normal = d["kind"].is_null();
            // A package's dev-dependency on itself only turns features on for its own
            // tests (the library's simulation runs the `ops` code): no edge between crates.
            if dep == name && !normal {
                continue;
            }
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

#[test]
fn no_crate_cycle_and_each_room_depends_only_downwards() {
    let g = graph();
    for name in g.dirs.keys() {
        assert_eq!(cycle_through(name, &g.all), None, "a crate cycle");
    }
    // Its one workspace dependency has no code, only the workspace's feature sets.
    assert_eq!(
        g.all.get("schedkit").cloned().unwrap_or_default(),
        BTreeSet::from(["schedkit-unified-features".to_string()]),
        "the library must know no deployable, screen or emulator"
    );
    assert_eq!(
        g.all.get("schedkit-unified-features"),
        None,
        "the feature-unifying crate depends on no crate of the workspace"
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

#[test]
fn every_integration_test_file_is_a_module_of_its_crates_one_test_binary() {
    // With `autotests = false`, a file of `tests/` that `main.rs` does not declare would
    // never compile or run, silently.
    let g = graph();
    assert!(!g.test_mains.is_empty());
    for main in &g.test_mains {
        let text = std::fs::read_to_string(main).unwrap();
        for entry in std::fs::read_dir(main.parent().unwrap()).unwrap() {
            let path = entry.unwrap().path();
            let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
            if path.extension() == Some("rs".as_ref()) && stem != "main" {
                assert!(
                    text.contains(&format!("mod {stem};")),
                    "{} is not a `mod` of {}",
                    path.display(),
                    main.display()
                );
            }
        }
    }
}
