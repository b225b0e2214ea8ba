//! The execution store: idempotency, leases and the run history, in DynamoDB.

mod chain_runs;
mod dynamo;
mod failures;
mod overlap;
mod pauses;
mod record;

pub use chain_runs::ChainEnd;
pub use dynamo::{
    CLAIM_CONDITION, COMMIT_CONDITION, CommitError, DEFAULT_CALL_TIMEOUT, DynamoStore,
    KEY_ATTRIBUTE, OWNER_CONDITION, StoreError, TTL_ATTRIBUTE, TransitionError,
};
pub use failures::failures_key;
pub use overlap::{Gate, slot_key};
pub use pauses::{PauseRecord, Pauses};
pub use record::{
    AttemptEntry, AttemptOutcome, ClaimOutcome, ClaimRequest, ExecutionRecord, Finish, Status,
};
pub(crate) use record::{prefix, timestamp};

/// How many partitions the `by-shard` index spreads the records over: the newest-first
/// listing of every record reads one page from each and merges them.
pub const LIST_SHARDS: u64 = 8;

/// The `by-shard` partition of the record of `key` (`"0"` to `"7"`): fixed at its first
/// claim, from a stable hash of the key, so writes spread evenly and never move.
pub fn list_shard(key: &str) -> String {
    (crate::hash::stable_hash([key.as_bytes()]) % LIST_SHARDS).to_string()
}
