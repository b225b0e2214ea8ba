//! The built worker binary in Lambda mode, driven through a Lambda Runtime API.

use std::time::Duration;

use schedkit::{Envelope, Status};
use schedkit_lambda_init::{Environment, FunctionConfig, Invoke, Outcome};
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
        r.event_source_arn = Some(stack.arn_of(&stack.queue_url));
        r.aws_region = Some("us-east-1".into());
    }
    let event = json!({ "Records": records });

    // The worker binary as Lambda runs it: polled through the Runtime API of schedkit's
    // Lambda init (the same component LocalStack uses without Docker).
    let binary = schedkit_testkit::binary("worker");
    let mut env = stack.worker_env();
    env.extend(
        [
            ("AWS_LAMBDA_FUNCTION_NAME", "schedkit-worker"),
            ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256"),
            ("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST"),
            ("RUST_LOG", "warn"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string())),
    );
    let mut environment = Environment::start(FunctionConfig {
        task_root: binary.parent().unwrap().to_path_buf(),
        bootstrap: binary,
        env,
        timeout: Duration::from_secs(30),
        memory_mb: 256,
        version: "$LATEST".into(),
    })
    .await
    .unwrap();
    let invoke = |payload: serde_json::Value| Invoke {
        request_id: uuid::Uuid::new_v4().to_string(),
        payload: payload.to_string().into(),
        function_arn: "arn:aws:lambda:us-east-1:000000000000:function:schedkit-worker".into(),
        trace_id: String::new(),
    };
    let response = |outcome: Outcome| match outcome {
        Outcome::Response(body) => serde_json::from_slice::<serde_json::Value>(&body).unwrap(),
        Outcome::Error(body) => panic!("function error: {}", String::from_utf8_lossy(&body)),
    };

    let answer = environment.invoke(invoke(event)).await;
    // The retryable failure is reported; the success and the dead-lettered poison are not.
    assert_eq!(
        response(answer.outcome),
        json!({"batchItemFailures": [{"itemIdentifier": flaky_id}]})
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
    let pid = environment.bootstrap_pid();
    let empty = environment.invoke(invoke(json!({"Records": []}))).await;
    assert_eq!(response(empty.outcome), json!({"batchItemFailures": []}));
    assert_eq!(environment.bootstrap_pid(), pid);
    environment.shutdown().await;
}

/// Through LocalStack's event source mapping and the Docker-free executor: the worker
/// function's timeout cut to 5 s, a report that needs two minutes. Each invocation cancels
/// the attempt before its deadline and records it; after the job's two attempts the run is
/// FAILED and its message in the DLQ with that reason (not retried until maxReceiveCount,
/// not left RUNNING).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_longer_than_the_function_timeout_ends_failed_with_its_reason_after_its_attempts() {
    let sdk = localstack().await;
    let options = StackOptions {
        worker_event_source: true,
        ..StackOptions::default()
    };
    let stack = Stack::create(&sdk, &unique("fn-timeout"), options)
        .await
        .unwrap();
    let lambda = aws_sdk_lambda::Client::new(&sdk);
    lambda
        .update_function_configuration()
        .function_name(&stack.worker_function)
        .timeout(5)
        .send()
        .await
        .unwrap();
    schedkit_testkit::lambda::wait_updated(&lambda, &stack.worker_function)
        .await
        .unwrap();
    let mut report = Envelope::new("long-report", "2026-11-01T03:00:00Z".parse().unwrap());
    report.payload = json!({"seconds": 120}).as_object().cloned();
    stack.send_envelope(&report).await.unwrap();

    let letters = stack.drain_dlq(Duration::from_secs(90)).await.unwrap();
    assert_eq!(letters.len(), 1, "the report's message is dead-lettered");
    let attrs = letters[0].message_attributes.as_ref().unwrap();
    let text = |name: &str| attrs[name].string_value.clone().unwrap_or_default();
    assert_eq!(
        text(schedkit::dead_letter::attr::REASON),
        "attempts-exhausted"
    );
    let error = text(schedkit::dead_letter::attr::ERROR);
    assert!(
        error.starts_with("cancelled before the function's deadline"),
        "{error}"
    );
    let record = stack.records().await.unwrap().pop().unwrap();
    assert_eq!((record.status, record.attempt), (Status::Failed, 2));
    assert_eq!(record.history.len(), 2, "{:?}", record.history);
}
