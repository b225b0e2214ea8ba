//! What the worker binary writes: EMF metric lines and JSON log lines, nothing else, and
//! no payloads unless asked.

use std::collections::BTreeSet;

use schedkit::Envelope;
use schedkit_testkit::{Stack, StackOptions};
use serde_json::{Value, json};

const SECRET: &str = "s3cr3t-card-4242";
const TRANSITION_FIELDS: [&str; 8] = [
    "job",
    "key",
    "execution_id",
    "attempt",
    "status",
    "duration_ms",
    "error",
    "request_id",
];

/// Runs the worker in polling mode over a small mixed burst; returns its stdout lines.
async fn run_worker(log_payloads: bool) -> Vec<String> {
    let stack = Stack::lane("telemetry", StackOptions::default()).await;
    let at = "2026-11-01T05:00:00Z".parse().unwrap();
    let mut invoice = Envelope::new("record-invoice", at);
    invoice.payload =
        json!({"tenant": "acme", "billing_month": "2026-10", "amount_cents": 5, "card": SECRET})
            .as_object()
            .cloned();
    let mut flaky = Envelope::new("flaky-sync", at);
    flaky.payload = json!({"fail_times": 1}).as_object().cloned();
    let mut failing = Envelope::new("partner-export", at);
    failing.payload = json!({"note": SECRET}).as_object().cloned();
    for e in [&invoice, &invoice, &flaky, &failing] {
        stack.send_envelope(e).await.unwrap();
    }
    stack.send("not json").await.unwrap();

    let out = tokio::process::Command::new(schedkit_testkit::binary("worker"))
        .args(["--until-drained", "--wait-seconds", "1"])
        .envs(stack.worker_env())
        .env(
            "SCHEDKIT_LOG_PAYLOADS",
            if log_payloads { "1" } else { "0" },
        )
        .env("RUST_LOG", "info")
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "worker failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn check_emf(line: &Value) -> Vec<String> {
    let directive = &line["_aws"]["CloudWatchMetrics"][0];
    assert!(line["_aws"]["Timestamp"].is_i64(), "{line}");
    assert_eq!(directive["Namespace"], "schedkit", "{line}");
    assert_eq!(directive["Dimensions"], json!([["Stage", "Job"]]), "{line}");
    assert!(line["Job"].is_string(), "the dimension has a value: {line}");
    // The stage, read from the executions table's name (`schedkit-<stage>-executions`).
    assert!(
        line["Stage"]
            .as_str()
            .is_some_and(|s| s.starts_with("telemetry")),
        "the stage dimension: {line}"
    );
    let metrics = directive["Metrics"].as_array().expect("Metrics is a list");
    assert!(!metrics.is_empty());
    metrics
        .iter()
        .map(|m| {
            let name = m["Name"].as_str().expect("metric name").to_string();
            assert!(
                matches!(m["Unit"].as_str(), Some("Count" | "Milliseconds")),
                "{line}"
            );
            assert!(line[&name].is_number(), "value of {name} present: {line}");
            name
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdout_is_valid_emf_and_json_logs_without_payloads() {
    let lines = run_worker(false).await;
    let mut metric_names = BTreeSet::new();
    let mut statuses = BTreeSet::new();
    for text in &lines {
        let line: Value =
            serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
        assert!(!text.contains(SECRET), "payload leaked into stdout: {text}");
        if line.get("_aws").is_some() {
            metric_names.extend(check_emf(&line));
            continue;
        }
        assert!(
            line["timestamp"].is_string() && line["level"].is_string(),
            "{text}"
        );
        if line["message"] == "transition" {
            for field in TRANSITION_FIELDS {
                assert!(line.get(field).is_some(), "field {field} missing: {text}");
            }
            statuses.insert(line["status"].as_str().unwrap().to_string());
        }
    }
    let expected = [
        "Started",
        "Succeeded",
        "Retried",
        "Failed",
        "Duplicate",
        "Rejected",
        "Duration",
        "ScheduleLag",
    ];
    for name in expected {
        assert!(
            metric_names.contains(name),
            "no {name} metric in {metric_names:?}"
        );
    }
    for status in ["RUNNING", "DONE", "RETRYING", "FAILED", "REJECTED"] {
        assert!(
            statuses.contains(status),
            "no {status} transition in {statuses:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payloads_are_logged_only_when_asked() {
    let lines = run_worker(true).await;
    assert!(lines.iter().any(|l| l.contains(SECRET)));
    assert!(
        lines
            .iter()
            .filter(|l| l.contains(SECRET))
            .all(|l| l.contains(r#""message":"transition""#)),
        "only transition lines carry the payload"
    );
}
