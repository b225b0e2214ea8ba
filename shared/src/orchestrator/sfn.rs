//! The orchestrator that ships: AWS Step Functions, one request per call.

use aws_sdk_sfn::Client;
use aws_sdk_sfn::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_sfn::operation::start_execution::StartExecutionError;

use super::{Orchestrator, OrchestratorCall, StartError};

/// Step Functions through the SDK.
#[derive(Debug, Clone)]
pub struct SfnOrchestrator {
    sfn: Client,
}

impl SfnOrchestrator {
    /// Step Functions as `sfn` reaches it.
    pub fn new(sfn: Client) -> Self {
        SfnOrchestrator { sfn }
    }
}

/// Ok when the answer was taken, or when Step Functions no longer waits for that token (it
/// timed the task out and sent the step again: the other message answers).
fn settled<E, R>(result: Result<(), SdkError<E, R>>) -> Result<(), String>
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug + 'static,
{
    let Err(e) = result else {
        return Ok(());
    };
    let code = e
        .as_service_error()
        .and_then(|s| s.code())
        .unwrap_or_default();
    if matches!(code, "TaskTimedOut" | "TaskDoesNotExist" | "InvalidToken") {
        tracing::info!(
            code,
            "chain step answered after Step Functions stopped waiting for it"
        );
        return Ok(());
    }
    Err(crate::aws::describe(&e))
}

impl Orchestrator for SfnOrchestrator {
    fn start_execution<'a>(
        &'a self,
        machine: &'a str,
        name: &'a str,
        input: &'a str,
    ) -> OrchestratorCall<'a, Result<(), StartError>> {
        Box::pin(async move {
            let started = self
                .sfn
                .start_execution()
                .state_machine_arn(machine)
                .name(name)
                .input(input)
                .send()
                .await;
            let Err(e) = started else {
                return Ok(());
            };
            Err(match e.as_service_error() {
                Some(StartExecutionError::ExecutionAlreadyExists(_)) => StartError::AlreadyExists,
                Some(
                    StartExecutionError::StateMachineDoesNotExist(_)
                    | StartExecutionError::StateMachineDeleting(_)
                    | StartExecutionError::InvalidArn(_)
                    | StartExecutionError::InvalidName(_)
                    | StartExecutionError::InvalidExecutionInput(_),
                ) => StartError::Refused(crate::aws::describe(&e)),
                _ => StartError::Unavailable(crate::aws::describe(&e)),
            })
        })
    }

    fn task_success<'a>(
        &'a self,
        token: &'a str,
        output: &'a str,
    ) -> OrchestratorCall<'a, Result<(), String>> {
        Box::pin(async move {
            let sent = self
                .sfn
                .send_task_success()
                .task_token(token)
                .output(output)
                .send()
                .await;
            settled(sent.map(|_| ()))
        })
    }

    fn task_failure<'a>(
        &'a self,
        token: &'a str,
        error: &'a str,
        cause: &'a str,
    ) -> OrchestratorCall<'a, Result<(), String>> {
        Box::pin(async move {
            let sent = self
                .sfn
                .send_task_failure()
                .task_token(token)
                .error(error)
                .cause(cause)
                .send()
                .await;
            settled(sent.map(|_| ()))
        })
    }

    fn task_heartbeat<'a>(&'a self, token: &'a str) -> OrchestratorCall<'a, Result<(), String>> {
        Box::pin(async move {
            let sent = self
                .sfn
                .send_task_heartbeat()
                .task_token(token)
                .send()
                .await;
            settled(sent.map(|_| ()))
        })
    }
}
