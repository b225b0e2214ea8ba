//! Step 4: the run claimed under its key (one conditional write, see `store`). A claimed
//! run goes on; every other answer ends the walk here: a decided run is a duplicate (or,
//! FAILED by this very delivery, its dead letter is sent again), a run whose lease is live
//! elsewhere comes back after it (hidden for its first looks, sent again after), a key
//! first used with another payload is a conflict. Too near the invocation's deadline,
//! nothing is claimed: the message is back at once for the next one.

use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::time::Instant;

use super::outcome::Outcome;
use super::pipeline::{MessageCtx, Step};
use super::processor::{DEADLINE_MARGIN, Processor};
use super::requeue;
use super::route::Routed;
use crate::dead_letter::{DeadLetter, DeadLetterReason};
use crate::envelope::{Envelope, format_instant};
use crate::job::RegisteredJob;
use crate::key::payload_hash;
use crate::store::{ClaimOutcome, ClaimRequest, ExecutionRecord, Status};
use crate::telemetry::{Event, Transition};

/// A claim the processor holds: the record as claimed, as it was before (what giving the
/// claim back restores), and the request that made it.
pub(super) struct Claim {
    pub(super) record: ExecutionRecord,
    pub(super) before: Option<ExecutionRecord>,
    pub(super) request: ClaimRequest,
    /// Taken before the claim's wall time: the lease is never thought longer than it is.
    pub(super) claimed_at: Instant,
}

impl Processor {
    /// The run claimed, or the message's outcome when the claim decided otherwise.
    pub(super) async fn claim(
        &self,
        ctx: &MessageCtx<'_>,
        envelope: &Envelope,
        job: &Routed<'_>,
        t: &Transition<'_>,
    ) -> Step<Claim> {
        let claimed_at = Instant::now();
        if ctx
            .deadline
            .is_some_and(|d| claimed_at + DEADLINE_MARGIN >= d)
        {
            // Back at once for the next invocation, no attempt spent (and no receive).
            let resent = self.come_back(ctx, Duration::ZERO).await;
            self.emit(t, Event::Deferred);
            return Err(Outcome::Deferred { resent });
        }
        let request = self.claim_request(ctx, envelope, job.registered, t.key);
        let claimed = match self.inner.store.claim(&request).await {
            Ok(claimed) => claimed,
            Err(e) => return Err(self.store_failed(ctx, t, e).await),
        };
        Err(match claimed {
            ClaimOutcome::Claimed { record, before } => {
                return Ok(Claim {
                    record,
                    before: before.map(|b| *b),
                    request,
                    claimed_at,
                });
            }
            ClaimOutcome::Duplicate(record) => self.duplicate(t, &record),
            ClaimOutcome::InProgress(record) => self.in_progress(ctx, t, &record).await,
            ClaimOutcome::AlreadyFailed(record) => {
                self.already_failed(ctx, job.registered, &record, t).await
            }
            ClaimOutcome::Conflict(record) => self.conflict(ctx, t, &record, &request).await,
            ClaimOutcome::Cancelled(record) => self.cancelled(t, &record),
        })
    }

    fn claim_request(
        &self,
        ctx: &MessageCtx<'_>,
        envelope: &Envelope,
        registered: &RegisteredJob,
        key: &str,
    ) -> ClaimRequest {
        let config = &self.inner.config;
        let policy = &registered.policy;
        ClaimRequest {
            key: key.to_string(),
            job: envelope.job.clone(),
            scheduled_for: format_instant(&envelope.scheduled_for),
            payload_hash: payload_hash(envelope),
            input: ctx.body().to_string(),
            message_id: Some(ctx.delivery.origin_id().to_string()),
            owner: format!("{}:{}", config.worker_id, self.inner.draws.token()),
            now: config.clock.now(),
            lease: policy.lease,
            retention: policy.record_retention,
            redrive: ctx.delivery.redrive(),
        }
    }

    /// The run is decided (DONE, or FAILED and this is not a redrive of its letter).
    fn duplicate(&self, t: &Transition<'_>, record: &ExecutionRecord) -> Outcome {
        let note = if record.status == Status::Failed {
            "the run FAILED and this message is not a redrive of its dead letter: not run again"
        } else {
            ""
        };
        let attempt = record.round_attempt();
        self.emit(t, Event::Duplicate { attempt, note });
        Outcome::Duplicate
    }

    /// An operator cancelled the run: the delivery is acknowledged, never run.
    pub(super) fn cancelled(&self, t: &Transition<'_>, record: &ExecutionRecord) -> Outcome {
        self.cancelled_after(t, record, "")
    }

    /// [`Processor::cancelled`], saying how an attempt that had begun ended (`attempt_end`).
    pub(super) fn cancelled_after(
        &self,
        t: &Transition<'_>,
        record: &ExecutionRecord,
        attempt_end: &str,
    ) -> Outcome {
        let (by, reason) = record
            .cancelled
            .as_ref()
            .map_or(("an operator", ""), |c| (c.by.as_str(), c.reason.as_str()));
        self.emit(
            t,
            Event::Cancelled {
                by,
                reason,
                attempt_end,
            },
        );
        Outcome::Cancelled
    }

    /// Another worker holds the run's live lease: the message looks again later.
    async fn in_progress(
        &self,
        ctx: &MessageCtx<'_>,
        t: &Transition<'_>,
        record: &ExecutionRecord,
    ) -> Outcome {
        let left_ms =
            record.lease_expires_at.unwrap_or(0) - self.inner.config.clock.now().timestamp_millis();
        let looks = ctx.delivery.looks();
        let retry_in = in_progress_delay(left_ms, looks);
        // Hidden for its first looks (one request; most runs end within them), sent again
        // after (two): a long run's duplicates never climb toward the queue's
        // maxReceiveCount.
        let resent = if looks < requeue::HIDDEN_LOOKS {
            self.hide(ctx, retry_in).await;
            false
        } else {
            self.come_back(ctx, retry_in).await
        };
        let attempt = record.round_attempt();
        self.emit(t, Event::InProgress { attempt });
        Outcome::InProgress { retry_in, resent }
    }

    /// The run FAILED by this very delivery (its answer lost, or the worker stopped before
    /// its letter): the dead letter is sent again (a duplicate at worst) and the message
    /// acknowledged, without running the job.
    async fn already_failed(
        &self,
        ctx: &MessageCtx<'_>,
        registered: &RegisteredJob,
        record: &ExecutionRecord,
        t: &Transition<'_>,
    ) -> Outcome {
        let attempts = record.failed_round_attempts();
        let policy = &registered.policy;
        // A run its limits held back too long failed by contention, not by its job: its
        // letter says so again, and it counts toward no pause.
        let waited = record.failed_waiting();
        let reason = if waited {
            DeadLetterReason::LimitWait
        } else if policy.retry.exhausted(attempts) {
            DeadLetterReason::AttemptsExhausted
        } else {
            DeadLetterReason::PermanentError
        };
        let error = record.last_error.clone().unwrap_or_default();
        // When the round failed, as the first letter said: a redrive of either letter
        // reopens that round only.
        let failed_at = record
            .finished_at
            .as_deref()
            .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
            .map_or_else(|| self.inner.config.clock.now(), |t| t.with_timezone(&Utc));
        self.emit(
            t,
            Event::AlreadyFailed {
                attempts,
                error: &error,
            },
        );
        // Counted again (a set: no run counts twice), in case the worker that recorded it
        // stopped before it did.
        if let Some(limit) = policy.pause_after_failures
            && !waited
        {
            self.inner.streaks.failed(limit, t, &error, failed_at).await;
        }
        let letter = DeadLetter::written(ctx.body(), reason, &error, attempts, failed_at)
            .of_run(Some(t.job), Some(t.key))
            .sent_from(&self.source_queue(ctx), ctx.message_id());
        self.dead_letter(&letter, reason).await
    }

    /// The key was first used with another payload: dead-lettered, never run.
    async fn conflict(
        &self,
        ctx: &MessageCtx<'_>,
        t: &Transition<'_>,
        record: &ExecutionRecord,
        request: &ClaimRequest,
    ) -> Outcome {
        let error = format!(
            "key `{}` was first used with a different payload (payload hash {} on record, {} in this message)",
            t.key,
            short(&record.payload_hash),
            short(&request.payload_hash)
        );
        let reason = DeadLetterReason::KeyConflict;
        self.reject(ctx, reason, &error, Some(t.job), Some(t.key))
            .await
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

fn short(hash: &str) -> &str {
    &hash[..hash.len().min(12)]
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
