//! Leases, heartbeats and fencing (acceptance b and c).

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use schedkit::store::AttemptOutcome;
use schedkit::{Envelope, JobContext, JobPolicy, Metrics, Outcome, Registry, Status};
use schedkit_testkit::{Stack, StackOptions, localstack, unique};
use serde_json::json;
use tokio::sync::Notify;

fn envelope(job: &str) -> Envelope {
    Envelope::new(job, "2026-11-01T06:00:00Z".parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_expired_lease_is_reclaimed_and_the_late_completion_is_refused() {
    let sdk = localstack().await;
    // A 1 s visibility timeout: the message reappears soon after worker A stops renewing.
    let options = StackOptions {
        visibility_timeout: Some(1),
        ..StackOptions::default()
    };
    let stack = Stack::create(&sdk, &unique("reclaim"), options)
        .await
        .unwrap();
    let lease = Duration::from_secs(1);
    let started = Arc::new(Notify::new());
    let release = Arc::new(Notify::new());

    // Worker A never heartbeats and is stuck until the test releases it.
    let (a_started, a_release) = (started.clone(), release.clone());
    let worker_a = stack.processor(
        Registry::new().register(
            "export",
            JobPolicy {
                heartbeat: None,
                ..JobPolicy::default().with_lease(lease)
            },
            move |_ctx: JobContext| {
                let (started, release) = (a_started.clone(), a_release.clone());
                async move {
                    started.notify_one();
                    release.notified().await;
                    Ok(json!({"by": "A"}))
                }
            },
        ),
        "worker-a",
        Metrics::capture().0,
    );
    let worker_b = stack.processor(
        Registry::new().register(
            "export",
            JobPolicy::default().with_lease(lease),
            |_ctx: JobContext| async { Ok(json!({"by": "B"})) },
        ),
        "worker-b",
        Metrics::capture().0,
    );

    stack.send_envelope(&envelope("export")).await.unwrap();
    let first = stack.receive(1, Duration::from_secs(5)).await.unwrap();
    let a = tokio::spawn({
        let worker_a = worker_a.clone();
        async move { worker_a.process(first, None).await }
    });
    started.notified().await;

    // After the lease expires the message is delivered again and B reclaims the run.
    tokio::time::sleep(lease + Duration::from_millis(300)).await;
    let again = stack.receive(1, Duration::from_secs(5)).await.unwrap();
    assert_eq!(
        again.len(),
        1,
        "the message came back after the visibility timeout"
    );
    let b = worker_b.process(again, None).await;
    assert_eq!(b[0].outcome, Outcome::Succeeded);

    // A finally finishes: its completion is refused and changes nothing.
    release.notify_one();
    let a = a.await.unwrap();
    assert_eq!(a[0].outcome, Outcome::LeaseLost);
    let key = b[0].key.clone().unwrap();
    let record = stack.record(&key).await.unwrap().unwrap();
    assert_eq!(record.status, Status::Done);
    assert_eq!(record.attempt, 2);
    assert!(record.owner.as_deref().unwrap().starts_with("worker-b:"));
    assert_eq!(record.result.as_deref(), Some(r#"{"by":"B"}"#));
    let outcomes: Vec<_> = record
        .history
        .iter()
        .map(|h| (h.attempt, h.outcome))
        .collect();
    assert_eq!(
        outcomes,
        [
            (1, AttemptOutcome::LeaseExpired),
            (2, AttemptOutcome::Succeeded)
        ]
    );
    assert!(record.history[0].owner.starts_with("worker-a:"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn heartbeats_keep_a_job_longer_than_three_leases_from_being_reclaimed() {
    let sdk = localstack().await;
    let options = StackOptions {
        visibility_timeout: Some(1),
        ..StackOptions::default()
    };
    let stack = Stack::create(&sdk, &unique("heartbeat"), options)
        .await
        .unwrap();
    let lease = Duration::from_secs(1);
    let runs = Arc::new(AtomicU32::new(0));
    let registry = {
        let runs = runs.clone();
        Registry::new().register(
            "long-report",
            // Heartbeats every 250 ms renew the lease and the message's visibility.
            JobPolicy::default().with_lease(lease),
            move |ctx: JobContext| {
                let runs = runs.clone();
                async move {
                    runs.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(3500)).await;
                    assert!(!ctx.lease_lost());
                    Ok(json!({"rows": 35}))
                }
            },
        )
    };
    let workers: Vec<_> = (0..2)
        .map(|i| stack.processor(registry.clone(), &format!("w{i}"), Metrics::capture().0))
        .collect();
    // Two deliveries of the run: the second meets the live lease, again and again.
    stack.send_envelope(&envelope("long-report")).await.unwrap();
    stack.send_envelope(&envelope("long-report")).await.unwrap();
    let stats = stack.run_until_drained(&workers).await;

    assert_eq!(runs.load(Ordering::SeqCst), 1, "the job ran once");
    assert_eq!(stats.outcomes.get("succeeded"), Some(&1));
    assert_eq!(stats.outcomes.get("duplicate"), Some(&1));
    assert_eq!(stats.outcomes.get("lease-lost"), None);
    let winner = stats
        .reports
        .iter()
        .find(|r| r.outcome == Outcome::Succeeded)
        .unwrap();
    let deliveries = stats
        .reports
        .iter()
        .filter(|r| r.message_id == winner.message_id)
        .count();
    assert_eq!(
        deliveries, 1,
        "the running message stayed invisible (visibility extended)"
    );
    assert!(
        stats.outcomes.get("in-progress").is_some_and(|n| *n >= 1),
        "{:?}",
        stats.outcomes
    );
    let record = stack.records().await.unwrap().pop().unwrap();
    assert_eq!((record.status, record.attempt), (Status::Done, 1));
    assert_eq!(record.history.len(), 1);
    assert!(record.history[0].duration_ms.unwrap() >= 3 * lease.as_millis() as u64);
}
