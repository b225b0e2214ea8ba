//! The overlap slot of a job: one run of the job at a time, for jobs whose catalog says
//! `overlap = "skip"` or `"buffer_one"`.
//!
//! Each such job has one item in the executions table ([`super::slot_key`]) that names the
//! run holding the slot (`slot_key`, with `slot_owner`, the claim that entered it, and
//! `slot_until`, a guess at when it will be done) and, for `buffer_one`, the run waiting for
//! it (`waiter_key`, until `waiter_until`, renewed at each of its looks). Only a run that will run enters it:
//! the worker claims the run first, and a claim that finds the run decided (a duplicate, a
//! failed run's redelivery, a key conflict) never touches the slot. A claimed run enters the
//! slot with one conditional write and leaves it with another after its outcome: two
//! requests more per run.
//!
//! Whether the slot is held is decided by its holder's record, never by the clock: a run
//! holds the slot while its record is RUNNING under a live lease (a long run's heartbeats
//! keep it), and no longer once it is decided or its lease has run out (a release that
//! failed, a worker that died). The next run reads the holder's record and takes the slot
//! over, conditioned on the very entry it saw (holder and claim), so a holder that entered
//! again meanwhile keeps it. A run that finds the slot held gives its claim back
//! ([`DynamoStore::give_back`]) and is recorded SKIPPED (a new firing) or waits (a retry or
//! redrive of an existing run, or the one waiter `buffer_one` allows).
//!
//! The item carries no job, status or shard attributes, so no index (and no listing) ever
//! sees it.

use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, Utc};

use super::attributes::{n, s};
use super::condition::Condition;
use super::dynamo::{is_condition_failure, refused_item, unavailable};
use super::slot::slot_of;
use super::slot_conditions::{Seen, entered_by, leave, take, take_over, wait};
use super::{ClaimRequest, DynamoStore, ExecutionRecord, StoreError, TransitionError, slot_key};
use crate::job::Overlap;

/// What entering a job's slot found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    /// The slot is this run's: run it, then leave.
    Open,
    /// Another run holds the slot and this one is its waiter: look again after `retry_in`.
    Wait {
        /// How long until the next look.
        retry_in: Duration,
    },
    /// Another run holds the slot (or waits for it, under `buffer_one`): skip this one.
    Skip {
        /// The run that holds the slot.
        running: String,
    },
}

/// How long a waiter waits between looks: a quarter of what the holder may still take,
/// between 1 and 30 seconds.
pub(super) fn look_again_in(slot_until_ms: i64, now: DateTime<Utc>) -> Duration {
    let left = (slot_until_ms - now.timestamp_millis()).max(0) as u64;
    Duration::from_millis(left / 4).clamp(Duration::from_secs(1), Duration::from_secs(30))
}

/// One run's entry into its job's slot.
struct Entry<'a> {
    job: &'a str,
    key: &'a str,
    /// The claim's owner token: the entry's own mark, so a take-over conditioned on the
    /// entry it saw never takes the slot from a later entry of the same run.
    owner: &'a str,
    policy: Overlap,
    now: DateTime<Utc>,
    hold: Duration,
}

/// Whether the run `record` (None: no record) still runs at `now`: RUNNING under a live
/// lease, or cancelled while its attempt may not have learnt it yet. Anything else no
/// longer holds a slot, whatever the slot item says.
fn still_running(record: Option<&ExecutionRecord>, now: DateTime<Utc>) -> bool {
    record.is_some_and(|r| r.attempt_may_run(now))
}

impl DynamoStore {
    /// Whether the slot's waiter `waiter` has gone (under `buffer_one`; under `skip`
    /// there is none). A waiter is given back to REGISTERED or RETRYING between its looks:
    /// only a decided one has gone.
    async fn waiter_gone(&self, waiter: Option<&str>, policy: Overlap) -> Result<bool, StoreError> {
        Ok(match (waiter, policy) {
            (Some(w), Overlap::BufferOne) => self.get(w).await?.is_none_or(|r| r.decided()),
            _ => true,
        })
    }

    /// Enters `job`'s slot for the run `key` claimed by `owner` (one `UpdateItem`; a slot
    /// that names another run costs a read of that run's record, and a write more to take
    /// it over when that run no longer runs or to wait for it). `hold` is a guess at how
    /// long the run may take (its job's timeout and lease): when a waiter looks again.
    pub async fn enter_slot(
        &self,
        job: &str,
        key: &str,
        owner: &str,
        policy: Overlap,
        now: DateTime<Utc>,
        hold: Duration,
    ) -> Result<Gate, StoreError> {
        let entry = Entry {
            job,
            key,
            owner,
            policy,
            now,
            hold,
        };
        let refused = match self.take_slot(&entry, take(key, policy, now)).await? {
            Ok(()) => return Ok(Gate::Open),
            Err(refused) => slot_of(&refused),
        };
        let holder = refused.holder.clone();
        let waiter = refused
            .waiter
            .clone()
            .filter(|w| w != key)
            .filter(|_| refused.waiter_until_ms >= now.timestamp_millis());
        // A holder or waiter that no longer runs (decided, or its lease ran out) frees its
        // place: taken over, conditioned on the very entry seen.
        let holder_gone = match &holder {
            Some(h) => !still_running(self.get(h).await?.as_ref(), now),
            None => true,
        };
        let waiter_gone = self.waiter_gone(waiter.as_deref(), policy).await?;
        let mut running = holder.clone();
        if holder_gone && waiter_gone {
            let seen = Seen {
                holder: holder.as_deref(),
                holder_owner: refused.holder_owner.as_deref(),
                waiter: waiter.as_deref(),
            };
            match self
                .take_slot(&entry, take_over(key, policy, now, seen))
                .await?
            {
                Ok(()) => return Ok(Gate::Open),
                Err(now_refused) => {
                    let now_slot = slot_of(&now_refused);
                    let (holder, holder_owner) =
                        (now_slot.holder.as_deref(), now_slot.holder_owner.as_deref());
                    if entered_by(holder, holder_owner, key, owner) {
                        return Ok(Gate::Open);
                    }
                    // Someone else entered first: theirs now.
                    running = now_slot.holder;
                }
            }
        }
        // Named in the SKIPPED record: the holder, or the waiter queued ahead of this run.
        let running = running.or(waiter).unwrap_or_default();
        if policy != Overlap::BufferOne {
            return Ok(Gate::Skip { running });
        }
        let slot_until = refused.until_ms;
        // buffer_one: wait, unless another run already does; a waiter's look renews its
        // place.
        let until = now.timestamp_millis() + hold.as_millis() as i64;
        let result = self
            .update(
                &slot_key(job),
                "SET #waiter_key = :me, #waiter_until = :until",
                wait(key, now),
            )
            // A waiter whose message is lost stops blocking once the holder's time is
            // over and a little more: the next run may wait instead.
            .expression_attribute_values(":until", n(slot_until.max(until) + 60_000))
            .send();
        match self.timed(result).await? {
            Ok(_) => Ok(Gate::Wait {
                retry_in: look_again_in(slot_until, now),
            }),
            Err(e) if is_condition_failure(&e) => Ok(Gate::Skip { running }),
            Err(e) => Err(unavailable(e)),
        }
    }

    /// The slot write: the entry's run holds `job`'s slot if `condition` holds. The item
    /// as it was when refused.
    async fn take_slot(
        &self,
        entry: &Entry<'_>,
        condition: Condition,
    ) -> Result<Result<(), std::collections::HashMap<String, AttributeValue>>, StoreError> {
        let until = entry.now.timestamp_millis() + entry.hold.as_millis() as i64;
        let set =
            "SET #slot_key = :me, #slot_owner = :owner, #slot_until = :until, #expires_at = :ttl";
        let update = match entry.policy {
            Overlap::BufferOne => format!("{set} REMOVE #waiter_key, #waiter_until"),
            _ => set.to_string(),
        };
        let request = self
            .update(&slot_key(entry.job), &update, condition)
            .expression_attribute_values(":me", s(entry.key))
            .expression_attribute_values(":owner", s(entry.owner))
            .expression_attribute_values(":until", n(until))
            // The slot outlives any run it could hold; a job removed from the catalog
            // leaves an item that expires.
            .expression_attribute_values(":ttl", n(entry.now.timestamp() + 30 * 86_400));
        match self.timed(request.send()).await? {
            Ok(_) => Ok(Ok(())),
            Err(e) if is_condition_failure(&e) => Ok(Err(refused_item(&e).unwrap_or_default())),
            Err(e) => Err(unavailable(e)),
        }
    }

    /// Gives `job`'s slot back after the run `key` ended (one `UpdateItem`); nothing when
    /// the slot is no longer this entry's: another run's, or the same run's entered again
    /// by its next attempt (`owner`: the token of the claim that entered it).
    pub async fn leave_slot(&self, job: &str, key: &str, owner: &str) -> Result<(), StoreError> {
        let result = self
            .update(
                &slot_key(job),
                "REMOVE #slot_key, #slot_owner, #slot_until",
                leave(key, owner),
            )
            .send();
        match self.timed(result).await? {
            Ok(_) => Ok(()),
            Err(e) if is_condition_failure(&e) => Ok(()),
            Err(e) => Err(unavailable(e)),
        }
    }

    /// Gives the claim `claimed` back without running it: the record as it was before the
    /// claim (`before`), or, for a run that had none, REGISTERED with no attempt spent. One
    /// `PutItem` fenced on the claim's owner.
    pub(crate) async fn give_back(
        &self,
        claimed: &ExecutionRecord,
        before: Option<&ExecutionRecord>,
        req: &ClaimRequest,
    ) -> Result<(), TransitionError> {
        let restored = ExecutionRecord::given_back(before, req);
        self.put_owned(claimed, &restored).await
    }

    /// Records the claimed run `claimed` SKIPPED, unrun, because `running` held its job's
    /// slot: one `PutItem` fenced on the claim's owner.
    pub(crate) async fn skip_claimed(
        &self,
        claimed: &ExecutionRecord,
        req: &ClaimRequest,
        running: &str,
    ) -> Result<(), TransitionError> {
        let skipped = ExecutionRecord::skipped(req, running);
        self.put_owned(claimed, &skipped).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Status;

    #[test]
    fn a_waiter_looks_again_at_a_quarter_of_the_holders_time_within_bounds() {
        let now: DateTime<Utc> = "2026-12-01T12:00:00Z".parse().unwrap();
        let at = |ms: i64| now.timestamp_millis() + ms;
        assert_eq!(look_again_in(at(40_000), now), Duration::from_secs(10));
        assert_eq!(look_again_in(at(1_000), now), Duration::from_secs(1));
        assert_eq!(look_again_in(at(3_600_000), now), Duration::from_secs(30));
        assert_eq!(look_again_in(at(-5_000), now), Duration::from_secs(1));
    }

    #[test]
    fn only_a_run_under_a_live_lease_still_holds_a_slot() {
        let now: DateTime<Utc> = "2026-12-01T12:00:00Z".parse().unwrap();
        let req = ClaimRequest {
            key: "k".into(),
            job: "j".into(),
            scheduled_for: "2026-12-01T12:00:00Z".into(),
            payload_hash: "h".into(),
            input: "{}".into(),
            message_id: None,
            owner: "w:1".into(),
            now,
            lease: Duration::from_secs(60),
            retention: Duration::from_secs(3600),
            redrive: None,
        };
        let running = super::super::record::claimed_record(None, &req);
        assert!(still_running(Some(&running), now));
        let later = now + chrono::Duration::minutes(2);
        assert!(!still_running(Some(&running), later), "its lease ran out");
        let done = ExecutionRecord {
            status: Status::Done,
            ..running
        };
        assert!(!still_running(Some(&done), now));
        assert!(!still_running(None, now));
    }
}
