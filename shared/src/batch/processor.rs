//! The worker's core as a whole: deliveries in, one report each out. A batch is walked a
//! message at a time, up to `concurrency` at once, each through the pipeline of
//! [`pipeline`](super::pipeline) (parse, route, key, claim, admit, attempt, settle,
//! answer); a message is acknowledged only once its outcome is durable, or once a copy that
//! comes back later was sent (`requeue`). The processor is written against interfaces: the
//! execution store ([`ExecutionStore`]: DynamoDB, or in memory) and the queue
//! ([`JobQueue`]: SQS, or in memory), so the same code runs in Lambda, in the poller and in
//! the deterministic simulation.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use aws_sdk_sqs::Client as SqsClient;
use tokio::sync::Semaphore;
use tokio::sync::mpsc::UnboundedSender;
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::ask_turns::AskTurns;
use super::chains::Chains;
use super::delivery::Delivery;
use super::draws::Draws;
use super::failure_streak::{AutoPause, FailureStreaks};
use super::gate_looks::GateLooks;
use super::hides::Hides;
use super::in_hand_waiters::InHandWaiters;
use super::no_place_seen::NoPlace;
use super::outcome::{MessageReport, Outcome};
use crate::clock::Clock;
use crate::job::Registry;
use crate::queue::{JobQueue, SqsQueue};
use crate::store::ExecutionStore;
use crate::telemetry::Metrics;

/// Where the processor's messages come from and go to.
#[derive(Debug, Clone)]
pub struct ProcessorConfig {
    /// The jobs queue (for visibility changes and the dead letters' source attribute).
    pub queue_url: String,
    /// Where messages that can never succeed, or failed for good, are sent with their reason.
    pub dlq_url: String,
    /// Messages of one batch processed at once.
    pub concurrency: usize,
    /// Prefix of every owner token this processor writes (host, function, pid...).
    pub worker_id: String,
    /// How far this worker's clock may disagree with any other's (see [`crate::clock`]):
    /// an attempt is cancelled this long before its confirmed lease runs out. Keep it well
    /// under each job's lease minus its heartbeat interval.
    pub clock_skew: Duration,
    /// The wall clock claims, heartbeats and outcomes are stamped with.
    pub clock: Clock,
    /// Hide each message of a batch for its job's lease as the batch arrives, so that a
    /// worker that dies comes back after about the lease, not the queue's visibility
    /// timeout. One SQS request per batch: on for Lambda, whose event source receives with
    /// the queue's timeout; the poller sets it at receive instead, for free.
    pub visibility_on_claim: bool,
    /// Where the worker pauses a job's schedule after `pause_after_failures` consecutive
    /// FAILED runs. `None`: the streaks are still counted, and a job whose streak is long
    /// enough is logged `PAUSE_NOT_MADE` instead.
    pub auto_pause: Option<AutoPause>,
    /// What answers the Step Functions tasks of chain steps. `None`: a step's message is
    /// run like any other, and its chain waits until the step's heartbeat timeout.
    pub chains: Option<Chains>,
}

/// Processes SQS batches. Cheap to clone; build it once and share it.
#[derive(Clone)]
pub struct Processor {
    pub(super) inner: Arc<Inner>,
}

#[derive(Clone)]
pub(super) struct Inner {
    pub(super) store: Arc<dyn ExecutionStore>,
    pub(super) queue: Arc<dyn JobQueue>,
    pub(super) registry: Registry,
    pub(super) config: ProcessorConfig,
    pub(super) metrics: Metrics,
    pub(super) streaks: FailureStreaks,
    pub(super) draws: Draws,
    /// Gates whose lines this worker found no place in, lately.
    pub(super) no_place: Arc<NoPlace>,
    /// The permits this worker's runs hold, and its runs waiting in hand for them.
    pub(super) in_hand: Arc<InHandWaiters>,
    /// Messages sent away unclaimed, hidden ten to a request.
    pub(super) hides: Arc<Hides>,
    /// The gates this worker's runs watch, read together, and what was read.
    pub(super) looks: Arc<GateLooks>,
    /// This worker's takes in flight, by gate: runs arriving together ask in turn.
    pub(super) asks: Arc<AskTurns>,
}

/// Job name used in metrics and logs when the envelope did not even name one.
pub(super) const NO_JOB: &str = "-";
/// The metrics' job dimension for a job this worker does not know: the name comes from an
/// untrusted message, and each distinct value would be a new CloudWatch metric (paid for).
pub const UNKNOWN_JOB: &str = "(unknown)";

impl Processor {
    /// A processor that claims in `store` and runs the jobs in `registry`, on the SQS
    /// queues its `config` names.
    pub fn new(
        store: impl ExecutionStore,
        sqs: SqsClient,
        registry: Registry,
        config: ProcessorConfig,
        metrics: Metrics,
    ) -> Self {
        let queue = SqsQueue::new(sqs, &config.queue_url, &config.dlq_url);
        Processor::with_queue(store, queue, registry, config, metrics)
    }

    /// A processor over any store and queue (the simulation's are in memory).
    pub fn with_queue(
        store: impl ExecutionStore,
        queue: impl JobQueue,
        registry: Registry,
        config: ProcessorConfig,
        metrics: Metrics,
    ) -> Self {
        let store: Arc<dyn ExecutionStore> = Arc::new(store);
        Processor {
            inner: Arc::new(Inner {
                streaks: FailureStreaks {
                    store: store.clone(),
                    auto_pause: config.auto_pause.clone(),
                    metrics: metrics.clone(),
                },
                store,
                queue: Arc::new(queue),
                registry,
                config,
                metrics,
                draws: Draws::Thread,
                no_place: Arc::default(),
                in_hand: Arc::default(),
                hides: Arc::default(),
                looks: Arc::default(),
                asks: Arc::default(),
            }),
        }
    }

    /// The same processor drawing its retry jitter and owner tokens from one generator
    /// seeded with `seed` (the simulation replays a run from its seed). Call it before
    /// sharing the processor: clones made earlier keep drawing from the thread.
    pub fn seeded(self, seed: u64) -> Self {
        let mut inner = (*self.inner).clone();
        inner.draws = Draws::seeded(seed);
        Processor {
            inner: Arc::new(inner),
        }
    }

    /// The jobs queue it acknowledges and dead-letters on (the poller receives from it).
    pub(crate) fn queue(&self) -> &dyn JobQueue {
        self.inner.queue.as_ref()
    }

    /// The queues and limits it was built with.
    pub fn config(&self) -> &ProcessorConfig {
        &self.inner.config
    }

    /// The jobs it runs.
    pub fn registry(&self) -> &Registry {
        &self.inner.registry
    }

    /// The worker stops taking work: its runs waiting in hand for a permit stop waiting
    /// and join their gates' lines (`batch::in_hand`), so that finishing what is in hand
    /// takes no longer than the bodies running.
    pub(crate) fn stop_waiting_in_hand(&self) {
        self.inner.in_hand.stop();
    }

    /// Sends the hides of runs sent away that are still gathered (`batch::hides`): a
    /// poller that stops would leave their messages hidden for the longest lease.
    pub(crate) async fn flush_hides(&self) {
        self.inner.hides.flush().await;
    }

    /// The worker takes work again: its runs may wait in hand (a poll after one stopped).
    pub(crate) fn start_waiting_in_hand(&self) {
        self.inner.in_hand.start();
    }

    /// How many runs of this worker wait in hand for the permits of limits of one share
    /// (none counted while a run of a `fair` limit waits): the poller gathers its receives
    /// longer while more wait than it has places free
    /// (`InHandWaiters::waiting_for_one_share`).
    pub(crate) fn runs_waiting_in_hand(&self) -> usize {
        self.inner.in_hand.waiting_for_one_share()
    }

    /// Processes a batch, at most `concurrency` messages at a time; one report per message,
    /// in the batch's order. Takes Lambda's `SqsMessage`s, the SDK's `Message`s or
    /// [`Delivery`]s.
    pub async fn process<M: Into<Delivery>>(
        &self,
        messages: Vec<M>,
        request_id: Option<&str>,
    ) -> Vec<MessageReport> {
        self.process_each(messages, request_id, None, None).await
    }

    /// [`Processor::process`], handing each report to `done` as soon as its outcome is
    /// durable (the poller deletes a finished message then, not when the whole batch ends),
    /// and ending by `deadline` (Lambda's invocation deadline): a message is not started
    /// within `DEADLINE_MARGIN` of it, and a running attempt is cancelled then and
    /// recorded RETRYING, so that every outcome is written before the function is stopped.
    pub async fn process_each<M: Into<Delivery>>(
        &self,
        messages: Vec<M>,
        request_id: Option<&str>,
        done: Option<&UnboundedSender<MessageReport>>,
        deadline: Option<Instant>,
    ) -> Vec<MessageReport> {
        let mut deliveries: Vec<Delivery> = messages.into_iter().map(Into::into).collect();
        for delivery in &mut deliveries {
            self.inner.queue.adopt(delivery);
        }
        if self.inner.config.visibility_on_claim {
            let (queue, registry) = (self.inner.queue.as_ref(), &self.inner.registry);
            super::visibility::hide_for_leases(queue, registry, &deliveries).await;
        }
        let mut reports: Vec<MessageReport> = deliveries.iter().map(unfinished).collect();
        let request_id = request_id.unwrap_or_default();
        let mut walks = self.spawn_walks(deliveries, request_id, deadline).await;
        while let Some(joined) = walks.tasks.join_next_with_id().await {
            match joined {
                Ok((id, report)) => {
                    if let Some(done) = done {
                        let _ = done.send(report.clone());
                    }
                    reports[walks.index_of[&id]] = report;
                }
                // A bug in the adapter itself: the message is left for redelivery (its
                // report stays unavailable).
                Err(e) => tracing::error!(error = %e, "message task failed"),
            }
        }
        reports
    }

    /// Starts a walk per delivery, at most `concurrency` at once (waits for room).
    async fn spawn_walks(
        &self,
        deliveries: Vec<Delivery>,
        request_id: &str,
        deadline: Option<Instant>,
    ) -> Walks {
        let permits = Arc::new(Semaphore::new(self.inner.config.concurrency.max(1)));
        let mut walks = Walks {
            tasks: JoinSet::new(),
            index_of: HashMap::new(),
        };
        for (i, delivery) in deliveries.into_iter().enumerate() {
            let permit = permits
                .clone()
                .acquire_owned()
                .await
                .expect("semaphore is never closed");
            let this = self.clone();
            let request_id = request_id.to_string();
            let handle = walks.tasks.spawn(async move {
                // Boxed, so that the spawned future is small (see `DynamoStore::timed`).
                let report = Box::pin(this.walk(&delivery, &request_id, deadline)).await;
                drop(permit);
                report
            });
            walks.index_of.insert(handle.id(), i);
        }
        walks
    }

    /// One message, from body to acknowledged (or not) outcome.
    pub async fn handle(&self, message: impl Into<Delivery>, request_id: &str) -> MessageReport {
        self.walk(&message.into(), request_id, None).await
    }
}

/// A batch's walks in flight, and which message each is.
struct Walks {
    tasks: JoinSet<MessageReport>,
    index_of: HashMap<tokio::task::Id, usize>,
}

/// A message's report until its walk ends: unavailable, so that a walk that never reports
/// (a bug in the adapter) leaves the message for redelivery.
fn unfinished(delivery: &Delivery) -> MessageReport {
    MessageReport {
        message_id: delivery.message_id.clone(),
        receipt_handle: delivery.receipt_handle.clone(),
        job: None,
        key: None,
        outcome: Outcome::Unavailable {
            error: "message task failed".into(),
        },
    }
}

/// How long before an invocation's deadline a running attempt is cancelled (and no new
/// message is started): time to write the outcome and answer the runtime.
pub(crate) const DEADLINE_MARGIN: Duration = Duration::from_secs(1);
