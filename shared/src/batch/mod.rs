//! The SQS batch adapter, shared by the Lambda handler and the long-polling worker.

mod admit;
mod answer;
mod attempt;
mod chain_run;
mod chains;
mod claim;
mod crowded;
mod delivery;
mod draws;
mod failure_streak;
mod gate_looks;
mod hides;
mod in_hand;
mod in_hand_waiters;
mod in_hand_watch;
mod key;
mod lease;
mod limits;
mod line;
mod no_place;
mod no_place_seen;
mod outcome;
mod parse;
mod pipeline;
mod processor;
mod reject;
mod requeue;
mod route;
mod settle;
mod visibility;

pub use chains::Chains;
pub use delivery::Delivery;
pub use delivery::{WAITING_SINCE, WAITS};
pub use failure_streak::{AutoPause, PAUSED_BY_WORKER};
pub use outcome::{MessageReport, Outcome, batch_response};
pub use processor::{Processor, ProcessorConfig, UNKNOWN_JOB};
