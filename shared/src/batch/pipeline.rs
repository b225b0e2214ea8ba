//! One delivery's walk through the worker, a step to a module, in the order a reader
//! follows it:
//!
//! 1. [`parse`](super::parse): the body as an envelope (poison → DLQ);
//! 2. [`route`](super::route): a chain run's trigger or end goes to its chain; a job's
//!    message to its registered job (unknown → DLQ), as a chain's step when it is one (a
//!    step that does not match its step → DLQ);
//! 3. [`key`](super::key): the run's execution key (unusable → DLQ);
//! 4. [`no_place`](super::no_place): a run this worker knows has no place in a full
//!    gate's line is sent back unclaimed; then [`claim`](super::claim): the run claimed in the store; a decided run, a run in
//!    progress elsewhere and a key conflict are answered there;
//! 5. [`admit`](super::admit): the job's overlap slot (enter, wait, or skip), then
//!    [`limits`](super::limits): a permit of each of its flow-control gates (or wait);
//! 6. [`attempt`](super::attempt): the job run under its lease keeper and deadlines;
//! 7. [`settle`](super::settle): the outcome written (a commit with the job's effects, or a
//!    finish), then the message's fate (acknowledged, hidden for the backoff, dead-lettered)
//!    and the job's failure streak; the slot left;
//! 8. [`answer`](super::answer): a chain step's Step Functions task answered.
//!
//! Each step returns what the next one needs, or the outcome that ends the walk (`Err`), so
//! the walk reads as the list above. Chains hook in at one point, the route: it says
//! whether the message is a chain's step, and every later step reads that answer.
//! Every transition is one [`Event`]: its log line and its metrics written together.

use tokio::time::Instant;
use tracing::Instrument;

use super::delivery::Delivery;
use super::outcome::{MessageReport, Outcome};
use super::processor::Processor;
use crate::envelope::Envelope;
use crate::telemetry::{Event, Transition, traces};

/// A step's result: what the next step needs, or the message's outcome, which ends the walk.
pub(super) type Step<T> = Result<T, Outcome>;

/// The parts of a delivery every step needs.
pub(super) struct MessageCtx<'a> {
    /// The delivery itself: its body, its attributes (a redrive's mark, its waits), its
    /// receive count.
    pub(super) delivery: &'a Delivery,
    /// The Lambda request id, or empty outside Lambda.
    pub(super) request_id: &'a str,
    /// The invocation's deadline (Lambda), by which every outcome must be written.
    pub(super) deadline: Option<Instant>,
}

impl MessageCtx<'_> {
    /// The envelope's text.
    pub(super) fn body(&self) -> &str {
        &self.delivery.body
    }

    /// This copy's id on the jobs queue.
    pub(super) fn message_id(&self) -> &str {
        &self.delivery.message_id
    }

    /// What hides or deletes this copy.
    pub(super) fn receipt(&self) -> Option<&str> {
        self.delivery.receipt_handle.as_deref()
    }

    /// The transitions of the run `key` of `envelope`'s job, as this message sees them.
    pub(super) fn transition<'t>(&'t self, envelope: &'t Envelope, key: &'t str) -> Transition<'t> {
        Transition {
            job: &envelope.job,
            key,
            execution_id: envelope.execution_id.as_deref().unwrap_or_default(),
            request_id: self.request_id,
            message_id: self.message_id(),
            ..Default::default()
        }
    }
}

impl Processor {
    /// One delivery, from its body to its acknowledged (or not) outcome.
    pub(super) async fn walk(
        &self,
        delivery: &Delivery,
        request_id: &str,
        deadline: Option<Instant>,
    ) -> MessageReport {
        let ctx = MessageCtx {
            delivery,
            request_id,
            deadline,
        };
        let mut report = MessageReport {
            message_id: delivery.message_id.clone(),
            receipt_handle: delivery.receipt_handle.clone(),
            job: None,
            key: None,
            outcome: Outcome::Succeeded,
        };
        let envelope = match self.parse(&ctx).await {
            Ok(envelope) => envelope,
            Err(outcome) => {
                report.outcome = outcome;
                return report;
            }
        };
        report.job = Some(envelope.job.clone());
        let mut span = None;
        let outcome = self
            .walk_run(&ctx, &envelope, &mut report.key, &mut span)
            .await
            .unwrap_or_else(|ended| ended);
        let answer = self.answer(&envelope, report.key.as_deref(), outcome);
        report.outcome = match &span {
            Some(span) => answer.instrument(span.clone()).await,
            None => answer.await,
        };
        if let Some(span) = span {
            span.record("schedkit.outcome", report.outcome.label());
        }
        report
    }

    /// Steps 2 to 7 for a parsed envelope; `key` is set as soon as the run's key is known,
    /// and `span` then to the delivery's span in the run's trace (the rest of the walk
    /// runs in it).
    async fn walk_run(
        &self,
        ctx: &MessageCtx<'_>,
        envelope: &Envelope,
        key: &mut Option<String>,
        span: &mut Option<tracing::Span>,
    ) -> Step<Outcome> {
        let job = self.route(ctx, envelope, key).await?;
        let run_key = self.key(ctx, envelope, &job).await?;
        *key = Some(run_key.clone());
        // A chain's step is in its chain run's trace; any other run is its own root.
        let root = match &envelope.chain {
            Some(c) if c.step.is_some() => c.key.as_str(),
            _ => run_key.as_str(),
        };
        let delivery =
            traces::delivery_span(&envelope.job, root, &run_key, ctx.delivery.carried_span());
        *span = Some(delivery.clone());
        let run_key = run_key.as_str();
        // Steps 4 to 7, in the delivery's span.
        async {
            let t = ctx.transition(envelope, run_key);
            let gates = self.gates(ctx, envelope, &job, &t).await?;
            let entering = self.no_place(ctx, envelope, &job, &gates, &t).await?;
            let claim = self
                .claim(ctx, envelope, &job, &t)
                .instrument(tracing::info_span!("claim"))
                .await;
            let claim = self.not_coming(ctx, &gates, claim, &t).await?;
            tracing::Span::current().record("schedkit.attempt", claim.record.attempt);
            let admission = self.admit(ctx, &job, &claim, &t).await;
            let admission = self.not_coming(ctx, &gates, admission, &t).await?;
            let entered = self
                .enter_limits(ctx, envelope, &job, &claim, &gates, &entering, &t)
                .await;
            // Through its gates (or sent away): no longer on its way into them.
            drop(entering);
            let permits = match entered {
                Ok(permits) => permits,
                Err(outcome) => {
                    // Not run: nothing goes on under the slot's entry.
                    self.leave_entered(admission, &t).await;
                    return Err(outcome);
                }
            };
            // The attempt's span: the job, then its outcome written and acted on.
            let attempt = tracing::info_span!(
                "attempt",
                otel.name = format!("attempt {}", claim.record.attempt),
                schedkit.key = run_key,
                schedkit.attempt = claim.record.attempt,
                schedkit.outcome = tracing::field::Empty,
            );
            let outcome = async {
                let job_span =
                    tracing::info_span!("job", otel.name = format!("job {}", envelope.job));
                let attempted = self
                    .attempt(ctx, envelope, &job, &claim, &t)
                    .instrument(job_span)
                    .await;
                // A body that came to its end: its permits are given back (and handed on
                // to the runs waiting for them) while its outcome is written, not after: a
                // limit counts bodies running, and the next one's start is not held up by
                // this one's write. A body stopped (its lease lapsed: another worker may
                // run it) gives them back only once its outcome is written.
                if !attempted.ended {
                    let outcome = self.settle(ctx, &job, &claim.record, attempted, &t).await;
                    if outcome_written(&outcome) {
                        self.release_permits(permits, &t).await;
                    } else {
                        self.forget_in_hand((t.key, permits.owner()), permits.items());
                    }
                    return outcome;
                }
                // The hand-on's write is sent first: the next run's start waits on it
                // alone, not behind this run's outcome in the store's queue (on
                // LocalStack, under a shared limit of 4 on a 50 ms job, each write took
                // some 33 ms, and a permit's turn was the body and one write).
                let settled = self.settle(ctx, &job, &claim.record, attempted, &t);
                let ((), outcome) = tokio::join!(self.release_permits(permits, &t), settled);
                outcome
            }
            .instrument(attempt.clone())
            .await;
            attempt.record("schedkit.outcome", outcome.label());
            if ended_for_good(&outcome) {
                let chain = envelope.chain.as_ref().map(|c| c.key.as_str());
                let start = first_instant(&claim.record, envelope);
                traces::run_ended(run_key, chain, &envelope.job, start, outcome.label());
            }
            self.leave(admission, &outcome, &t).await;
            Ok(outcome)
        }
        .instrument(delivery)
        .await
    }

    /// Writes a transition's log line and metrics.
    pub(super) fn emit(&self, t: &Transition<'_>, event: Event<'_>) {
        event.record(t, &self.inner.metrics);
    }
}

/// Whether the run ended for good with this delivery (its own span then ends).
fn ended_for_good(outcome: &Outcome) -> bool {
    matches!(
        outcome,
        Outcome::Succeeded | Outcome::DeadLettered { .. } | Outcome::Cancelled
    )
}

/// When the run began: its scheduled time, or its first claim if that came first (a
/// run fired for a time ahead).
fn first_instant(
    record: &crate::store::ExecutionRecord,
    envelope: &Envelope,
) -> std::time::SystemTime {
    let created = chrono::DateTime::parse_from_rfc3339(&record.created_at)
        .map(|t| t.with_timezone(&chrono::Utc))
        .unwrap_or(envelope.scheduled_for);
    std::time::SystemTime::from(created.min(envelope.scheduled_for))
}

/// Whether the run's outcome is written, so that what it held (its permits) may be given
/// back: not after a lost lease or an unknown outcome, when the run may still be going on
/// elsewhere (the holder's record then says when its permits are free). A cancelled run's
/// attempt here has stopped, and no other can start.
pub(super) fn outcome_written(outcome: &Outcome) -> bool {
    matches!(
        outcome,
        Outcome::Succeeded
            | Outcome::Retrying { .. }
            | Outcome::DeadLettered { .. }
            | Outcome::Cancelled
    )
}
