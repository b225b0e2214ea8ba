//! The execution store: idempotency, leases and the run history, in DynamoDB.

mod dynamo;
mod record;

pub use dynamo::{
    CLAIM_CONDITION, DynamoStore, KEY_ATTRIBUTE, OWNER_CONDITION, StoreError, TTL_ATTRIBUTE,
    TransitionError,
};
pub use record::{
    AttemptEntry, AttemptOutcome, ClaimOutcome, ClaimRequest, ExecutionRecord, Finish, HISTORY_CAP,
    SNAPSHOT_CAP, Status, cap_snapshot, claimed_record, classify_refusal, finished_record, prefix,
    timestamp,
};
