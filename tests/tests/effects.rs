//! Effects committed with the outcome: a job's DynamoDB writes, handed to the framework,
//! commit in one transaction with its DONE record or not at all. A fenced-out owner's
//! commit is refused whole, a commit after the lease ran out is refused, a run cancelled for
//! its lease leaves no effect and the next attempt applies it once, a refused condition
//! fails the run for good with its reason, and more effects than a transaction takes fail
//! it with the limit.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use aws_sdk_dynamodb::types::{AttributeValue, ConditionCheck, Put, TransactWriteItem, Update};
use chrono::{DateTime, Utc};
use schedkit::dead_letter::attr;
use schedkit::store::{ClaimOutcome, ClaimRequest, CommitError, ExecutionRecord};
use schedkit::{Ctx, Envelope, JobPolicy, Jobs, Metrics, Outcome, Status};
use schedkit_testkit::{Stack, unique};
use serde_json::json;

const KEY: &str = "effect_key";

fn envelope(job: &str) -> Envelope {
    Envelope::new(job, "2026-11-01T07:00:00Z".parse().unwrap())
}

/// `ADD applied 1` on the effects-table item of the run's key.
fn count_once(table: &str, ctx: &Ctx) -> Update {
    Update::builder()
        .table_name(table)
        .key(KEY, AttributeValue::S(ctx.key.clone()))
        .update_expression("ADD applied :one")
        .expression_attribute_values(":one", AttributeValue::N("1".into()))
        .build()
        .unwrap()
}

async fn stack(name: &str) -> Stack {
    Stack::with_quick_redelivery(name).await
}

/// A claim of `key` by `owner` at `now`, with a lease of one second.
fn claim(key: &str, owner: &str, now: DateTime<Utc>) -> ClaimRequest {
    ClaimRequest {
        key: key.into(),
        job: "export".into(),
        scheduled_for: "2026-11-01T07:00:00.000Z".into(),
        payload_hash: "h".into(),
        input: "{}".into(),
        message_id: Some(format!("m-{owner}")),
        owner: owner.into(),
        now,
        lease: Duration::from_secs(1),
        retention: Duration::from_secs(3600),
        redrive: None,
    }
}

fn claimed(outcome: ClaimOutcome) -> ExecutionRecord {
    match outcome {
        ClaimOutcome::Claimed { record, .. } => record,
        other => panic!("not claimed: {other:?}"),
    }
}

/// `ADD applied 1` on the effects-table item `key`.
fn count(table: &str, key: &str) -> TransactWriteItem {
    TransactWriteItem::builder()
        .update(
            Update::builder()
                .table_name(table)
                .key(KEY, AttributeValue::S(key.into()))
                .update_expression("ADD applied :one")
                .expression_attribute_values(":one", AttributeValue::N("1".into()))
                .build()
                .unwrap(),
        )
        .build()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_out_owners_commit_is_refused_whole_and_the_new_owners_applies_once() {
    let stack = stack("fenced").await;
    let store = stack.store();
    let key = unique("run");
    let t0 = Utc::now();
    let a = claimed(store.claim(&claim(&key, "a", t0)).await.unwrap());
    // A's lease runs out; B reclaims.
    let b = claimed(
        store
            .claim(&claim(&key, "b", t0 + chrono::Duration::seconds(2)))
            .await
            .unwrap(),
    );
    // A commits as if its lease were live by its own clock: the owner token fences it.
    let refused = store
        .commit(
            &a,
            json!({"by": "A"}),
            t0,
            vec![count(&stack.effects_table, &key)],
        )
        .await
        .unwrap_err();
    let CommitError::LeaseLost { current } = refused else {
        panic!("{refused:?}");
    };
    assert_eq!(current.unwrap().owner.as_deref(), Some("b"));
    assert_eq!(
        stack.effect_applied(&key).await.unwrap(),
        0,
        "nothing of A's commit"
    );
    let now = t0 + chrono::Duration::milliseconds(2100);
    store
        .commit(
            &b,
            json!({"by": "B"}),
            now,
            vec![count(&stack.effects_table, &key)],
        )
        .await
        .unwrap();
    assert_eq!(stack.effect_applied(&key).await.unwrap(), 1);
    let record = stack.record(&key).await.unwrap().unwrap();
    assert_eq!(record.status, Status::Done);
    assert_eq!(record.result.as_deref(), Some(r#"{"by":"B"}"#));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_after_the_lease_ran_out_is_refused_even_when_nobody_reclaimed_the_run() {
    let stack = stack("late-commit").await;
    let store = stack.store();
    let key = unique("run");
    let t0 = Utc::now();
    let a = claimed(store.claim(&claim(&key, "a", t0)).await.unwrap());
    let late = t0 + chrono::Duration::milliseconds(1001);
    let refused = store
        .commit(&a, json!({}), late, vec![count(&stack.effects_table, &key)])
        .await
        .unwrap_err();
    assert!(
        matches!(refused, CommitError::LeaseLost { .. }),
        "{refused:?}"
    );
    assert_eq!(stack.effect_applied(&key).await.unwrap(), 0);
    let record = stack.record(&key).await.unwrap().unwrap();
    assert_eq!(
        (record.status, record.owner.as_deref()),
        (Status::Running, Some("a"))
    );
    // Within the lease a commit goes through, and its retry (an answer lost) is answered as
    // applied without applying the effect again.
    let key = unique("run");
    let a = claimed(store.claim(&claim(&key, "a2", t0)).await.unwrap());
    let in_time = t0 + chrono::Duration::milliseconds(900);
    let effect = || vec![count(&stack.effects_table, &key)];
    store
        .commit(&a, json!({}), in_time, effect())
        .await
        .unwrap();
    store
        .commit(&a, json!({}), in_time, effect())
        .await
        .unwrap();
    assert_eq!(stack.effect_applied(&key).await.unwrap(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_job_cancelled_for_its_lease_leaves_no_effect_and_the_next_attempt_applies_it_once() {
    let stack = stack("cancelled").await;
    let table = stack.effects_table.clone();
    let slow_once = Arc::new(AtomicBool::new(true));
    let worker = stack.processor(
        Jobs::new()
            .add("export", move |ctx: Ctx| {
                let (table, slow) = (table.clone(), slow_once.clone());
                async move {
                    ctx.effects().update(count_once(&table, &ctx));
                    // The first attempt outlives its lease: it is cancelled, its effect
                    // handed but never committed.
                    if slow.swap(false, Ordering::SeqCst) {
                        tokio::time::sleep(Duration::from_millis(1500)).await;
                    }
                    Ok::<_, schedkit::JobError>(json!({}))
                }
            })
            .bind_policies(|_| JobPolicy {
                heartbeat: None,
                ..JobPolicy::default().with_lease(Duration::from_secs(1))
            }),
        "w",
        Metrics::capture().0,
    );
    stack.send_envelope(&envelope("export")).await.unwrap();
    let first = stack.receive(1, Duration::from_secs(5)).await.unwrap();
    let reports = worker.process(first, None).await;
    assert!(
        matches!(reports[0].outcome, Outcome::Retrying { .. }),
        "{:?}",
        reports[0].outcome
    );
    let key = reports[0].key.clone().unwrap();
    assert_eq!(
        stack.effect_applied(&key).await.unwrap(),
        0,
        "nothing of the cancelled run"
    );

    let stats = stack.run_until_drained(std::slice::from_ref(&worker)).await;
    assert_eq!(
        stats.outcomes.get("succeeded"),
        Some(&1),
        "{:?}",
        stats.outcomes
    );
    assert_eq!(stack.effect_applied(&key).await.unwrap(), 1);
    let record = stack.record(&key).await.unwrap().unwrap();
    assert_eq!((record.status, record.attempt), (Status::Done, 2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_effect_condition_fails_the_run_for_good_and_applies_nothing() {
    let stack = stack("refused").await;
    let table = stack.effects_table.clone();
    let worker = stack.processor(
        Jobs::new()
            .add("transfer", move |ctx: Ctx| {
                let table = table.clone();
                async move {
                    ctx.effects().update(count_once(&table, &ctx));
                    // The account item does not exist, so this condition cannot hold.
                    ctx.effects().condition_check(
                        ConditionCheck::builder()
                            .table_name(&table)
                            .key(KEY, AttributeValue::S("account:missing".into()))
                            .condition_expression("attribute_exists(effect_key)")
                            .build()
                            .unwrap(),
                    );
                    Ok::<_, schedkit::JobError>(json!({}))
                }
            })
            .bind_policies(|_| JobPolicy::default()),
        "w",
        Metrics::capture().0,
    );
    stack.send_envelope(&envelope("transfer")).await.unwrap();
    let stats = stack.run_until_drained(std::slice::from_ref(&worker)).await;
    assert_eq!(
        stats.outcomes.get("dead-lettered"),
        Some(&1),
        "{:?}",
        stats.outcomes
    );
    let key = stats.reports[0].key.clone().unwrap();
    let record = stack.record(&key).await.unwrap().unwrap();
    assert_eq!((record.status, record.attempt), (Status::Failed, 1));
    let error = record.last_error.unwrap();
    assert!(
        error.starts_with(&format!(
            "effect 1 (table {}) was refused",
            stack.effects_table
        )),
        "{error}"
    );
    assert_eq!(stack.effect_applied(&key).await.unwrap(), 0);
    let letters = stack.drain_dlq(Duration::from_secs(5)).await.unwrap();
    let reason = letters[0].message_attributes.as_ref().unwrap()[attr::REASON]
        .string_value
        .clone();
    assert_eq!(reason.as_deref(), Some("permanent-error"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_effects_than_a_transaction_takes_fail_the_run_for_good_with_the_limit() {
    let stack = stack("too-many").await;
    let table = stack.effects_table.clone();
    let worker = stack.processor(
        Jobs::new()
            .add("bulk", move |ctx: Ctx| {
                let table = table.clone();
                async move {
                    for i in 0..100 {
                        ctx.effects().put(
                            Put::builder()
                                .table_name(&table)
                                .item(KEY, AttributeValue::S(format!("{}#{i}", ctx.key)))
                                .build()
                                .unwrap(),
                        );
                    }
                    Ok::<_, schedkit::JobError>(json!({}))
                }
            })
            .bind_policies(|_| JobPolicy::default()),
        "w",
        Metrics::capture().0,
    );
    stack.send_envelope(&envelope("bulk")).await.unwrap();
    let stats = stack.run_until_drained(std::slice::from_ref(&worker)).await;
    assert_eq!(
        stats.outcomes.get("dead-lettered"),
        Some(&1),
        "{:?}",
        stats.outcomes
    );
    let key = stats.reports[0].key.clone().unwrap();
    let record = stack.record(&key).await.unwrap().unwrap();
    assert_eq!(record.status, Status::Failed);
    assert_eq!(
        record.last_error.as_deref(),
        Some(
            "the job handed 100 effects; at most 99 commit with the outcome (DynamoDB's 100 items per transaction, one of them the run's record)"
        )
    );
    assert_eq!(stack.effect_applied(&format!("{key}#0")).await.unwrap(), 0);
}
