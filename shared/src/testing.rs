//! Your jobs through schedkit's real pipeline, in a plain `#[tokio::test]`, without AWS.
//!
//! [`TestWorker`] binds your [`Jobs`] to your catalog (its policies: attempts, backoff,
//! lease, key template) and runs them with the same processor the worker runs, over the
//! in-memory execution store and queue that schedkit's own simulation checks against
//! DynamoDB's and SQS's contracts. Send envelopes, run until the queue is empty, and look
//! at the records, the dead letters and the effects committed:
//!
//! ```
//! use schedkit::testing::TestWorker;
//! use schedkit::{Envelope, JobError, Jobs, catalog::Catalog};
//!
//! async fn hello() -> Result<&'static str, JobError> {
//!     Ok("hello")
//! }
//!
//! #[tokio::main(flavor = "current_thread", start_paused = true)]
//! async fn main() {
//!     let catalog = Catalog::parse("[jobs.hello]\nowner = \"me\"\n", "catalog.toml").unwrap();
//!     let worker = TestWorker::new(&catalog, Jobs::new().add("hello", hello)).unwrap();
//!     let run = Envelope::new("hello", "2026-12-02T08:00:00Z".parse().unwrap()).with_key("k");
//!     worker.send(&run);
//!     assert_eq!(worker.run_until_idle().await, ["succeeded"]);
//!     worker.send(&run); // delivered again
//!     assert_eq!(worker.run_until_idle().await, ["duplicate"]);
//!     assert_eq!(worker.record("k").unwrap().result.as_deref(), Some("\"hello\""));
//! }
//! ```
//!
//! Run the tests on tokio's paused clock (`#[tokio::test(start_paused = true)]`, tokio's
//! `test-util` feature): a retry's backoff of minutes, a lease running out, take no time.
//! (A job that waits on real I/O, a mock server on a thread, needs a runtime whose clock
//! runs: on a paused one, time jumps ahead while it waits, and its timeout fires.)
//! Store faults ([`TestWorker::refuse`], [`TestWorker::lose_answer`]) show what a DynamoDB
//! outage or a lost answer does to a run: refused heartbeats lose the lease, a lost commit
//! answer brings the message back as a duplicate, and effects are applied once throughout.
//! A fault waits for the next request of its kind (one that never comes, such as a commit
//! of a run without effects, leaves it waiting).
//!
//! What it does not check: effects are recorded as the job handed them, not applied to
//! tables, so their conditions, two writes to one item and missing tables (which DynamoDB
//! refuses, failing the run for good) are for a test against LocalStack.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_sdk_dynamodb::types::TransactWriteItem;

use crate::batch::{Processor, ProcessorConfig};
use crate::catalog::Catalog;
use crate::clock::{Clock, DEFAULT_CLOCK_SKEW};
use crate::envelope::Envelope;
use crate::job::{BindError, Jobs};
use crate::queue::{JobQueue, MemoryQueue, Outgoing};
use crate::store::ExecutionRecord;
use crate::store::{Fault, Faults, MemoryStore};
use crate::telemetry::Metrics;

/// A request of the execution store that a test can make fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreRequest {
    /// Claiming a run (the first write of every attempt).
    Claim,
    /// Renewing a running attempt's lease.
    Heartbeat,
    /// Writing DONE with the job's effects, in one transaction (a run that handed some
    /// to `ctx.effects()`).
    Commit,
    /// Writing an outcome without effects: DONE (a run that handed none), RETRYING or
    /// FAILED.
    Finish,
}

impl StoreRequest {
    fn name(self) -> &'static str {
        match self {
            StoreRequest::Claim => "claim",
            StoreRequest::Heartbeat => "heartbeat",
            StoreRequest::Commit => "commit",
            StoreRequest::Finish => "finish",
        }
    }
}

/// Faults queued by the test, consumed in order by the requests they name.
#[derive(Debug, Default)]
struct Scripted {
    next: Mutex<VecDeque<(&'static str, Fault)>>,
}

impl Faults for Scripted {
    fn request(&self, request: &'static str, _key: &str) -> (Duration, Fault) {
        let mut next = self.next.lock().unwrap_or_else(|p| p.into_inner());
        let fault = match next.iter().position(|(name, _)| *name == request) {
            Some(i) => next.remove(i).map_or(Fault::None, |(_, f)| f),
            None => Fault::None,
        };
        (Duration::ZERO, fault)
    }
}

/// A worker over an in-memory store and queue: the real processor, the catalog's policies.
pub struct TestWorker {
    store: MemoryStore,
    queue: MemoryQueue,
    processor: Processor,
    faults: Arc<Scripted>,
    visibility: Duration,
}

/// The queue's redrive policy in the template: a message received this often goes to the
/// DLQ unhandled.
const MAX_RECEIVES: u32 = 10;

impl TestWorker {
    /// `jobs` bound to `catalog`'s policies; refused, as the worker would refuse to start,
    /// when a queue job of the catalog has no implementation.
    pub fn new<S: Clone + Send + Sync + 'static>(
        catalog: &Catalog,
        jobs: Jobs<S>,
    ) -> Result<TestWorker, BindError> {
        TestWorker::with_registry(jobs.bind(catalog)?)
    }

    /// [`TestWorker::new`], its jobs reading their secrets from `secrets` (a test's own
    /// [`crate::secrets::Source`]).
    pub fn with_secrets<S: Clone + Send + Sync + 'static>(
        catalog: &Catalog,
        jobs: Jobs<S>,
        secrets: std::sync::Arc<crate::secrets::SecretStore>,
    ) -> Result<TestWorker, BindError> {
        TestWorker::with_registry(jobs.bind(catalog)?.with_secrets(secrets))
    }

    fn with_registry(registry: crate::job::Registry) -> Result<TestWorker, BindError> {
        let visibility = registry
            .longest_lease()
            .unwrap_or(Duration::from_secs(30))
            .max(Duration::from_secs(30));
        let faults = Arc::new(Scripted::default());
        let store = MemoryStore::new(faults.clone());
        let queue = MemoryQueue::new(MAX_RECEIVES);
        let config = ProcessorConfig {
            queue_url: "memory://jobs".into(),
            dlq_url: "memory://dlq".into(),
            concurrency: 10,
            worker_id: "test-worker".into(),
            clock_skew: DEFAULT_CLOCK_SKEW,
            clock: Clock::following_tokio(chrono::Utc::now()),
            visibility_on_claim: false,
            auto_pause: None,
            chains: None,
        };
        let processor = Processor::with_queue(
            store.clone(),
            queue.clone(),
            registry,
            config,
            Metrics::capture().0,
        );
        Ok(TestWorker {
            store,
            queue,
            processor,
            faults,
            visibility,
        })
    }

    /// Puts `envelope` on the queue, as a schedule or `schedkit fire` would; its message id.
    /// Send it twice for a duplicate delivery.
    pub fn send(&self, envelope: &Envelope) -> String {
        self.queue.send_body(&envelope.to_json())
    }

    /// Puts any body on the queue (a malformed one, to see it dead-lettered as poison).
    pub fn send_body(&self, body: &str) -> String {
        self.queue.send_body(body)
    }

    /// Receives and processes messages, ten at a time as the worker does, until the queue
    /// holds none (each acknowledged, or in the DLQ); waits for delayed and hidden messages
    /// (a retry's backoff) on tokio's clock. The outcome of every delivery, in order
    /// (`succeeded`, `duplicate`, `retrying`, `dead-lettered`, `unavailable`...).
    pub async fn run_until_idle(&self) -> Vec<&'static str> {
        let mut outcomes = Vec::new();
        loop {
            let messages = self.queue.receive(10, self.visibility);
            if messages.is_empty() {
                let next = self
                    .queue
                    .lock()
                    .messages
                    .values()
                    .map(|m| m.visible_at)
                    .min();
                match next {
                    Some(at) => {
                        tokio::time::sleep_until(
                            at.max(tokio::time::Instant::now()) + Duration::from_millis(1),
                        )
                        .await
                    }
                    None => return outcomes,
                }
                continue;
            }
            for report in self.processor.process(messages, None).await {
                outcomes.push(report.outcome.label());
                if report.outcome.acknowledged() && !report.outcome.deleted() {
                    let receipt = report.receipt_handle.unwrap_or_default();
                    // The memory queue never refuses a delete.
                    let _ = self.queue.delete(&receipt).await;
                }
            }
        }
    }

    /// The run's execution record, by execution key.
    pub fn record(&self, key: &str) -> Option<ExecutionRecord> {
        self.store.snapshot().records.get(key).cloned()
    }

    /// Every dead letter so far, in order, with its attributes (`schedkit.reason`...).
    pub fn dead_letters(&self) -> Vec<Outgoing> {
        self.queue.lock().dead_letters.clone()
    }

    /// The effects committed with the run's DONE record, in order: a run's effects appear
    /// once however often it was delivered.
    pub fn effects(&self, key: &str) -> Vec<TransactWriteItem> {
        let state = self.store.snapshot();
        state
            .puts()
            .filter(|(run, _)| *run == key)
            .map(|(_, write)| write.clone())
            .collect()
    }

    /// The next `times` requests of that kind are refused, nothing applied, as when
    /// DynamoDB cannot be reached.
    pub fn refuse(&self, request: StoreRequest, times: usize) {
        self.script(request, Fault::Unavailable, times);
    }

    /// The next `times` requests of that kind are applied and their answers lost: the
    /// worker is told DynamoDB was unavailable.
    pub fn lose_answer(&self, request: StoreRequest, times: usize) {
        self.script(request, Fault::LoseAnswer, times);
    }

    fn script(&self, request: StoreRequest, fault: Fault, times: usize) {
        let mut next = self.faults.next.lock().unwrap_or_else(|p| p.into_inner());
        next.extend(std::iter::repeat_n((request.name(), fault), times));
    }

    /// The store itself, for what the methods above do not say.
    pub fn store(&self) -> &MemoryStore {
        &self.store
    }

    /// The queue itself.
    pub fn queue(&self) -> &MemoryQueue {
        &self.queue
    }
}
