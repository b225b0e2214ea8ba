//! The workspace's integration tests, as one test binary (one link of the AWS SDK instead
//! of one per area); all but `layering` run against LocalStack. Each module proves one area:

/// A team's crate outside the workspace (the starter, copied) taken to a deployed stage
/// by the book's own commands, each of its jobs run to DONE, compiling only itself and the
/// library in the checkout's build directory. (Named to sort first: tests start in name
/// order, and it was the longest when it compiled its dependencies cold.)
mod a_crate_of_your_own;

/// The accountant's reading of a stage: missed and late firings among six hours of two
/// hourly jobs' records; a paused job's firings not expected from its pause on.
mod accounting;
/// The bad-input catalogue: one test per shape, each a clear rejection or a capped,
/// stored outcome, decided on its first delivery.
mod bad_input;
/// `make bench` still runs: `peer-bench` at a tiny N against the debug worker, every
/// section measured on both sides.
mod bench_smoke;
/// Cancelling through the console with the worker polling: a RETRYING run never runs
/// again, a RUNNING one stops at its next heartbeat with its effect never applied, 50
/// queued runs cancelled in bulk after a right preview; audited.
mod cancel;
/// A team's whole catalog, grown (60 jobs and 10 chains here, 1,000 and 100 with `make
/// scale`): rendered with the demo's stack size, linted, deployed (through S3), synced
/// once and again with no write, an hour fired and run to DONE once, nothing missed, and the
/// failing job named by the failed alarm's own query. (Named to sort early: a long test.)
mod catalog_at_scale;
/// The generated chain definitions on LocalStack's Step Functions, answered by hand:
/// stages in order, a failed branch lets its sibling finish and pauses the chain.
mod chain_definition;
/// A chain step's lost worker: SIGKILLed (another worker finishes it after the lease) or
/// silent (Step Functions sends the step again after its heartbeat timeout); applied once.
mod chain_failures;
/// Chains through the worker: steps run once and answered, the chain ends DONE; a step
/// failed for good lets its sibling finish and pauses the chain before the last stage; a
/// rerun runs only the failed step and the later stages; a skipped step lets the later
/// stages run (who skipped it kept); a cancelled chain stops its execution and step.
mod chains;
/// Chaos: killed pollers, duplicates, failures, poison, conflicts and an outage, then
/// exact accounting.
mod chaos;
/// The in-memory store's condition evaluator agrees with DynamoDB's on generated
/// conditions and items: what entitles the simulation to judge production's conditions.
mod condition_language;
/// A crontab imported and its command jobs run by a polling worker: two DONE with their
/// output, a failing one dead-lettered with its exit code and output's tail.
mod cron_migration;
/// Effects committed with the outcome: all or nothing, fenced, late commits refused,
/// conditions and limits failing the run for good.
mod effects;
/// At-least-once delivery in, effect applied once out; two DynamoDB requests per success
/// (with or without effects), one per duplicate.
mod exactly_once;
/// `executions list`: newest first across pages, each record once; DONE records stay
/// off the (sparse) status index.
mod executions_listing;
/// Stopping LocalStack ends every executor process and removes the unpacked code.
mod executor_cleanup;
/// SQS fair queues: each run sent with its fair share as its group.
mod fair_groups;
/// The local firing engine: a fast-forwarded day fires exactly the expected envelopes,
/// once, with dead letters, flexible windows and after-completion actions as AWS has them;
/// a dead target holds no healthy schedule back.
mod firing_engine;
/// The firing engine in real time: catch-up after downtime (once, with two engines), a
/// dead engine's claim taken over, claims unreachable for a while, a prompt stop.
mod firing_engine_real_time;
/// Flow control through three worker processes: a keyed concurrency per tenant, a limit
/// two jobs share, a permit back from a SIGKILLed worker within its lease and 5 s, a rate's
/// minute, and a chain's parallel stage on a limited job.
mod flow_control;
/// Host jobs on the stage's host jobs queue: scheduled, fired and redriven there, never to
/// the function's queue; a poller of that queue runs them, a failure's letter goes back.
mod host_queue;
/// The SAM template deploys, redeploys as a no-op, updates, and runs an envelope to DONE.
mod infrastructure;
/// Rust Lambdas inside LocalStack without Docker: Invoke, logs, errors, timeouts,
/// concurrency, SQS event source mappings, Step Functions tasks.
mod lambda_executor;
/// The crates' layering: no cycle, the library depends on no other room, a Lambda links
/// only the library, the console calls AWS only through the library.
mod layering;
/// Leases that cannot lapse silently: an unconfirmed lease cancels the attempt before any
/// worker within the clock-skew bound can reclaim it; heartbeats run until the outcome is
/// written. (Heartbeats keeping a long job: `shared/tests/worker_logic/leases.rs`.)
mod leases;
/// Inside each crate: no circle of modules, no import through the root's re-exports.
mod module_graph;
/// DynamoDB unreachable or losing answers: nothing acknowledged, nothing half-written.
mod outage;
/// Every write reaches only the record it owns: keys never name schedkit's own items, a
/// decided message never holds an overlap slot, a chain
/// record stays within DynamoDB's limits, and a FAILED run runs again only from its dead
/// letter.
mod ownership;
/// The poller never waits for its slowest message: a long job in hand, short ones run
/// beside it.
mod poller;
/// Crash recovery within the lease: finished messages acknowledged at once, a dead
/// worker's unfinished ones back after about the lease, in both modes.
mod recovery;
/// Poison messages, key conflicts, empty keys and requests the store refuses for good go
/// to the DLQ at once, with a reason that names the problem.
mod rejections;
/// Retries with backoff, and what happens when they run out.
mod retries;
/// The bootstrap `sam build` produced (the artifact users deploy) runs a job to DONE.
mod sam_build;
/// Schedule sync creates, changes and deletes schedules, and writes nothing the second time.
mod schedule_sync;
/// A job's secrets from SSM and Secrets Manager on LocalStack: cached, read again after
/// their max age.
mod secrets;
/// The memory store answers every transition as the DynamoDB store does: the same calls
/// on both, the same answers and records.
mod store_contract;
/// The store against a reference model: random claims, heartbeats, finishes, commits,
/// expiries and redrives from owners with skewed clocks agree step by step.
mod store_model;
/// Traces: the shipped month-end chain fired through the console and run by a worker
/// process exports one trace to the test kit's OTLP receiver, from the trigger to the last
/// step, every parent right, the retries and the dead letter as spans.
mod traces;
/// The urgent queue: a poller reads it beside the jobs queue, every call reaches it.
mod urgent_queue;
/// The example worker binary in Lambda mode, through a Lambda Runtime API: the partial
/// batch response.
mod worker_lambda_mode;
/// The worker binary with the README's settings alone: finds its chains' state machines
/// by the stage's names, runs a chain to DONE, dead-letters one it cannot start as
/// `unconfigured`.
mod worker_settings;
/// The example worker binary's stdout: EMF metric lines and JSON logs only, without
/// payloads unless asked.
mod worker_telemetry;
