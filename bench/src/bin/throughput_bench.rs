//! Worker throughput on LocalStack, side by side with a peer in the same run: schedkit's
//! batch adapter (a claim and a completion in DynamoDB per message, heartbeats off) against
//! a plain at-least-once consumer (receive, run, delete; no idempotency), over the same
//! number of no-op jobs. The difference is the price of "effect applied once".
//!
//! `cargo run --bin throughput-bench -- [--messages 1000] [--concurrency 10]` with LocalStack running.

use std::time::{Duration, Instant};

use clap::Parser;
use schedkit::poller::{PollOptions, poll, to_event_message};
use schedkit::{Ctx, Envelope, JobPolicy, Jobs, Metrics};
use schedkit_testkit::{Stack, StackOptions, localstack, unique};

#[derive(Parser)]
struct Args {
    #[arg(long, default_value_t = 1000)]
    messages: usize,
    /// Messages of a batch processed at once (schedkit) / in flight at once (peer).
    #[arg(long, default_value_t = 10)]
    concurrency: usize,
}

async fn fill(stack: &Stack, n: usize) -> anyhow::Result<()> {
    let start = chrono::Utc::now();
    let bodies: Vec<String> = (0..n)
        .map(|i| Envelope::new("noop", start + chrono::Duration::seconds(i as i64)).to_json())
        .collect();
    stack.send_all(bodies.iter().map(String::as_str)).await
}

/// The peer: receive up to 10, run them concurrently, delete them in one batch call (as
/// schedkit's poller does). No record, no claim.
async fn plain_consumer(stack: &Stack, n: usize) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let mut done = 0;
    while done < n {
        let got = stack
            .sqs
            .receive_message()
            .queue_url(&stack.queue_url)
            .max_number_of_messages(10)
            .wait_time_seconds(1)
            .send()
            .await?
            .messages
            .unwrap_or_default();
        let batch: Vec<_> = got.into_iter().map(to_event_message).collect();
        // The same work as the job below: parse the envelope.
        let handles: Vec<_> = batch
            .iter()
            .map(|m| {
                let body = m.body.clone().unwrap_or_default();
                tokio::spawn(async move { Envelope::parse(&body).is_ok() })
            })
            .collect();
        for h in handles {
            h.await?;
        }
        let receipts: Vec<String> = batch
            .iter()
            .map(|m| m.receipt_handle.clone().unwrap_or_default())
            .collect();
        schedkit_bench::sqs::delete_received(stack, &receipts).await?;
        done += batch.len();
    }
    Ok(started.elapsed())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let sdk = localstack().await;
    let stack = Stack::create(&sdk, &unique("bench"), StackOptions::default()).await?;

    fill(&stack, args.messages).await?;
    let peer = plain_consumer(&stack, args.messages).await?;

    fill(&stack, args.messages).await?;
    let registry = Jobs::new()
        .add("noop", |_ctx: Ctx| async {
            Ok::<_, schedkit::JobError>(serde_json::Value::Null)
        })
        .bind_policies(|_| JobPolicy {
            heartbeat: None,
            ..JobPolicy::default()
        });
    let mut config = stack.config("bench");
    config.concurrency = args.concurrency;
    let processor = schedkit::Processor::new(
        stack.store(),
        stack.sqs.clone(),
        registry,
        config,
        Metrics::capture().0,
    );
    let started = Instant::now();
    let stats = poll(
        &processor,
        &PollOptions {
            wait_seconds: 1,
            max_messages: 10,
            until_drained: true,
            ..PollOptions::default()
        },
        std::future::pending(),
    )
    .await;
    let schedkit = started.elapsed();
    anyhow::ensure!(
        stats.outcomes.get("succeeded") == Some(&(args.messages as u64)),
        "{:?}",
        stats.outcomes
    );

    let rate = |d: Duration| args.messages as f64 / d.as_secs_f64();
    println!(
        "{} no-op jobs through one consumer on LocalStack (one process, 2 cores)",
        args.messages
    );
    println!("| consumer | seconds | jobs/s | DynamoDB requests per job |");
    println!("| --- | ---: | ---: | ---: |");
    println!(
        "| plain at-least-once (receive, run, delete) | {:.2} | {:.0} | 0 |",
        peer.as_secs_f64(),
        rate(peer)
    );
    println!(
        "| schedkit (claim, run, complete, delete) | {:.2} | {:.0} | 2 |",
        schedkit.as_secs_f64(),
        rate(schedkit)
    );
    schedkit_testkit::stack::undeploy(&stack.name).await?;
    Ok(())
}
