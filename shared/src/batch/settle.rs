//! Step 7: the attempt's outcome written, then the message's fate. A success with effects
//! commits them with its DONE record, all or none (effects that can never commit fail the
//! run for good); every other outcome is one finish. Only once the write is durable: DONE
//! is acknowledged (and ends the job's failure streak), RETRYING hides the message for its
//! backoff, FAILED counts toward the streak and sends the dead letter, then is
//! acknowledged. A write refused because the lease was taken over, or not answered, leaves
//! the message as it is.

use std::time::Duration;

use aws_sdk_dynamodb::types::TransactWriteItem;
use chrono::{DateTime, Utc};

use super::attempt::Attempted;
use super::claim::Claim;
use super::outcome::Outcome;
use super::pipeline::MessageCtx;
use super::processor::Processor;
use super::route::Routed;
use tracing::Instrument;

use crate::dead_letter::{DeadLetter, DeadLetterReason};
use crate::job::JobPolicy;
use crate::job::{JobError, JobResult};
use crate::store::{
    AttemptEntry, AttemptOutcome, CommitError, ExecutionRecord, Finish, Status, TransitionError,
    timestamp,
};
use crate::telemetry::{Event, Transition};

/// What the attempt's event says besides its outcome.
struct Ran<'a> {
    attempt: u32,
    duration_ms: u64,
    now: DateTime<Utc>,
    error: &'a str,
    /// The record as the attempt claimed it (its owner, when it began).
    claimed: &'a ExecutionRecord,
}

impl Processor {
    /// Writes the attempt's outcome and acts on it: the message's outcome.
    pub(super) async fn settle(
        &self,
        ctx: &MessageCtx<'_>,
        job: &Routed<'_>,
        record: &ExecutionRecord,
        attempted: Attempted,
        t: &Transition<'_>,
    ) -> Outcome {
        let Attempted {
            attempt,
            mut result,
            effects,
            started,
            ended_at: now,
            keeper,
            ended: _,
        } = attempted;
        let policy = &job.registered.policy;
        // The record says when the attempt began, not when it was claimed: a run its
        // limits admitted began once it held its permits.
        let record = &ExecutionRecord {
            started_at: Some(timestamp(started)),
            ..record.clone()
        };
        let (finish, written) = self
            .write(record, &mut result, effects, policy, attempt, now)
            .await;
        let error = match &result {
            Err(e) => e.to_string(),
            Ok(_) => String::new(),
        };
        let ran = Ran {
            attempt,
            duration_ms: (now - started).num_milliseconds().max(0) as u64,
            now,
            error: &error,
            claimed: record,
        };
        if let Err(e) = written {
            return self.not_written(ctx, t, e, &ran).await;
        }
        drop(keeper);
        match finish {
            Finish::Succeeded { .. } => {
                let Ran { duration_ms, .. } = ran;
                self.emit(
                    t,
                    Event::Done {
                        attempt,
                        duration_ms,
                    },
                );
                if policy.pause_after_failures.is_some() {
                    self.inner.streaks.succeeded(t).await;
                }
                Outcome::Succeeded
            }
            Finish::Retrying { error } => self.retry(ctx, policy, t, &ran, error).await,
            // Never the job's own outcome: only a run held back too long ends so.
            Finish::LimitWait { error } => {
                let reason = DeadLetterReason::LimitWait;
                self.fail(ctx, policy, t, &ran, reason, &error).await
            }
            Finish::Failed { error } => {
                let reason = match result {
                    Err(e) if !e.is_retryable() => DeadLetterReason::PermanentError,
                    _ => DeadLetterReason::AttemptsExhausted,
                };
                self.fail(ctx, policy, t, &ran, reason, &error).await
            }
        }
    }

    /// Writes the outcome: a commit with the effects, or a finish. Effects that can never
    /// commit as written turn the result into a permanent failure, written instead.
    async fn write(
        &self,
        record: &ExecutionRecord,
        result: &mut JobResult,
        effects: Vec<TransactWriteItem>,
        policy: &JobPolicy,
        attempt: u32,
        now: DateTime<Utc>,
    ) -> (Finish, Result<(), TransitionError>) {
        let store = &self.inner.store;
        let finish = finish_of(result, policy, attempt);
        let value = match &finish {
            Finish::Succeeded { result: value } if !effects.is_empty() => value.clone(),
            _ => {
                let written = store
                    .finish(record, &finish, now)
                    .instrument(tracing::info_span!("finish"))
                    .await
                    .map(|_| ());
                return (finish, written);
            }
        };
        let commit = store
            .commit(record, value, now, effects)
            .instrument(tracing::info_span!("commit"));
        let refused = match commit.await {
            Ok(_) => return (finish, Ok(())),
            Err(CommitError::LeaseLost { current }) => {
                return (finish, Err(TransitionError::LeaseLost { current }));
            }
            Err(CommitError::Store(e)) => return (finish, Err(TransitionError::Store(e))),
            Err(e @ (CommitError::EffectRefused { .. } | CommitError::Invalid(_))) => e,
        };
        // The effects can never commit as written: the run fails for good.
        *result = Err(JobError::permanent(refused.to_string()));
        let finish = finish_of(result, policy, attempt);
        let written = store
            .finish(record, &finish, now)
            .instrument(tracing::info_span!("finish"))
            .await
            .map(|_| ());
        (finish, written)
    }

    /// The outcome was not written: someone else owns the run now (the message is left),
    /// the store refused it for good (dead-lettered), or it did not answer (the message
    /// comes back, and its claim says what was written).
    async fn not_written(
        &self,
        ctx: &MessageCtx<'_>,
        t: &Transition<'_>,
        e: TransitionError,
        ran: &Ran<'_>,
    ) -> Outcome {
        let (attempt, duration_ms) = (ran.attempt, ran.duration_ms);
        match e {
            // Fenced out by an operator's cancellation: the attempt stopped at a heartbeat
            // (or ended before it learnt), its outcome and effects refused. Acknowledged.
            TransitionError::LeaseLost { current: Some(c) } if c.status == Status::Cancelled => {
                // The job may have run to its end before it learnt: its outcome and
                // effects are refused, but what it did elsewhere stands; said in the log.
                let end = match ran.error {
                    "" => format!(
                        "attempt {attempt} had run to its end (succeeded) before it learnt: its outcome and effects were refused, work it did outside its effects stands"
                    ),
                    e if e.starts_with("lease") => String::new(),
                    e => format!(
                        "attempt {attempt} had ended ({e}) before it learnt: its outcome was refused"
                    ),
                };
                if !end.is_empty() {
                    self.note_cancelled_attempt(t, ran, &end).await;
                }
                self.cancelled_after(t, &c, &end)
            }
            TransitionError::LeaseLost { .. } => {
                let error = ran.error;
                self.emit(
                    t,
                    Event::LeaseLost {
                        attempt,
                        duration_ms,
                        error,
                    },
                );
                Outcome::LeaseLost
            }
            TransitionError::Store(e) if e.is_permanent() => {
                let error = format!("the outcome could not be recorded: {e}");
                let reason = DeadLetterReason::StoreRefused;
                self.reject(ctx, reason, &error, Some(t.job), Some(t.key))
                    .await
            }
            TransitionError::Store(e) => {
                let error = e.to_string();
                self.emit(
                    t,
                    Event::Unavailable {
                        attempt,
                        duration_ms,
                        error: &error,
                    },
                );
                Outcome::Unavailable { error }
            }
        }
    }

    /// Writes an attempt that ran on after its run was cancelled into the cancelled
    /// record's history, so the record says so (the log alone did before). Best effort:
    /// the cancellation stands whatever becomes of it.
    async fn note_cancelled_attempt(&self, t: &Transition<'_>, ran: &Ran<'_>, end: &str) {
        let entry = AttemptEntry {
            attempt: ran.claimed.attempt,
            owner: ran.claimed.owner.clone().unwrap_or_default(),
            started_at: ran.claimed.started_at.clone().unwrap_or_default(),
            finished_at: timestamp(ran.now),
            outcome: AttemptOutcome::Cancelled,
            error: Some(end.to_string()),
            duration_ms: Some(ran.duration_ms),
            limit_wait: false,
        };
        if let Err(e) = self.inner.store.note_cancelled_attempt(t.key, &entry).await {
            tracing::warn!(key = t.key, error = %e, "the cancelled record does not say its attempt ran on");
        }
    }

    /// Ends a claimed run that never ran as FAILED for `reason` (it waited for its limits
    /// longer than its job allows): the finish written, then the dead letter.
    pub(super) async fn fail_unrun(
        &self,
        ctx: &MessageCtx<'_>,
        job: &Routed<'_>,
        claim: &Claim,
        reason: DeadLetterReason,
        error: &str,
        t: &Transition<'_>,
    ) -> Outcome {
        let now = self.inner.config.clock.now();
        let finish = match reason {
            DeadLetterReason::LimitWait => Finish::LimitWait {
                error: error.to_string(),
            },
            _ => Finish::Failed {
                error: error.to_string(),
            },
        };
        let ran = Ran {
            attempt: claim.record.round_attempt(),
            duration_ms: 0,
            now,
            error,
            claimed: &claim.record,
        };
        if let Err(e) = self.inner.store.finish(&claim.record, &finish, now).await {
            return self.not_written(ctx, t, e, &ran).await;
        }
        let policy = &job.registered.policy;
        self.fail(ctx, policy, t, &ran, reason, error).await
    }

    /// RETRYING is written: the message is hidden for the backoff.
    async fn retry(
        &self,
        ctx: &MessageCtx<'_>,
        policy: &JobPolicy,
        t: &Transition<'_>,
        ran: &Ran<'_>,
        error: String,
    ) -> Outcome {
        let attempt = ran.attempt;
        // SQS visibility is in whole seconds: report the delay actually applied.
        let jittered = self.inner.draws.retry_delay(&policy.retry, attempt);
        let delay = Duration::from_secs(jittered.as_secs_f64().ceil() as u64);
        let duration_ms = ran.duration_ms;
        self.emit(
            t,
            Event::Retrying {
                attempt,
                duration_ms,
                error: ran.error,
            },
        );
        self.hide(ctx, delay).await;
        Outcome::Retrying {
            attempt,
            delay,
            error,
        }
    }

    /// FAILED is written: counted toward the job's streak, then the dead letter.
    async fn fail(
        &self,
        ctx: &MessageCtx<'_>,
        policy: &JobPolicy,
        t: &Transition<'_>,
        ran: &Ran<'_>,
        reason: DeadLetterReason,
        error: &str,
    ) -> Outcome {
        let (attempt, duration_ms) = (ran.attempt, ran.duration_ms);
        self.emit(
            t,
            Event::Failed {
                attempt,
                duration_ms,
                error: ran.error,
            },
        );
        // A run its limits held back too long did not fail by itself: contention never
        // pauses a schedule.
        if let Some(limit) = policy.pause_after_failures
            && reason != DeadLetterReason::LimitWait
        {
            self.inner.streaks.failed(limit, t, error, ran.now).await;
        }
        let letter = DeadLetter::written(ctx.body(), reason, error, attempt, ran.now)
            .of_run(Some(t.job), Some(t.key))
            .sent_from(&self.source_queue(ctx), ctx.message_id());
        self.dead_letter(&letter, reason)
            .instrument(tracing::info_span!(
                "dead letter",
                schedkit.reason = reason.as_str()
            ))
            .await
    }
}

/// How an attempt ends, given the job's result and the policy.
fn finish_of(result: &JobResult, policy: &JobPolicy, attempt: u32) -> Finish {
    match result {
        Ok(value) => Finish::Succeeded {
            result: value.clone(),
        },
        Err(e) if e.is_retryable() && !policy.retry.exhausted(attempt) => Finish::Retrying {
            error: e.to_string(),
        },
        Err(e) => Finish::Failed {
            error: e.to_string(),
        },
    }
}
