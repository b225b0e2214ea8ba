//! schedkit's library: everything between a schedule and a recorded outcome, for any
//! binary to use: the worker, the console, a team's own tool.
//!
//! Follow one envelope: [`envelope`] parses it, [`key`] names the run, [`store`] claims it
//! in DynamoDB, [`batch`] runs the [`job`] with heartbeats and records the outcome with
//! [`retry`] deciding when to try again, and [`telemetry`] says what happened. [`poller`]
//! is the same adapter outside Lambda, and [`worker`] starts either from a team's jobs.
//!
//! Around it: [`catalog`] is the one inventory of jobs and their policies, [`schedule`]
//! evaluates their expressions as EventBridge Scheduler does, [`trigger`] keeps the
//! scheduler in sync and enqueues one-off runs, [`iac`] renders the template's
//! catalog-derived parts, and [`ops`] is what an operator does to a deployed stage.
//!
//! What a team may rely on: [`worker`] (`main`, `EmbeddedCatalog`, `Settings`), the job
//! API at the root ([`Jobs`], [`Ctx`], [`Payload`], [`State`], [`FromRef`], [`JobError`],
//! [`permanent`], [`ChainStep`]), [`testing`] (its jobs through the real pipeline without
//! AWS), [`catalog`] (loading and validating a catalog), [`Envelope`] (what a schedule or a
//! tool puts on the queue), [`dead_letter`] (what a letter says), and, for tools of its
//! own, [`ops`] and [`trigger`]. Everything else is public because schedkit's own console,
//! firing engine, tests and simulation use it: it may change with them. What nothing
//! outside the library uses is crate-private.
//!
//! Features: `worker` (default) for the entry point, `trigger` for schedule sync and
//! one-off runs (EventBridge Scheduler), `ops` for operator actions (CloudWatch, STS):
//! a worker compiles only the SDK crates it calls.

#![warn(clippy::too_many_lines)]
#![warn(missing_docs)]

pub mod accounting;
pub mod aws;
pub mod batch;
pub mod catalog;
pub mod clock;
pub mod cost;
pub mod dead_letter;
pub mod effects;
pub mod envelope;
pub mod flow;
pub mod hash;
pub mod iac;
pub mod job;
pub mod key;
#[cfg(feature = "ops")]
pub mod ops;
pub mod orchestrator;
pub mod poller;
pub mod queue;
pub mod retry;
pub mod schedule;
pub mod secrets;
pub mod store;
pub mod telemetry;
pub mod testing;
pub mod trigger;
#[cfg(feature = "worker")]
pub mod worker;

pub use batch::{MessageReport, Outcome, Processor, ProcessorConfig, batch_response};
pub use clock::Clock;
pub use effects::Effects;
pub use envelope::Envelope;
pub use job::{
    ChainStep, Ctx, FromRef, JobError, JobPolicy, JobResult, Jobs, Overlap, Payload, Registry,
    State, permanent,
};
pub use retry::RetryPolicy;
pub use store::{DynamoStore, ExecutionRecord, Status};
pub use telemetry::Metrics;

/// The README's job, compiled by the doc tests so that the first code a reader meets stays
/// true to the API (only in this repository: the README is outside the published crate).
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeJob;
