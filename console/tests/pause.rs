//! Pausing a job: by hand (`jobs pause` / `jobs resume`), and by the worker after the job's
//! `pause_after_failures` consecutive FAILED runs. Either way the schedule is DISABLED
//! through the Scheduler API, `status` says who paused it, when and why, and `jobs resume`
//! enables it again.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use aws_sdk_scheduler::types::ScheduleState;
use chrono::{DateTime, Utc};
use schedkit::{Envelope, JobContext, JobError, JobPolicy, Metrics, Registry, RetryPolicy};
use schedkit_testkit::{Stack, StackOptions, localstack, metric_total, unique};
use serde_json::json;

use super::cli::{schedkit, stderr, stdout};

/// The schedule's state, read from the Scheduler API.
async fn state_of(scheduler: &aws_sdk_scheduler::Client, group: &str, job: &str) -> ScheduleState {
    scheduler
        .get_schedule()
        .group_name(group)
        .name(job)
        .send()
        .await
        .unwrap()
        .state
        .unwrap()
}

/// Runs `schedkit --stage <stage> args`, asserting it succeeds; its stdout.
fn cmd(stage: &str, args: &[&str]) -> String {
    let mut all = vec!["--stage", stage];
    all.extend_from_slice(args);
    let out = schedkit(&all);
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    stdout(&out)
}

fn audit_log() -> String {
    std::fs::read_to_string(std::env::temp_dir().join("schedkit-cli-test-audit.jsonl")).unwrap()
}

/// `jobs pause` disables the job's schedule through the Scheduler API and records who,
/// when and why: `status` and `jobs` show it, a sync keeps it disabled, `jobs resume`
/// enables it again; both audited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_job_stays_paused_across_a_sync_until_resumed_and_status_says_why() {
    let sdk = localstack().await;
    let stack = Stack::create(&sdk, &unique("pause"), StackOptions::default())
        .await
        .unwrap();
    let stage = stack.name.clone();
    let cmd = |args: &[&str]| cmd(&stage, args);
    cmd(&["schedules", "sync", "--yes"]);
    let scheduler = aws_sdk_scheduler::Client::new(&sdk);
    let state = || state_of(&scheduler, &stack.schedule_group, "long-report");
    assert_eq!(state().await, ScheduleState::Enabled);

    let paused = cmd(&[
        "jobs",
        "pause",
        "long-report",
        "--reason",
        "the report database is migrating",
    ]);
    assert!(paused.starts_with("long-report: paused"), "{paused}");
    assert_eq!(state().await, ScheduleState::Disabled);
    let status = cmd(&["status"]);
    assert!(
        status.contains("paused         long-report since ")
            && status.contains(": the report database is migrating"),
        "{status}"
    );
    assert!(
        cmd(&["jobs"]).contains("PAUSED since "),
        "jobs does not say it is paused"
    );

    let again = cmd(&["schedules", "sync", "--yes"]);
    assert!(
        again.contains("nothing to do"),
        "a sync would undo the pause: {again}"
    );
    assert_eq!(state().await, ScheduleState::Disabled);

    let resumed = cmd(&["jobs", "resume", "long-report"]);
    assert!(
        resumed.contains("resumed (schedule ENABLED); it was paused by "),
        "{resumed}"
    );
    assert_eq!(state().await, ScheduleState::Enabled);
    assert!(!cmd(&["status"]).contains("paused "));
    let audit = audit_log();
    assert!(audit.contains("\"jobs pause\"") && audit.contains("\"jobs resume\""));
}

/// `partner-export` as the worker would run it, failing for good (one attempt) while
/// `failing` is set, with the shipped catalog's `pause_after_failures = 3`.
fn registry(failing: Arc<AtomicBool>) -> Registry {
    let policy = JobPolicy {
        retry: RetryPolicy {
            max_attempts: 1,
            ..RetryPolicy::default()
        },
        pause_after_failures: std::num::NonZeroU32::new(3),
        ..JobPolicy::default()
    };
    Registry::new().register("partner-export", policy, move |_ctx: JobContext| {
        let failing = failing.load(Ordering::SeqCst);
        async move {
            if failing {
                Err(JobError::permanent(
                    "export rejected by the partner API: 422 account blocked",
                ))
            } else {
                Ok(json!({"exported": true}))
            }
        }
    })
}

/// After three FAILED runs in a row the worker pauses the job: its schedule DISABLED
/// through the Scheduler API, the pause recorded by `worker` with the failures, one
/// `AutoPaused`. A DONE run in between starts the count again, and a failure delivered twice
/// counts once. `status` shows the pause and why; `jobs resume` enables the schedule and
/// forgets the failures (one more failure pauses nothing), audited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_three_failed_runs_in_a_row_the_worker_pauses_the_job_until_it_is_resumed() {
    let sdk = localstack().await;
    let stack = Stack::create(&sdk, &unique("autopause"), StackOptions::default())
        .await
        .unwrap();
    let stage = stack.name.clone();
    cmd(&stage, &["schedules", "sync", "--yes"]);
    let scheduler = aws_sdk_scheduler::Client::new(&sdk);
    let state = || state_of(&scheduler, &stack.schedule_group, "partner-export");
    let failing = Arc::new(AtomicBool::new(true));
    let (metrics, lines) = Metrics::capture();
    let worker = stack.processor(registry(failing.clone()), "w", metrics);
    let base: DateTime<Utc> = "2026-12-01T09:30:00Z".parse().unwrap();
    let run =
        |day: i64| Envelope::new("partner-export", base + chrono::Duration::days(day)).to_json();
    let deliver = |bodies: Vec<String>| {
        let (stack, worker) = (&stack, &worker);
        async move {
            stack
                .send_all(bodies.iter().map(String::as_str))
                .await
                .unwrap();
            stack.run_until_drained(std::slice::from_ref(worker)).await;
        }
    };

    // Two failures (the first delivered twice), a success, two failures: never three in a row.
    deliver(vec![run(0)]).await;
    deliver(vec![run(0), run(1)]).await;
    assert_eq!(
        state().await,
        ScheduleState::Enabled,
        "the same failure counted twice"
    );
    failing.store(false, Ordering::SeqCst);
    deliver(vec![run(2)]).await;
    failing.store(true, Ordering::SeqCst);
    deliver(vec![run(3), run(4)]).await;
    assert_eq!(
        state().await,
        ScheduleState::Enabled,
        "a success did not end the streak"
    );
    assert_eq!(metric_total(&lines, "AutoPaused"), 0.0);

    // The third in a row.
    deliver(vec![run(5)]).await;
    assert_eq!(state().await, ScheduleState::Disabled);
    assert_eq!(metric_total(&lines, "AutoPaused"), 1.0);
    let status = cmd(&stage, &["status"]);
    let paused = status
        .lines()
        .find(|l| l.starts_with("paused "))
        .unwrap_or_else(|| panic!("status shows no pause: {status}"));
    assert!(
        paused.starts_with("paused         partner-export since ")
            && paused.contains(" by worker: 3 consecutive runs FAILED (pause_after_failures = 3); the last, `partner-export#2026-12-06T09:30:00Z`: export rejected by the partner API: 422 account blocked"),
        "{paused}"
    );

    // A failure while paused (a run fired by hand) keeps the pause as it was.
    deliver(vec![run(6)]).await;
    assert_eq!(metric_total(&lines, "AutoPaused"), 1.0);
    assert!(
        cmd(&stage, &["status"]).contains(paused),
        "the pause was rewritten"
    );

    let resumed = cmd(&stage, &["jobs", "resume", "partner-export"]);
    assert!(
        resumed.contains("resumed (schedule ENABLED); it was paused by worker"),
        "{resumed}"
    );
    assert_eq!(state().await, ScheduleState::Enabled);
    assert!(!cmd(&stage, &["status"]).contains("paused "));
    // The failures before the resume are forgotten: one more is the first of a new streak.
    deliver(vec![run(7)]).await;
    assert_eq!(state().await, ScheduleState::Enabled);
    assert_eq!(metric_total(&lines, "AutoPaused"), 1.0);
    let audit = audit_log();
    assert!(
        audit
            .lines()
            .any(|l| l.contains("\"jobs resume\"") && l.contains("partner-export")),
        "{audit}"
    );
}
