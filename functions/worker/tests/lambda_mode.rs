//! The built worker binary in Lambda mode, driven through a Lambda Runtime API (acceptance i).

use std::time::Duration;

use schedkit::{Envelope, Status};
use schedkit_testkit::runtime_api::{Invocation, RuntimeApi};
use schedkit_testkit::{Stack, StackOptions, localstack, unique};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lambda_binary_returns_the_partial_batch_response() {
    let sdk = localstack().await;
    let stack = Stack::create(&sdk, &unique("lambda"), StackOptions::default())
        .await
        .unwrap();
    let at = "2026-11-01T05:00:00Z".parse().unwrap();
    let mut invoice = Envelope::new("record-invoice", at);
    invoice.payload = json!({"tenant": "acme", "billing_month": "2026-10", "amount_cents": 5})
        .as_object()
        .cloned();
    let mut flaky = Envelope::new("flaky-sync", at);
    flaky.payload = json!({"fail_times": 1}).as_object().cloned();
    stack.send_envelope(&invoice).await.unwrap();
    let flaky_id = stack.send_envelope(&flaky).await.unwrap();
    stack.send("{not an envelope").await.unwrap();

    // The batch as Lambda's SQS event source mapping would deliver it.
    let mut records = stack.receive(3, Duration::from_secs(5)).await.unwrap();
    assert_eq!(records.len(), 3);
    for r in &mut records {
        r.event_source_arn = Some(format!(
            "arn:aws:sqs:us-east-1:000000000000:{}-jobs",
            stack.name
        ));
        r.aws_region = Some("us-east-1".into());
    }
    let event = json!({ "Records": records });

    let api = RuntimeApi::start().await.unwrap();
    let _worker = tokio::process::Command::new(env!("CARGO_BIN_EXE_worker"))
        .envs(stack.worker_env())
        .env("AWS_LAMBDA_RUNTIME_API", api.address())
        .env("AWS_LAMBDA_FUNCTION_NAME", "schedkit-worker")
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();

    let answer = api.invoke(&event, Duration::from_secs(30)).await.unwrap();
    // The retryable failure is reported; the success and the dead-lettered poison are not.
    assert_eq!(
        answer,
        Invocation::Response(json!({"batchItemFailures": [{"itemIdentifier": flaky_id}]}))
    );
    let records = stack.records().await.unwrap();
    let mut statuses: Vec<_> = records.iter().map(|r| (r.job.as_str(), r.status)).collect();
    statuses.sort();
    assert_eq!(
        statuses,
        [
            ("flaky-sync", Status::Retrying),
            ("record-invoice", Status::Done)
        ]
    );
    assert_eq!(
        stack.drain_dlq(Duration::from_secs(5)).await.unwrap().len(),
        1
    );

    // The same process serves the next invocation.
    let empty = api
        .invoke(&json!({"Records": []}), Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(
        empty,
        Invocation::Response(json!({"batchItemFailures": []}))
    );
}
