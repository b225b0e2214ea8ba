//! `make bench` does not rot: `peer-bench` at a tiny N against the debug worker (`make
//! bench` runs it at N = 2,000 against the release build), both sides of every section
//! measured and reported (or, where the peer has no such feature, its cells saying so).
//! The figures of so small a run mean nothing; that it runs does.

use std::process::Command;

use schedkit_testkit::{binary, endpoint, target_dir, unique};
use serde_json::Value;

#[tokio::test]
async fn the_benchmark_runs_both_sides_of_every_section_and_writes_its_results() {
    let out = target_dir().join(unique("bench-smoke"));
    let run = tokio::task::spawn_blocking({
        let out = out.clone();
        move || {
            Command::new(binary("peer-bench"))
                .args([
                    "--worker-profile",
                    "debug",
                    "--deliveries",
                    "40",
                    "--rounds",
                    "1",
                ])
                .args(["--cold-starts", "1", "--batches", "1", "--letters", "40"])
                .args(["--redrive-rounds", "1", "--hol-shorts", "20"])
                .args([
                    "--hol-long-seconds",
                    "3",
                    "--flow-runs",
                    "30",
                    "--flow-rounds",
                    "1",
                    "--backlog-runs",
                    "30",
                    "--urgent-backlog-runs",
                    "30",
                ])
                .args(["--accountant-jobs", "12", "--accountant-rounds", "1"])
                .args(["--page-records", "200", "--page-letters", "20"])
                .args(["--page-rounds", "1", "--catalog-sizes", "10,30", "--out"])
                .arg(&out)
                .env("AWS_ENDPOINT_URL", endpoint())
                .output()
                .expect("peer-bench starts")
        }
    })
    .await
    .unwrap();
    assert!(
        run.status.success(),
        "peer-bench failed:\n{}\n{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    let markdown = std::fs::read_to_string(out.join("results.md")).unwrap();
    // What was measured, for `--nocapture` (the figures mean little at this size).
    println!("{markdown}");
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    let sections = json["sections"].as_array().unwrap();
    let titles: Vec<&str> = sections
        .iter()
        .map(|s| s["title"].as_str().unwrap())
        .collect();
    for wanted in [
        "40 deliveries, 20 % duplicates",
        "As Lambda functions",
        "Selective DLQ redrive of 40 letters",
        "One polling worker: 20 one-second jobs beside one 3 s job",
        "Flow control: 30 runs of a 50 ms job",
        "Behind a backlog: one run sent after 30 (a quiet tenant's) or 30 (an urgent run) one-second runs",
        "The accountant: a catalog of 12 scheduled jobs",
        "The web page: 200 records and 20 dead letters",
        "A catalog of N jobs (N = 10, 30)",
        "Cost per million jobs",
    ] {
        assert!(
            titles.iter().any(|t| t.starts_with(wanted)),
            "no section {wanted:?} in {titles:?}"
        );
        assert!(markdown.contains(&format!("## {wanted}")), "{markdown}");
    }
    assert!(
        json["command"].as_str().unwrap().contains("--flow-runs 30"),
        "{}",
        json["command"]
    );
    // Flow control: schedkit's figures in every case, the peer's cells saying it has none.
    let flow = sections
        .iter()
        .find(|s| s["title"].as_str().unwrap().starts_with("Flow control"))
        .unwrap();
    assert_eq!(
        flow["theirs"], "Powertools 3.37.0 (Python 3.13)",
        "{flow:#}"
    );
    let flow_rows = flow["rows"].as_array().unwrap();
    for case in [
        "no limit",
        "a shared limit, 4 at once",
        "2 at once per tenant",
    ] {
        for measure in [
            "runs per second",
            "DynamoDB requests per run",
            "SQS requests per run",
        ] {
            assert!(
                flow_rows.iter().any(|r| {
                    let name = r["name"].as_str().unwrap();
                    name.starts_with(case) && name.ends_with(measure)
                }),
                "no row {case:?} … {measure:?} in {flow:#}"
            );
        }
    }
    let none = "none (the peer has no limit)";
    assert!(
        flow_rows.iter().all(|r| r["theirs_text"] == none),
        "{flow:#}"
    );
    assert!(markdown.contains(&format!("| {none} |")), "{markdown}");
    // Behind a backlog: the quiet tenant's and the urgent run's waits, each measured.
    let backlog = sections
        .iter()
        .find(|s| s["title"].as_str().unwrap().starts_with("Behind a backlog"))
        .unwrap();
    let waits = backlog["rows"].as_array().unwrap();
    assert_eq!(waits.len(), 2, "{backlog:#}");
    assert!(
        waits
            .iter()
            .all(|r| r["ours"].as_array().is_some_and(|o| o.len() == 1)),
        "{backlog:#}"
    );
    // The web page: each page's time and requests, the peer's cells saying it has none.
    let page = sections
        .iter()
        .find(|s| s["title"].as_str().unwrap().starts_with("The web page"))
        .unwrap();
    let page_rows = page["rows"].as_array().unwrap();
    for p in ["the overview", "a job's page", "the dead letters"] {
        for measure in [
            "milliseconds to the whole page",
            "DynamoDB requests",
            "SQS requests",
        ] {
            assert!(
                page_rows
                    .iter()
                    .any(|r| r["name"].as_str().unwrap() == format!("{p}: {measure}")),
                "no row {p:?}: {measure:?} in {page:#}"
            );
        }
    }
    assert!(
        page_rows
            .iter()
            .all(|r| r["theirs_text"] == "none (the peer has no web page)"),
        "{page:#}"
    );
    for s in sections {
        for r in s["rows"].as_array().unwrap() {
            for side in ["ours", "theirs"] {
                if side == "theirs" && r["theirs_text"].is_string() {
                    continue;
                }
                let samples = r[side].as_array().unwrap();
                assert!(
                    !samples.is_empty()
                        && samples
                            .iter()
                            .all(|v| v.as_f64().is_some_and(f64::is_finite)),
                    "{}: {side} has no finite samples: {r}",
                    r["name"]
                );
            }
        }
    }
    std::fs::remove_dir_all(&out).unwrap();
}
