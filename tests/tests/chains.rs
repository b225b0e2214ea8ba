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
    Ctx, Envelope, ExecutionRecord, JobError, JobPolicy, Jobs, Metrics, Processor, ProcessorConfig,
    Registry, RetryPolicy, Status,
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
    registry_with(runs, broken, schedkit::Overlap::Allow)
}

/// [`registry`] with every job under the overlap policy `overlap`.
fn registry_with(runs: Runs, broken: Arc<AtomicBool>, overlap: schedkit::Overlap) -> Registry {
    let policy = JobPolicy {
        overlap,
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
        move |ctx: Ctx| {
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
    Jobs::new()
        .add("close-books", job("close-books"))
        .add("issue-invoices", job("issue-invoices"))
        .add("report", job("report"))
        .bind_policies(|n| match n {
            "close-books" => policy.clone(),
            "issue-invoices" => policy.clone(),
            _ => policy.clone(),
        })
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
        Harness::start_with(stack, registry(runs, broken)).await
    }

    /// The harness with jobs of one's own.
    async fn start_with(stack: &Stack, registry: Registry) -> Harness {
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
            registry,
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
            on_report: None,
        };
        let polling = tokio::spawn(async move {
            schedkit::poller::poll(&worker, &options, async {
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
    let stack = Stack::lane("chains-fence", StackOptions::default()).await;
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
        redrive: None,
    };
    assert!(store.start_chain(&req).await.unwrap().is_none());
    let paused = ChainEnd::Paused {
        failed: "step `invoices` failed".into(),
        stage: "[]".into(),
    };
    assert!(
        store
            .end_chain(key, "month-end", &first, &paused, now)
            .await
            .unwrap()
            .is_ok()
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
        store
            .end_chain(key, "month-end", &first, &paused, now)
            .await
            .unwrap()
            .is_err()
    );
    assert_eq!(
        stack.record(key).await.unwrap().unwrap().status,
        Status::Running
    );
    assert!(
        store
            .end_chain(key, "month-end", &second, &ChainEnd::Done, now)
            .await
            .unwrap()
            .is_ok()
    );
    let done = stack.record(key).await.unwrap().unwrap();
    assert_eq!((done.status, done.attempt), (Status::Done, 2));
}

/// `close-books` skips overlapping runs (its own policy, in this worker's registry), and a
/// run of it elsewhere holds its slot: the chain's `close-books` step runs all the same (a
/// chain orders its own steps), and the chain ends DONE. (The step was recorded SKIPPED,
/// terminal: the chain paused, and every rerun paused again.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_step_runs_while_its_jobs_overlap_slot_is_held() {
    let sdk = localstack().await;
    let stack = Stack::lane("chains-slot", StackOptions::default()).await;
    let runs: Runs = Arc::default();
    let registry = registry_with(runs.clone(), Arc::default(), schedkit::Overlap::Skip);
    // A run of close-books elsewhere, RUNNING, holds the job's slot for two minutes.
    let elsewhere = unique("close-books#elsewhere");
    let store = stack.store();
    let claimed = store
        .claim(&schedkit::store::ClaimRequest {
            key: elsewhere.clone(),
            job: "close-books".into(),
            scheduled_for: "2026-12-01T00:00:00Z".into(),
            payload_hash: "h".into(),
            input: "{}".into(),
            message_id: Some("m".into()),
            owner: "elsewhere:1".into(),
            now: chrono::Utc::now(),
            lease: Duration::from_secs(120),
            retention: Duration::from_secs(3600),
            redrive: None,
        })
        .await
        .unwrap();
    assert!(matches!(
        claimed,
        schedkit::store::ClaimOutcome::Claimed { .. }
    ));
    stack
        .hold_slot("close-books", &elsewhere, Duration::from_secs(120))
        .await
        .unwrap();
    let harness = Harness::start_with(&stack, registry).await;
    let key = trigger(&stack, "2026-12-04T02:00:00Z").await;
    let chain = ended(&stack, &key).await;
    harness.stop().await;
    let _ = sdk;
    assert_eq!(chain.status, Status::Done, "{chain:?}");
    let step = stack
        .record(&format!("{key}#close-books"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(step.status, Status::Done, "{step:?}");
}

/// A run paused on a step that an earlier version recorded SKIPPED (its job's overlap
/// policy): `chains rerun` runs that step, and the chain ends DONE. (SKIPPED is terminal:
/// the rerun's step was answered "not DONE" from the record and the chain paused again.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rerun_runs_a_step_its_jobs_overlap_policy_once_skipped() {
    let stack = Stack::lane("chains-skipped", StackOptions::default()).await;
    let runs: Runs = Arc::default();
    let harness = Harness::start(&stack, runs.clone(), Arc::default()).await;
    let scheduled_for = "2026-12-05T02:00:00Z";
    let key = format!("month-end#{scheduled_for}");
    let step_key = format!("{key}#close-books");
    // The step's message as the state machine sends it (its hash names the step).
    let step = Envelope::parse(
        &json!({
            "job": "close-books",
            "scheduled_for": scheduled_for,
            "key": step_key,
            "chain": { "name": "month-end", "key": key, "step": "close-books" },
        })
        .to_string(),
    )
    .unwrap();
    let now = "2026-12-05T02:00:00.000Z".to_string();
    stack
        .put_record(&ExecutionRecord {
            execution_key: step_key.clone(),
            job: "close-books".into(),
            scheduled_for: scheduled_for.into(),
            status: Status::Skipped,
            attempt: 0,
            attempt_base: 0,
            owner: None,
            lease_expires_at: None,
            payload_hash: schedkit::key::payload_hash(&step),
            input: None,
            created_at: now.clone(),
            updated_at: now.clone(),
            started_at: None,
            finished_at: Some(now),
            duration_ms: None,
            last_error: Some(
                "skipped: `close-books#x` of the same job was running (overlap policy)".into(),
            ),
            history: Vec::new(),
            result: None,
            message_id: None,
            cancelled: None,
            skipped: None,
            late_attempt: None,
            waiting_since: None,
            expires_at: chrono::Utc::now().timestamp() + 3600,
        })
        .await
        .unwrap();
    trigger(&stack, scheduled_for).await;
    let chain = ended(&stack, &key).await;
    assert_eq!(chain.status, Status::Paused, "{chain:?}");
    let rerun = harness
        .operator(&stack)
        .await
        .rerun(&key, false, chrono::Utc::now())
        .await
        .unwrap();
    assert!(matches!(rerun, Rerun::Started { .. }), "{rerun:?}");
    let chain = ended(&stack, &key).await;
    harness.stop().await;
    assert_eq!(chain.status, Status::Done, "{chain:?}");
    let step = stack.record(&step_key).await.unwrap().unwrap();
    assert_eq!(step.status, Status::Done, "{step:?}");
    assert_eq!(runs.lock().unwrap().get(&step_key), Some(&1));
}

/// The run's execution SUCCEEDED but its record still says RUNNING (the end message never
/// arrived, or was refused): `chains rerun` reconciles it and reruns what is not DONE.
/// (Refused forever: "the worker has not recorded its outcome yet".)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chains_rerun_reconciles_a_run_whose_execution_ended_while_its_record_says_running() {
    let sdk = localstack().await;
    let stack = Stack::lane("chains-reconcile", StackOptions::default()).await;
    let sfn = aws_sdk_sfn::Client::new(&sdk);
    let catalog = Catalog::parse(CATALOG, "catalog.toml").unwrap();
    // A state machine that ends at once, standing in for the chain's.
    let machine = sfn
        .create_state_machine()
        .name(format!("{}-month-end", unique("sm")))
        .definition(r#"{"StartAt":"p","States":{"p":{"Type":"Pass","End":true}}}"#)
        .role_arn("arn:aws:iam::000000000000:role/chain")
        .send()
        .await
        .unwrap()
        .state_machine_arn;
    let key = unique("month-end#2026-12-06T02:00:00Z");
    let first = schedkit::key::chain_execution_name(&key, 1);
    let input = json!({"chain_key": key, "scheduled_for": "2026-12-06T02:00:00Z", "payload": {}});
    sfn.start_execution()
        .state_machine_arn(&machine)
        .name(&first)
        .input(input.to_string())
        .send()
        .await
        .unwrap();
    let store = stack.store();
    let started = store
        .start_chain(&schedkit::store::ClaimRequest {
            key: key.clone(),
            job: "month-end".into(),
            scheduled_for: "2026-12-06T02:00:00Z".into(),
            payload_hash: "h".into(),
            input: input.to_string(),
            message_id: Some("m".into()),
            owner: first.clone(),
            now: chrono::Utc::now(),
            lease: Duration::ZERO,
            retention: Duration::from_secs(3600),
            redrive: None,
        })
        .await
        .unwrap();
    assert!(started.is_none());
    let operator = ChainRuns::with_state_machines(
        &sdk,
        &stack.table,
        &catalog,
        BTreeMap::from([("month-end".to_string(), machine.clone())]),
    );
    // Until the first execution has ended.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let status = sfn
            .describe_execution()
            .execution_arn(machine.replacen(":stateMachine:", ":execution:", 1) + ":" + &first)
            .send()
            .await
            .unwrap()
            .status;
        if status == ExecutionStatus::Succeeded {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{status:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let rerun = operator.rerun(&key, false, chrono::Utc::now()).await;
    let Ok(Rerun::Started { run, steps, .. }) = &rerun else {
        panic!("{rerun:?}");
    };
    assert_eq!(*run, 2);
    assert_eq!(steps.len(), 4, "no step is DONE: {steps:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn skipping_a_paused_chains_failed_step_runs_the_later_stages_and_names_who_skipped_it() {
    let sdk = localstack().await;
    let stack = Stack::create(&sdk, &unique("chains-skip"), StackOptions::default())
        .await
        .unwrap();
    let runs: Runs = Arc::default();
    let broken = Arc::new(AtomicBool::new(true));
    let harness = Harness::start(&stack, runs.clone(), broken.clone()).await;
    let key = trigger(&stack, "2026-12-02T03:00:00Z").await;
    assert_eq!(ended(&stack, &key).await.status, Status::Paused);
    let step = |s: &str| format!("{key}#{s}");
    let counted = |s: &str| runs.lock().unwrap().get(&step(s)).copied().unwrap_or(0);

    // The invoices were issued by hand this month: the step is skipped, not fixed.
    let operator = harness.operator(&stack).await;
    let refused = operator
        .skip(&key, "ledger", &json!({}), "ops", "x", chrono::Utc::now())
        .await;
    assert!(
        matches!(&refused, Err(schedkit::ops::OpsError::Refused(e)) if e.contains("did not fail")),
        "{refused:?}"
    );
    let skipped = operator
        .skip(
            &key,
            "invoices",
            &json!({"issued": "by hand"}),
            "arn:aws:iam::000000000000:user/alice",
            "issued by hand this month",
            chrono::Utc::now(),
        )
        .await
        .unwrap();
    assert!(
        matches!(&skipped.rerun, Rerun::Started { run: 2, .. }),
        "{skipped:?}"
    );
    let chain = ended(&stack, &key).await;
    assert_eq!(chain.status, Status::Done, "{chain:?}");
    assert_eq!(counted("invoices"), 1, "the skipped step never ran again");
    assert_eq!(counted("report"), 1, "the later stage ran");
    let invoices = stack.record(&step("invoices")).await.unwrap().unwrap();
    assert_eq!(invoices.status, Status::Done);
    let note = invoices.skipped.as_ref().expect("who skipped it");
    assert_eq!(note.by, "arn:aws:iam::000000000000:user/alice");
    assert_eq!(note.reason, "issued by hand this month");
    assert!(
        invoices
            .last_error
            .as_deref()
            .unwrap_or_default()
            .contains("template is missing"),
        "the failure is kept: {invoices:?}"
    );
    // The last stage saw the output the operator gave.
    let report = stack.record(&step("report")).await.unwrap().unwrap();
    let result: Value = serde_json::from_str(report.result.as_deref().unwrap()).unwrap();
    assert_eq!(
        result["saw"]["invoices"],
        json!({"issued": "by hand"}),
        "{result}"
    );
    // `chains show` says so.
    let view = operator.show(&key).await.unwrap().unwrap();
    let shown = view
        .stages
        .iter()
        .flatten()
        .find(|s| s.step == "invoices")
        .unwrap();
    assert_eq!(shown.skipped.as_ref().unwrap().by, note.by);
    harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cancelling_a_running_chain_stops_its_execution_and_step_and_no_later_stage_starts() {
    let sdk = localstack().await;
    let stack = Stack::create(&sdk, &unique("chains-cancel"), StackOptions::default())
        .await
        .unwrap();
    let runs: Runs = Arc::default();
    // The first stage works for 30 s, past its 5 s lease (heartbeats keep it).
    let policy = JobPolicy::default().with_lease(Duration::from_secs(5));
    let counted = runs.clone();
    let registry = Jobs::new()
        .add("close-books", move |ctx: Ctx| {
            let runs = counted.clone();
            async move {
                *runs.lock().unwrap().entry(ctx.key.clone()).or_default() += 1;
                tokio::time::sleep(Duration::from_secs(30)).await;
                Ok::<_, JobError>(json!({"closed": true}))
            }
        })
        .add("issue-invoices", |_: Ctx| async {
            Ok::<_, JobError>(json!(null))
        })
        .add("report", |_: Ctx| async { Ok::<_, JobError>(json!(null)) })
        .bind_policies(|_| policy.clone());
    let harness = Harness::start_with(&stack, registry).await;
    let key = trigger(&stack, "2026-12-02T04:00:00Z").await;
    let first = format!("{key}#close-books");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while stack
        .record(&first)
        .await
        .unwrap()
        .is_none_or(|r| r.status != Status::Running)
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the first step never ran"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // A step, or the chain run, is not cancelled as a run of its own (the review's hole:
    // a step cancelled alone left its chain paused for good).
    let runs_of = schedkit::ops::cancel::Canceller::new(&sdk, &stack.table, &stack.queue_url);
    for alone in [&first, &key] {
        let refused = runs_of.one(alone, "bob", "x", &harness.catalog).await;
        assert!(
            matches!(&refused, Err(schedkit::ops::OpsError::Refused(e)) if e.contains("chains cancel")),
            "{refused:?}"
        );
    }
    let operator = harness.operator(&stack).await;
    let done = operator
        .cancel(
            &key,
            "arn:aws:iam::000000000000:user/bob",
            "wrong month",
            chrono::Utc::now(),
        )
        .await
        .unwrap();
    assert_eq!(done.was, Status::Running);
    assert!(done.stopped.is_some(), "{done:?}");
    assert_eq!(done.steps, ["close-books"]);
    let chain = stack.record(&key).await.unwrap().unwrap();
    assert_eq!(chain.status, Status::Cancelled);
    assert_eq!(chain.cancelled.as_ref().unwrap().reason, "wrong month");
    // The execution is stopped (ABORTED; LocalStack stops it a moment later, so the
    // cancelled step's own answer may end it FAILED first); the running step stops at its
    // next heartbeat (every 1.25 s), its message acknowledged as cancelled.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let executions = harness.executions().await;
        if [ExecutionStatus::Aborted, ExecutionStatus::Failed].contains(&executions[0].status) {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{executions:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while metric_total(&harness.metrics, "Cancelled") < 1.0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the step did not stop"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // No later stage starts.
    tokio::time::sleep(Duration::from_secs(3)).await;
    for later in ["invoices", "ledger", "report"] {
        let r = stack.record(&format!("{key}#{later}")).await.unwrap();
        assert!(r.is_none(), "{later} started: {r:?}");
    }
    let step = stack.record(&first).await.unwrap().unwrap();
    assert_eq!(step.status, Status::Cancelled, "{step:?}");
    assert_eq!(step.result, None, "it never completed");
    // A cancel that stopped half-way (the run CANCELLED, a step still RUNNING, as after
    // a StopExecution that failed) is finished by cancelling again (the review's hole:
    // it was refused, and the step ran on to commit).
    let half_way = ExecutionRecord {
        status: Status::Running,
        cancelled: None,
        lease_expires_at: Some(chrono::Utc::now().timestamp_millis() + 60_000),
        ..step.clone()
    };
    stack.put_record(&half_way).await.unwrap();
    let again = operator
        .cancel(&key, "bob", "again", chrono::Utc::now())
        .await
        .unwrap();
    assert_eq!(again.was, Status::Cancelled, "{again:?}");
    assert_eq!(again.stopped, None, "the execution had stopped");
    assert_eq!(again.steps, ["close-books"]);
    let step = stack.record(&first).await.unwrap().unwrap();
    assert_eq!(step.status, Status::Cancelled, "{step:?}");
    harness.stop().await;
}
