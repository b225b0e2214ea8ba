//! A chain step's answers to Step Functions. A step is an ordinary run of its job (keyed
//! `<chain key>#<step>`, with the job's retries, lease and DLQ); what a chain adds is the
//! task token its message carries, which the worker answers once the run is decided:
//!
//! - DONE (now, or already: a step rerun or sent again answers from its record without
//!   running) → `SendTaskSuccess` with the step's result;
//! - FAILED for good, or rejected unrun (an unknown job, a key conflict) → `SendTaskFailure`
//!   (`error` = `schedkit.<reason>`, `cause` = the error), which pauses the chain;
//! - still going (retrying, in progress elsewhere, waiting) → no answer yet; each lease
//!   heartbeat also sends `SendTaskHeartbeat`, and the step's heartbeat timeout covers the
//!   waits between attempts.
//!
//! A token Step Functions no longer waits for (the step timed out and was sent again) is
//! not an error: the other message's run answers its own token. Any other failure to
//! answer leaves the message unacknowledged, so it comes back and answers then, from the
//! record.

use std::sync::Arc;

use serde_json::{Value, json};

use super::Chains;
use crate::batch::outcome::Outcome;
use crate::envelope::Envelope;
use crate::key::step_key;
use crate::orchestrator::Orchestrator;
use crate::store::{ExecutionStore, Status};

/// The most of an error sent as a failure's cause (Step Functions takes 32,768
/// characters): Step Functions relays every failed step's cause of a stage in one paused
/// message, which SQS limits to 256 KB; the step's record keeps the error as long.
const MAX_CAUSE_CHARS: usize = crate::store::SNAPSHOT_CAP;

impl Chains {
    /// Whether `envelope` (a message whose job is not a chain) may run as what it says. A
    /// message with a chain context must be a step message of a chain this worker knows,
    /// for a step of that chain, of the step's job, under the step's key `<chain key>#<step>`:
    /// its outcome answers that step's task, and it runs over that step's record, nothing
    /// else. Without a chain context, any job's message is fine. The error says what did not
    /// match.
    pub(crate) fn check_step(&self, envelope: &Envelope) -> Result<(), String> {
        let Some(chain) = &envelope.chain else {
            return Ok(());
        };
        if chain.outcome.is_some() {
            return Err(format!(
                "a chain's end for `{}` is addressed to job `{}`, not to its chain `{}`",
                chain.key, envelope.job, chain.name
            ));
        }
        let Some(def) = self.chains.get(&chain.name) else {
            return Err(format!(
                "a step message of chain `{}`, which this worker does not know (chains: {})",
                chain.name,
                self.chains.keys().cloned().collect::<Vec<_>>().join(", ")
            ));
        };
        let Some(step) = chain.step.as_deref() else {
            return Err(format!(
                "a message of chain `{}` run `{}` that names no step",
                chain.name, chain.key
            ));
        };
        if self.key_space_of(&chain.key) != Some(chain.name.as_str()) {
            return Err(format!(
                "a step of chain `{}` for the run `{}`, which is no run of it (its runs are keyed `{}#…`)",
                chain.name, chain.key, chain.name
            ));
        }
        let Some(declared) = def.step(step) else {
            return Err(format!(
                "chain `{}` has no step `{step}` (steps: {})",
                chain.name,
                def.steps()
                    .map(|s| s.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        };
        if declared.job != envelope.job {
            return Err(format!(
                "step `{step}` of chain `{}` runs job `{}`, not `{}`",
                chain.name, declared.job, envelope.job
            ));
        }
        let key = step_key(&chain.key, step);
        if envelope.key.as_deref() != Some(key.as_str()) {
            return Err(format!(
                "step `{step}` of run `{}` runs under the key `{key}`, not {}",
                chain.key,
                envelope
                    .key
                    .as_deref()
                    .map_or("a derived one".to_string(), |k| format!("`{k}`"))
            ));
        }
        Ok(())
    }

    /// The heartbeat of the step `envelope` runs, when it is one.
    pub(crate) fn heartbeat_of(&self, envelope: &Envelope) -> Option<TaskHeartbeat> {
        let token = envelope.chain.as_ref()?.task_token.clone()?;
        Some(TaskHeartbeat {
            orchestrator: self.orchestrator.clone(),
            token,
        })
    }

    /// Answers the step `envelope` carries, now that its message's outcome is `outcome`;
    /// returns the outcome to report instead when the answer could not be sent.
    pub(crate) async fn answer(
        &self,
        store: &dyn ExecutionStore,
        envelope: &Envelope,
        key: Option<&str>,
        outcome: &Outcome,
    ) -> Option<Outcome> {
        let chain = envelope.chain.as_ref()?;
        let token = chain.task_token.as_deref()?;
        let step = chain.step.as_deref().unwrap_or_default();
        let sent = match outcome {
            Outcome::Succeeded | Outcome::Duplicate => {
                let record = match key {
                    Some(key) => store.get(key).await,
                    None => Ok(None),
                };
                match record {
                    Ok(Some(r)) if r.status == Status::Done => {
                        self.succeed(token, output_of(r.result.as_deref())).await
                    }
                    // Sent again after it failed for good: answered with its failure.
                    Ok(Some(r)) if r.status == Status::Failed => {
                        let error = r.last_error.as_deref().unwrap_or("the step FAILED");
                        self.fail(token, "schedkit.failed", error).await
                    }
                    Ok(Some(r)) => {
                        let error =
                            format!("the step's record is {} (not DONE)", r.status.as_str());
                        self.fail(token, "schedkit.StepNotDone", &error).await
                    }
                    Ok(None) => {
                        self.fail(token, "schedkit.StepNotDone", "the step has no record")
                            .await
                    }
                    Err(e) => Err(e.to_string()),
                }
            }
            Outcome::DeadLettered { reason, error } => {
                self.fail(token, &format!("schedkit.{reason}"), error).await
            }
            // An operator cancelled the step: its chain stops on it (paused, as on any
            // failure) instead of waiting out the step's timeout.
            Outcome::Cancelled => {
                let cause = match key {
                    Some(key) => store.get(key).await.ok().flatten(),
                    None => None,
                }
                .and_then(|r| r.cancelled)
                .map_or_else(
                    || "an operator cancelled the step".to_string(),
                    |c| format!("cancelled by {} at {}: {}", c.by, c.at, c.reason),
                );
                self.fail(token, "schedkit.cancelled", &cause).await
            }
            _ => return None,
        };
        match sent {
            Ok(()) => None,
            // The chain's execution was stopped with it (a chain cancelled): its task is
            // gone, and nothing waits for the answer.
            Err(error) if matches!(outcome, Outcome::Cancelled) => {
                tracing::info!(
                    chain = chain.name,
                    key = chain.key,
                    step,
                    error,
                    "a cancelled step's task could not be answered (its execution stopped)"
                );
                None
            }
            Err(error) => {
                tracing::warn!(
                    chain = chain.name,
                    key = chain.key,
                    step,
                    error,
                    "chain step not answered; the message comes back"
                );
                Some(Outcome::Unavailable {
                    error: format!("answering step {step} of {}: {error}", chain.key),
                })
            }
        }
    }

    async fn succeed(&self, token: &str, output: Value) -> Result<(), String> {
        let output = output.to_string();
        self.orchestrator.task_success(token, &output).await
    }

    async fn fail(&self, token: &str, error: &str, cause: &str) -> Result<(), String> {
        let error: String = error.chars().take(256).collect();
        let cause: String = cause.chars().take(MAX_CAUSE_CHARS).collect();
        self.orchestrator.task_failure(token, &error, &cause).await
    }
}

impl Chains {
    /// Who cancelled the chain run a step belongs to, when it was cancelled: a step
    /// message sent before its execution was stopped must not run (one read per step).
    pub(crate) async fn run_cancelled(
        &self,
        store: &dyn ExecutionStore,
        chain: &crate::envelope::ChainContext,
    ) -> Result<Option<crate::store::OperatorNote>, crate::store::StoreError> {
        Ok(store
            .get(&chain.key)
            .await?
            .filter(|r| r.status == Status::Cancelled && r.job == chain.name)
            .and_then(|r| r.cancelled))
    }

    /// The chain step `chain` names, with the results of its earlier stages' DONE steps
    /// (one read per such step); None for a message that is not a step of a known chain.
    pub(crate) async fn step_of(
        &self,
        store: &dyn ExecutionStore,
        chain: &crate::envelope::ChainContext,
    ) -> Result<Option<crate::job::ChainStep>, crate::store::StoreError> {
        let (Some(step), Some(def)) = (chain.step.as_deref(), self.chains.get(&chain.name)) else {
            return Ok(None);
        };
        let earlier = def
            .stages
            .iter()
            .take_while(|s| !s.steps.iter().any(|x| x.name == step))
            .flat_map(|s| s.steps.iter());
        let mut outputs = std::collections::BTreeMap::new();
        for s in earlier {
            if let Some(r) = store.get(&step_key(&chain.key, &s.name)).await?
                && r.status == Status::Done
            {
                outputs.insert(s.name.clone(), output_of(r.result.as_deref()));
            }
        }
        Ok(Some(crate::job::ChainStep {
            chain: chain.name.clone(),
            chain_key: chain.key.clone(),
            step: step.to_string(),
            input: chain.input.clone().unwrap_or_else(|| json!({})),
            outputs,
        }))
    }
}

/// A step's output as Step Functions gets it: the job's result, which is JSON; a result
/// too big for the record was kept as a note, sent as `{"note": ...}`.
fn output_of(result: Option<&str>) -> Value {
    match result {
        None => json!({}),
        Some(text) => serde_json::from_str(text).unwrap_or_else(|_| json!({ "note": text })),
    }
}

/// Keeps a step's task alive while its attempt runs: sent with each lease heartbeat.
pub(crate) struct TaskHeartbeat {
    orchestrator: Arc<dyn Orchestrator>,
    token: String,
}

impl TaskHeartbeat {
    /// Best effort: a heartbeat that does not arrive is made up by the next one, and the
    /// task's heartbeat timeout allows for a lost few.
    pub(crate) async fn beat(&self) {
        if let Err(e) = self.orchestrator.task_heartbeat(&self.token).await {
            tracing::warn!(error = e, "chain step heartbeat not sent");
        }
    }
}
