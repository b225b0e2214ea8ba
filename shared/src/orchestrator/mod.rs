//! Step Functions as schedkit sees it: the worker starts a chain run's execution, answers a
//! step's task (success with its output, failure with its reason) and keeps a running
//! step's task alive; an operator's chain commands (`ops::chains`) read an execution, stop
//! it, start a rerun's and redrive a failed one.
//!
//! The worker's chain logic (`batch::chains`) and the operator's commands call only this
//! interface, so they run the same over Step Functions ([`SfnOrchestrator`]: what ships,
//! one request per call) and over an in-memory one (the deterministic simulation, which
//! plays the state machine).

mod memory;
mod sfn;

use std::future::Future;
use std::pin::Pin;

use crate::aws::AwsError;

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

/// The ARN of the execution `name` of the state machine `machine`:
/// `arn:…:execution:<machine>:<name>` from `arn:…:stateMachine:<machine>` (how Step
/// Functions names them; an ARN of another form gets `:<name>` added).
pub fn execution_arn(machine: &str, name: &str) -> String {
    format!(
        "{}:{name}",
        machine.replacen(":stateMachine:", ":execution:", 1)
    )
}

/// Stops the execution `arn` unless Step Functions describes it as ended; returns whether
/// a stop was sent. Why not "stop if described running": DescribeExecution is eventually
/// consistent, so an execution started a moment ago may be described as missing, and a
/// cancel that believed it would leave it running. Stopping one that does not exist is no
/// error; one described as ended is left alone (a trigger of a cancelled run delivered
/// again, long after, sends no stop).
pub async fn stop_unless_ended<O: Orchestrator + ?Sized>(
    orchestrator: &O,
    arn: &str,
    error: &str,
    cause: &str,
) -> Result<bool, AwsError> {
    let ended = orchestrator
        .describe_execution(arn)
        .await?
        .is_some_and(|e| !e.is_running());
    if ended {
        return Ok(false);
    }
    orchestrator.stop_execution(arn, error, cause).await?;
    Ok(true)
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

/// One execution as Step Functions describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecutionInfo {
    /// Step Functions' own status: `RUNNING`, `SUCCEEDED` (a chain that paused succeeded
    /// too: it pauses by design), `FAILED`, `TIMED_OUT`, `ABORTED` or `PENDING_REDRIVE`.
    pub status: String,
    /// Its input (JSON text), which a rerun's execution starts with again.
    pub input: Option<String>,
}

impl ExecutionInfo {
    /// Whether it is still running.
    pub fn is_running(&self) -> bool {
        self.status == "RUNNING"
    }

    /// Whether it ended by reaching its end (DONE or PAUSED for a chain).
    pub fn succeeded(&self) -> bool {
        self.status == "SUCCEEDED"
    }
}

/// What schedkit asks of Step Functions. A task answer for a token the service no longer
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

    /// The execution `arn` (`arn:…:execution:<machine>:<name>`); None when there is none.
    fn describe_execution<'a>(
        &'a self,
        arn: &'a str,
    ) -> OrchestratorCall<'a, Result<Option<ExecutionInfo>, AwsError>>;

    /// Stops the execution `arn` with `error` and `cause`; one that does not exist is left
    /// as it is (Ok), and so is one that has ended.
    fn stop_execution<'a>(
        &'a self,
        arn: &'a str,
        error: &'a str,
        cause: &'a str,
    ) -> OrchestratorCall<'a, Result<(), AwsError>>;

    /// Restarts the failed execution `arn` from its failed states (RedriveExecution).
    fn redrive_execution<'a>(&'a self, arn: &'a str) -> OrchestratorCall<'a, Result<(), AwsError>>;

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
