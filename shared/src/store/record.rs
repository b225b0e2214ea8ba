//! The execution record and the pure rules of its state machine.
//!
//! ```text
//! REGISTERED ──claim──▶ RUNNING ──complete──▶ DONE
//!     ▲                  │  │
//!     │        retryable │  │ attempts exhausted / permanent error
//!     │                  ▼  ▼
//!     └──── (redelivery) RETRYING   FAILED ──(redrive)──▶ RUNNING
//!
//! REGISTERED, RUNNING, RETRYING, FAILED ──(an operator cancels)──▶ CANCELLED
//! ```
//! The DynamoDB store performs each transition as one conditional write; this module holds
//! what can be decided without I/O: what a refused claim means, and what a record looks
//! like after a transition, so the store never has to read an item back.

use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Attempts kept on a record; older ones are dropped first.
pub(crate) const HISTORY_CAP: usize = 10;
/// Bytes of input (and of result) kept on a record, enough to replay a typical run.
pub(crate) const SNAPSHOT_CAP: usize = 4096;

/// Where a run stands in the state machine; stored and printed in upper case (`RUNNING`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Status {
    /// Known but not yet claimed; a claim takes it as it takes a new key.
    Registered,
    /// An attempt holds the lease until `lease_expires_at`; past it, a delivery may reclaim
    /// the run.
    Running,
    /// An attempt failed retryably; the next delivery, after the backoff, claims it again.
    Retrying,
    /// Terminal: the run succeeded, and any later delivery of the key is a duplicate.
    Done,
    /// The round ended (attempts exhausted or a permanent error) and the message went to the
    /// DLQ; only a redrive, which is another message, claims it again.
    Failed,
    /// Terminal: the run arrived while another run of its job was RUNNING, and the job's
    /// overlap policy (`skip`, or `buffer_one` with one already waiting) said not to run it.
    Skipped,
    /// A chain run stopped after a step failed for good: its later stages did not start,
    /// and a rerun continues from the failed step.
    Paused,
    /// Terminal: an operator cancelled the run (`schedkit executions cancel`); the record's
    /// `cancelled` says who and why. A running attempt is fenced out at its next heartbeat
    /// (its effects never commit), and every later message of the key is acknowledged
    /// unrun. Nothing reopens it: work that must still be done is fired under a new key.
    Cancelled,
}

impl Status {
    /// The stored form (`DONE`): condition expressions and the `by-status` index use it.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Registered => "REGISTERED",
            Status::Running => "RUNNING",
            Status::Retrying => "RETRYING",
            Status::Done => "DONE",
            Status::Failed => "FAILED",
            Status::Skipped => "SKIPPED",
            Status::Paused => "PAUSED",
            Status::Cancelled => "CANCELLED",
        }
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How one attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AttemptOutcome {
    /// The job succeeded; the record became DONE.
    Succeeded,
    /// Failed retryably with attempts left; the record became RETRYING.
    Retrying,
    /// Failed for good (the last attempt, or a permanent error); the record became FAILED.
    Failed,
    /// The worker stopped renewing its lease and another one took the run over.
    LeaseExpired,
    /// It ran to its end while its run was cancelled: its outcome and effects were refused
    /// (its `error` says how it had ended).
    Cancelled,
}

/// One attempt, as kept in the record's capped history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttemptEntry {
    /// The record's `attempt` counter at the time: over its whole life, not within the round.
    pub attempt: u32,
    /// Owner token of the worker that ran it (`<worker id>:<uuid>`).
    pub owner: String,
    /// When it was claimed, RFC 3339 with milliseconds, UTC.
    pub started_at: String,
    /// When it ended, or when a reclaim found its lease expired; RFC 3339 with milliseconds.
    pub finished_at: String,
    /// How it ended.
    pub outcome: AttemptOutcome,
    /// The error, capped at 4096 bytes; None for a success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Milliseconds from claim to end; None for an attempt whose lease expired.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// It never ran: it waited for its limits longer than its job allows, and its run
    /// ended FAILED `limit-wait` ([`Finish::LimitWait`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub limit_wait: bool,
}

/// An execution record, one DynamoDB item per execution key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecutionRecord {
    /// The partition key: the envelope's `key`, the job's template, or `<job>#<scheduled_for>`.
    pub execution_key: String,
    /// The job's catalog name; the `by-job` index is keyed on it.
    pub job: String,
    /// When the run was due, RFC 3339 in UTC; the `by-job` index sorts on it.
    pub scheduled_for: String,
    /// Where the run stands; the `by-status` index is keyed on it.
    pub status: Status,
    /// Attempts claimed over the record's whole life.
    #[serde(default)]
    pub attempt: u32,
    /// `attempt` when the record last became FAILED: a redrive starts a fresh round.
    #[serde(default)]
    pub attempt_base: u32,
    /// Owner token of the latest claim (`<worker id>:<uuid>`); that attempt's writes are
    /// fenced on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Epoch milliseconds; only meaningful while RUNNING.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_expires_at: Option<i64>,
    /// SHA-256 (hex) of the job and canonical payload: the key with another hash is a conflict.
    pub payload_hash: String,
    /// The envelope as received, capped at `SNAPSHOT_CAP` bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<String>,
    /// When the key was first claimed, RFC 3339 with milliseconds, UTC.
    pub created_at: String,
    /// When the record last changed, RFC 3339 with milliseconds; `by-status` sorts on it.
    pub updated_at: String,
    /// When the latest attempt was claimed, RFC 3339 with milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    /// When the run became DONE or FAILED, RFC 3339 with milliseconds; None while it is not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    /// Milliseconds the latest finished attempt took; None while an attempt runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// The latest failed attempt's error, capped at 4096 bytes; a later success leaves it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// The last 10 attempts, oldest first, with each one's outcome and error.
    #[serde(default)]
    pub history: Vec<AttemptEntry>,
    /// The job's result (JSON), capped at `SNAPSHOT_CAP` bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    /// SQS id of the message behind the latest claim: a FAILED run is claimed again only by
    /// another message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    /// Who cancelled the run, when and why; set with CANCELLED.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancelled: Option<OperatorNote>,
    /// Who skipped this chain step after it failed, when and why (`schedkit chains skip`):
    /// the step is DONE with the output the operator gave, its failure kept beside.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<OperatorNote>,
    /// The attempt that ran on after its run was cancelled, once its entry is in the
    /// history: a second note of it is refused by this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub late_attempt: Option<u32>,
    /// Since when an attempt has waited for its job's limits, as `<attempt>@<epoch ms>`:
    /// written when a claim refused by a limit is given back, so that the run's wait counts
    /// from its first refusal even when nothing else remembers it (a run put out of a full
    /// gate's line; a message that came back by itself). Another attempt waits afresh.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_since: Option<String>,
    /// DynamoDB TTL, epoch seconds.
    pub expires_at: i64,
}

/// An operator's decision kept on the record it changed (a cancellation, a skipped step):
/// answerable for (who, when, why) without the audit trail at hand.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperatorNote {
    /// The identity that acted (the console's AWS identity).
    pub by: String,
    /// When, RFC 3339 with milliseconds, UTC.
    pub at: String,
    /// Why, as the operator said it.
    pub reason: String,
}

impl ExecutionRecord {
    /// The attempt number within the current round (1 for the first attempt, and again
    /// for the first attempt after a redrive).
    pub fn round_attempt(&self) -> u32 {
        self.attempt.saturating_sub(self.attempt_base)
    }

    /// Whether this record, returned with a refused write, already holds `attempted`: the
    /// outcome the same claim tried to write. That happens when a write was applied but
    /// its answer was lost and the SDK retried it; the retry is refused by its own effect.
    pub(crate) fn holds_outcome(&self, attempted: &ExecutionRecord) -> bool {
        self.owner.is_some()
            && self.owner == attempted.owner
            && self.attempt == attempted.attempt
            && self.status == attempted.status
            && self.updated_at == attempted.updated_at
    }

    /// Whether its last attempt never ran because it waited for its limits too long: a
    /// FAILED run whose failure is contention's, not its job's.
    pub fn failed_waiting(&self) -> bool {
        self.history.last().is_some_and(|h| h.limit_wait)
    }

    /// How many attempts the last FAILED round took: the history entries after the
    /// previous FAILED one.
    pub(crate) fn failed_round_attempts(&self) -> u32 {
        let earlier = self.history.iter().rev().skip(1);
        let before = earlier
            .take_while(|h| h.outcome != AttemptOutcome::Failed)
            .count();
        before as u32 + 1
    }

    /// Whether an attempt of this run may still be going on at `now`: RUNNING under a live
    /// lease, or CANCELLED while RUNNING and its lease not yet out (the attempt learns of
    /// the cancellation only at its next heartbeat, so it keeps its job's overlap slot
    /// until then at the latest).
    pub(crate) fn attempt_may_run(&self, now: DateTime<Utc>) -> bool {
        let lease_left = self
            .lease_expires_at
            .is_some_and(|t| t >= now.timestamp_millis());
        matches!(self.status, Status::Running | Status::Cancelled) && lease_left
    }

    /// Whether the run is decided for good: a waiter that is no longer waits for nothing.
    pub(crate) fn decided(&self) -> bool {
        matches!(
            self.status,
            Status::Done | Status::Failed | Status::Skipped | Status::Cancelled
        )
    }
}

/// What the worker asks for when it claims a run.
#[derive(Debug, Clone)]
pub struct ClaimRequest {
    /// The execution key to claim.
    pub key: String,
    /// The envelope's job.
    pub job: String,
    /// The envelope's `scheduled_for`, RFC 3339 in UTC as keys write it.
    pub scheduled_for: String,
    /// Hash of the job and canonical payload: tells a duplicate from a key conflict.
    pub payload_hash: String,
    /// The envelope text; capped before it is stored.
    pub input: String,
    /// The SQS message id; a FAILED record is claimed again only by a different message.
    pub message_id: Option<String>,
    /// Fencing token: every later write of this attempt is conditioned on it.
    pub owner: String,
    /// The claim's time: lease and TTL count from it; a lease that ended earlier has expired.
    pub now: DateTime<Utc>,
    /// How long the claim stays exclusive without a heartbeat.
    pub lease: Duration,
    /// How long the record is kept after this claim (the DynamoDB TTL).
    pub retention: Duration,
    /// Set when the message is a dead letter moved back (it carries the letter's reason):
    /// only a redrive runs a FAILED run again, and only the round its letter was written
    /// for. Any other message for a FAILED run (a scheduler's duplicate firing, a second
    /// backfill, a chain step sent again) is its duplicate.
    pub redrive: Option<Redrive>,
}

/// What a redriven message says of the round it failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redrive {
    /// When its run FAILED, as its letter says (`schedkit.failed-at`, the record's
    /// `finished_at` of that round); None for a letter that does not say. A second letter
    /// of the same round, redriven after the first one's round FAILED again, reopens
    /// nothing: the run failed after it.
    pub failed_at: Option<String>,
}

/// What a claim found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimOutcome {
    /// The run is ours.
    Claimed {
        /// The record as it now stands.
        record: ExecutionRecord,
        /// The record as it stood before the claim (None for a new key): what giving the
        /// claim back restores, when the run may not start after all (its job's overlap
        /// slot is taken).
        before: Option<Box<ExecutionRecord>>,
    },
    /// Already decided: DONE or SKIPPED, or FAILED and this message is not a redrive of it.
    /// Acknowledge the delivery.
    Duplicate(ExecutionRecord),
    /// Someone else holds a live lease: come back after it.
    InProgress(ExecutionRecord),
    /// The same key arrived with a different payload: reject this delivery.
    Conflict(ExecutionRecord),
    /// This very delivery already ended the run FAILED: it was dead-lettered, or was about
    /// to be when its worker stopped. Dead-letter it (again) instead of running it; only a
    /// redrive, which is another message, starts a new round.
    AlreadyFailed(ExecutionRecord),
    /// An operator cancelled the run: acknowledge the delivery, never run it.
    Cancelled(ExecutionRecord),
}

impl ExecutionRecord {
    /// The first record of the run `req` asks for, in `status`, started now, unowned: what
    /// a first claim, a SKIPPED run and a chain run's start have in common.
    pub(crate) fn first(req: &ClaimRequest, status: Status) -> ExecutionRecord {
        let now = timestamp(req.now);
        ExecutionRecord {
            execution_key: req.key.clone(),
            job: req.job.clone(),
            scheduled_for: req.scheduled_for.clone(),
            status,
            attempt: 1,
            attempt_base: 0,
            owner: None,
            lease_expires_at: None,
            payload_hash: req.payload_hash.clone(),
            input: Some(cap_snapshot(&req.input)),
            created_at: now.clone(),
            updated_at: now.clone(),
            started_at: Some(now),
            finished_at: None,
            duration_ms: None,
            last_error: None,
            history: Vec::new(),
            result: None,
            message_id: req.message_id.clone(),
            cancelled: None,
            skipped: None,
            late_attempt: None,
            waiting_since: None,
            expires_at: expires_at(req.now, req.retention),
        }
    }
}

impl ExecutionRecord {
    /// Since when (epoch ms) its attempt `attempt` has waited for its job's limits, if the
    /// record remembers it.
    pub fn waiting_since(&self, attempt: u32) -> Option<i64> {
        let (of, since) = self.waiting_since.as_deref()?.split_once('@')?;
        (of.parse::<u32>().ok()? == attempt)
            .then(|| since.parse().ok())
            .flatten()
    }

    /// What a claim given back restores: the record as it was before the claim (`before`),
    /// or, for a run that had none, REGISTERED with no attempt spent.
    pub(crate) fn given_back(before: Option<&ExecutionRecord>, req: &ClaimRequest) -> Self {
        match before {
            Some(b) => b.clone(),
            None => ExecutionRecord {
                attempt: 0,
                started_at: None,
                ..ExecutionRecord::first(req, Status::Registered)
            },
        }
    }

    /// The record of the claimed run `req` SKIPPED, unrun, because `running` held its
    /// job's overlap slot.
    pub(crate) fn skipped(req: &ClaimRequest, running: &str) -> Self {
        ExecutionRecord {
            attempt: 0,
            started_at: None,
            finished_at: Some(timestamp(req.now)),
            last_error: Some(format!(
                "skipped: `{running}` of the same job was running (overlap policy)"
            )),
            ..ExecutionRecord::first(req, Status::Skipped)
        }
    }
}

/// What a refused claim means, from the item DynamoDB returned (ALL_OLD) with the refusal.
pub(crate) fn classify_refusal(current: ExecutionRecord, req: &ClaimRequest) -> ClaimOutcome {
    if current.payload_hash != req.payload_hash {
        ClaimOutcome::Conflict(current)
    } else if current.status == Status::Cancelled {
        ClaimOutcome::Cancelled(current)
    } else if matches!(current.status, Status::Done | Status::Skipped) {
        ClaimOutcome::Duplicate(current)
    } else if current.status == Status::Failed {
        if current.message_id.is_some() && current.message_id == req.message_id {
            ClaimOutcome::AlreadyFailed(current)
        } else {
            // Another message, not a redrive (a redrive's claim would have passed).
            ClaimOutcome::Duplicate(current)
        }
    } else {
        // RUNNING with a live lease; or a claimable state that changed under us between
        // our condition and now (another worker won a race): either way, not ours now.
        ClaimOutcome::InProgress(current)
    }
}

/// The record after a successful claim, computed from the item before it (ALL_OLD) exactly
/// as the claim's update expression changes it, so no read-back is needed.
pub(crate) fn claimed_record(
    before: Option<ExecutionRecord>,
    req: &ClaimRequest,
) -> ExecutionRecord {
    let now = timestamp(req.now);
    let lease_until = lease_until(req.now, req.lease);
    match before {
        None => ExecutionRecord {
            owner: Some(req.owner.clone()),
            lease_expires_at: Some(lease_until),
            ..ExecutionRecord::first(req, Status::Running)
        },
        Some(mut r) => {
            if r.status == Status::Running {
                // The previous owner's lease expired: note its attempt as abandoned.
                let entry = AttemptEntry {
                    attempt: r.attempt,
                    owner: r.owner.clone().unwrap_or_default(),
                    started_at: r.started_at.clone().unwrap_or_default(),
                    finished_at: now.clone(),
                    outcome: AttemptOutcome::LeaseExpired,
                    error: Some("lease expired without a heartbeat".into()),
                    duration_ms: None,
                    limit_wait: false,
                };
                push_capped(&mut r.history, entry);
            }
            r.status = Status::Running;
            r.attempt += 1;
            r.owner = Some(req.owner.clone());
            r.lease_expires_at = Some(lease_until);
            r.started_at = Some(now.clone());
            r.updated_at = now;
            r.finished_at = None;
            r.duration_ms = None;
            r.message_id = req.message_id.clone();
            r.expires_at = expires_at(req.now, req.retention);
            if r.input.is_none() {
                r.input = Some(cap_snapshot(&req.input));
            }
            r
        }
    }
}

/// How an attempt ends.
#[derive(Debug, Clone, PartialEq)]
pub enum Finish {
    /// The job succeeded: the record becomes DONE.
    Succeeded {
        /// The job's result, kept on the record as JSON text capped at 4096 bytes.
        result: Value,
    },
    /// A retryable failure with attempts left: the record becomes RETRYING.
    Retrying {
        /// The job's error, kept (capped) in the history and `last_error`.
        error: String,
    },
    /// Attempts exhausted or a permanent error: the record becomes FAILED and the round ends.
    Failed {
        /// The job's error, kept (capped) in the history and `last_error`.
        error: String,
    },
    /// The run waited for its limits longer than its job allows and never ran: FAILED, the
    /// round ended, as [`Finish::Failed`]; its history entry says why (`limit_wait`), so
    /// that the same message delivered again (its worker stopped before deleting it) is
    /// dead-lettered `limit-wait` again and counts as no failure of the job.
    LimitWait {
        /// Why: how long it waited, for which limit.
        error: String,
    },
}

impl Finish {
    /// The status the record is given when this finish is written.
    pub fn status(&self) -> Status {
        match self {
            Finish::Succeeded { .. } => Status::Done,
            Finish::Retrying { .. } => Status::Retrying,
            Finish::Failed { .. } | Finish::LimitWait { .. } => Status::Failed,
        }
    }
}

/// The record after the owner finishes an attempt (DONE, RETRYING or FAILED).
pub(crate) fn finished_record(
    claimed: &ExecutionRecord,
    finish: &Finish,
    now: DateTime<Utc>,
) -> ExecutionRecord {
    let mut r = claimed.clone();
    let started = r
        .started_at
        .as_deref()
        .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
        .map(|t| t.with_timezone(&Utc))
        .unwrap_or(now);
    let duration_ms = (now - started).num_milliseconds().max(0) as u64;
    let (outcome, error) = match finish {
        Finish::Succeeded { result } => {
            r.result = Some(cap_snapshot(&result.to_string()));
            (AttemptOutcome::Succeeded, None)
        }
        Finish::Retrying { error } => (AttemptOutcome::Retrying, Some(cap_snapshot(error))),
        Finish::Failed { error } | Finish::LimitWait { error } => {
            r.attempt_base = r.attempt;
            (AttemptOutcome::Failed, Some(cap_snapshot(error)))
        }
    };
    let entry = AttemptEntry {
        attempt: r.attempt,
        owner: r.owner.clone().unwrap_or_default(),
        started_at: r.started_at.clone().unwrap_or_default(),
        finished_at: timestamp(now),
        outcome,
        error: error.clone(),
        duration_ms: Some(duration_ms),
        limit_wait: matches!(finish, Finish::LimitWait { .. }),
    };
    push_capped(&mut r.history, entry);
    if error.is_some() {
        r.last_error = error;
    }
    r.status = finish.status();
    r.lease_expires_at = None;
    r.updated_at = timestamp(now);
    r.duration_ms = Some(duration_ms);
    if finish.status() != Status::Retrying {
        r.finished_at = Some(timestamp(now));
    }
    r
}

fn push_capped(history: &mut Vec<AttemptEntry>, entry: AttemptEntry) {
    history.push(entry);
    if history.len() > HISTORY_CAP {
        let excess = history.len() - HISTORY_CAP;
        history.drain(..excess);
    }
}

/// Keeps at most [`SNAPSHOT_CAP`] bytes, cut on a character boundary, and says so.
pub(crate) fn cap_snapshot(text: &str) -> String {
    let kept = prefix(text, SNAPSHOT_CAP);
    if kept.len() == text.len() {
        return text.to_string();
    }
    format!("{kept}…[truncated, {} bytes in all]", text.len())
}

/// The longest prefix of `text` of at most `max` bytes that ends on a character boundary.
pub(crate) fn prefix(text: &str, max: usize) -> &str {
    let mut end = max.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Timestamps on records: RFC 3339 with milliseconds, UTC, so they sort as text.
pub(crate) fn timestamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

pub(crate) fn lease_until(now: DateTime<Utc>, lease: Duration) -> i64 {
    now.timestamp_millis() + lease.as_millis() as i64
}

pub(crate) fn expires_at(now: DateTime<Utc>, retention: Duration) -> i64 {
    now.timestamp() + retention.as_secs() as i64
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request(owner: &str, at: &str) -> ClaimRequest {
        ClaimRequest {
            key: "k".into(),
            job: "j".into(),
            scheduled_for: "2026-01-01T00:00:00Z".into(),
            payload_hash: "h".into(),
            input: "{}".into(),
            message_id: Some("m".into()),
            owner: owner.into(),
            now: at.parse().unwrap(),
            lease: Duration::from_secs(60),
            retention: Duration::from_secs(3600),
            redrive: None,
        }
    }

    #[test]
    fn a_new_claim_starts_round_one() {
        let r = claimed_record(None, &request("a", "2026-01-01T00:00:00Z"));
        assert_eq!(
            (r.status, r.attempt, r.round_attempt()),
            (Status::Running, 1, 1)
        );
        assert_eq!(r.lease_expires_at, Some(1767225660000));
        assert!(r.attempt_may_run("2026-01-01T00:00:59Z".parse().unwrap()));
        assert!(!r.attempt_may_run("2026-01-01T00:01:01Z".parse().unwrap()));
        let cancelled = ExecutionRecord {
            status: Status::Cancelled,
            ..r.clone()
        };
        assert!(
            cancelled.attempt_may_run("2026-01-01T00:00:59Z".parse().unwrap()),
            "a cancelled attempt may run until its lease ends"
        );
        let done = ExecutionRecord {
            status: Status::Done,
            ..r.clone()
        };
        assert!(!done.attempt_may_run("2026-01-01T00:00:59Z".parse().unwrap()));
    }

    #[test]
    fn a_reclaim_records_the_abandoned_attempt() {
        let first = claimed_record(None, &request("a", "2026-01-01T00:00:00Z"));
        let second = claimed_record(Some(first), &request("b", "2026-01-01T00:02:00Z"));
        assert_eq!(second.attempt, 2);
        assert_eq!(second.owner.as_deref(), Some("b"));
        assert_eq!(second.history.len(), 1);
        assert_eq!(second.history[0].outcome, AttemptOutcome::LeaseExpired);
        assert_eq!(second.history[0].owner, "a");
    }

    #[test]
    fn failing_starts_a_fresh_round_for_the_redrive() {
        let mut r = claimed_record(None, &request("a", "2026-01-01T00:00:00Z"));
        for i in 0..2 {
            r = finished_record(
                &r,
                &Finish::Retrying {
                    error: format!("e{i}"),
                },
                "2026-01-01T00:00:01Z".parse().unwrap(),
            );
            r = claimed_record(Some(r), &request("a", "2026-01-01T00:00:02Z"));
        }
        assert_eq!(r.round_attempt(), 3);
        let failed = finished_record(
            &r,
            &Finish::Failed {
                error: "boom".into(),
            },
            "2026-01-01T00:00:03Z".parse().unwrap(),
        );
        assert_eq!(
            (failed.status, failed.last_error.as_deref()),
            (Status::Failed, Some("boom"))
        );
        let outcomes: Vec<_> = failed.history.iter().map(|h| h.outcome).collect();
        assert_eq!(
            outcomes,
            [
                AttemptOutcome::Retrying,
                AttemptOutcome::Retrying,
                AttemptOutcome::Failed
            ]
        );
        assert_eq!(failed.failed_round_attempts(), 3);
        assert!(matches!(
            classify_refusal(failed.clone(), &request("b", "2026-01-02T00:00:00Z")),
            ClaimOutcome::AlreadyFailed(_)
        ));
        // Another message that is not a redrive (its claim was refused): a duplicate.
        let mut fired_again = request("b", "2026-01-02T00:00:00Z");
        fired_again.message_id = Some("another".into());
        assert!(matches!(
            classify_refusal(failed.clone(), &fired_again),
            ClaimOutcome::Duplicate(_)
        ));
        let redriven = claimed_record(Some(failed), &request("b", "2026-01-02T00:00:00Z"));
        assert_eq!((redriven.attempt, redriven.round_attempt()), (4, 1));
        let failed_again = finished_record(
            &redriven,
            &Finish::Failed {
                error: "still".into(),
            },
            "2026-01-02T00:00:01Z".parse().unwrap(),
        );
        assert_eq!(failed_again.failed_round_attempts(), 1);
    }

    #[test]
    fn a_refusal_by_our_own_applied_outcome_is_told_from_a_lost_lease() {
        let ours = claimed_record(None, &request("a:1", "2026-01-01T00:00:00Z"));
        let done = finished_record(
            &ours,
            &Finish::Succeeded { result: json!(1) },
            "2026-01-01T00:00:05Z".parse().unwrap(),
        );
        // The write was applied and its answer lost: the retry meets the very same outcome.
        assert!(done.clone().holds_outcome(&done));
        // Someone else reclaimed the run and finished it: not ours.
        let theirs = claimed_record(Some(ours.clone()), &request("b:2", "2026-01-01T00:02:00Z"));
        let their_done = finished_record(
            &theirs,
            &Finish::Succeeded { result: json!(1) },
            "2026-01-01T00:00:05Z".parse().unwrap(),
        );
        assert!(!their_done.holds_outcome(&done));
        // Still ours but not yet finished (the write was never applied): not an outcome.
        assert!(!ours.holds_outcome(&done));
    }

    #[test]
    fn refusals_are_told_apart_by_hash_then_status() {
        let req = request("b", "2026-01-01T00:00:10Z");
        let running = claimed_record(None, &request("a", "2026-01-01T00:00:00Z"));
        assert!(matches!(
            classify_refusal(running.clone(), &req),
            ClaimOutcome::InProgress(_)
        ));
        let done = finished_record(
            &running,
            &Finish::Succeeded {
                result: json!({"n": 1}),
            },
            req.now,
        );
        assert!(matches!(
            classify_refusal(done.clone(), &req),
            ClaimOutcome::Duplicate(_)
        ));
        let mut other = done;
        other.payload_hash = "other".into();
        assert!(matches!(
            classify_refusal(other, &req),
            ClaimOutcome::Conflict(_)
        ));
    }

    #[test]
    fn history_and_snapshots_are_capped() {
        let mut r = claimed_record(None, &request("a", "2026-01-01T00:00:00Z"));
        for _ in 0..25 {
            r = finished_record(
                &r,
                &Finish::Retrying {
                    error: "x".repeat(10_000),
                },
                "2026-01-01T00:00:01Z".parse().unwrap(),
            );
            r = claimed_record(Some(r), &request("a", "2026-01-01T00:00:02Z"));
        }
        assert_eq!(r.history.len(), HISTORY_CAP);
        assert_eq!(r.history.last().unwrap().attempt, 25);
        assert!(r.last_error.as_ref().unwrap().len() < SNAPSHOT_CAP + 64);
        assert!(cap_snapshot(&"é".repeat(3000)).ends_with("[truncated, 6000 bytes in all]"));
    }
}
