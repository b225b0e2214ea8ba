//! Step 2: which way a message goes. A chain's own messages (its trigger, its end) carry
//! the chain as their job and go to the chain's run (`chain_run`); every other message
//! runs its registered job. This is the one place chains hook into the walk: with chains
//! configured, a message with a chain context must be a step of a known chain, of the
//! step's job, under the step's key (else it is dead-lettered `record-mismatch`), and the
//! [`Routed`] value says so to every later step.

use super::chains::Chains;
use super::pipeline::{MessageCtx, Step};
use super::processor::Processor;
use crate::dead_letter::DeadLetterReason;
use crate::envelope::Envelope;
use crate::job::RegisteredJob;

/// The job a message runs, and whether it runs as a chain's step.
pub(super) struct Routed<'a> {
    /// The job, as registered with this worker.
    pub(super) registered: &'a RegisteredJob,
    /// The chains the message is a step of: its heartbeats keep the step's task alive, it
    /// reads its earlier steps' outputs, and it never goes through its job's overlap
    /// policy (the chain orders its own steps). None: a plain job's message (or a worker
    /// without chains, which runs a step's message like any other).
    pub(super) step_of: Option<&'a Chains>,
}

impl Processor {
    /// Where `envelope` goes: its job, or its chain run's outcome (`key` then set to the
    /// run's key), or its outcome as a message no job can take.
    pub(super) async fn route<'a>(
        &'a self,
        ctx: &MessageCtx<'_>,
        envelope: &Envelope,
        key: &mut Option<String>,
    ) -> Step<Routed<'a>> {
        let mut step_of = None;
        if let Some(chains) = self.inner.config.chains.as_ref() {
            if chains.is_chain(&envelope.job) {
                let (run_key, outcome) = self.chain_run(chains, ctx, envelope).await;
                *key = run_key;
                return Err(outcome);
            }
            // A step's message runs (and answers) only the step it names, under its key.
            if let Err(error) = chains.check_step(envelope) {
                *key = envelope.key.clone();
                let job = Some(envelope.job.as_str());
                let reason = DeadLetterReason::RecordMismatch;
                return Err(self
                    .reject(ctx, reason, &error, job, envelope.key.as_deref())
                    .await);
            }
            step_of = envelope.chain.as_ref().map(|_| chains);
        }
        let Some(registered) = self.inner.registry.get(&envelope.job) else {
            let known: Vec<_> = self.inner.registry.names().collect();
            let error = format!(
                "job `{}` is not registered with this worker (known: {})",
                envelope.job,
                known.join(", ")
            );
            let job = Some(envelope.job.as_str());
            return Err(self
                .reject(ctx, DeadLetterReason::UnknownJob, &error, job, None)
                .await);
        };
        Ok(Routed {
            registered,
            step_of,
        })
    }
}
