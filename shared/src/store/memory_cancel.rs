//! The memory store's cancellation: the very conditions the DynamoDB store sends
//! ([`conditions::cancel`], [`conditions::late_attempt`]), and the same records written.

use super::cancel::{CancelError, CancelRequest, Cancelled, cancelled_record, refused};
use super::conditions::{self, holds};
use super::dynamo::StoreError;
use super::memory::MemoryStore;
use super::record::AttemptEntry;

impl MemoryStore {
    /// Cancels a run, as [`DynamoStore::cancel`] does.
    pub async fn cancel(&self, req: &CancelRequest) -> Result<Cancelled, CancelError> {
        self.request("cancel", &req.key, |state| {
            let current = state.records.get(&req.key).cloned();
            if !holds(&req.condition(), current.as_ref()) {
                return refused(req, current);
            }
            let done = cancelled_record(current, req);
            state.records.insert(req.key.clone(), done.record.clone());
            Ok(done)
        })
        .await?
    }

    /// Notes an attempt that ran on after its run was cancelled, as
    /// [`DynamoStore::note_cancelled_attempt`] does.
    pub async fn note_cancelled_attempt(
        &self,
        key: &str,
        entry: &AttemptEntry,
    ) -> Result<bool, StoreError> {
        self.request("note_cancelled_attempt", key, |state| {
            let Some(record) = state.records.get_mut(key) else {
                return false;
            };
            if !holds(&conditions::late_attempt(&entry.owner), Some(record)) {
                return false;
            }
            // As `LATE_ATTEMPT_UPDATE` writes it.
            record.history.push(entry.clone());
            record.late_attempt = Some(entry.attempt);
            true
        })
        .await
    }
}
