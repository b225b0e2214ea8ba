//! Step 8: a chain step's outcome answers its Step Functions task, once decided (see
//! `chains::steps`). A message that is not a step is left as it is.

use tracing::Instrument;

use super::outcome::Outcome;
use super::processor::Processor;
use crate::envelope::Envelope;

impl Processor {
    /// The message's outcome once its step's task is answered: the same, or what to report
    /// instead when the answer could not be sent (the message comes back to answer it).
    pub(super) async fn answer(
        &self,
        envelope: &Envelope,
        key: Option<&str>,
        outcome: Outcome,
    ) -> Outcome {
        let Some(chains) = &self.inner.config.chains else {
            return outcome;
        };
        let store = self.inner.store.as_ref();
        let answer = chains.answer(store, envelope, key, &outcome);
        // A decided step answers its task: that is the span (a retry answers nothing).
        let decided = matches!(outcome, Outcome::Succeeded | Outcome::DeadLettered { .. });
        let step = envelope.chain.as_ref().is_some_and(|c| c.step.is_some());
        let answered = if decided && step {
            answer.instrument(tracing::info_span!("chain answer")).await
        } else {
            answer.await
        };
        match answered {
            Some(instead) => instead,
            None => outcome,
        }
    }
}
