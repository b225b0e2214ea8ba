//! What the worker decides, without AWS: the real processor over the memory store and the
//! memory queue, on tokio's paused clock (time jumps to the next timer when every task
//! waits, so a backoff of minutes takes no time and every run is the same). These tests
//! were LocalStack tests before the store and queue interfaces; what only AWS's contract
//! can show stayed there.

mod basics;
mod cancel;
mod deadlines;
mod forged;
mod leases;
mod limits;
mod overlap;
mod pauses;
mod retries;
mod urgent;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use schedkit::queue::{JobQueue, MemoryQueue};
use schedkit::store::MemoryStore;
use schedkit::{
    Clock, Ctx, Envelope, JobError, JobPolicy, Jobs, MessageReport, Metrics, Processor,
    ProcessorConfig, Registry,
};
use serde_json::json;

const VISIBILITY: Duration = Duration::from_secs(30);

fn config() -> ProcessorConfig {
    ProcessorConfig {
        queue_url: "memory://jobs".into(),
        dlq_url: "memory://dlq".into(),
        concurrency: 10,
        worker_id: "w".into(),
        clock_skew: Duration::from_millis(200),
        clock: Clock::following_tokio("2026-12-02T09:00:00Z".parse().unwrap()),
        visibility_on_claim: false,
        auto_pause: None,
        chains: None,
    }
}

fn envelope(job: &str, key: &str) -> String {
    let mut e = Envelope::new(job, "2026-12-02T09:00:00Z".parse().unwrap());
    e.key = Some(key.into());
    e.to_json()
}

/// A registry of `counted` (succeeds, counting its runs) and `flaky` (fails retryably
/// once, then succeeds).
fn registry(runs: &Arc<AtomicU32>) -> Registry {
    let counted = runs.clone();
    let flaky = runs.clone();
    Jobs::new()
        .add("counted", move |_ctx: Ctx| {
            let runs = counted.clone();
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                Ok::<_, schedkit::JobError>(json!({"ok": true}))
            }
        })
        .add("flaky", move |_ctx: Ctx| {
            let runs = flaky.clone();
            async move {
                match runs.fetch_add(1, Ordering::SeqCst) {
                    0 => Err(JobError::retryable("not yet")),
                    _ => Ok(json!(null)),
                }
            }
        })
        .bind_policies(|_| JobPolicy::default())
}

/// A processor of [`registry`] over `store` and `queue`.
fn processor(store: &MemoryStore, queue: &MemoryQueue, runs: &Arc<AtomicU32>) -> Processor {
    Processor::with_queue(
        store.clone(),
        queue.clone(),
        registry(runs),
        config(),
        Metrics::capture().0,
    )
}

/// Receives and processes until the queue holds nothing visible for `for_at_least`; the
/// outcome labels in order.
async fn drain(processor: &Processor, queue: &MemoryQueue, for_at_least: Duration) -> Vec<String> {
    let reports = drain_reports(processor, queue, for_at_least).await;
    reports
        .iter()
        .map(|r| r.outcome.label().to_string())
        .collect()
}

/// [`drain`], with the reports themselves.
async fn drain_reports(
    processor: &Processor,
    queue: &MemoryQueue,
    for_at_least: Duration,
) -> Vec<MessageReport> {
    let mut reports = Vec::new();
    let mut idle = Duration::ZERO;
    while idle < for_at_least {
        let messages = queue.receive(10, VISIBILITY);
        if messages.is_empty() {
            tokio::time::sleep(Duration::from_secs(1)).await;
            idle += Duration::from_secs(1);
            continue;
        }
        idle = Duration::ZERO;
        reports.extend(process_and_acknowledge(processor, queue, messages).await);
    }
    reports
}

/// Processes `messages` and deletes the acknowledged ones (what the poller does).
async fn process_and_acknowledge(
    processor: &Processor,
    queue: &MemoryQueue,
    messages: Vec<schedkit::batch::Delivery>,
) -> Vec<MessageReport> {
    let reports = processor.process(messages, None).await;
    for report in &reports {
        if report.outcome.acknowledged() && !report.outcome.deleted() {
            let receipt = report.receipt_handle.clone().unwrap_or_default();
            queue.delete(&receipt).await.unwrap();
        }
    }
    reports
}

/// Runs every processor in its own receive loop (`batch` messages at a time, hidden for
/// `visibility`) until the queue holds no message at all for `idle`; the outcome labels
/// of all of them.
async fn drain_all(
    processors: &[Processor],
    queue: &MemoryQueue,
    batch: usize,
    visibility: Duration,
) -> Vec<String> {
    let labels = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut loops = tokio::task::JoinSet::new();
    for processor in processors {
        let (processor, queue, labels) = (processor.clone(), queue.clone(), labels.clone());
        loops.spawn(async move {
            let mut idle = Duration::ZERO;
            while idle < Duration::from_secs(5) {
                let messages = queue.receive(batch, visibility);
                if messages.is_empty() {
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    let empty = queue.lock().messages.is_empty();
                    idle = if empty {
                        idle + Duration::from_millis(500)
                    } else {
                        Duration::ZERO
                    };
                    continue;
                }
                idle = Duration::ZERO;
                for report in process_and_acknowledge(&processor, &queue, messages).await {
                    let label = report.outcome.label().to_string();
                    labels.lock().unwrap().push(label);
                }
            }
        });
    }
    while loops.join_next().await.is_some() {}
    labels.lock().unwrap().clone()
}

/// A processor of `registry` over `store` and `queue`, writing its metrics to `metrics`.
fn processor_of(
    store: &MemoryStore,
    queue: &MemoryQueue,
    registry: Registry,
    worker: &str,
    metrics: Metrics,
) -> Processor {
    let config = ProcessorConfig {
        worker_id: worker.into(),
        ..config()
    };
    Processor::with_queue(store.clone(), queue.clone(), registry, config, metrics)
}

/// The sum of metric `name` over captured EMF lines.
fn metric_total(lines: &std::sync::Mutex<Vec<String>>, name: &str) -> f64 {
    lines
        .lock()
        .unwrap()
        .iter()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v.get(name).and_then(serde_json::Value::as_f64))
        .sum()
}
