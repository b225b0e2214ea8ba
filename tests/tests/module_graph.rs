//! The layering inside each crate, read from its sources: the files' modules import one
//! another without a circle, and no module reaches an item through the crate root's
//! re-exports (`crate::Processor`), which would make the root's public face a dependency
//! of the code it presents.
//!
//! An edge goes from a file's module to every module it names by path (`crate::`,
//! `super::`, `self::`, and a parent's own children by name), in `use` trees and inline,
//! outside comments, strings and `#[cfg(test)] mod tests`. A parent's `mod` and `pub use`
//! of its own children are its table of contents, not edges. Hand-written because the
//! check is a few lines of text scanning; a parser crate would add a compile for nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use schedkit_testkit::graph::cycle_through;

/// The source folders of the workspace's crates.
fn crate_sources() -> Vec<PathBuf> {
    let root = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    [
        "shared",
        "functions/worker",
        "localstack/lambda-init",
        "localstack/firing-engine",
        "console",
        "tests",
        "examples/demo",
        "examples/starter",
        "bench",
    ]
    .iter()
    .map(|c| root.join(c).join("src"))
    .collect()
}

/// Every `.rs` file under `src`, by module path (`batch::claim`; the root is ``).
fn modules(src: &Path) -> BTreeMap<String, PathBuf> {
    let mut out = BTreeMap::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension() != Some("rs".as_ref()) {
                continue;
            }
            let rel = path.strip_prefix(src).unwrap().with_extension("");
            let mut parts: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if matches!(
                parts.last().map(String::as_str),
                Some("mod" | "lib" | "main")
            ) {
                parts.pop();
            }
            out.insert(parts.join("::"), path);
        }
    }
    out
}

/// The code of a file without comments, string and char literals, and its test module.
fn code(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => text,
    };
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                    i += 1;
                }
                i += 2;
            }
            b'r' if matches!(b.get(i + 1), Some(b'#') | Some(b'"'))
                && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')) =>
            {
                let hashes = b[i + 1..].iter().take_while(|c| **c == b'#').count();
                if b.get(i + 1 + hashes) != Some(&b'"') {
                    out.push('r');
                    i += 1;
                    continue;
                }
                let close: Vec<u8> = std::iter::once(b'"')
                    .chain(std::iter::repeat_n(b'#', hashes))
                    .collect();
                i += hashes + 2;
                while i < b.len() && !b[i..].starts_with(&close) {
                    i += 1;
                }
                i += close.len();
                out.push_str("\"\"");
            }
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
                out.push_str("\"\"");
            }
            // A char literal (`'a'`, `'\n'`), not a lifetime.
            b'\'' if b.get(i + 2) == Some(&b'\'') || b.get(i + 1) == Some(&b'\\') => {
                i += 1;
                while i < b.len() && b[i] != b'\'' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
                out.push_str("' '");
            }
            c => {
                out.push(c as char);
                i += 1;
            }
        }
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Expands a `use` tree (`a::{b, c::{d, e}}`) into its paths.
fn expand(prefix: &[String], tree: &str, out: &mut Vec<Vec<String>>) {
    let tree = tree.trim();
    if let Some(open) = tree.find('{') {
        let head: Vec<String> = tree[..open]
            .split("::")
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
        let prefix = [prefix, &head].concat();
        let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
        let (mut depth, mut start) = (0, 0);
        for (i, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    expand(&prefix, &inner[start..i], out);
                    start = i + 1;
                }
                _ => {}
            }
        }
        expand(&prefix, &inner[start..], out);
    } else if !tree.is_empty() {
        let path = tree.split(" as ").next().unwrap_or(tree);
        let segs: Vec<String> = path.split("::").map(|s| s.trim().to_string()).collect();
        out.push([prefix, &segs].concat());
    }
}

/// The paths a module's code names: `(path, whether in a pub use)`.
fn named_paths(code: &str, children: &[String]) -> Vec<(Vec<String>, bool)> {
    let mut out = Vec::new();
    let mut rest = code;
    let mut outside = String::new();
    // `use` statements.
    while let Some(at) = rest.find("use ") {
        let boundary = at == 0 || !is_ident(rest[..at].chars().last().unwrap());
        if !boundary {
            outside.push_str(&rest[..at + 4]);
            rest = &rest[at + 4..];
            continue;
        }
        let before = rest[..at].trim_end();
        let public = before.ends_with("pub") || before.ends_with(')') && before.contains("pub(");
        let end = rest[at..].find(';').map_or(rest.len(), |e| at + e);
        let mut paths = Vec::new();
        expand(&[], &rest[at + 4..end], &mut paths);
        out.extend(paths.into_iter().map(|p| (p, public)));
        outside.push_str(&rest[..at]);
        rest = &rest[end..];
    }
    outside.push_str(rest);
    // Inline paths: `crate::a::b`, `super::x`, `self::x`, and a child by name.
    let chars: Vec<char> = outside.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        if !is_ident(chars[i]) || (i > 0 && (is_ident(chars[i - 1]) || chars[i - 1] == ':')) {
            i += 1;
            continue;
        }
        let mut segs = Vec::new();
        let mut j = i;
        loop {
            let start = j;
            while j < chars.len() && is_ident(chars[j]) {
                j += 1;
            }
            segs.push(chars[start..j].iter().collect::<String>());
            if chars.get(j) == Some(&':') && chars.get(j + 1) == Some(&':') {
                j += 2;
                if chars.get(j).is_some_and(|c| is_ident(*c)) {
                    continue;
                }
            }
            break;
        }
        let first = segs[0].as_str();
        if segs.len() > 1
            && (matches!(first, "crate" | "super" | "self") || children.iter().any(|c| c == first))
        {
            out.push((segs, false));
        }
        i = j.max(i + 1);
    }
    out
}

/// The module a path names from `module` (the longest known prefix), if it names one of
/// the crate's.
fn resolve(
    module: &str,
    path: &[String],
    known: &BTreeMap<String, PathBuf>,
) -> Option<(String, Vec<String>)> {
    let mut base: Vec<String> = if module.is_empty() {
        Vec::new()
    } else {
        module.split("::").map(String::from).collect()
    };
    let mut rest = path;
    match rest.first().map(String::as_str) {
        Some("crate") => {
            base.clear();
            rest = &rest[1..];
        }
        Some("self") => rest = &rest[1..],
        Some("super") => {
            while rest.first().map(String::as_str) == Some("super") {
                base.pop();
                rest = &rest[1..];
            }
        }
        // A child of this module by its name (`use child::X` or `child::f()`).
        Some(_) => {}
        None => return None,
    }
    let full = [base, rest.to_vec()].concat();
    (0..=full.len()).rev().find_map(|n| {
        let name = full[..n].join("::");
        known
            .contains_key(&name)
            .then(|| (name, full[n..].to_vec()))
    })
}

struct Graph {
    edges: BTreeMap<String, BTreeSet<String>>,
    /// `crate::Name` where `Name` is one of the root's re-exports: (module, path).
    through_root: Vec<(String, String)>,
}

fn graph(src: &Path) -> Graph {
    let known = modules(src);
    let root_code = ["lib.rs", "main.rs"]
        .iter()
        .map(|f| src.join(f))
        .find(|p| p.exists())
        .map(|p| code(&std::fs::read_to_string(p).unwrap()))
        .unwrap_or_default();
    let reexported: BTreeSet<String> = named_paths(&root_code, &[])
        .into_iter()
        .filter(|(_, public)| *public)
        .filter_map(|(p, _)| p.last().cloned())
        .collect();
    let mut g = Graph {
        edges: BTreeMap::new(),
        through_root: Vec::new(),
    };
    for (module, path) in &known {
        let children: Vec<String> = known
            .keys()
            .filter_map(|k| {
                let rest = if module.is_empty() {
                    Some(k.as_str())
                } else {
                    k.strip_prefix(&format!("{module}::"))
                };
                rest.filter(|r| !r.is_empty() && !r.contains("::"))
                    .map(String::from)
            })
            .collect();
        // `a/mod.rs`, or `a.rs` beside `a/`: a module with modules of its own.
        let parent = !children.is_empty();
        let text = code(&std::fs::read_to_string(path).unwrap());
        for (p, public) in named_paths(&text, &children) {
            let Some((target, rest)) = resolve(module, &p, &known) else {
                continue;
            };
            if target == *module {
                continue;
            }
            let own_child = target.starts_with(&format!("{module}::")) || module.is_empty();
            if parent && public && own_child {
                continue;
            }
            if target.is_empty()
                && p.first().map(String::as_str) == Some("crate")
                && rest.first().is_some_and(|n| reexported.contains(n))
            {
                g.through_root.push((module.clone(), p.join("::")));
            }
            g.edges.entry(module.clone()).or_default().insert(target);
        }
    }
    g
}

#[test]
fn no_crate_has_a_circle_of_modules() {
    let mut circles = Vec::new();
    for src in crate_sources() {
        let g = graph(&src);
        let mut reported = BTreeSet::new();
        for module in g.edges.keys() {
            if let Some(c) = cycle_through(module, &g.edges)
                && reported.insert(c.iter().cloned().collect::<BTreeSet<_>>())
            {
                circles.push(format!("{}: {}", src.display(), c.join(" -> ")));
            }
        }
    }
    assert!(
        circles.is_empty(),
        "module circles:\n{}",
        circles.join("\n")
    );
}

#[test]
fn no_module_imports_through_the_crate_roots_reexports() {
    let mut upward = Vec::new();
    for src in crate_sources() {
        for (module, path) in graph(&src).through_root {
            upward.push(format!("{}: `{module}` names `{path}`", src.display()));
        }
    }
    assert!(
        upward.is_empty(),
        "imports through the root's re-exports (name the defining module):\n{}",
        upward.join("\n")
    );
}

#[test]
fn the_scanner_sees_the_circles_and_root_imports_it_is_meant_to_refuse() {
    let dir = std::env::temp_dir().join(schedkit_testkit::unique("modgraph"));
    std::fs::create_dir_all(dir.join("a")).unwrap();
    let write = |f: &str, t: &str| std::fs::write(dir.join(f), t).unwrap();
    write("lib.rs", "mod a;\nmod b;\npub use b::Thing;\n");
    write("a.rs", "mod c;\npub use c::C;\nuse crate::b::Thing;\n");
    write(
        "a/c.rs",
        "// use crate::b::nothing;\nconst S: &str = \"crate::b::x\";\npub struct C(crate::Thing);\n",
    );
    write(
        "b.rs",
        "use crate::{a::{C}};\npub struct Thing;\nfn f(_: C) {}\n",
    );
    let g = graph(&dir);
    assert_eq!(
        g.through_root,
        vec![("a::c".to_string(), "crate::Thing".to_string())]
    );
    // Neither the comment nor the string is an edge; the re-exports of lib.rs and a.rs
    // are their tables of contents.
    assert_eq!(
        g.edges["a::c"],
        BTreeSet::from([String::new()]),
        "{:?}",
        g.edges
    );
    assert_eq!(g.edges.get(""), None);
    assert_eq!(g.edges["b"], BTreeSet::from(["a".to_string()]));
    assert_eq!(
        cycle_through("b", &g.edges),
        Some(vec!["b".to_string(), "a".to_string(), "b".to_string()])
    );
    std::fs::remove_dir_all(&dir).ok();
}
