//! The memory store's cancellation: the same rules as DynamoDB's, by the same pure
//! functions ([`super::cancel`]).

use super::cancel::{
    CancelError, CancelRequest, Cancelled, cancel_passes, cancelled_record, late_attempt_passes,
    refused,
};
use super::dynamo::StoreError;
use super::memory::MemoryStore;
use super::record::AttemptEntry;

impl MemoryStore {
    /// Cancels a run, as [`DynamoStore::cancel`] does.
    pub async fn cancel(&self, req: &CancelRequest) -> Result<Cancelled, CancelError> {
        self.request("cancel", &req.key, |state| {
            let current = state.records.get(&req.key).cloned();
            if !cancel_passes(current.as_ref(), req) {
                return Err(refused(&req.key, current));
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
            if !late_attempt_passes(Some(record), entry) {
                return false;
            }
            record.history.push(entry.clone());
            true
        })
        .await
    }
}
