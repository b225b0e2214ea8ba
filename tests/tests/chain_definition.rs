//! The chain definitions `schedkit iac render` generates, created in LocalStack's Step
//! Functions and driven by hand (the test answers each step's task as a worker would):
//! the stages run in order, the parallel one side by side; a step that fails lets its
//! sibling finish, later stages never start, and the chain ends through `paused` with the
//! failed step; a chain whose steps all succeed ends through `done`.

use std::collections::BTreeMap;
use std::time::Duration;

use aws_sdk_sfn::types::ExecutionStatus;
use schedkit::catalog::Catalog;
use schedkit_testkit::chains::generated_state_machine;
use schedkit_testkit::{localstack, unique};
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
payload = { format = "csv" }
"#;

/// What the test saw on the queue: step messages in arrival order, and the outcome message.
#[derive(Debug, Default)]
struct Seen {
    steps: Vec<Value>,
    outcome: Option<Value>,
}

struct Chain {
    sfn: aws_sdk_sfn::Client,
    sqs: aws_sdk_sqs::Client,
    queue_url: String,
    machine: String,
}

impl Chain {
    /// The generated definition of `month-end`, created on LocalStack against a new queue.
    async fn create() -> Chain {
        let sdk = localstack().await;
        let sqs = aws_sdk_sqs::Client::new(&sdk);
        let sfn = aws_sdk_sfn::Client::new(&sdk);
        let queue_url = sqs
            .create_queue()
            .queue_name(unique("chain-steps"))
            .send()
            .await
            .unwrap()
            .queue_url
            .unwrap();
        let catalog = Catalog::parse(CATALOG, "catalog.toml").unwrap();
        let machine = generated_state_machine(&sfn, &catalog, "month-end", &queue_url)
            .await
            .unwrap();
        Chain {
            sfn,
            sqs,
            queue_url,
            machine,
        }
    }

    /// Starts a run and answers each step as `answer` says (Ok: success with that output,
    /// Err: failure with that error), until the outcome message arrives; then the
    /// execution's status.
    async fn run(
        &self,
        answer: impl Fn(&str) -> Result<Value, &'static str>,
    ) -> (Seen, ExecutionStatus) {
        let key = "month-end#2026-12-01T02:00:00Z";
        let execution = self
            .sfn
            .start_execution()
            .state_machine_arn(&self.machine)
            .name(unique("run"))
            .input(
                json!({"chain_key": key, "scheduled_for": "2026-12-01T02:00:00Z", "payload": {}})
                    .to_string(),
            )
            .send()
            .await
            .unwrap()
            .execution_arn;
        let mut seen = Seen::default();
        // Two seconds here; the outcome's own send retries for up to a minute when
        // Step Functions cannot reach SQS, as a busy machine once made it.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(150);
        while seen.outcome.is_none() {
            if tokio::time::Instant::now() >= deadline {
                let history = self.history(&execution).await;
                panic!("no outcome: {seen:?}\nthe execution's last events: {history}");
            }
            let got = self
                .sqs
                .receive_message()
                .queue_url(&self.queue_url)
                .max_number_of_messages(10)
                .wait_time_seconds(1)
                .send()
                .await
                .unwrap();
            for m in got.messages.unwrap_or_default() {
                let body: Value = serde_json::from_str(m.body.as_deref().unwrap()).unwrap();
                self.sqs
                    .delete_message()
                    .queue_url(&self.queue_url)
                    .receipt_handle(m.receipt_handle.unwrap())
                    .send()
                    .await
                    .unwrap();
                if body["chain"]["outcome"].is_string() {
                    seen.outcome = Some(body);
                    continue;
                }
                let step = body["chain"]["step"].as_str().unwrap().to_string();
                let token = body["chain"]["task_token"].as_str().unwrap().to_string();
                match answer(&step) {
                    Ok(output) => self
                        .sfn
                        .send_task_success()
                        .task_token(token)
                        .output(output.to_string())
                        .send()
                        .await
                        .map(|_| ())
                        .unwrap(),
                    Err(error) => self
                        .sfn
                        .send_task_failure()
                        .task_token(token)
                        .error(error)
                        .cause(format!("{step} failed for good"))
                        .send()
                        .await
                        .map(|_| ())
                        .unwrap(),
                }
                seen.steps.push(body);
            }
        }
        let status = loop {
            let d = self
                .sfn
                .describe_execution()
                .execution_arn(&execution)
                .send()
                .await
                .unwrap();
            if d.status != ExecutionStatus::Running {
                break d.status;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "execution still running"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        (seen, status)
    }
}

impl Chain {
    /// The execution's status and its last ten events, to say why an outcome never came.
    async fn history(&self, execution: &str) -> String {
        let status = self
            .sfn
            .describe_execution()
            .execution_arn(execution)
            .send()
            .await
            .map(|d| d.status.as_str().to_string())
            .unwrap_or_else(|e| format!("{e:?}"));
        let events = self
            .sfn
            .get_execution_history()
            .execution_arn(execution)
            .reverse_order(true)
            .max_results(10)
            .send()
            .await
            .map(|h| format!("{:?}", h.events))
            .unwrap_or_else(|e| format!("{e:?}"));
        format!("{status}: {events}")
    }
}

fn step_names(seen: &Seen) -> Vec<&str> {
    seen.steps
        .iter()
        .map(|s| s["chain"]["step"].as_str().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generated_chain_runs_its_stages_in_order_and_ends_done() {
    let chain = Chain::create().await;
    let (seen, status) = chain.run(|step| Ok(json!({ "did": step }))).await;
    let order = step_names(&seen);
    assert_eq!(order.len(), 4, "{seen:?}");
    assert_eq!(order[0], "close-books");
    let mut middle = order[1..3].to_vec();
    middle.sort();
    assert_eq!(middle, ["invoices", "ledger"]);
    assert_eq!(order[3], "report");
    // Each step's envelope: its job, its key under the chain key, its payload.
    let by_step: BTreeMap<&str, &Value> = seen
        .steps
        .iter()
        .map(|s| (s["chain"]["step"].as_str().unwrap(), s))
        .collect();
    assert_eq!(by_step["invoices"]["job"], "issue-invoices");
    assert_eq!(
        by_step["ledger"]["key"],
        "month-end#2026-12-01T02:00:00Z#ledger"
    );
    assert_eq!(by_step["ledger"]["payload"], json!({ "format": "csv" }));
    assert_eq!(by_step["report"]["scheduled_for"], "2026-12-01T02:00:00Z");
    let outcome = seen.outcome.unwrap();
    assert_eq!(outcome["job"], "month-end");
    // The outcome names the execution that sent it (the run's record ends only by its
    // current execution's outcome).
    let execution = outcome["chain"]["execution"].as_str().unwrap_or_default();
    assert!(execution.starts_with("run-"), "{outcome}");
    assert_eq!(
        outcome["chain"],
        json!({ "name": "month-end", "key": "month-end#2026-12-01T02:00:00Z", "outcome": "done", "execution": execution })
    );
    assert_eq!(status, ExecutionStatus::Succeeded);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_branch_lets_its_sibling_finish_and_pauses_the_chain_before_the_next_stage() {
    let chain = Chain::create().await;
    let (seen, status) = chain
        .run(|step| match step {
            "invoices" => Err("StepFailed"),
            s => Ok(json!({ "did": s })),
        })
        .await;
    let mut order = step_names(&seen);
    order.sort();
    assert_eq!(
        order,
        ["close-books", "invoices", "ledger"],
        "report must not start"
    );
    let outcome = seen.outcome.unwrap();
    assert_eq!(outcome["chain"]["outcome"], "paused");
    assert_eq!(
        outcome["chain"]["stage"],
        json!([
            { "step": "invoices", "failed": true, "failure": { "Error": "StepFailed", "Cause": "invoices failed for good" } },
            { "step": "ledger" },
        ])
    );
    // A paused chain is not a Step Functions failure.
    assert_eq!(status, ExecutionStatus::Succeeded);
}

/// The steps of the first stage never answer and their heartbeat runs out (a timeout
/// carries no `Cause`): the chain still pauses, naming the silent step and its error. (The
/// failed branch read `$.failure.Cause`, which a timeout does not have: the execution
/// FAILED instead of pausing, and the chain's record stayed RUNNING.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_silent_past_its_heartbeat_pauses_the_chain_though_its_failure_has_no_cause() {
    let sdk = localstack().await;
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    let sfn = aws_sdk_sfn::Client::new(&sdk);
    let queue_url = sqs
        .create_queue()
        .queue_name(unique("silent-steps"))
        .send()
        .await
        .unwrap()
        .queue_url
        .unwrap();
    let catalog = Catalog::parse(CATALOG, "catalog.toml").unwrap();
    let chain = catalog.chain("month-end").unwrap();
    let mut definition: Value = serde_json::from_str(
        &schedkit::iac::render_definition(&catalog, chain)
            .replace("${Partition}", "aws")
            .replace("${JobsQueueUrl}", &queue_url),
    )
    .unwrap();
    // Every step times out after a second, and Step Functions does not send it again.
    for stage in definition["States"].as_object_mut().unwrap().values_mut() {
        let branches = stage.get_mut("Branches").and_then(Value::as_array_mut);
        for branch in branches.into_iter().flatten() {
            for state in branch["States"].as_object_mut().unwrap().values_mut() {
                if state["Type"] == "Task" {
                    state["HeartbeatSeconds"] = json!(1);
                    state.as_object_mut().unwrap().remove("Retry");
                }
            }
        }
    }
    let machine = sfn
        .create_state_machine()
        .name(unique("silent"))
        .definition(definition.to_string())
        .role_arn("arn:aws:iam::000000000000:role/chain")
        .send()
        .await
        .unwrap()
        .state_machine_arn;
    let execution = sfn
        .start_execution()
        .state_machine_arn(&machine)
        .name(unique("run"))
        .input(
            json!({"chain_key": "k", "scheduled_for": "2026-12-01T02:00:00Z", "payload": {}})
                .to_string(),
        )
        .send()
        .await
        .unwrap()
        .execution_arn;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let status = loop {
        let d = sfn
            .describe_execution()
            .execution_arn(&execution)
            .send()
            .await
            .unwrap();
        if d.status != ExecutionStatus::Running {
            break d.status;
        }
        assert!(tokio::time::Instant::now() < deadline, "still running");
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    assert_eq!(
        status,
        ExecutionStatus::Succeeded,
        "the chain failed instead of pausing"
    );
    let mut outcome = None;
    for m in sqs
        .receive_message()
        .queue_url(&queue_url)
        .max_number_of_messages(10)
        .wait_time_seconds(1)
        .send()
        .await
        .unwrap()
        .messages
        .unwrap_or_default()
    {
        let body: Value = serde_json::from_str(m.body.as_deref().unwrap()).unwrap();
        if body["chain"]["outcome"].is_string() {
            outcome = Some(body);
        }
    }
    let outcome = outcome.expect("the paused message");
    assert_eq!(outcome["chain"]["outcome"], "paused");
    let failed = &outcome["chain"]["stage"][0];
    assert_eq!(failed["step"], "close-books");
    assert_eq!(failed["failed"], true);
    assert!(failed.to_string().contains("States.Timeout"), "{failed}");
}
