//! Messages that cannot go on: dead-lettered with their reason (nothing claimed, or the
//! store refused for good), or, when the store or the DLQ cannot be reached, left for the
//! queue to deliver again.

use super::outcome::Outcome;
use super::pipeline::MessageCtx;
use super::processor::{NO_JOB, Processor, UNKNOWN_JOB};
use crate::dead_letter::{DeadLetter, DeadLetterReason};
use crate::store::StoreError;
use crate::telemetry::{Event, Transition};

impl Processor {
    /// Dead-letters a message that can never succeed (nothing was claimed).
    pub(super) async fn reject(
        &self,
        ctx: &MessageCtx<'_>,
        reason: DeadLetterReason,
        error: &str,
        job: Option<&str>,
        key: Option<&str>,
    ) -> Outcome {
        let now = self.inner.config.clock.now();
        let letter = DeadLetter::written(ctx.body(), reason, error, 0, now)
            .of_run(job, key)
            .sent_from(&self.source_queue(ctx), ctx.message_id());
        let outcome = self.dead_letter(&letter, reason).await;
        let job = job.unwrap_or(NO_JOB);
        // The job's name comes from an untrusted message: a name this worker does not know
        // is counted as `(unknown)`, not as a new metric each.
        let counted_as = outcome.acknowledged().then(|| match job {
            NO_JOB => NO_JOB,
            known if self.inner.registry.get(known).is_some() => known,
            _ => UNKNOWN_JOB,
        });
        let t = Transition {
            job,
            key: key.unwrap_or_default(),
            request_id: ctx.request_id,
            message_id: ctx.message_id(),
            ..Default::default()
        };
        let why = format!("{reason}: {error}");
        self.emit(
            &t,
            Event::Rejected {
                why: &why,
                counted_as,
            },
        );
        outcome
    }

    /// Sends a dead letter: the message's outcome once it is sent, or unavailable (the
    /// message is kept, and comes back to send it).
    pub(super) async fn dead_letter(
        &self,
        letter: &DeadLetter,
        reason: DeadLetterReason,
    ) -> Outcome {
        match self.inner.queue.dead_letter(&letter.outgoing()).await {
            Ok(()) => Outcome::DeadLettered {
                reason,
                error: letter.error.clone().unwrap_or_default(),
            },
            Err(error) => {
                let error = error.to_string();
                tracing::error!(
                    message_id = letter.source_message_id.as_deref().unwrap_or_default(),
                    error,
                    "dead letter not sent; message kept"
                );
                Outcome::Unavailable { error }
            }
        }
    }

    /// A store call failed: refused for good (dead-lettered with the reason) or
    /// unavailable for now (the message comes back).
    pub(super) async fn store_failed(
        &self,
        ctx: &MessageCtx<'_>,
        t: &Transition<'_>,
        e: StoreError,
    ) -> Outcome {
        let error = e.to_string();
        if e.is_permanent() {
            let reason = DeadLetterReason::StoreRefused;
            return self
                .reject(ctx, reason, &error, Some(t.job), Some(t.key))
                .await;
        }
        let unavailable = Event::Unavailable {
            attempt: 0,
            duration_ms: 0,
            error: &error,
        };
        self.emit(t, unavailable);
        Outcome::Unavailable { error }
    }
}
