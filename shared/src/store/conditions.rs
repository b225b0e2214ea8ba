//! The conditions of the store's transitions, written in Rust: what the DynamoDB store's
//! condition expressions say ([`CLAIM_CONDITION`](super::CLAIM_CONDITION),
//! [`REDRIVE_CLAIM_CONDITION`](super::dynamo::REDRIVE_CLAIM_CONDITION),
//! [`OWNER_CONDITION`](super::OWNER_CONDITION), [`COMMIT_CONDITION`](super::COMMIT_CONDITION),
//! [`END_CONDITION`](super::END_CONDITION)), for the stores that are not DynamoDB. Written
//! by hand because no library evaluates DynamoDB's condition language over our records;
//! `tests/tests/store_contract.rs` holds both stores to the same answers.
//!
//! As in DynamoDB, a comparison with an attribute the item lacks is false.

use chrono::{DateTime, Utc};

use super::dynamo::ANY_ROUND;
use super::record::{ClaimRequest, ExecutionRecord, Status};
use crate::key::chain_execution_name;

/// Whether a claim of `req` passes over `current` (None: no item).
pub(crate) fn claim_passes(current: Option<&ExecutionRecord>, req: &ClaimRequest) -> bool {
    let Some(r) = current else {
        return true;
    };
    if r.payload_hash != req.payload_hash {
        return false;
    }
    let now_ms = req.now.timestamp_millis();
    let waiting = matches!(r.status, Status::Registered | Status::Retrying);
    let expired = r.status == Status::Running && r.lease_expires_at.is_some_and(|t| t < now_ms);
    let redriven = req.redrive.as_ref().is_some_and(|redrive| {
        let failed_at = redrive.failed_at.as_deref().unwrap_or(ANY_ROUND);
        r.status == Status::Failed
            && r.message_id
                .as_deref()
                .is_some_and(|m| m != req.message_id.as_deref().unwrap_or(""))
            && r.finished_at.as_deref().is_some_and(|f| f <= failed_at)
    });
    waiting || expired || redriven
}

/// Whether the attempt of `owner` still holds the run: every later write of an attempt.
pub(crate) fn owner_holds(current: Option<&ExecutionRecord>, owner: &str) -> bool {
    current.is_some_and(|r| r.status == Status::Running && r.owner.as_deref() == Some(owner))
}

/// Whether a commit with effects passes: the owner holds the run and its lease is live by
/// the committing worker's clock.
pub(crate) fn commit_passes(
    current: Option<&ExecutionRecord>,
    owner: &str,
    now: DateTime<Utc>,
) -> bool {
    owner_holds(current, owner)
        && current
            .and_then(|r| r.lease_expires_at)
            .is_some_and(|t| t > now.timestamp_millis())
}

/// Whether the end of a chain run sent by `execution` passes: a RUNNING run of `chain`
/// owned by that execution (or, for a run's first execution, recorded without an owner).
pub(crate) fn chain_end_passes(
    current: Option<&ExecutionRecord>,
    key: &str,
    chain: &str,
    execution: &str,
) -> bool {
    let Some(r) = current else {
        return false;
    };
    let first_run = execution == chain_execution_name(key, 1);
    let owned = match r.owner.as_deref() {
        Some(owner) => owner == execution,
        None => first_run,
    };
    r.job == chain && r.status == Status::Running && owned
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::store::record::claimed_record;
    use crate::store::{Finish, Redrive};

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
