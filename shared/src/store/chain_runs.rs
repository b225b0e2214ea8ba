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

use aws_sdk_dynamodb::types::{AttributeValue, ReturnValuesOnConditionCheckFailure};
use chrono::{DateTime, Utc};

use super::dynamo::{is_condition_failure, s, unavailable};
use super::record::{cap_snapshot, expires_at, timestamp};
use super::{
    ClaimRequest, DynamoStore, ExecutionRecord, KEY_ATTRIBUTE, Status, StoreError, list_shard,
};

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

fn decode(
    key: &str,
    item: std::collections::HashMap<String, AttributeValue>,
) -> Result<ExecutionRecord, StoreError> {
    serde_dynamo::from_item(item).map_err(|e| StoreError::Malformed {
        key: key.to_string(),
        reason: e.to_string(),
    })
}

impl DynamoStore {
    /// Records the start of the chain run `req.key` (job = the chain): RUNNING. Returns
    /// the record that was there instead, when the run exists (a trigger delivered again).
    pub async fn start_chain(
        &self,
        req: &ClaimRequest,
    ) -> Result<Option<ExecutionRecord>, StoreError> {
        let now = timestamp(req.now);
        let record = ExecutionRecord {
            execution_key: req.key.clone(),
            job: req.job.clone(),
            scheduled_for: req.scheduled_for.clone(),
            status: Status::Running,
            attempt: 1,
            attempt_base: 0,
            owner: None,
            lease_expires_at: None,
            payload_hash: req.payload_hash.clone(),
            input: Some(cap_snapshot(&req.input)),
            created_at: now.clone(),
            updated_at: now.clone(),
            started_at: Some(now),
            finished_at: None,
            duration_ms: None,
            last_error: None,
            history: Vec::new(),
            result: None,
            message_id: req.message_id.clone(),
            expires_at: expires_at(req.now, req.retention),
        };
        let mut item: std::collections::HashMap<String, AttributeValue> =
            serde_dynamo::to_item(&record).expect("a record serialises");
        item.insert("list_shard".into(), s(&list_shard(&req.key)));
        item.insert("open_status".into(), s(Status::Running.as_str()));
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(#k)")
            .expression_attribute_names("#k", KEY_ATTRIBUTE)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send();
        match self.timed(result).await? {
            Ok(_) => Ok(None),
            Err(e) => match e.as_service_error() {
                Some(aws_sdk_dynamodb::operation::put_item::PutItemError::ConditionalCheckFailedException(c)) => {
                    decode(&req.key, c.item().cloned().unwrap_or_default()).map(Some)
                }
                _ => Err(unavailable(e)),
            },
        }
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
