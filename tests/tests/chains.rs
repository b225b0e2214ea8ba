//! Chains through the worker: the generated definition of a three-stage chain (the middle
//! stage parallel) created in LocalStack's Step Functions against a deployed stage's jobs
//! queue, and the worker running its steps and answering their tasks. Every step runs
//! once (a transient failure retried by the worker), each step record DONE under the chain
//! key, the last step seeing what the earlier ones returned, and the chain ends DONE; a step that fails for good lets its sibling finish,
//! pauses the chain, and the last stage never starts. Each run is triggered through the
//! jobs queue twice, as a scheduler retry would: one execution.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_sdk_sfn::types::ExecutionStatus;
use schedkit::batch::Chains;
use schedkit::catalog::Catalog;
use schedkit::ops::chains::{ChainRuns, Rerun};
use schedkit::{
    Envelope, ExecutionRecord, JobContext, JobError, JobPolicy, Metrics, Processor,
    ProcessorConfig, Registry, RetryPolicy, Status,
};
use schedkit_testkit::chains::generated_state_machine;
use schedkit_testkit::{Stack, StackOptions, localstack, metric_total, unique};
use serde_json::{Value, json};

const CATALOG: &str = r#"
[jobs.close-books]
owner = "finance"
lease_seconds = 5

[jobs.issue-invoices]
owner = "billing"
lease_seconds = 5

[jobs.report]
owner = "data"
lease_seconds = 5

[chains.month-end]
owner = "finance"
stages = ["close-books", ["invoices", "ledger"], "report"]

[chains.month-end.steps.invoices]
job = "issue-invoices"

[chains.month-end.steps.ledger]
job = "close-books"
payload = { ledger = true }
"#;

/// How many times each step's job body ran, by execution key.
type Runs = Arc<Mutex<BTreeMap<String, u32>>>;

/// The chain's jobs: each counts its runs and returns what it did; `issue-invoices` fails
/// once (retryably) per round, and for good while `broken` says so.
fn registry(runs: Runs, broken: Arc<AtomicBool>) -> Registry {
    let policy = JobPolicy {
        retry: RetryPolicy {
            max_attempts: 3,
            first_delay: Duration::from_secs(1),
            base_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(2),
        },
        ..JobPolicy::default().with_lease(Duration::from_secs(5))
    };
    let job = |name: &'static str| {
        let runs = runs.clone();
        let broken = broken.clone();
        move |ctx: JobContext| {
            let runs = runs.clone();
            let broken = broken.load(Ordering::SeqCst);
            async move {
                *runs.lock().unwrap().entry(ctx.key.clone()).or_default() += 1;
                if name == "issue-invoices" {
                    if broken {
                        return Err(JobError::permanent("the invoice template is missing"));
                    }
                    if ctx.attempt == 1 {
                        return Err(JobError::retryable("the ledger is locked, try again"));
                    }
                }
                // The last step reports what the earlier stages returned.
                if name == "report" {
                    let chain = ctx.chain().expect("a chain step knows its chain");
                    return Ok(
                        json!({ "did": name, "saw": chain.outputs, "month": chain.input["month"] }),
                    );
                }
                Ok(json!({ "did": name, "payload": ctx.payload }))
            }
        }
    };
    Registry::new()
        .register("close-books", policy.clone(), job("close-books"))
        .register("issue-invoices", policy.clone(), job("issue-invoices"))
        .register("report", policy, job("report"))
}

/// The chain's generated state machine on LocalStack against `stack`'s jobs queue, and a
/// worker polling that queue until the harness is stopped.
struct Harness {
    sfn: aws_sdk_sfn::Client,
    machine: String,
    catalog: Catalog,
    metrics: Arc<Mutex<Vec<String>>>,
    stop: tokio::sync::oneshot::Sender<()>,
    polling: tokio::task::JoinHandle<schedkit::poller::PollStats>,
}

impl Harness {
    async fn start(stack: &Stack, runs: Runs, broken: Arc<AtomicBool>) -> Harness {
        let sdk = localstack().await;
        let sfn = aws_sdk_sfn::Client::new(&sdk);
        let catalog = Catalog::parse(CATALOG, "catalog.toml").unwrap();
        let machine = generated_state_machine(&sfn, &catalog, "month-end", &stack.queue_url)
            .await
            .unwrap();
        let chains = Chains::with_state_machines(&sdk, &catalog, Harness::machines_of(&machine));
        let (metrics, lines) = Metrics::capture();
        let worker = Processor::new(
            stack.store(),
            stack.sqs.clone(),
            registry(runs, broken),
            ProcessorConfig {
                chains: Some(chains),
                ..stack.config("w")
            },
            metrics,
        );
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let options = schedkit::poller::PollOptions {
            wait_seconds: 1,
            max_messages: 10,
            until_drained: false,
            keep_reports: false,
        };
        let sqs = stack.sqs.clone();
        let polling = tokio::spawn(async move {
            schedkit::poller::poll(&worker, &sqs, &options, async {
                let _ = stopped.await;
            })
            .await
        });
        Harness {
            sfn,
            machine,
            catalog,
            metrics: lines,
            stop,
            polling,
        }
    }

    fn machines_of(machine: &str) -> BTreeMap<String, String> {
        BTreeMap::from([("month-end".to_string(), machine.to_string())])
    }

    /// What an operator reruns the chain's runs with (the console's `chains rerun`).
    async fn operator(&self, stack: &Stack) -> ChainRuns {
        ChainRuns::with_state_machines(
            &localstack().await,
            &stack.table,
            &self.catalog,
            Harness::machines_of(&self.machine),
        )
    }

    async fn executions(&self) -> Vec<aws_sdk_sfn::types::ExecutionListItem> {
        self.sfn
            .list_executions()
            .state_machine_arn(&self.machine)
            .send()
            .await
            .unwrap()
            .executions
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        self.polling.await.unwrap();
    }
}

/// Triggers a run of the chain through the jobs queue as a schedule would (twice: a
/// scheduler retry); its key.
async fn trigger(stack: &Stack, scheduled_for: &str) -> String {
    let mut trigger = Envelope::new("month-end", scheduled_for.parse().unwrap());
    trigger.payload = json!({ "month": "2026-11" }).as_object().cloned();
    stack.send_envelope(&trigger).await.unwrap();
    stack.send_envelope(&trigger).await.unwrap();
    format!("month-end#{scheduled_for}")
}

/// The chain run's record once it is no longer RUNNING.
async fn ended(stack: &Stack, key: &str) -> ExecutionRecord {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    loop {
        let record = stack.record(key).await.unwrap();
        if let Some(r) = record.filter(|r| r.status != Status::Running) {
            return r;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the chain did not end"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_worker_runs_every_step_once_and_answers_its_task_so_the_chain_ends_done() {
    let sdk = localstack().await;
    let stack = Stack::create(&sdk, &unique("chains"), StackOptions::default())
        .await
        .unwrap();
    let runs: Runs = Arc::default();
    let harness = Harness::start(&stack, runs.clone(), Arc::default()).await;
    let key = trigger(&stack, "2026-12-01T02:00:00Z").await;
    let chain = ended(&stack, &key).await;
    let executions = harness.executions().await;
    harness.stop().await;
    assert_eq!(executions[0].status, ExecutionStatus::Succeeded);
    assert_eq!(
        executions.len(),
        1,
        "the trigger delivered twice started two executions"
    );
    assert_eq!(chain.status, Status::Done, "{chain:?}");
    assert_eq!(chain.job, "month-end");
    let runs = runs.lock().unwrap().clone();
    let step = |s: &str| format!("{key}#{s}");
    assert_eq!(
        runs,
        BTreeMap::from([
            (step("close-books"), 1),
            (step("invoices"), 2),
            (step("ledger"), 1),
            (step("report"), 1),
        ]),
        "each step once; invoices retried once by the worker"
    );
    for s in ["close-books", "invoices", "ledger", "report"] {
        let record = stack.record(&step(s)).await.unwrap().unwrap();
        assert_eq!(record.status, Status::Done, "{s}: {record:?}");
    }
    let invoices = stack.record(&step("invoices")).await.unwrap().unwrap();
    assert_eq!(invoices.attempt, 2, "{invoices:?}");
    let ledger = stack.record(&step("ledger")).await.unwrap().unwrap();
    let result: Value = serde_json::from_str(ledger.result.as_deref().unwrap()).unwrap();
    assert_eq!(
        result,
        json!({ "did": "close-books", "payload": { "ledger": true } })
    );
    // Later steps read earlier steps' outputs: the last stage saw all three.
    let report = stack.record(&step("report")).await.unwrap().unwrap();
    let result: Value = serde_json::from_str(report.result.as_deref().unwrap()).unwrap();
    assert_eq!(
        result["saw"],
        json!({
            "close-books": { "did": "close-books", "payload": {} },
            "invoices": { "did": "issue-invoices", "payload": {} },
            "ledger": { "did": "close-books", "payload": { "ledger": true } },
        })
    );
    // Every step sees the chain run's payload (its trigger's).
    assert_eq!(result["month"], "2026-11");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_step_failed_for_good_pauses_the_chain_and_a_rerun_runs_only_it_and_the_later_stages() {
    let sdk = localstack().await;
    let stack = Stack::create(&sdk, &unique("chains-pause"), StackOptions::default())
        .await
        .unwrap();
    let runs: Runs = Arc::default();
    let broken = Arc::new(AtomicBool::new(true));
    let harness = Harness::start(&stack, runs.clone(), broken.clone()).await;
    let key = trigger(&stack, "2026-12-02T02:00:00Z").await;
    let chain = ended(&stack, &key).await;
    // A paused chain is not a Step Functions failure.
    let executions = harness.executions().await;
    assert_eq!(executions[0].status, ExecutionStatus::Succeeded);
    assert_eq!(executions.len(), 1);
    assert_eq!(chain.status, Status::Paused, "{chain:?}");
    assert_eq!(
        chain.last_error.as_deref(),
        Some("step `invoices` failed: schedkit.permanent-error: the invoice template is missing")
    );
    assert_eq!(metric_total(&harness.metrics, "ChainPaused"), 1.0);
    let step = |s: &str| format!("{key}#{s}");
    let counted = |s: &str| runs.lock().unwrap().get(&step(s)).copied().unwrap_or(0);
    assert_eq!(counted("close-books"), 1);
    assert_eq!(counted("ledger"), 1, "the sibling branch ran to completion");
    assert_eq!(counted("invoices"), 1);
    assert_eq!(counted("report"), 0, "the last stage started");
    let invoices = stack.record(&step("invoices")).await.unwrap().unwrap();
    assert_eq!(invoices.status, Status::Failed);
    let ledger = stack.record(&step("ledger")).await.unwrap().unwrap();
    assert_eq!(ledger.status, Status::Done);

    // The operator fixes the cause and reruns the run: a second execution, under the
    // same chain key, runs the failed step (a fresh round: its retry again) and the last
    // stage; the DONE steps answer from their records.
    broken.store(false, Ordering::SeqCst);
    let operator = harness.operator(&stack).await;
    let rerun = operator
        .rerun(&key, false, chrono::Utc::now())
        .await
        .unwrap();
    let Rerun::Started { run, steps, .. } = &rerun else {
        panic!("{rerun:?}");
    };
    assert_eq!(*run, 2);
    assert_eq!(steps, &["invoices".to_string(), "report".to_string()]);
    let chain = ended(&stack, &key).await;
    assert_eq!(chain.status, Status::Done, "{chain:?}");
    assert_eq!(chain.attempt, 2, "the record counts the runs");
    assert_eq!(counted("close-books"), 1, "a DONE step ran again");
    assert_eq!(counted("ledger"), 1, "a DONE step ran again");
    assert_eq!(
        counted("invoices"),
        3,
        "1 failed for good, then 2 in the rerun's round"
    );
    assert_eq!(counted("report"), 1);
    let invoices = stack.record(&step("invoices")).await.unwrap().unwrap();
    assert_eq!(invoices.status, Status::Done);
    assert_eq!(
        invoices.round_attempt(),
        2,
        "a fresh set of attempts: {invoices:?}"
    );
    let executions = harness.executions().await;
    assert_eq!(executions.len(), 2);
    assert!(
        executions
            .iter()
            .all(|e| e.status == ExecutionStatus::Succeeded)
    );
    assert_eq!(metric_total(&harness.metrics, "ChainDone"), 1.0);
    // A DONE run has nothing to rerun.
    let again = operator.rerun(&key, false, chrono::Utc::now()).await;
    assert!(
        matches!(&again, Err(schedkit::ops::OpsError::Refused(e)) if e.contains("is DONE")),
        "{again:?}"
    );
    harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_earlier_runs_outcome_cannot_end_a_rerun_and_a_stale_rerun_is_refused() {
    use schedkit::key::chain_execution_name;
    use schedkit::store::{ChainEnd, ClaimRequest};
    let sdk = localstack().await;
    let stack = Stack::create(&sdk, &unique("chains-fence"), StackOptions::default())
        .await
        .unwrap();
    let store = stack.store();
    let key = "month-end#2026-12-03T02:00:00Z";
    let (first, second) = (chain_execution_name(key, 1), chain_execution_name(key, 2));
    let now = chrono::Utc::now();
    let req = ClaimRequest {
        key: key.into(),
        job: "month-end".into(),
        scheduled_for: "2026-12-03T02:00:00Z".into(),
        payload_hash: "h".into(),
        input: "{}".into(),
        message_id: Some("m".into()),
        owner: first.clone(),
        now,
        lease: Duration::ZERO,
        retention: Duration::from_secs(3600),
    };
    assert!(store.start_chain(&req).await.unwrap().is_none());
    let paused = ChainEnd::Paused {
        failed: "step `invoices` failed".into(),
        stage: "[]".into(),
    };
    assert!(
        store
            .end_chain(key, Some(&first), &paused, now)
            .await
            .unwrap()
    );
    let run1 = stack.record(key).await.unwrap().unwrap();
    assert_eq!((run1.status, run1.attempt), (Status::Paused, 1));
    let run2 = store
        .rerun_chain(&run1, &second, now)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (run2.status, run2.attempt, run2.owner.as_deref()),
        (Status::Running, 2, Some(second.as_str()))
    );
    // A second operator's rerun from the same (now stale) reading changes nothing.
    assert!(
        store
            .rerun_chain(&run1, "run-3", now)
            .await
            .unwrap()
            .is_none()
    );
    // Run 1's outcome, delivered again, cannot end run 2; run 2's does.
    assert!(
        !store
            .end_chain(key, Some(&first), &paused, now)
            .await
            .unwrap()
    );
    assert_eq!(
        stack.record(key).await.unwrap().unwrap().status,
        Status::Running
    );
    assert!(
        store
            .end_chain(key, Some(&second), &ChainEnd::Done, now)
            .await
            .unwrap()
    );
    let done = stack.record(key).await.unwrap().unwrap();
    assert_eq!((done.status, done.attempt), (Status::Done, 2));
}
