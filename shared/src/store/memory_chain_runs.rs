//! The memory store's writes to chain runs and their steps by an operator (rerun, reopen,
//! cancel, skip): the very conditions the DynamoDB store sends ([`conditions`]), and the
//! records its updates write, one request each as on DynamoDB.

use chrono::{DateTime, Utc};

use super::conditions::{self, holds};
use super::dynamo::StoreError;
use super::execution_store::ExecutionStore;
use super::memory::MemoryStore;
use super::record::{ExecutionRecord, OperatorNote, Status, timestamp};

impl MemoryStore {
    /// As [`DynamoStore::rerun_chain`](super::DynamoStore::rerun_chain): the update, then
    /// a read of the record.
    pub async fn rerun_chain(
        &self,
        run: &ExecutionRecord,
        execution: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<ExecutionRecord>, StoreError> {
        let key = &run.execution_key;
        let passed = self
            .request("rerun_chain", key, |state| {
                let current = state.records.get_mut(key);
                if !holds(&conditions::rerun_chain(run), current.as_deref()) {
                    return false;
                }
                let r = current.expect("passed");
                r.status = Status::Running;
                r.attempt = run.attempt + 1;
                r.owner = Some(execution.to_string());
                r.updated_at = timestamp(now);
                r.finished_at = None;
                true
            })
            .await?;
        match passed {
            true => ExecutionStore::get(self, key).await,
            false => Ok(None),
        }
    }

    /// As [`DynamoStore::reopen_step`](super::DynamoStore::reopen_step).
    pub async fn reopen_step(
        &self,
        step: &ExecutionRecord,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let key = &step.execution_key;
        self.request("reopen_step", key, |state| {
            let current = state.records.get_mut(key);
            if !holds(
                &conditions::step_as_read(step, step.status),
                current.as_deref(),
            ) {
                return false;
            }
            let r = current.expect("passed");
            r.status = Status::Registered;
            r.attempt_base = r.attempt;
            r.updated_at = timestamp(now);
            r.finished_at = None;
            r.owner = None;
            r.lease_expires_at = None;
            true
        })
        .await
    }

    /// As [`DynamoStore::cancel_chain`](super::DynamoStore::cancel_chain).
    pub async fn cancel_chain(
        &self,
        key: &str,
        chain: &str,
        note: &OperatorNote,
        now: DateTime<Utc>,
    ) -> Result<Result<ExecutionRecord, Option<ExecutionRecord>>, StoreError> {
        // Whether it passed, and the record as it was (passed) or is (refused).
        let (passed, record) = self
            .request("cancel_chain", key, |state| {
                let current = state.records.get_mut(key);
                if !holds(&conditions::cancel_chain(chain), current.as_deref()) {
                    return (false, current.map(|r| r.clone()));
                }
                let r = current.expect("passed");
                let before = r.clone();
                r.status = Status::Cancelled;
                r.cancelled = Some(note.clone());
                r.updated_at = timestamp(now);
                r.finished_at = Some(timestamp(now));
                (true, Some(before))
            })
            .await?;
        Ok(match (passed, record) {
            (true, Some(before)) => Ok(before),
            (_, record) => Err(record),
        })
    }

    /// As [`DynamoStore::skip_step`](super::DynamoStore::skip_step).
    pub async fn skip_step(
        &self,
        step: &ExecutionRecord,
        output: &str,
        note: &OperatorNote,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let key = &step.execution_key;
        self.request("skip_step", key, |state| {
            let current = state.records.get_mut(key);
            if !holds(
                &conditions::step_as_read(step, Status::Failed),
                current.as_deref(),
            ) {
                return false;
            }
            let r = current.expect("passed");
            r.status = Status::Done;
            r.result = Some(output.to_string());
            r.skipped = Some(note.clone());
            r.updated_at = timestamp(now);
            r.finished_at = Some(timestamp(now));
            r.lease_expires_at = None;
            true
        })
        .await
    }
}
