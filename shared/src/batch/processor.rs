//! The SQS batch adapter: one envelope from message to recorded outcome.
//!
//! Follow a message through [`Processor::handle`]: parse the envelope (poison → DLQ), route
//! it (a chain's own trigger or end → `chains::runs`; a step message that does not match
//! its step → DLQ as `record-mismatch`), find the job (unknown → DLQ), derive the key, claim
//! it (duplicate → ack; in progress → back after the lease, hidden at first, then sent
//! again; conflict → DLQ), admit it (`admit`: its job's overlap slot, entered only now that the claim says it
//! will run), run the job with heartbeats, and record the outcome (DONE → ack; retryable →
//! RETRYING and hidden for the backoff; exhausted or permanent → FAILED, counted toward the
//! job's `pause_after_failures`, then DLQ, then ack). A message is acknowledged only once its
//! outcome is durable, or once a copy that comes back later was sent (`requeue`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use aws_lambda_events::event::sqs::SqsMessage;
use aws_sdk_sqs::Client as SqsClient;
use chrono::{DateTime, Utc};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::chains::{Chains, RunMessage};
use super::dead_letter::{self, DeadLetter, DeadLetterReason};
use super::draws::Draws;
use super::failure_streak::{AutoPause, FailureStreaks};
use super::lease::{Heartbeat, LeaseKeeper};
use super::outcome::{MessageReport, Outcome};
use super::requeue;
use crate::clock::Clock;
use crate::effects::Effects;
use crate::envelope::{Envelope, format_instant};
use crate::job::{JobContext, JobError, JobResult, RegisteredJob, Registry};
use crate::key::{execution_key, payload_hash};
use crate::queue::{JobQueue, SqsQueue};
use crate::retry::MAX_VISIBILITY;
use crate::store::{
    ClaimOutcome, ClaimRequest, CommitError, ExecutionRecord, ExecutionStore, Finish, Status,
    TransitionError,
};
use crate::telemetry::{Metric, Metrics, Transition};

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
}

/// Job name used in metrics and logs when the envelope did not even name one.
const NO_JOB: &str = "-";
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

    /// The queues and limits it was built with.
    pub fn config(&self) -> &ProcessorConfig {
        &self.inner.config
    }

    /// The jobs it runs.
    pub fn registry(&self) -> &Registry {
        &self.inner.registry
    }

    /// Processes a batch, at most `concurrency` messages at a time; one report per message,
    /// in the batch's order.
    pub async fn process(
        &self,
        messages: Vec<SqsMessage>,
        request_id: Option<&str>,
    ) -> Vec<MessageReport> {
        self.process_each(messages, request_id, None, None).await
    }

    /// [`Processor::process`], handing each report to `done` as soon as its outcome is
    /// durable (the poller deletes a finished message then, not when the whole batch ends),
    /// and ending by `deadline` (Lambda's invocation deadline): a message is not started
    /// within [`DEADLINE_MARGIN`] of it, and a running attempt is cancelled then and
    /// recorded RETRYING, so that every outcome is written before the function is stopped.
    pub async fn process_each(
        &self,
        messages: Vec<SqsMessage>,
        request_id: Option<&str>,
        done: Option<&tokio::sync::mpsc::UnboundedSender<MessageReport>>,
        deadline: Option<Instant>,
    ) -> Vec<MessageReport> {
        if self.inner.config.visibility_on_claim {
            super::visibility::hide_for_leases(
                self.inner.queue.as_ref(),
                &self.inner.registry,
                &messages,
            )
            .await;
        }
        let permits = Arc::new(Semaphore::new(self.inner.config.concurrency.max(1)));
        let mut tasks = JoinSet::new();
        let mut index_of = HashMap::new();
        let mut reports: Vec<Option<MessageReport>> = vec![None; messages.len()];
        let fallback: Vec<_> = messages
            .iter()
            .map(|m| {
                (
                    m.message_id.clone().unwrap_or_default(),
                    m.receipt_handle.clone(),
                )
            })
            .collect();
        for (i, message) in messages.into_iter().enumerate() {
            let permit = permits
                .clone()
                .acquire_owned()
                .await
                .expect("semaphore is never closed");
            let this = self.clone();
            let request_id = request_id.unwrap_or_default().to_string();
            let handle = tasks.spawn(async move {
                // Boxed, so that the spawned future is small (see `DynamoStore::timed`).
                let report = Box::pin(this.handle_by(message, &request_id, deadline)).await;
                drop(permit);
                report
            });
            index_of.insert(handle.id(), i);
        }
        while let Some(joined) = tasks.join_next_with_id().await {
            match joined {
                Ok((id, report)) => {
                    if let Some(done) = done {
                        let _ = done.send(report.clone());
                    }
                    reports[index_of[&id]] = Some(report);
                }
                Err(e) => {
                    // A bug in the adapter itself: leave the message for redelivery.
                    let i = index_of[&e.id()];
                    tracing::error!(error = %e, "message task failed");
                    reports[i] = Some(MessageReport {
                        message_id: fallback[i].0.clone(),
                        receipt_handle: fallback[i].1.clone(),
                        job: None,
                        key: None,
                        outcome: Outcome::Unavailable {
                            error: e.to_string(),
                        },
                    });
                }
            }
        }
        reports
            .into_iter()
            .map(|r| r.expect("every task reports"))
            .collect()
    }

    /// One message, from body to acknowledged (or not) outcome.
    pub async fn handle(&self, message: SqsMessage, request_id: &str) -> MessageReport {
        self.handle_by(message, request_id, None).await
    }

    async fn handle_by(
        &self,
        message: SqsMessage,
        request_id: &str,
        deadline: Option<Instant>,
    ) -> MessageReport {
        let parsed = Envelope::parse(message.body.as_deref().unwrap_or_default());
        let mut report = self
            .handle_parsed(message, request_id, deadline, parsed.as_ref())
            .await;
        // A chain step's outcome answers its task once decided.
        if let (Some(tasks), Ok(envelope)) = (&self.inner.config.chains, &parsed)
            && let Some(instead) = tasks
                .answer(
                    self.inner.store.as_ref(),
                    envelope,
                    report.key.as_deref(),
                    &report.outcome,
                )
                .await
        {
            report.outcome = instead;
        }
        report
    }

    async fn handle_parsed(
        &self,
        message: SqsMessage,
        request_id: &str,
        deadline: Option<Instant>,
        parsed: Result<&Envelope, &crate::envelope::EnvelopeError>,
    ) -> MessageReport {
        let mut report = MessageReport {
            message_id: message.message_id.clone().unwrap_or_default(),
            receipt_handle: message.receipt_handle.clone(),
            job: None,
            key: None,
            outcome: Outcome::Succeeded,
        };
        let body = message.body.as_deref().unwrap_or_default();
        let message_id = report.message_id.clone();
        let ctx = MessageCtx {
            body,
            message_id: &message_id,
            receipt_handle: message.receipt_handle.as_deref(),
            request_id,
            message: &message,
        };

        let envelope = match parsed {
            Ok(e) => e,
            Err(e) => {
                report.outcome = self
                    .reject(&ctx, DeadLetterReason::Poison, &e.to_string(), None, None)
                    .await;
                return report;
            }
        };
        report.job = Some(envelope.job.clone());
        // A chain's step, checked against the catalog's chains (a worker without chains
        // runs a step's message as any other).
        let mut step = false;
        if let Some(chains) = self.inner.config.chains.as_ref() {
            if chains.is_chain(&envelope.job) {
                let (key, outcome) = self.chain_run(chains, &ctx, envelope).await;
                report.key = key;
                report.outcome = outcome;
                return report;
            }
            // A step's message runs (and answers) only the step it names, under its key.
            if let Err(error) = chains.check_step(envelope) {
                report.key = envelope.key.clone();
                report.outcome = self
                    .reject(
                        &ctx,
                        DeadLetterReason::RecordMismatch,
                        &error,
                        Some(&envelope.job),
                        envelope.key.as_deref(),
                    )
                    .await;
                return report;
            }
            step = envelope.chain.is_some();
        }
        let Some(registered) = self.inner.registry.get(&envelope.job) else {
            let known: Vec<_> = self.inner.registry.names().collect();
            let error = format!(
                "job `{}` is not registered with this worker (known: {})",
                envelope.job,
                known.join(", ")
            );
            report.outcome = self
                .reject(
                    &ctx,
                    DeadLetterReason::UnknownJob,
                    &error,
                    Some(&envelope.job),
                    None,
                )
                .await;
            return report;
        };
        let policy = &registered.policy;
        let key = match execution_key(envelope, policy.key_template.as_ref()) {
            Ok(k) => k,
            Err(e) => {
                report.outcome = self
                    .reject(
                        &ctx,
                        DeadLetterReason::Poison,
                        &e.to_string(),
                        Some(&envelope.job),
                        None,
                    )
                    .await;
                return report;
            }
        };
        report.key = Some(key.clone());

        // Taken before the claim's wall time: the lease is never thought longer than it is.
        let claimed_at = Instant::now();

        let request = ClaimRequest {
            key: key.clone(),
            job: envelope.job.clone(),
            scheduled_for: format_instant(&envelope.scheduled_for),
            payload_hash: payload_hash(envelope),
            input: body.to_string(),
            message_id: Some(requeue::delivery_id(ctx.message, ctx.message_id).to_string()),
            owner: format!(
                "{}:{}",
                self.inner.config.worker_id,
                self.inner.draws.token()
            ),
            now: self.inner.config.clock.now(),
            lease: policy.lease,
            retention: policy.record_retention,
            redrive: dead_letter::redrive_of(&message),
        };
        let transition = Transition {
            job: &envelope.job,
            key: &key,
            execution_id: envelope.execution_id.as_deref().unwrap_or_default(),
            request_id,
            message_id: ctx.message_id,
            ..Default::default()
        };
        if deadline.is_some_and(|d| claimed_at + DEADLINE_MARGIN >= d) {
            // Back at once for the next invocation, no attempt spent (and no receive).
            let resent = self.come_back(&ctx, Duration::ZERO).await;
            self.log(&transition, "DEFERRED", 0, 0, "");
            report.outcome = Outcome::Deferred { resent };
            return report;
        }
        // The claim decides first; only a run that will run goes on to its job's overlap
        // slot (`admit`): a decided message never touches it.
        let claimed = self.inner.store.claim(&request).await;
        report.outcome = match claimed {
            Err(e) => self.store_failed(&ctx, &transition, e).await,
            Ok(ClaimOutcome::Claimed { record, before }) => {
                let started = Started {
                    claimed_at,
                    deadline,
                };
                let claim = Claim {
                    record,
                    before: before.map(|b| *b),
                    request: &request,
                };
                self.admit_and_run(
                    &ctx,
                    envelope,
                    registered,
                    claim,
                    step,
                    started,
                    &transition,
                )
                .await
            }
            Ok(ClaimOutcome::Duplicate(record)) => {
                self.inner.metrics.count(&envelope.job, Metric::Duplicate);
                let note = if record.status == Status::Failed {
                    "the run FAILED and this message is not a redrive of its dead letter: not run again"
                } else {
                    ""
                };
                self.log(&transition, "DUPLICATE", record.round_attempt(), 0, note);
                Outcome::Duplicate
            }
            Ok(ClaimOutcome::InProgress(record)) => {
                let left_ms = record.lease_expires_at.unwrap_or(0)
                    - self.inner.config.clock.now().timestamp_millis();
                let looks = requeue::looks(&message);
                let retry_in = in_progress_delay(left_ms, looks);
                // Hidden for its first looks (one request; most runs end within them),
                // sent again after (two): a long run's duplicates never climb toward the
                // queue's maxReceiveCount.
                let resent = if looks < requeue::HIDDEN_LOOKS {
                    self.hide(ctx.receipt_handle, retry_in).await;
                    false
                } else {
                    self.come_back(&ctx, retry_in).await
                };
                self.inner
                    .metrics
                    .count(&envelope.job, Metric::InProgressConflict);
                self.log(&transition, "IN_PROGRESS", record.round_attempt(), 0, "");
                Outcome::InProgress { retry_in, resent }
            }
            Ok(ClaimOutcome::AlreadyFailed(record)) => {
                // Its run is decided: send the dead letter again (a duplicate at worst,
                // if the first one was sent) and acknowledge, without running the job.
                let attempts = record.failed_round_attempts();
                let reason = if registered.policy.retry.exhausted(attempts) {
                    DeadLetterReason::AttemptsExhausted
                } else {
                    DeadLetterReason::PermanentError
                };
                let error = record.last_error.clone().unwrap_or_default();
                // When the round failed, as the first letter said: a redrive of either
                // letter reopens that round only.
                let failed_at = record
                    .finished_at
                    .as_deref()
                    .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
                    .map_or_else(|| self.inner.config.clock.now(), |t| t.with_timezone(&Utc));
                let letter = DeadLetter {
                    body: ctx.body,
                    reason,
                    error: &error,
                    job: Some(&envelope.job),
                    key: Some(&key),
                    attempts,
                    failed_at,
                    source_queue: &self.inner.config.queue_url,
                    source_message_id: ctx.message_id,
                };
                self.inner.metrics.count(&envelope.job, Metric::Duplicate);
                self.log(&transition, "ALREADY_FAILED", attempts, 0, &error);
                // Counted again (a set: no run counts twice), in case the worker that
                // recorded it stopped before it did.
                if let Some(limit) = policy.pause_after_failures {
                    self.inner
                        .streaks
                        .failed(limit, &transition, &error, letter.failed_at)
                        .await;
                }
                self.dead_letter(&letter).await
            }
            Ok(ClaimOutcome::Conflict(record)) => {
                let error = format!(
                    "key `{key}` was first used with a different payload (payload hash {} on record, {} in this message)",
                    short(&record.payload_hash),
                    short(&request.payload_hash)
                );
                self.reject(
                    &ctx,
                    DeadLetterReason::KeyConflict,
                    &error,
                    Some(&envelope.job),
                    Some(&key),
                )
                .await
            }
        };
        report
    }

    /// A store call failed: refused for good (dead-lettered with the reason) or
    /// unavailable for now (the message comes back).
    pub(super) async fn store_failed(
        &self,
        ctx: &MessageCtx<'_>,
        t: &Transition<'_>,
        e: crate::store::StoreError,
    ) -> Outcome {
        if e.is_permanent() {
            return self
                .reject(
                    ctx,
                    DeadLetterReason::StoreRefused,
                    &e.to_string(),
                    Some(t.job),
                    Some(t.key),
                )
                .await;
        }
        self.log(t, "UNAVAILABLE", 0, 0, &e.to_string());
        Outcome::Unavailable {
            error: e.to_string(),
        }
    }

    /// A chain run's trigger or end (see `chains::runs`): the key it concerns and the
    /// message's outcome.
    async fn chain_run(
        &self,
        chains: &Chains,
        ctx: &MessageCtx<'_>,
        envelope: &Envelope,
    ) -> (Option<String>, Outcome) {
        let now = self.inner.config.clock.now();
        let done = chains
            .handle_run(
                self.inner.store.as_ref(),
                envelope,
                ctx.body,
                ctx.message_id,
                now,
            )
            .await;
        let job = envelope.job.as_str();
        let t = |key: &str, status: &'static str, error: &str| {
            Transition {
                job,
                key,
                status,
                error,
                request_id: ctx.request_id,
                message_id: ctx.message_id,
                ..Default::default()
            }
            .log()
        };
        let metrics = &self.inner.metrics;
        match done {
            RunMessage::Started { key } => {
                metrics.count(job, Metric::Started);
                t(&key, "CHAIN_STARTED", "");
                (Some(key), Outcome::Succeeded)
            }
            RunMessage::AlreadyStarted { key } | RunMessage::AlreadyEnded { key, stale: false } => {
                metrics.count(job, Metric::Duplicate);
                t(&key, "DUPLICATE", "");
                (Some(key), Outcome::Duplicate)
            }
            RunMessage::AlreadyEnded { key, stale: true } => {
                metrics.count(job, Metric::Duplicate);
                t(
                    &key,
                    "STALE_END",
                    "an earlier execution's end, after a rerun: the run is left to its current one",
                );
                (Some(key), Outcome::Duplicate)
            }
            RunMessage::Mismatch { key, error } => {
                let outcome = self
                    .reject(
                        ctx,
                        DeadLetterReason::RecordMismatch,
                        &error,
                        Some(job),
                        Some(&key),
                    )
                    .await;
                (Some(key), outcome)
            }
            RunMessage::Ended { key, paused } => {
                let (metric, status) = if paused {
                    (Metric::ChainPaused, "PAUSED")
                } else {
                    (Metric::ChainDone, "DONE")
                };
                metrics.count(job, metric);
                t(&key, status, "");
                (Some(key), Outcome::Succeeded)
            }
            RunMessage::Conflict { key, error } => {
                let outcome = self
                    .reject(
                        ctx,
                        DeadLetterReason::KeyConflict,
                        &error,
                        Some(job),
                        Some(&key),
                    )
                    .await;
                (Some(key), outcome)
            }
            RunMessage::Refused { key, error } => {
                let outcome = self
                    .reject(
                        ctx,
                        DeadLetterReason::StoreRefused,
                        &error,
                        Some(job),
                        key.as_deref(),
                    )
                    .await;
                (key, outcome)
            }
            RunMessage::Unavailable { key, error } => {
                t(&key, "UNAVAILABLE", &error);
                (Some(key), Outcome::Unavailable { error })
            }
        }
    }

    /// Runs a claimed attempt and records its outcome.
    pub(super) async fn run(
        &self,
        ctx: &MessageCtx<'_>,
        envelope: &Envelope,
        registered: &RegisteredJob,
        record: ExecutionRecord,
        Started {
            claimed_at,
            deadline,
        }: Started,
        transition: &Transition<'_>,
    ) -> Outcome {
        let policy = &registered.policy;
        let attempt = record.round_attempt();
        let job = envelope.job.as_str();
        let clock = self.inner.config.clock;
        let started = clock.now();
        let lag_ms = (started - envelope.scheduled_for).num_milliseconds().max(0) as f64;
        self.inner.metrics.emit(
            job,
            &[(Metric::Started, 1.0), (Metric::ScheduleLag, lag_ms)],
        );
        let payload = envelope.payload_value();
        self.log(
            &Transition {
                payload: Some(&payload),
                ..transition.clone()
            },
            "RUNNING",
            attempt,
            0,
            "",
        );

        let (lost_tx, lost_rx) = watch::channel(false);
        let heartbeat = policy.heartbeat.map(|every| Heartbeat {
            store: self.inner.store.clone(),
            queue: self.inner.queue.clone(),
            receipt_handle: ctx.receipt_handle.map(str::to_owned),
            key: record.execution_key.clone(),
            owner: record.owner.clone().unwrap_or_default(),
            every,
            lease: policy.lease,
            clock,
            task: self
                .inner
                .config
                .chains
                .as_ref()
                .and_then(|t| t.heartbeat_of(envelope)),
        });
        // Heartbeats run until the outcome is written (the keeper is dropped at the end).
        let keeper = LeaseKeeper::start(
            heartbeat,
            claimed_at,
            policy.lease,
            self.inner.config.clock_skew,
            lost_tx,
        );
        let effects = Effects::default();
        let mut job_ctx = JobContext::new(
            job.to_string(),
            record.execution_key.clone(),
            envelope.scheduled_for,
            payload,
            attempt,
            lost_rx,
            effects.clone(),
        );
        // A chain step sees what its earlier stages' steps returned.
        let mut unread = None;
        if let (Some(chains), Some(chain)) = (&self.inner.config.chains, &envelope.chain) {
            match chains.step_of(self.inner.store.as_ref(), chain).await {
                Ok(Some(step)) => job_ctx = job_ctx.with_chain(step),
                Ok(None) => {}
                Err(e) => unread = Some(e),
            }
        }
        // A lease no longer confirmed cancels the attempt: the job's future is dropped, and
        // it is never completed as a success (another worker may be running it now). So does
        // the invocation's deadline, early enough to record the attempt.
        let cutoff = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d - DEADLINE_MARGIN).await,
                None => std::future::pending().await,
            }
        };
        let mut result = if attempt > policy.retry.max_attempts {
            // Earlier attempts were claimed and never finished (killed, or out of time).
            Err(JobError::Retryable(format!(
                "attempt {attempt} of at most {}: the earlier ones were claimed and never finished (the worker was stopped or ran out of time); not run again",
                policy.retry.max_attempts
            )))
        } else if let Some(e) = unread {
            Err(JobError::retryable(format!(
                "reading the outputs of the chain's earlier steps: {e}"
            )))
        } else {
            tokio::select! {
                biased;
                lapse = keeper.lapsed() => Err(JobError::retryable(lapse.to_string())),
                () = cutoff => Err(JobError::retryable(
                    "cancelled before the function's deadline: the job did not finish in the time the invocation had left",
                )),
                result = run_guarded(registered, job_ctx) => result,
            }
        };
        // A failed job's effects are dropped; a success's commit with its DONE record.
        let effects = match (&result, effects.take()) {
            (Ok(_), Ok(items)) => items,
            (Ok(_), Err(e)) => {
                result = Err(JobError::permanent(e.to_string()));
                Vec::new()
            }
            (Err(_), _) => Vec::new(),
        };

        let now = clock.now();
        let duration_ms = (now - started).num_milliseconds().max(0) as u64;
        let mut finish = finish_of(&result, policy, attempt);
        let written = match (&finish, effects.is_empty()) {
            (Finish::Succeeded { result: value }, false) => {
                match self
                    .inner
                    .store
                    .commit(&record, value.clone(), now, effects)
                    .await
                {
                    Ok(_) => Ok(()),
                    Err(CommitError::LeaseLost { current }) => {
                        Err(TransitionError::LeaseLost { current })
                    }
                    Err(CommitError::Store(e)) => Err(TransitionError::Store(e)),
                    // The effects can never commit as written: the run fails for good.
                    Err(e @ (CommitError::EffectRefused { .. } | CommitError::Invalid(_))) => {
                        result = Err(JobError::permanent(e.to_string()));
                        finish = finish_of(&result, policy, attempt);
                        self.inner
                            .store
                            .finish(&record, &finish, now)
                            .await
                            .map(|_| ())
                    }
                }
            }
            _ => self
                .inner
                .store
                .finish(&record, &finish, now)
                .await
                .map(|_| ()),
        };
        let error = match &result {
            Err(e) => e.to_string(),
            Ok(_) => String::new(),
        };
        let status = finish.status().as_str();
        match written {
            Ok(()) => {}
            Err(TransitionError::LeaseLost { .. }) => {
                self.inner.metrics.count(job, Metric::LeaseLost);
                self.log(transition, "LEASE_LOST", attempt, duration_ms, &error);
                return Outcome::LeaseLost;
            }
            Err(TransitionError::Store(e)) if e.is_permanent() => {
                let error = format!("the outcome could not be recorded: {e}");
                return self
                    .reject(
                        ctx,
                        DeadLetterReason::StoreRefused,
                        &error,
                        Some(job),
                        Some(&record.execution_key),
                    )
                    .await;
            }
            Err(TransitionError::Store(e)) => {
                self.log(
                    transition,
                    "UNAVAILABLE",
                    attempt,
                    duration_ms,
                    &e.to_string(),
                );
                return Outcome::Unavailable {
                    error: e.to_string(),
                };
            }
        }
        drop(keeper);
        let duration = (Metric::Duration, duration_ms as f64);
        self.log(transition, status, attempt, duration_ms, &error);
        match finish {
            Finish::Succeeded { .. } => {
                self.inner
                    .metrics
                    .emit(job, &[(Metric::Succeeded, 1.0), duration]);
                if policy.pause_after_failures.is_some() {
                    self.inner.streaks.succeeded(transition).await;
                }
                Outcome::Succeeded
            }
            Finish::Retrying { error } => {
                // SQS visibility is in whole seconds: report the delay actually applied.
                let jittered = self.inner.draws.retry_delay(&policy.retry, attempt);
                let delay = Duration::from_secs(jittered.as_secs_f64().ceil() as u64);
                self.hide(ctx.receipt_handle, delay).await;
                self.inner
                    .metrics
                    .emit(job, &[(Metric::Retried, 1.0), duration]);
                Outcome::Retrying {
                    attempt,
                    delay,
                    error,
                }
            }
            Finish::Failed { error } => {
                self.inner
                    .metrics
                    .emit(job, &[(Metric::Failed, 1.0), duration]);
                if let Some(limit) = policy.pause_after_failures {
                    self.inner
                        .streaks
                        .failed(limit, transition, &error, now)
                        .await;
                }
                let reason = match result {
                    Err(JobError::Permanent(_)) => DeadLetterReason::PermanentError,
                    _ => DeadLetterReason::AttemptsExhausted,
                };
                let letter = DeadLetter {
                    body: ctx.body,
                    reason,
                    error: &error,
                    job: Some(job),
                    key: Some(&record.execution_key),
                    attempts: attempt,
                    failed_at: now,
                    source_queue: &self.inner.config.queue_url,
                    source_message_id: ctx.message_id,
                };
                self.dead_letter(&letter).await
            }
        }
    }

    /// Dead-letters a message that can never succeed (nothing was claimed).
    pub(super) async fn reject(
        &self,
        ctx: &MessageCtx<'_>,
        reason: DeadLetterReason,
        error: &str,
        job: Option<&str>,
        key: Option<&str>,
    ) -> Outcome {
        let letter = DeadLetter {
            body: ctx.body,
            reason,
            error,
            job,
            key,
            attempts: 0,
            failed_at: self.inner.config.clock.now(),
            source_queue: &self.inner.config.queue_url,
            source_message_id: ctx.message_id,
        };
        let outcome = self.dead_letter(&letter).await;
        let job = job.unwrap_or(NO_JOB);
        if outcome.acknowledged() {
            let dimension = match job {
                NO_JOB => NO_JOB,
                known if self.inner.registry.get(known).is_some() => known,
                _ => UNKNOWN_JOB,
            };
            self.inner.metrics.count(dimension, Metric::Rejected);
        }
        let transition = Transition {
            job,
            key: key.unwrap_or_default(),
            request_id: ctx.request_id,
            message_id: ctx.message_id,
            ..Default::default()
        };
        self.log(&transition, "REJECTED", 0, 0, &format!("{reason}: {error}"));
        outcome
    }

    pub(super) async fn dead_letter(&self, letter: &DeadLetter<'_>) -> Outcome {
        match self
            .inner
            .queue
            .dead_letter(&dead_letter::outgoing(letter))
            .await
        {
            Ok(()) => Outcome::DeadLettered {
                reason: letter.reason,
                error: letter.error.to_string(),
            },
            Err(error) => {
                let error = error.to_string();
                tracing::error!(
                    message_id = letter.source_message_id,
                    error,
                    "dead letter not sent; message kept"
                );
                Outcome::Unavailable { error }
            }
        }
    }

    /// Hides the message for `delay` so it comes back then (best effort: if this fails it
    /// comes back after its current visibility timeout instead).
    pub(super) async fn hide(&self, receipt_handle: Option<&str>, delay: Duration) {
        let Some(receipt) = receipt_handle else {
            return;
        };
        let secs = delay.min(MAX_VISIBILITY).as_secs_f64().ceil() as i32;
        if let Err(e) = self.inner.queue.change_visibility(receipt, secs).await {
            tracing::warn!(error = %e, "could not change message visibility");
        }
    }

    pub(super) fn log(
        &self,
        t: &Transition<'_>,
        status: &str,
        attempt: u32,
        duration_ms: u64,
        error: &str,
    ) {
        Transition {
            status,
            attempt,
            duration_ms,
            error,
            ..t.clone()
        }
        .log();
    }
}

/// The parts of a message every step needs.
pub(super) struct MessageCtx<'a> {
    pub(super) body: &'a str,
    pub(super) message_id: &'a str,
    pub(super) receipt_handle: Option<&'a str>,
    pub(super) request_id: &'a str,
    /// The message itself: its attributes (a redrive's mark, its waits), its receive count.
    pub(super) message: &'a SqsMessage,
}

/// A claim the processor holds: the record as claimed, as it was before (what giving the
/// claim back restores), and the request that made it.
pub(super) struct Claim<'a> {
    pub(super) record: ExecutionRecord,
    pub(super) before: Option<ExecutionRecord>,
    pub(super) request: &'a ClaimRequest,
}

/// Runs the job in its own task, so a panic becomes a retryable failure instead of taking
/// the batch down, and enforces the policy's timeout.
async fn run_guarded(registered: &RegisteredJob, ctx: JobContext) -> JobResult {
    let future = registered.job.run(ctx);
    let timeout = registered.policy.timeout;
    // The job runs in a task of its own so that a panic is caught; dropping this future
    // (a cancelled attempt) aborts it, dropping the job's future at its next await.
    let mut task = AbortOnDrop(tokio::spawn(async move {
        match timeout {
            Some(limit) => tokio::time::timeout(limit, future)
                .await
                .unwrap_or_else(|_| {
                    Err(JobError::retryable(format!(
                        "timed out after {} ms",
                        limit.as_millis()
                    )))
                }),
            None => future.await,
        }
    }));
    match (&mut task.0).await {
        Ok(result) => result,
        Err(e) if e.is_panic() => {
            let panic = e.into_panic();
            let text = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "non-text panic".into());
            Err(JobError::retryable(format!("job panicked: {text}")))
        }
        Err(e) => Err(JobError::retryable(format!("job task ended: {e}"))),
    }
}

/// How long before an invocation's deadline a running attempt is cancelled (and no new
/// message is started): time to write the outcome and answer the runtime.
pub const DEADLINE_MARGIN: Duration = Duration::from_secs(1);

/// When an attempt began and by when its invocation must end.
pub(super) struct Started {
    claimed_at: Instant,
    deadline: Option<Instant>,
}

/// Aborts the task it holds when dropped (tokio's handles detach instead).
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// When a delivery that met a live lease should come back: never later than just after the
/// lease expires (the design's rule), but sooner while the message is young, since most
/// runs end well before their lease: 2 s, 4 s, 8 s... by the message's receive count. A
/// run that does end early is then acknowledged as a duplicate within seconds, and a long
/// one costs at most a handful of extra receives.
fn in_progress_delay(lease_left_ms: i64, receive_count: u32) -> Duration {
    let after_lease = Duration::from_millis(lease_left_ms.max(0) as u64) + Duration::from_secs(1);
    let probe = Duration::from_secs(2u64 << receive_count.saturating_sub(1).min(12));
    after_lease.min(probe)
}

pub(super) fn short(hash: &str) -> &str {
    &hash[..hash.len().min(12)]
}

/// How an attempt ends, given the job's result and the policy.
fn finish_of(result: &JobResult, policy: &crate::JobPolicy, attempt: u32) -> Finish {
    match result {
        Ok(value) => Finish::Succeeded {
            result: value.clone(),
        },
        Err(e @ JobError::Retryable(_)) if !policy.retry.exhausted(attempt) => Finish::Retrying {
            error: e.to_string(),
        },
        Err(e) => Finish::Failed {
            error: e.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_progress_deliveries_probe_early_but_never_past_the_lease() {
        let secs = |left_ms, n| in_progress_delay(left_ms, n).as_secs_f64();
        assert_eq!(
            [secs(60_000, 1), secs(60_000, 2), secs(60_000, 3)],
            [2.0, 4.0, 8.0]
        );
        assert_eq!(secs(60_000, 9), 61.0, "capped just after the lease");
        assert_eq!(secs(500, 1), 1.5);
        assert_eq!(
            secs(-5_000, 1),
            1.0,
            "an expired lease: come back at once (1 s)"
        );
    }
}
