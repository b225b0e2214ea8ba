//! Rust Lambdas run inside LocalStack without Docker, through schedkit's executor: the
//! Invoke API, logs, errors, timeouts, concurrency, SQS event source mappings and Step
//! Functions tasks.

use std::collections::BTreeSet;
use std::time::Duration;

use aws_sdk_lambda::types::FunctionResponseType;
use schedkit::{Envelope, Status};
use schedkit_testkit::lambda::{FunctionSpec, create_function, create_function_from, invoke};
use schedkit_testkit::{Stack, StackOptions, localstack, unique};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rust_function_is_created_invoked_and_its_logs_are_returned() {
    let sdk = localstack().await;
    let lambda = aws_sdk_lambda::Client::new(&sdk);
    let mut spec = FunctionSpec::new(&unique("probe"), "probe");
    spec.env
        .push(("PROBE_VAR".into(), "from-create-function".into()));
    create_function(&lambda, &spec).await.unwrap();

    let out = invoke(
        &lambda,
        &spec.name,
        &json!({"echo": {"n": 42}, "print": "hello from the probe"}),
    )
    .await
    .unwrap();
    assert_eq!(out.function_error, None);
    assert_eq!(out.payload, json!({"echo": {"n": 42}}));
    let lines: Vec<_> = out.log.lines().collect();
    assert!(lines[0].starts_with("START RequestId: "), "{}", out.log);
    assert!(lines.contains(&"hello from the probe"), "{}", out.log);
    assert!(
        lines.iter().any(|l| l.starts_with("END RequestId: ")),
        "{}",
        out.log
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("REPORT RequestId: ") && l.contains("Duration: ")),
        "{}",
        out.log
    );

    // The function's environment passes through; LocalStack's internals do not.
    let who = invoke(&lambda, &spec.name, &json!({"whoami": true}))
        .await
        .unwrap()
        .payload;
    assert_eq!(who["probe_var"], "from-create-function");
    assert_eq!(who["function_name"], spec.name.as_str());
    assert_eq!(who["sees_localstack_internals"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handler_errors_and_panics_come_back_as_function_errors() {
    let sdk = localstack().await;
    let lambda = aws_sdk_lambda::Client::new(&sdk);
    let spec = FunctionSpec::new(&unique("probe-err"), "probe");
    create_function(&lambda, &spec).await.unwrap();

    let error = invoke(
        &lambda,
        &spec.name,
        &json!({"error": "the ledger is locked"}),
    )
    .await
    .unwrap();
    assert_eq!(error.function_error.as_deref(), Some("Unhandled"));
    assert_eq!(
        error.payload["errorMessage"], "the ledger is locked",
        "{}",
        error.payload
    );
    assert!(error.payload["errorType"].is_string(), "{}", error.payload);

    let panic = invoke(&lambda, &spec.name, &json!({"panic": "index out of range"}))
        .await
        .unwrap();
    assert_eq!(panic.function_error.as_deref(), Some("Unhandled"));
    assert!(
        panic.payload.to_string().contains("index out of range"),
        "{}",
        panic.payload
    );

    let crash = invoke(&lambda, &spec.name, &json!({"exit": 3}))
        .await
        .unwrap();
    assert_eq!(crash.function_error.as_deref(), Some("Unhandled"));
    assert_eq!(
        crash.payload["errorType"], "Runtime.ExitError",
        "{}",
        crash.payload
    );
    let message = crash.payload["errorMessage"].as_str().unwrap();
    assert!(
        message.ends_with("Runtime exited with error: exit status 3"),
        "{message}"
    );

    let after = invoke(&lambda, &spec.name, &json!({"echo": "still serving"}))
        .await
        .unwrap();
    assert_eq!(
        (after.function_error, after.payload),
        (None, json!({"echo": "still serving"}))
    );
}

/// A zip with one file in it, mode 0755.
fn zip_with(name: &str, content: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut out = std::io::Cursor::new(Vec::new());
    let mut z = zip::ZipWriter::new(&mut out);
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Stored)
        .unix_permissions(0o755);
    z.start_file(name, options).unwrap();
    z.write_all(content).unwrap();
    z.finish().unwrap();
    out.into_inner()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bootstrap_this_host_cannot_run_fails_the_function_with_the_reason() {
    let sdk = localstack().await;
    let lambda = aws_sdk_lambda::Client::new(&sdk);
    let cases = [
        (
            "main",
            b"\x7fELF".as_slice(),
            "the function's zip has no 'bootstrap' file at its root",
        ),
        (
            "bootstrap",
            b"just some text".as_slice(),
            "'bootstrap' is neither an ELF executable nor a script",
        ),
    ];
    for (file, content, reason) in cases {
        let spec = FunctionSpec::new(&unique("broken"), "probe");
        let error = create_function_from(&lambda, &spec, zip_with(file, content))
            .await
            .unwrap_err();
        assert!(error.to_string().contains(reason), "{error}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_outliving_its_timeout_is_timed_out_and_the_next_invoke_works() {
    let sdk = localstack().await;
    let lambda = aws_sdk_lambda::Client::new(&sdk);
    let mut spec = FunctionSpec::new(&unique("probe-timeout"), "probe");
    spec.timeout_seconds = 1;
    create_function(&lambda, &spec).await.unwrap();
    let before = invoke(&lambda, &spec.name, &json!({"whoami": true}))
        .await
        .unwrap()
        .payload;

    let out = invoke(&lambda, &spec.name, &json!({"sleep_ms": 5000}))
        .await
        .unwrap();
    assert_eq!(out.function_error.as_deref(), Some("Unhandled"));
    let message = out.payload["errorMessage"].as_str().unwrap_or_default();
    assert!(
        message.ends_with("Task timed out after 1.00 seconds"),
        "{}",
        out.payload
    );
    assert!(
        out.log.contains("Task timed out after 1.00 seconds"),
        "{}",
        out.log
    );

    let next = invoke(&lambda, &spec.name, &json!({"whoami": true}))
        .await
        .unwrap();
    assert_eq!(next.function_error, None);
    assert_ne!(
        next.payload["pid"], before["pid"],
        "a fresh bootstrap serves after a timeout"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bootstrap_that_dies_while_idle_is_replaced_for_the_next_invoke() {
    let sdk = localstack().await;
    let lambda = aws_sdk_lambda::Client::new(&sdk);
    let spec = FunctionSpec::new(&unique("probe-idle-exit"), "probe");
    create_function(&lambda, &spec).await.unwrap();
    let first = invoke(
        &lambda,
        &spec.name,
        &json!({"whoami": true, "exit_after_ms": 100}),
    )
    .await
    .unwrap();
    assert_eq!(first.function_error, None, "{}", first.payload);
    // Wait until that bootstrap has exited (it runs on this host; a zombie until its
    // init reaps it).
    let pid = first.payload["pid"].as_u64().unwrap();
    let running = || {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
            stat.rsplit_once(')')
                .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
        })
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while running() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "bootstrap {pid} did not exit"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Before, the init waited for the dead bootstrap to ask for work, and LocalStack gave
    // up on the invoke only after 15 minutes.
    let next = tokio::time::timeout(
        Duration::from_secs(30),
        invoke(&lambda, &spec.name, &json!({"whoami": true})),
    )
    .await
    .expect("the invoke after an idle crash is answered")
    .unwrap();
    assert_eq!(next.function_error, None, "{}", next.payload);
    assert_ne!(
        next.payload["pid"], first.payload["pid"],
        "a new bootstrap serves it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_init_that_never_finishes_fails_the_invoke_after_the_init_limit() {
    let sdk = localstack().await;
    let lambda = aws_sdk_lambda::Client::new(&sdk);
    let mut spec = FunctionSpec::new(&unique("probe-slow-init"), "probe");
    spec.timeout_seconds = 1;
    // Longer than the 10 s AWS allows an init.
    spec.env = vec![("PROBE_INIT_SLEEP_MS".into(), "600000".into())];
    create_function(&lambda, &spec).await.unwrap();
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        invoke(&lambda, &spec.name, &json!({"echo": 1})),
    )
    .await
    .expect("answered once the init limit has passed")
    .unwrap();
    assert_eq!(
        out.function_error.as_deref(),
        Some("Unhandled"),
        "{}",
        out.payload
    );
    let message = out.payload["errorMessage"].as_str().unwrap_or_default();
    assert!(
        message.contains("did not finish its init within 10.00 seconds"),
        "{}",
        out.payload
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_invokes_run_in_separate_environments() {
    let sdk = localstack().await;
    let lambda = aws_sdk_lambda::Client::new(&sdk);
    let spec = FunctionSpec::new(&unique("probe-conc"), "probe");
    create_function(&lambda, &spec).await.unwrap();
    let payload = json!({"sleep_ms": 1500, "whoami": true});
    let calls = (0..3).map(|_| invoke(&lambda, &spec.name, &payload));
    let answers = futures::future::join_all(calls).await;
    let mut pids = BTreeSet::new();
    let mut groups = BTreeSet::new();
    let mut ports = BTreeSet::new();
    for a in answers {
        let who = a.unwrap().payload;
        pids.insert(who["pid"].as_u64().unwrap());
        groups.insert(who["pgid"].as_i64().unwrap());
        ports.insert(who["runtime_api"].as_str().unwrap().to_string());
    }
    assert_eq!(pids.len(), 3, "three processes: {pids:?}");
    assert_eq!(
        groups.len(),
        3,
        "three environments (process groups): {groups:?}"
    );
    assert_eq!(ports.len(), 3, "three Runtime API ports: {ports:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sqs_event_source_mapping_drives_the_worker_with_partial_batch_responses() {
    let sdk = localstack().await;
    // maxReceiveCount 2: a message reported failed twice is moved to the DLQ by SQS.
    let options = StackOptions {
        visibility_timeout: Some(5),
        max_receive_count: Some(2),
        ..StackOptions::default()
    };
    let stack = Stack::create(&sdk, &unique("esm"), options).await.unwrap();
    let lambda = aws_sdk_lambda::Client::new(&sdk);
    let mut spec = FunctionSpec::new(&format!("{}-worker", stack.name), "worker");
    spec.timeout_seconds = 5;
    spec.env = stack
        .worker_env()
        .into_iter()
        .filter(|(k, _)| k.starts_with("SCHEDKIT_"))
        .collect();
    create_function(&lambda, &spec).await.unwrap();

    let at = "2026-11-01T09:00:00Z".parse().unwrap();
    let mut invoice = Envelope::new("record-invoice", at);
    invoice.payload = json!({"tenant": "esm", "billing_month": "2026-10", "amount_cents": 7})
        .as_object()
        .cloned();
    let mut flaky = Envelope::new("flaky-sync", at);
    flaky.payload = json!({"fail_times": 1}).as_object().cloned();
    let failing = Envelope::new("partner-export", at);
    for e in [&invoice, &flaky, &failing] {
        stack.send_envelope(e).await.unwrap();
    }
    let queue_arn = stack.arn_of(&stack.queue_url);
    lambda
        .create_event_source_mapping()
        .function_name(&spec.name)
        .event_source_arn(&queue_arn)
        .batch_size(10)
        .function_response_types(FunctionResponseType::ReportBatchItemFailures)
        .send()
        .await
        .unwrap();

    // Wait until the jobs queue is empty and the DLQ holds the always-failing message.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let queue = stack.counts(&stack.queue_url).await.unwrap();
        let dlq = stack.counts(&stack.dlq_url).await.unwrap();
        if queue == (0, 0, 0) && dlq.0 == 1 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "queue {queue:?}, dlq {dlq:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let records = stack.records().await.unwrap();
    let by_job = |job: &str| records.iter().find(|r| r.job == job).unwrap();
    // Succeeded first time: deleted by LocalStack after the batch response.
    assert_eq!(
        (
            by_job("record-invoice").status,
            by_job("record-invoice").attempt
        ),
        (Status::Done, 1)
    );
    // Reported failed once, came back, succeeded.
    assert_eq!(
        (by_job("flaky-sync").status, by_job("flaky-sync").attempt),
        (Status::Done, 2)
    );
    // Reported failed on both receives, then moved by the redrive policy.
    assert_eq!(
        (
            by_job("partner-export").status,
            by_job("partner-export").attempt
        ),
        (Status::Retrying, 2)
    );
    let letters = stack.drain_dlq(Duration::from_secs(5)).await.unwrap();
    assert_eq!(letters[0].body.as_deref(), Some(failing.to_json().as_str()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_functions_lambda_task_invokes_a_rust_function() {
    let sdk = localstack().await;
    let lambda = aws_sdk_lambda::Client::new(&sdk);
    let sfn = aws_sdk_sfn::Client::new(&sdk);
    let spec = FunctionSpec::new(&unique("probe-sfn"), "probe");
    let arn = create_function(&lambda, &spec).await.unwrap();
    let definition = json!({
        "StartAt": "Call",
        "States": {"Call": {"Type": "Task", "Resource": arn, "End": true}}
    });
    let machine = sfn
        .create_state_machine()
        .name(unique("chain"))
        .definition(definition.to_string())
        .role_arn("arn:aws:iam::000000000000:role/sfn-role")
        .send()
        .await
        .unwrap()
        .state_machine_arn;
    let execution = sfn
        .start_execution()
        .state_machine_arn(machine)
        .input(json!({"echo": "through step functions"}).to_string())
        .send()
        .await
        .unwrap()
        .execution_arn;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let described = loop {
        let d = sfn
            .describe_execution()
            .execution_arn(&execution)
            .send()
            .await
            .unwrap();
        if d.status != aws_sdk_sfn::types::ExecutionStatus::Running {
            break d;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "execution still running"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(
        described.status,
        aws_sdk_sfn::types::ExecutionStatus::Succeeded,
        "{described:?}"
    );
    let output: serde_json::Value =
        serde_json::from_str(described.output.as_deref().unwrap()).unwrap();
    assert_eq!(output, json!({"echo": "through step functions"}));
}
