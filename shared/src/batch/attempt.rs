//! Step 6: the attempt. The job runs in a task of its own (a panic is a retryable error),
//! under its policy's timeout, while a lease keeper renews the run's lease (and a chain
//! step's task) and cancels the attempt when the lease is no longer confirmed; a Lambda
//! invocation's deadline cancels it early enough to record it. The job's effects are
//! collected, to be committed with a DONE record by `settle`.

use aws_sdk_dynamodb::types::TransactWriteItem;
use chrono::{DateTime, Utc};
use tokio::sync::watch;

use super::claim::Claim;
use super::lease::{Heartbeat, LeaseKeeper};
use super::pipeline::MessageCtx;
use super::processor::{DEADLINE_MARGIN, Processor};
use super::route::Routed;
use crate::effects::Effects;
use crate::envelope::Envelope;
use crate::job::{Ctx, JobError, JobResult, RegisteredJob};
use crate::telemetry::{Event, Transition};

/// A finished attempt, its outcome not yet written.
pub(super) struct Attempted {
    /// The attempt within the round, from 1.
    pub(super) attempt: u32,
    /// What the job returned (or why it was stopped).
    pub(super) result: JobResult,
    /// The job's effects: empty unless it succeeded.
    pub(super) effects: Vec<TransactWriteItem>,
    /// When it began, on the processor's clock.
    pub(super) started: DateTime<Utc>,
    /// When its body ended (or was stopped): the outcome's time. Taken here, not as the
    /// outcome is written: the run a permit passes to in memory starts at this instant,
    /// and a finish stamped after its start would show both running at once.
    pub(super) ended_at: DateTime<Utc>,
    /// Renews the lease until the outcome is written; `settle` drops it then.
    pub(super) keeper: LeaseKeeper,
    /// The job's body came to its end here (it was not stopped by a lapsed lease or the
    /// invocation's deadline): nothing of it runs on, so its permits may be given back
    /// before its outcome is written.
    pub(super) ended: bool,
}

impl Processor {
    /// Runs the claimed run's job once.
    pub(super) async fn attempt(
        &self,
        ctx: &MessageCtx<'_>,
        envelope: &Envelope,
        job: &Routed<'_>,
        claim: &Claim,
        t: &Transition<'_>,
    ) -> Attempted {
        let attempt = claim.record.round_attempt();
        let started = self.inner.config.clock.now();
        let lag_ms = (started - envelope.scheduled_for).num_milliseconds().max(0) as f64;
        let payload = envelope.payload_value();
        let running = Transition {
            payload: Some(&payload),
            ..t.clone()
        };
        self.emit(&running, Event::Running { attempt, lag_ms });
        let (lost_tx, lost_rx) = watch::channel(false);
        let keeper = self.keep_lease(ctx, envelope, job, claim, lost_tx);
        let effects = Effects::default();
        let job_ctx = Ctx::new(
            t.job.to_string(),
            claim.record.execution_key.clone(),
            envelope.scheduled_for,
            payload,
            attempt,
            lost_rx,
            effects.clone(),
        )
        .with_secrets(
            job.registered.secrets.clone(),
            self.inner.registry.secret_store().cloned(),
        );
        let mut stopped = false;
        let mut result = self
            .run_job(ctx, envelope, job, job_ctx, attempt, &keeper, &mut stopped)
            .await;
        let ended_at = self.inner.config.clock.now();
        // A failed job's effects are dropped; a success's commit with its DONE record.
        let effects = match (&result, effects.take()) {
            (Ok(_), Ok(items)) => items,
            (Ok(_), Err(e)) => {
                result = Err(JobError::permanent(e.to_string()));
                Vec::new()
            }
            (Err(_), _) => Vec::new(),
        };
        Attempted {
            attempt,
            result,
            effects,
            started,
            ended_at,
            keeper,
            ended: !stopped,
        }
    }

    /// Starts renewing the claim's lease (heartbeats, when the policy has them) and
    /// watching it; `lost` is told when it is no longer confirmed.
    fn keep_lease(
        &self,
        ctx: &MessageCtx<'_>,
        envelope: &Envelope,
        job: &Routed<'_>,
        claim: &Claim,
        lost: watch::Sender<bool>,
    ) -> LeaseKeeper {
        let policy = &job.registered.policy;
        let clock = self.inner.config.clock;
        let heartbeat = policy.heartbeat.map(|every| Heartbeat {
            store: self.inner.store.clone(),
            queue: self.inner.queue.clone(),
            receipt_handle: ctx.receipt().map(str::to_owned),
            key: claim.record.execution_key.clone(),
            owner: claim.record.owner.clone().unwrap_or_default(),
            every,
            lease: policy.lease,
            clock,
            task: job.step_of.and_then(|c| c.heartbeat_of(envelope)),
        });
        LeaseKeeper::start(
            heartbeat,
            claim.claimed_at,
            policy.lease,
            self.inner.config.clock_skew,
            lost,
        )
    }

    /// The job's result, unless the lease lapses or the invocation's deadline nears first
    /// (`stopped` then says so).
    #[allow(clippy::too_many_arguments)]
    async fn run_job(
        &self,
        ctx: &MessageCtx<'_>,
        envelope: &Envelope,
        job: &Routed<'_>,
        mut job_ctx: Ctx,
        attempt: u32,
        keeper: &LeaseKeeper,
        stopped: &mut bool,
    ) -> JobResult {
        let max_attempts = job.registered.policy.retry.max_attempts;
        if attempt > max_attempts {
            // Earlier attempts were claimed and never finished (killed, or out of time).
            return Err(JobError::retryable(format!(
                "attempt {attempt} of at most {max_attempts}: the earlier ones were claimed and never finished (the worker was stopped or ran out of time); not run again"
            )));
        }
        // A chain step sees what its earlier stages' steps returned; a step of a
        // cancelled chain run is cancelled unrun.
        if let (Some(chains), Some(chain)) = (job.step_of, &envelope.chain) {
            let store = self.inner.store.as_ref();
            match chains.run_cancelled(store, chain).await {
                Ok(Some(note)) => return self.cancel_step(&job_ctx.key, chain, note).await,
                Ok(None) => {}
                Err(e) => {
                    return Err(JobError::retryable(format!(
                        "reading the step's chain run: {e}"
                    )));
                }
            }
            match chains.step_of(self.inner.store.as_ref(), chain).await {
                Ok(Some(step)) => job_ctx = job_ctx.with_chain(step),
                Ok(None) => {}
                Err(e) => {
                    return Err(JobError::retryable(format!(
                        "reading the outputs of the chain's earlier steps: {e}"
                    )));
                }
            }
        }
        // A lease no longer confirmed cancels the attempt: the job's future is dropped, and
        // it is never completed as a success (another worker may be running it now). So
        // does the invocation's deadline, early enough to record the attempt.
        let cutoff = async {
            match ctx.deadline {
                Some(d) => tokio::time::sleep_until(d - DEADLINE_MARGIN).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            lapse = keeper.lapsed() => {
                *stopped = true;
                Err(JobError::retryable(lapse.to_string()))
            }
            () = cutoff => {
                *stopped = true;
                Err(JobError::retryable(
                    "cancelled before the function's deadline: the job did not finish in the time the invocation had left",
                ))
            }
            result = run_guarded(job.registered, job_ctx) => result,
        }
    }
}

impl Processor {
    /// The step `key` of a cancelled chain run: its own record cancelled too, so the
    /// outcome written after is refused and the message acknowledged as cancelled.
    async fn cancel_step(
        &self,
        key: &str,
        chain: &crate::envelope::ChainContext,
        note: crate::store::OperatorNote,
    ) -> JobResult {
        let req = crate::store::CancelRequest {
            key: key.to_string(),
            by: note.by,
            reason: format!(
                "its chain run `{}` was cancelled: {}",
                chain.key, note.reason
            ),
            now: self.inner.config.clock.now(),
            only: vec![],
            arrived: None,
        };
        match self.inner.store.cancel(&req).await {
            Ok(_) => Err(JobError::permanent("its chain run was cancelled")),
            Err(e) => Err(JobError::retryable(format!(
                "cancelling the step of a cancelled chain run: {e}"
            ))),
        }
    }
}

/// Runs the job in its own task, so a panic becomes a retryable failure instead of taking
/// the batch down, and enforces the policy's timeout.
async fn run_guarded(registered: &RegisteredJob, ctx: Ctx) -> JobResult {
    let job = registered.job.clone();
    let timeout = registered.policy.timeout;
    // The job runs in a task of its own so that a panic is caught, its arguments' making
    // included (a payload type's `Deserialize`, a state's `FromRef`); dropping this future
    // (a cancelled attempt) aborts it, dropping the job's future at its next await.
    let mut task = AbortOnDrop(tokio::spawn(async move {
        let future = job.run(ctx);
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

/// Aborts the task it holds when dropped (tokio's handles detach instead).
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}
