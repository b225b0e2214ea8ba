//! Step Functions as the worker sees it: start a chain run's execution, answer a step's
//! task (success with its output, failure with its reason), keep a running step's task
//! alive.
//!
//! The worker's chain logic (`batch::chains`) calls only this interface, so it runs the
//! same over Step Functions ([`SfnOrchestrator`]: what ships, one request per call) and
//! over an in-memory one (the deterministic simulation, which plays the state machine).

mod memory;
mod sfn;

use std::future::Future;
use std::pin::Pin;

pub use memory::{Answer, MemoryOrchestrator, OrchestratorState};
pub use sfn::SfnOrchestrator;

/// The name of stage `stage`'s state machine of `chain`: `schedkit-<stage>.<chain>`. The
/// `.` is in no stage's name (`[a-z0-9-]`), so the prefix `schedkit-<stage>.` names one
/// stage's state machines and no other's: its policies grant them all with one ARN (stage
/// `prod`'s prefix is not `prod-eu`'s).
pub fn state_machine_name(stage: &str, chain: &str) -> String {
    format!("{}{chain}", state_machine_name_prefix(stage))
}

/// What every state machine name of stage `stage` starts with.
pub fn state_machine_name_prefix(stage: &str) -> String {
    format!("schedkit-{stage}.")
}

/// An orchestrator call in flight.
pub(crate) type OrchestratorCall<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Why an execution was not started.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StartError {
    /// An execution of that name ran already and closed (a name is used once).
    #[error("an execution of that name exists already")]
    AlreadyExists,
    /// It can never start as asked (no such state machine, a bad name or input).
    #[error("{0}")]
    Refused(String),
    /// The service could not be reached: try again later.
    #[error("{0}")]
    Unavailable(String),
}

/// What a look for a chain's state machine by name found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// The state machine, sending its steps to this worker's queue.
    Machine(String),
    /// None of that name.
    Missing,
    /// One of that name that sends its steps to another queue (another stage's, whose
    /// name and chain's name joined make the same name): not this worker's to start.
    Foreign(String),
    /// The service refused to say (access denied): it will not say later either.
    Refused(String),
    /// The service could not be reached: look again later.
    Unavailable(String),
}

/// What the worker asks of Step Functions. A task answer for a token the service no longer
/// waits for (the task timed out and its step was sent again) is not an error: the other
/// message's run answers its own token.
pub trait Orchestrator: Send + Sync + std::fmt::Debug + 'static {
    /// Starts the execution `name` of the state machine `machine` with `input`; starting a
    /// running one again with the same input is fine (the service returns it).
    fn start_execution<'a>(
        &'a self,
        machine: &'a str,
        name: &'a str,
        input: &'a str,
    ) -> OrchestratorCall<'a, Result<(), StartError>>;

    /// Answers the task `token` with success and `output` (JSON text).
    fn task_success<'a>(
        &'a self,
        token: &'a str,
        output: &'a str,
    ) -> OrchestratorCall<'a, Result<(), String>>;

    /// Answers the task `token` with failure: `error` (a short code) and its `cause`.
    fn task_failure<'a>(
        &'a self,
        token: &'a str,
        error: &'a str,
        cause: &'a str,
    ) -> OrchestratorCall<'a, Result<(), String>>;

    /// Keeps the task `token` alive past its heartbeat timeout.
    fn task_heartbeat<'a>(&'a self, token: &'a str) -> OrchestratorCall<'a, Result<(), String>>;

    /// The state machine called `name`, and whether its definition sends its steps to
    /// `queue_url`: how a worker started without the template's prefix finds its chains'.
    /// An orchestrator that knows no names finds none.
    fn find_state_machine<'a>(
        &'a self,
        name: &'a str,
        queue_url: &'a str,
    ) -> OrchestratorCall<'a, Found> {
        let _ = (name, queue_url);
        Box::pin(std::future::ready(Found::Missing))
    }
}
