//! An orchestrator in memory, for the deterministic simulation: it keeps the executions
//! started and every answer given, and the simulation plays the state machine over them
//! (sends a stage's steps, reads their answers, sends the run's end).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use super::{ExecutionInfo, Orchestrator, OrchestratorCall, StartError};
use crate::aws::AwsError;

/// An answer the worker gave a task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// `SendTaskSuccess` with this output.
    Succeeded(String),
    /// `SendTaskFailure` with this error code and cause.
    Failed {
        /// The error code (`schedkit.<reason>`).
        error: String,
        /// Why.
        cause: String,
    },
}

/// What the orchestrator holds; the simulation reads and changes it.
#[derive(Debug, Default, Clone)]
pub struct OrchestratorState {
    /// Executions started, by name: the state machine and the input.
    pub executions: BTreeMap<String, (String, String)>,
    /// Executions that ended (a name is used once).
    pub closed: Vec<String>,
    /// Executions an operator stopped (closed too), with the error they were stopped with.
    pub stopped: BTreeMap<String, String>,
    /// Tasks waiting for their answer (tokens the simulation handed out).
    pub waiting: Vec<String>,
    /// Every answer, in order, with its token; a token answered twice is there twice.
    pub answers: Vec<(String, Answer)>,
    /// Heartbeats sent, by token.
    pub heartbeats: BTreeMap<String, u32>,
}

/// The in-memory orchestrator. Cheap to clone: clones share their state.
#[derive(Debug, Clone, Default)]
pub struct MemoryOrchestrator {
    state: Arc<Mutex<OrchestratorState>>,
}

impl MemoryOrchestrator {
    /// Its state, locked.
    pub fn lock(&self) -> MutexGuard<'_, OrchestratorState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// An execution's name from its ARN (`arn:…:execution:<machine>:<name>`): the name
    /// is what this orchestrator keys executions by.
    fn name_of(arn: &str) -> &str {
        arn.rsplit(':').next().unwrap_or(arn)
    }

    fn answer(&self, token: &str, answer: Answer) {
        let mut state = self.lock();
        // A token no longer waited for is taken and ignored, as Step Functions' answers are
        // (the worker counts it settled).
        state.waiting.retain(|t| t != token);
        state.answers.push((token.to_string(), answer));
    }
}

impl Orchestrator for MemoryOrchestrator {
    fn start_execution<'a>(
        &'a self,
        machine: &'a str,
        name: &'a str,
        input: &'a str,
    ) -> OrchestratorCall<'a, Result<(), StartError>> {
        Box::pin(async move {
            let mut state = self.lock();
            if let Some((_, was)) = state.executions.get(name) {
                let closed = state.closed.iter().any(|c| c == name);
                return match was == input && !closed {
                    true => Ok(()),
                    false => Err(StartError::AlreadyExists),
                };
            }
            let started = (machine.to_string(), input.to_string());
            state.executions.insert(name.to_string(), started);
            Ok(())
        })
    }

    fn task_success<'a>(
        &'a self,
        token: &'a str,
        output: &'a str,
    ) -> OrchestratorCall<'a, Result<(), String>> {
        Box::pin(async move {
            self.answer(token, Answer::Succeeded(output.to_string()));
            Ok(())
        })
    }

    fn task_failure<'a>(
        &'a self,
        token: &'a str,
        error: &'a str,
        cause: &'a str,
    ) -> OrchestratorCall<'a, Result<(), String>> {
        Box::pin(async move {
            let answer = Answer::Failed {
                error: error.to_string(),
                cause: cause.to_string(),
            };
            self.answer(token, answer);
            Ok(())
        })
    }

    fn task_heartbeat<'a>(&'a self, token: &'a str) -> OrchestratorCall<'a, Result<(), String>> {
        Box::pin(async move {
            *self.lock().heartbeats.entry(token.to_string()).or_default() += 1;
            Ok(())
        })
    }

    fn describe_execution<'a>(
        &'a self,
        arn: &'a str,
    ) -> OrchestratorCall<'a, Result<Option<ExecutionInfo>, AwsError>> {
        Box::pin(async move {
            let state = self.lock();
            let name = Self::name_of(arn);
            Ok(state.executions.get(name).map(|(_, input)| {
                let status = if state.stopped.contains_key(name) {
                    "ABORTED"
                } else if state.closed.iter().any(|c| c == name) {
                    "SUCCEEDED"
                } else {
                    "RUNNING"
                };
                ExecutionInfo {
                    status: status.into(),
                    input: Some(input.clone()),
                }
            }))
        })
    }

    fn stop_execution<'a>(
        &'a self,
        arn: &'a str,
        error: &'a str,
        _cause: &'a str,
    ) -> OrchestratorCall<'a, Result<(), AwsError>> {
        Box::pin(async move {
            let mut state = self.lock();
            let name = Self::name_of(arn).to_string();
            let open = state.executions.contains_key(&name) && !state.closed.contains(&name);
            if open {
                state.closed.push(name.clone());
                state.stopped.insert(name, error.to_string());
            }
            Ok(())
        })
    }

    fn redrive_execution<'a>(&'a self, arn: &'a str) -> OrchestratorCall<'a, Result<(), AwsError>> {
        Box::pin(async move {
            Err(AwsError {
                doing: format!("redriving execution {arn}"),
                answer: "RedriveExecution is not played in memory (a rerun starts a new execution)"
                    .into(),
                code: None,
            })
        })
    }
}
