//! Dependency graphs as the layering tests read them (crates, modules): node → the nodes
//! it depends on.

use std::collections::{BTreeMap, BTreeSet};

/// A path from `from` back to itself through `edges`, if there is one (a cycle).
pub fn cycle_through(
    from: &str,
    edges: &BTreeMap<String, BTreeSet<String>>,
) -> Option<Vec<String>> {
    let mut stack = vec![vec![from.to_string()]];
    let mut seen = BTreeSet::new();
    while let Some(path) = stack.pop() {
        for next in edges.get(path.last().unwrap()).into_iter().flatten() {
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
