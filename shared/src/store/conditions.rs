//! The conditions of the store's writes to execution records, each written once: the
//! DynamoDB store sends it ([`Condition`]'s expression, names and values), the in-memory
//! store evaluates the same [`Condition`] over the record as DynamoDB holds it
//! ([`record_item`](super::record_item)). Reverting one reverts it for both, and the
//! simulation, which runs over the in-memory store, judges what production sends.

use chrono::{DateTime, Utc};

use super::attributes::{n, record_item, s};
use super::condition::Condition;
use super::record::{ClaimRequest, ExecutionRecord, Status};
use crate::key::chain_execution_name;

/// Claim condition: the key is new, or waiting (REGISTERED / RETRYING), or RUNNING with an
/// expired lease; and always the same payload. A FAILED run is claimed only by a redrive
/// ([`REDRIVE_CLAIM_CONDITION`]).
pub const CLAIM_CONDITION: &str = "attribute_not_exists(#execution_key) OR (#payload_hash = :hash AND (#status IN (:registered, :retrying) OR (#status = :running AND #lease_expires_at < :now_ms)))";
/// Claim condition of a redrive (a dead letter moved back): as [`CLAIM_CONDITION`], or
/// FAILED no later than its letter says (a second letter of a round that already ran again
/// and failed reopens nothing) and brought by another message than the one that failed
/// (the failed delivery itself, seen again after a crash between dead-lettering and
/// deleting it, must not start a new round).
pub const REDRIVE_CLAIM_CONDITION: &str = "attribute_not_exists(#execution_key) OR (#payload_hash = :hash AND (#status IN (:registered, :retrying) OR (#status = :failed AND #message_id <> :message_id AND #finished_at <= :failed_at) OR (#status = :running AND #lease_expires_at < :now_ms)))";
/// What a letter that does not say when its run failed stands for in `:failed_at`: any
/// round (RFC 3339 timestamps compare as text).
pub(crate) const ANY_ROUND: &str = "9999-12-31T23:59:59.999Z";
/// Owner condition of every later write of an attempt: the fencing check.
pub const OWNER_CONDITION: &str = "#status = :running AND #owner = :owner";
/// Condition of a commit with effects: still ours, and the lease still live by the
/// committing worker's clock. A commit after the lease ran out is refused even when nobody
/// reclaimed the run: its effects then wait for the next attempt, never race a reclaim.
pub const COMMIT_CONDITION: &str =
    "#status = :running AND #owner = :owner AND #lease_expires_at > :now_ms";
/// Condition of a chain's end: the record is a RUNNING run of that chain, owned by the
/// execution that sent the end.
pub const END_CONDITION: &str = "#job = :chain AND #status = :running AND #owner = :execution";
/// [`END_CONDITION`] for a run's first execution, which also owns a run recorded before
/// executions were named (no owner).
pub const END_CONDITION_FIRST_RUN: &str = "#job = :chain AND #status = :running AND (#owner = :execution OR attribute_not_exists(#owner))";
/// Condition of a record's first write: there is none yet.
pub(crate) const FIRST_CONDITION: &str = "attribute_not_exists(#execution_key)";
/// The statuses a cancellation ends ([`CANCELLABLE`](super::CANCELLABLE)), as the
/// cancellation's condition lists them.
const CANCELLABLE_IN: &str = "#status IN (:registered, :retrying, :running, :failed)";
/// Condition of noting a cancelled run's late attempt: the record CANCELLED with the
/// attempt's claim still on it (a cancellation keeps the lease and the owner), and no late
/// attempt noted yet. Only the claim that held the run when it was cancelled can have run
/// on, so there is one at most.
pub const LATE_ATTEMPT_CONDITION: &str =
    "#status = :cancelled AND #owner = :owner AND attribute_not_exists(#late_attempt)";

/// The claim of `req`: [`CLAIM_CONDITION`], or [`REDRIVE_CLAIM_CONDITION`] for a redrive.
pub(crate) fn claim(req: &ClaimRequest) -> Condition {
    let condition = match &req.redrive {
        None => Condition::new(CLAIM_CONDITION),
        Some(redrive) => Condition::new(REDRIVE_CLAIM_CONDITION)
            .value(":failed", s(Status::Failed.as_str()))
            .value(":message_id", s(req.message_id.as_deref().unwrap_or("")))
            .value(
                ":failed_at",
                s(redrive.failed_at.as_deref().unwrap_or(ANY_ROUND)),
            ),
    };
    condition
        .value(":hash", s(&req.payload_hash))
        .value(":registered", s(Status::Registered.as_str()))
        .value(":retrying", s(Status::Retrying.as_str()))
        .value(":running", s(Status::Running.as_str()))
        .value(":now_ms", n(req.now.timestamp_millis()))
}

/// Every later write of the attempt `owner` ([`OWNER_CONDITION`]).
pub(crate) fn owner(owner: &str) -> Condition {
    Condition::new(OWNER_CONDITION)
        .value(":running", s(Status::Running.as_str()))
        .value(":owner", s(owner))
}

/// A commit with effects by `owner` at `now` ([`COMMIT_CONDITION`]).
pub(crate) fn commit(owner: &str, now: DateTime<Utc>) -> Condition {
    Condition::new(COMMIT_CONDITION)
        .value(":running", s(Status::Running.as_str()))
        .value(":owner", s(owner))
        .value(":now_ms", n(now.timestamp_millis()))
}

/// The end of the chain run `key` of `chain`, sent by `execution`.
pub(crate) fn chain_end(key: &str, chain: &str, execution: &str) -> Condition {
    // A run recorded before runs named their executions has no owner: its first
    // execution owns it.
    let text = match execution == chain_execution_name(key, 1) {
        true => END_CONDITION_FIRST_RUN,
        false => END_CONDITION,
    };
    Condition::new(text)
        .value(":running", s(Status::Running.as_str()))
        .value(":chain", s(chain))
        .value(":execution", s(execution))
}

/// Condition of a chain run's rerun: the run as it was read (its status and run number),
/// owned by the execution it was read with (or by none, as a run recorded before executions
/// were named): another rerun, or the run's outcome, that came first refuses it.
pub const RERUN_CHAIN_CONDITION: &str =
    "#status = :was AND #attempt = :attempt AND (attribute_not_exists(#owner) OR #owner = :owner)";
/// Condition of a step record's write by an operator's rerun or skip: the record as it was
/// read (status and last update), so that a write that came meanwhile refuses it.
pub const STEP_AS_READ_CONDITION: &str = "#status = :was AND #updated_at = :updated";
/// Condition of a chain run's cancellation: a RUNNING or PAUSED run of that chain.
pub const CANCEL_CHAIN_CONDITION: &str = "#job = :chain AND #status IN (:running, :paused)";

/// The rerun of the chain run `run`, as read ([`RERUN_CHAIN_CONDITION`]).
pub(crate) fn rerun_chain(run: &ExecutionRecord) -> Condition {
    Condition::new(RERUN_CHAIN_CONDITION)
        .value(":was", s(run.status.as_str()))
        .value(":attempt", n(i64::from(run.attempt)))
        .value(":owner", s(run.owner.as_deref().unwrap_or_default()))
}

/// A write to the step record `step`, as read, of the status `was`
/// ([`STEP_AS_READ_CONDITION`]): `step.status` for a reopen, FAILED for a skip.
pub(crate) fn step_as_read(step: &ExecutionRecord, was: Status) -> Condition {
    Condition::new(STEP_AS_READ_CONDITION)
        .value(":was", s(was.as_str()))
        .value(":updated", s(&step.updated_at))
}

/// The cancellation of a run of `chain` ([`CANCEL_CHAIN_CONDITION`]).
pub(crate) fn cancel_chain(chain: &str) -> Condition {
    Condition::new(CANCEL_CHAIN_CONDITION)
        .value(":chain", s(chain))
        .value(":running", s(Status::Running.as_str()))
        .value(":paused", s(Status::Paused.as_str()))
}

/// A cancellation: a record of a cancellable status (and of one of the statuses asked for,
/// `only`, when it names any: a run that moved on since a bulk cancellation's listing to a
/// status not selected is left as it is, while one that moved between selected statuses,
/// RETRYING to RUNNING and back, is still cancelled); for a run cancelled with its message
/// in hand (`arrived`, the message's payload hash), no record yet, or one still waiting
/// (REGISTERED, RETRYING) with that payload.
pub(crate) fn cancel(only: &[Status], arrived: Option<&str>) -> Condition {
    let names: Vec<String> = (0..only.len()).map(|i| format!(":only{i}")).collect();
    let only_text = match names.is_empty() {
        true => String::new(),
        false => format!(" AND #status IN ({})", names.join(", ")),
    };
    let text = match arrived {
        Some(_) => format!(
            "attribute_not_exists(#execution_key) OR (({CANCELLABLE_IN}){only_text} AND #payload_hash = :hash AND #status IN (:registered, :retrying))"
        ),
        None => format!("attribute_exists(#execution_key) AND ({CANCELLABLE_IN}){only_text}"),
    };
    let mut condition = Condition::new(text)
        .value(":registered", s(Status::Registered.as_str()))
        .value(":retrying", s(Status::Retrying.as_str()))
        .value(":running", s(Status::Running.as_str()))
        .value(":failed", s(Status::Failed.as_str()));
    for (name, status) in names.iter().zip(only) {
        condition = condition.value(name, s(status.as_str()));
    }
    if let Some(hash) = arrived {
        condition = condition.value(":hash", s(hash));
    }
    condition
}

/// The note of a late attempt of the claim `owner` ([`LATE_ATTEMPT_CONDITION`]).
pub(crate) fn late_attempt(owner: &str) -> Condition {
    Condition::new(LATE_ATTEMPT_CONDITION)
        .value(":cancelled", s(Status::Cancelled.as_str()))
        .value(":owner", s(owner))
}

/// A record's first write ([`FIRST_CONDITION`]).
pub(crate) fn first() -> Condition {
    Condition::new(FIRST_CONDITION)
}

/// Whether `condition` holds over the record `current` (None: no item) as DynamoDB holds it.
pub(crate) fn holds(condition: &Condition, current: Option<&ExecutionRecord>) -> bool {
    condition.holds(current.map(record_item).as_ref())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::store::record::claimed_record;
    use crate::store::{Finish, Redrive};

    fn claim_passes(current: Option<&ExecutionRecord>, req: &ClaimRequest) -> bool {
        holds(&claim(req), current)
    }

    fn owner_holds(current: Option<&ExecutionRecord>, by: &str) -> bool {
        holds(&owner(by), current)
    }

    fn commit_passes(current: Option<&ExecutionRecord>, by: &str, now: DateTime<Utc>) -> bool {
        holds(&commit(by, now), current)
    }

    fn req(now: &str) -> ClaimRequest {
        ClaimRequest {
            key: "k".into(),
            job: "j".into(),
            scheduled_for: "2026-12-01T12:00:00Z".into(),
            payload_hash: "h".into(),
            input: "{}".into(),
            message_id: Some("m1".into()),
            owner: "w:1".into(),
            now: now.parse().unwrap(),
            lease: Duration::from_secs(60),
            retention: Duration::from_secs(3600),
            redrive: None,
        }
    }

    #[test]
    fn a_claim_takes_a_new_waiting_or_expired_run_of_the_same_payload_only() {
        let first = req("2026-12-01T12:00:00Z");
        assert!(claim_passes(None, &first));
        let running = claimed_record(None, &first);
        let soon = req("2026-12-01T12:00:30Z");
        assert!(!claim_passes(Some(&running), &soon), "the lease is live");
        let at_the_end = req("2026-12-01T12:01:00Z");
        assert!(
            !claim_passes(Some(&running), &at_the_end),
            "expired means before now"
        );
        let later = req("2026-12-01T12:01:00.001Z");
        assert!(claim_passes(Some(&running), &later));
        let other = ClaimRequest {
            payload_hash: "other".into(),
            ..later.clone()
        };
        assert!(!claim_passes(Some(&running), &other));
        for status in [Status::Registered, Status::Retrying] {
            let waiting = ExecutionRecord {
                status,
                ..running.clone()
            };
            assert!(claim_passes(Some(&waiting), &soon));
        }
        for status in [
            Status::Done,
            Status::Skipped,
            Status::Failed,
            Status::Paused,
        ] {
            let decided = ExecutionRecord {
                status,
                ..running.clone()
            };
            assert!(!claim_passes(Some(&decided), &later), "{status}");
        }
    }

    #[test]
    fn only_a_redrive_of_its_round_by_another_message_claims_a_failed_run() {
        let first = req("2026-12-01T12:00:00Z");
        let failed = crate::store::record::finished_record(
            &claimed_record(None, &first),
            &Finish::Failed { error: "x".into() },
            "2026-12-01T12:00:10Z".parse().unwrap(),
        );
        let redrive = |message: &str, failed_at: Option<&str>| ClaimRequest {
            message_id: Some(message.into()),
            redrive: Some(Redrive {
                failed_at: failed_at.map(str::to_string),
            }),
            ..req("2026-12-01T13:00:00Z")
        };
        assert!(claim_passes(Some(&failed), &redrive("m2", None)));
        assert!(claim_passes(
            Some(&failed),
            &redrive("m2", Some("2026-12-01T12:00:10.000Z"))
        ));
        assert!(
            !claim_passes(Some(&failed), &redrive("m1", None)),
            "the failed delivery itself"
        );
        assert!(
            !claim_passes(
                Some(&failed),
                &redrive("m2", Some("2026-12-01T12:00:09.000Z"))
            ),
            "a letter of an earlier round"
        );
        let plain = ClaimRequest {
            message_id: Some("m2".into()),
            ..req("2026-12-01T13:00:00Z")
        };
        assert!(!claim_passes(Some(&failed), &plain), "not a redrive");
    }

    #[test]
    fn owner_writes_need_the_running_owner_and_a_commit_a_live_lease() {
        let claim = req("2026-12-01T12:00:00Z");
        let running = claimed_record(None, &claim);
        assert!(owner_holds(Some(&running), "w:1"));
        assert!(!owner_holds(Some(&running), "w:2"));
        assert!(!owner_holds(None, "w:1"));
        let now: DateTime<Utc> = "2026-12-01T12:00:59.999Z".parse().unwrap();
        assert!(commit_passes(Some(&running), "w:1", now));
        let end: DateTime<Utc> = "2026-12-01T12:01:00Z".parse().unwrap();
        assert!(!commit_passes(Some(&running), "w:1", end));
    }
}
