//! The memory store's cancellation: the same rules as DynamoDB's, by the same pure
//! functions ([`super::cancel`]).

use super::cancel::{
    CancelError, CancelRequest, Cancelled, cancel_passes, cancelled_record, refused,
};
use super::memory::MemoryStore;

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
}
