//! The SQS batch adapter, shared by the Lambda handler and the long-polling worker.

pub mod dead_letter;
mod lease;
mod outcome;
mod processor;

pub use dead_letter::{DeadLetterReason, attr};
pub use outcome::{MessageReport, Outcome, batch_response};
pub use processor::{Processor, ProcessorConfig, UNKNOWN_JOB};
