//! A chain run's record: one item per chain key, beside its steps' records (`<chain
//! key>#<step>`), with the chain's name as its job so listings find it. RUNNING from the
//! trigger that started the execution, then DONE, or PAUSED with the failed steps (its
//! `last_error` names them, its `result` holds the paused stage's results).
//!
//! ```text
//! (trigger) ──▶ RUNNING ──done──▶ DONE
//!                ▲   │
//!        (rerun) │   └──paused──▶ PAUSED
//!                └────────────────┘
//! RUNNING, PAUSED ──(an operator: chains cancel)──▶ CANCELLED
//! ```
//!
//! Its `attempt` counts the runs (1, then one more per rerun) and its `owner` is the
//! current run's Step Functions execution: only that execution's outcome ends the record,
//! so an earlier run's outcome, delivered late, is fenced off like a stale worker.

use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, Utc};

use super::attributes::{n, s};
use super::conditions;
use super::dynamo::{decode, is_condition_failure, refusal, unavailable};
use super::record::{OperatorNote, timestamp};
use super::{ClaimRequest, DynamoStore, ExecutionRecord, Status, StoreError};

/// How a chain run ended, as its record keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChainEnd {
    /// Every step DONE.
    Done,
    /// A step failed for good: the run stopped after its stage.
    Paused {
        /// Which steps failed, and why (for the record's `last_error`).
        failed: String,
        /// The paused stage's results, JSON (for the record's `result`).
        stage: String,
    },
}

impl ChainEnd {
    /// The run's status, `last_error` and `result` after this end.
    pub(crate) fn parts(&self) -> (Status, Option<&str>, Option<&str>) {
        match self {
            ChainEnd::Done => (Status::Done, None, None),
            ChainEnd::Paused { failed, stage } => {
                (Status::Paused, Some(failed.as_str()), Some(stage.as_str()))
            }
        }
    }
}

impl DynamoStore {
    /// Records the start of the chain run `req.key` (job = the chain): RUNNING. Returns
    /// the record that was there instead, when the run exists (a trigger delivered again).
    pub async fn start_chain(
        &self,
        req: &ClaimRequest,
    ) -> Result<Option<ExecutionRecord>, StoreError> {
        let mut first = ExecutionRecord::first(req, Status::Running);
        first.owner = Some(req.owner.clone()).filter(|o| !o.is_empty());
        self.put_first(&first).await
    }

    /// Starts run `run.attempt + 1` of the chain run `run` (PAUSED, or RUNNING when its
    /// execution ended without an outcome), owned by `execution`: RUNNING again. Returns
    /// the record as it is now, or None when it changed since `run` was read (another
    /// rerun, or its outcome, came first).
    pub async fn rerun_chain(
        &self,
        run: &ExecutionRecord,
        execution: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<ExecutionRecord>, StoreError> {
        let update = "SET #status = :running, #open_status = :running, #attempt = :next, #owner = :execution, #updated_at = :now REMOVE #finished_at";
        let result = self
            .update(&run.execution_key, update, conditions::rerun_chain(run))
            .expression_attribute_values(":running", s(Status::Running.as_str()))
            .expression_attribute_values(":next", n(i64::from(run.attempt) + 1))
            .expression_attribute_values(":execution", s(execution))
            .expression_attribute_values(":now", s(&timestamp(now)))
            .send();
        match self.timed(result).await? {
            Ok(_) => self.get(&run.execution_key).await,
            Err(e) if is_condition_failure(&e) => Ok(None),
            Err(e) => Err(unavailable(e)),
        }
    }

    /// Ends the RUNNING run `key` of `chain` as `end`, when `execution` (the one that sent
    /// the outcome) owns it (one conditional `UpdateItem`). A refusal gives back the record
    /// as it was (None: no record): a run of another job or chain, owned by another
    /// execution, or ended already.
    pub async fn end_chain(
        &self,
        key: &str,
        chain: &str,
        execution: &str,
        end: &ChainEnd,
        now: DateTime<Utc>,
    ) -> Result<Result<(), Option<ExecutionRecord>>, StoreError> {
        let (status, error, result) = end.parts();
        let set = "SET #status = :status, #updated_at = :now, #finished_at = :now, #last_error = :error, #result = :result";
        // `open_status` only while the run is not DONE (the open-by-status index).
        let update = if status == Status::Done {
            format!("{set} REMOVE #open_status")
        } else {
            format!("{set}, #open_status = :status")
        };
        let text = |v: Option<&str>| v.map_or(AttributeValue::Null(true), s);
        let result = self
            .update(key, &update, conditions::chain_end(key, chain, execution))
            .expression_attribute_values(":status", s(status.as_str()))
            .expression_attribute_values(":now", s(&timestamp(now)))
            .expression_attribute_values(":error", text(error))
            .expression_attribute_values(":result", text(result))
            .send();
        match self.timed(result).await? {
            Ok(_) => Ok(Ok(())),
            Err(e) => Ok(Err(refusal(key, e)?)),
        }
    }

    /// Reopens the step record `step` of a chain run that a rerun runs again: a step that
    /// FAILED, or that an earlier version recorded SKIPPED, becomes REGISTERED with a fresh
    /// round of attempts, so the rerun's message for it claims it (only a redrive or a rerun
    /// reopens a decided step). One conditional `UpdateItem`, on the record as read; false
    /// when it changed meanwhile.
    pub async fn reopen_step(
        &self,
        step: &ExecutionRecord,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let result = self
            .update(
                &step.execution_key,
                "SET #status = :registered, #open_status = :registered, #attempt_base = #attempt, #updated_at = :now REMOVE #finished_at, #owner, #lease_expires_at",
                conditions::step_as_read(step, step.status),
            )
            .expression_attribute_values(":registered", s(Status::Registered.as_str()))
            .expression_attribute_values(":now", s(&timestamp(now)))
            .send();
        match self.timed(result).await? {
            Ok(_) => Ok(true),
            Err(e) if is_condition_failure(&e) => Ok(false),
            Err(e) => Err(unavailable(e)),
        }
    }
}

impl DynamoStore {
    /// Cancels the chain run `key` of `chain` (RUNNING or PAUSED): CANCELLED with `note`, in
    /// one conditional `UpdateItem`. The record as it was, or, refused, as it is (None: no
    /// record). Its execution's end, delivered later, is refused like a stale one's.
    pub async fn cancel_chain(
        &self,
        key: &str,
        chain: &str,
        note: &OperatorNote,
        now: DateTime<Utc>,
    ) -> Result<Result<ExecutionRecord, Option<ExecutionRecord>>, StoreError> {
        let note = serde_dynamo::to_attribute_value(note).expect("a note serialises");
        let result = self
            .update(
                key,
                "SET #status = :cancelled, #open_status = :cancelled, #cancelled = :note, #updated_at = :now, #finished_at = :now",
                conditions::cancel_chain(chain),
            )
            .expression_attribute_values(":cancelled", s(Status::Cancelled.as_str()))
            .expression_attribute_values(":note", note)
            .expression_attribute_values(":now", s(&timestamp(now)))
            .send();
        match self.timed(result).await? {
            Ok(out) => {
                let before = out.attributes.unwrap_or_default();
                Ok(Ok(decode(key, before)?))
            }
            Err(e) => Ok(Err(refusal(key, e)?)),
        }
    }

    /// Skips the FAILED step record `step` of a paused chain run: DONE with `output` as its
    /// result (what the later stages see), its failure (`last_error`, attempts) kept, and
    /// `note` saying who skipped it and why. One conditional `UpdateItem` on the record as
    /// read; false when it changed meanwhile.
    pub async fn skip_step(
        &self,
        step: &ExecutionRecord,
        output: &str,
        note: &OperatorNote,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let note = serde_dynamo::to_attribute_value(note).expect("a note serialises");
        let result = self
            .update(
                &step.execution_key,
                "SET #status = :done, #result = :output, #skipped = :note, #updated_at = :now, #finished_at = :now REMOVE #open_status, #lease_expires_at",
                conditions::step_as_read(step, Status::Failed),
            )
            .expression_attribute_values(":done", s(Status::Done.as_str()))
            .expression_attribute_values(":output", s(output))
            .expression_attribute_values(":note", note)
            .expression_attribute_values(":now", s(&timestamp(now)))
            .send();
        match self.timed(result).await? {
            Ok(_) => Ok(true),
            Err(e) if is_condition_failure(&e) => Ok(false),
            Err(e) => Err(unavailable(e)),
        }
    }
}
