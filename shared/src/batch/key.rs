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
        match execution_key(envelope, job.registered.policy.key_template.as_ref()) {
            Ok(key) => Ok(key),
            Err(e) => {
                let error = e.to_string();
                let job = Some(envelope.job.as_str());
                Err(self
                    .reject(ctx, DeadLetterReason::Poison, &error, job, None)
                    .await)
            }
        }
    }
}
