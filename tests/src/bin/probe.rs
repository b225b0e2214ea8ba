//! `probe`: a test Lambda (`provided.al2023`) whose payload says what to do, so tests can
//! drive the executor through every path: echo, print, fail, panic, exit (now or after
//! answering), sleep, report who and
//! where it runs, and answer SQS batches with failures for bodies that contain "fail".

use std::time::Duration;

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use lambda_runtime::{Error, LambdaEvent, service_fn};
use serde_json::{Value, json};

async fn handle(event: LambdaEvent<Value>) -> Result<Value, Error> {
    let p = event.payload;
    if p.get("Records").is_some() {
        let batch: SqsEvent = serde_json::from_value(p)?;
        let mut response = SqsBatchResponse::default();
        for r in batch.records {
            println!("probe got {}", r.body.as_deref().unwrap_or_default());
            if r.body.as_deref().unwrap_or_default().contains("fail") {
                response.add_failure(r.message_id.unwrap_or_default());
            }
        }
        return Ok(serde_json::to_value(response)?);
    }
    if let Some(ms) = p.get("sleep_ms").and_then(Value::as_u64) {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
    if let Some(text) = p.get("print").and_then(Value::as_str) {
        println!("{text}");
    }
    if let Some(message) = p.get("error").and_then(Value::as_str) {
        return Err(message.into());
    }
    if let Some(message) = p.get("panic").and_then(Value::as_str) {
        panic!("{message}");
    }
    if let Some(code) = p.get("exit").and_then(Value::as_i64) {
        std::process::exit(code as i32);
    }
    if let Some(ms) = p.get("exit_after_ms").and_then(Value::as_u64) {
        // Answers, then dies while idle (as an out-of-memory kill would).
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(ms));
            std::process::exit(9);
        });
    }
    if p.get("whoami").is_some() {
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
        // Fields after the command name: state, ppid, pgrp, ...
        let after = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest)
            .unwrap_or_default();
        let pgid: i64 = after
            .split_whitespace()
            .nth(2)
            .and_then(|v| v.parse().ok())
            .unwrap_or(-1);
        let var = |name: &str| std::env::var(name).ok();
        return Ok(json!({
            "pid": std::process::id(),
            "pgid": pgid,
            "runtime_api": var("AWS_LAMBDA_RUNTIME_API"),
            "function_name": var("AWS_LAMBDA_FUNCTION_NAME"),
            "task_root": var("LAMBDA_TASK_ROOT"),
            "probe_var": var("PROBE_VAR"),
            "sees_localstack_internals": var("LOCALSTACK_RUNTIME_ENDPOINT").is_some(),
        }));
    }
    Ok(json!({ "echo": p.get("echo").cloned().unwrap_or(Value::Null) }))
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    // PROBE_INIT_SLEEP_MS: an init that takes this long before asking for work.
    if let Some(ms) = std::env::var("PROBE_INIT_SLEEP_MS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
    lambda_runtime::run(service_fn(handle)).await
}
