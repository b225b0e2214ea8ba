//! Chains through the worker: the generated definition of a three-stage chain (the middle
//! stage parallel) created in LocalStack's Step Functions against a deployed stage's jobs
//! queue, and the worker running its steps and answering their tasks. Every step runs
//! once (a transient failure retried by the worker), each step record DONE under the chain
//! key, the last step seeing what the earlier ones returned, and the chain ends DONE; a step that fails for good lets its sibling finish,
//! pauses the chain, and the last stage never starts. Each run is triggered through the
//! jobs queue twice, as a scheduler retry would: one execution.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_sdk_sfn::types::ExecutionStatus;
use schedkit::batch::Chains;
use schedkit::catalog::Catalog;
use schedkit::{
    Envelope, ExecutionRecord, JobContext, JobError, JobPolicy, Metrics, Processor,
    ProcessorConfig, Registry, RetryPolicy, Status,
};
use schedkit_testkit::chains::generated_state_machine;
use schedkit_testkit::{Stack, StackOptions, localstack, unique};
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
/// once (retryably) per run, and for good when `fail_invoices` says so.
fn registry(runs: Runs, fail_invoices: bool) -> Registry {
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
        move |ctx: JobContext| {
            let runs = runs.clone();
            async move {
                *runs.lock().unwrap().entry(ctx.key.clone()).or_default() += 1;
                if name == "issue-invoices" {
                    if fail_invoices {
                        return Err(JobError::permanent("the invoice template is missing"));
                    }
                    if ctx.attempt == 1 {
                        return Err(JobError::retryable("the ledger is locked, try again"));
                    }
                }
                // The last step reports what the earlier stages returned.
                if name == "report" {
                    let chain = ctx.chain().expect("a chain step knows its chain");
                    return Ok(json!({ "did": name, "saw": chain.outputs }));
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

/// A run of the chain on `stack`: triggered through the jobs queue as a schedule would
/// (twice), run by a worker until its record says it ended; the execution's status, how
/// many executions the machine had, and the chain's record.
async fn run_chain(
    stack: &Stack,
    runs: Runs,
    fail_invoices: bool,
    scheduled_for: &str,
) -> (ExecutionStatus, usize, ExecutionRecord) {
    let sdk = localstack().await;
    let sfn = aws_sdk_sfn::Client::new(&sdk);
    let catalog = Catalog::parse(CATALOG, "catalog.toml").unwrap();
    let machine = generated_state_machine(&sfn, &catalog, "month-end", &stack.queue_url)
        .await
        .unwrap();
    let chains = Chains::with_state_machines(
        &sdk,
        &catalog,
        BTreeMap::from([("month-end".to_string(), machine.clone())]),
    );
    let worker = Processor::new(
        stack.store(),
        stack.sqs.clone(),
        registry(runs, fail_invoices),
        ProcessorConfig {
            chains: Some(chains),
            ..stack.config("w")
        },
        Metrics::capture().0,
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let options = schedkit::poller::PollOptions {
        wait_seconds: 1,
        max_messages: 10,
        until_drained: false,
    };
    let sqs = stack.sqs.clone();
    let polling = tokio::spawn(async move {
        schedkit::poller::poll(&worker, &sqs, &options, async {
            let _ = stopped.await;
        })
        .await
    });
    // The trigger, delivered twice (a scheduler retry): one run, one execution.
    let trigger = Envelope::new("month-end", scheduled_for.parse().unwrap());
    stack.send_envelope(&trigger).await.unwrap();
    stack.send_envelope(&trigger).await.unwrap();
    let key = format!("month-end#{scheduled_for}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    let record = loop {
        let record = stack.record(&key).await.unwrap();
        if let Some(r) = record.filter(|r| r.status != Status::Running) {
            break r;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the chain did not end"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    let executions = sfn
        .list_executions()
        .state_machine_arn(&machine)
        .send()
        .await
        .unwrap()
        .executions;
    let _ = stop.send(());
    polling.await.unwrap();
    let status = executions[0].status.clone();
    (status, executions.len(), record)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_worker_runs_every_step_once_and_answers_its_task_so_the_chain_ends_done() {
    let sdk = localstack().await;
    let stack = Stack::create(&sdk, &unique("chains"), StackOptions::default())
        .await
        .unwrap();
    let runs: Runs = Arc::default();
    let key = "month-end#2026-12-01T02:00:00Z";
    let (status, executions, chain) =
        run_chain(&stack, runs.clone(), false, "2026-12-01T02:00:00Z").await;
    assert_eq!(status, ExecutionStatus::Succeeded);
    assert_eq!(
        executions, 1,
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
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_step_failed_for_good_lets_its_sibling_finish_and_the_last_stage_never_starts() {
    let sdk = localstack().await;
    let stack = Stack::create(&sdk, &unique("chains-pause"), StackOptions::default())
        .await
        .unwrap();
    let runs: Runs = Arc::default();
    let key = "month-end#2026-12-02T02:00:00Z";
    let (status, executions, chain) =
        run_chain(&stack, runs.clone(), true, "2026-12-02T02:00:00Z").await;
    // A paused chain is not a Step Functions failure.
    assert_eq!(status, ExecutionStatus::Succeeded);
    assert_eq!(executions, 1);
    assert_eq!(chain.status, Status::Paused, "{chain:?}");
    assert_eq!(
        chain.last_error.as_deref(),
        Some("step `invoices` failed: schedkit.permanent-error: the invoice template is missing")
    );
    let runs = runs.lock().unwrap().clone();
    let step = |s: &str| format!("{key}#{s}");
    assert_eq!(runs.get(&step("ledger")), Some(&1), "{runs:?}");
    assert_eq!(runs.get(&step("invoices")), Some(&1), "{runs:?}");
    assert_eq!(
        runs.get(&step("report")),
        None,
        "the last stage started: {runs:?}"
    );
    let invoices = stack.record(&step("invoices")).await.unwrap().unwrap();
    assert_eq!(invoices.status, Status::Failed);
    let ledger = stack.record(&step("ledger")).await.unwrap().unwrap();
    assert_eq!(ledger.status, Status::Done);
}
