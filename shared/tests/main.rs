//! The library's pure logic through its public API, as one test binary. Each module proves
//! one area:

/// Catalog validation names file, job and field for every invalid fixture.
mod catalog;
/// Command jobs: the process's environment, exit codes, output tail, and its group ended
/// with its attempt.
mod command_jobs;
/// The job API through `schedkit::testing`: extractors, `?` on any error, a bad payload
/// field named, state built once; a duplicate, a retry, a lost lease, a lost answer.
mod job_api;
/// Schedule expressions, table-driven against independently worked-out instants.
mod schedule_expressions;
/// Properties of cron schedules in any zone, against a minute-by-minute scan.
mod schedule_properties;
/// The deterministic simulation: the real worker, the memory store and queue, faults from
/// a seed, invariants after each.
mod simulation;
/// What the worker decides, over the memory store and queue on a paused clock: runs once,
/// retries after its backoff, dead-letters poison, survives a lost answer; overlap
/// policies; waits that never reach the DLQ; heartbeats that keep a long job; an
/// invocation's deadline.
mod worker_logic;
