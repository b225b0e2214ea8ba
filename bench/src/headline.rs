//! The README's one sentence of figures against the peer, written by `make bench` from what
//! it measured (`bench/results.json`) between two markers, so that no figure in it is typed
//! by hand; a unit test fails when the README and the committed results disagree.

use anyhow::{Context, anyhow};
use serde_json::Value;

use crate::report::ratio_text;

/// Opens the sentence in the README.
pub const BEGIN: &str = "<!-- bench: written by `make bench` from bench/results.json -->";
/// Closes it.
pub const END: &str = "<!-- /bench -->";

/// The advantage of the row `name` (of any section) in `results.json`.
fn advantage(results: &Value, name: &str) -> anyhow::Result<f64> {
    results["sections"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|s| s["rows"].as_array().into_iter().flatten())
        .find(|r| r["name"] == name)
        .and_then(|r| r["advantage"].as_f64())
        .ok_or_else(|| anyhow!("results.json has no row {name:?} with an advantage"))
}

/// The sentence, from `results.json`.
pub fn sentence(results: &Value) -> anyhow::Result<String> {
    let cpu = advantage(results, "CPU per delivery (ms)")?;
    let rss = advantage(results, "peak RSS (MB)")?;
    let cold = advantage(results, "cold start: start to first event handled (ms)")?;
    let date = results["date"]
        .as_str()
        .context("results.json has no date")?;
    Ok(format!(
        "Against Powertools (the closest peer), the same jobs used {} less CPU per delivery \
         and {} less memory polling, and cold-started {} faster (`make bench`, {date},\n\
         [the evidence](docs/book/src/evidence/performance.md)).",
        ratio_text(cpu),
        ratio_text(rss),
        ratio_text(cold),
    ))
}

/// `readme` with the text between [`BEGIN`] and [`END`] replaced by [`sentence`].
pub fn rewrite(readme: &str, results: &Value) -> anyhow::Result<String> {
    let (before, rest) = readme
        .split_once(BEGIN)
        .with_context(|| format!("the README has no {BEGIN}"))?;
    let (_, after) = rest
        .split_once(END)
        .with_context(|| format!("the README has no {END} after {BEGIN}"))?;
    Ok(format!(
        "{before}{BEGIN}\n{}\n{END}{after}",
        sentence(results)?
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn committed(path: &str) -> String {
        std::fs::read_to_string(format!("{}/{path}", env!("CARGO_MANIFEST_DIR"))).unwrap()
    }

    #[test]
    fn the_readmes_figures_are_the_ones_bench_results_json_holds() {
        let results: Value = serde_json::from_str(&committed("results.json")).unwrap();
        let readme = committed("../README.md");
        assert_eq!(
            rewrite(&readme, &results).unwrap(),
            readme,
            "the README's sentence between the bench markers is not what bench/results.json \
             gives: run `make bench` (it writes both)"
        );
    }

    #[test]
    fn the_performance_page_types_no_figure_of_its_own() {
        // Its tables are bench/results.md, included; a table or a ratio of its own would
        // be a figure typed by hand.
        let page = committed("../docs/book/src/evidence/performance.md");
        assert!(page.contains("{{#include ../../../../bench/results.md"));
        let typed: Vec<&str> = page
            .lines()
            .filter(|l| l.trim_start().starts_with('|') || l.contains('×'))
            .collect();
        assert!(typed.is_empty(), "typed figures: {typed:#?}");
    }

    #[test]
    fn a_readme_without_the_markers_is_refused_by_name() {
        let results = serde_json::json!({"date": "d", "sections": []});
        let e = rewrite("no markers", &results).unwrap_err().to_string();
        assert!(e.contains("the README has no <!-- bench"), "{e}");
    }
}
