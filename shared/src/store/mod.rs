//! The execution store: idempotency, leases and the run history, in DynamoDB (and in
//! memory, for tests and the simulation, behind the same [`ExecutionStore`] interface).

mod accountant_ledger;
mod attributes;
mod audit_entries;
mod by_job;
mod cancel;
mod chain_runs;
mod condition;
mod conditions;
mod dynamo;
mod execution_store;
mod failed_since;
mod failures;
mod gate_item;
mod get_many;
mod internal;
mod memory;
mod memory_accountant;
mod memory_cancel;
mod memory_chain_runs;
mod memory_pauses;
mod memory_permits;
mod overlap;
mod parking;
mod pauses;
mod permits;
mod record;
mod slot;
mod slot_conditions;
mod waiters;

pub use accountant_ledger::ledger_key;
pub use attributes::{item_bytes, record_item};
pub use audit_entries::{
    AUDIT_SHARD, AuditEntry, AuditFilter, DEFAULT_AUDIT_RETENTION, audit_retention,
};
pub use cancel::{CANCELLABLE, CancelError, CancelRequest, Cancelled};
pub use chain_runs::ChainEnd;
pub use condition::{Condition, Item, ParseError};
pub use conditions::{
    CLAIM_CONDITION, COMMIT_CONDITION, END_CONDITION, END_CONDITION_FIRST_RUN, OWNER_CONDITION,
    REDRIVE_CLAIM_CONDITION,
};
pub use dynamo::{
    CommitError, DEFAULT_CALL_TIMEOUT, DynamoStore, KEY_ATTRIBUTE, StoreError, TTL_ATTRIBUTE,
    TransitionError,
};
pub use execution_store::{ExecutionStore, HandedOn, SlotEntry, StoreCall};
pub use gate_item::{GateItem, HANDED, Holder, Next, Waiter, gate_item};
pub use internal::{INTERNAL_PREFIX, is_internal, job_key, slot_key};
pub use memory::{Change, Fault, Faults, MemoryState, MemoryStore, NoFaults};
pub use overlap::Gate;
pub use pauses::{
    KEEP_PAUSE_WINDOWS, PauseHistory, PauseRecord, PauseStore, PauseWindow, Paused, Pauses,
};
pub(crate) use permits::entry_of;
pub use permits::{Line, Permit, PermitRequest};
#[cfg(test)]
pub(crate) use record::claimed_record;
pub use record::{
    AttemptEntry, AttemptOutcome, ClaimOutcome, ClaimRequest, ExecutionRecord, Finish,
    OperatorNote, Redrive, Status,
};
pub(crate) use record::{SNAPSHOT_CAP, cap_snapshot, prefix, timestamp};
pub use slot::Slot;
pub use waiters::{
    AGING, GONE_AFTER, HANDED_FOR, HandOn, MOST_WAITERS, PARKED_FOR, ParkRequest, Parked, Pass,
    next_waiter, reservation, served_after,
};

/// How many partitions the `by-shard` index spreads the records over: the newest-first
/// listing of every record reads one page from each and merges them.
pub(crate) const LIST_SHARDS: u64 = 8;

/// The `by-shard` partition of the record of `key` (`"0"` to `"7"`): fixed at its first
/// claim, from a stable hash of the key, so writes spread evenly and never move.
pub(crate) fn list_shard(key: &str) -> String {
    (crate::hash::stable_hash([key.as_bytes()]) % LIST_SHARDS).to_string()
}
