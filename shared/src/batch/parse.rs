//! Step 1: the body as an envelope. Anything that does not parse is poison: dead-lettered
//! at once with the parser's reason, never retried.

use super::pipeline::{MessageCtx, Step};
use super::processor::Processor;
use crate::dead_letter::DeadLetterReason;
use crate::envelope::Envelope;

impl Processor {
    /// The delivery's envelope, or its outcome as poison.
    pub(super) async fn parse(&self, ctx: &MessageCtx<'_>) -> Step<Envelope> {
        match Envelope::parse(ctx.body()) {
            Ok(envelope) => Ok(envelope),
            Err(e) => Err(self
                .reject(ctx, DeadLetterReason::Poison, &e.to_string(), None, None)
                .await),
        }
    }
}
