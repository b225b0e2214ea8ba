//! The execution store in memory, for unit tests and the deterministic simulation: the
//! transitions of [`DynamoStore`](super::DynamoStore), each request of it one atomic step
//! over ordered maps, decided by the same pure functions (`record`) and the very
//! conditions the DynamoDB store sends (`conditions`, evaluated by `condition`). Nothing survives the process: not a production store.
//!
//! Each request first asks the store's [`Faults`] what happens to it: a delay, a refusal
//! (nothing applied), or a lost answer (applied, and the caller told the store was
//! unavailable, as when DynamoDB's answer never arrives). A method that makes several
//! requests on DynamoDB (entering a slot, clearing a streak) makes as many steps here, so
//! another worker can act between them.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use aws_sdk_dynamodb::types::TransactWriteItem;
use chrono::{DateTime, Utc};

use super::chain_runs::ChainEnd;
use super::conditions::{self, holds};
use super::dynamo::{CommitError, StoreError, TransitionError};
use super::execution_store::HandedOn;
use super::execution_store::{ExecutionStore, SlotEntry, StoreCall};
use super::gate_item::GateItem;
use super::overlap::{Gate, look_again_in};
use super::pauses::PauseRecord;
use super::permits::{Permit, PermitRequest};
use super::record::{
    ClaimOutcome, ClaimRequest, ExecutionRecord, Finish, OperatorNote, Status, claimed_record,
    classify_refusal, finished_record, lease_until, timestamp,
};
use super::slot::{Slot, slot_item};
use super::slot_conditions;
use super::waiters::{HandOn, ParkRequest, Parked};
use crate::job::Overlap;

/// What happens to one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// It is applied and answered.
    None,
    /// It is refused as if DynamoDB could not be reached: nothing applied.
    Unavailable,
    /// It is applied, and its answer lost: the caller is told the store was unavailable.
    LoseAnswer,
    /// It is applied, its answer lost, and it is sent again, as the AWS SDK retries a
    /// request whose answer did not come: the caller gets the second try's answer (for a
    /// conditional write, usually a refusal by its own first try).
    Retried,
}

/// Decides the fate of each request (the simulation draws it from its seed).
pub trait Faults: Send + Sync + std::fmt::Debug {
    /// The request `request` (`claim`, `finish`, `enter_slot.take`...) on `key`: how long
    /// it takes, and what happens to it.
    fn request(&self, request: &'static str, key: &str) -> (Duration, Fault);
}

/// No faults, no delay.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoFaults;

impl Faults for NoFaults {
    fn request(&self, _: &'static str, _: &str) -> (Duration, Fault) {
        (Duration::ZERO, Fault::None)
    }
}

/// Everything the store holds.
#[derive(Debug, Clone, Default)]
pub struct MemoryState {
    /// Execution records (runs, steps, chain runs) by key.
    pub records: BTreeMap<String, ExecutionRecord>,
    /// The audit trail's entries, in the order written.
    pub audit: Vec<super::AuditEntry>,
    /// Overlap slots by job.
    pub slots: BTreeMap<String, Slot>,
    /// Failure streaks by job: the keys of the runs FAILED since the last DONE one.
    pub streaks: BTreeMap<String, BTreeSet<String>>,
    /// Pauses by job (the job's item in DynamoDB, beside its streak).
    pub pauses: BTreeMap<String, PauseRecord>,
    /// When each job was last resumed, epoch ms: failures before it are not counted.
    pub resumed_at_ms: BTreeMap<String, i64>,
    /// Each job's pauses ended lately (the job's item in DynamoDB keeps them).
    pub pause_windows: BTreeMap<String, Vec<super::pauses::PauseWindow>>,
    /// Requests served, faults included.
    pub requests: u64,
    /// Flow-control gates by item key: their holders and next starts.
    pub gates: BTreeMap<String, super::gate_item::GateItem>,
    /// The accountant's ledger item, as DynamoDB holds it (None before the first check).
    pub ledger: Option<super::Item>,
    /// Every write applied, in order, as DynamoDB Streams would show it: what a test or the
    /// simulation reads to judge the store's writes from outside. The store judges none.
    pub changes: Vec<Change>,
}

/// One write the store applied, as a stream of the table shows it.
// A record's images are the large variant: the stream is the tests' and the simulation's
// (a few thousand changes a seed), and its readers match on it by value.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// An execution record written: its image before and after, and the request's name.
    Record {
        /// The request that wrote it (`claim`, `finish`, `cancel`...).
        request: &'static str,
        /// The record before (None: there was none).
        before: Option<ExecutionRecord>,
        /// The record after.
        after: ExecutionRecord,
    },
    /// A flow-control gate written (entered, its line joined or handed on, a permit
    /// passed or given back): its image after the write, and the limit the writer entered
    /// it under.
    Gate {
        /// The gate's item key.
        item: String,
        /// The gate after the write.
        after: super::gate_item::GateItem,
        /// The concurrency the writer entered it under (None: a rate alone, or a permit
        /// given back, which never adds a holder).
        limit: Option<u32>,
    },
    /// An item a run's commit put into another table in the same transaction (a job's
    /// effect): the run and the write.
    Put {
        /// The run whose commit carried it.
        run: String,
        /// The write, as the transaction held it.
        write: TransactWriteItem,
    },
}

impl MemoryState {
    /// The writes the commits put into other tables (the jobs' effects), in order, with the
    /// run whose commit carried each.
    pub fn puts(&self) -> impl Iterator<Item = (&str, &TransactWriteItem)> {
        self.changes.iter().filter_map(|c| match c {
            Change::Put { run, write } => Some((run.as_str(), write)),
            _ => None,
        })
    }
}

/// The store. Cheap to clone: clones share one state.
#[derive(Debug, Clone)]
pub struct MemoryStore {
    state: Arc<Mutex<MemoryState>>,
    faults: Arc<dyn Faults>,
}

impl Default for MemoryStore {
    fn default() -> Self {
        MemoryStore::new(Arc::new(NoFaults))
    }
}

impl MemoryStore {
    /// An empty store whose requests meet `faults`.
    pub fn new(faults: Arc<dyn Faults>) -> Self {
        MemoryStore {
            state: Arc::default(),
            faults,
        }
    }

    /// The same store (its state shared) with no faults: a test's or a simulation's last
    /// look, or the repair it makes once its faults are over.
    pub fn without_faults(&self) -> MemoryStore {
        MemoryStore {
            state: self.state.clone(),
            faults: Arc::new(NoFaults),
        }
    }

    /// The same store (its state shared) with other faults: a test's one request made to
    /// fail where another actor's requests do not.
    pub fn with_faults(&self, faults: Arc<dyn Faults>) -> MemoryStore {
        MemoryStore {
            state: self.state.clone(),
            faults,
        }
    }

    /// A copy of everything it holds.
    pub fn snapshot(&self) -> MemoryState {
        self.lock().clone()
    }

    /// Puts a record as it is (a test's starting point).
    pub fn put(&self, record: ExecutionRecord) {
        self.lock()
            .records
            .insert(record.execution_key.clone(), record);
    }

    fn lock(&self) -> MutexGuard<'_, MemoryState> {
        // A panic while holding the lock leaves plain data behind: still readable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// One request: its delay, then `apply` on the state unless refused; a lost answer
    /// applies it and reports the store unavailable; a retried one applies it twice and
    /// answers the second.
    pub(super) async fn request<T>(
        &self,
        name: &'static str,
        key: &str,
        mut apply: impl FnMut(&mut MemoryState) -> T,
    ) -> Result<T, StoreError> {
        let (delay, fault) = self.faults.request(name, key);
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        let mut state = self.lock();
        state.requests += 1;
        if fault == Fault::Unavailable {
            return Err(StoreError::Unavailable(format!("{name}: refused (fault)")));
        }
        let tries = if fault == Fault::Retried { 2 } else { 1 };
        let mut answer = None;
        for _ in 0..tries {
            let before = state.records.get(key).cloned();
            answer = Some(apply(&mut state));
            if let Some(after) = state.records.get(key)
                && before.as_ref() != Some(after)
            {
                let after = after.clone();
                state.changes.push(Change::Record {
                    request: name,
                    before,
                    after,
                });
            }
        }
        let answer = answer.expect("tried at least once");
        match fault {
            Fault::LoseAnswer => Err(StoreError::Unavailable(format!(
                "{name}: answer lost (fault)"
            ))),
            _ => Ok(answer),
        }
    }

    async fn claim(&self, req: &ClaimRequest) -> Result<ClaimOutcome, StoreError> {
        self.request("claim", &req.key, |state| {
            let current = state.records.get(&req.key).cloned();
            if !holds(&conditions::claim(req), current.as_ref()) {
                let current = current.expect("a claim passes over a missing record");
                return classify_refusal(current, req);
            }
            let record = claimed_record(current.clone(), req);
            // As DynamoDB's claim writes it: the history as it was (the entry for an
            // expired attempt is on the returned record, stored by the attempt's finish).
            let stored = ExecutionRecord {
                history: current
                    .as_ref()
                    .map(|c| c.history.clone())
                    .unwrap_or_default(),
                ..record.clone()
            };
            state.records.insert(req.key.clone(), stored);
            ClaimOutcome::Claimed {
                record,
                before: current.map(Box::new),
            }
        })
        .await
    }

    async fn heartbeat(
        &self,
        key: &str,
        owner: &str,
        now: DateTime<Utc>,
        lease: Duration,
    ) -> Result<(), TransitionError> {
        self.request("heartbeat", key, |state| {
            let current = state.records.get_mut(key);
            if !holds(&conditions::owner(owner), current.as_deref()) {
                return Err(lost(current.map(|r| r.clone())));
            }
            let r = current.expect("held");
            r.lease_expires_at = Some(lease_until(now, lease));
            r.updated_at = timestamp(now);
            Ok(())
        })
        .await?
    }

    async fn finish(
        &self,
        claimed: &ExecutionRecord,
        finish: &Finish,
        now: DateTime<Utc>,
    ) -> Result<ExecutionRecord, TransitionError> {
        let after = finished_record(claimed, finish, now);
        let owner = claimed.owner.as_deref().unwrap_or_default();
        let key = &claimed.execution_key;
        self.request("finish", key, |state| {
            let current = state.records.get(key).cloned();
            if holds(&conditions::owner(owner), current.as_ref()) {
                state.records.insert(key.clone(), after.clone());
                return Ok(after.clone());
            }
            match current {
                // Applied by an earlier try whose answer was lost.
                Some(c) if c.holds_outcome(&after) => Ok(after.clone()),
                current => Err(lost(current)),
            }
        })
        .await?
    }

    async fn commit(
        &self,
        claimed: &ExecutionRecord,
        result: serde_json::Value,
        now: DateTime<Utc>,
        effects: Vec<TransactWriteItem>,
    ) -> Result<ExecutionRecord, CommitError> {
        let after = finished_record(claimed, &Finish::Succeeded { result }, now);
        let owner = claimed.owner.as_deref().unwrap_or_default();
        let key = &claimed.execution_key;
        self.request("commit", key, |state| {
            let current = state.records.get(key).cloned();
            if holds(&conditions::commit(owner, now), current.as_ref()) {
                state.records.insert(key.clone(), after.clone());
                state
                    .changes
                    .extend(effects.iter().map(|write| Change::Put {
                        run: key.clone(),
                        write: write.clone(),
                    }));
                return Ok(after.clone());
            }
            match current {
                // Our own commit, applied by an earlier try whose answer was lost.
                Some(c) if c.status == Status::Done && c.owner.as_deref() == Some(owner) => {
                    Ok(after.clone())
                }
                current => Err(CommitError::LeaseLost {
                    current: current.map(Box::new),
                }),
            }
        })
        .await?
    }

    async fn get(&self, key: &str) -> Result<Option<ExecutionRecord>, StoreError> {
        self.request("get", key, |state| state.records.get(key).cloned())
            .await
    }

    /// The record `claimed` replaced by `replacement` while its attempt holds it.
    async fn put_owned(
        &self,
        name: &'static str,
        claimed: &ExecutionRecord,
        replacement: ExecutionRecord,
    ) -> Result<(), TransitionError> {
        let owner = claimed.owner.as_deref().unwrap_or_default();
        let key = &claimed.execution_key;
        self.request(name, key, |state| {
            let current = state.records.get(key).cloned();
            if holds(&conditions::owner(owner), current.as_ref()) {
                state.records.insert(key.clone(), replacement.clone());
                return Ok(());
            }
            match current {
                Some(c)
                    if c.status == replacement.status
                        && c.owner == replacement.owner
                        && c.updated_at == replacement.updated_at =>
                {
                    Ok(())
                }
                current => Err(lost(current)),
            }
        })
        .await?
    }

    async fn give_back(
        &self,
        claimed: &ExecutionRecord,
        before: Option<&ExecutionRecord>,
        req: &ClaimRequest,
    ) -> Result<(), TransitionError> {
        let restored = ExecutionRecord::given_back(before, req);
        self.put_owned("give_back", claimed, restored).await
    }

    async fn skip_claimed(
        &self,
        claimed: &ExecutionRecord,
        req: &ClaimRequest,
        running: &str,
    ) -> Result<(), TransitionError> {
        let skipped = ExecutionRecord::skipped(req, running);
        self.put_owned("skip_claimed", claimed, skipped).await
    }

    async fn clear_failures(&self, job: &str) -> Result<(), StoreError> {
        let seen = self
            .request("clear_failures.read", job, |state| {
                state.streaks.get(job).cloned().unwrap_or_default()
            })
            .await?;
        if seen.is_empty() {
            return Ok(());
        }
        // Only the failures read: one counted since stays.
        self.request("clear_failures.delete", job, |state| {
            if let Some(keys) = state.streaks.get_mut(job) {
                keys.retain(|k| !seen.contains(k));
            }
        })
        .await
    }

    async fn start_chain(&self, req: &ClaimRequest) -> Result<Option<ExecutionRecord>, StoreError> {
        let mut first = ExecutionRecord::first(req, Status::Running);
        first.owner = Some(req.owner.clone()).filter(|o| !o.is_empty());
        self.request("start_chain", &req.key, |state| {
            if let Some(existing) = state.records.get(&req.key) {
                return Some(existing.clone());
            }
            state.records.insert(req.key.clone(), first.clone());
            None
        })
        .await
    }

    async fn end_chain(
        &self,
        key: &str,
        chain: &str,
        execution: &str,
        end: &ChainEnd,
        now: DateTime<Utc>,
    ) -> Result<Result<(), Option<ExecutionRecord>>, StoreError> {
        // What refused it, if anything: the record as it was (None: no record).
        let refused = self.request("end_chain", key, |state| {
            let current = state.records.get_mut(key);
            if !holds(
                &conditions::chain_end(key, chain, execution),
                current.as_deref(),
            ) {
                return Some(current.map(|r| r.clone()));
            }
            let r = current.expect("passed");
            let (status, error, result) = end.parts();
            r.status = status;
            r.updated_at = timestamp(now);
            r.finished_at = Some(timestamp(now));
            r.last_error = error.map(str::to_string);
            r.result = result.map(str::to_string);
            None
        });
        Ok(match refused.await? {
            None => Ok(()),
            Some(current) => Err(current),
        })
    }
}

fn lost(current: Option<ExecutionRecord>) -> TransitionError {
    TransitionError::LeaseLost {
        current: current.map(Box::new),
    }
}

/// Whether the run `key` still runs at `now` (RUNNING under a live lease).
fn still_running(state: &MemoryState, key: &str, now: DateTime<Utc>) -> bool {
    state
        .records
        .get(key)
        .is_some_and(|r| r.attempt_may_run(now))
}

/// When an entry's hold of the slot ends, in epoch milliseconds.
fn hold_until(e: &SlotEntry<'_>) -> i64 {
    e.now.timestamp_millis() + e.hold.as_millis() as i64
}

/// The slot becomes the entry's (and, under `buffer_one`, loses its waiter).
fn take(slot: &mut Slot, e: &SlotEntry<'_>) {
    slot.holder = Some(e.key.to_string());
    slot.holder_owner = Some(e.owner.to_string());
    slot.until_ms = hold_until(e);
    if e.policy == Overlap::BufferOne {
        slot.waiter = None;
        slot.waiter_until_ms = 0;
    }
}

impl MemoryStore {
    /// Enters a job's slot, as [`DynamoStore::enter_slot`](super::DynamoStore::enter_slot)
    /// does: a try; on refusal, a look at the holder (and the waiter under `buffer_one`);
    /// a take-over conditioned on what was seen; else skip, or wait as the one waiter.
    async fn enter_slot(&self, e: SlotEntry<'_>) -> Result<Gate, StoreError> {
        let now_ms = e.now.timestamp_millis();
        let buffer = e.policy == Overlap::BufferOne;
        let refused = self
            .request("enter_slot.take", e.job, |state| {
                let slot = state.slots.entry(e.job.to_string()).or_default();
                if slot_conditions::take(e.key, e.policy, e.now).holds(Some(&slot_item(slot))) {
                    take(slot, &e);
                    return None;
                }
                Some(slot.clone())
            })
            .await?;
        let Some(seen) = refused else {
            return Ok(Gate::Open);
        };
        let waiter = seen
            .waiter
            .clone()
            .filter(|w| w != e.key)
            .filter(|_| seen.waiter_until_ms >= now_ms);
        let mut running = seen.holder.clone();
        if self.slot_left(&e, &seen, waiter.as_deref()).await? {
            match self.take_over(&e, &seen, waiter.as_deref()).await? {
                Ok(()) => return Ok(Gate::Open),
                Err((holder, holder_owner)) => {
                    let entered = slot_conditions::entered_by(
                        holder.as_deref(),
                        holder_owner.as_deref(),
                        e.key,
                        e.owner,
                    );
                    if entered {
                        return Ok(Gate::Open);
                    }
                    running = holder;
                }
            }
        }
        let running = running.or(waiter).unwrap_or_default();
        if !buffer {
            return Ok(Gate::Skip { running });
        }
        self.wait_in_slot(&e, &seen, running).await
    }

    /// Whether the slot `seen` is left: its holder no longer runs, and (under
    /// `buffer_one`) its waiter is decided.
    async fn slot_left(
        &self,
        e: &SlotEntry<'_>,
        seen: &Slot,
        waiter: Option<&str>,
    ) -> Result<bool, StoreError> {
        let holder_gone = match &seen.holder {
            Some(h) => {
                !self
                    .request("enter_slot.holder", h, |state| {
                        still_running(state, h, e.now)
                    })
                    .await?
            }
            None => true,
        };
        // Both looked at, as DynamoDB's implementation does (one request each).
        let waiter_gone = match (waiter, e.policy == Overlap::BufferOne) {
            (Some(w), true) => self.get(w).await?.is_none_or(|r| r.decided()),
            _ => true,
        };
        Ok(holder_gone && waiter_gone)
    }

    /// Takes the slot over, if it is still as `seen`; else who holds it now.
    async fn take_over(
        &self,
        e: &SlotEntry<'_>,
        seen: &Slot,
        waiter: Option<&str>,
    ) -> Result<Result<(), (Option<String>, Option<String>)>, StoreError> {
        let condition = slot_conditions::take_over(
            e.key,
            e.policy,
            e.now,
            slot_conditions::Seen {
                holder: seen.holder.as_deref(),
                holder_owner: seen.holder_owner.as_deref(),
                waiter,
            },
        );
        self.request("enter_slot.take_over", e.job, |state| {
            let slot = state.slots.entry(e.job.to_string()).or_default();
            if condition.holds(Some(&slot_item(slot))) {
                take(slot, e);
                return Ok(());
            }
            Err((slot.holder.clone(), slot.holder_owner.clone()))
        })
        .await
    }

    /// Becomes the slot's one waiter (`buffer_one`), or is skipped when another waits.
    async fn wait_in_slot(
        &self,
        e: &SlotEntry<'_>,
        seen: &Slot,
        running: String,
    ) -> Result<Gate, StoreError> {
        let until = hold_until(e);
        let waits = self
            .request("enter_slot.wait", e.job, |state| {
                let slot = state.slots.entry(e.job.to_string()).or_default();
                if !slot_conditions::wait(e.key, e.now).holds(Some(&slot_item(slot))) {
                    return false;
                }
                slot.waiter = Some(e.key.to_string());
                slot.waiter_until_ms = seen.until_ms.max(until) + 60_000;
                true
            })
            .await?;
        Ok(match waits {
            true => Gate::Wait {
                retry_in: look_again_in(seen.until_ms, e.now),
            },
            false => Gate::Skip { running },
        })
    }

    async fn leave_slot(&self, job: &str, key: &str, owner: &str) -> Result<(), StoreError> {
        self.request("leave_slot", job, |state| {
            if let Some(slot) = state.slots.get_mut(job)
                && slot_conditions::leave(key, owner).holds(Some(&slot_item(slot)))
            {
                slot.holder = None;
                slot.holder_owner = None;
                slot.until_ms = 0;
            }
        })
        .await
    }
}

impl ExecutionStore for MemoryStore {
    fn claim<'a>(
        &'a self,
        req: &'a ClaimRequest,
    ) -> StoreCall<'a, Result<ClaimOutcome, StoreError>> {
        Box::pin(MemoryStore::claim(self, req))
    }

    fn heartbeat<'a>(
        &'a self,
        key: &'a str,
        owner: &'a str,
        now: DateTime<Utc>,
        lease: Duration,
    ) -> StoreCall<'a, Result<(), TransitionError>> {
        Box::pin(MemoryStore::heartbeat(self, key, owner, now, lease))
    }

    fn finish<'a>(
        &'a self,
        claimed: &'a ExecutionRecord,
        finish: &'a Finish,
        now: DateTime<Utc>,
    ) -> StoreCall<'a, Result<ExecutionRecord, TransitionError>> {
        Box::pin(MemoryStore::finish(self, claimed, finish, now))
    }

    fn commit<'a>(
        &'a self,
        claimed: &'a ExecutionRecord,
        result: serde_json::Value,
        now: DateTime<Utc>,
        effects: Vec<TransactWriteItem>,
    ) -> StoreCall<'a, Result<ExecutionRecord, CommitError>> {
        Box::pin(MemoryStore::commit(self, claimed, result, now, effects))
    }

    fn get<'a>(
        &'a self,
        key: &'a str,
    ) -> StoreCall<'a, Result<Option<ExecutionRecord>, StoreError>> {
        Box::pin(MemoryStore::get(self, key))
    }

    fn enter_slot<'a>(&'a self, e: SlotEntry<'a>) -> StoreCall<'a, Result<Gate, StoreError>> {
        Box::pin(MemoryStore::enter_slot(self, e))
    }

    fn take_permit<'a>(
        &'a self,
        req: PermitRequest<'a>,
    ) -> StoreCall<'a, Result<Permit, StoreError>> {
        Box::pin(async move { MemoryStore::take_permit(self, &req).await })
    }

    fn take_permit_seen<'a>(
        &'a self,
        req: PermitRequest<'a>,
        seen: GateItem,
    ) -> StoreCall<'a, Result<Permit, StoreError>> {
        Box::pin(async move { MemoryStore::take_permit_seen(self, &req, seen).await })
    }

    fn read_gates<'a>(
        &'a self,
        items: &'a [String],
    ) -> StoreCall<'a, Result<BTreeMap<String, GateItem>, StoreError>> {
        Box::pin(MemoryStore::read_gates(self, items))
    }

    fn release_permit<'a>(
        &'a self,
        item: &'a str,
        key: &'a str,
        owner: &'a str,
    ) -> StoreCall<'a, Result<GateItem, StoreError>> {
        Box::pin(MemoryStore::release_permit(self, item, key, owner))
    }

    fn park<'a>(
        &'a self,
        req: ParkRequest<'a>,
        map: bool,
    ) -> StoreCall<'a, Result<Parked, StoreError>> {
        Box::pin(async move { MemoryStore::park(self, &req, map).await })
    }

    fn hand_on<'a>(&'a self, h: HandOn<'a>) -> StoreCall<'a, HandedOn> {
        Box::pin(async move { MemoryStore::hand_on(self, &h).await })
    }

    fn pass_permit<'a>(&'a self, p: super::Pass<'a>) -> StoreCall<'a, HandedOn> {
        Box::pin(async move { MemoryStore::pass_permit(self, &p).await })
    }

    fn leave_slot<'a>(
        &'a self,
        job: &'a str,
        key: &'a str,
        owner: &'a str,
    ) -> StoreCall<'a, Result<(), StoreError>> {
        Box::pin(MemoryStore::leave_slot(self, job, key, owner))
    }

    fn give_back<'a>(
        &'a self,
        claimed: &'a ExecutionRecord,
        before: Option<&'a ExecutionRecord>,
        req: &'a ClaimRequest,
    ) -> StoreCall<'a, Result<(), TransitionError>> {
        Box::pin(MemoryStore::give_back(self, claimed, before, req))
    }

    fn skip_claimed<'a>(
        &'a self,
        claimed: &'a ExecutionRecord,
        req: &'a ClaimRequest,
        running: &'a str,
    ) -> StoreCall<'a, Result<(), TransitionError>> {
        Box::pin(MemoryStore::skip_claimed(self, claimed, req, running))
    }

    fn count_failure<'a>(
        &'a self,
        job: &'a str,
        key: &'a str,
        _error: &'a str,
        cap: u32,
        failed_at: DateTime<Utc>,
    ) -> StoreCall<'a, Result<u32, StoreError>> {
        Box::pin(MemoryStore::count_failure(self, job, key, cap, failed_at))
    }

    fn clear_failures<'a>(&'a self, job: &'a str) -> StoreCall<'a, Result<(), StoreError>> {
        Box::pin(MemoryStore::clear_failures(self, job))
    }

    fn cancel<'a>(
        &'a self,
        req: &'a super::CancelRequest,
    ) -> StoreCall<'a, Result<super::Cancelled, super::CancelError>> {
        Box::pin(MemoryStore::cancel(self, req))
    }

    fn audit<'a>(&'a self, entry: &'a super::AuditEntry) -> StoreCall<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let key = entry.key();
            self.request("audit", &key, |state| {
                // The entry's item as DynamoDB holds it: only its key matters to the
                // condition.
                let there = state.audit.iter().any(|e| e.key() == key).then(|| {
                    super::Item::from([(
                        super::KEY_ATTRIBUTE.to_string(),
                        super::attributes::s(&key),
                    )])
                });
                if super::audit_entries::audit_condition().holds(there.as_ref()) {
                    state.audit.push(entry.clone());
                }
            })
            .await
        })
    }

    fn note_cancelled_attempt<'a>(
        &'a self,
        key: &'a str,
        entry: &'a super::AttemptEntry,
    ) -> StoreCall<'a, Result<bool, StoreError>> {
        Box::pin(MemoryStore::note_cancelled_attempt(self, key, entry))
    }

    fn start_chain<'a>(
        &'a self,
        req: &'a ClaimRequest,
    ) -> StoreCall<'a, Result<Option<ExecutionRecord>, StoreError>> {
        Box::pin(MemoryStore::start_chain(self, req))
    }

    fn end_chain<'a>(
        &'a self,
        key: &'a str,
        chain: &'a str,
        execution: &'a str,
        end: &'a ChainEnd,
        now: DateTime<Utc>,
    ) -> StoreCall<'a, Result<Result<(), Option<ExecutionRecord>>, StoreError>> {
        Box::pin(MemoryStore::end_chain(
            self, key, chain, execution, end, now,
        ))
    }

    fn rerun_chain<'a>(
        &'a self,
        run: &'a ExecutionRecord,
        execution: &'a str,
        now: DateTime<Utc>,
    ) -> StoreCall<'a, Result<Option<ExecutionRecord>, StoreError>> {
        Box::pin(MemoryStore::rerun_chain(self, run, execution, now))
    }

    fn reopen_step<'a>(
        &'a self,
        step: &'a ExecutionRecord,
        now: DateTime<Utc>,
    ) -> StoreCall<'a, Result<bool, StoreError>> {
        Box::pin(MemoryStore::reopen_step(self, step, now))
    }

    fn cancel_chain<'a>(
        &'a self,
        key: &'a str,
        chain: &'a str,
        note: &'a OperatorNote,
        now: DateTime<Utc>,
    ) -> StoreCall<'a, Result<Result<ExecutionRecord, Option<ExecutionRecord>>, StoreError>> {
        Box::pin(MemoryStore::cancel_chain(self, key, chain, note, now))
    }

    fn skip_step<'a>(
        &'a self,
        step: &'a ExecutionRecord,
        output: &'a str,
        note: &'a OperatorNote,
        now: DateTime<Utc>,
    ) -> StoreCall<'a, Result<bool, StoreError>> {
        Box::pin(MemoryStore::skip_step(self, step, output, note, now))
    }
}

#[cfg(test)]
#[path = "memory_tests.rs"]
mod tests;
