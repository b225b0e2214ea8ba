//! Messages that can never succeed go to the DLQ at once, with a reason (acceptance f, g).

use std::collections::BTreeMap;
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use schedkit::dead_letter::{DeadLetterReason, attr};
use schedkit::{Envelope, Metrics, Outcome, Status};
use schedkit_testkit::{Stack, StackOptions};
use serde_json::json;

fn invoice(tenant: &str, amount: i64) -> Envelope {
    let mut e = Envelope::new("record-invoice", "2026-11-01T02:00:00Z".parse().unwrap());
    e.payload = json!({"tenant": tenant, "billing_month": "2026-10", "amount_cents": amount})
        .as_object()
        .cloned();
    e
}

fn attribute(m: &aws_sdk_sqs::types::Message, name: &str) -> String {
    m.message_attributes.as_ref().unwrap()[name]
        .string_value
        .clone()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poison_messages_are_dead_lettered_at_once_and_the_rest_of_the_batch_succeeds() {
    let stack = Stack::lane("poison", StackOptions::default()).await;
    let poison = [
        ("not json", "nightly export please", "body is not JSON"),
        (
            "unknown job",
            r#"{"job":"send-newsletter","scheduled_for":"2026-11-01T00:00:00Z"}"#,
            "job `send-newsletter` is not registered with this worker",
        ),
        (
            // Valid JSON whose escape decodes to a character SQS refuses in an attribute.
            "unknown job with a control character",
            r#"{"job":"send\u0000news","scheduled_for":"2026-11-01T00:00:00Z"}"#,
            "job `send\u{fffd}news` is not registered with this worker",
        ),
        (
            "missing field",
            r#"{"job":"record-invoice"}"#,
            "missing field `scheduled_for`",
        ),
        (
            "wrong type",
            r#"{"job":"record-invoice","scheduled_for":"2026-11-01T00:00:00Z","payload":"tenant=a"}"#,
            "field `payload`: invalid type: string \"tenant=a\", expected a map",
        ),
        (
            "missing key field",
            r#"{"job":"record-invoice","scheduled_for":"2026-11-01T00:00:00Z","payload":{"amount_cents":1}}"#,
            "key template `invoice:{billing_month}:{tenant}` needs payload field `billing_month`, which is missing",
        ),
    ];
    let mut ids = BTreeMap::new();
    for (name, body, _) in &poison {
        ids.insert(stack.send(body).await.unwrap(), *name);
    }
    stack.send_envelope(&invoice("good-1", 100)).await.unwrap();
    stack.send_envelope(&invoice("good-2", 200)).await.unwrap();

    let batch = stack.receive(8, Duration::from_secs(5)).await.unwrap();
    assert_eq!(batch.len(), 8);
    let (metrics, lines) = Metrics::capture();
    let worker = stack.processor(stack.example_registry(), "w", metrics);
    let reports = worker.process(batch, None).await;
    for r in &reports {
        match ids.get(&r.message_id) {
            Some(name) => assert!(
                matches!(
                    r.outcome,
                    Outcome::DeadLettered {
                        reason: DeadLetterReason::Poison | DeadLetterReason::UnknownJob,
                        ..
                    }
                ),
                "{name}: {:?}",
                r.outcome
            ),
            None => assert_eq!(r.outcome, Outcome::Succeeded),
        }
    }

    let letters = stack.drain_dlq(Duration::from_secs(5)).await.unwrap();
    assert_eq!(letters.len(), poison.len());
    for (name, body, reason) in &poison {
        let letter = letters
            .iter()
            .find(|m| m.body.as_deref() == Some(*body))
            .unwrap_or_else(|| panic!("{name} is in the DLQ"));
        let error = attribute(letter, attr::ERROR);
        assert!(error.starts_with(reason), "{name}: {error}");
        assert_eq!(
            attribute(letter, attr::ATTEMPTS),
            "0",
            "{name}: dead-lettered at once"
        );
        let expected = if name.starts_with("unknown job") {
            "unknown-job"
        } else {
            "poison"
        };
        assert_eq!(attribute(letter, attr::REASON), expected);
    }
    let records = stack.records().await.unwrap();
    let jobs: Vec<_> = records
        .iter()
        .map(|r| (r.execution_key.as_str(), r.status))
        .collect();
    assert_eq!(
        jobs.len(),
        2,
        "only the two good messages have records: {jobs:?}"
    );
    assert!(records.iter().all(|r| r.status == Status::Done));

    // A job name from an untrusted message never becomes a metric dimension.
    let dimensions: BTreeMap<String, usize> =
        lines
            .lock()
            .unwrap()
            .iter()
            .fold(BTreeMap::new(), |mut seen, line| {
                let doc: serde_json::Value = serde_json::from_str(line).unwrap();
                *seen
                    .entry(doc["Job"].as_str().unwrap().to_string())
                    .or_default() += 1;
                seen
            });
    let names: Vec<_> = dimensions.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        ["(unknown)", "-", "record-invoice"],
        "{dimensions:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_key_with_another_payload_is_rejected_as_a_conflict() {
    let stack = Stack::lane("conflict", StackOptions::default()).await;
    let worker = stack.processor(stack.example_registry(), "w", Metrics::capture().0);
    stack.send_envelope(&invoice("acme", 1250)).await.unwrap();
    let first = stack.run_until_drained(std::slice::from_ref(&worker)).await;
    assert_eq!(first.outcomes.get("succeeded"), Some(&1));
    let key = "invoice:2026-10:acme";
    let before = stack.record(key).await.unwrap().unwrap();

    let other = invoice("acme", 9_999_999);
    stack.send_envelope(&other).await.unwrap();
    let second = stack.run_until_drained(std::slice::from_ref(&worker)).await;
    assert!(matches!(
        second.reports[0].outcome,
        Outcome::DeadLettered {
            reason: DeadLetterReason::KeyConflict,
            ..
        }
    ));

    let letters = stack.drain_dlq(Duration::from_secs(5)).await.unwrap();
    assert_eq!(letters.len(), 1);
    assert_eq!(attribute(&letters[0], attr::REASON), "key-conflict");
    assert_eq!(attribute(&letters[0], attr::KEY), key);
    let error = attribute(&letters[0], attr::ERROR);
    assert!(
        error.starts_with(&format!(
            "key `{key}` was first used with a different payload"
        )),
        "{error}"
    );
    assert_eq!(letters[0].body.as_deref(), Some(other.to_json().as_str()));
    assert_eq!(
        stack.record(key).await.unwrap().unwrap(),
        before,
        "the record is untouched"
    );
    assert_eq!(stack.effect_applied(key).await.unwrap(), 1);
}

/// A worker on `stack` running `registry` whose store is `store`.
fn worker_on(
    stack: &Stack,
    store: schedkit::DynamoStore,
    registry: schedkit::Registry,
) -> schedkit::Processor {
    schedkit::Processor::new(
        store,
        stack.sqs.clone(),
        registry,
        stack.config("w"),
        Metrics::capture().0,
    )
}

fn export_job() -> schedkit::Registry {
    let policy = schedkit::JobPolicy {
        key_template: Some("{tenant}".parse().unwrap()),
        ..schedkit::JobPolicy::default()
    };
    schedkit::Jobs::new()
        .add("export", |_ctx: schedkit::Ctx| async {
            Ok::<_, schedkit::JobError>(json!({}))
        })
        .bind_policies(|_| policy.clone())
}

fn export(tenant: &str) -> Envelope {
    let mut e = Envelope::new("export", "2026-11-01T03:00:00Z".parse().unwrap());
    e.payload = json!({ "tenant": tenant }).as_object().cloned();
    e
}

/// Runs what is on the queue and returns the one dead letter's reason and error.
async fn the_dead_letter(stack: &Stack, worker: &schedkit::Processor) -> (String, String) {
    let stats = stack.run_until_drained(std::slice::from_ref(worker)).await;
    assert_eq!(
        stats.outcomes.get("dead-lettered"),
        Some(&1),
        "{:?}",
        stats.outcomes
    );
    assert_eq!(stats.received, 1, "dead-lettered at once, not retried");
    let letters = stack.drain_dlq(Duration::from_secs(5)).await.unwrap();
    assert_eq!(letters.len(), 1);
    (
        attribute(&letters[0], attr::REASON),
        attribute(&letters[0], attr::ERROR),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_template_that_renders_an_empty_key_is_poison_with_the_reason() {
    let stack = Stack::lane("empty-key", StackOptions::default()).await;
    stack.send_envelope(&export("")).await.unwrap();
    let worker = worker_on(&stack, stack.store(), export_job());
    let (reason, error) = the_dead_letter(&stack, &worker).await;
    assert_eq!(reason, "poison");
    assert!(error.starts_with("derived key is empty"), "{error}");
    assert!(stack.records().await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_dynamodb_refuses_as_invalid_is_dead_lettered_at_once_with_its_answer() {
    let stack = Stack::lane("refused", StackOptions::default()).await;
    stack.send_envelope(&export("acme")).await.unwrap();
    // A worker configured with the wrong table: its key schema is not the executions'.
    let wrong = schedkit::DynamoStore::new(stack.ddb.clone(), &stack.effects_table);
    let worker = worker_on(&stack, wrong, export_job());
    let (reason, error) = the_dead_letter(&stack, &worker).await;
    assert_eq!(reason, "store-refused");
    assert!(
        error.starts_with("execution store refused the request: ValidationException"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_that_no_longer_decodes_is_dead_lettered_at_once_saying_what_did_not_decode() {
    let stack = Stack::lane("malformed", StackOptions::default()).await;
    // A record written by hand (or by another version) whose attempt count is text.
    stack
        .ddb
        .put_item()
        .table_name(&stack.table)
        .item("execution_key", AttributeValue::S("acme".into()))
        .item("status", AttributeValue::S("DONE".into()))
        .item("attempt", AttributeValue::S("many".into()))
        .send()
        .await
        .unwrap();
    stack.send_envelope(&export("acme")).await.unwrap();
    let worker = worker_on(&stack, stack.store(), export_job());
    let (reason, error) = the_dead_letter(&stack, &worker).await;
    assert_eq!(reason, "store-refused");
    assert!(
        error.starts_with("execution record `acme` is malformed"),
        "{error}"
    );
    assert!(error.ends_with("Expected num"), "{error}"); // serde_dynamo: `attempt` is text
}
