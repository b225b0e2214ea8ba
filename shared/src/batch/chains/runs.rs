//! A chain run's own messages, both on the jobs queue with the chain's name as their job:
//!
//! - the **trigger** (a schedule's firing, `fire`, a backfill: an envelope without chain
//!   context) records the run RUNNING under its key (`<chain>#<scheduled_for>`, or the
//!   envelope's key) and starts the chain's execution, named after the key: a trigger
//!   delivered twice starts one execution (Step Functions returns the running one for the
//!   same name and input, and refuses a second after it closed);
//! - the **end** (sent by the state machine's `done` or `paused` state) records the run
//!   DONE, or PAUSED with the failed steps.

use std::time::Duration;

use aws_sdk_sfn::operation::start_execution::StartExecutionError;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::Chains;
use crate::envelope::{Envelope, format_instant};
use crate::key::{chain_execution_name, execution_key, payload_hash};
use crate::store::{ChainEnd, ClaimRequest, DynamoStore, Status, StoreError};

/// What a chain run's message did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RunMessage {
    /// The run is recorded RUNNING and its execution started.
    Started { key: String },
    /// The trigger came again: the run exists (its execution started, or ended).
    AlreadyStarted { key: String },
    /// The run's end is recorded (PAUSED when `paused`).
    Ended { key: String, paused: bool },
    /// The end came again: the run had ended already (or has no record).
    AlreadyEnded { key: String },
    /// The key was first used with another payload.
    Conflict { key: String, error: String },
    /// It can never be done as sent (no state machine for the chain, a bad key, an end
    /// that names no outcome, a record the store refuses).
    Refused { key: Option<String>, error: String },
    /// Something could not be reached: the message comes back.
    Unavailable { key: String, error: String },
}

/// Where a chain run's record expires: as long as a job's by default.
fn retention() -> Duration {
    crate::JobPolicy::default().record_retention
}

fn store_failed(key: &str, e: StoreError) -> RunMessage {
    if e.is_permanent() {
        RunMessage::Refused {
            key: Some(key.to_string()),
            error: e.to_string(),
        }
    } else {
        RunMessage::Unavailable {
            key: key.to_string(),
            error: e.to_string(),
        }
    }
}

impl Chains {
    /// Handles the trigger or the end of a run of the chain `envelope.job`.
    pub(crate) async fn handle_run(
        &self,
        store: &DynamoStore,
        envelope: &Envelope,
        body: &str,
        message_id: &str,
        now: DateTime<Utc>,
    ) -> RunMessage {
        match &envelope.chain {
            Some(chain) => {
                self.end(
                    store,
                    &chain.key,
                    chain.execution.as_deref(),
                    chain.outcome.as_deref(),
                    chain.stage.as_deref(),
                    now,
                )
                .await
            }
            None => self.start(store, envelope, body, message_id, now).await,
        }
    }

    async fn start(
        &self,
        store: &DynamoStore,
        envelope: &Envelope,
        body: &str,
        message_id: &str,
        now: DateTime<Utc>,
    ) -> RunMessage {
        let key = match execution_key(envelope, None) {
            Ok(k) => k,
            Err(e) => {
                return RunMessage::Refused {
                    key: None,
                    error: e.to_string(),
                };
            }
        };
        let Some(machine) = self.state_machines.get(&envelope.job) else {
            return RunMessage::Refused {
                key: Some(key),
                error: format!(
                    "no state machine is known for chain `{}` (the worker needs SCHEDKIT_STATE_MACHINE_PREFIX, which the template sets)",
                    envelope.job
                ),
            };
        };
        let req = ClaimRequest {
            key: key.clone(),
            job: envelope.job.clone(),
            scheduled_for: format_instant(&envelope.scheduled_for),
            payload_hash: payload_hash(envelope),
            input: body.to_string(),
            message_id: Some(message_id.to_string()),
            // The run's first execution owns it (a rerun's takes over).
            owner: chain_execution_name(&key, 1),
            now,
            lease: Duration::ZERO,
            retention: retention(),
        };
        let existing = match store.start_chain(&req).await {
            Ok(existing) => existing,
            Err(e) => return store_failed(&key, e),
        };
        if let Some(r) = &existing {
            if r.payload_hash != req.payload_hash {
                return RunMessage::Conflict {
                    error: format!("chain key `{key}` was first used with a different payload"),
                    key,
                };
            }
            // Ended, or paused (a rerun starts it again, not a trigger).
            if r.status != Status::Running {
                return RunMessage::AlreadyStarted { key };
            }
        }
        // Started again when the run is RUNNING in its first execution: the worker that
        // recorded it may have stopped before it started the execution; for the same name
        // and input Step Functions returns the one running. A rerun's execution is started
        // by the rerun.
        if existing.as_ref().is_some_and(|r| r.attempt > 1) {
            return RunMessage::AlreadyStarted { key };
        }
        let input = json!({
            "chain_key": key,
            "scheduled_for": format_instant(&envelope.scheduled_for),
            "payload": envelope.payload_value(),
        });
        let started = self
            .sfn
            .start_execution()
            .state_machine_arn(machine)
            .name(&req.owner)
            .input(input.to_string())
            .send()
            .await;
        match started {
            Ok(_) if existing.is_none() => RunMessage::Started { key },
            Ok(_) => RunMessage::AlreadyStarted { key },
            Err(e) => match e.as_service_error() {
                Some(StartExecutionError::ExecutionAlreadyExists(_)) => {
                    RunMessage::AlreadyStarted { key }
                }
                Some(
                    StartExecutionError::StateMachineDoesNotExist(_)
                    | StartExecutionError::StateMachineDeleting(_)
                    | StartExecutionError::InvalidArn(_)
                    | StartExecutionError::InvalidName(_)
                    | StartExecutionError::InvalidExecutionInput(_),
                ) => RunMessage::Refused {
                    error: format!(
                        "starting chain `{}` ({machine}): {}",
                        envelope.job,
                        crate::aws::describe(&e)
                    ),
                    key: Some(key),
                },
                _ => RunMessage::Unavailable {
                    error: format!(
                        "starting chain `{}`: {}",
                        envelope.job,
                        crate::aws::describe(&e)
                    ),
                    key,
                },
            },
        }
    }

    async fn end(
        &self,
        store: &DynamoStore,
        key: &str,
        execution: Option<&str>,
        outcome: Option<&str>,
        stage: Option<&[Value]>,
        now: DateTime<Utc>,
    ) -> RunMessage {
        let end = match outcome {
            Some("done") => ChainEnd::Done,
            Some("paused") => {
                let stage = stage.unwrap_or_default();
                ChainEnd::Paused {
                    failed: failures(stage),
                    stage: Value::Array(stage.to_vec()).to_string(),
                }
            }
            other => {
                return RunMessage::Refused {
                    key: Some(key.to_string()),
                    error: format!("a chain's end says `done` or `paused`, not {other:?}"),
                };
            }
        };
        match store.end_chain(key, execution, &end, now).await {
            Ok(true) => RunMessage::Ended {
                key: key.to_string(),
                paused: end != ChainEnd::Done,
            },
            Ok(false) => RunMessage::AlreadyEnded {
                key: key.to_string(),
            },
            Err(e) => store_failed(key, e),
        }
    }
}

/// `step `invoices` failed: schedkit.permanent-error: the template is missing` for each
/// failed step of the paused stage.
fn failures(stage: &[Value]) -> String {
    let text = |v: &Value, field: &str| {
        v.get(field)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    stage
        .iter()
        .filter(|r| r.get("failed").is_some())
        .map(|r| {
            format!(
                "step `{}` failed: {}: {}",
                text(r, "step"),
                text(r, "error"),
                text(r, "cause")
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_paused_stage_names_each_failed_step_with_its_error() {
        let stage = [
            json!({ "step": "invoices", "failed": true, "error": "schedkit.permanent-error", "cause": "no template" }),
            json!({ "step": "ledger" }),
        ];
        assert_eq!(
            failures(&stage),
            "step `invoices` failed: schedkit.permanent-error: no template"
        );
    }
}
