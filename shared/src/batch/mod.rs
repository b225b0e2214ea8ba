//! The SQS batch adapter, shared by the Lambda handler and the long-polling worker.

mod admit;
mod chains;
pub mod dead_letter;
mod draws;
mod failure_streak;
mod lease;
mod outcome;
mod processor;
mod requeue;
mod visibility;

pub use chains::Chains;
pub use dead_letter::{DeadLetterReason, attr};
pub use failure_streak::{AutoPause, PAUSED_BY_WORKER};
pub use outcome::{MessageReport, Outcome, batch_response};
pub use processor::{Processor, ProcessorConfig, UNKNOWN_JOB};
pub use requeue::WAITS;
