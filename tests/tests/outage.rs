//! DynamoDB unreachable: nothing acknowledged, nothing half-written, nothing lost
//! (acceptance h). The store reaches LocalStack through a TCP proxy the test cuts.

use std::sync::Arc;
use std::time::Duration;

use schedkit::store::AttemptOutcome;
use schedkit::{
    Ctx, Envelope, JobPolicy, Jobs, Metrics, Outcome, Processor, Registry, Status, batch_response,
};
use schedkit_testkit::proxy::{self, TcpProxy};
use schedkit_testkit::{Stack, StackOptions};
use serde_json::json;

/// A processor whose store talks to DynamoDB through `proxy`, with short timeouts.
fn through_proxy(stack: &Stack, proxy: &TcpProxy, registry: Registry) -> Processor {
    Processor::new(
        stack.store_through(proxy, Duration::from_secs(3)),
        stack.sqs.clone(),
        registry,
        stack.config("proxied"),
        Metrics::capture().0,
    )
}

fn jobs(on_run: impl Fn() + Send + Sync + 'static) -> Registry {
    let on_run = Arc::new(on_run);
    Jobs::new()
        .add("report", move |_ctx: Ctx| {
            let on_run = on_run.clone();
            async move {
                on_run();
                Ok::<_, schedkit::JobError>(json!({"ok": true}))
            }
        })
        .bind_policies(|_| JobPolicy::default().with_lease(Duration::from_secs(1)))
}

fn envelope(hour: u32) -> Envelope {
    Envelope::new(
        "report",
        format!("2026-11-01T{hour:02}:00:00Z").parse().unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamodb_unreachable_acknowledges_nothing_and_writes_nothing() {
    let options = StackOptions {
        visibility_timeout: Some(1),
        ..StackOptions::default()
    };
    let stack = Stack::lane("outage", options).await;
    let proxy = proxy::to_localstack().await;
    let worker = through_proxy(&stack, &proxy, jobs(|| {}));

    for hour in 1..=3 {
        stack.send_envelope(&envelope(hour)).await.unwrap();
    }
    proxy.cut();
    let batch = stack.receive(3, Duration::from_secs(5)).await.unwrap();
    let reports = worker.process(batch, None).await;
    assert!(
        reports
            .iter()
            .all(|r| matches!(r.outcome, Outcome::Unavailable { .. })),
        "{reports:?}"
    );
    assert_eq!(
        batch_response(&reports).batch_item_failures.len(),
        3,
        "no message acknowledged"
    );
    schedkit::poller::delete_acknowledged(&stack.sqs, &stack.queue_url, &reports).await;
    assert!(
        stack.records().await.unwrap().is_empty(),
        "no record written"
    );

    // Once DynamoDB is back, the same messages come back and complete: nothing was lost.
    proxy.heal();
    let stats = stack.run_until_drained(std::slice::from_ref(&worker)).await;
    assert_eq!(
        stats.outcomes.get("succeeded"),
        Some(&3),
        "{:?}",
        stats.outcomes
    );
    let records = stack.records().await.unwrap();
    assert_eq!(records.len(), 3);
    assert!(
        records
            .iter()
            .all(|r| r.status == Status::Done && r.attempt == 1)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamodb_lost_mid_run_leaves_a_whole_claim_that_is_reclaimed_later() {
    let options = StackOptions {
        visibility_timeout: Some(1),
        ..StackOptions::default()
    };
    let stack = Stack::lane("midrun", options).await;
    let proxy = Arc::new(proxy::to_localstack().await);
    // The network to DynamoDB fails while the job runs: the claim is written, the
    // completion cannot be.
    let cutter = proxy.clone();
    let worker = through_proxy(&stack, &proxy, jobs(move || cutter.cut()));

    stack.send_envelope(&envelope(4)).await.unwrap();
    let batch = stack.receive(1, Duration::from_secs(5)).await.unwrap();
    let reports = worker.process(batch, None).await;
    assert!(
        matches!(reports[0].outcome, Outcome::Unavailable { .. }),
        "{reports:?}"
    );
    assert!(!reports[0].outcome.acknowledged());

    let key = reports[0].key.clone().unwrap();
    let record = stack
        .record(&key)
        .await
        .unwrap()
        .expect("the claim was written");
    assert_eq!((record.status, record.attempt), (Status::Running, 1));
    assert!(record.owner.is_some() && record.lease_expires_at.is_some());
    assert!(record.finished_at.is_none() && record.result.is_none() && record.history.is_empty());

    // A healthy worker reclaims it after the lease and completes it.
    let healthy = stack.processor(jobs(|| {}), "healthy", Metrics::capture().0);
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let stats = stack
        .run_until_drained(std::slice::from_ref(&healthy))
        .await;
    assert_eq!(
        stats.outcomes.get("succeeded"),
        Some(&1),
        "{:?}",
        stats.outcomes
    );
    let record = stack.record(&key).await.unwrap().unwrap();
    assert_eq!((record.status, record.attempt), (Status::Done, 2));
    let outcomes: Vec<_> = record.history.iter().map(|h| h.outcome).collect();
    assert_eq!(
        outcomes,
        [AttemptOutcome::LeaseExpired, AttemptOutcome::Succeeded]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completion_whose_answer_was_lost_is_known_as_applied_when_its_retry_meets_it() {
    let stack = Stack::lane("lost-answer", StackOptions::default()).await;
    let proxy = Arc::new(proxy::to_localstack().await);
    // While the job runs, the proxy is told to drop DynamoDB's next answer: the completion
    // is written, the worker's SDK sees the connection close and sends it again, and that
    // second try is refused by the completion itself.
    let loser = proxy.clone();
    let worker = through_proxy(&stack, &proxy, jobs(move || loser.lose_next_answer()));

    stack.send_envelope(&envelope(5)).await.unwrap();
    let batch = stack.receive(1, Duration::from_secs(5)).await.unwrap();
    let reports = worker.process(batch, None).await;
    assert!(
        matches!(reports[0].outcome, Outcome::Succeeded),
        "not reported as a lost lease: {reports:?}"
    );
    assert!(reports[0].outcome.acknowledged());
    let record = stack
        .record(reports[0].key.as_deref().unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!((record.status, record.attempt), (Status::Done, 1));
    let outcomes: Vec<_> = record.history.iter().map(|h| h.outcome).collect();
    assert_eq!(outcomes, [AttemptOutcome::Succeeded]);
}
