//! Overlap policies on LocalStack, a long job and fast firings: with `skip` exactly one run
//! happens and the others are SKIPPED; with `buffer_one` one more runs after it (never
//! beside it) and the rest are SKIPPED; counted in the records and in the metrics. A
//! firing after the runs ended runs again: the slot was given back.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use schedkit::{Envelope, JobContext, JobPolicy, Metrics, Overlap, Registry, Status};
use schedkit_testkit::{Stack, StackOptions, localstack, metric_total, unique};
use serde_json::json;

fn registry(overlap: Overlap) -> Registry {
    let policy = JobPolicy {
        overlap,
        timeout: Some(Duration::from_secs(20)),
        ..JobPolicy::default().with_lease(Duration::from_secs(10))
    };
    Registry::new().register("slow", policy, |_ctx: JobContext| async move {
        tokio::time::sleep(Duration::from_secs(3)).await;
        Ok(json!(null))
    })
}

/// Five firings a minute apart, all due: runs them with three pollers at once, and
/// returns the records of the job by status.
async fn five_firings(
    overlap: Overlap,
) -> (
    Stack,
    Vec<schedkit::ExecutionRecord>,
    Arc<Mutex<Vec<String>>>,
) {
    let sdk = localstack().await;
    let stack = Stack::create(&sdk, &unique("overlap"), StackOptions::default())
        .await
        .unwrap();
    let (metrics, lines) = Metrics::capture();
    let workers: Vec<_> = ["a", "b", "c"]
        .iter()
        .map(|w| stack.processor(registry(overlap), w, metrics.clone()))
        .collect();
    let base: DateTime<Utc> = "2026-12-01T09:00:00Z".parse().unwrap();
    let bodies: Vec<String> = (0..5)
        .map(|i| Envelope::new("slow", base + chrono::Duration::minutes(i)).to_json())
        .collect();
    stack
        .send_all(bodies.iter().map(String::as_str))
        .await
        .unwrap();
    stack.run_until_drained(&workers).await;
    let records = stack.records().await.unwrap();
    (stack, records, lines)
}

fn count(records: &[schedkit::ExecutionRecord], status: Status) -> usize {
    records.iter().filter(|r| r.status == status).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn skip_runs_one_of_overlapping_firings_and_records_the_rest_skipped() {
    let (stack, records, lines) = five_firings(Overlap::Skip).await;
    assert_eq!(records.len(), 5, "{records:#?}");
    assert_eq!(count(&records, Status::Done), 1, "{records:#?}");
    assert_eq!(count(&records, Status::Skipped), 4, "{records:#?}");
    let done = records.iter().find(|r| r.status == Status::Done).unwrap();
    for r in records.iter().filter(|r| r.status == Status::Skipped) {
        assert!(
            r.last_error
                .as_deref()
                .unwrap_or_default()
                .contains(&done.execution_key),
            "{r:?}"
        );
        assert_eq!(r.attempt, 0, "a skipped run spent no attempt");
    }
    assert_eq!(metric_total(&lines, "Skipped"), 4.0);
    assert_eq!(metric_total(&lines, "Succeeded"), 1.0);

    // The runs are over: the slot was given back, a later firing runs.
    let (metrics, _) = Metrics::capture();
    let worker = stack.processor(registry(Overlap::Skip), "d", metrics);
    stack
        .send_envelope(&Envelope::new(
            "slow",
            "2026-12-01T10:00:00Z".parse().unwrap(),
        ))
        .await
        .unwrap();
    stack.run_until_drained(std::slice::from_ref(&worker)).await;
    let later = stack
        .record("slow#2026-12-01T10:00:00Z")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(later.status, Status::Done);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn buffer_one_runs_one_waiter_after_the_running_one_and_skips_the_rest() {
    let (_stack, records, lines) = five_firings(Overlap::BufferOne).await;
    assert_eq!(records.len(), 5, "{records:#?}");
    assert_eq!(count(&records, Status::Done), 2, "{records:#?}");
    assert_eq!(count(&records, Status::Skipped), 3, "{records:#?}");
    let mut done: Vec<_> = records
        .iter()
        .filter(|r| r.status == Status::Done)
        .collect();
    done.sort_by(|a, b| a.started_at.cmp(&b.started_at));
    assert!(
        done[0].finished_at.as_deref().unwrap() <= done[1].started_at.as_deref().unwrap(),
        "the waiter ran beside the running one: {done:#?}"
    );
    assert_eq!(metric_total(&lines, "Skipped"), 3.0);
    assert_eq!(metric_total(&lines, "Succeeded"), 2.0);
    assert!(metric_total(&lines, "OverlapWaited") >= 1.0);
}
