//! schedkit's library: everything between an SQS message and a recorded outcome.
//!
//! Follow one envelope: [`envelope`] parses it, [`key`] names the run, [`store`] claims it
//! in DynamoDB, [`batch`] runs the [`job`] with heartbeats and records the outcome with
//! [`retry`] deciding when to try again, and [`telemetry`] says what happened. [`poller`]
//! is the same adapter outside Lambda.

pub mod aws;
pub mod batch;
pub mod catalog;
pub mod envelope;
pub mod iac;
pub mod job;
pub mod key;
#[cfg(feature = "ops")]
pub mod ops;
pub mod poller;
pub mod retry;
pub mod schedule;
pub mod store;
pub mod telemetry;
pub mod trigger;
#[cfg(feature = "worker")]
pub mod worker;

pub use batch::{MessageReport, Outcome, Processor, ProcessorConfig, batch_response};
pub use envelope::Envelope;
pub use job::{Job, JobContext, JobError, JobPolicy, JobResult, Registry};
pub use retry::RetryPolicy;
pub use store::{DynamoStore, ExecutionRecord, Status};
pub use telemetry::Metrics;
