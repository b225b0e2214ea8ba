//! A chain run's own messages, both on the jobs queue with the chain's name as their job:
//!
//! - the **trigger** (a schedule's firing, `fire`, a backfill: an envelope without chain
//!   context) records the run RUNNING under its key (`<chain>#<scheduled_for>`, or the
//!   envelope's key) and starts the chain's execution, named after the key: a trigger
//!   delivered twice starts one execution (Step Functions returns the running one for the
//!   same name and input, and refuses a second after it closed);
//! - the **end** (sent by the state machine's `done` or `paused` state) records the run
//!   DONE, or PAUSED with the failed steps. It ends only the run of its chain, and only
//!   from the execution that owns the run (the record names it): an end from an earlier
//!   execution of the same run (sent again after a rerun) is acknowledged and changes
//!   nothing; any other (another chain's, a job's run, an unknown or no execution) is
//!   dead-lettered as `record-mismatch`, the record untouched.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::{Chains, Machine};
use crate::dead_letter::DeadLetterReason;
use crate::envelope::{Envelope, format_instant};
use crate::key::{chain_execution_name, execution_key, payload_hash};
use crate::orchestrator::StartError;
use crate::store::{
    ChainEnd, ClaimRequest, ExecutionRecord, ExecutionStore, SNAPSHOT_CAP, Status, StoreError,
    cap_snapshot,
};

/// What a chain run's message did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RunMessage {
    /// The run is recorded RUNNING and its execution started.
    Started { key: String },
    /// The trigger came again: the run exists (its execution started, or ended).
    AlreadyStarted { key: String },
    /// The run's end is recorded (PAUSED when `paused`).
    Ended { key: String, paused: bool },
    /// The end came again: the run had ended already; or it is an earlier execution's end,
    /// sent again after a rerun (`stale`).
    AlreadyEnded { key: String, stale: bool },
    /// The end names a record it does not own; nothing was written.
    Mismatch { key: String, error: String },
    /// The key was first used with another payload.
    Conflict { key: String, error: String },
    /// It can never be done as sent, for `reason`: a bad key or an end that names no
    /// outcome (poison), a record the store refuses (store-refused), a chain this worker
    /// cannot start (unconfigured: no state machine known, or Step Functions refused it).
    Refused {
        reason: DeadLetterReason,
        key: Option<String>,
        error: String,
    },
    /// Something could not be reached: the message comes back.
    Unavailable { key: String, error: String },
}

/// Where a chain run's record expires: as long as a job's by default.
fn retention() -> Duration {
    crate::job::JobPolicy::default().record_retention
}

fn store_failed(key: &str, e: StoreError) -> RunMessage {
    if e.is_permanent() {
        RunMessage::Refused {
            reason: DeadLetterReason::StoreRefused,
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
        store: &dyn ExecutionStore,
        envelope: &Envelope,
        body: &str,
        message_id: &str,
        now: DateTime<Utc>,
    ) -> RunMessage {
        match &envelope.chain {
            Some(chain) if chain.name != envelope.job => RunMessage::Mismatch {
                key: chain.key.clone(),
                error: format!(
                    "a message of chain `{}` addressed to chain `{}`",
                    chain.name, envelope.job
                ),
            },
            Some(chain) => {
                let Some(execution) = chain.execution.as_deref() else {
                    return RunMessage::Mismatch {
                        key: chain.key.clone(),
                        error: format!(
                            "a chain's end for `{}` that names no execution: only the execution that owns the run may end it",
                            chain.key
                        ),
                    };
                };
                self.end(
                    store,
                    &chain.name,
                    &chain.key,
                    execution,
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
        store: &dyn ExecutionStore,
        envelope: &Envelope,
        body: &str,
        message_id: &str,
        now: DateTime<Utc>,
    ) -> RunMessage {
        let key = match execution_key(envelope, None) {
            Ok(k) => k,
            Err(e) => {
                return RunMessage::Refused {
                    reason: DeadLetterReason::Poison,
                    key: None,
                    error: e.to_string(),
                };
            }
        };
        // A chain's run lives in its own key space: one keyed in another's (or outside
        // any) would put its steps where that chain's or a job's runs are.
        if self.key_space_of(&key) != Some(envelope.job.as_str()) {
            return RunMessage::Refused {
                reason: DeadLetterReason::Poison,
                key: None,
                error: format!(
                    "chain `{}`'s run key `{key}` lies outside its key space: a run of it is keyed `{}#…` (`schedkit fire {} --key K` names it so)",
                    envelope.job, envelope.job, envelope.job
                ),
            };
        }
        let machine = match self.state_machine(&envelope.job).await {
            Machine::Known(arn) => arn,
            Machine::Unconfigured(error) => {
                return RunMessage::Refused {
                    reason: DeadLetterReason::Unconfigured,
                    key: Some(key),
                    error,
                };
            }
            Machine::Unavailable(error) => return RunMessage::Unavailable { key, error },
        };
        let machine = machine.as_str();
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
            redrive: None,
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
            // Cancelled: its execution stopped, in case this trigger's first delivery
            // started it after the cancel looked (below) and its answer was lost.
            if r.status == Status::Cancelled {
                let owner = r.owner.as_deref().unwrap_or(&req.owner);
                return match self.stop_cancelled(machine, owner).await {
                    Ok(()) => RunMessage::AlreadyStarted { key },
                    Err(error) => RunMessage::Unavailable { key, error },
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
        let first = existing.is_none();
        let started = self
            .start_execution(machine, envelope, key.clone(), &req.owner, first)
            .await;
        self.unless_cancelled(store, machine, &envelope.job, &req.owner, started)
            .await
    }

    /// `started`, once the run is read again after its execution's start. A `chains
    /// cancel` between the run's record and the start found no execution to stop: it
    /// records CANCELLED before it looks for the execution, and this reads the run after
    /// the start, so one of the two sees the other and the execution is stopped.
    async fn unless_cancelled(
        &self,
        store: &dyn ExecutionStore,
        machine: &str,
        chain: &str,
        execution: &str,
        started: RunMessage,
    ) -> RunMessage {
        let key = match &started {
            RunMessage::Started { key } | RunMessage::AlreadyStarted { key } => key.clone(),
            _ => return started,
        };
        match store.get(&key).await {
            Ok(Some(r)) if r.status == Status::Cancelled && r.job == chain => {
                match self.stop_cancelled(machine, execution).await {
                    Ok(()) => started,
                    Err(error) => RunMessage::Unavailable { key, error },
                }
            }
            Ok(_) => started,
            Err(e) => store_failed(&key, e),
        }
    }

    /// Stops the execution `name` of a cancelled run unless it ended already
    /// ([`crate::orchestrator::stop_unless_ended`]).
    async fn stop_cancelled(&self, machine: &str, name: &str) -> Result<(), String> {
        let arn = crate::orchestrator::execution_arn(machine, name);
        crate::orchestrator::stop_unless_ended(
            self.orchestrator.as_ref(),
            &arn,
            "schedkit.cancelled",
            "its chain run was cancelled",
        )
        .await
        .map(drop)
        .map_err(|e| format!("stopping the execution of a cancelled chain run: {e}"))
    }

    /// Starts the run's Step Functions execution named `name` (the same name twice starts
    /// it once); `first`: the run was recorded by this very message.
    async fn start_execution(
        &self,
        machine: &str,
        envelope: &Envelope,
        key: String,
        name: &str,
        first: bool,
    ) -> RunMessage {
        let input = json!({
            "chain_key": key,
            "scheduled_for": format_instant(&envelope.scheduled_for),
            "payload": envelope.payload_value(),
        });
        let started = self
            .orchestrator
            .start_execution(machine, name, &input.to_string())
            .await;
        match started {
            Ok(()) if first => RunMessage::Started { key },
            Ok(()) | Err(StartError::AlreadyExists) => RunMessage::AlreadyStarted { key },
            Err(StartError::Refused(e)) => RunMessage::Refused {
                reason: DeadLetterReason::Unconfigured,
                error: format!("starting chain `{}` ({machine}): {e}", envelope.job),
                key: Some(key),
            },
            Err(StartError::Unavailable(e)) => RunMessage::Unavailable {
                error: format!("starting chain `{}`: {e}", envelope.job),
                key,
            },
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn end(
        &self,
        store: &dyn ExecutionStore,
        chain: &str,
        key: &str,
        execution: &str,
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
                    stage: stored_stage(stage),
                }
            }
            other => {
                return RunMessage::Refused {
                    reason: DeadLetterReason::Poison,
                    key: Some(key.to_string()),
                    error: format!("a chain's end says `done` or `paused`, not {other:?}"),
                };
            }
        };
        match store.end_chain(key, chain, execution, &end, now).await {
            Ok(Ok(())) => RunMessage::Ended {
                key: key.to_string(),
                paused: end != ChainEnd::Done,
            },
            Ok(Err(current)) => refused_end(key, chain, execution, current.as_ref()),
            Err(e) => store_failed(key, e),
        }
    }
}

/// What a chain's end that the store refused was: the run ended already by this very
/// execution (the end delivered twice), an earlier run's end sent again after a rerun, or a
/// message that names a record it does not own.
fn refused_end(
    key: &str,
    chain: &str,
    execution: &str,
    current: Option<&ExecutionRecord>,
) -> RunMessage {
    let mismatch = |error: String| RunMessage::Mismatch {
        key: key.to_string(),
        error,
    };
    let Some(run) = current else {
        return mismatch(format!("there is no run `{key}` of chain `{chain}` to end"));
    };
    if run.job != chain {
        return mismatch(format!(
            "`{key}` is a run of `{}`, not of chain `{chain}`: its end is not this message's to write",
            run.job
        ));
    }
    let owner = run
        .owner
        .clone()
        .unwrap_or_else(|| chain_execution_name(key, 1));
    if owner == execution {
        return RunMessage::AlreadyEnded {
            key: key.to_string(),
            stale: false,
        };
    }
    if (1..run.attempt).any(|n| chain_execution_name(key, n) == execution) {
        return RunMessage::AlreadyEnded {
            key: key.to_string(),
            stale: true,
        };
    }
    mismatch(format!(
        "run `{key}` of chain `{chain}` belongs to execution `{owner}`, not `{execution}`"
    ))
}

/// The most of one failed step's cause a chain run's record keeps (its step's record keeps
/// the error whole, capped as any record's).
const STAGE_CAUSE_CHARS: usize = 1024;

/// The paused stage as the run's record keeps it (its `result`): each step's name, and for
/// a failed one its error and cause, the cause cut to [`STAGE_CAUSE_CHARS`]; the whole cut
/// to a record's snapshot size times the stage's width, so the record stays far below
/// DynamoDB's 400 KB whatever Step Functions relays.
fn stored_stage(stage: &[Value]) -> String {
    let kept: Vec<Value> = stage
        .iter()
        .map(|r| match failure_of(r) {
            None => json!({ "step": text(r, "step") }),
            Some((error, cause)) => {
                let cause: String = cause.chars().take(STAGE_CAUSE_CHARS).collect();
                json!({ "step": text(r, "step"), "failed": true, "error": error, "cause": cause })
            }
        })
        .collect();
    let whole = Value::Array(kept).to_string();
    if whole.len() <= SNAPSHOT_CAP * 16 {
        whole
    } else {
        cap_snapshot(&whole)
    }
}

fn text(v: &Value, field: &str) -> String {
    v.get(field)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// A failed step's error and cause: `{"failure": {"Error", "Cause"?}}` as the generated
/// definitions relay it (a timeout has no cause), or `{"error", "cause"}` as definitions
/// generated before did. None for a step that did not fail.
fn failure_of(r: &Value) -> Option<(String, String)> {
    r.get("failed")?;
    match r.get("failure") {
        Some(f) => Some((text(f, "Error"), text(f, "Cause"))),
        None => Some((text(r, "error"), text(r, "cause"))),
    }
}

/// The most a chain run's `last_error` (its failed steps, named) holds.
const SUMMARY_CAP: usize = 4 * SNAPSHOT_CAP;

/// `step `invoices` failed: schedkit.permanent-error: the template is missing` for each
/// failed step of the paused stage (`: cause` left out when there is none: a timeout). Every
/// failed step is named: the causes share [`SUMMARY_CAP`] between them (the run's `result`
/// and each step's own record keep more).
fn failures(stage: &[Value]) -> String {
    let failed: Vec<(String, String, String)> = stage
        .iter()
        .filter_map(|r| failure_of(r).map(|(error, cause)| (text(r, "step"), error, cause)))
        .collect();
    let share = (SUMMARY_CAP / failed.len().max(1))
        .saturating_sub(128)
        .clamp(64, STAGE_CAUSE_CHARS);
    let summary = failed
        .into_iter()
        .map(|(step, error, cause)| {
            let mut kept: String = cause.chars().take(share).collect();
            if kept.len() < cause.len() {
                kept.push('…');
            }
            if kept.is_empty() {
                format!("step `{step}` failed: {error}")
            } else {
                format!("step `{step}` failed: {error}: {kept}")
            }
        })
        .collect::<Vec<_>>()
        .join("; ");
    crate::store::prefix(&summary, SUMMARY_CAP).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relayed_failure_without_a_cause_is_named_by_its_error() {
        let stage = [
            json!({ "step": "invoices", "failed": true, "failure": { "Error": "States.Timeout" } }),
            json!({ "step": "ledger", "failed": true, "failure": { "Error": "schedkit.failed", "Cause": "closed" } }),
        ];
        assert_eq!(
            failures(&stage),
            "step `invoices` failed: States.Timeout; step `ledger` failed: schedkit.failed: closed"
        );
        let stored: Value = serde_json::from_str(&stored_stage(&stage)).unwrap();
        assert_eq!(
            stored[1],
            json!({ "step": "ledger", "failed": true, "error": "schedkit.failed", "cause": "closed" })
        );
    }

    #[test]
    fn a_wide_stage_of_long_causes_is_kept_small() {
        let stage: Vec<Value> = (0..40)
            .map(|i| json!({ "step": format!("s{i}"), "failed": true, "failure": { "Error": "e", "Cause": "c".repeat(32_768) } }))
            .collect();
        assert!(stored_stage(&stage).len() <= SNAPSHOT_CAP * 16 + 64);
        assert!(failures(&stage).len() <= SUMMARY_CAP);
        let seven: Vec<Value> = stage[..7].to_vec();
        assert!(
            failures(&seven).contains("step `s6` failed"),
            "every failed step named"
        );
    }

    #[test]
    fn an_end_the_store_refused_is_a_repeat_a_stale_rerun_or_a_mismatch() {
        let key = "month-end#2026-12-01T00:00:00Z";
        let first = chain_execution_name(key, 1);
        let second = chain_execution_name(key, 2);
        let run = ExecutionRecord {
            execution_key: key.into(),
            job: "month-end".into(),
            scheduled_for: "2026-12-01T00:00:00Z".into(),
            status: Status::Running,
            attempt: 2,
            attempt_base: 0,
            owner: Some(second.clone()),
            lease_expires_at: None,
            payload_hash: "h".into(),
            input: None,
            created_at: String::new(),
            updated_at: String::new(),
            started_at: None,
            finished_at: None,
            duration_ms: None,
            last_error: None,
            history: Vec::new(),
            result: None,
            message_id: None,
            cancelled: None,
            skipped: None,
            late_attempt: None,
            waiting_since: None,
            expires_at: 0,
        };
        let done = ExecutionRecord {
            status: Status::Done,
            ..run.clone()
        };
        assert_eq!(
            refused_end(key, "month-end", &second, Some(&done)),
            RunMessage::AlreadyEnded {
                key: key.into(),
                stale: false
            }
        );
        assert_eq!(
            refused_end(key, "month-end", &first, Some(&run)),
            RunMessage::AlreadyEnded {
                key: key.into(),
                stale: true
            }
        );
        let is_mismatch = |m: RunMessage, says: &str| match m {
            RunMessage::Mismatch { error, .. } => assert!(error.contains(says), "{error}"),
            other => panic!("{other:?}"),
        };
        is_mismatch(
            refused_end(key, "month-end", "forged", Some(&run)),
            "not `forged`",
        );
        is_mismatch(
            refused_end(key, "quarter-end", &second, Some(&run)),
            "a run of `month-end`",
        );
        is_mismatch(
            refused_end(key, "month-end", &second, None),
            "there is no run",
        );
    }

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
