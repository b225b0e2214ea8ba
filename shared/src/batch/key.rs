//! Step 3: the run's execution key: the envelope's own, the job's key template over the
//! payload, or `<job>#<scheduled_for>` (see `crate::key`). A key that cannot be derived,
//! or that names one of schedkit's own items, makes the message poison.

use super::pipeline::{MessageCtx, Step};
use super::processor::Processor;
use super::route::Routed;
use crate::dead_letter::DeadLetterReason;
use crate::envelope::Envelope;
use crate::key::execution_key;

impl Processor {
    /// The key the run is claimed under, or the message's outcome as poison.
    pub(super) async fn key(
        &self,
        ctx: &MessageCtx<'_>,
        envelope: &Envelope,
        job: &Routed<'_>,
    ) -> Step<String> {
        let key = execution_key(envelope, job.registered.policy.key_template.as_ref())
            .map_err(|e| e.to_string())
            .and_then(|key| self.outside_chains(envelope, key));
        match key {
            Ok(key) => Ok(key),
            Err(error) => {
                let job = Some(envelope.job.as_str());
                Err(self
                    .reject(ctx, DeadLetterReason::Poison, &error, job, None)
                    .await)
            }
        }
    }

    /// `key`, unless a job's own run (not a chain's step) would take a chain run's or
    /// step's place with it: `<chain>#…` is the chain's key space. Such a run, first
    /// there, made the chain's step meet a key conflict and its run pause for good, and
    /// the operator's commands on the step act on the other job's run.
    fn outside_chains(&self, envelope: &Envelope, key: String) -> Result<String, String> {
        let chains = self.inner.config.chains.as_ref();
        let is_step = envelope.chain.as_ref().is_some_and(|c| c.step.is_some());
        match chains
            .and_then(|c| c.key_space_of(&key))
            .filter(|_| !is_step)
        {
            Some(chain) => Err(format!(
                "key `{key}` lies in chain `{chain}`'s key space (its runs `{chain}#<time>` and their steps `{chain}#<time>#<step>`): a job's run may not take their place; give it another key"
            )),
            None => Ok(key),
        }
    }
}
