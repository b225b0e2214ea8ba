//! Leases, heartbeats and fencing: an attempt whose lease is no longer confirmed is
//! cancelled before anyone can reclaim it (clocks within the stated skew bound), heartbeats
//! run until the outcome is written, and a long job is kept alive by them.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use schedkit::store::AttemptOutcome;
use schedkit::{
    Clock, Ctx, Envelope, JobPolicy, Jobs, Metrics, Outcome, Processor, Registry, Status,
};
use schedkit_testkit::Stack;
use schedkit_testkit::proxy::{self, TcpProxy};
use serde_json::json;
use tokio::sync::Notify;
use tokio::time::Instant;

fn envelope(job: &str) -> Envelope {
    Envelope::new(job, "2026-11-01T06:00:00Z".parse().unwrap())
}

async fn stack(name: &str) -> Stack {
    Stack::with_quick_redelivery(name).await
}

/// Sets its flag when dropped: tells a test that a job's future was dropped.
struct Dropped(Arc<Mutex<Option<Instant>>>);

impl Drop for Dropped {
    fn drop(&mut self) {
        self.0.lock().unwrap().get_or_insert_with(Instant::now);
    }
}

/// Notes, when dropped, whether its job had been told the lease was lost.
struct Told(Ctx, Arc<AtomicBool>);

impl Drop for Told {
    fn drop(&mut self) {
        self.1.store(self.0.lease_lost(), Ordering::SeqCst);
    }
}

/// A processor whose store reaches DynamoDB through `proxy` and gives a call up after
/// `timeout`.
fn through(
    stack: &Stack,
    proxy: &TcpProxy,
    registry: Registry,
    id: &str,
    timeout: Duration,
) -> Processor {
    Processor::new(
        stack.store_through(proxy, timeout),
        stack.sqs.clone(),
        registry,
        stack.config(id),
        Metrics::capture().0,
    )
}

/// Receives the run's message until `worker` reports `done` for it (or 30 s pass).
async fn process_until(stack: &Stack, worker: &Processor, done: Outcome) -> Vec<Outcome> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = Vec::new();
    while Instant::now() < deadline {
        let batch = stack.receive(1, Duration::from_secs(1)).await.unwrap();
        for report in worker.process(batch, None).await {
            seen.push(report.outcome.clone());
            if report.outcome == done {
                return seen;
            }
        }
    }
    panic!("never {done:?}: {seen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_job_that_outlives_its_lease_is_cancelled_before_anyone_can_reclaim_it_and_never_succeeds()
 {
    let stack = stack("outlives").await;
    let lease = Duration::from_secs(1);
    let dropped: Arc<Mutex<Option<Instant>>> = Arc::default();
    let told = Arc::new(AtomicBool::new(false));
    // Worker A never heartbeats and its job never ends by itself.
    let (a_dropped, a_told) = (dropped.clone(), told.clone());
    let worker_a = stack.processor(
        Jobs::new()
            .add("export", move |ctx: Ctx| {
                let (dropped, told) = (a_dropped.clone(), a_told.clone());
                async move {
                    let _guard = Dropped(dropped);
                    let _told = Told(ctx, told);
                    // Never ends by itself: only dropping it stops it.
                    std::future::pending::<()>().await;
                    Ok::<_, schedkit::JobError>(json!({"by": "A"}))
                }
            })
            .bind_policies(|_| JobPolicy {
                heartbeat: None,
                ..JobPolicy::default().with_lease(lease)
            }),
        "worker-a",
        Metrics::capture().0,
    );
    stack.send_envelope(&envelope("export")).await.unwrap();
    let first = stack.receive(1, Duration::from_secs(5)).await.unwrap();
    let started = Instant::now();
    let a = worker_a.process(first, None).await;
    let cancelled_after = dropped
        .lock()
        .unwrap()
        .expect("the job's future was dropped")
        - started;
    assert!(
        told.load(Ordering::SeqCst),
        "the job was told before it was dropped"
    );
    // Lease 1 s, skew bound 200 ms (the kit's): cancelled 800 ms after the claim.
    assert!(
        cancelled_after >= Duration::from_millis(750) && cancelled_after < lease,
        "{cancelled_after:?}"
    );
    let Outcome::Retrying { error, .. } = &a[0].outcome else {
        panic!("{:?}", a[0].outcome);
    };
    assert_eq!(
        error,
        "lease ran out before the job ended; attempt cancelled"
    );
    let key = a[0].key.clone().unwrap();
    let record = stack.record(&key).await.unwrap().unwrap();
    assert_eq!((record.status, record.attempt), (Status::Retrying, 1));

    // The next delivery, to a worker whose job ends in time, completes the run.
    let worker_b = stack.processor(
        Jobs::new()
            .add("export", |_ctx: Ctx| async {
                Ok::<_, schedkit::JobError>(json!({"by": "B"}))
            })
            .bind_policies(|_| JobPolicy::default().with_lease(lease)),
        "worker-b",
        Metrics::capture().0,
    );
    process_until(&stack, &worker_b, Outcome::Succeeded).await;
    let record = stack.record(&key).await.unwrap().unwrap();
    assert_eq!((record.status, record.attempt), (Status::Done, 2));
    assert_eq!(record.result.as_deref(), Some(r#"{"by":"B"}"#));
    let outcomes: Vec<_> = record
        .history
        .iter()
        .map(|h| (h.attempt, h.outcome))
        .collect();
    assert_eq!(
        outcomes,
        [
            (1, AttemptOutcome::Retrying),
            (2, AttemptOutcome::Succeeded)
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stalled_heartbeats_cancel_the_attempt_before_a_worker_whose_clock_runs_ahead_within_the_bound_reclaims_it()
 {
    let stack = stack("stalled").await;
    let proxy = proxy::to_localstack().await;
    let lease = Duration::from_secs(2);
    // An effect outside DynamoDB (an email, say): applied when the job's work ends.
    let applied = Arc::new(AtomicU32::new(0));
    let a_dropped: Arc<Mutex<Option<Instant>>> = Arc::default();
    let b_started: Arc<Mutex<Option<Instant>>> = Arc::default();
    let a_running = Arc::new(Notify::new());
    let job = |dropped: Option<Arc<Mutex<Option<Instant>>>>,
               started: Option<Arc<Mutex<Option<Instant>>>>,
               running: Option<Arc<Notify>>| {
        let applied = applied.clone();
        Jobs::new()
            .add("send-statement", move |_ctx: Ctx| {
                let (applied, dropped, started, running) = (
                    applied.clone(),
                    dropped.clone(),
                    started.clone(),
                    running.clone(),
                );
                async move {
                    let _guard = dropped.map(Dropped);
                    if let Some(s) = started {
                        s.lock().unwrap().get_or_insert_with(Instant::now);
                    }
                    if let Some(r) = running {
                        r.notify_one();
                    }
                    tokio::time::sleep(Duration::from_secs(3)).await;
                    applied.fetch_add(1, Ordering::SeqCst);
                    Ok::<_, schedkit::JobError>(json!({}))
                }
            })
            .bind_policies(|_| // Heartbeats every 500 ms.
            JobPolicy::default().with_lease(lease))
    };
    let worker_a = through(
        &stack,
        &proxy,
        job(Some(a_dropped.clone()), None, Some(a_running.clone())),
        "worker-a",
        Duration::from_secs(3),
    );
    // B's clock runs 100 ms ahead of A's, within the 200 ms bound: it sees A's lease
    // expire 100 ms early.
    let worker_b = Processor::new(
        stack.store(),
        stack.sqs.clone(),
        job(None, Some(b_started.clone()), None),
        schedkit::ProcessorConfig {
            clock: Clock::offset_by_ms(100),
            ..stack.config("worker-b")
        },
        Metrics::capture().0,
    );

    stack
        .send_envelope(&envelope("send-statement"))
        .await
        .unwrap();
    let first = stack.receive(1, Duration::from_secs(5)).await.unwrap();
    let a = tokio::spawn({
        let worker_a = worker_a.clone();
        async move { worker_a.process(first, None).await }
    });
    a_running.notified().await;
    // A's heartbeats stall from now on (its store's network is down).
    proxy.cut();
    let b = process_until(&stack, &worker_b, Outcome::Succeeded).await;
    let a = a.await.unwrap();
    assert!(
        matches!(
            a[0].outcome,
            Outcome::Unavailable { .. } | Outcome::LeaseLost
        ),
        "{:?}",
        a[0].outcome
    );
    let a_dropped = a_dropped
        .lock()
        .unwrap()
        .expect("A's attempt was cancelled");
    let b_started = b_started.lock().unwrap().expect("B ran the job");
    assert!(
        a_dropped < b_started,
        "A stopped {:?} before B started",
        b_started - a_dropped
    );
    assert_eq!(
        applied.load(Ordering::SeqCst),
        1,
        "the effect once, by B: {b:?}"
    );
    let key = stack.records().await.unwrap().pop().unwrap().execution_key;
    let record = stack.record(&key).await.unwrap().unwrap();
    assert_eq!((record.status, record.attempt), (Status::Done, 2));
    assert!(record.owner.unwrap().starts_with("worker-b:"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_completion_held_past_the_lease_keeps_its_lease_by_heartbeats_and_the_job_runs_once() {
    let stack = stack("held").await;
    let proxy = Arc::new(proxy::to_localstack().await);
    let lease = Duration::from_secs(1);
    let runs = Arc::new(AtomicU32::new(0));
    let armed = Arc::new(Notify::new());
    let registry = {
        let (runs, proxy, armed) = (runs.clone(), proxy.clone(), armed.clone());
        Jobs::new()
            .add("export", move |_ctx: Ctx| {
                let (runs, proxy, armed) = (runs.clone(), proxy.clone(), armed.clone());
                async move {
                    runs.fetch_add(1, Ordering::SeqCst);
                    // The outcome's write (the only request naming `:finished_at`) reaches
                    // DynamoDB 2.5 leases late; heartbeats go on meanwhile.
                    proxy.hold_request(":finished_at", Duration::from_millis(2500));
                    armed.notify_one();
                    Ok::<_, schedkit::JobError>(json!({}))
                }
            })
            .bind_policies(|_| JobPolicy::default().with_lease(lease))
    };
    // A call may take the hold and then a loaded LocalStack's answer: the timeout leaves
    // 5.5 s beyond the hold (a 3 s one timed out in a CI run).
    let worker_a = through(
        &stack,
        &proxy,
        registry.clone(),
        "worker-a",
        Duration::from_secs(8),
    );
    let worker_b = stack.processor(registry, "worker-b", Metrics::capture().0);
    // The run delivered twice.
    stack.send_envelope(&envelope("export")).await.unwrap();
    stack.send_envelope(&envelope("export")).await.unwrap();
    let first = stack.receive(1, Duration::from_secs(5)).await.unwrap();
    let a = tokio::spawn({
        let worker_a = worker_a.clone();
        async move { worker_a.process(first, None).await }
    });
    armed.notified().await;
    let stats = stack
        .run_until_drained(std::slice::from_ref(&worker_b))
        .await;
    let a = a.await.unwrap();
    assert_eq!(a[0].outcome, Outcome::Succeeded);
    assert_eq!(
        runs.load(Ordering::SeqCst),
        1,
        "one run: {:?}",
        stats.outcomes
    );
    // The second delivery met the live lease while the completion was held, then the DONE
    // record; A's own message (left undeleted here) came back to the DONE record too.
    assert_eq!(
        stats.outcomes.get("duplicate"),
        Some(&2),
        "{:?}",
        stats.outcomes
    );
    assert!(
        stats.outcomes.get("in-progress").is_some_and(|n| *n >= 1),
        "{:?}",
        stats.outcomes
    );
    let record = stack.records().await.unwrap().pop().unwrap();
    assert_eq!((record.status, record.attempt), (Status::Done, 1));
}
