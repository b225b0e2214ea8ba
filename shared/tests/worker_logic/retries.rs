//! Retries with backoff: a transient failure comes back after growing, jittered delays,
//! each one really waited, and succeeds.

use std::time::Duration;

use chrono::DateTime;
use schedkit::queue::MemoryQueue;
use schedkit::store::{AttemptOutcome, MemoryStore};
use schedkit::{Ctx, Envelope, JobError, JobPolicy, Jobs, Metrics, Outcome, RetryPolicy, Status};
use serde_json::json;

use super::{drain_reports, processor_of};

fn millis(ts: &str) -> i64 {
    DateTime::parse_from_rfc3339(ts).unwrap().timestamp_millis()
}

#[tokio::test(start_paused = true)]
async fn a_transient_failure_is_retried_with_growing_jittered_delays_and_succeeds() {
    let (store, queue) = (MemoryStore::default(), MemoryQueue::new(13));
    let policy = JobPolicy {
        retry: RetryPolicy {
            max_attempts: 5,
            first_delay: Duration::from_secs(2),
            base_delay: Duration::from_secs(4),
            max_delay: Duration::from_secs(30),
        },
        ..JobPolicy::default().with_lease(Duration::from_secs(10))
    };
    let registry = Jobs::new()
        .add("sync", |ctx: Ctx| async move {
            if ctx.attempt <= 2 {
                Err(JobError::retryable(format!(
                    "503 on attempt {}",
                    ctx.attempt
                )))
            } else {
                Ok(json!({"attempt": ctx.attempt}))
            }
        })
        .bind_policies(|_| policy.clone());
    let worker = processor_of(&store, &queue, registry, "w", Metrics::capture().0);
    queue.send_body(&Envelope::new("sync", "2026-11-01T07:00:00Z".parse().unwrap()).to_json());
    let reports = drain_reports(&worker, &queue, Duration::from_secs(60)).await;

    let delays: Vec<Duration> = reports
        .iter()
        .filter_map(|r| match &r.outcome {
            Outcome::Retrying { delay, .. } => Some(*delay),
            _ => None,
        })
        .collect();
    assert_eq!(delays.len(), 2, "{reports:?}");
    // Equal jitter: after attempt 1 within [1 s, 2 s], after attempt 2 within [2 s, 4 s].
    assert!(
        delays[0] >= Duration::from_secs(1) && delays[0] <= Duration::from_secs(2),
        "{delays:?}"
    );
    assert!(
        delays[1] >= Duration::from_secs(2) && delays[1] <= Duration::from_secs(4),
        "{delays:?}"
    );
    assert!(delays[1] >= delays[0]);
    assert_eq!(reports.last().unwrap().outcome, Outcome::Succeeded);

    let record = store.snapshot().records.into_values().next().unwrap();
    assert_eq!((record.status, record.attempt), (Status::Done, 3));
    let outcomes: Vec<_> = record.history.iter().map(|h| h.outcome).collect();
    assert_eq!(
        outcomes,
        [
            AttemptOutcome::Retrying,
            AttemptOutcome::Retrying,
            AttemptOutcome::Succeeded
        ]
    );
    assert_eq!(record.history[0].error.as_deref(), Some("503 on attempt 1"));
    assert_eq!(record.history[1].error.as_deref(), Some("503 on attempt 2"));
    // The message really stayed hidden for each delay before the next attempt started.
    for (i, delay) in delays.iter().enumerate() {
        let gap =
            millis(&record.history[i + 1].started_at) - millis(&record.history[i].finished_at);
        assert!(
            gap >= delay.as_millis() as i64,
            "attempt {} came after {gap} ms, delay was {delay:?}",
            i + 2
        );
    }
}
