//! The bad-input catalogue: one named test per shape of input a worker can be handed. Each
//! gets a clear rejection (poison, with a reason that names the problem) or a capped,
//! stored outcome; nothing is lost and nothing loops (every message is decided on its first
//! delivery). Shapes covered elsewhere: not JSON, wrong types, missing fields, unknown jobs
//! and control characters (`rejections::poison_messages_...`), an empty derived key, a
//! refused or undecodable record (`rejections::*`), forged and colliding messages (a chain's
//! end or a step naming a record it does not own, keys in schedkit's own space:
//! `shared/tests/worker_logic/forged.rs`). Invalid UTF-8 cannot reach a worker: SQS refuses
//! it at send, and Lambda's event and the poller both carry bodies as text.

use std::time::Duration;

use schedkit::dead_letter::attr;
use schedkit::{Ctx, Envelope, JobError, JobPolicy, Jobs, Metrics, Processor, Status};
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
        Jobs::new()
            .add("export", |ctx: Ctx| async move {
                match ctx.payload.get("do").and_then(|v| v.as_str()) {
                    Some("fail-big") => Err(JobError::permanent("x".repeat(2 << 20))),
                    Some("return-big") => Ok(json!({ "rows": "r".repeat(2 << 20) })),
                    _ => Ok(json!({"ok": true})),
                }
            })
            .bind_policies(|_| policy.clone()),
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
