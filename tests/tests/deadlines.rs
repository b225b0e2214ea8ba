//! Timeouts and deadlines: a batch ends by its invocation's deadline. A message is not
//! started within the margin of it (no attempt spent, visible again at once), a running
//! attempt is cancelled before it and recorded RETRYING, a job that always outlives its
//! invocation ends FAILED with that reason after its attempts, and a claim whose attempts
//! were all spent without an outcome dead-letters without running.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use schedkit::batch::attr;
use schedkit::store::{ClaimOutcome, ClaimRequest};
use schedkit::{
    Envelope, JobContext, JobPolicy, Metrics, Outcome, Processor, Registry, RetryPolicy, Status,
};
use schedkit_testkit::Stack;
use serde_json::json;
use tokio::time::Instant;

fn envelope() -> Envelope {
    Envelope::new("import", "2026-11-01T09:00:00Z".parse().unwrap())
}

/// `import` never ends by itself; two attempts, a 1 s backoff.
fn worker(stack: &Stack, runs: Arc<AtomicU32>) -> Processor {
    let policy = JobPolicy {
        retry: RetryPolicy {
            max_attempts: 2,
            first_delay: Duration::from_secs(1),
            ..RetryPolicy::default()
        },
        ..JobPolicy::default().with_lease(Duration::from_secs(10))
    };
    stack.processor(
        Registry::new().register("import", policy, move |_ctx: JobContext| {
            let runs = runs.clone();
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                std::future::pending::<()>().await;
                Ok(json!({}))
            }
        }),
        "lambda",
        Metrics::capture().0,
    )
}

async fn stack(name: &str) -> Stack {
    // A received message stays hidden 30 s unless the worker says otherwise.
    Stack::with_visibility_timeout(name, 30).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_outlives_every_invocation_is_cancelled_before_each_deadline_and_ends_failed_with_the_reason()
 {
    let stack = stack("deadline").await;
    let runs = Arc::new(AtomicU32::new(0));
    let lambda = worker(&stack, runs.clone());
    stack.send_envelope(&envelope()).await.unwrap();
    let mut outcomes = Vec::new();
    while outcomes.len() < 2 {
        let batch = stack.receive(1, Duration::from_secs(5)).await.unwrap();
        if batch.is_empty() {
            continue;
        }
        // Each invocation has 3 s left.
        let deadline = Instant::now() + Duration::from_secs(3);
        let reports = lambda.process_each(batch, None, None, Some(deadline)).await;
        let ended = Instant::now();
        assert!(
            ended < deadline,
            "outcome written {:?} after the deadline",
            ended - deadline
        );
        outcomes.push(reports[0].outcome.clone());
    }
    let Outcome::Retrying { error, .. } = &outcomes[0] else {
        panic!("{outcomes:?}");
    };
    assert!(
        error.starts_with("cancelled before the function's deadline"),
        "{error}"
    );
    assert!(
        matches!(outcomes[1], Outcome::DeadLettered { .. }),
        "{outcomes:?}"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    let record = stack.records().await.unwrap().pop().unwrap();
    assert_eq!((record.status, record.attempt), (Status::Failed, 2));
    let letters = stack.drain_dlq(Duration::from_secs(5)).await.unwrap();
    let attrs = letters[0].message_attributes.as_ref().unwrap();
    let reason = attrs[attr::REASON].string_value.as_deref();
    assert_eq!(reason, Some("attempts-exhausted"));
    let error = attrs[attr::ERROR].string_value.as_deref().unwrap();
    assert!(
        error.starts_with("cancelled before the function's deadline"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_is_not_started_within_the_margin_of_the_deadline_and_comes_back_at_once_without_an_attempt()
 {
    let stack = stack("deferred").await;
    let runs = Arc::new(AtomicU32::new(0));
    let lambda = worker(&stack, runs.clone());
    stack.send_envelope(&envelope()).await.unwrap();
    let batch = stack.receive(1, Duration::from_secs(5)).await.unwrap();
    let deadline = Instant::now() + Duration::from_millis(500);
    let reports = lambda.process_each(batch, None, None, Some(deadline)).await;
    // Sent again to come back at once (the copy in hand deleted): a deferral never counts
    // toward the queue's maxReceiveCount.
    assert_eq!(reports[0].outcome, Outcome::Deferred { resent: true });
    assert!(reports[0].outcome.acknowledged());
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    assert!(stack.records().await.unwrap().is_empty(), "nothing claimed");
    // Back at once, not after the queue's 30 s; a first receive of its copy.
    let again = stack.receive(1, Duration::from_secs(2)).await.unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!(
        again[0]
            .attributes
            .get("ApproximateReceiveCount")
            .map(String::as_str),
        Some("1")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_whose_attempts_were_all_spent_without_an_outcome_dead_letters_without_running() {
    let stack = stack("spent").await;
    let runs = Arc::new(AtomicU32::new(0));
    let lambda = worker(&stack, runs.clone());
    let key = "import#2026-11-01T09:00:00Z".to_string();
    // Two workers claimed the run and died (their leases ran out, no outcome written).
    let t0 = chrono::Utc::now() - chrono::Duration::seconds(60);
    for (i, owner) in ["dead-1", "dead-2"].into_iter().enumerate() {
        let claim = ClaimRequest {
            key: key.clone(),
            job: "import".into(),
            scheduled_for: "2026-11-01T09:00:00.000Z".into(),
            payload_hash: schedkit::key::payload_hash(&envelope()),
            input: "{}".into(),
            message_id: None,
            owner: owner.into(),
            now: t0 + chrono::Duration::seconds(20 * i as i64),
            lease: Duration::from_secs(10),
            retention: Duration::from_secs(3600),
            redrive: None,
        };
        let claimed = stack.store().claim(&claim).await.unwrap();
        assert!(
            matches!(claimed, ClaimOutcome::Claimed { .. }),
            "{claimed:?}"
        );
    }
    stack.send_envelope(&envelope()).await.unwrap();
    let stats = stack.run_until_drained(std::slice::from_ref(&lambda)).await;
    assert_eq!(
        stats.outcomes.get("dead-lettered"),
        Some(&1),
        "{:?}",
        stats.outcomes
    );
    assert_eq!(runs.load(Ordering::SeqCst), 0, "not run a third time");
    let record = stack.record(&key).await.unwrap().unwrap();
    assert_eq!((record.status, record.attempt), (Status::Failed, 3));
    assert!(
        record.last_error.as_deref().unwrap().starts_with(
            "attempt 3 of at most 2: the earlier ones were claimed and never finished"
        ),
        "{:?}",
        record.last_error
    );
}
