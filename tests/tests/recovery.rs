//! Crash recovery within the lease: a worker that dies mid-batch leaves only its unfinished
//! messages behind (each finished one was deleted soon after its outcome was durable), and
//! those come back after about the lease, not the queue's visibility timeout (30 s here),
//! in polling mode (visibility set at receive) and in Lambda mode (set as the batch arrives).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use schedkit::{
    Ctx, Envelope, JobPolicy, Jobs, Metrics, Processor, ProcessorConfig, Registry, Status,
};
use schedkit_testkit::Stack;
use serde_json::json;
use tokio::sync::Notify;
use tokio::time::Instant;

const LEASE: Duration = Duration::from_secs(2);
/// How long after the lease a dead worker's message may take to be run again: the
/// heartbeat's and the receive's rounding, one in-progress bounce, a poll.
const MARGIN: Duration = Duration::from_secs(5);

async fn stack(name: &str) -> Stack {
    // A received message stays hidden 30 s unless the worker says otherwise.
    Stack::with_visibility_timeout(name, 30).await
}

/// `quick` returns at once; `slow` hangs the first time it runs (until its worker dies),
/// then returns at once.
fn registry(slow_started: Arc<Notify>) -> Registry {
    let hang = Arc::new(AtomicBool::new(true));
    Jobs::new()
        .add("quick", |_ctx: Ctx| async {
            Ok::<_, schedkit::JobError>(json!({}))
        })
        .add("slow", move |_ctx: Ctx| {
            let (hang, started) = (hang.clone(), slow_started.clone());
            async move {
                if hang.swap(false, Ordering::SeqCst) {
                    started.notify_one();
                    std::future::pending::<()>().await;
                }
                Ok::<_, schedkit::JobError>(json!({}))
            }
        })
        .bind_policies(|_| JobPolicy::default().with_lease(LEASE))
}

fn envelope(job: &str, minute: u32) -> Envelope {
    Envelope::new(
        job,
        format!("2026-11-01T08:{minute:02}:00Z").parse().unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_poller_that_dies_mid_batch_leaves_only_its_unfinished_message_which_comes_back_after_the_lease()
 {
    let stack = stack("poller-dies").await;
    let slow_started = Arc::new(Notify::new());
    let registry = registry(slow_started.clone());
    stack.send_envelope(&envelope("slow", 0)).await.unwrap();
    for minute in 1..=3 {
        stack
            .send_envelope(&envelope("quick", minute))
            .await
            .unwrap();
    }
    let dying = stack.processor(registry.clone(), "dying", Metrics::capture().0);
    let poller = tokio::spawn({
        let dying = dying.clone();
        async move {
            let options = schedkit::poller::PollOptions {
                wait_seconds: 1,
                ..Default::default()
            };
            schedkit::poller::poll(&dying, &options, std::future::pending()).await
        }
    });
    slow_started.notified().await;
    // The quick runs end DONE and are deleted while the slow one still runs.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let records = stack.records().await.unwrap();
        let done = records.iter().filter(|r| r.status == Status::Done).count();
        let (visible, in_flight, _) = stack.counts(&stack.queue_url).await.unwrap();
        if done == 3 && visible + in_flight == 1 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "done {done}, queue {visible}+{in_flight}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The poller dies: its batch, heartbeats and all, is gone at once.
    poller.abort();
    let died = Instant::now();

    let healthy = stack.processor(registry, "healthy", Metrics::capture().0);
    let stats = stack
        .run_until_drained(std::slice::from_ref(&healthy))
        .await;
    assert_eq!(
        stats.outcomes.get("succeeded"),
        Some(&1),
        "{:?}",
        stats.outcomes
    );
    assert_eq!(
        stats.outcomes.get("duplicate"),
        None,
        "no finished message came back"
    );
    let recovered = stats
        .reports
        .iter()
        .find(|r| r.outcome == schedkit::Outcome::Succeeded)
        .unwrap();
    let record = stack
        .record(recovered.key.as_deref().unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!((record.status, record.attempt), (Status::Done, 2));
    // The drain includes one empty receive (1 s) after the last delete.
    let took = died.elapsed();
    assert!(
        took < LEASE + MARGIN,
        "run again {took:?} after the poller died"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn in_lambda_mode_a_claimed_message_is_hidden_for_the_lease_so_a_dead_invocations_message_returns_after_it()
 {
    let stack = stack("lambda-dies").await;
    let slow_started = Arc::new(Notify::new());
    let lambda = Processor::new(
        stack.store(),
        stack.sqs.clone(),
        registry(slow_started.clone()),
        ProcessorConfig {
            visibility_on_claim: true,
            ..stack.config("lambda")
        },
        Metrics::capture().0,
    );
    stack.send_envelope(&envelope("slow", 0)).await.unwrap();
    // Received as the event source mapping does: hidden for the queue's 30 s.
    let batch = stack.receive(1, Duration::from_secs(5)).await.unwrap();
    let invocation = tokio::spawn({
        let lambda = lambda.clone();
        async move { lambda.process(batch, None).await }
    });
    slow_started.notified().await;
    let claimed = Instant::now();
    // The invocation dies (a crash, an out-of-memory kill).
    invocation.abort();
    let again = loop {
        let batch = stack.receive(1, Duration::from_secs(1)).await.unwrap();
        if !batch.is_empty() {
            break batch;
        }
        assert!(
            claimed.elapsed() < LEASE + MARGIN,
            "the message did not come back"
        );
    };
    let back_after = claimed.elapsed();
    assert!(back_after < LEASE + MARGIN, "{back_after:?}");
    let reports = lambda.process(again, None).await;
    // Back as the lease ends: claimed again at once, or once more after an in-progress bounce.
    assert!(
        matches!(
            reports[0].outcome,
            schedkit::Outcome::Succeeded | schedkit::Outcome::InProgress { .. }
        ),
        "{:?}",
        reports[0].outcome
    );
}
