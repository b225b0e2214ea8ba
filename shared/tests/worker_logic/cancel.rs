//! An operator's cancellation, wherever it lands: a run waiting for its retry is
//! acknowledged unrun at its next delivery; a running attempt stops at its next heartbeat,
//! its job dropped and its effect never committed, the message acknowledged; a job that
//! ends before it learns has its outcome and effect refused all the same. Each is counted
//! (`Cancelled`), and nothing reaches the DLQ.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use aws_sdk_dynamodb::types::{AttributeValue, Put};
use schedkit::queue::MemoryQueue;
use schedkit::store::{CancelRequest, ExecutionStore, MemoryStore};
use schedkit::{
    Clock, Ctx, JobError, JobPolicy, Jobs, Metrics, Overlap, Processor, Registry, RetryPolicy,
    Status,
};
use serde_json::json;

use super::{drain_all, envelope, metric_total, processor_of};

/// What the jobs did: attempts started, attempts that reached their end, and when the
/// last attempt's future was dropped (ended or stopped).
#[derive(Default)]
struct Seen {
    started: AtomicU32,
    ended: AtomicU32,
    dropped: std::sync::Mutex<Option<tokio::time::Instant>>,
}

/// Notes when the job's future goes, however it goes.
struct DropAt(Arc<Seen>);

impl Drop for DropAt {
    fn drop(&mut self) {
        *self.0.dropped.lock().unwrap() = Some(tokio::time::Instant::now());
    }
}

/// `retried` fails retryably (a backoff of a minute); `long` works for `seconds` (20 by
/// default, past two leases of 8 s), then writes its effect.
fn registry(seen: &Arc<Seen>) -> Registry {
    let (retried, long) = (seen.clone(), seen.clone());
    Jobs::new()
        .add("retried", move |_: Ctx| {
            let seen = retried.clone();
            async move {
                seen.started.fetch_add(1, Ordering::SeqCst);
                seen.ended.fetch_add(1, Ordering::SeqCst);
                Err::<serde_json::Value, _>(JobError::retryable("the partner is down"))
            }
        })
        .add("long", move |ctx: Ctx| {
            let seen = long.clone();
            async move {
                seen.started.fetch_add(1, Ordering::SeqCst);
                let _going = DropAt(seen.clone());
                let seconds = ctx.payload["seconds"].as_u64().unwrap_or(20);
                tokio::time::sleep(Duration::from_secs(seconds)).await;
                let put = Put::builder()
                    .table_name("effects")
                    .item("effect_key", AttributeValue::S(ctx.key.clone()))
                    .build()
                    .expect("table and item set");
                ctx.effects().put(put);
                seen.ended.fetch_add(1, Ordering::SeqCst);
                Ok::<_, JobError>(json!({"invoiced": true}))
            }
        })
        .bind_policies(|_| JobPolicy {
            retry: RetryPolicy {
                max_attempts: 5,
                first_delay: Duration::from_secs(60),
                base_delay: Duration::from_secs(60),
                max_delay: Duration::from_secs(60),
            },
            timeout: Some(Duration::from_secs(120)),
            ..JobPolicy::default().with_lease(Duration::from_secs(8))
        })
}

fn cancel(key: &str, clock: Clock) -> CancelRequest {
    CancelRequest {
        key: key.into(),
        by: "arn:aws:iam::000000000000:user/ops".into(),
        reason: "a bad deploy".into(),
        now: clock.now(),
        only: vec![],
        arrived: None,
    }
}

#[tokio::test(start_paused = true)]
async fn a_run_waiting_for_its_retry_is_acknowledged_unrun_at_its_next_delivery() {
    let (store, queue) = (MemoryStore::default(), MemoryQueue::new(3));
    let seen = Arc::new(Seen::default());
    let (metrics, lines) = Metrics::capture();
    let worker = processor_of(&store, &queue, registry(&seen), "w", metrics);
    queue.send_body(&envelope("retried", "invoice-7"));
    let clock = super::config().clock;
    let (store2, queue2) = (store.clone(), queue.clone());
    let canceller = tokio::spawn(async move {
        // After the first attempt failed, during its minute of backoff.
        tokio::time::sleep(Duration::from_secs(20)).await;
        let r = store2.snapshot().records["invoice-7"].clone();
        assert_eq!(r.status, Status::Retrying, "{r:?}");
        store2.cancel(&cancel("invoice-7", clock)).await.unwrap();
        drop(queue2);
    });
    let labels = drain_all(&[worker], &queue, 10, Duration::from_secs(30)).await;
    canceller.await.unwrap();
    assert_eq!(labels, ["retrying", "cancelled"], "{labels:?}");
    assert_eq!(seen.started.load(Ordering::SeqCst), 1, "never run again");
    let r = store.snapshot().records["invoice-7"].clone();
    assert_eq!(r.status, Status::Cancelled);
    let c = r.cancelled.expect("who and why");
    assert_eq!(
        (c.by.as_str(), c.reason.as_str()),
        ("arn:aws:iam::000000000000:user/ops", "a bad deploy")
    );
    assert_eq!(metric_total(&lines, "Cancelled"), 1.0);
    let q = queue.lock();
    assert!(q.messages.is_empty() && q.dead_letters.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_running_attempt_stops_at_its_next_heartbeat_and_its_effect_never_commits() {
    let (store, queue) = (MemoryStore::default(), MemoryQueue::new(3));
    let seen = Arc::new(Seen::default());
    let (metrics, lines) = Metrics::capture();
    let worker = processor_of(&store, &queue, registry(&seen), "w", metrics);
    queue.send_body(&envelope("long", "invoice-8"));
    let clock = super::config().clock;
    let (store2, seen2) = (store.clone(), seen.clone());
    let canceller = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(seen2.started.load(Ordering::SeqCst), 1, "it runs");
        store2.cancel(&cancel("invoice-8", clock)).await.unwrap();
        tokio::time::Instant::now()
    });
    let labels = drain_all(&[worker], &queue, 10, Duration::from_secs(30)).await;
    let cancelled_at = canceller.await.unwrap();
    assert_eq!(labels, ["cancelled"], "{labels:?}");
    assert_eq!(seen.ended.load(Ordering::SeqCst), 0, "the job was dropped");
    let state = store.snapshot();
    assert!(
        state.puts().next().is_none(),
        "no effect: {:?}",
        state.puts().collect::<Vec<_>>()
    );
    let r = &state.records["invoice-8"];
    assert_eq!(r.status, Status::Cancelled, "{r:?}");
    assert_eq!(r.attempt, 1);
    assert_eq!(metric_total(&lines, "Cancelled"), 1.0);
    let q = queue.lock();
    assert!(q.messages.is_empty() && q.dead_letters.is_empty());
    // It stopped at the heartbeat after the cancellation: within one interval (a quarter
    // of the 8 s lease), long before the job's 20 s.
    let dropped = seen.dropped.lock().unwrap().expect("the job's future went");
    let after = dropped - cancelled_at;
    assert!(
        after <= Duration::from_secs(2),
        "stopped {after:?} after the cancellation"
    );
}

#[tokio::test(start_paused = true)]
async fn a_job_that_ends_before_it_learns_has_its_outcome_and_effect_refused() {
    // Heartbeats off: the attempt cannot learn before it ends.
    let (store, queue) = (MemoryStore::default(), MemoryQueue::new(3));
    let seen = Arc::new(Seen::default());
    let registry = {
        let long = seen.clone();
        Jobs::new()
            .add("long", move |ctx: Ctx| {
                let seen = long.clone();
                async move {
                    seen.started.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_secs(3)).await;
                    let put = Put::builder()
                        .table_name("effects")
                        .item("effect_key", AttributeValue::S(ctx.key.clone()))
                        .build()
                        .expect("table and item set");
                    ctx.effects().put(put);
                    seen.ended.fetch_add(1, Ordering::SeqCst);
                    Ok::<_, JobError>(json!(null))
                }
            })
            .bind_policies(|_| JobPolicy {
                heartbeat: None,
                ..JobPolicy::default().with_lease(Duration::from_secs(30))
            })
    };
    let (metrics, lines) = Metrics::capture();
    let worker = processor_of(&store, &queue, registry, "w", metrics);
    queue.send_body(&envelope("long", "invoice-9"));
    let clock = super::config().clock;
    let store2 = store.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(1)).await;
        store2.cancel(&cancel("invoice-9", clock)).await.unwrap();
    });
    let labels = drain_all(&[worker], &queue, 10, Duration::from_secs(30)).await;
    assert_eq!(labels, ["cancelled"], "{labels:?}");
    assert_eq!(
        seen.ended.load(Ordering::SeqCst),
        1,
        "the job reached its end"
    );
    let state = store.snapshot();
    assert!(
        state.puts().next().is_none(),
        "refused: {:?}",
        state.puts().collect::<Vec<_>>()
    );
    assert_eq!(state.records["invoice-9"].status, Status::Cancelled);
    assert_eq!(metric_total(&lines, "Cancelled"), 1.0);
    // The record says the attempt ran to its end while its run was cancelled (the first
    // review's hole 5: it was only said in the log), once, however often it is told.
    let history = &state.records["invoice-9"].history;
    assert_eq!(history.len(), 1, "{history:#?}");
    let ran = &history[0];
    assert_eq!(
        (ran.attempt, ran.outcome),
        (1, schedkit::store::AttemptOutcome::Cancelled)
    );
    assert!(
        ran.error
            .as_deref()
            .unwrap()
            .contains("had run to its end (succeeded)"),
        "{ran:?}"
    );
    assert!(ran.duration_ms.unwrap() >= 3000, "{ran:?}");
    let again = store
        .note_cancelled_attempt("invoice-9", ran)
        .await
        .unwrap();
    assert!(!again, "noted once");
    assert_eq!(store.snapshot().records["invoice-9"].history.len(), 1);
    // The store refuses any later outcome of that claim too.
    let r = state.records["invoice-9"].clone();
    let refused = store
        .heartbeat(
            "invoice-9",
            r.owner.as_deref().unwrap(),
            clock.now(),
            Duration::from_secs(30),
        )
        .await;
    assert!(refused.is_err(), "{refused:?}");
}

/// `exclusive` under `overlap`: works for the payload's `seconds`, counting how many of it
/// run at once (the most in `most`).
fn exclusive(overlap: Overlap, now: &Arc<AtomicU32>, most: &Arc<AtomicU32>) -> Registry {
    let (now, most) = (now.clone(), most.clone());
    Jobs::new()
        .add("exclusive", move |ctx: Ctx| {
            let (now, most) = (now.clone(), most.clone());
            async move {
                let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(n, Ordering::SeqCst);
                let seconds = ctx.payload["seconds"].as_u64().unwrap_or(1);
                // Counted down however the attempt ends (a cancelled one is dropped).
                struct Leave(Arc<AtomicU32>);
                impl Drop for Leave {
                    fn drop(&mut self) {
                        self.0.fetch_sub(1, Ordering::SeqCst);
                    }
                }
                let _leave = Leave(now);
                tokio::time::sleep(Duration::from_secs(seconds)).await;
                Ok::<_, JobError>(json!(null))
            }
        })
        .bind_policies(move |_| JobPolicy {
            overlap,
            timeout: Some(Duration::from_secs(60)),
            ..JobPolicy::default().with_lease(Duration::from_secs(8))
        })
}

fn firing(key: &str, seconds: u64) -> String {
    let mut e = schedkit::Envelope::new("exclusive", "2026-12-02T09:00:00Z".parse().unwrap());
    e.key = Some(key.into());
    e.payload = json!({ "seconds": seconds }).as_object().cloned();
    e.to_json()
}

/// Two workers of `exclusive` under `overlap`, and the most runs they had at once.
fn two_workers(
    store: &MemoryStore,
    queue: &MemoryQueue,
    overlap: Overlap,
) -> (Vec<Processor>, Arc<AtomicU32>) {
    let (now, most) = (Arc::default(), Arc::default());
    let workers = ["a", "b"]
        .iter()
        .map(|w| {
            let registry = exclusive(overlap, &now, &most);
            processor_of(store, queue, registry, w, Metrics::capture().0)
        })
        .collect();
    (workers, most)
}

/// The review's hole: a cancelled `buffer_one` waiter was never "gone", so every firing
/// after it was SKIPPED naming it until its place lapsed.
#[tokio::test(start_paused = true)]
async fn a_cancelled_buffer_one_waiter_leaves_its_place_to_the_next_firing() {
    let (store, queue) = (MemoryStore::default(), MemoryQueue::new(5));
    // Two workers: one runs the holder while the other meets the waiter.
    let (workers, _) = two_workers(&store, &queue, Overlap::BufferOne);
    let clock = super::config().clock;
    queue.send_body(&firing("holder", 10));
    let (store2, queue2) = (store.clone(), queue.clone());
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(1)).await;
        queue2.send_body(&firing("waiter", 1));
        tokio::time::sleep(Duration::from_secs(2)).await;
        store2.cancel(&cancel("waiter", clock)).await.unwrap();
        // After the holder ended.
        tokio::time::sleep(Duration::from_secs(12)).await;
        queue2.send_body(&firing("next", 1));
    });
    drain_all(&workers, &queue, 10, Duration::from_secs(30)).await;
    let records = store.snapshot().records;
    assert_eq!(records["holder"].status, Status::Done);
    assert_eq!(records["waiter"].status, Status::Cancelled);
    assert_eq!(
        records["next"].status,
        Status::Done,
        "{:?}",
        records["next"]
    );
}

/// The review's hole: a cancelled RUNNING holder freed its job's slot at once, while its
/// attempt ran on until its next heartbeat, so a new firing ran beside it.
#[tokio::test(start_paused = true)]
async fn a_cancelled_holder_keeps_its_slot_until_its_attempt_can_have_stopped() {
    let (store, queue) = (MemoryStore::default(), MemoryQueue::new(5));
    let (workers, most) = two_workers(&store, &queue, Overlap::Skip);
    let clock = super::config().clock;
    queue.send_body(&firing("holder", 20));
    let (store2, queue2) = (store.clone(), queue.clone());
    tokio::spawn(async move {
        // Just after a heartbeat (every 2 s): the attempt learns nearly 2 s later.
        tokio::time::sleep(Duration::from_millis(4_100)).await;
        store2.cancel(&cancel("holder", clock)).await.unwrap();
        queue2.send_body(&firing("next", 5));
    });
    drain_all(&workers, &queue, 10, Duration::from_secs(30)).await;
    assert_eq!(most.load(Ordering::SeqCst), 1, "never two at once");
    let records = store.snapshot().records;
    assert_eq!(records["holder"].status, Status::Cancelled);
}

/// The month-end chain: one stage, one step.
const CHAINS: &str = r#"
[jobs.close-books]
owner = "finance"
[chains.month-end]
owner = "finance"
stages = ["close-books"]
"#;

/// A step message sent before its chain's execution was stopped (the chain cancelled)
/// reads its run's record before it runs, and is cancelled unrun: its task answered as
/// failed, its own record CANCELLED, its job never run.
#[tokio::test(start_paused = true)]
async fn a_step_of_a_cancelled_chain_run_is_cancelled_unrun() {
    use std::collections::BTreeMap;

    use schedkit::batch::Chains;
    use schedkit::catalog::Catalog;
    use schedkit::orchestrator::{Answer, MemoryOrchestrator};
    use schedkit::store::ClaimRequest;
    use schedkit::{Processor, ProcessorConfig};

    let (store, queue) = (MemoryStore::default(), MemoryQueue::new(3));
    let ran = Arc::new(AtomicU32::new(0));
    let counted = ran.clone();
    let registry = Jobs::new()
        .add("close-books", move |_: Ctx| {
            let ran = counted.clone();
            async move {
                ran.fetch_add(1, Ordering::SeqCst);
                Ok::<_, JobError>(json!(null))
            }
        })
        .bind_policies(|_| JobPolicy::default());
    let catalog = Catalog::parse(CHAINS, "chains.toml").unwrap();
    let orchestrator = MemoryOrchestrator::default();
    let chains = Chains::with_orchestrator(orchestrator.clone(), &catalog, BTreeMap::new());
    let config = ProcessorConfig {
        chains: Some(chains),
        ..super::config()
    };
    let (metrics, lines) = Metrics::capture();
    let worker = Processor::with_queue(store.clone(), queue.clone(), registry, config, metrics);
    // The chain run, RUNNING, then cancelled.
    let clock = super::config().clock;
    let run = "month-end#2026-11";
    let start = ClaimRequest {
        key: run.into(),
        job: "month-end".into(),
        scheduled_for: "2026-11-30T06:00:00Z".into(),
        payload_hash: "h".into(),
        input: "{}".into(),
        message_id: Some("m".into()),
        owner: schedkit::key::chain_execution_name(run, 1),
        now: clock.now(),
        lease: Duration::ZERO,
        retention: Duration::from_secs(3600),
        redrive: None,
    };
    store.start_chain(&start).await.unwrap();
    store.cancel(&cancel(run, clock)).await.unwrap();
    let step = format!("{run}#close-books");
    let message = json!({
        "job": "close-books",
        "scheduled_for": "2026-11-30T06:00:00Z",
        "key": step,
        "chain": { "name": "month-end", "key": run, "step": "close-books", "task_token": "t" },
    });
    queue.send_body(&message.to_string());
    let labels = super::drain(&worker, &queue, Duration::from_secs(3)).await;
    assert_eq!(labels, ["cancelled"], "{labels:?}");
    assert_eq!(ran.load(Ordering::SeqCst), 0, "the step's job never ran");
    assert_eq!(store.snapshot().records[&step].status, Status::Cancelled);
    let answers = orchestrator.lock().answers.clone();
    assert!(
        matches!(&answers[..], [(t, Answer::Failed { error, .. })] if t == "t" && error == "schedkit.cancelled"),
        "{answers:?}"
    );
    assert_eq!(metric_total(&lines, "Cancelled"), 1.0);
    assert!(queue.lock().dead_letters.is_empty());
}

/// Step Functions in memory, interfered with: a `chains cancel` of the run taken by
/// schedkit's own code just before the first `StartExecution` lands (the cancel comes
/// between the run's record and its execution's start, and finds no execution to stop),
/// when `cancel_at_start`; and, when `describe_lags`, DescribeExecution answering as
/// Step Functions may just after a start (eventually consistent): no such execution.
#[derive(Debug, Clone)]
struct Interfering {
    inner: schedkit::orchestrator::MemoryOrchestrator,
    store: MemoryStore,
    catalog: schedkit::catalog::Catalog,
    machines: std::collections::BTreeMap<String, String>,
    cancel_at_start: Arc<std::sync::atomic::AtomicBool>,
    describe_lags: bool,
}

impl Interfering {
    fn new(store: &MemoryStore, cancel_at_start: bool, describe_lags: bool) -> Self {
        Interfering {
            inner: schedkit::orchestrator::MemoryOrchestrator::default(),
            store: store.clone(),
            catalog: schedkit::catalog::Catalog::parse(CHAINS, "chains.toml").unwrap(),
            machines: [(
                "month-end".to_string(),
                "arn:aws:states:us-east-1:000000000000:stateMachine:schedkit-test.month-end"
                    .to_string(),
            )]
            .into(),
            cancel_at_start: Arc::new(cancel_at_start.into()),
            describe_lags,
        }
    }

    /// The operator's chain commands over this Step Functions.
    fn runs(&self) -> schedkit::ops::chains::ChainRuns<MemoryStore, Self> {
        schedkit::ops::chains::ChainRuns::over(
            self.store.clone(),
            self.clone(),
            "the test's table",
            &self.catalog,
            self.machines.clone(),
        )
    }

    /// The operator's chain commands over this Step Functions and `store`, the first
    /// request named `request` sent again by the SDK ([`RetriedOnce`]).
    fn retrying(
        &self,
        store: &MemoryStore,
        request: &'static str,
    ) -> schedkit::ops::chains::ChainRuns<MemoryStore, Self> {
        schedkit::ops::chains::ChainRuns::over(
            RetriedOnce::store(store, request),
            self.clone(),
            "the test's table",
            &self.catalog,
            self.machines.clone(),
        )
    }

    /// The executions neither ended nor stopped.
    fn live(&self) -> Vec<String> {
        let state = self.inner.lock();
        state
            .executions
            .keys()
            .filter(|n| !state.closed.contains(n))
            .cloned()
            .collect()
    }
}

type Call<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

impl schedkit::orchestrator::Orchestrator for Interfering {
    fn start_execution<'a>(
        &'a self,
        machine: &'a str,
        name: &'a str,
        input: &'a str,
    ) -> Call<'a, Result<(), schedkit::orchestrator::StartError>> {
        Box::pin(async move {
            if self.cancel_at_start.swap(false, Ordering::SeqCst) {
                let key: serde_json::Value = serde_json::from_str(input).unwrap();
                let runs = schedkit::ops::chains::ChainRuns::over(
                    self.store.clone(),
                    self.inner.clone(),
                    "the test's table",
                    &self.catalog,
                    self.machines.clone(),
                );
                let clock = super::config().clock;
                let key = key["chain_key"].as_str().unwrap();
                runs.cancel(key, "ops", "a bad deploy", clock.now())
                    .await
                    .unwrap();
            }
            self.inner.start_execution(machine, name, input).await
        })
    }
    fn task_success<'a>(&'a self, token: &'a str, output: &'a str) -> Call<'a, Result<(), String>> {
        self.inner.task_success(token, output)
    }
    fn task_failure<'a>(
        &'a self,
        token: &'a str,
        error: &'a str,
        cause: &'a str,
    ) -> Call<'a, Result<(), String>> {
        self.inner.task_failure(token, error, cause)
    }
    fn task_heartbeat<'a>(&'a self, token: &'a str) -> Call<'a, Result<(), String>> {
        self.inner.task_heartbeat(token)
    }
    fn describe_execution<'a>(
        &'a self,
        arn: &'a str,
    ) -> Call<'a, Result<Option<schedkit::orchestrator::ExecutionInfo>, schedkit::aws::AwsError>>
    {
        if self.describe_lags {
            return Box::pin(std::future::ready(Ok(None)));
        }
        self.inner.describe_execution(arn)
    }
    fn stop_execution<'a>(
        &'a self,
        arn: &'a str,
        error: &'a str,
        cause: &'a str,
    ) -> Call<'a, Result<(), schedkit::aws::AwsError>> {
        self.inner.stop_execution(arn, error, cause)
    }
    /// Played here (the memory orchestrator refuses it): the stopped or ended execution
    /// runs again, after the interfering cancel when one is armed.
    fn redrive_execution<'a>(
        &'a self,
        arn: &'a str,
    ) -> Call<'a, Result<(), schedkit::aws::AwsError>> {
        Box::pin(async move {
            if self.cancel_at_start.swap(false, Ordering::SeqCst) {
                let clock = super::config().clock;
                self.runs()
                    .cancel(RUN, "ops", "a bad deploy", clock.now())
                    .await
                    .unwrap();
            }
            let name = arn.rsplit(':').next().unwrap_or_default().to_string();
            let mut state = self.inner.lock();
            state.stopped.remove(&name);
            state.closed.retain(|c| *c != name);
            Ok(())
        })
    }
}

/// A worker over `orchestrator`, with the month-end chain, on `store` and `queue`.
fn chain_worker(store: &MemoryStore, queue: &MemoryQueue, orchestrator: &Interfering) -> Processor {
    let chains = schedkit::batch::Chains::with_orchestrator(
        orchestrator.clone(),
        &orchestrator.catalog,
        orchestrator.machines.clone(),
    );
    let config = schedkit::ProcessorConfig {
        chains: Some(chains),
        ..super::config()
    };
    let registry = Jobs::new()
        .add("close-books", |_: Ctx| async {
            Ok::<_, JobError>(json!(null))
        })
        .bind_policies(|_| JobPolicy::default());
    Processor::with_queue(
        store.clone(),
        queue.clone(),
        registry,
        config,
        Metrics::capture().0,
    )
}

/// The month-end trigger's body, and its run's key.
const TRIGGER: &str = r#"{"job": "month-end", "scheduled_for": "2026-11-30T06:00:00Z"}"#;
const RUN: &str = "month-end#2026-11-30T06:00:00Z";

/// A worker over an [`Interfering`] Step Functions that took the month-end trigger, and
/// what it ran over.
async fn triggered(
    cancel_at_start: bool,
    describe_lags: bool,
) -> (MemoryStore, MemoryQueue, Interfering, Processor) {
    let (store, queue) = (MemoryStore::default(), MemoryQueue::new(3));
    let orchestrator = Interfering::new(&store, cancel_at_start, describe_lags);
    let worker = chain_worker(&store, &queue, &orchestrator);
    queue.send_body(TRIGGER);
    super::drain(&worker, &queue, Duration::from_secs(3)).await;
    (store, queue, orchestrator, worker)
}

/// A `chains cancel` that lands between the worker's record of the run and its start of
/// the execution finds no execution to stop; the worker, reading the run again once the
/// execution started, stops it. The trigger delivered again after (its message lost)
/// starts nothing and leaves nothing running.
#[tokio::test(start_paused = true)]
async fn an_execution_started_after_its_run_was_cancelled_is_stopped_by_the_worker() {
    let (store, queue, orchestrator, worker) = triggered(true, false).await;
    assert_eq!(store.snapshot().records[RUN].status, Status::Cancelled);
    assert_eq!(
        orchestrator.live(),
        Vec::<String>::new(),
        "{:?}",
        orchestrator.inner.lock()
    );
    assert_eq!(orchestrator.inner.lock().stopped.len(), 1);
    // The same trigger again: nothing started, nothing left running.
    queue.send_body(TRIGGER);
    super::drain(&worker, &queue, Duration::from_secs(3)).await;
    assert_eq!(orchestrator.live(), Vec::<String>::new());
    assert_eq!(orchestrator.inner.lock().executions.len(), 1);
    assert!(queue.lock().dead_letters.is_empty());
}

/// DescribeExecution is eventually consistent: just after the worker started the run's
/// execution, it may say there is none. `chains cancel` stops it all the same (a cancel
/// that believed the answer left it running).
#[tokio::test(start_paused = true)]
async fn a_cancel_stops_an_execution_step_functions_does_not_describe_yet() {
    let (_, _, orchestrator, _) = triggered(false, true).await;
    assert_eq!(orchestrator.live().len(), 1, "the run's execution started");
    let clock = super::config().clock;
    let cancelled = orchestrator
        .runs()
        .cancel(RUN, "ops", "a bad deploy", clock.now())
        .await
        .unwrap();
    assert_eq!(orchestrator.live(), Vec::<String>::new(), "{cancelled:?}");
    assert!(cancelled.stopped.is_some(), "{cancelled:?}");
}

/// The start of the month-end record `key` (the run, or a step of it) owned by `owner`.
fn chain_claim(key: &str, owner: &str, clock: Clock) -> schedkit::store::ClaimRequest {
    schedkit::store::ClaimRequest {
        key: key.into(),
        job: "month-end".into(),
        scheduled_for: "2026-11-30T06:00:00Z".into(),
        payload_hash: "h".into(),
        input: "{}".into(),
        message_id: None,
        owner: owner.into(),
        now: clock.now(),
        lease: Duration::ZERO,
        retention: Duration::from_secs(3600),
        redrive: None,
    }
}

/// The record of `RUN`'s step `close-books`, FAILED; its key.
async fn failed_step(store: &MemoryStore, clock: Clock) -> String {
    let step = format!("{RUN}#close-books");
    let mut step_claim = chain_claim(&step, "", clock);
    step_claim.job = "close-books".into();
    store.start_chain(&step_claim).await.unwrap();
    let mut failed = store.snapshot().records[&step].clone();
    failed.status = Status::Failed;
    failed.last_error = Some("broken".into());
    store.put(failed);
    step
}

/// The month-end run `RUN` PAUSED by its first execution (ended), as a rerun finds it;
/// the clock it was written at.
async fn paused_run(store: &MemoryStore, orchestrator: &Interfering) -> Clock {
    use schedkit::orchestrator::Orchestrator;
    use schedkit::store::ChainEnd;

    let machine = orchestrator.machines["month-end"].clone();
    let clock = super::config().clock;
    let first = schedkit::key::chain_execution_name(RUN, 1);
    store
        .start_chain(&chain_claim(RUN, &first, clock))
        .await
        .unwrap();
    let input = json!({"chain_key": RUN}).to_string();
    orchestrator
        .inner
        .start_execution(&machine, &first, &input)
        .await
        .unwrap();
    let paused = ChainEnd::Paused {
        failed: "step `close-books` failed".into(),
        stage: "{}".into(),
    };
    store
        .end_chain(RUN, "month-end", &first, &paused, clock.now())
        .await
        .unwrap()
        .unwrap();
    orchestrator.inner.lock().closed.push(first);
    clock
}

/// An operator's `chains rerun` reads the run, then starts the rerun's execution; a
/// second operator's `chains cancel` between the two finds nothing to stop. The rerun,
/// reading the run again after the start, stops its own execution and says why (what it
/// did before, and that the cancel came).
#[tokio::test(start_paused = true)]
async fn a_reruns_execution_started_after_a_cancel_came_meanwhile_is_stopped() {
    let store = MemoryStore::default();
    let orchestrator = Interfering::new(&store, false, false);
    let clock = paused_run(&store, &orchestrator).await;
    // The other operator's cancel lands just before the rerun's start.
    orchestrator.cancel_at_start.store(true, Ordering::SeqCst);
    let rerun = orchestrator.runs().rerun(RUN, false, clock.now()).await;
    assert!(
        matches!(&rerun, Err(e) if e.to_string().contains("cancelled while it was being rerun: its execution")),
        "{rerun:?}"
    );
    assert_eq!(store.snapshot().records[RUN].status, Status::Cancelled);
    assert_eq!(
        orchestrator.live(),
        Vec::<String>::new(),
        "{:?}",
        orchestrator.inner.lock()
    );
}

/// The first request named `request` is retried as the AWS SDK retries a request whose
/// answer was lost: applied twice, the second try's answer given.
#[derive(Debug)]
struct RetriedOnce {
    request: &'static str,
    left: std::sync::atomic::AtomicBool,
}

impl RetriedOnce {
    fn store(store: &MemoryStore, request: &'static str) -> MemoryStore {
        store.with_faults(Arc::new(RetriedOnce {
            request,
            left: std::sync::atomic::AtomicBool::new(true),
        }))
    }
}

impl schedkit::store::Faults for RetriedOnce {
    fn request(&self, request: &'static str, _key: &str) -> (Duration, schedkit::store::Fault) {
        use schedkit::store::Fault;
        let retried = request == self.request && self.left.swap(false, Ordering::SeqCst);
        (
            Duration::ZERO,
            if retried { Fault::Retried } else { Fault::None },
        )
    }
}

/// `chains cancel` whose write of CANCELLED is applied, its answer lost and the request
/// sent again by the SDK: the second try is refused by the first. The cancel is the
/// operator's all the same: the run's execution is stopped and the command says so (it
/// said "`K` is CANCELLED: only a RUNNING or PAUSED chain run can be cancelled" and left
/// the execution running).
#[tokio::test(start_paused = true)]
async fn a_chain_cancel_whose_write_the_sdk_sent_again_stops_the_execution() {
    let (store, _, orchestrator, _) = triggered(false, false).await;
    assert_eq!(orchestrator.live().len(), 1, "the run's execution started");
    let runs = orchestrator.retrying(&store, "cancel_chain");
    let clock = super::config().clock;
    let cancelled = runs.cancel(RUN, "ops", "a bad deploy", clock.now()).await;
    assert!(
        matches!(&cancelled, Ok(c) if c.was == Status::Running && c.stopped.is_some()),
        "{cancelled:?}"
    );
    assert_eq!(orchestrator.live(), Vec::<String>::new());
    assert_eq!(store.snapshot().records[RUN].status, Status::Cancelled);
}

/// `chains rerun` whose write of the run's next attempt is applied, its answer lost and
/// sent again by the SDK: the rerun is the operator's, and its execution starts (it said
/// "changed … another rerun came first" and left the run RUNNING with no execution).
#[tokio::test(start_paused = true)]
async fn a_rerun_whose_write_the_sdk_sent_again_starts_its_execution() {
    let store = MemoryStore::default();
    let orchestrator = Interfering::new(&store, false, false);
    let clock = paused_run(&store, &orchestrator).await;
    let runs = orchestrator.retrying(&store, "rerun_chain");
    let rerun = runs.rerun(RUN, false, clock.now()).await;
    assert!(
        matches!(
            &rerun,
            Ok(schedkit::ops::chains::Rerun::Started { run: 2, .. })
        ),
        "{rerun:?}"
    );
    assert_eq!(
        orchestrator.live().len(),
        1,
        "{:?}",
        orchestrator.inner.lock()
    );
    let record = store.snapshot().records[RUN].clone();
    assert_eq!((record.status, record.attempt), (Status::Running, 2));
}

/// `chains skip` whose write of the skipped step is applied, its answer lost and sent
/// again by the SDK: the skip is the operator's, and the run is rerun from it (it said the
/// step had changed meanwhile and started nothing).
#[tokio::test(start_paused = true)]
async fn a_skip_whose_write_the_sdk_sent_again_reruns_the_chain() {
    let store = MemoryStore::default();
    let orchestrator = Interfering::new(&store, false, false);
    let clock = paused_run(&store, &orchestrator).await;
    let step = failed_step(&store, clock).await;
    let runs = orchestrator.retrying(&store, "skip_step");
    let skipped = runs
        .skip(
            RUN,
            "close-books",
            &json!({"skipped": true}),
            "ops",
            "not needed",
            clock.now(),
        )
        .await;
    assert!(
        matches!(&skipped, Ok(s) if matches!(s.rerun, schedkit::ops::chains::Rerun::Started { run: 2, .. })),
        "{skipped:?}"
    );
    assert_eq!(store.snapshot().records[&step].status, Status::Done);
    assert_eq!(store.snapshot().records[RUN].status, Status::Running);
}

/// A chain run recorded before runs kept their execution's name (`owner` absent): its
/// execution has the name its attempt gives (`chain_execution_name`), as the worker and a
/// rerun take it. `chains cancel` stops that one too (it stopped none, and the execution
/// ran on for a CANCELLED run).
#[tokio::test(start_paused = true)]
async fn a_cancel_of_a_run_recorded_without_its_executions_name_stops_it() {
    let (store, _, orchestrator, _) = triggered(false, false).await;
    assert_eq!(orchestrator.live().len(), 1, "the run's execution started");
    let mut old = store.snapshot().records[RUN].clone();
    assert_eq!(
        old.owner.as_deref(),
        Some(schedkit::key::chain_execution_name(RUN, 1).as_str())
    );
    old.owner = None;
    store.put(old);
    let clock = super::config().clock;
    let cancelled = orchestrator
        .runs()
        .cancel(RUN, "ops", "a bad deploy", clock.now())
        .await;
    assert!(
        matches!(&cancelled, Ok(c) if c.stopped.is_some()),
        "{cancelled:?}"
    );
    assert_eq!(orchestrator.live(), Vec::<String>::new());
}

/// A job's message whose explicit key names a chain run's step (`<chain key>#<step>`)
/// came first, and took the step's place: the chain's step then met a key conflict and
/// the run paused for good, and an operator's skip or cancel of the step acted on the
/// other job's run. Such a key is poison now, as one in schedkit's own key space is: the
/// chain's key space is the chain's.
#[tokio::test(start_paused = true)]
async fn a_jobs_key_in_a_chains_key_space_is_poison() {
    let (store, queue) = (MemoryStore::default(), MemoryQueue::new(3));
    let orchestrator = Interfering::new(&store, false, false);
    let worker = chain_worker(&store, &queue, &orchestrator);
    for key in [format!("{RUN}#close-books"), RUN.to_string()] {
        let mut e = schedkit::Envelope::new("close-books", "2026-11-30T06:00:00Z".parse().unwrap());
        e.key = Some(key.clone());
        queue.send_body(&e.to_json());
        let labels = super::drain(&worker, &queue, Duration::from_secs(3)).await;
        assert_eq!(labels, ["dead-lettered"], "{key}: {labels:?}");
        assert!(
            store.snapshot().records.is_empty(),
            "{key}: nothing claimed"
        );
    }
    let letters = queue.lock().dead_letters.clone();
    let reason = &letters[0].attributes[schedkit::dead_letter::attr::REASON];
    assert_eq!(reason.string.as_deref(), Some("poison"));
    let error = letters[0].attributes[schedkit::dead_letter::attr::ERROR]
        .string
        .clone()
        .unwrap_or_default();
    assert!(error.contains("chain `month-end`"), "{error}");
}

/// `chains rerun --redrive` reads the run (RUNNING, its execution stopped without an
/// outcome), then redrives the execution; a second operator's `chains cancel` between the
/// two finds the execution ended and stops nothing. The rerun, reading the run again after
/// the redrive, stops the execution it brought back (it ran on for a CANCELLED run).
#[tokio::test(start_paused = true)]
async fn an_execution_redriven_after_a_cancel_came_meanwhile_is_stopped() {
    let (store, _, orchestrator, _) = triggered(false, false).await;
    let first = schedkit::key::chain_execution_name(RUN, 1);
    {
        let mut state = orchestrator.inner.lock();
        state.stopped.insert(first.clone(), "States.Timeout".into());
        state.closed.push(first.clone());
    }
    assert_eq!(orchestrator.live(), Vec::<String>::new());
    orchestrator.cancel_at_start.store(true, Ordering::SeqCst);
    let clock = super::config().clock;
    let rerun = orchestrator.runs().rerun(RUN, true, clock.now()).await;
    assert_eq!(store.snapshot().records[RUN].status, Status::Cancelled);
    assert_eq!(
        orchestrator.live(),
        Vec::<String>::new(),
        "{rerun:?}: {:?}",
        orchestrator.inner.lock()
    );
    assert!(
        matches!(&rerun, Err(e) if e.to_string().contains("cancelled")),
        "{rerun:?}"
    );
}

/// `chains rerun` reopens the failed step, and that write is applied, its answer lost and
/// sent again by the SDK: the reopen is the rerun's, and its execution starts (it said the
/// step changed while it was being reopened, and left the run RUNNING with no execution).
#[tokio::test(start_paused = true)]
async fn a_reopen_whose_write_the_sdk_sent_again_starts_the_rerun() {
    let store = MemoryStore::default();
    let orchestrator = Interfering::new(&store, false, false);
    let clock = paused_run(&store, &orchestrator).await;
    let step = failed_step(&store, clock).await;
    let runs = orchestrator.retrying(&store, "reopen_step");
    let rerun = runs.rerun(RUN, false, clock.now()).await;
    assert!(
        matches!(
            &rerun,
            Ok(schedkit::ops::chains::Rerun::Started { run: 2, .. })
        ),
        "{rerun:?}"
    );
    assert_eq!(orchestrator.live().len(), 1);
    assert_eq!(store.snapshot().records[&step].status, Status::Registered);
}
