//! What happened to each message of a batch, and the partial batch response built from it.

use std::time::Duration;

use aws_lambda_events::event::sqs::SqsBatchResponse;

use crate::dead_letter::DeadLetterReason;

/// The fate of one message.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The job ran and its DONE record is written.
    Succeeded,
    /// The run was already DONE.
    Duplicate,
    /// Another worker holds a live lease; the message comes back after it.
    InProgress {
        /// When it looks again: short probes, never past just after the lease.
        retry_in: Duration,
        /// Sent again with `retry_in` as its delay, and this copy acknowledged (so waiting
        /// never counts toward the queue's `maxReceiveCount`); false when the send failed
        /// and this copy was hidden for `retry_in` instead.
        resent: bool,
    },
    /// A retryable failure with attempts left; the message is hidden for `delay`.
    Retrying {
        /// The attempt that failed, counted within the current round from 1.
        attempt: u32,
        /// The backoff applied (jitter included), rounded up to whole seconds as SQS counts them.
        delay: Duration,
        /// The job's error text, also kept in the record's history.
        error: String,
    },
    /// Sent to the DLQ with its reason (FAILED record for exhausted and permanent errors).
    DeadLettered {
        /// The reason also written on the dead letter.
        reason: DeadLetterReason,
        /// The error also written on the dead letter.
        error: String,
    },
    /// Our lease was taken over while the job ran; our result was refused.
    LeaseLost,
    /// The store or the DLQ could not be reached: nothing was acknowledged.
    Unavailable {
        /// What failed; the message will be delivered again.
        error: String,
    },
    /// Not run: another run of the job was RUNNING and its overlap policy skips; the
    /// record says SKIPPED.
    Skipped,
    /// An operator cancelled the run: not run (or its attempt stopped, its outcome and
    /// effects refused); the message is acknowledged.
    Cancelled,
    /// Not run yet: waiting (the one `buffer_one` allows) for the job's running run; the
    /// message comes back after `retry_in`. Not an attempt.
    Waiting {
        /// When it looks again.
        retry_in: Duration,
        /// Sent again with `retry_in` as its delay and this copy acknowledged, as for
        /// [`Outcome::InProgress`].
        resent: bool,
    },
    /// Not run yet: a limit of its job is full, or its rate allows no start yet (see
    /// [`crate::flow`]); its claim given back and the message back after `retry_in`. Not
    /// an attempt.
    Throttled {
        /// The limit that held it back.
        limit: String,
        /// When it looks again.
        retry_in: Duration,
        /// Sent again with `retry_in` as its delay and this copy acknowledged, as for
        /// [`Outcome::InProgress`].
        resent: bool,
    },
    /// Held back by a full gate of its flow-control limits, and parked in the gate's line
    /// (see [`crate::store::Waiter`]): its claim given back, its message left hidden on the
    /// queue until the run that frees a permit hands it on and wakes it (or, if none does,
    /// until it comes back by itself). Not an attempt; not acknowledged.
    Parked {
        /// The limit it waits for.
        limit: String,
    },
    /// Not started: too close to the invocation's deadline to finish. Nothing was claimed
    /// (no attempt spent); the message is back at once for the next invocation.
    Deferred {
        /// Sent again (and this copy deleted), as for [`Outcome::InProgress`]; false when
        /// the send failed and this copy was made visible again instead.
        resent: bool,
    },
}

impl Outcome {
    /// Whether the source message may be deleted: its outcome is durably recorded (or it
    /// is safely in the DLQ). Everything else goes back to the queue.
    pub fn acknowledged(&self) -> bool {
        matches!(
            self,
            Outcome::Succeeded
                | Outcome::Duplicate
                | Outcome::Skipped
                | Outcome::Cancelled
                | Outcome::DeadLettered { .. }
                | Outcome::InProgress { resent: true, .. }
                | Outcome::Waiting { resent: true, .. }
                | Outcome::Throttled { resent: true, .. }
                | Outcome::Deferred { resent: true }
        )
    }

    /// Whether this copy was deleted already: a copy sent again to come back later.
    pub fn deleted(&self) -> bool {
        matches!(
            self,
            Outcome::InProgress { resent: true, .. }
                | Outcome::Waiting { resent: true, .. }
                | Outcome::Throttled { resent: true, .. }
                | Outcome::Deferred { resent: true }
        )
    }

    /// A short stable name, for logs, reports and counters.
    pub fn label(&self) -> &'static str {
        match self {
            Outcome::Succeeded => "succeeded",
            Outcome::Duplicate => "duplicate",
            Outcome::InProgress { .. } => "in-progress",
            Outcome::Retrying { .. } => "retrying",
            Outcome::DeadLettered { .. } => "dead-lettered",
            Outcome::LeaseLost => "lease-lost",
            Outcome::Unavailable { .. } => "unavailable",
            Outcome::Deferred { .. } => "deferred",
            Outcome::Skipped => "skipped",
            Outcome::Cancelled => "cancelled",
            Outcome::Waiting { .. } => "waiting",
            Outcome::Throttled { .. } => "throttled",
            Outcome::Parked { .. } => "parked",
        }
    }
}

/// One message's report.
#[derive(Debug, Clone, PartialEq)]
pub struct MessageReport {
    /// The SQS message id; the partial batch response names unacknowledged messages by it.
    pub message_id: String,
    /// What the poller deletes an acknowledged message with; None when SQS gave none.
    pub receipt_handle: Option<String>,
    /// Known once the body parsed as an envelope.
    pub job: Option<String>,
    /// Known once the execution key was derived.
    pub key: Option<String>,
    /// What happened, and so whether the message is deleted.
    pub outcome: Outcome,
}

/// The partial batch response: every message not acknowledged is reported as failed, so
/// Lambda returns it to the queue and deletes the others.
pub fn batch_response(reports: &[MessageReport]) -> SqsBatchResponse {
    let mut response = SqsBatchResponse::default();
    for r in reports.iter().filter(|r| !r.outcome.acknowledged()) {
        response.add_failure(r.message_id.clone());
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(id: &str, outcome: Outcome) -> MessageReport {
        MessageReport {
            message_id: id.into(),
            receipt_handle: None,
            job: None,
            key: None,
            outcome,
        }
    }

    #[test]
    fn only_unacknowledged_messages_are_reported_failed() {
        let reports = [
            report("ok", Outcome::Succeeded),
            report("dup", Outcome::Duplicate),
            report(
                "dlq",
                Outcome::DeadLettered {
                    reason: DeadLetterReason::Poison,
                    error: "x".into(),
                },
            ),
            report(
                "busy",
                Outcome::InProgress {
                    retry_in: Duration::from_secs(3),
                    resent: false,
                },
            ),
            report(
                "sent-again",
                Outcome::Waiting {
                    retry_in: Duration::from_secs(3),
                    resent: true,
                },
            ),
            report(
                "again",
                Outcome::Retrying {
                    attempt: 1,
                    delay: Duration::from_secs(5),
                    error: "e".into(),
                },
            ),
            report("lost", Outcome::LeaseLost),
            report(
                "down",
                Outcome::Unavailable {
                    error: "no route".into(),
                },
            ),
        ];
        let json = serde_json::to_value(batch_response(&reports)).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"batchItemFailures": [
                {"itemIdentifier": "busy"}, {"itemIdentifier": "again"},
                {"itemIdentifier": "lost"}, {"itemIdentifier": "down"}
            ]})
        );
    }
}
