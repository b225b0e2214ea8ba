//! The bad-input catalogue: one named test per shape of input a worker can be handed. Each
//! gets a clear rejection (poison, with a reason that names the problem) or a capped,
//! stored outcome; nothing is lost and nothing loops (every message is decided on its first
//! delivery). Shapes covered elsewhere: not JSON, wrong types, missing fields, unknown jobs
//! and control characters (`rejections::poison_messages_...`), an empty derived key, a
//! refused or undecodable record (`rejections::*`). Invalid UTF-8 cannot reach a worker:
//! SQS refuses it at send, and Lambda's event and the poller both carry bodies as text.

use std::time::Duration;

use schedkit::batch::attr;
use schedkit::{Envelope, JobContext, JobError, JobPolicy, Metrics, Processor, Registry, Status};
use schedkit_testkit::Stack;
use serde_json::json;

/// SQS's limit on a message, body and attributes.
const SQS_LIMIT: usize = 256 * 1024;

/// `export` does what its payload's `do` says: `fail-big` (a permanent error of 2 MB),
/// `return-big` (a result of 2 MB), anything else succeeds. Its key template is
/// `{tenant}`.
fn worker(stack: &Stack) -> Processor {
    let policy = JobPolicy {
        key_template: Some("export:{tenant}".parse().unwrap()),
        ..JobPolicy::default()
    };
    stack.processor(
        Registry::new().register("export", policy, |ctx: JobContext| async move {
            match ctx.payload.get("do").and_then(|v| v.as_str()) {
                Some("fail-big") => Err(JobError::permanent("x".repeat(2 << 20))),
                Some("return-big") => Ok(json!({ "rows": "r".repeat(2 << 20) })),
                _ => Ok(json!({"ok": true})),
            }
        }),
        "w",
        Metrics::capture().0,
    )
}

fn export(payload: serde_json::Value) -> String {
    let mut e = Envelope::new("export", "2026-11-01T04:00:00Z".parse().unwrap());
    e.payload = payload.as_object().cloned();
    e.to_json()
}

/// Sends `body`, runs the queue dry, and returns (outcome labels, the dead letters).
async fn decide(
    name: &str,
    body: &str,
) -> (Stack, Vec<&'static str>, Vec<aws_sdk_sqs::types::Message>) {
    let stack = Stack::with_quick_redelivery(name).await;
    stack.send(body).await.unwrap();
    let stats = stack.run_until_drained(&[worker(&stack)]).await;
    assert_eq!(
        stats.received, 1,
        "decided on its first delivery: {:?}",
        stats.outcomes
    );
    let labels = stats.reports.iter().map(|r| r.outcome.label()).collect();
    let letters = stack.drain_dlq(Duration::from_secs(3)).await.unwrap();
    (stack, labels, letters)
}

fn text(letter: &aws_sdk_sqs::types::Message, name: &str) -> String {
    letter.message_attributes.as_ref().unwrap()[name]
        .string_value
        .clone()
        .unwrap()
}

/// The message was rejected as poison at once, with an error starting `error`, and its
/// body is in the DLQ whole.
fn assert_poison(
    labels: &[&str],
    letters: &[aws_sdk_sqs::types::Message],
    body: &str,
    error: &str,
) {
    assert_eq!(labels, ["dead-lettered"]);
    assert_eq!(letters.len(), 1);
    assert_eq!(text(&letters[0], attr::REASON), "poison");
    let got = text(&letters[0], attr::ERROR);
    assert!(got.starts_with(error), "{got}");
    assert_eq!(
        letters[0].body.as_deref(),
        Some(body),
        "the body whole, for a redrive"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deep_nesting_is_poison_naming_the_recursion_limit() {
    let nested = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    let body = format!(
        r#"{{"job":"export","scheduled_for":"2026-11-01T04:00:00Z","payload":{{"a":{nested}}}}}"#
    );
    let (_stack, labels, letters) = decide("deep", &body).await;
    assert_poison(
        &labels,
        &letters,
        &body,
        "body is not JSON: recursion limit exceeded",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_time_is_poison_naming_the_field() {
    let body =
        r#"{"job":"export","scheduled_for":"2026-02-30T04:00:00Z","payload":{"tenant":"a"}}"#;
    let (_stack, labels, letters) = decide("bad-time", body).await;
    assert_poison(&labels, &letters, body, "field `scheduled_for`");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_explicit_key_over_the_limit_is_poison_with_its_length() {
    let body = format!(
        r#"{{"job":"export","scheduled_for":"2026-11-01T04:00:00Z","key":"{}"}}"#,
        "k".repeat(2000)
    );
    let (_stack, labels, letters) = decide("long-key", &body).await;
    assert_poison(&labels, &letters, &body, "field `key` is 2000 bytes long");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_derived_key_over_the_limit_is_poison_with_its_length() {
    let body = export(json!({"tenant": "t".repeat(3000)}));
    let (_stack, labels, letters) = decide("long-derived", &body).await;
    assert_poison(&labels, &letters, &body, "derived key is 3007 bytes long");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payload_near_the_sqs_limit_runs_and_its_stored_input_is_capped() {
    let body = export(json!({"tenant": "acme", "blob": "p".repeat(SQS_LIMIT - 1024)}));
    let (stack, labels, letters) = decide("near-limit", &body).await;
    assert_eq!(labels, ["succeeded"]);
    assert!(letters.is_empty());
    let record = stack.record("export:acme").await.unwrap().unwrap();
    assert_eq!(record.status, Status::Done);
    let input = record.input.unwrap();
    assert!(
        input.len() < 5000 && input.contains("[truncated,"),
        "{}",
        input.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payload_near_the_sqs_limit_that_fails_for_good_reaches_the_dlq_whole_with_its_reason() {
    let body =
        export(json!({"tenant": "acme", "do": "fail-big", "blob": "p".repeat(SQS_LIMIT - 600)}));
    let (stack, labels, letters) = decide("near-limit-fails", &body).await;
    assert_eq!(labels, ["dead-lettered"]);
    assert_eq!(letters.len(), 1);
    assert_eq!(
        letters[0].body.as_deref(),
        Some(body.as_str()),
        "the body whole"
    );
    assert_eq!(text(&letters[0], attr::REASON), "permanent-error");
    let record = stack.record("export:acme").await.unwrap().unwrap();
    assert_eq!(record.status, Status::Failed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_error_of_megabytes_is_stored_and_dead_lettered_capped() {
    let body = export(json!({"tenant": "acme", "do": "fail-big"}));
    let (stack, labels, letters) = decide("big-error", &body).await;
    assert_eq!(labels, ["dead-lettered"]);
    let error = text(&letters[0], attr::ERROR);
    assert!(
        error.len() <= 1024 + 3 && error.ends_with('…'),
        "{}",
        error.len()
    );
    let record = stack.record("export:acme").await.unwrap().unwrap();
    assert_eq!(record.status, Status::Failed);
    let stored = record.last_error.unwrap();
    assert!(
        stored.len() < 5000 && stored.ends_with("[truncated, 2097152 bytes in all]"),
        "{}",
        stored.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_result_too_large_to_store_is_kept_capped_and_the_run_is_done() {
    let body = export(json!({"tenant": "acme", "do": "return-big"}));
    let (stack, labels, letters) = decide("big-result", &body).await;
    assert_eq!(labels, ["succeeded"]);
    assert!(letters.is_empty());
    let record = stack.record("export:acme").await.unwrap().unwrap();
    assert_eq!(record.status, Status::Done);
    let result = record.result.unwrap();
    assert!(
        result.len() < 5000 && result.contains("[truncated,"),
        "{}",
        result.len()
    );
}

// --- Forged and colliding shapes: a message that names a record it does not own. ---

/// A catalog of two chains over three jobs: what the chain-aware worker below knows.
const CHAINS: &str = r#"
[jobs.close-books]
owner = "finance"
[jobs.report]
owner = "data"
[chains.month-end]
owner = "finance"
stages = ["close-books", "report"]
[chains.quarter-end]
owner = "finance"
stages = ["report"]
"#;

/// A worker that runs `export` (as above), `close-books` and `report` (both succeed), and
/// takes the chains' messages; no state machine is known (nothing here starts one).
fn chain_worker(stack: &Stack, sdk: &aws_config::SdkConfig) -> Processor {
    let ok = |_ctx: JobContext| async move { Ok(json!({"ok": true})) };
    let export = JobPolicy {
        key_template: Some("{tenant}".parse().unwrap()),
        ..JobPolicy::default()
    };
    let registry = Registry::new()
        .register("export", export, ok)
        .register("close-books", JobPolicy::default(), ok)
        .register("report", JobPolicy::default(), ok);
    stack.chain_processor(sdk, registry, CHAINS, Metrics::capture().0)
}

/// Sends `bodies` on a lane of the shared stage to the chain-aware worker, runs the queue
/// dry (each decided on its first delivery), and returns the outcome labels and the dead
/// letters.
async fn decide_forged(
    stack: &Stack,
    bodies: &[String],
) -> (Vec<&'static str>, Vec<aws_sdk_sqs::types::Message>) {
    let sdk = schedkit_testkit::localstack().await;
    for body in bodies {
        stack.send(body).await.unwrap();
    }
    let stats = stack.run_until_drained(&[chain_worker(stack, &sdk)]).await;
    assert_eq!(
        stats.received,
        bodies.len() as u64,
        "decided on their first delivery: {:?}",
        stats.outcomes
    );
    let labels = stats.reports.iter().map(|r| r.outcome.label()).collect();
    let letters = stack.drain_dlq(Duration::from_secs(3)).await.unwrap();
    (labels, letters)
}

async fn forged_lane(name: &str) -> Stack {
    Stack::lane(
        name,
        schedkit_testkit::StackOptions {
            visibility_timeout: Some(1),
            ..Default::default()
        },
    )
    .await
}

/// The message went to the DLQ unrun as `record-mismatch`, its error containing `says`.
fn assert_mismatch(labels: &[&str], letters: &[aws_sdk_sqs::types::Message], says: &str) {
    assert_eq!(labels, ["dead-lettered"], "{letters:?}");
    assert_eq!(letters.len(), 1);
    assert_eq!(text(&letters[0], attr::REASON), "record-mismatch");
    let error = text(&letters[0], attr::ERROR);
    assert!(error.contains(says), "{error}");
}

/// A chain's end message: `{"chain": {"name", "key", "outcome", "execution"?}}`.
fn chain_end(chain: &str, key: &str, execution: Option<&str>, outcome: &str) -> String {
    let mut end = json!({ "name": chain, "key": key, "outcome": outcome });
    if let Some(e) = execution {
        end["execution"] = json!(e);
    }
    json!({ "job": chain, "scheduled_for": "2026-11-30T06:00:00Z", "chain": end }).to_string()
}

/// A job run RUNNING under `key`, owned by `owner` for a minute.
async fn running_job_run(stack: &Stack, job: &str, key: &str, owner: &str) {
    let claimed = stack
        .store()
        .claim(&schedkit::store::ClaimRequest {
            key: key.into(),
            job: job.into(),
            scheduled_for: "2026-11-30T06:00:00Z".into(),
            payload_hash: "h".into(),
            input: "{}".into(),
            message_id: Some("m".into()),
            owner: owner.into(),
            now: chrono::Utc::now(),
            lease: Duration::from_secs(60),
            retention: Duration::from_secs(3600),
            redrive: None,
        })
        .await
        .unwrap();
    assert!(matches!(
        claimed,
        schedkit::store::ClaimOutcome::Claimed { .. }
    ));
}

/// The RUNNING record of a run of `chain` under `key`, owned by its first execution.
async fn running_chain_run(stack: &Stack, chain: &str, key: &str) -> String {
    let execution = schedkit::key::chain_execution_name(key, 1);
    let started = stack
        .store()
        .start_chain(&schedkit::store::ClaimRequest {
            key: key.into(),
            job: chain.into(),
            scheduled_for: "2026-11-30T06:00:00Z".into(),
            payload_hash: "h".into(),
            input: "{}".into(),
            message_id: Some("m".into()),
            owner: execution.clone(),
            now: chrono::Utc::now(),
            lease: Duration::ZERO,
            retention: Duration::from_secs(3600),
            redrive: None,
        })
        .await
        .unwrap();
    assert!(started.is_none());
    execution
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_end_for_a_job_run_is_rejected_and_the_run_left_running() {
    let stack = forged_lane("end-job-run").await;
    let key = schedkit_testkit::unique("export:acme");
    running_job_run(&stack, "export", &key, "w:owner").await;
    // As a new user wrote it (no execution), and naming one.
    let (labels, letters) =
        decide_forged(&stack, &[chain_end("month-end", &key, None, "done")]).await;
    assert_mismatch(&labels, &letters, "names no execution");
    let (labels, letters) = decide_forged(
        &stack,
        &[chain_end("month-end", &key, Some("an-execution"), "done")],
    )
    .await;
    assert_mismatch(&labels, &letters, "is a run of `export`");
    let record = stack.record(&key).await.unwrap().unwrap();
    assert_eq!(
        (record.status, record.owner.as_deref()),
        (Status::Running, Some("w:owner")),
        "the job's run was ended by a message that is not its own: {record:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_end_for_another_chains_run_is_rejected() {
    let stack = forged_lane("end-other-chain").await;
    let key = schedkit_testkit::unique("month-end#2026-11-30T06:00:00Z");
    let execution = running_chain_run(&stack, "month-end", &key).await;
    let (labels, letters) = decide_forged(
        &stack,
        &[chain_end("quarter-end", &key, Some(&execution), "done")],
    )
    .await;
    assert_mismatch(&labels, &letters, "`month-end`");
    let record = stack.record(&key).await.unwrap().unwrap();
    assert_eq!(record.status, Status::Running, "{record:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_end_from_another_execution_or_none_is_rejected() {
    let stack = forged_lane("end-other-execution").await;
    let key = schedkit_testkit::unique("month-end#2026-11-30T06:00:00Z");
    running_chain_run(&stack, "month-end", &key).await;
    let (labels, letters) = decide_forged(
        &stack,
        &[chain_end("month-end", &key, Some("someone-elses"), "done")],
    )
    .await;
    assert_mismatch(&labels, &letters, "someone-elses");
    let (labels, letters) =
        decide_forged(&stack, &[chain_end("month-end", &key, None, "done")]).await;
    assert_mismatch(&labels, &letters, "names no execution");
    let record = stack.record(&key).await.unwrap().unwrap();
    assert_eq!(record.status, Status::Running, "{record:?}");
}

/// A step message of `chain` run `chain_key`: its step, job and key as given.
fn step_message(job: &str, key: &str, chain_key: &str, step: &str) -> String {
    json!({
        "job": job,
        "scheduled_for": "2026-11-30T06:00:00Z",
        "key": key,
        "chain": { "name": "month-end", "key": chain_key, "step": step, "task_token": "t" },
    })
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_answer_for_another_step_is_rejected_unrun() {
    let stack = forged_lane("step-other-step").await;
    let chain_key = schedkit_testkit::unique("month-end#2026-11-30T06:00:00Z");
    // The key names `close-books`, the step says `report`.
    let key = format!("{chain_key}#close-books");
    let (labels, letters) = decide_forged(
        &stack,
        &[step_message("report", &key, &chain_key, "report")],
    )
    .await;
    assert_mismatch(&labels, &letters, &format!("`{chain_key}#report`"));
    assert!(stack.record(&key).await.unwrap().is_none(), "it ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_of_another_job_than_the_steps_is_rejected_unrun() {
    let stack = forged_lane("step-other-job").await;
    let chain_key = schedkit_testkit::unique("month-end#2026-11-30T06:00:00Z");
    let key = format!("{chain_key}#report");
    let (labels, letters) = decide_forged(
        &stack,
        &[step_message("export", &key, &chain_key, "report")],
    )
    .await;
    assert_mismatch(&labels, &letters, "`report`");
    assert!(stack.record(&key).await.unwrap().is_none(), "it ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_naming_each_internal_item_are_poison_naming_the_key() {
    let stack = forged_lane("internal-keys").await;
    let job = schedkit_testkit::unique("long-report");
    // Each kind of item schedkit keeps beside the records, and one it may keep later.
    let internal = [
        schedkit::store::slot_key(&job),
        schedkit::store::job_key(&job),
        format!("{}limit/partner-api", schedkit::store::INTERNAL_PREFIX),
    ];
    // Explicit keys, and a key template that derives them.
    let mut bodies = Vec::new();
    for key in &internal {
        let mut e = Envelope::new("export", "2026-11-01T04:00:00Z".parse().unwrap());
        e.key = Some(key.clone());
        bodies.push(e.to_json());
        bodies.push(export(json!({ "tenant": key })));
    }
    let (labels, letters) = decide_forged(&stack, &bodies).await;
    assert_eq!(labels, ["dead-lettered"; 6], "{letters:?}");
    for letter in &letters {
        assert_eq!(text(letter, attr::REASON), "poison");
        let error = text(letter, attr::ERROR);
        assert!(
            error.contains("reserved for schedkit's own items"),
            "{error}"
        );
    }
    for key in &internal {
        let named = letters
            .iter()
            .filter(|l| text(l, attr::ERROR).contains(&format!("`{key}`")))
            .count();
        assert_eq!(named, 2, "the error names `{key}`");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_message_under_a_steps_key_never_stands_for_the_step() {
    let stack = forged_lane("plain-step-key").await;
    let chain_key = schedkit_testkit::unique("month-end#2026-11-30T06:00:00Z");
    let key = format!("{chain_key}#report");
    // The same job, key and payload as the step's message, without the chain: its own run.
    let mut plain = Envelope::new("report", "2026-11-30T06:00:00Z".parse().unwrap());
    plain.key = Some(key.clone());
    let (labels, _) = decide_forged(&stack, &[plain.to_json()]).await;
    assert_eq!(labels, ["succeeded"]);
    // The step's own message is another run under that key: a conflict, not answered
    // from a record it did not write.
    let (labels, letters) = decide_forged(
        &stack,
        &[step_message("report", &key, &chain_key, "report")],
    )
    .await;
    assert_eq!(labels, ["dead-lettered"], "{letters:?}");
    assert_eq!(text(&letters[0], attr::REASON), "key-conflict");
}
