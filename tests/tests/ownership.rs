//! Every write reaches only the record it owns: the holes a careful read found in keys,
//! overlap, chain records and failed runs, each shown through the worker on LocalStack
//! (the forged chain messages are in the bad-input catalogue).

use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use schedkit::store::{ClaimOutcome, ClaimRequest, Finish};
use schedkit::{
    Ctx, DynamoStore, Envelope, JobError, JobPolicy, Jobs, Metrics, Overlap, Processor, Registry,
    RetryPolicy, Status,
};
use schedkit_testkit::{RequestCounter, Stack, StackOptions, unique};
use serde_json::json;

fn lane_options() -> StackOptions {
    StackOptions {
        visibility_timeout: Some(1),
        ..StackOptions::default()
    }
}

/// A request on the executions table, as a worker's claim would make it (for records a
/// test sets up by hand).
fn claim_request(key: &str, job: &str, owner: &str) -> ClaimRequest {
    ClaimRequest {
        key: key.into(),
        job: job.into(),
        scheduled_for: "2026-12-01T09:00:00Z".into(),
        payload_hash: "h".into(),
        input: "{}".into(),
        message_id: Some(unique("m")),
        owner: owner.into(),
        now: chrono::Utc::now(),
        lease: Duration::from_secs(60),
        retention: Duration::from_secs(3600),
        redrive: None,
    }
}

/// `record-invoice` run with the key `failures#<job>` (or `pause#<job>`, the names
/// schedkit's own items once had), then the job resumed: the run's record stays, and the
/// same message again is a duplicate, its effect applied once. (The resume deleted the
/// record, and the message ran a second time: the invoice twice.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resuming_a_job_never_deletes_an_execution_record_whatever_its_key() {
    let sdk = schedkit_testkit::localstack().await;
    let stack = Stack::lane("resume-keys", lane_options()).await;
    let job = unique("long-report");
    // The job's schedule, so that resume has something to enable.
    stack.create_schedule(&sdk, &job).await.unwrap();
    let scheduler = aws_sdk_scheduler::Client::new(&sdk);
    let worker = stack.processor(stack.example_registry(), "w", Metrics::capture().0);
    let keys = [format!("failures#{job}"), format!("pause#{job}")];
    let bodies: Vec<String> = keys
        .iter()
        .map(|key| {
            let mut e = Envelope::new("record-invoice", "2026-12-01T00:00:00Z".parse().unwrap());
            e.key = Some(key.clone());
            e.payload = json!({"tenant": "acme", "billing_month": "2026-11", "amount_cents": 100})
                .as_object()
                .cloned();
            e.to_json()
        })
        .collect();
    for body in &bodies {
        stack.send(body).await.unwrap();
    }
    stack.run_until_drained(std::slice::from_ref(&worker)).await;
    let pauses = schedkit::store::Pauses::for_table(&sdk, &stack.table);
    schedkit::trigger::pause::resume(
        &scheduler,
        &pauses,
        &stack.schedule_group,
        &job,
        chrono::Utc::now(),
    )
    .await
    .unwrap();
    for key in &keys {
        let record = stack.record(key).await.unwrap();
        assert_eq!(
            record.map(|r| r.status),
            Some(Status::Done),
            "the resume of {job} deleted the run {key}"
        );
    }
    for body in &bodies {
        stack.send(body).await.unwrap();
    }
    let again = stack.run_until_drained(&[worker]).await;
    assert_eq!(
        again.outcomes.get("duplicate"),
        Some(&2),
        "{:?}",
        again.outcomes
    );
    for key in &keys {
        assert_eq!(stack.effect_applied(key).await.unwrap(), 1, "{key}");
    }
}

/// A job `job` whose runs sleep `seconds` (payload), failing once first when `fail_once`
/// says so; one run at a time under `overlap`.
fn slow(job: &str, overlap: Overlap) -> Registry {
    let policy = JobPolicy {
        overlap,
        timeout: Some(Duration::from_secs(40)),
        retry: RetryPolicy {
            max_attempts: 3,
            first_delay: Duration::from_secs(1),
            base_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(2),
        },
        ..JobPolicy::default().with_lease(Duration::from_secs(10))
    };
    Jobs::new()
        .add(job, |ctx: Ctx| async move {
            if ctx.payload.get("fail_once").is_some() && ctx.attempt == 1 {
                return Err(JobError::retryable("not yet"));
            }
            let seconds = ctx.payload.get("seconds").and_then(|s| s.as_f64());
            tokio::time::sleep(Duration::from_secs_f64(seconds.unwrap_or(0.0))).await;
            Ok(json!({"slept": seconds}))
        })
        .bind_policies(|_| policy.clone())
}

fn slow_run(job: &str, key: &str, payload: serde_json::Value) -> Envelope {
    let mut e = Envelope::new(job, "2026-12-01T09:00:00Z".parse().unwrap());
    e.key = Some(key.to_string());
    e.payload = payload.as_object().cloned();
    e
}

/// A store on the stage's table whose requests `counter` counts.
fn counted_store(stack: &Stack, counter: &RequestCounter) -> DynamoStore {
    let conf = stack
        .ddb
        .config()
        .to_builder()
        .interceptor(counter.clone())
        .build();
    DynamoStore::new(aws_sdk_dynamodb::Client::from_conf(conf), &stack.table)
}

/// A duplicate of a DONE run of a `skip` job is decided by its claim alone: one request,
/// and the slot is never entered (it was entered before the claim, and left after it: a
/// real firing arriving in between was recorded SKIPPED).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_duplicate_of_a_done_run_of_a_skip_job_costs_one_request_and_never_enters_the_slot() {
    let stack = Stack::lane("dup-slot", lane_options()).await;
    // A job of its own: its overlap slot is on the table the lanes share.
    let job = unique("slow");
    let counter = RequestCounter::all();
    let worker = Processor::new(
        counted_store(&stack, &counter),
        stack.sqs.clone(),
        slow(&job, Overlap::Skip),
        stack.config("w"),
        Metrics::capture().0,
    );
    let key = unique("done-run");
    let run = slow_run(&job, &key, json!({}));
    stack.send_envelope(&run).await.unwrap();
    stack.run_until_drained(std::slice::from_ref(&worker)).await;
    assert_eq!(
        stack.record(&key).await.unwrap().unwrap().status,
        Status::Done
    );
    assert_eq!(
        counter.get(),
        4,
        "a success of a `skip` job: its claim, the slot entered, its outcome, the slot left"
    );
    counter.reset();
    stack.send_envelope(&run).await.unwrap();
    let stats = stack.run_until_drained(&[worker]).await;
    assert_eq!(
        stats.outcomes.get("duplicate"),
        Some(&1),
        "{:?}",
        stats.outcomes
    );
    assert_eq!(
        counter.get(),
        1,
        "a duplicate costs its claim and nothing else (the slot was entered and left)"
    );
}

/// The slot still names a run that is DONE (its release failed, or its worker stopped
/// after the outcome): the next firing runs. (It was recorded SKIPPED for as long as the
/// slot's hold: a firing lost.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_left_held_by_a_finished_run_is_free_for_the_next_firing() {
    let stack = Stack::lane("stale-slot", lane_options()).await;
    // A job of its own: its overlap slot is on the table the lanes share.
    let job = unique("slow");
    let worker = stack.processor(slow(&job, Overlap::Skip), "w", Metrics::capture().0);
    let (first, next) = (unique("first"), unique("next"));
    stack
        .send_envelope(&slow_run(&job, &first, json!({})))
        .await
        .unwrap();
    stack.run_until_drained(std::slice::from_ref(&worker)).await;
    // As if the release had failed: the slot names the finished run for another hour.
    stack
        .hold_slot(&job, &first, Duration::from_secs(3600))
        .await
        .unwrap();
    stack
        .send_envelope(&slow_run(&job, &next, json!({})))
        .await
        .unwrap();
    stack.run_until_drained(&[worker]).await;
    let record = stack.record(&next).await.unwrap().unwrap();
    assert_eq!(record.status, Status::Done, "{record:?}");
}

/// A paused end whose stage holds seven failed steps with 32 KB causes each (what Step
/// Functions relays of the worker's answers): the run is recorded PAUSED, its record well
/// under DynamoDB's 400 KB item limit. (The causes were stored twice, the write refused
/// for good, and the run stayed RUNNING.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_end_with_wide_causes_is_recorded_well_under_the_item_limit() {
    let sdk = schedkit_testkit::localstack().await;
    let stack = Stack::lane("wide-causes", lane_options()).await;
    let worker = stack.chain_processor(
        &sdk,
        Jobs::new()
            .add("a", |_c: Ctx| async {
                Ok::<_, schedkit::JobError>(json!(null))
            })
            .bind_policies(|_| JobPolicy::default()),
        "[jobs.a]\nowner = \"o\"\n[chains.month-end]\nowner = \"o\"\nstages = [\"a\"]\n",
        Metrics::capture().0,
    );
    let key = unique("month-end#2026-11-30T06:00:00Z");
    let execution = schedkit::key::chain_execution_name(&key, 1);
    let mut start = claim_request(&key, "month-end", &execution);
    start.lease = Duration::ZERO;
    assert!(stack.store().start_chain(&start).await.unwrap().is_none());
    let stage: Vec<_> = (0..7)
        .map(|i| {
            json!({
                "step": format!("step-{i}"),
                "failed": true,
                "error": "schedkit.permanent-error",
                "cause": "c".repeat(32 * 1024),
            })
        })
        .collect();
    let end = json!({
        "job": "month-end",
        "scheduled_for": "2026-11-30T06:00:00Z",
        "chain": { "name": "month-end", "key": key, "outcome": "paused", "execution": execution, "stage": stage },
    });
    stack.send(&end.to_string()).await.unwrap();
    let stats = stack.run_until_drained(&[worker]).await;
    assert_eq!(
        stats.outcomes.get("succeeded"),
        Some(&1),
        "{:?}",
        stats.outcomes
    );
    let item = stack
        .ddb
        .get_item()
        .table_name(&stack.table)
        .key(
            schedkit::store::KEY_ATTRIBUTE,
            AttributeValue::S(key.clone()),
        )
        .send()
        .await
        .unwrap()
        .item
        .unwrap();
    let record: schedkit::ExecutionRecord = serde_dynamo::from_item(item.clone()).unwrap();
    assert_eq!(record.status, Status::Paused, "{record:?}");
    let size: usize = item
        .iter()
        .map(|(k, v)| {
            k.len()
                + match v {
                    AttributeValue::S(s) => s.len(),
                    other => format!("{other:?}").len(),
                }
        })
        .sum();
    assert!(size < 64 * 1024, "the record is {size} bytes");
    let error = record.last_error.unwrap();
    assert!(error.contains("step `step-6` failed"), "{error}");
}

/// A run that failed for good, fired again (a scheduler's duplicate firing, a second
/// backfill over its time, `fire` with its key): acknowledged as a duplicate of the
/// FAILED run, not run again and not dead-lettered again. Its dead letter moved back (a
/// redrive) runs it again, once: a second copy of the same letter, redriven with it, finds
/// the round it names already run again. (Any other message started a new round of
/// attempts.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_run_runs_again_only_from_its_dead_letter() {
    let sdk = schedkit_testkit::localstack().await;
    let stack = Stack::lane("failed-again", lane_options()).await;
    let runs = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let counted = runs.clone();
    let policy = JobPolicy {
        retry: RetryPolicy {
            max_attempts: 1,
            ..RetryPolicy::default()
        },
        ..JobPolicy::default()
    };
    let registry = Jobs::new()
        .add("fails", move |ctx: Ctx| {
            let counted = counted.clone();
            async move {
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                if ctx.payload.get("fixed").is_none() {
                    return Err(JobError::permanent("the partner account is blocked"));
                }
                Ok(json!(null))
            }
        })
        .bind_policies(|_| policy.clone());
    let worker = stack.processor(registry, "w", Metrics::capture().0);
    let firing = Envelope::new("fails", "2026-12-01T09:00:00Z".parse().unwrap());
    let key = "fails#2026-12-01T09:00:00Z".to_string();
    stack.send_envelope(&firing).await.unwrap();
    stack.run_until_drained(std::slice::from_ref(&worker)).await;
    assert_eq!(
        stack.record(&key).await.unwrap().unwrap().status,
        Status::Failed
    );
    assert_eq!(stack.peek_dlq().await.unwrap().len(), 1);

    stack.send_envelope(&firing).await.unwrap();
    let again = stack.run_until_drained(std::slice::from_ref(&worker)).await;
    assert_eq!(
        again.outcomes.get("duplicate"),
        Some(&1),
        "{:?}",
        again.outcomes
    );
    assert_eq!(
        runs.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "it ran again"
    );
    assert_eq!(
        stack.peek_dlq().await.unwrap().len(),
        1,
        "a second dead letter"
    );

    // A second copy of the letter (a worker killed between sending it and deleting its
    // message sends it again): both redriven, the run runs one more round, not two.
    let letter = stack.peek_dlq().await.unwrap().remove(0);
    stack
        .sqs
        .send_message()
        .queue_url(&stack.dlq_url)
        .message_body(letter.body.clone().unwrap())
        .set_message_attributes(letter.message_attributes.clone())
        .send()
        .await
        .unwrap();
    let redriven = schedkit::ops::dlq::redrive_selected(
        &sdk,
        &stack.dlq_url,
        &schedkit::ops::dlq::Destinations::one(&stack.queue_url),
        &schedkit::ops::dlq::Selection::default(),
        |_| {},
    )
    .await
    .unwrap();
    assert_eq!(redriven.done, 2);
    stack.run_until_drained(&[worker]).await;
    assert_eq!(
        runs.load(std::sync::atomic::Ordering::SeqCst),
        2,
        "the redrive ran it once more, and only once"
    );
    assert_eq!(
        stack.record(&key).await.unwrap().unwrap().status,
        Status::Failed
    );
    assert_eq!(
        stack.peek_dlq().await.unwrap().len(),
        1,
        "the new round's letter"
    );
}

/// A chain step that failed for good, sent again by Step Functions (it timed out waiting
/// for the answer, and sent the step anew): answered from its record, not run again.
/// (Another message reopened the FAILED run: a new round of attempts.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_step_sent_again_is_answered_from_its_record_not_run() {
    let sdk = schedkit_testkit::localstack().await;
    let stack = Stack::lane("failed-step", lane_options()).await;
    let runs = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let counted = runs.clone();
    let registry = Jobs::new()
        .add("close-books", move |_ctx: Ctx| {
            let counted = counted.clone();
            async move {
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                Ok::<_, schedkit::JobError>(json!(null))
            }
        })
        .bind_policies(|_| JobPolicy::default());
    let worker = stack.chain_processor(
        &sdk,
        registry,
        "[jobs.close-books]\nowner = \"o\"\n[chains.month-end]\nowner = \"o\"\nstages = [\"close-books\"]\n",
        Metrics::capture().0,
    );
    let chain_key = unique("month-end#2026-12-01T02:00:00Z");
    let key = format!("{chain_key}#close-books");
    let step = json!({
        "job": "close-books",
        "scheduled_for": "2026-12-01T02:00:00Z",
        "key": key,
        "payload": {},
        "chain": { "name": "month-end", "key": chain_key, "step": "close-books", "task_token": "t" },
    });
    let envelope = Envelope::parse(&step.to_string()).unwrap();
    let store = stack.store();
    let first = ClaimRequest {
        payload_hash: schedkit::key::payload_hash(&envelope),
        ..claim_request(&key, "close-books", "w:first")
    };
    let ClaimOutcome::Claimed { record, .. } = store.claim(&first).await.unwrap() else {
        panic!("a new key is claimed");
    };
    let failed = Finish::Failed {
        error: "the ledger is closed".into(),
    };
    store
        .finish(&record, &failed, chrono::Utc::now())
        .await
        .unwrap();
    stack.send(&step.to_string()).await.unwrap();
    let stats = stack.run_until_drained(&[worker]).await;
    assert_eq!(
        stats.outcomes.get("duplicate"),
        Some(&1),
        "{:?}",
        stats.outcomes
    );
    assert_eq!(
        runs.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "it ran again"
    );
    assert_eq!(
        stack.record(&key).await.unwrap().unwrap().status,
        Status::Failed
    );
}

/// A `skip` job's run that outlasts its slot's guess at its length (its lease twice: no
/// timeout), kept alive by heartbeats: a firing meanwhile is SKIPPED, never run beside it.
/// (The slot lapsed by the clock while the run went on.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_long_run_keeps_its_jobs_slot_while_its_lease_is_renewed() {
    let stack = Stack::lane("long-slot", lane_options()).await;
    // A job of its own: its overlap slot is on the table the lanes share.
    let job = unique("slow");
    let policy = JobPolicy {
        overlap: Overlap::Skip,
        timeout: None,
        ..JobPolicy::default().with_lease(Duration::from_secs(2))
    };
    let registry = Jobs::new()
        .add(&job, |ctx: Ctx| async move {
            let seconds = ctx.payload.get("seconds").and_then(|s| s.as_f64());
            tokio::time::sleep(Duration::from_secs_f64(seconds.unwrap_or(0.0))).await;
            Ok::<_, schedkit::JobError>(json!(null))
        })
        .bind_policies(|_| policy.clone());
    let worker = stack.processor(registry, "w", Metrics::capture().0);
    let (first, second) = (unique("first"), unique("second"));
    stack
        .send_envelope(&slow_run(&job, &first, json!({"seconds": 9})))
        .await
        .unwrap();
    let later = async {
        // Past the slot's guess (two leases: 4 s), the first run still going.
        tokio::time::sleep(Duration::from_secs(6)).await;
        stack
            .send_envelope(&slow_run(&job, &second, json!({})))
            .await
            .unwrap();
    };
    let both = [worker.clone(), worker];
    let (_, _) = tokio::join!(later, stack.run_until_drained(&both));
    let first = stack.record(&first).await.unwrap().unwrap();
    let second = stack.record(&second).await.unwrap().unwrap();
    assert_eq!(first.status, Status::Done);
    assert_eq!(
        second.status,
        Status::Skipped,
        "it ran beside the first: {second:?}"
    );
}
