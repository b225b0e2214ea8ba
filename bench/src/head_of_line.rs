//! Head-of-line blocking in a polling worker: many short jobs sent while one long job is in
//! hand, through schedkit's poller (message by message: it receives again as soon as it
//! has room) and through a batch-at-a-time loop (receive ten, run them, delete, receive
//! again: schedkit's poller before issue 22, and the loop a batch processor is usually
//! driven by). Each side also runs the short jobs alone, so that what the long job costs
//! them is read beside what they cost without it.
//!
//! Both sides run in this process on the same processor (jobs that sleep, so that the
//! figures are the poller's scheduling, not the machine's CPU), one after the other.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Context;
use schedkit::poller::{self, PollOptions};
use schedkit::{Ctx, Envelope, JobPolicy, Jobs, Metrics, Processor, Status};
use schedkit_testkit::{Stack, unique};
use serde_json::json;
use tokio::time::Instant;

/// How a worker receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Receiving {
    /// `schedkit::poller::poll`: up to its concurrency in hand, receiving as room frees.
    MessageByMessage,
    /// Receive up to ten, process the batch, delete, receive again.
    BatchAtATime,
}

impl Receiving {
    pub fn label(self) -> &'static str {
        match self {
            Receiving::MessageByMessage => "schedkit's poller (message by message)",
            Receiving::BatchAtATime => "a batch at a time (schedkit's poller before)",
        }
    }
}

/// What to run.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    /// Short jobs sent once the long one runs.
    pub shorts: usize,
    /// How long each short job sleeps.
    pub short: Duration,
    /// How long the long job sleeps.
    pub long: Duration,
    /// Messages a worker has in hand at most (the worker's default).
    pub concurrency: usize,
}

/// Seconds from sending the short jobs to the last of them DONE, by receiving mode.
#[derive(Debug, Clone, Default)]
pub struct Results {
    pub alone: BTreeMap<Receiving, Vec<f64>>,
    pub beside_long: BTreeMap<Receiving, Vec<f64>>,
}

/// Runs each mode alone and beside the long job, `rounds` times, alternating who goes first.
pub async fn run(stack: &Stack, plan: Plan, rounds: usize) -> anyhow::Result<Results> {
    let mut results = Results::default();
    for round in 0..rounds {
        let order = if round % 2 == 0 {
            [Receiving::MessageByMessage, Receiving::BatchAtATime]
        } else {
            [Receiving::BatchAtATime, Receiving::MessageByMessage]
        };
        for mode in order {
            for with_long in [false, true] {
                let seconds = once(stack, plan, mode, with_long).await?;
                println!(
                    "head of line: {} {}: {seconds:.1} s",
                    mode.label(),
                    if with_long {
                        "beside the long job"
                    } else {
                        "alone"
                    }
                );
                let into = if with_long {
                    &mut results.beside_long
                } else {
                    &mut results.alone
                };
                into.entry(mode).or_default().push(seconds);
            }
        }
    }
    Ok(results)
}

/// One run: the long job (if asked) until it runs, then the short ones; seconds until the
/// last short one finished (its record's `finished_at`).
async fn once(stack: &Stack, plan: Plan, mode: Receiving, with_long: bool) -> anyhow::Result<f64> {
    let job = unique("sleeps");
    let registry = Jobs::new()
        .add(&job, |ctx: Ctx| async move {
            let seconds = ctx.payload.get("seconds").and_then(|s| s.as_f64());
            tokio::time::sleep(Duration::from_secs_f64(seconds.unwrap_or(0.0))).await;
            Ok::<_, schedkit::JobError>(json!(null))
        })
        .bind_policies(
            |_| // Heartbeats keep the long job's lease and its message hidden.
        JobPolicy::default().with_lease(Duration::from_secs(10)),
        );
    let mut config = stack.config("head-of-line");
    config.concurrency = plan.concurrency;
    let processor = Processor::new(
        stack.store(),
        stack.sqs.clone(),
        registry,
        config,
        Metrics::capture().0,
    );
    let envelope = |key: &str, seconds: f64| {
        let mut e = Envelope::new(&job, "2026-12-02T09:00:00Z".parse().unwrap());
        e.key = Some(key.to_string());
        e.payload = json!({ "seconds": seconds }).as_object().cloned();
        e.to_json()
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let worker = {
        let (processor, sqs) = (processor.clone(), stack.sqs.clone());
        tokio::spawn(async move {
            let shutdown = async {
                let _ = stopped.await;
            };
            match mode {
                Receiving::MessageByMessage => {
                    let options = PollOptions {
                        wait_seconds: 1,
                        ..Default::default()
                    };
                    poller::poll(&processor, &options, shutdown).await;
                }
                Receiving::BatchAtATime => batch_at_a_time(&processor, &sqs, shutdown).await,
            }
        })
    };

    let long_key = format!("{job}-long");
    if with_long {
        stack
            .send_all([envelope(&long_key, plan.long.as_secs_f64()).as_str()])
            .await?;
        wait_for(stack, &job, Duration::from_secs(60), |records| {
            records
                .iter()
                .any(|r| r.execution_key == long_key && r.status == Status::Running)
        })
        .await
        .context("the long job never started")?;
    }
    let bodies: Vec<String> = (0..plan.shorts)
        .map(|i| envelope(&format!("{job}-short-{i}"), plan.short.as_secs_f64()))
        .collect();
    let sent_at = chrono::Utc::now();
    stack.send_all(bodies.iter().map(String::as_str)).await?;
    let limit = plan.long + plan.short * plan.shorts as u32 + Duration::from_secs(120);
    let records = wait_for(stack, &job, limit, |records| {
        records
            .iter()
            .filter(|r| r.execution_key != long_key && r.status == Status::Done)
            .count()
            == plan.shorts
    })
    .await
    .context("the short jobs did not all finish")?;
    let last = records
        .iter()
        .filter(|r| r.execution_key != long_key)
        .filter_map(|r| r.finished_at.as_deref())
        .filter_map(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .max()
        .context("no short job finished")?;
    let _ = stop.send(());
    worker.await?;
    Ok((last.with_timezone(&chrono::Utc) - sent_at).as_seconds_f64())
}

/// Reads `job`'s records every half second until `done` holds of them (or `limit` passes).
async fn wait_for(
    stack: &Stack,
    job: &str,
    limit: Duration,
    done: impl Fn(&[schedkit::ExecutionRecord]) -> bool,
) -> anyhow::Result<Vec<schedkit::ExecutionRecord>> {
    let give_up = Instant::now() + limit;
    loop {
        let records: Vec<_> = stack
            .records()
            .await?
            .into_iter()
            .filter(|r| r.job == job)
            .collect();
        if done(&records) {
            return Ok(records);
        }
        anyhow::ensure!(Instant::now() < give_up, "gave up after {limit:?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The loop a batch processor is driven by: receive up to ten, process them all, delete
/// the acknowledged ones, receive again; the messages in hand are finished on shutdown.
async fn batch_at_a_time(
    processor: &Processor,
    sqs: &aws_sdk_sqs::Client,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let queue_url = processor.config().queue_url.clone();
    tokio::pin!(shutdown);
    loop {
        let received = tokio::select! {
            _ = &mut shutdown => return,
            received = sqs
                .receive_message()
                .queue_url(&queue_url)
                .max_number_of_messages(10)
                .wait_time_seconds(1)
                .visibility_timeout(10)
                .message_system_attribute_names(
                    aws_sdk_sqs::types::MessageSystemAttributeName::All,
                )
                .message_attribute_names("All")
                .send() => received,
        };
        let Ok(out) = received else {
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        };
        let messages: Vec<_> = out
            .messages
            .unwrap_or_default()
            .into_iter()
            .map(poller::to_event_message)
            .collect();
        if messages.is_empty() {
            continue;
        }
        let reports = processor.process(messages, None).await;
        poller::delete_acknowledged(sqs, &queue_url, &reports).await;
    }
}
