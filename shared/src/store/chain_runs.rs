//! A chain run's record: one item per chain key, beside its steps' records (`<chain
//! key>#<step>`), with the chain's name as its job so listings find it. RUNNING from the
//! trigger that started the execution, then DONE, or PAUSED with the failed steps (its
//! `last_error` names them, its `result` holds the paused stage's results).
//!
//! ```text
//! (trigger) ──▶ RUNNING ──done──▶ DONE
//!                  │
//!                  └──paused──▶ PAUSED ──(rerun)──▶ RUNNING
//! ```

use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, Utc};

use super::dynamo::{is_condition_failure, s, unavailable};
use super::record::timestamp;
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

impl DynamoStore {
    /// Records the start of the chain run `req.key` (job = the chain): RUNNING. Returns
    /// the record that was there instead, when the run exists (a trigger delivered again).
    pub async fn start_chain(
        &self,
        req: &ClaimRequest,
    ) -> Result<Option<ExecutionRecord>, StoreError> {
        self.put_first(&ExecutionRecord::first(req, Status::Running))
            .await
    }

    /// Ends the RUNNING chain run `key` as `end`; false when it was not RUNNING (ended
    /// already: the outcome message came twice) or has no record.
    pub async fn end_chain(
        &self,
        key: &str,
        end: &ChainEnd,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let (status, error, result) = match end {
            ChainEnd::Done => (Status::Done, None, None),
            ChainEnd::Paused { failed, stage } => {
                (Status::Paused, Some(failed.as_str()), Some(stage.as_str()))
            }
        };
        let set = "SET #status = :status, #updated_at = :now, #finished_at = :now, #last_error = :error, #result = :result";
        // `open_status` only while the run is not DONE (the open-by-status index).
        let update = if status == Status::Done {
            format!("{set} REMOVE #open_status")
        } else {
            format!("{set}, #open_status = :status")
        };
        let text = |v: Option<&str>| v.map_or(AttributeValue::Null(true), s);
        let result = self
            .update(key, &update, "#status = :running")
            .expression_attribute_values(":status", s(status.as_str()))
            .expression_attribute_values(":running", s(Status::Running.as_str()))
            .expression_attribute_values(":now", s(&timestamp(now)))
            .expression_attribute_values(":error", text(error))
            .expression_attribute_values(":result", text(result))
            .send();
        match self.timed(result).await? {
            Ok(_) => Ok(true),
            Err(e) if is_condition_failure(&e) => Ok(false),
            Err(e) => Err(unavailable(e)),
        }
    }
}
