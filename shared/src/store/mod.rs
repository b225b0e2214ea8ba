//! The execution store: idempotency, leases and the run history, in DynamoDB.

mod dynamo;
mod record;

pub use dynamo::{
    CLAIM_CONDITION, COMMIT_CONDITION, CommitError, DEFAULT_CALL_TIMEOUT, DynamoStore,
    KEY_ATTRIBUTE, OWNER_CONDITION, StoreError, TTL_ATTRIBUTE, TransitionError,
};
pub use record::{
    AttemptEntry, AttemptOutcome, ClaimOutcome, ClaimRequest, ExecutionRecord, Finish, Status,
};
pub(crate) use record::{prefix, timestamp};
