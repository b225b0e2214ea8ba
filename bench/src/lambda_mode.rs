//! Both sides as Lambda functions behind the project's Runtime API (the init LocalStack
//! runs functions with, `schedkit_lambda_init`, driven directly here): the worker's release
//! binary as a `provided.al2023` bootstrap, the peer under `awslambdaric` (the runtime
//! interface client AWS's Python images use) from `bench/peer/bootstrap`. The events are
//! what an SQS event source mapping delivers: messages received from the jobs queue, their
//! receipts live, deleted after a clean response.
//!
//! - **cold start**: the bootstrap's start to the first event handled (one invoice);
//! - **batch latency**: a warm invocation of 10 invoices that each await 50 ms before their
//!   write (`render_seconds`), the I/O-bound batch;
//! - **duration per job**: a warm invocation of 10 plain invoices, divided by 10 (what
//!   Lambda bills, for the cost).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use aws_lambda_events::event::sqs::SqsEvent;
use schedkit_lambda_init::{Environment, FunctionConfig, Invoke, Outcome};
use schedkit_testkit::Stack;

use crate::sides::{Programs, Side};
use crate::throughput::{invoice, recreate_table};

/// Milliseconds, per side.
#[derive(Debug, Clone, Default)]
pub struct LambdaMode {
    pub cold_start_ms: BTreeMap<Side, Vec<f64>>,
    pub io_batch_ms: BTreeMap<Side, Vec<f64>>,
    pub duration_per_job_ms: BTreeMap<Side, Vec<f64>>,
    /// The init part of each cold start (the `REPORT` line's `Init Duration`).
    pub init_ms: BTreeMap<Side, Vec<f64>>,
    /// `Max Memory Used` of each environment's last invocation (its peak RSS), MB.
    pub max_memory_mb: BTreeMap<Side, Vec<f64>>,
}

/// How long each job of the I/O-bound batch awaits.
pub const IO_WAIT_SECONDS: f64 = 0.05;

struct Function<'a> {
    stack: &'a Stack,
    config: FunctionConfig,
    next_tenant: usize,
}

impl Function<'_> {
    /// `n` fresh invoices sent and received as the event source mapping would.
    async fn event(
        &mut self,
        n: usize,
        render_seconds: f64,
    ) -> anyhow::Result<(Vec<u8>, Vec<String>)> {
        let bodies: Vec<String> = (0..n)
            .map(|i| invoice(self.next_tenant + i, render_seconds))
            .collect();
        self.next_tenant += n;
        self.stack
            .send_all(bodies.iter().map(String::as_str))
            .await?;
        let mut records = Vec::new();
        let started = Instant::now();
        while records.len() < n {
            anyhow::ensure!(
                started.elapsed() < Duration::from_secs(30),
                "only {} of the {n} messages came back from the queue",
                records.len()
            );
            let out = self
                .stack
                .sqs
                .receive_message()
                .queue_url(&self.stack.queue_url)
                .max_number_of_messages((n - records.len()).min(10) as i32)
                .visibility_timeout(300)
                .wait_time_seconds(1)
                .message_system_attribute_names(aws_sdk_sqs::types::MessageSystemAttributeName::All)
                .send()
                .await?;
            records.extend(out.messages.unwrap_or_default().into_iter().map(|m| {
                let mut m = schedkit::poller::to_event_message(m);
                m.event_source_arn = Some("arn:aws:sqs:us-east-1:000000000000:bench".into());
                m.aws_region = Some("us-east-1".into());
                m
            }));
        }
        let receipts = records
            .iter()
            .filter_map(|r| r.receipt_handle.clone())
            .collect();
        let mut event = SqsEvent::default();
        event.records = records;
        Ok((serde_json::to_vec(&event)?, receipts))
    }

    /// One invocation: its wall time and `REPORT` line; fails unless every record succeeded.
    async fn invoke(
        &self,
        env: &mut Environment,
        event: Vec<u8>,
        receipts: &[String],
    ) -> anyhow::Result<(Duration, String)> {
        let started = Instant::now();
        let invoked = env
            .invoke(Invoke {
                request_id: uuid::Uuid::new_v4().to_string(),
                payload: event.into(),
                function_arn: "arn:aws:lambda:us-east-1:000000000000:function:bench".into(),
                trace_id: String::new(),
            })
            .await;
        let took = started.elapsed();
        let body = match &invoked.outcome {
            Outcome::Response(body) => body,
            Outcome::Error(body) => anyhow::bail!(
                "the function failed: {}\n{}",
                String::from_utf8_lossy(body),
                invoked.logs
            ),
        };
        let response: serde_json::Value = serde_json::from_slice(body)?;
        let failures = response["batchItemFailures"].as_array().map_or(0, Vec::len);
        anyhow::ensure!(
            failures == 0,
            "{failures} records failed: {response}\n{}",
            invoked.logs
        );
        // What the event source mapping does after a clean response.
        crate::sqs::delete_received(self.stack, receipts).await?;
        let report = invoked
            .logs
            .lines()
            .rfind(|l| l.starts_with("REPORT"))
            .unwrap_or_default()
            .to_string();
        Ok((took, report))
    }
}

fn config(programs: &Programs, stack: &Stack, side: Side, idempotency: &str) -> FunctionConfig {
    // LocalStack directly: a forwarder in between would cost the side with more requests
    // in flight more (its CPU competes with LocalStack's on a small machine).
    let mut env = stack.worker_env();
    for (k, v) in [
        ("AWS_DEFAULT_REGION", "us-east-1".into()),
        ("AWS_LAMBDA_FUNCTION_NAME", "bench".into()),
        ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128".into()),
        ("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST".into()),
        ("AWS_LAMBDA_LOG_GROUP_NAME", "/aws/lambda/bench".into()),
        ("AWS_LAMBDA_LOG_STREAM_NAME", "bench".into()),
    ] {
        env.push((k.into(), v));
    }
    let (bootstrap, task_root): (PathBuf, PathBuf) = match side {
        Side::Schedkit => (
            programs.worker.clone(),
            programs.worker.parent().expect("a directory").to_path_buf(),
        ),
        Side::Powertools => {
            for (k, v) in [
                ("PEER_PYTHON", programs.python.display().to_string()),
                ("PEER_QUEUE_URL", stack.queue_url.clone()),
                ("PEER_IDEMPOTENCY_TABLE", idempotency.to_string()),
                ("PEER_EFFECTS_TABLE", stack.effects_table.clone()),
            ] {
                env.push((k.into(), v));
            }
            (programs.peer_dir().join("bootstrap"), programs.peer_dir())
        }
    };
    FunctionConfig {
        bootstrap,
        task_root,
        env,
        timeout: Duration::from_secs(60),
        memory_mb: 128,
        version: "$LATEST".into(),
    }
}

/// A number of a `REPORT` line: `Init Duration: 20.00 ms` → 20.0.
fn report_field(report: &str, name: &str) -> Option<f64> {
    report
        .split('\t')
        .find_map(|f| f.trim().strip_prefix(name)?.strip_prefix(": "))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// `cold_starts` fresh environments per side, alternating; in each, after the cold
/// invocation, `batches` warm invocations of each batch kind.
pub async fn run(
    programs: &Programs,
    stack: &Stack,
    cold_starts: usize,
    batches: usize,
) -> anyhow::Result<LambdaMode> {
    let idempotency = format!("{}-powertools-idempotency", stack.name);
    stack.reset().await?;
    recreate_table(&stack.ddb, &idempotency).await?;
    println!(
        "lambda mode: {cold_starts} cold starts per side, {batches} warm batches of each kind after each"
    );
    let mut out = LambdaMode::default();
    let mut next_tenant = 100_000;
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    for round in 0..cold_starts {
        for side in Side::order(round) {
            let mut f = Function {
                stack,
                config: config(programs, stack, side, &idempotency),
                next_tenant,
            };
            let (event, receipts) = f.event(1, 0.0).await?;
            let started = Instant::now();
            let mut env = Environment::start(f.config.clone())
                .await
                .map_err(|e| anyhow::anyhow!("{}: {e}", side.label()))?;
            let first = f.invoke(&mut env, event, &receipts).await;
            let cold = started.elapsed();
            let (_, report) = first?;
            out.cold_start_ms.entry(side).or_default().push(ms(cold));
            if let Some(init) = report_field(&report, "Init Duration") {
                out.init_ms.entry(side).or_default().push(init);
            }
            let mut last_report = report;
            for _ in 0..batches {
                let (event, receipts) = f.event(10, IO_WAIT_SECONDS).await?;
                let (took, _) = f.invoke(&mut env, event, &receipts).await?;
                out.io_batch_ms.entry(side).or_default().push(ms(took));
                let (event, receipts) = f.event(10, 0.0).await?;
                let (took, report) = f.invoke(&mut env, event, &receipts).await?;
                last_report = report;
                out.duration_per_job_ms
                    .entry(side)
                    .or_default()
                    .push(ms(took) / 10.0);
            }
            if let Some(mb) = report_field(&last_report, "Max Memory Used") {
                out.max_memory_mb.entry(side).or_default().push(mb);
            }
            env.shutdown().await;
            next_tenant = f.next_tenant;
            println!(
                "  round {}: {:<34} cold start {:>7.1} ms, I/O batch median {:>6.1} ms",
                round + 1,
                side.label(),
                ms(cold),
                crate::stats::median(&out.io_batch_ms[&side]),
            );
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_lines_numbers_are_read_by_name() {
        let report = "REPORT RequestId: r\tDuration: 12.35 ms\tBilled Duration: 13 ms\tMemory Size: 128 MB\tMax Memory Used: 17 MB\tInit Duration: 20.50 ms";
        assert_eq!(report_field(report, "Init Duration"), Some(20.5));
        assert_eq!(report_field(report, "Max Memory Used"), Some(17.0));
        assert_eq!(report_field(report, "Nothing"), None);
    }
}
