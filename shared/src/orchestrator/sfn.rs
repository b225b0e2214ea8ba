//! The orchestrator that ships: AWS Step Functions, one request per call.

use aws_sdk_sfn::Client;
use aws_sdk_sfn::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_sfn::operation::start_execution::StartExecutionError;

use super::{ExecutionInfo, Found, Orchestrator, OrchestratorCall, StartError};
use crate::aws::{AwsError, AwsResultExt};

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

    fn describe_execution<'a>(
        &'a self,
        arn: &'a str,
    ) -> OrchestratorCall<'a, Result<Option<ExecutionInfo>, AwsError>> {
        Box::pin(async move {
            let described = self
                .sfn
                .describe_execution()
                .execution_arn(arn)
                .send()
                .await;
            match described {
                Ok(out) => Ok(Some(ExecutionInfo {
                    status: out.status.as_str().to_string(),
                    input: out.input,
                })),
                Err(e)
                    if e.as_service_error()
                        .is_some_and(|s| s.is_execution_does_not_exist()) =>
                {
                    Ok(None)
                }
                Err(e) => Err(AwsError::of(format!("reading execution {arn}"), &e)),
            }
        })
    }

    fn stop_execution<'a>(
        &'a self,
        arn: &'a str,
        error: &'a str,
        cause: &'a str,
    ) -> OrchestratorCall<'a, Result<(), AwsError>> {
        Box::pin(async move {
            let stopped = self
                .sfn
                .stop_execution()
                .execution_arn(arn)
                .error(error)
                .cause(cause)
                .send()
                .await;
            match stopped {
                Err(e)
                    if e.as_service_error()
                        .is_some_and(|s| s.is_execution_does_not_exist()) =>
                {
                    Ok(())
                }
                other => other.map(drop).aws(format!("stopping execution {arn}")),
            }
        })
    }

    fn redrive_execution<'a>(&'a self, arn: &'a str) -> OrchestratorCall<'a, Result<(), AwsError>> {
        Box::pin(async move {
            self.sfn
                .redrive_execution()
                .execution_arn(arn)
                .send()
                .await
                .map(drop)
                .aws(format!("redriving execution {arn}"))
        })
    }

    fn find_state_machine<'a>(
        &'a self,
        name: &'a str,
        queue_url: &'a str,
    ) -> OrchestratorCall<'a, Found> {
        Box::pin(async move {
            let mut pages = self.sfn.list_state_machines().into_paginator().send();
            let mut arn = None;
            while let Some(page) = pages.next().await {
                let page = match page {
                    Ok(page) => page,
                    Err(e) => return not_found(&e),
                };
                if let Some(m) = page.state_machines.into_iter().find(|m| m.name == name) {
                    arn = Some(m.state_machine_arn);
                    break;
                }
            }
            let Some(arn) = arn else {
                return Found::Missing;
            };
            let described = self
                .sfn
                .describe_state_machine()
                .state_machine_arn(&arn)
                .send()
                .await;
            match described {
                Ok(d) if sends_to(&d.definition, queue_url) => Found::Machine(arn),
                Ok(_) => Found::Foreign(arn),
                Err(e) => not_found(&e),
            }
        })
    }
}

/// Why a look found nothing: refused for good (access denied, bad credentials), or not
/// answered (try again).
fn not_found<E, R>(e: &SdkError<E, R>) -> Found
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug + 'static,
{
    let denied = e
        .code()
        .is_some_and(|c| c.starts_with("AccessDenied") || c == "UnrecognizedClientException");
    if denied {
        Found::Refused(crate::aws::describe(e))
    } else {
        Found::Unavailable(crate::aws::describe(e))
    }
}

/// Whether a definition sends its steps to the queue `queue_url` names: its account and
/// name (`/<account>/<queue>`), whichever endpoint form the URL was written in.
fn sends_to(definition: &str, queue_url: &str) -> bool {
    let mut parts = queue_url.trim_end_matches('/').rsplit('/');
    match (parts.next(), parts.next()) {
        (Some(queue), Some(account)) if !queue.is_empty() => {
            definition.contains(&format!("/{account}/{queue}\""))
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::sends_to;

    #[test]
    fn a_definition_is_this_workers_when_it_names_its_queue_in_any_endpoint_form() {
        let definition = r#"{"Parameters":{"QueueUrl":"https://sqs.eu-west-1.amazonaws.com/123/schedkit-prod-jobs"}}"#;
        assert!(sends_to(
            definition,
            "https://sqs.eu-west-1.amazonaws.com/123/schedkit-prod-jobs"
        ));
        assert!(sends_to(
            definition,
            "https://eu-west-1.queue.amazonaws.com/123/schedkit-prod-jobs"
        ));
        assert!(!sends_to(
            definition,
            "https://sqs.eu-west-1.amazonaws.com/123/schedkit-prod-eu-jobs"
        ));
        assert!(!sends_to(
            definition,
            "https://sqs.eu-west-1.amazonaws.com/456/schedkit-prod-jobs"
        ));
    }
}
