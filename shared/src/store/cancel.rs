//! An operator's cancellation: a run becomes CANCELLED in one conditional write, whatever
//! worker holds it. Nothing else is told: a running attempt learns it when its next
//! heartbeat is refused (the record is no longer RUNNING under its claim), so its job is
//! dropped and its effects, committed only with a RUNNING record of its claim, never are;
//! a later message of the key finds the record CANCELLED and is acknowledged unrun.
//!
//! A run still in the queue has no record yet: the console cancels it with the message in
//! hand (`arrived`), writing its record CANCELLED before the message is deleted, so a copy
//! delivered later is acknowledged too.

use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, Utc};

use super::attributes::s;
use super::conditions;
use super::dynamo::{DynamoStore, StoreError, decode, is_condition_failure, refusal, unavailable};
use super::record::{
    AttemptEntry, ClaimRequest, ExecutionRecord, OperatorNote, Status, expires_at, timestamp,
};

/// The statuses a cancellation ends: a run not yet decided, or FAILED (so that a redrive
/// of its letter does not run it). DONE and SKIPPED are over; a PAUSED chain run is
/// cancelled as a chain (`schedkit chains cancel`).
pub const CANCELLABLE: [Status; 4] = [
    Status::Registered,
    Status::Retrying,
    Status::Running,
    Status::Failed,
];

/// What an operator asks to cancel.
#[derive(Debug, Clone)]
pub struct CancelRequest {
    /// The run's execution key.
    pub key: String,
    /// Who cancels (the console's AWS identity).
    pub by: String,
    /// Why, as the operator said it.
    pub reason: String,
    /// When.
    pub now: DateTime<Utc>,
    /// Only a run in one of these statuses (a bulk cancellation's `--status`), or any
    /// cancellable one when empty: a run that moved on since the listing to a status not
    /// asked for is left as it is.
    pub only: Vec<Status>,
    /// The run as a message in the queue says it (a run with no record yet): a missing
    /// record is written CANCELLED from it, and a record of another payload or past
    /// waiting (REGISTERED, RETRYING) is left to the record's own cancellation. Its
    /// `owner` and `lease` are not used.
    pub arrived: Option<ClaimRequest>,
}

/// A cancellation done.
#[derive(Debug, Clone)]
pub struct Cancelled {
    /// The record as written.
    pub record: ExecutionRecord,
    /// The status the run had (REGISTERED for a run that had no record yet; CANCELLED when
    /// the cancel's own first try wrote it, its answer lost).
    pub was: Status,
}

/// Why a cancellation did not happen.
#[derive(Debug, thiserror::Error)]
pub enum CancelError {
    /// No record has the key.
    #[error("no run has the key `{key}` (`schedkit executions list` shows the runs there are)")]
    NotFound {
        /// The key asked for.
        key: String,
    },
    /// The run is in a status a cancellation does not end (or not the one asked for).
    #[error("run `{}` is {}{}", current.execution_key, current.status, refusal_hint(current))]
    Refused {
        /// The record as the refusal found it.
        current: Box<ExecutionRecord>,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn refusal_hint(current: &ExecutionRecord) -> String {
    match (&current.cancelled, current.status) {
        (Some(c), Status::Cancelled) => format!(
            ": cancelled already, by {} at {} ({})",
            c.by, c.at, c.reason
        ),
        (_, Status::Paused) => {
            ": a paused chain run is cancelled as a chain (`schedkit chains cancel KEY`)".into()
        }
        (_, status) if CANCELLABLE.contains(&status) => {
            ": not the status asked for; it moved on and is left as it is".into()
        }
        _ => {
            ": it is over, and only a REGISTERED, RETRYING, RUNNING or FAILED run can be cancelled"
                .into()
        }
    }
}

impl CancelRequest {
    /// Its write's condition, as both stores obey it ([`conditions::cancel`]).
    pub(super) fn condition(&self) -> super::condition::Condition {
        conditions::cancel(
            &self.only,
            self.arrived.as_ref().map(|a| a.payload_hash.as_str()),
        )
    }
}

/// The record after the cancellation of `req` passed over `before`, and what it was.
pub(super) fn cancelled_record(before: Option<ExecutionRecord>, req: &CancelRequest) -> Cancelled {
    let now = timestamp(req.now);
    let base = match before {
        Some(r) => r,
        None => {
            let arrived = req
                .arrived
                .as_ref()
                .expect("a new record comes with its message");
            ExecutionRecord {
                attempt: 0,
                started_at: None,
                expires_at: expires_at(req.now, arrived.retention),
                ..ExecutionRecord::first(arrived, Status::Registered)
            }
        }
    };
    let was = base.status;
    let record = ExecutionRecord {
        cancelled: Some(cancellation(req)),
        status: Status::Cancelled,
        updated_at: now.clone(),
        finished_at: Some(now),
        ..base
    };
    Cancelled { record, was }
}

fn cancellation(req: &CancelRequest) -> OperatorNote {
    OperatorNote {
        by: req.by.clone(),
        at: timestamp(req.now),
        reason: req.reason.clone(),
    }
}

/// What a refusal over `current` means. Refused by its own first try (the SDK sends a
/// request again when its answer did not come: the record CANCELLED with this very
/// cancellation, to the millisecond), it is done: what the run was before is not known
/// then, and is given as CANCELLED. Both stores decide by it.
pub(super) fn refused(
    req: &CancelRequest,
    current: Option<ExecutionRecord>,
) -> Result<Cancelled, CancelError> {
    match current {
        Some(current)
            if current.status == Status::Cancelled
                && current.cancelled.as_ref() == Some(&cancellation(req)) =>
        {
            Ok(Cancelled {
                record: current,
                was: Status::Cancelled,
            })
        }
        Some(current) => Err(CancelError::Refused {
            current: Box::new(current),
        }),
        None => Err(CancelError::NotFound {
            key: req.key.clone(),
        }),
    }
}

impl DynamoStore {
    /// Cancels a run: one conditional `UpdateItem` (creating the record CANCELLED from the
    /// message in hand, for a run that has none yet). The record as written, or why not.
    pub async fn cancel(&self, req: &CancelRequest) -> Result<Cancelled, CancelError> {
        let mut set = vec![
            "#status = :cancelled",
            "#open_status = :cancelled",
            "#cancelled = :cancellation",
            "#updated_at = :now",
            "#finished_at = :now",
        ];
        if req.arrived.is_some() {
            // A missing item is created whole: what its first claim would have written.
            set.extend([
                "#job = if_not_exists(#job, :job)",
                "#scheduled_for = if_not_exists(#scheduled_for, :scheduled_for)",
                "#payload_hash = if_not_exists(#payload_hash, :hash)",
                "#input = if_not_exists(#input, :input)",
                "#created_at = if_not_exists(#created_at, :now)",
                "#expires_at = if_not_exists(#expires_at, :expires_at)",
                "#list_shard = if_not_exists(#list_shard, :list_shard)",
                "#attempt = if_not_exists(#attempt, :zero)",
                "#message_id = if_not_exists(#message_id, :message_id)",
            ]);
        }
        // The lease is kept: until it runs out, the cancelled attempt (which learns at its
        // next heartbeat) still counts as holding its job's overlap slot.
        let update = format!("SET {}", set.join(", "));
        let cancellation =
            serde_dynamo::to_attribute_value(cancellation(req)).expect("a cancellation serialises");
        let mut call = self
            .update(&req.key, &update, req.condition())
            .expression_attribute_values(":cancelled", s(Status::Cancelled.as_str()))
            .expression_attribute_values(":cancellation", cancellation)
            .expression_attribute_values(":now", s(&timestamp(req.now)));
        if let Some(a) = &req.arrived {
            // What the record is when the key has none yet.
            let fresh = cancelled_record(None, req).record;
            call = call
                .expression_attribute_values(":job", s(&a.job))
                .expression_attribute_values(":scheduled_for", s(&a.scheduled_for))
                .expression_attribute_values(":hash", s(&a.payload_hash))
                .expression_attribute_values(":input", s(&fresh.input.unwrap_or_default()))
                .expression_attribute_values(":expires_at", super::attributes::n(fresh.expires_at))
                .expression_attribute_values(":list_shard", s(&super::list_shard(&req.key)))
                .expression_attribute_values(":zero", super::attributes::n(0))
                .expression_attribute_values(
                    ":message_id",
                    s(a.message_id.as_deref().unwrap_or_default()),
                );
        }
        let answer = self.timed(call.send()).await?;
        match answer {
            Ok(out) => {
                let before = out
                    .attributes
                    .filter(|a| !a.is_empty())
                    .map(|item| decode(&req.key, item))
                    .transpose()?;
                Ok(cancelled_record(before, req))
            }
            Err(err) => match refusal(&req.key, err) {
                Ok(current) => refused(req, current),
                Err(e) => Err(CancelError::Store(e)),
            },
        }
    }
}

/// The note of a late attempt: its entry appended to the history, and `late_attempt` set
/// (what [`LATE_ATTEMPT_CONDITION`](super::conditions::LATE_ATTEMPT_CONDITION) refuses a
/// second note by). The in-memory store applies the same.
pub(super) const LATE_ATTEMPT_UPDATE: &str =
    "SET #history = list_append(if_not_exists(#history, :none), :entry), #late_attempt = :attempt";

impl DynamoStore {
    /// Writes `entry`, an attempt that ran on after its run was cancelled, into the
    /// cancelled record's history (one conditional `UpdateItem`, see
    /// [`LATE_ATTEMPT_CONDITION`](super::conditions::LATE_ATTEMPT_CONDITION)). False: not
    /// written (not that claim's cancelled record, or written already).
    pub async fn note_cancelled_attempt(
        &self,
        key: &str,
        entry: &AttemptEntry,
    ) -> Result<bool, StoreError> {
        let value =
            serde_dynamo::to_attribute_value(entry).expect("an attempt entry always serialises");
        let call = self
            .update(
                key,
                LATE_ATTEMPT_UPDATE,
                conditions::late_attempt(&entry.owner),
            )
            .expression_attribute_values(":none", AttributeValue::L(Vec::new()))
            .expression_attribute_values(":entry", AttributeValue::L(vec![value]))
            .expression_attribute_values(
                ":attempt",
                super::attributes::n(i64::from(entry.attempt)),
            );
        match self.timed(call.send()).await? {
            Ok(_) => Ok(true),
            Err(err) if is_condition_failure(&err) => Ok(false),
            Err(err) => Err(unavailable(err)),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::store::record::claimed_record;

    /// Whether the cancellation's condition, as both stores obey it, passes over `current`.
    fn cancel_passes(current: Option<&ExecutionRecord>, req: &CancelRequest) -> bool {
        conditions::holds(&req.condition(), current)
    }

    fn claim() -> ClaimRequest {
        ClaimRequest {
            key: "k".into(),
            job: "j".into(),
            scheduled_for: "2026-12-01T12:00:00Z".into(),
            payload_hash: "h".into(),
            input: "{}".into(),
            message_id: Some("m1".into()),
            owner: "w:1".into(),
            now: "2026-12-01T12:00:00Z".parse().unwrap(),
            lease: Duration::from_secs(60),
            retention: Duration::from_secs(3600),
            redrive: None,
        }
    }

    fn cancel(only: Vec<Status>, arrived: Option<ClaimRequest>) -> CancelRequest {
        CancelRequest {
            key: "k".into(),
            by: "arn:aws:iam::1:user/ops".into(),
            reason: "a bad deploy".into(),
            now: "2026-12-01T12:00:10Z".parse().unwrap(),
            only,
            arrived,
        }
    }

    /// A cancel whose write the SDK sent again (applied, its answer lost) is refused by its
    /// own first try: it is the operator's cancel all the same (it answered "cancelled
    /// already", and `chains cancel` left the step out of what it cancelled). Another
    /// cancel's refusal stays one.
    #[tokio::test]
    async fn a_cancel_refused_by_its_own_first_try_is_done() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicBool, Ordering};

        use crate::store::{Fault, Faults, MemoryStore};

        #[derive(Debug)]
        struct RetriedCancel(AtomicBool);
        impl Faults for RetriedCancel {
            fn request(&self, request: &'static str, _: &str) -> (Duration, Fault) {
                let retried = request == "cancel" && self.0.swap(false, Ordering::SeqCst);
                let fault = if retried { Fault::Retried } else { Fault::None };
                (Duration::ZERO, fault)
            }
        }
        let store = MemoryStore::new(Arc::new(RetriedCancel(AtomicBool::new(true))));
        store.put(claimed_record(None, &claim()));
        let done = store.cancel(&cancel(vec![], None)).await;
        assert!(
            matches!(&done, Ok(c) if c.record.status == Status::Cancelled),
            "{done:?}"
        );
        let other = CancelRequest {
            by: "someone else".into(),
            ..cancel(vec![], None)
        };
        assert!(matches!(
            store.cancel(&other).await,
            Err(CancelError::Refused { .. })
        ));
    }

    #[test]
    fn a_run_not_yet_decided_or_failed_is_cancelled_and_says_who_and_what_it_was() {
        let running = claimed_record(None, &claim());
        for status in CANCELLABLE {
            let r = ExecutionRecord {
                status,
                ..running.clone()
            };
            assert!(cancel_passes(Some(&r), &cancel(vec![], None)), "{status}");
            let Cancelled { record: after, was } = cancelled_record(Some(r), &cancel(vec![], None));
            assert_eq!((after.status, was), (Status::Cancelled, status));
            assert_eq!(
                after.lease_expires_at, running.lease_expires_at,
                "kept for the slot"
            );
            let c = after.cancelled.unwrap();
            assert_eq!(c.by, "arn:aws:iam::1:user/ops");
            assert_eq!(after.owner.as_deref(), Some("w:1"), "the owner is kept");
        }
        for status in [
            Status::Done,
            Status::Skipped,
            Status::Paused,
            Status::Cancelled,
        ] {
            let r = ExecutionRecord {
                status,
                ..running.clone()
            };
            assert!(!cancel_passes(Some(&r), &cancel(vec![], None)), "{status}");
        }
        assert!(!cancel_passes(None, &cancel(vec![], None)), "no record");
        assert!(
            !cancel_passes(Some(&running), &cancel(vec![Status::Retrying], None)),
            "moved on since the preview"
        );
        let between = cancel(vec![Status::Retrying, Status::Running], None);
        assert!(
            cancel_passes(Some(&running), &between),
            "moved between the statuses asked for"
        );
    }

    #[test]
    fn a_queued_run_is_cancelled_from_its_message_only_while_unrun_and_of_its_payload() {
        let arrived = || cancel(vec![], Some(claim()));
        assert!(cancel_passes(None, &arrived()));
        let Cancelled {
            record: written,
            was,
        } = cancelled_record(None, &arrived());
        assert_eq!(
            (written.status, was),
            (Status::Cancelled, Status::Registered)
        );
        assert_eq!((written.attempt, written.owner.clone()), (0, None));
        assert_eq!(written.cancelled.unwrap().reason, "a bad deploy");
        let running = claimed_record(None, &claim());
        assert!(
            !cancel_passes(Some(&running), &arrived()),
            "it runs: by record"
        );
        let waiting = ExecutionRecord {
            status: Status::Retrying,
            ..running.clone()
        };
        assert!(cancel_passes(Some(&waiting), &arrived()));
        let other = ExecutionRecord {
            payload_hash: "other".into(),
            ..waiting
        };
        assert!(!cancel_passes(Some(&other), &arrived()), "another payload");
    }
}
