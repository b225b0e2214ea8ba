//! Cancelling runs through the console, with the worker binary polling the stage: a run
//! waiting for its retry is never run again, a running one stops at its next heartbeat
//! with its effect never applied, and 50 runs still in the queue are cancelled in bulk
//! after a preview that counts them right; none of them runs. Every cancelled record says
//! who cancelled it and why, and is listed by `executions list --status cancelled`.

use std::time::Duration;

use schedkit::catalog::Catalog;
use schedkit::{Envelope, Status};
use schedkit_testkit::processes::{self, console_json};
use schedkit_testkit::{Stack, StackOptions, binary};
use serde_json::{Value, json};
use tokio::process::Child;
use tokio::time::Instant;

const CATALOG: &str = r#"
[jobs.flaky-sync]
owner = "crm-team"
payload = { fail_times = 1 }
lease_seconds = 30

[jobs.flaky-sync.retry]
max_attempts = 5
first_delay_seconds = 40
base_delay_seconds = 40
max_delay_seconds = 40

[jobs.record-invoice]
owner = "billing-team"
payload = { amount_cents = 100, tenant = "acme" }
lease_seconds = 8
"#;

fn worker(stack: &Stack, catalog: &std::path::Path) -> Child {
    processes::worker(stack, catalog, "cancel", "worker")
}

fn catalog_file(stack: &Stack) -> std::path::PathBuf {
    Catalog::parse(CATALOG, "cancel.toml").expect("the test's catalog");
    let file = std::env::temp_dir().join(format!("{}-cancel.toml", stack.name));
    std::fs::write(&file, CATALOG).unwrap();
    file
}

fn envelope(job: &str, key: &str, payload: Value) -> String {
    let mut e = Envelope::new(job, "2026-12-01T09:00:00Z".parse().unwrap());
    e.key = Some(key.into());
    e.payload = payload.as_object().cloned();
    e.to_json()
}

/// Waits until `key`'s record is in `status`.
async fn until_status(stack: &Stack, key: &str, status: Status, limit: Duration) {
    let deadline = Instant::now() + limit;
    loop {
        let r = stack.record(key).await.unwrap();
        if r.as_ref().is_some_and(|r| r.status == status) {
            return;
        }
        assert!(Instant::now() < deadline, "{key} not {status}: {r:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until the jobs queue holds nothing, visible, in flight or delayed.
async fn queue_empty(stack: &Stack, limit: Duration) {
    let deadline = Instant::now() + limit;
    loop {
        let counts = stack.counts(&stack.queue_url).await.unwrap();
        if counts == (0, 0, 0) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the queue still holds {counts:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retrying_run_and_a_running_one_are_cancelled_and_never_complete() {
    let stack = Stack::lane("cancel-one", StackOptions::default()).await;
    let file = catalog_file(&stack);
    let _worker = worker(&stack, &file);
    stack
        .send(&envelope("flaky-sync", "sync-1", json!({"fail_times": 1})))
        .await
        .unwrap();
    stack
        .send(&envelope(
            "record-invoice",
            "invoice-1",
            json!({"amount_cents": 100, "render_seconds": 30}),
        ))
        .await
        .unwrap();
    until_status(&stack, "sync-1", Status::Retrying, Duration::from_secs(30)).await;
    until_status(
        &stack,
        "invoice-1",
        Status::Running,
        Duration::from_secs(30),
    )
    .await;

    let retrying = console_json(
        &stack,
        &file,
        &[
            "executions",
            "cancel",
            "sync-1",
            "--reason",
            "CRM migrated",
            "--yes",
        ],
    );
    assert_eq!(retrying["was"], "RETRYING", "{retrying:#}");
    let cancelled_at = Instant::now();
    let running = console_json(
        &stack,
        &file,
        &[
            "executions",
            "cancel",
            "invoice-1",
            "--reason",
            "wrong amount",
            "--yes",
        ],
    );
    assert_eq!(running["was"], "RUNNING", "{running:#}");

    // The running attempt stops at its next heartbeat (every 2 s of its 8 s lease), long
    // before its 30 s of rendering: the worker says so in its log.
    let log = schedkit_testkit::target_dir()
        .join("cancel")
        .join(format!("{}-worker.log", stack.name));
    loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let stopped = text
            .lines()
            .any(|l| l.contains("invoice-1") && l.contains("CANCELLED"));
        if stopped {
            break;
        }
        assert!(
            cancelled_at.elapsed() < Duration::from_secs(6),
            "the attempt did not stop at a heartbeat:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The retrying run's next delivery (after its 40 s backoff) is acknowledged unrun.
    queue_empty(&stack, Duration::from_secs(60)).await;
    let sync = stack.record("sync-1").await.unwrap().unwrap();
    assert_eq!(sync.status, Status::Cancelled);
    assert_eq!(sync.attempt, 1, "never run again: {sync:?}");
    assert_eq!(sync.cancelled.as_ref().unwrap().reason, "CRM migrated");
    let invoice = stack.record("invoice-1").await.unwrap().unwrap();
    assert_eq!(invoice.status, Status::Cancelled, "{invoice:?}");
    assert_eq!(invoice.attempt, 1, "{invoice:?}");
    assert_eq!(
        stack.effect_applied("invoice-1").await.unwrap(),
        0,
        "the effect was never applied"
    );
    let by = &invoice.cancelled.as_ref().unwrap().by;
    assert!(!by.is_empty(), "{invoice:?}");
    let letters = stack.drain_dlq(Duration::from_secs(1)).await.unwrap();
    assert!(letters.is_empty(), "{letters:?}");

    let listed = console_json(
        &stack,
        &file,
        &["executions", "list", "--status", "cancelled"],
    );
    let keys: Vec<&str> = listed["records"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["execution_key"].as_str())
        .collect();
    assert!(
        keys.contains(&"sync-1") && keys.contains(&"invoice-1"),
        "{listed:#}"
    );
    // `status` lists the day's cancellations, who and why.
    let status = console_json(&stack, &file, &["status"]);
    let cancelled = status["cancelled"]
        .as_array()
        .expect("cancellations in status");
    let shown = cancelled
        .iter()
        .find(|c| c["key"] == "sync-1")
        .unwrap_or_else(|| panic!("{status:#}"));
    assert_eq!(shown["reason"], "CRM migrated", "{status:#}");
    assert_eq!(shown["by"], sync.cancelled.as_ref().unwrap().by.as_str());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_queued_runs_are_cancelled_in_bulk_after_a_right_preview_and_none_runs() {
    let stack = Stack::lane("cancel-bulk", StackOptions::default()).await;
    let file = catalog_file(&stack);
    let bodies: Vec<String> = (0..50)
        .map(|i| {
            envelope(
                "record-invoice",
                &format!("wrong-{i}"),
                json!({"amount_cents": i}),
            )
        })
        .chain(
            (0..5).map(|i| envelope("flaky-sync", &format!("keep-{i}"), json!({"fail_times": 0}))),
        )
        .collect();
    stack
        .send_all(bodies.iter().map(String::as_str))
        .await
        .unwrap();

    // Without --yes and no terminal, nothing changes; the preview says how many.
    let audit = std::env::temp_dir().join(format!("{}-audit.jsonl", stack.name));
    let refused = std::process::Command::new(binary("schedkit"))
        .args([
            "executions",
            "cancel",
            "--job",
            "record-invoice",
            "--reason",
            "bad deploy",
        ])
        .envs(stack.worker_env())
        .env("SCHEDKIT_CATALOG", &file)
        .env("SCHEDKIT_AUDIT_LOG", &audit)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        said.contains("50 run(s) of record-invoice to cancel: 50 queued"),
        "{said}"
    );
    assert!(said.contains("--yes"), "{said}");

    let done = console_json(
        &stack,
        &file,
        &[
            "executions",
            "cancel",
            "--job",
            "record-invoice",
            "--reason",
            "bad deploy",
            "--yes",
        ],
    );
    // With --yes the queue is scanned once, by the action (each scan's receive counts
    // toward a message's maxReceiveCount): the preview counts only records.
    assert_eq!(
        done["previewed"]["by_state"].get("queued"),
        None,
        "{done:#}"
    );
    assert_eq!(done["cancelled"]["by_state"]["queued"], 50, "{done:#}");
    assert_eq!(done["keys"].as_array().unwrap().len(), 50, "{done:#}");

    // The worker starts only now: the other job's runs run, the cancelled ones never.
    let _worker = worker(&stack, &file);
    for i in 0..5 {
        until_status(
            &stack,
            &format!("keep-{i}"),
            Status::Done,
            Duration::from_secs(60),
        )
        .await;
    }
    queue_empty(&stack, Duration::from_secs(30)).await;
    for i in 0..50 {
        let key = format!("wrong-{i}");
        let r = stack.record(&key).await.unwrap().unwrap();
        assert_eq!((r.status, r.attempt), (Status::Cancelled, 0), "{r:?}");
        assert_eq!(stack.effect_applied(&key).await.unwrap(), 0, "{key}");
    }
    // The audit trail has the action, begun and ended with its counts.
    let lines = std::fs::read_to_string(&audit).unwrap();
    let ends: Vec<Value> = lines
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["what"] == "executions cancel" && l["phase"] == "end")
        .collect();
    assert_eq!(ends.len(), 1, "{lines}");
    assert_eq!(ends[0]["finished"], true, "{lines}");
    assert_eq!(ends[0]["result"]["keys"].as_array().unwrap().len(), 50);
}

/// The review's hole: a redriven dead letter in the queue has a FAILED record, which a
/// queued run's cancellation (waiting records only) refused, so the bulk cancel let it run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redriven_letter_waiting_in_the_queue_is_cancelled_with_the_queued_runs() {
    let stack = Stack::lane("cancel-redriven", StackOptions::default()).await;
    let file = catalog_file(&stack);
    let body = envelope("record-invoice", "redriven-1", json!({"amount_cents": 7}));
    // Its run FAILED (as a worker records it), and its letter is back in the queue.
    let e = Envelope::parse(&body).unwrap();
    let store = stack.store();
    let req = schedkit::store::ClaimRequest {
        key: "redriven-1".into(),
        job: e.job.clone(),
        scheduled_for: "2026-12-01T09:00:00Z".into(),
        payload_hash: schedkit::key::payload_hash(&e),
        input: body.clone(),
        message_id: Some("first".into()),
        owner: "w:1".into(),
        now: chrono::Utc::now(),
        lease: Duration::from_secs(30),
        retention: Duration::from_secs(3600),
        redrive: None,
    };
    let schedkit::store::ClaimOutcome::Claimed { record, .. } = store.claim(&req).await.unwrap()
    else {
        panic!("a new key is claimed");
    };
    let failed = schedkit::store::Finish::Failed {
        error: "the partner said no".into(),
    };
    store
        .finish(&record, &failed, chrono::Utc::now())
        .await
        .unwrap();
    stack.send(&body).await.unwrap();

    let done = console_json(
        &stack,
        &file,
        &[
            "executions",
            "cancel",
            "--job",
            "record-invoice",
            "--reason",
            "gone",
            "--yes",
        ],
    );
    assert_eq!(done["cancelled"]["by_state"]["queued"], 1, "{done:#}");
    let r = stack.record("redriven-1").await.unwrap().unwrap();
    assert_eq!(r.status, Status::Cancelled, "{r:?}");
    queue_empty(&stack, Duration::from_secs(5)).await;
}
