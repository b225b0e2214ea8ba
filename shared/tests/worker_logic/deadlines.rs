//! Timeouts and deadlines: a batch ends by its invocation's deadline. A message is not
//! started within the margin of it (no attempt spent, back at once), a running attempt is
//! cancelled before it and recorded RETRYING, a job that always outlives its invocation
//! ends FAILED with that reason after its attempts, and a claim whose attempts were all
//! spent without an outcome dead-letters without running.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use schedkit::dead_letter::attr;
use schedkit::queue::MemoryQueue;
use schedkit::store::{ClaimOutcome, ClaimRequest, ExecutionStore, MemoryStore};
use schedkit::{Ctx, Envelope, JobPolicy, Jobs, Metrics, Outcome, Processor, RetryPolicy, Status};
use serde_json::json;
use tokio::time::Instant;

use super::{config, drain, processor_of};

fn envelope() -> Envelope {
    Envelope::new("import", "2026-11-01T09:00:00Z".parse().unwrap())
}

/// `import` never ends by itself; two attempts, a 1 s backoff.
fn worker(store: &MemoryStore, queue: &MemoryQueue, runs: Arc<AtomicU32>) -> Processor {
    let policy = JobPolicy {
        retry: RetryPolicy {
            max_attempts: 2,
            first_delay: Duration::from_secs(1),
            ..RetryPolicy::default()
        },
        ..JobPolicy::default().with_lease(Duration::from_secs(10))
    };
    let registry = Jobs::new()
        .add("import", move |_ctx: Ctx| {
            let runs = runs.clone();
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                std::future::pending::<()>().await;
                Ok::<_, schedkit::JobError>(json!({}))
            }
        })
        .bind_policies(|_| policy.clone());
    processor_of(store, queue, registry, "lambda", Metrics::capture().0)
}

#[tokio::test(start_paused = true)]
async fn a_job_that_outlives_every_invocation_is_cancelled_before_each_deadline_and_ends_failed_with_the_reason()
 {
    let (store, queue) = (MemoryStore::default(), MemoryQueue::new(13));
    let runs = Arc::new(AtomicU32::new(0));
    let lambda = worker(&store, &queue, runs.clone());
    queue.send_body(&envelope().to_json());
    let mut outcomes = Vec::new();
    while outcomes.len() < 2 {
        let batch = queue.receive(1, Duration::from_secs(30));
        if batch.is_empty() {
            tokio::time::sleep(Duration::from_millis(500)).await;
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
    let record = &store.snapshot().records["import#2026-11-01T09:00:00Z"];
    assert_eq!((record.status, record.attempt), (Status::Failed, 2));
    let letter = queue.lock().dead_letters[0].clone();
    let text = |name: &str| letter.attributes[name].string.clone().unwrap_or_default();
    assert_eq!(text(attr::REASON), "attempts-exhausted");
    let error = text(attr::ERROR);
    assert!(
        error.starts_with("cancelled before the function's deadline"),
        "{error}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_message_is_not_started_within_the_margin_of_the_deadline_and_comes_back_at_once_without_an_attempt()
 {
    let (store, queue) = (MemoryStore::default(), MemoryQueue::new(13));
    let runs = Arc::new(AtomicU32::new(0));
    let lambda = worker(&store, &queue, runs.clone());
    queue.send_body(&envelope().to_json());
    let batch = queue.receive(1, Duration::from_secs(30));
    let deadline = Instant::now() + Duration::from_millis(500);
    let reports = lambda.process_each(batch, None, None, Some(deadline)).await;
    // Sent again to come back at once (the copy in hand deleted): a deferral never counts
    // toward the queue's maxReceiveCount.
    assert_eq!(reports[0].outcome, Outcome::Deferred { resent: true });
    assert!(reports[0].outcome.acknowledged());
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    assert!(store.snapshot().records.is_empty(), "nothing claimed");
    // Back at once, not after the 30 s it was hidden for; a first receive of its copy.
    let again = queue.receive(1, Duration::from_secs(30));
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].receive_count, 1);
}

#[tokio::test(start_paused = true)]
async fn a_claim_whose_attempts_were_all_spent_without_an_outcome_dead_letters_without_running() {
    let (store, queue) = (MemoryStore::default(), MemoryQueue::new(13));
    let runs = Arc::new(AtomicU32::new(0));
    let lambda = worker(&store, &queue, runs.clone());
    let key = "import#2026-11-01T09:00:00Z".to_string();
    // Two workers claimed the run and died (their leases ran out, no outcome written).
    let t0 = config().clock.now() - chrono::Duration::seconds(60);
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
        let claimed = store.claim(&claim).await.unwrap();
        assert!(
            matches!(claimed, ClaimOutcome::Claimed { .. }),
            "{claimed:?}"
        );
    }
    queue.send_body(&envelope().to_json());
    let labels = drain(&lambda, &queue, Duration::from_secs(5)).await;
    assert_eq!(labels, ["dead-lettered"]);
    assert_eq!(runs.load(Ordering::SeqCst), 0, "not run a third time");
    let record = &store.snapshot().records[&key];
    assert_eq!((record.status, record.attempt), (Status::Failed, 3));
    let error = record.last_error.as_deref().unwrap();
    assert!(
        error.starts_with(
            "attempt 3 of at most 2: the earlier ones were claimed and never finished"
        ),
        "{error}"
    );
    assert!(queue.lock().messages.is_empty());
}
