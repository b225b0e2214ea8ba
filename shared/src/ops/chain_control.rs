//! An operator's hand on a chain run: cancel it, or skip its failed step.
//!
//! **Cancel.** The run's record becomes CANCELLED first (so its execution's end, and any
//! step message still on its way, finds it so), then its Step Functions execution is
//! stopped, then its steps' runs not yet decided are cancelled in their records (a running
//! one stops at its next heartbeat). A step message that arrives after (sent before the
//! stop) reads the run's record before it runs and is cancelled unrun. Each of the three
//! writes stands alone: an error names what was done before it.
//!
//! **Skip.** A PAUSED run whose failed step is not needed this time goes on as if the step
//! had returned the given output: the step's record becomes DONE with that output as its
//! result, keeping its failure and saying who skipped it and why, and the run is rerun
//! from there (see [`ChainRuns::rerun`]): the later stages run, the DONE steps answer
//! from their records.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::OpsError;
use super::chains::{ChainRuns, Rerun, store_error};
use crate::key::step_key;
use crate::orchestrator::Orchestrator;
use crate::store::{
    CANCELLABLE, CancelError, CancelRequest, ExecutionRecord, ExecutionStore, OperatorNote, Status,
    timestamp,
};

/// What a chain's cancellation did.
#[derive(Debug, Clone, Serialize)]
pub struct ChainCancelled {
    /// The run's status before (RUNNING or PAUSED).
    pub was: Status,
    /// The execution a stop was sent to (None: Step Functions said it had ended).
    pub stopped: Option<String>,
    /// The steps whose runs were cancelled.
    pub steps: Vec<String>,
}

/// What a skip did.
#[derive(Debug, Clone, Serialize)]
pub struct StepSkipped {
    /// The step skipped.
    pub step: String,
    /// The rerun that carries the run on from it.
    pub rerun: Rerun,
}

impl<S: ExecutionStore, O: Orchestrator> ChainRuns<S, O> {
    /// Cancels the chain run `key`, RUNNING or PAUSED; a run a cancel left half-way
    /// (CANCELLED, its execution or steps not yet stopped) is finished.
    pub async fn cancel(
        &self,
        key: &str,
        by: &str,
        reason: &str,
        now: DateTime<Utc>,
    ) -> Result<ChainCancelled, OpsError> {
        let Some(run) = self.read(key).await? else {
            return Err(OpsError::Refused(format!("there is no chain run `{key}`")));
        };
        let chain = self.chain_of(&run)?.name.clone();
        let note = OperatorNote {
            by: by.into(),
            at: timestamp(now),
            reason: reason.into(),
        };
        // A run recorded CANCELLED by a cancel that stopped half-way is finished: its
        // execution stopped and its steps cancelled now.
        let before = if run.status == Status::Cancelled {
            run.clone()
        } else {
            match self
                .store
                .cancel_chain(key, &chain, &note, now)
                .await
                .map_err(|e| store_error("recording the run CANCELLED", e))?
            {
                Ok(before) => before,
                // Refused by this very write, applied once already (the SDK sends a
                // request again when its answer did not come): the note is this cancel's
                // to the millisecond. The run as read says what it was.
                Err(Some(current)) if current.cancelled.as_ref() == Some(&note) => {
                    ExecutionRecord {
                        status: run.status,
                        ..current
                    }
                }
                Err(current) => {
                    let status = current.map_or("gone".into(), |r| r.status.to_string());
                    return Err(OpsError::Refused(format!(
                        "`{key}` is {status}: only a RUNNING or PAUSED chain run can be cancelled"
                    )));
                }
            }
        };
        let mut done = ChainCancelled {
            was: before.status,
            stopped: None,
            steps: Vec::new(),
        };
        let so_far = |d: &ChainCancelled| {
            format!(
                "`{key}` recorded CANCELLED; execution stopped: {}; steps cancelled: {}; `chains cancel {key}` again finishes it",
                d.stopped.as_deref().unwrap_or("none"),
                if d.steps.is_empty() {
                    "none".into()
                } else {
                    d.steps.join(", ")
                }
            )
        };
        // A run recorded before runs kept their execution's name has the one its attempt
        // gives, as the worker and a rerun take it.
        let execution = before
            .owner
            .clone()
            .unwrap_or_else(|| crate::key::chain_execution_name(key, before.attempt));
        let stopped = self
            .stop(&chain, &execution, reason)
            .await
            .map_err(|e| e.after(so_far(&done)))?;
        if stopped {
            done.stopped = Some(execution);
        }
        self.cancel_steps(key, &chain, by, reason, now, &mut done)
            .await
            .map_err(|e| e.after(so_far(&done)))?;
        Ok(done)
    }

    /// Cancels the steps of the run `key` that are not decided, adding each to `done`.
    async fn cancel_steps(
        &self,
        key: &str,
        chain: &str,
        by: &str,
        reason: &str,
        now: DateTime<Utc>,
        done: &mut ChainCancelled,
    ) -> Result<(), OpsError> {
        for (step, record) in self.steps_of(key, chain).await? {
            if !record.is_some_and(|r| CANCELLABLE.contains(&r.status)) {
                continue;
            }
            let req = CancelRequest {
                key: step_key(key, &step),
                by: by.into(),
                reason: format!("its chain run `{key}` was cancelled: {reason}"),
                now,
                only: vec![],
                arrived: None,
            };
            match self.store.cancel(&req).await {
                Ok(_) => done.steps.push(step),
                // Decided meanwhile: left as it is.
                Err(CancelError::Refused { .. } | CancelError::NotFound { .. }) => {}
                Err(CancelError::Store(e)) => {
                    return Err(store_error(&format!("cancelling step {step}"), e));
                }
            }
        }
        Ok(())
    }

    /// Stops the execution `name` of `chain` unless it ended already; whether a stop was
    /// sent ([`crate::orchestrator::stop_unless_ended`]).
    async fn stop(&self, chain: &str, name: &str, reason: &str) -> Result<bool, OpsError> {
        let arn = self.execution_arn(chain, name)?;
        let cause: String = reason.chars().take(32_000).collect();
        Ok(crate::orchestrator::stop_unless_ended(
            &self.orchestrator,
            &arn,
            "schedkit.cancelled",
            &cause,
        )
        .await?)
    }

    /// Skips the failed step `step` of the PAUSED run `key` as if it had returned `output`
    /// (JSON), and reruns the run from there.
    pub async fn skip(
        &self,
        key: &str,
        step: &str,
        output: &serde_json::Value,
        by: &str,
        reason: &str,
        now: DateTime<Utc>,
    ) -> Result<StepSkipped, OpsError> {
        let Some(run) = self.read(key).await? else {
            return Err(OpsError::Refused(format!("there is no chain run `{key}`")));
        };
        let chain = self.chain_of(&run)?;
        if !chain
            .stages
            .iter()
            .flat_map(|s| &s.steps)
            .any(|s| s.name == step)
        {
            let steps: Vec<&str> = chain
                .stages
                .iter()
                .flat_map(|s| &s.steps)
                .map(|s| s.name.as_str())
                .collect();
            return Err(OpsError::Refused(format!(
                "chain `{}` has no step `{step}` (its steps: {})",
                chain.name,
                steps.join(", ")
            )));
        }
        if run.status != Status::Paused {
            return Err(OpsError::Refused(format!(
                "`{key}` is {}: a step is skipped only in a PAUSED run",
                run.status
            )));
        }
        let step_run = self.read(&step_key(key, step)).await?;
        let Some(record) = step_run.filter(|r| r.status == Status::Failed) else {
            return Err(OpsError::Refused(format!(
                "step `{step}` of `{key}` did not fail (`chains show {key}` names the failed step)"
            )));
        };
        let note = OperatorNote {
            by: by.into(),
            at: timestamp(now),
            reason: reason.into(),
        };
        let skipped = self
            .store
            .skip_step(&record, &output.to_string(), &note, now)
            .await
            .map_err(|e| {
                store_error(
                    &format!(
                        "recording step {step} skipped (it may have been recorded: when `chains show {key}` says the step is DONE, `chains rerun {key}` carries the run on from it)"
                    ),
                    e,
                )
            })?;
        // Refused: by another actor, or by this very write, applied once already (the SDK
        // sends a request again when its answer did not come): the step as this skip
        // leaves it, its note to the millisecond, is this skip's.
        let skipped = skipped || {
            let now_step = self.read(&step_key(key, step)).await?;
            now_step.is_some_and(|r| r.status == Status::Done && r.skipped.as_ref() == Some(&note))
        };
        if !skipped {
            return Err(OpsError::Refused(format!(
                "step `{step}` of `{key}` changed while it was being skipped; look again with `chains show {key}`"
            )));
        }
        let rerun = self
            .rerun(key, false, now)
            .await
            .map_err(|e| e.after(format!("step `{step}` recorded DONE (skipped)")))?;
        Ok(StepSkipped {
            step: step.into(),
            rerun,
        })
    }
}
