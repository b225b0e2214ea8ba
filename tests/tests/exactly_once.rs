//! At-least-once delivery in, effect applied once out; DynamoDB requests per run counted on
//! the wire: two per success with or without committed effects, one per duplicate.

use std::time::Duration;

use schedkit::{Envelope, JobPolicy, Jobs, Metrics, Registry, Status};
use schedkit_testkit::{RequestCounter, Stack, StackOptions, localstack};
use schedkit_worker::jobs::{EffectsTable, record_invoice};
use serde_json::json;

fn invoice(tenant: &str) -> Envelope {
    let mut e = Envelope::new("record-invoice", "2026-11-01T00:00:00Z".parse().unwrap());
    e.payload = json!({"tenant": tenant, "billing_month": "2026-10", "amount_cents": 1250})
        .as_object()
        .cloned();
    e
}

/// `record-invoice`'s policy: a short lease, so deliveries bounced as in-progress come back
/// soon.
fn invoice_policy() -> JobPolicy {
    JobPolicy {
        key_template: Some("invoice:{billing_month}:{tenant}".parse().unwrap()),
        ..JobPolicy::default().with_lease(Duration::from_secs(2))
    }
}

/// `record-invoice` on the stack's effects table.
fn jobs(stack: &Stack) -> Jobs<EffectsTable> {
    Jobs::with_state(stack.effects()).add("record-invoice", record_invoice)
}

/// [`jobs`] under [`invoice_policy`].
fn registry(stack: &Stack) -> Registry {
    jobs(stack).bind_policies(|_| invoice_policy())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn twenty_concurrent_deliveries_apply_the_effect_once() {
    let stack = Stack::lane("once", StackOptions::default()).await;
    let envelope = invoice("acme");
    for _ in 0..20 {
        stack.send_envelope(&envelope).await.unwrap();
    }
    // All 20 deliveries are in hand at once, split over four workers that run together.
    let messages = stack.receive(20, Duration::from_secs(10)).await.unwrap();
    assert_eq!(messages.len(), 20);
    let workers: Vec<_> = (0..4)
        .map(|i| stack.processor(registry(&stack), &format!("w{i}"), Metrics::capture().0))
        .collect();
    let batches = messages.chunks(5).map(|c| c.to_vec()).collect::<Vec<_>>();
    let first = futures::future::join_all(workers.iter().zip(batches).map(|(w, batch)| async {
        let reports = w.process(batch, None).await;
        schedkit::poller::delete_acknowledged(&stack.sqs, &stack.queue_url, &reports).await;
        reports
    }))
    .await;
    // Deliveries that met the run in progress were sent again to come back; drain them too.
    let rest = stack.run_until_drained(&workers).await;

    // Each delivery ends in one outcome that decides it; a copy sent again to come back
    // later hands its delivery on to the copy.
    let finals: Vec<_> = first
        .into_iter()
        .flatten()
        .chain(rest.reports)
        .filter(|r| r.outcome.acknowledged() && !r.outcome.deleted())
        .collect();
    let count = |label: &str| finals.iter().filter(|r| r.outcome.label() == label).count();
    assert_eq!(
        finals.len(),
        20,
        "every delivery is acknowledged exactly once"
    );
    assert_eq!(count("succeeded"), 1);
    assert_eq!(count("duplicate"), 19);
    let key = "invoice:2026-10:acme";
    assert_eq!(
        stack.effect_applied(key).await.unwrap(),
        1,
        "side effect applied once"
    );
    let record = stack.record(key).await.unwrap().expect("record exists");
    assert_eq!((record.status, record.attempt), (Status::Done, 1));
    assert_eq!(stack.counts(&stack.queue_url).await.unwrap(), (0, 0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamodb_requests_are_two_per_success_and_one_per_duplicate() {
    let sdk = localstack().await;
    let stack = Stack::lane("requests", StackOptions::default()).await;
    let counter = RequestCounter::all();
    let counted = aws_sdk_dynamodb::Client::from_conf(
        aws_sdk_dynamodb::config::Builder::from(&sdk)
            .interceptor(counter.clone())
            .build(),
    );
    // Every DynamoDB request of the worker goes through the store's client: `record-invoice`
    // hands its write as an effect, committed with the outcome; `noop` has none.
    let worker = schedkit::Processor::new(
        schedkit::DynamoStore::new(counted, &stack.table),
        stack.sqs.clone(),
        jobs(&stack)
            .add("noop", |_ctx: schedkit::Ctx| async {
                Ok::<_, schedkit::JobError>(json!(null))
            })
            // Longer than its lease: kept by heartbeats every 750 ms, counted apart (a lease of
            // 3 s leaves room for two slow renewals on a loaded machine; 2 s lapsed once
            // under four suites at once on two cores, its run claimed twice).
            .add("long", |_ctx: schedkit::Ctx| async {
                tokio::time::sleep(Duration::from_millis(3600)).await;
                Ok::<_, schedkit::JobError>(json!(null))
            })
            .bind_policies(|name| match name {
                "record-invoice" => invoice_policy(),
                "long" => JobPolicy::default().with_lease(Duration::from_secs(3)),
                _ => JobPolicy::default(),
            }),
        stack.config("counted"),
        Metrics::capture().0,
    );

    for tenant in ["a", "b", "c"] {
        stack.send_envelope(&invoice(tenant)).await.unwrap();
    }
    for hour in [1, 2] {
        let at = format!("2026-11-01T{hour:02}:00:00Z").parse().unwrap();
        stack
            .send_envelope(&Envelope::new("noop", at))
            .await
            .unwrap();
    }
    stack
        .send_envelope(&Envelope::new(
            "long",
            "2026-11-01T03:00:00Z".parse().unwrap(),
        ))
        .await
        .unwrap();
    let stats = stack.run_until_drained(std::slice::from_ref(&worker)).await;
    assert_eq!(stats.outcomes.get("succeeded"), Some(&6));
    let heartbeats = counter.heartbeats();
    assert_eq!(
        counter.get(),
        6 * 2,
        "claim + complete per success, claim + commit (effect included) per success with effects \
         (outcomes {:?}, {heartbeats} heartbeats, {} retries by the SDK)",
        stats.outcomes,
        counter.retries()
    );
    // The long run's renewals, reported apart: one per 750 ms of its 3.6 s.
    println!("heartbeats: {heartbeats} for one 3.6 s run with a 3 s lease");
    assert!((3..=7).contains(&heartbeats), "{heartbeats}");
    for tenant in ["a", "b", "c"] {
        let key = format!("invoice:2026-10:{tenant}");
        assert_eq!(stack.effect_applied(&key).await.unwrap(), 1);
    }

    counter.reset();
    for tenant in ["a", "b", "c", "a"] {
        stack.send_envelope(&invoice(tenant)).await.unwrap();
    }
    let stats = stack.run_until_drained(std::slice::from_ref(&worker)).await;
    assert_eq!(stats.outcomes.get("duplicate"), Some(&4));
    assert_eq!(counter.get(), 4, "one refused claim per duplicate");
    assert_eq!(counter.heartbeats(), 0);
}
