//! The execution store as the worker sees it: the transitions it makes on records, whatever
//! keeps them.
//!
//! The worker's logic (`batch`) calls only this interface, so that it runs the same over
//! [`DynamoStore`] (what ships: one conditional write per transition) and over
//! `MemoryStore` (unit tests and the deterministic simulation: the
//! same rules, decided by the same pure functions of `record`). Operator actions (listing,
//! reruns, the console) stay on `DynamoStore`: they need DynamoDB's indexes, not another
//! store; but for a cancellation, which the worker must answer whenever it lands, so that
//! tests and the simulation can cancel at any point.
//!
//! The futures are boxed by hand: a trait with `async fn` cannot be used as `dyn`, and the
//! worker holds its store as one (`Arc<dyn ExecutionStore>`), chosen at run time.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use aws_sdk_dynamodb::types::TransactWriteItem;
use chrono::{DateTime, Utc};

use super::audit_entries::AuditEntry;
use super::cancel::{CancelError, CancelRequest, Cancelled};
use super::chain_runs::ChainEnd;
use super::dynamo::{CommitError, DynamoStore, StoreError, TransitionError};
use super::gate_item::GateItem;
use super::overlap::Gate;
use super::permits::{Permit, PermitRequest};
use super::waiters::{HandOn, ParkRequest, Parked, Pass};

/// What handing a permit on answers: the gate after, or as it was when refused.
pub type HandedOn = Result<Result<GateItem, GateItem>, StoreError>;
use super::record::{
    AttemptEntry, ClaimOutcome, ClaimRequest, ExecutionRecord, Finish, OperatorNote,
};
use crate::job::Overlap;

/// A store call in flight.
pub type StoreCall<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One run's entry into its job's overlap slot (see [`ExecutionStore::enter_slot`]).
#[derive(Debug, Clone, Copy)]
pub struct SlotEntry<'a> {
    /// The job whose slot it is.
    pub job: &'a str,
    /// The run that enters.
    pub key: &'a str,
    /// The claim's owner token: the entry's own mark.
    pub owner: &'a str,
    /// The job's overlap policy.
    pub policy: Overlap,
    /// When.
    pub now: DateTime<Utc>,
    /// A guess at how long the run may take (its job's timeout and lease): when a waiter
    /// looks again.
    pub hold: Duration,
}

/// The transitions the worker makes; each is one atomic, conditional step. Every refusal
/// returns what it found, so that the caller decides without reading again.
pub trait ExecutionStore: Send + Sync + std::fmt::Debug + 'static {
    /// Claims the run `req.key`: new, waiting, expired, or (a redrive) failed before.
    fn claim<'a>(
        &'a self,
        req: &'a ClaimRequest,
    ) -> StoreCall<'a, Result<ClaimOutcome, StoreError>>;

    /// Extends the owner's lease to `now + lease`; refused once the run is not the owner's.
    fn heartbeat<'a>(
        &'a self,
        key: &'a str,
        owner: &'a str,
        now: DateTime<Utc>,
        lease: Duration,
    ) -> StoreCall<'a, Result<(), TransitionError>>;

    /// Ends the owner's attempt as DONE, RETRYING or FAILED; the record as written.
    fn finish<'a>(
        &'a self,
        claimed: &'a ExecutionRecord,
        finish: &'a Finish,
        now: DateTime<Utc>,
    ) -> StoreCall<'a, Result<ExecutionRecord, TransitionError>>;

    /// Ends the owner's attempt as DONE together with the job's effects, all or none, while
    /// the lease is live at `now`.
    fn commit<'a>(
        &'a self,
        claimed: &'a ExecutionRecord,
        result: serde_json::Value,
        now: DateTime<Utc>,
        effects: Vec<TransactWriteItem>,
    ) -> StoreCall<'a, Result<ExecutionRecord, CommitError>>;

    /// Reads one record, consistently.
    fn get<'a>(
        &'a self,
        key: &'a str,
    ) -> StoreCall<'a, Result<Option<ExecutionRecord>, StoreError>>;

    /// Enters the job's overlap slot for a claimed run.
    fn enter_slot<'a>(&'a self, entry: SlotEntry<'a>) -> StoreCall<'a, Result<Gate, StoreError>>;

    /// Takes a permit of a flow-control gate for a claimed run (see [`crate::flow`]).
    fn take_permit<'a>(
        &'a self,
        req: PermitRequest<'a>,
    ) -> StoreCall<'a, Result<Permit, StoreError>>;

    /// Takes a permit as [`ExecutionStore::take_permit`] does, from the gate as a read
    /// ([`ExecutionStore::read_gates`]) just found it: no write while that shows it full.
    fn take_permit_seen<'a>(
        &'a self,
        req: PermitRequest<'a>,
        seen: GateItem,
    ) -> StoreCall<'a, Result<Permit, StoreError>>;

    /// The gates `items` as they are now (strongly consistent; a gate never written reads
    /// as an empty one), a hundred to a request: a worker's look at every gate its runs
    /// watch, one request however many limits they wait for.
    fn read_gates<'a>(
        &'a self,
        items: &'a [String],
    ) -> StoreCall<'a, Result<BTreeMap<String, GateItem>, StoreError>>;

    /// Gives back the permit of the gate `item` the run `key` took under the claim
    /// `owner`; nothing when the entry is no longer that claim's. The gate as the release
    /// left it: whoever waits for it is handed the permit ([`ExecutionStore::hand_on`]).
    fn release_permit<'a>(
        &'a self,
        item: &'a str,
        key: &'a str,
        owner: &'a str,
    ) -> StoreCall<'a, Result<GateItem, StoreError>>;

    /// Parks a run a full gate refused in the gate's line, to be handed a permit when one
    /// frees (see [`crate::store::Waiter`]); `map`: whether the gate had a line when it
    /// refused.
    fn park<'a>(
        &'a self,
        req: ParkRequest<'a>,
        map: bool,
    ) -> StoreCall<'a, Result<Parked, StoreError>>;

    /// Hands a free permit on to a waiter: the gate after (the waiter holds it now,
    /// reserved until its run comes to take it), or as it was when refused.
    fn hand_on<'a>(&'a self, h: HandOn<'a>) -> StoreCall<'a, HandedOn>;

    /// Passes a permit from the run that holds it straight to a run of the same worker
    /// that waits for it, while no run waits in the gate's line: the gate after, or as it
    /// was when refused (see [`crate::store::Pass`]).
    fn pass_permit<'a>(&'a self, p: Pass<'a>) -> StoreCall<'a, HandedOn>;

    /// Gives the job's slot back after the run `key` ended; nothing when the slot is no
    /// longer this entry's: another run's, or the same run's entered again under another
    /// claim (`owner`, the claim's token, names the entry: a leave that lands late must not
    /// free the entry of the run's next attempt).
    fn leave_slot<'a>(
        &'a self,
        job: &'a str,
        key: &'a str,
        owner: &'a str,
    ) -> StoreCall<'a, Result<(), StoreError>>;

    /// Gives a claim back unrun: the record as it was before (`before`), or REGISTERED.
    fn give_back<'a>(
        &'a self,
        claimed: &'a ExecutionRecord,
        before: Option<&'a ExecutionRecord>,
        req: &'a ClaimRequest,
    ) -> StoreCall<'a, Result<(), TransitionError>>;

    /// Records a claimed run SKIPPED, unrun, because `running` held its job's slot.
    fn skip_claimed<'a>(
        &'a self,
        claimed: &'a ExecutionRecord,
        req: &'a ClaimRequest,
        running: &'a str,
    ) -> StoreCall<'a, Result<(), TransitionError>>;

    /// Adds the FAILED run `key`, failed at `failed_at`, to `job`'s failure streak unless
    /// it failed before the job's last resume; the streak's length (at most `cap`).
    fn count_failure<'a>(
        &'a self,
        job: &'a str,
        key: &'a str,
        error: &'a str,
        cap: u32,
        failed_at: DateTime<Utc>,
    ) -> StoreCall<'a, Result<u32, StoreError>>;

    /// Ends `job`'s failure streak after a DONE run.
    fn clear_failures<'a>(&'a self, job: &'a str) -> StoreCall<'a, Result<(), StoreError>>;

    /// An operator's cancellation of a run (see [`super::cancel`]).
    fn cancel<'a>(
        &'a self,
        req: &'a CancelRequest,
    ) -> StoreCall<'a, Result<Cancelled, CancelError>>;

    /// Adds an entry to the stage's audit trail (the worker's own pauses).
    fn audit<'a>(&'a self, entry: &'a AuditEntry) -> StoreCall<'a, Result<(), StoreError>>;

    /// Writes an attempt that ran on after its run was cancelled into the cancelled
    /// record's history, once (see
    /// [`LATE_ATTEMPT_CONDITION`](super::conditions::LATE_ATTEMPT_CONDITION)).
    fn note_cancelled_attempt<'a>(
        &'a self,
        key: &'a str,
        entry: &'a AttemptEntry,
    ) -> StoreCall<'a, Result<bool, StoreError>>;

    /// Records the start of a chain run; the record already there instead, if any.
    fn start_chain<'a>(
        &'a self,
        req: &'a ClaimRequest,
    ) -> StoreCall<'a, Result<Option<ExecutionRecord>, StoreError>>;

    /// Ends the RUNNING chain run `key` as `end` when `execution` owns it; a refusal gives
    /// back the record as it was.
    fn end_chain<'a>(
        &'a self,
        key: &'a str,
        chain: &'a str,
        execution: &'a str,
        end: &'a ChainEnd,
        now: DateTime<Utc>,
    ) -> StoreCall<'a, Result<Result<(), Option<ExecutionRecord>>, StoreError>>;

    /// Starts the next run of the chain run `run` (as read), owned by `execution`; the
    /// record as it is now, or None when it changed since it was read.
    fn rerun_chain<'a>(
        &'a self,
        run: &'a ExecutionRecord,
        execution: &'a str,
        now: DateTime<Utc>,
    ) -> StoreCall<'a, Result<Option<ExecutionRecord>, StoreError>>;

    /// Reopens the step record `step` (as read) for a rerun: REGISTERED with a fresh round;
    /// false when it changed since it was read.
    fn reopen_step<'a>(
        &'a self,
        step: &'a ExecutionRecord,
        now: DateTime<Utc>,
    ) -> StoreCall<'a, Result<bool, StoreError>>;

    /// Cancels the RUNNING or PAUSED chain run `key` of `chain`: the record as it was, or,
    /// refused, as it is.
    fn cancel_chain<'a>(
        &'a self,
        key: &'a str,
        chain: &'a str,
        note: &'a OperatorNote,
        now: DateTime<Utc>,
    ) -> StoreCall<'a, Result<Result<ExecutionRecord, Option<ExecutionRecord>>, StoreError>>;

    /// Skips the FAILED step record `step` (as read): DONE with `output`; false when it
    /// changed since it was read.
    fn skip_step<'a>(
        &'a self,
        step: &'a ExecutionRecord,
        output: &'a str,
        note: &'a OperatorNote,
        now: DateTime<Utc>,
    ) -> StoreCall<'a, Result<bool, StoreError>>;
}

impl ExecutionStore for DynamoStore {
    fn claim<'a>(
        &'a self,
        req: &'a ClaimRequest,
    ) -> StoreCall<'a, Result<ClaimOutcome, StoreError>> {
        Box::pin(DynamoStore::claim(self, req))
    }

    fn heartbeat<'a>(
        &'a self,
        key: &'a str,
        owner: &'a str,
        now: DateTime<Utc>,
        lease: Duration,
    ) -> StoreCall<'a, Result<(), TransitionError>> {
        Box::pin(DynamoStore::heartbeat(self, key, owner, now, lease))
    }

    fn finish<'a>(
        &'a self,
        claimed: &'a ExecutionRecord,
        finish: &'a Finish,
        now: DateTime<Utc>,
    ) -> StoreCall<'a, Result<ExecutionRecord, TransitionError>> {
        Box::pin(DynamoStore::finish(self, claimed, finish, now))
    }

    fn commit<'a>(
        &'a self,
        claimed: &'a ExecutionRecord,
        result: serde_json::Value,
        now: DateTime<Utc>,
        effects: Vec<TransactWriteItem>,
    ) -> StoreCall<'a, Result<ExecutionRecord, CommitError>> {
        Box::pin(DynamoStore::commit(self, claimed, result, now, effects))
    }

    fn get<'a>(
        &'a self,
        key: &'a str,
    ) -> StoreCall<'a, Result<Option<ExecutionRecord>, StoreError>> {
        Box::pin(DynamoStore::get(self, key))
    }

    fn enter_slot<'a>(&'a self, e: SlotEntry<'a>) -> StoreCall<'a, Result<Gate, StoreError>> {
        Box::pin(DynamoStore::enter_slot(
            self, e.job, e.key, e.owner, e.policy, e.now, e.hold,
        ))
    }

    fn leave_slot<'a>(
        &'a self,
        job: &'a str,
        key: &'a str,
        owner: &'a str,
    ) -> StoreCall<'a, Result<(), StoreError>> {
        Box::pin(DynamoStore::leave_slot(self, job, key, owner))
    }

    fn take_permit<'a>(
        &'a self,
        req: PermitRequest<'a>,
    ) -> StoreCall<'a, Result<Permit, StoreError>> {
        Box::pin(async move { DynamoStore::take_permit(self, &req).await })
    }

    fn take_permit_seen<'a>(
        &'a self,
        req: PermitRequest<'a>,
        seen: GateItem,
    ) -> StoreCall<'a, Result<Permit, StoreError>> {
        Box::pin(async move { DynamoStore::take_permit_seen(self, &req, seen).await })
    }

    fn read_gates<'a>(
        &'a self,
        items: &'a [String],
    ) -> StoreCall<'a, Result<BTreeMap<String, GateItem>, StoreError>> {
        Box::pin(DynamoStore::read_gates(self, items))
    }

    fn release_permit<'a>(
        &'a self,
        item: &'a str,
        key: &'a str,
        owner: &'a str,
    ) -> StoreCall<'a, Result<GateItem, StoreError>> {
        Box::pin(DynamoStore::release_permit(self, item, key, owner))
    }

    fn park<'a>(
        &'a self,
        req: ParkRequest<'a>,
        map: bool,
    ) -> StoreCall<'a, Result<Parked, StoreError>> {
        Box::pin(async move { DynamoStore::park(self, &req, map).await })
    }

    fn hand_on<'a>(&'a self, h: HandOn<'a>) -> StoreCall<'a, HandedOn> {
        Box::pin(async move { DynamoStore::hand_on(self, &h).await })
    }

    fn pass_permit<'a>(&'a self, p: Pass<'a>) -> StoreCall<'a, HandedOn> {
        Box::pin(async move { DynamoStore::pass_permit(self, &p).await })
    }

    fn give_back<'a>(
        &'a self,
        claimed: &'a ExecutionRecord,
        before: Option<&'a ExecutionRecord>,
        req: &'a ClaimRequest,
    ) -> StoreCall<'a, Result<(), TransitionError>> {
        Box::pin(DynamoStore::give_back(self, claimed, before, req))
    }

    fn skip_claimed<'a>(
        &'a self,
        claimed: &'a ExecutionRecord,
        req: &'a ClaimRequest,
        running: &'a str,
    ) -> StoreCall<'a, Result<(), TransitionError>> {
        Box::pin(DynamoStore::skip_claimed(self, claimed, req, running))
    }

    fn count_failure<'a>(
        &'a self,
        job: &'a str,
        key: &'a str,
        error: &'a str,
        cap: u32,
        failed_at: DateTime<Utc>,
    ) -> StoreCall<'a, Result<u32, StoreError>> {
        Box::pin(DynamoStore::count_failure(
            self, job, key, error, cap, failed_at,
        ))
    }

    fn clear_failures<'a>(&'a self, job: &'a str) -> StoreCall<'a, Result<(), StoreError>> {
        Box::pin(DynamoStore::clear_failures(self, job))
    }

    fn cancel<'a>(
        &'a self,
        req: &'a CancelRequest,
    ) -> StoreCall<'a, Result<Cancelled, CancelError>> {
        Box::pin(DynamoStore::cancel(self, req))
    }

    fn audit<'a>(&'a self, entry: &'a AuditEntry) -> StoreCall<'a, Result<(), StoreError>> {
        Box::pin(DynamoStore::put_audit(self, entry))
    }

    fn note_cancelled_attempt<'a>(
        &'a self,
        key: &'a str,
        entry: &'a AttemptEntry,
    ) -> StoreCall<'a, Result<bool, StoreError>> {
        Box::pin(DynamoStore::note_cancelled_attempt(self, key, entry))
    }

    fn start_chain<'a>(
        &'a self,
        req: &'a ClaimRequest,
    ) -> StoreCall<'a, Result<Option<ExecutionRecord>, StoreError>> {
        Box::pin(DynamoStore::start_chain(self, req))
    }

    fn end_chain<'a>(
        &'a self,
        key: &'a str,
        chain: &'a str,
        execution: &'a str,
        end: &'a ChainEnd,
        now: DateTime<Utc>,
    ) -> StoreCall<'a, Result<Result<(), Option<ExecutionRecord>>, StoreError>> {
        Box::pin(DynamoStore::end_chain(
            self, key, chain, execution, end, now,
        ))
    }

    fn rerun_chain<'a>(
        &'a self,
        run: &'a ExecutionRecord,
        execution: &'a str,
        now: DateTime<Utc>,
    ) -> StoreCall<'a, Result<Option<ExecutionRecord>, StoreError>> {
        Box::pin(DynamoStore::rerun_chain(self, run, execution, now))
    }

    fn reopen_step<'a>(
        &'a self,
        step: &'a ExecutionRecord,
        now: DateTime<Utc>,
    ) -> StoreCall<'a, Result<bool, StoreError>> {
        Box::pin(DynamoStore::reopen_step(self, step, now))
    }

    fn cancel_chain<'a>(
        &'a self,
        key: &'a str,
        chain: &'a str,
        note: &'a OperatorNote,
        now: DateTime<Utc>,
    ) -> StoreCall<'a, Result<Result<ExecutionRecord, Option<ExecutionRecord>>, StoreError>> {
        Box::pin(DynamoStore::cancel_chain(self, key, chain, note, now))
    }

    fn skip_step<'a>(
        &'a self,
        step: &'a ExecutionRecord,
        output: &'a str,
        note: &'a OperatorNote,
        now: DateTime<Utc>,
    ) -> StoreCall<'a, Result<bool, StoreError>> {
        Box::pin(DynamoStore::skip_step(self, step, output, note, now))
    }
}
