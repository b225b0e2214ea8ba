//! A chain run's own messages through the worker: its trigger starts the run's Step
//! Functions execution, its end records the run DONE or PAUSED (`chains::runs` decides);
//! here each decision becomes the message's outcome and its event.

use super::chains::{Chains, RunMessage};
use super::outcome::Outcome;
use super::pipeline::MessageCtx;
use super::processor::Processor;
use crate::dead_letter::DeadLetterReason;
use crate::envelope::Envelope;
use crate::telemetry::{Event, Transition, traces};

impl Processor {
    /// A chain run's trigger or end: the key it concerns and the message's outcome.
    pub(super) async fn chain_run(
        &self,
        chains: &Chains,
        ctx: &MessageCtx<'_>,
        envelope: &Envelope,
    ) -> (Option<String>, Outcome) {
        let now = self.inner.config.clock.now();
        let began = std::time::SystemTime::now();
        let store = self.inner.store.as_ref();
        let done = chains
            .handle_run(store, envelope, ctx.body(), ctx.message_id(), now)
            .await;
        let job = envelope.job.as_str();
        let emit = |key: &str, event: Event<'_>| {
            let t = Transition {
                job,
                key,
                request_id: ctx.request_id,
                message_id: ctx.message_id(),
                ..Default::default()
            };
            self.emit(&t, event);
        };
        let reject = |reason, key: Option<String>, error: String| async move {
            let outcome = self
                .reject(ctx, reason, &error, Some(job), key.as_deref())
                .await;
            (key, outcome)
        };
        match done {
            RunMessage::Started { key } => {
                emit(&key, Event::ChainStarted);
                let carried = ctx.delivery.carried_span();
                traces::chain_event(job, &key, "chain start", carried, began, None);
                (Some(key), Outcome::Succeeded)
            }
            RunMessage::AlreadyStarted { key } | RunMessage::AlreadyEnded { key, stale: false } => {
                let duplicate = Event::Duplicate {
                    attempt: 0,
                    note: "",
                };
                emit(&key, duplicate);
                (Some(key), Outcome::Duplicate)
            }
            RunMessage::AlreadyEnded { key, stale: true } => {
                emit(&key, Event::StaleEnd);
                (Some(key), Outcome::Duplicate)
            }
            RunMessage::Ended { key, paused } => {
                emit(&key, Event::ChainEnded { paused });
                let end = if paused { "chain paused" } else { "chain done" };
                let start = std::time::SystemTime::from(envelope.scheduled_for);
                traces::chain_event(job, &key, end, None, began, Some(start));
                (Some(key), Outcome::Succeeded)
            }
            RunMessage::Unavailable { key, error } => {
                let unavailable = Event::Unavailable {
                    attempt: 0,
                    duration_ms: 0,
                    error: &error,
                };
                emit(&key, unavailable);
                (Some(key), Outcome::Unavailable { error })
            }
            RunMessage::Mismatch { key, error } => {
                reject(DeadLetterReason::RecordMismatch, Some(key), error).await
            }
            RunMessage::Conflict { key, error } => {
                reject(DeadLetterReason::KeyConflict, Some(key), error).await
            }
            RunMessage::Refused { reason, key, error } => reject(reason, key, error).await,
        }
    }
}
