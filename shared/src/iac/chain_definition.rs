//! A chain's Step Functions definition, generated from the catalog (`schedkit iac render`
//! writes `infra/chains/<chain>.asl.json`; `--check` fails when one disagrees).
//!
//! Every stage is a `Parallel` state with one branch per step (a one-step stage has one
//! branch), so a failed step never throws away its siblings' work: each branch catches its
//! step's failure and ends with a small result (`{"step": S}`, or `{"step": S, "failed":
//! true, "failure": {"Error", "Cause"}}`: the caught error whole, as a timeout has no
//! `Cause` and a path to it would fail the execution instead of pausing the chain). A `Choice` after the stage goes on to the next stage only when
//! no branch failed; otherwise the chain ends through `paused`, which tells the worker (a
//! message on the jobs queue) so it records the chain PAUSED with the failed steps. After
//! the last stage `done` does the same for DONE. Both end the execution SUCCEEDED: a paused
//! chain is not a Step Functions failure, and the template's alarm on failed executions
//! keeps meaning "something schedkit did not expect".
//!
//! A step is an SQS callback task (`sqs:sendMessage.waitForTaskToken`) on the jobs queue:
//! an envelope for the step's job, keyed `<chain key>#<step>`, carrying the task token,
//! the chain key and the step. The worker runs it like any job (its retries with backoff
//! through the queue, its lease, its DLQ) and answers the task. Step Functions retries a
//! step only when its worker went silent (the heartbeat timeout, which LocalStack reports
//! as `States.Timeout`), with jitter.
//!
//! The definition's `${JobsQueueUrl}` and `${Partition}` are the template's
//! `DefinitionSubstitutions`.

use serde_json::{Map, Value, json};

use crate::catalog::{Catalog, Chain, Stage, Step};

/// Step Functions sends a lost step again this many times before the chain pauses on it.
const LOST_STEP_RETRIES: u32 = 2;

/// Slack on top of the longest silence a healthy step keeps, for clocks and the queue.
const HEARTBEAT_SLACK_SECONDS: u64 = 30;

/// The state names, one place for each.
fn stage_state(i: usize) -> String {
    format!("stage-{}", i + 1)
}

fn check_state(i: usize) -> String {
    format!("stage-{}-check", i + 1)
}

const PAUSED: &str = "paused";
const DONE: &str = "done";

/// How long a step's task may go without a heartbeat, and how long it may take in all, in
/// seconds. A healthy step is silent longest while its message waits for a retry (the
/// job's longest retry delay) or for a takeover after its worker died (a lease, and one
/// more to claim and beat) or between two looks at its job's limits: the heartbeat timeout
/// covers them all, so only a step no worker holds any more is sent again. The total covers
/// every attempt at its timeout, every wait between them, and its wait for its limits.
pub fn step_timeouts(catalog: &Catalog, step: &Step) -> (u64, u64) {
    let policy = catalog
        .job(&step.job)
        .map(|j| j.policy.clone())
        .unwrap_or_default();
    let lease = policy.lease.as_secs();
    let max_delay = policy.retry.max_delay.as_secs();
    let (look, wait) = limit_waits(catalog, &policy.flow);
    let heartbeat = max_delay.max(lease).max(look) + 2 * lease + HEARTBEAT_SLACK_SECONDS;
    let attempt = policy.timeout.map_or(lease, |t| t.as_secs()) + lease;
    let attempts = u64::from(policy.retry.max_attempts);
    let total = attempts * attempt + attempts.saturating_sub(1) * max_delay + heartbeat + wait;
    (heartbeat, total)
}

/// For a step whose job has limits: the longest it goes between two looks while it waits
/// (each look beats the step's task: two spacings of its slowest rate, or the longest a
/// run stays parked in a full gate's line, at most SQS's 15-minute delay), and the longest it may wait in all (its `max_wait_seconds`, or
/// as long as the queue keeps its message), in seconds.
fn limit_waits(catalog: &Catalog, flow: &crate::flow::FlowControl) -> (u64, u64) {
    if !flow.any() {
        return (0, 0);
    }
    let slowest = flow
        .limits
        .iter()
        .filter_map(|l| l.rate)
        .map(|r| r.spacing().as_secs() * 2)
        .max()
        .unwrap_or(0);
    // A run waiting in a full gate's line is hidden up to `PARKED_FOR` between two looks.
    let counted = flow.limits.iter().any(|l| l.concurrency.is_some());
    let parked = match counted {
        true => crate::store::PARKED_FOR.as_secs(),
        false => 0,
    };
    let look = slowest.max(parked).clamp(3, 900);
    let kept = u64::from(catalog.settings.queue_retention_days) * 86_400;
    let wait = flow.max_wait.map_or(kept, |w| w.as_secs());
    (look, wait)
}

/// The envelope a step's task puts on the jobs queue (Step Functions fills in the `.$`
/// fields at run time).
fn step_message(chain: &Chain, step: &Step) -> Value {
    let mut message = json!({
        "job": step.job,
        "scheduled_for.$": "$$.Execution.Input.scheduled_for",
        "key.$": format!("States.Format('{{}}#{}', $$.Execution.Input.chain_key)", step.name),
        "payload": Value::Object(step.payload.clone()),
        "chain": {
            "name": chain.name,
            "key.$": "$$.Execution.Input.chain_key",
            "step": step.name,
            "input.$": "$$.Execution.Input.payload",
            "task_token.$": "$$.Task.Token",
        },
    });
    // The chain's priority, which its steps inherit over their jobs'.
    if let Some(p) = chain.spec.priority.filter(|p| *p != 0) {
        message["priority"] = json!(p);
    }
    message
}

/// One branch of a stage: the step's callback task, then its small result.
fn branch(catalog: &Catalog, chain: &Chain, step: &Step) -> Value {
    let (heartbeat, timeout) = step_timeouts(catalog, step);
    let ok = format!("{}-ok", step.name);
    let failed = format!("{}-failed", step.name);
    let mut states = Map::new();
    states.insert(
        step.name.clone(),
        json!({
            "Type": "Task",
            "Resource": "arn:${Partition}:states:::sqs:sendMessage.waitForTaskToken",
            "Parameters": {
                "QueueUrl": queue_of(catalog, chain, step),
                "MessageBody": step_message(chain, step),
            },
            "HeartbeatSeconds": heartbeat,
            "TimeoutSeconds": timeout,
            // Only a silent worker makes Step Functions send the step again: the worker
            // owns the retries of a step that fails.
            "Retry": [{
                "ErrorEquals": ["States.HeartbeatTimeout", "States.Timeout"],
                "IntervalSeconds": 2,
                "MaxAttempts": LOST_STEP_RETRIES,
                "BackoffRate": 2,
                "JitterStrategy": "FULL",
            }],
            "Catch": [{ "ErrorEquals": ["States.ALL"], "ResultPath": "$.failure", "Next": failed }],
            "ResultPath": null,
            "Next": ok,
        }),
    );
    states.insert(
        ok,
        json!({ "Type": "Pass", "Result": { "step": step.name }, "End": true }),
    );
    states.insert(
        failed,
        json!({
            "Type": "Pass",
            "Parameters": {
                "step": step.name,
                "failed": true,
                "failure.$": "$.failure",
            },
            "End": true,
        }),
    );
    json!({ "StartAt": step.name, "States": states })
}

/// The queue a step's message goes to: its job's (the host jobs queue for a host job), or
/// the urgent queue beside it (its URL with `-urgent`, [`crate::queue::urgent`]) when the
/// chain's priority, else the job's, is above 0.
fn queue_of(catalog: &Catalog, chain: &Chain, step: &Step) -> String {
    let job = catalog.jobs.get(&step.job);
    let queue = match job.map(|j| j.spec.runs_on) {
        Some(crate::catalog::RunsOn::Host) => "${HostJobsQueueUrl}",
        _ => "${JobsQueueUrl}",
    };
    let priority = chain
        .spec
        .priority
        .or(job.and_then(|j| j.spec.priority))
        .unwrap_or(0);
    match crate::queue::urgent::is_urgent(priority) {
        true => crate::queue::urgent::urgent_queue_of(queue),
        false => queue.to_string(),
    }
}

/// The choice "some branch of the stage failed: pause", on the stage's results at
/// `$.stage`.
fn pause_if_any_failed(stage: &Stage) -> Value {
    let failed =
        |k: usize| json!({ "Variable": format!("$.stage[{k}].failed"), "IsPresent": true });
    let mut rule = match stage.steps.len() {
        1 => failed(0),
        n => json!({ "Or": (0..n).map(failed).collect::<Vec<_>>() }),
    };
    rule["Next"] = json!(PAUSED);
    rule
}

/// The message `paused` or `done` sends the worker: which chain run, and how it ended.
fn outcome_message(chain: &Chain, outcome: &str) -> Value {
    let mut event = json!({
        "name": chain.name,
        "key.$": "$$.Execution.Input.chain_key",
        "outcome": outcome,
        "execution.$": "$$.Execution.Name",
    });
    if outcome == PAUSED {
        event["stage.$"] = json!("$.stage");
    }
    json!({
        "Type": "Task",
        "Resource": "arn:${Partition}:states:::sqs:sendMessage",
        "Parameters": {
            "QueueUrl": "${JobsQueueUrl}",
            "MessageBody": {
                "job": chain.name,
                "scheduled_for.$": "$$.Execution.Input.scheduled_for",
                "chain": event,
            },
        },
        "Retry": [{
            "ErrorEquals": ["States.ALL"],
            "IntervalSeconds": 2,
            "MaxAttempts": 5,
            "BackoffRate": 2,
            "JitterStrategy": "FULL",
        }],
        "End": true,
    })
}

/// The chain's definition, as a JSON value.
pub fn definition(catalog: &Catalog, chain: &Chain) -> Value {
    let mut states = Map::new();
    let last = chain.stages.len() - 1;
    for (i, stage) in chain.stages.iter().enumerate() {
        let branches: Vec<Value> = stage
            .steps
            .iter()
            .map(|s| branch(catalog, chain, s))
            .collect();
        states.insert(
            stage_state(i),
            json!({
                "Type": "Parallel",
                "Branches": branches,
                "ResultPath": "$.stage",
                "Next": check_state(i),
            }),
        );
        let next = if i == last {
            DONE.to_string()
        } else {
            stage_state(i + 1)
        };
        states.insert(
            check_state(i),
            json!({
                "Type": "Choice",
                "Choices": [pause_if_any_failed(stage)],
                "Default": next,
            }),
        );
    }
    states.insert(PAUSED.into(), outcome_message(chain, PAUSED));
    states.insert(DONE.into(), outcome_message(chain, DONE));
    let stages: Vec<String> = chain
        .stages
        .iter()
        .map(|s| {
            let names: Vec<&str> = s.steps.iter().map(|s| s.name.as_str()).collect();
            names.join(" + ")
        })
        .collect();
    json!({
        "Comment": format!(
            "Chain {} ({}), generated from {} by `schedkit iac render`: do not edit by hand.",
            chain.name,
            stages.join(" → "),
            std::path::Path::new(&catalog.file)
                .file_name()
                .map_or(catalog.file.clone(), |n| n.to_string_lossy().into_owned())
        ),
        "StartAt": stage_state(0),
        "States": states,
    })
}

/// The chain's definition as written to `chains/<chain>.asl.json`.
pub fn render_definition(catalog: &Catalog, chain: &Chain) -> String {
    let mut text =
        serde_json::to_string_pretty(&definition(catalog, chain)).expect("a definition serialises");
    text.push('\n');
    text
}

/// Every chain's definition file: (path relative to the template's folder, text).
pub fn chain_files(catalog: &Catalog) -> Vec<(String, String)> {
    catalog
        .chains
        .values()
        .map(|c| (definition_file(&c.name), render_definition(catalog, c)))
        .collect()
}

/// The file a chain's definition is written to, relative to the template's folder.
pub fn definition_file(chain: &str) -> String {
    format!("chains/{chain}.asl.json")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three stages, the middle one parallel; `invoices` with its own retry policy.
    pub(crate) const CATALOG: &str = r#"
[jobs.close-books]
owner = "finance"
lease_seconds = 30

[jobs.issue-invoices]
owner = "billing"
lease_seconds = 20
timeout_seconds = 40
[jobs.issue-invoices.retry]
max_attempts = 3
max_delay_seconds = 10
first_delay_seconds = 1
base_delay_seconds = 2

[jobs.report]
owner = "data"

[chains.month-end]
owner = "finance"
stages = ["close-books", ["invoices", "ledger"], "report"]

[chains.month-end.steps.invoices]
job = "issue-invoices"
payload = { batch = 50 }

[chains.month-end.steps.ledger]
job = "close-books"
"#;

    fn month_end() -> (Catalog, Value) {
        let catalog = Catalog::parse(CATALOG, "infra/catalog.toml").unwrap();
        let chain = catalog.chain("month-end").unwrap();
        let definition = definition(&catalog, chain);
        (catalog, definition)
    }

    #[test]
    fn each_stage_is_a_parallel_state_of_callback_steps_then_a_choice_that_pauses_on_a_failed_one()
    {
        let (_, d) = month_end();
        let states = &d["States"];
        assert_eq!(d["StartAt"], "stage-1");
        let names: Vec<&String> = states.as_object().unwrap().keys().collect();
        assert_eq!(
            names,
            [
                "done",
                "paused",
                "stage-1",
                "stage-1-check",
                "stage-2",
                "stage-2-check",
                "stage-3",
                "stage-3-check"
            ]
        );
        let branches = states["stage-2"]["Branches"].as_array().unwrap();
        let starts: Vec<&Value> = branches.iter().map(|b| &b["StartAt"]).collect();
        assert_eq!(starts, ["invoices", "ledger"]);
        assert_eq!(states["stage-2"]["Next"], "stage-2-check");
        assert_eq!(
            states["stage-2-check"],
            json!({
                "Type": "Choice",
                "Choices": [{
                    "Or": [
                        { "Variable": "$.stage[0].failed", "IsPresent": true },
                        { "Variable": "$.stage[1].failed", "IsPresent": true },
                    ],
                    "Next": "paused",
                }],
                "Default": "stage-3",
            })
        );
        assert_eq!(
            states["stage-1-check"]["Choices"][0],
            json!({ "Variable": "$.stage[0].failed", "IsPresent": true, "Next": "paused" })
        );
        assert_eq!(states["stage-3-check"]["Default"], "done");
        assert_eq!(
            states["paused"]["Parameters"]["MessageBody"]["chain"]["outcome"],
            "paused"
        );
        assert_eq!(
            states["paused"]["Parameters"]["MessageBody"]["chain"]["stage.$"],
            "$.stage"
        );
        assert_eq!(
            states["done"]["Parameters"]["MessageBody"]["chain"]["outcome"],
            "done"
        );
        assert_eq!(states["done"]["End"], true);
    }

    #[test]
    fn a_host_jobs_step_goes_to_the_host_jobs_queue_and_the_chains_outcome_to_the_jobs_queue() {
        let text = CATALOG.replace(
            "[jobs.issue-invoices]\n",
            "[jobs.issue-invoices]\nruns_on = \"host\"\n",
        );
        assert_ne!(text, CATALOG, "the catalog has an issue-invoices job");
        let catalog = Catalog::parse(&text, "infra/catalog.toml").unwrap();
        let d = definition(&catalog, catalog.chain("month-end").unwrap());
        let stage = &d["States"]["stage-2"]["Branches"];
        let queue_of = |step: &str| {
            stage
                .as_array()
                .unwrap()
                .iter()
                .find_map(|b| b["States"].get(step))
                .map(|t| t["Parameters"]["QueueUrl"].clone())
                .unwrap()
        };
        assert_eq!(queue_of("invoices"), "${HostJobsQueueUrl}");
        assert_eq!(queue_of("ledger"), "${JobsQueueUrl}");
        assert_eq!(
            d["States"]["done"]["Parameters"]["QueueUrl"],
            "${JobsQueueUrl}"
        );
    }

    #[test]
    fn a_chains_priority_is_its_steps_and_puts_them_on_the_urgent_queues() {
        let text = CATALOG
            .replace(
                "[jobs.issue-invoices]\n",
                "[jobs.issue-invoices]\nruns_on = \"host\"\n",
            )
            .replace("[chains.month-end]\n", "[chains.month-end]\npriority = 5\n");
        assert!(
            text.contains("priority = 5"),
            "the catalog has a month-end chain"
        );
        let catalog = Catalog::parse(&text, "infra/catalog.toml").unwrap();
        let d = definition(&catalog, catalog.chain("month-end").unwrap());
        let stage = &d["States"]["stage-2"]["Branches"];
        let task = |step: &str| {
            stage
                .as_array()
                .unwrap()
                .iter()
                .find_map(|b| b["States"].get(step))
                .map(|t| t["Parameters"].clone())
                .unwrap()
        };
        assert_eq!(task("invoices")["QueueUrl"], "${HostJobsQueueUrl}-urgent");
        assert_eq!(task("ledger")["QueueUrl"], "${JobsQueueUrl}-urgent");
        assert_eq!(task("ledger")["MessageBody"]["priority"], 5);
        // The chain's outcome is the worker's, not a run: it keeps the jobs queue.
        assert_eq!(
            d["States"]["done"]["Parameters"]["QueueUrl"],
            "${JobsQueueUrl}"
        );
        let bad = text.replace("priority = 5", "priority = 11");
        let error = Catalog::parse(&bad, "infra/catalog.toml")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("month-end")
                && error.contains("priority")
                && error.contains("11 is outside -10..=10"),
            "{error}"
        );
    }

    #[test]
    fn a_step_is_an_sqs_callback_task_carrying_its_token_key_and_step() {
        let (_, d) = month_end();
        let branch = &d["States"]["stage-2"]["Branches"][0]["States"];
        let task = &branch["invoices"];
        assert_eq!(
            task["Resource"],
            "arn:${Partition}:states:::sqs:sendMessage.waitForTaskToken"
        );
        assert_eq!(task["Parameters"]["QueueUrl"], "${JobsQueueUrl}");
        assert_eq!(
            task["Parameters"]["MessageBody"],
            json!({
                "job": "issue-invoices",
                "scheduled_for.$": "$$.Execution.Input.scheduled_for",
                "key.$": "States.Format('{}#invoices', $$.Execution.Input.chain_key)",
                "payload": { "batch": 50 },
                "chain": {
                    "name": "month-end",
                    "key.$": "$$.Execution.Input.chain_key",
                    "step": "invoices",
                    "input.$": "$$.Execution.Input.payload",
                    "task_token.$": "$$.Task.Token",
                },
            })
        );
        // Step Functions sends a step again only when its worker went silent.
        assert_eq!(
            task["Retry"][0]["ErrorEquals"],
            json!(["States.HeartbeatTimeout", "States.Timeout"])
        );
        assert_eq!(task["Retry"][0]["JitterStrategy"], "FULL");
        assert_eq!(task["Catch"][0]["Next"], "invoices-failed");
        assert_eq!(task["Next"], "invoices-ok");
        assert_eq!(
            branch["invoices-ok"]["Result"],
            json!({ "step": "invoices" })
        );
        assert_eq!(branch["invoices-failed"]["Parameters"]["failed"], true);
        // The caught error whole: a heartbeat timeout has no `Cause` to point at.
        assert_eq!(
            branch["invoices-failed"]["Parameters"]["failure.$"],
            "$.failure"
        );
    }

    #[test]
    fn the_heartbeat_timeout_outlasts_a_retry_wait_and_a_takeover_and_the_timeout_every_attempt() {
        let (catalog, d) = month_end();
        let chain = catalog.chain("month-end").unwrap();
        // issue-invoices: lease 20 s, longest retry delay 10 s, 3 attempts of at most 40 s.
        let invoices = chain.step("invoices").unwrap();
        assert_eq!(
            step_timeouts(&catalog, invoices),
            (20 + 2 * 20 + 30, 3 * (40 + 20) + 2 * 10 + 90)
        );
        let task = &d["States"]["stage-2"]["Branches"][0]["States"]["invoices"];
        assert_eq!(task["HeartbeatSeconds"], 90);
        assert_eq!(task["TimeoutSeconds"], 290);
        // close-books: lease 30 s, the default retry (5 attempts, 15 min longest delay) and
        // the function's 60 s timeout.
        let close = chain.step("close-books").unwrap();
        assert_eq!(
            step_timeouts(&catalog, close),
            (900 + 60 + 30, 5 * 90 + 4 * 900 + 990)
        );
    }

    #[test]
    fn a_step_waiting_for_its_limits_beats_between_looks_and_its_wait_is_in_its_timeout() {
        let text = r#"
[limits.slow-partner]
rate = "2/hour"
[jobs.pull]
owner = "t"
lease_seconds = 20
retry = { max_attempts = 1, first_delay_seconds = 5, base_delay_seconds = 5, max_delay_seconds = 10 }
limits = ["slow-partner"]
max_wait_seconds = 7200
[jobs.plain]
owner = "t"
lease_seconds = 20
retry = { max_attempts = 1, first_delay_seconds = 5, base_delay_seconds = 5, max_delay_seconds = 10 }
[chains.c]
owner = "t"
stages = ["pull", "plain"]
[chains.c.steps.pull]
job = "pull"
[chains.c.steps.plain]
job = "plain"
"#;
        let catalog = Catalog::parse(text, "c.toml").unwrap();
        let chain = catalog.chain("c").unwrap();
        let (pull, plain) = (chain.step("pull").unwrap(), chain.step("plain").unwrap());
        let (beat, total) = step_timeouts(&catalog, pull);
        let (plain_beat, plain_total) = step_timeouts(&catalog, plain);
        // A look every two spacings of 30 minutes at most, cut to SQS's 15-minute delay.
        assert_eq!(beat - plain_beat, 900 - 20);
        assert_eq!(total - plain_total, 7200 + beat - plain_beat);
    }

    #[test]
    fn the_rendered_file_is_stable_and_names_its_source_by_file_name() {
        let (catalog, _) = month_end();
        let chain = catalog.chain("month-end").unwrap();
        let text = render_definition(&catalog, chain);
        assert_eq!(text, render_definition(&catalog, chain));
        assert!(text.ends_with("}\n"));
        assert!(text.contains(
            "Chain month-end (close-books → invoices + ledger → report), generated from catalog.toml"
        ));
        assert_eq!(definition_file("month-end"), "chains/month-end.asl.json");
    }
}
