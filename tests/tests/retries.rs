//! What happens when retries run out: the FAILED record, the dead letter as SQS carries
//! it, and a redrive. (The backoff itself: `shared/tests/worker_logic/retries.rs`.)

use std::time::Duration;

use chrono::DateTime;
use schedkit::dead_letter::{DeadLetterReason, attr};
use schedkit::store::AttemptOutcome;
use schedkit::{Ctx, Envelope, JobError, JobPolicy, Jobs, Metrics, Outcome, RetryPolicy, Status};
use schedkit_testkit::{Stack, StackOptions};

fn policy(max_attempts: u32) -> JobPolicy {
    JobPolicy {
        retry: RetryPolicy {
            max_attempts,
            first_delay: Duration::from_secs(2),
            base_delay: Duration::from_secs(4),
            max_delay: Duration::from_secs(30),
        },
        ..JobPolicy::default().with_lease(Duration::from_secs(10))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_always_failing_job_ends_failed_with_its_history_and_in_the_dlq() {
    let stack = Stack::lane("exhausted", StackOptions::default()).await;
    let mut quick = policy(3);
    quick.retry.first_delay = Duration::from_secs(1);
    quick.retry.base_delay = Duration::from_secs(1);
    let registry = Jobs::new()
        .add("export", |ctx: Ctx| async move {
            Err::<serde_json::Value, _>(JobError::retryable(format!(
                "partner API said 422 (attempt {})",
                ctx.attempt
            )))
        })
        .bind_policies(|_| quick.clone());
    let worker = stack.processor(registry, "w", Metrics::capture().0);
    let mut envelope = Envelope::new("export", "2026-11-01T08:00:00Z".parse().unwrap());
    envelope.key = Some("export-2026-11-01".into());
    let body = envelope.to_json();
    let message_id = stack.send(&body).await.unwrap();
    let stats = stack.run_until_drained(std::slice::from_ref(&worker)).await;
    assert_eq!(stats.outcomes.get("retrying"), Some(&2));
    assert_eq!(stats.outcomes.get("dead-lettered"), Some(&1));

    let record = stack.record("export-2026-11-01").await.unwrap().unwrap();
    assert_eq!((record.status, record.attempt), (Status::Failed, 3));
    let history: Vec<_> = record
        .history
        .iter()
        .map(|h| (h.outcome, h.error.clone().unwrap()))
        .collect();
    assert_eq!(
        history,
        [
            (
                AttemptOutcome::Retrying,
                "partner API said 422 (attempt 1)".to_string()
            ),
            (
                AttemptOutcome::Retrying,
                "partner API said 422 (attempt 2)".to_string()
            ),
            (
                AttemptOutcome::Failed,
                "partner API said 422 (attempt 3)".to_string()
            ),
        ]
    );
    assert_eq!(
        record.last_error.as_deref(),
        Some("partner API said 422 (attempt 3)")
    );

    let letters = stack.drain_dlq(Duration::from_secs(5)).await.unwrap();
    assert_eq!(letters.len(), 1);
    let letter = &letters[0];
    assert_eq!(letter.body.as_deref(), Some(body.as_str()));
    let get = |name: &str| {
        letter.message_attributes.as_ref().unwrap()[name]
            .string_value
            .clone()
            .unwrap()
    };
    assert_eq!(
        get(attr::REASON),
        DeadLetterReason::AttemptsExhausted.as_str()
    );
    assert_eq!(get(attr::JOB), "export");
    assert_eq!(get(attr::KEY), "export-2026-11-01");
    assert_eq!(get(attr::ATTEMPTS), "3");
    assert_eq!(get(attr::ERROR), "partner API said 422 (attempt 3)");
    assert_eq!(get(attr::SOURCE_QUEUE), stack.queue_url);
    assert_eq!(get(attr::SOURCE_MESSAGE_ID), message_id);
    assert!(DateTime::parse_from_rfc3339(&get(attr::FAILED_AT)).is_ok());
    assert_eq!(
        stack.counts(&stack.queue_url).await.unwrap(),
        (0, 0, 0),
        "gone from the source queue"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_delivery_seen_again_is_dead_lettered_again_and_only_a_redrive_reruns_it() {
    // A 1 s visibility: the failed message comes back quickly when it is not deleted.
    let options = StackOptions {
        visibility_timeout: Some(1),
        ..StackOptions::default()
    };
    let stack = Stack::lane("refail", options).await;
    let runs = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let counter = runs.clone();
    let registry = Jobs::new()
        .add("export", move |_ctx: Ctx| {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            async { Err::<serde_json::Value, _>(JobError::retryable("partner API said 422")) }
        })
        .bind_policies(|_| policy(1));
    let worker = stack.processor(registry, "w", Metrics::capture().0);
    let mut envelope = Envelope::new("export", "2026-11-02T08:00:00Z".parse().unwrap());
    envelope.key = Some("export-2026-11-02".into());
    let message_id = stack.send(&envelope.to_json()).await.unwrap();

    // The worker fails the run and dead-letters the message, then stops before deleting
    // it (the reports are not acknowledged to SQS).
    let first = stack.receive(1, Duration::from_secs(5)).await.unwrap();
    let reports = worker.process(first, None).await;
    assert!(matches!(reports[0].outcome, Outcome::DeadLettered { .. }));

    // The same delivery comes back: dead-lettered again, not run again.
    let again = stack.receive(1, Duration::from_secs(5)).await.unwrap();
    assert_eq!(again[0].message_id.as_deref(), Some(message_id.as_str()));
    let reports = worker.process(again, None).await;
    assert!(
        matches!(
            reports[0].outcome,
            Outcome::DeadLettered {
                reason: DeadLetterReason::AttemptsExhausted,
                ..
            }
        ),
        "{reports:?}"
    );
    schedkit::poller::delete_acknowledged(&stack.sqs, &stack.queue_url, &reports).await;
    assert_eq!(
        runs.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "run once"
    );
    let record = stack.record("export-2026-11-02").await.unwrap().unwrap();
    assert_eq!((record.status, record.attempt), (Status::Failed, 1));
    // A duplicate dead letter, never a loss.
    let letters = stack.drain_dlq(Duration::from_secs(5)).await.unwrap();
    assert_eq!(letters.len(), 2);
    assert!(letters.iter().all(|l| {
        l.message_attributes.as_ref().unwrap()[attr::KEY]
            .string_value
            .as_deref()
            == Some("export-2026-11-02")
    }));

    // The body alone sent again (not a redrive: it carries no letter's reason) is a
    // duplicate of the FAILED run.
    stack
        .send(letters[0].body.as_deref().unwrap())
        .await
        .unwrap();
    let stats = stack.run_until_drained(std::slice::from_ref(&worker)).await;
    assert_eq!(
        stats.outcomes.get("duplicate"),
        Some(&1),
        "{:?}",
        stats.outcomes
    );
    assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 1);
    // A redrive is the letter moved back with its attributes: it starts a new round and
    // runs the job.
    stack
        .sqs
        .send_message()
        .queue_url(&stack.queue_url)
        .message_body(letters[0].body.clone().unwrap())
        .set_message_attributes(letters[0].message_attributes.clone())
        .send()
        .await
        .unwrap();
    let stats = stack.run_until_drained(std::slice::from_ref(&worker)).await;
    assert_eq!(stats.outcomes.get("dead-lettered"), Some(&1));
    assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 2);
    let record = stack.record("export-2026-11-02").await.unwrap().unwrap();
    assert_eq!((record.status, record.attempt), (Status::Failed, 2));
}
