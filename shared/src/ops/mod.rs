//! What an operator does to a deployed stage, apart from printing it: find the stage's
//! resources ([`stage`]), read execution records ([`executions`]) or cancel runs
//! ([`cancel`]), read dead letters, move
//! or drop them ([`dlq`]), show and rerun chain runs ([`chains`]), sum it up ([`status`]),
//! and keep the audit trail ([`audit`]).
//! The console is one front end to these; a team's own tool can be another.

pub mod alarms;
pub mod audit;
pub mod cancel;
mod cancel_sweep;
pub mod chain_control;
pub mod chains;
pub mod dlq;
pub mod executions;
pub mod limits;
mod newest_first;
pub mod paging;
pub mod stage;
pub mod status;

use crate::aws::AwsError;

/// Why an operation could not be done.
#[derive(Debug, thiserror::Error)]
pub enum OpsError {
    /// AWS refused, or could not be reached.
    #[error(transparent)]
    Aws(#[from] AwsError),
    /// The stage's resource does not exist: the stage is not deployed, or a name is wrong.
    /// (A front end adds what to give instead, in its own terms: flags, fields.)
    #[error("{kind} `{name}` does not exist")]
    NotFound {
        /// What is missing: `queue` or `table`.
        kind: &'static str,
        /// The name looked for (`schedkit-dev-jobs`).
        name: String,
    },
    /// A page token that no previous page returned.
    #[error("the page token is not one a previous page returned")]
    BadPageToken,
    /// A record the store holds but this version cannot read.
    #[error("an execution record in {table} does not decode: {error}")]
    UndecodableRecord {
        /// The executions table that was read.
        table: String,
        /// The decoder's complaint, after the record's key when it is known.
        error: String,
    },
    /// An SQS message move task ended without completing.
    #[error("the message move task ended {status}: {reason}")]
    MoveTask {
        /// The task's last status as SQS reports it (`FAILED`, `CANCELLED`).
        status: String,
        /// SQS's failure reason; empty when it gave none.
        reason: String,
    },
    /// The audit trail cannot be written, so the action must not happen.
    #[error(
        "cannot write the audit trail {path} (set SCHEDKIT_AUDIT_LOG to a writable file): {error}"
    )]
    Audit {
        /// The audit file (`SCHEDKIT_AUDIT_LOG`, default `~/.schedkit/audit.jsonl`).
        path: String,
        /// Why it could not be opened for appending.
        error: String,
    },
    /// The stage's audit trail cannot be written, so the action must not happen.
    #[error(
        "cannot write the audit trail to the stage's table {table} (nothing was done): {error}"
    )]
    AuditStage {
        /// The executions table.
        table: String,
        /// Why the entry was not written.
        error: String,
    },
    /// The SDK refused to build the request (a required field is empty).
    #[error("{0}")]
    Request(String),
    /// The operation does not apply to the thing as it stands (a chain run that is DONE
    /// cannot be rerun); the text says why and what would.
    #[error("{0}")]
    Refused(String),
    /// The operation failed after it had changed something: what it had done, and why it
    /// stopped (the audit trail's end line keeps both).
    #[error("{error} (done before it stopped: {done})")]
    PartlyDone {
        /// What had been changed, in words and counts.
        done: String,
        /// Why it stopped.
        error: Box<OpsError>,
    },
}

impl OpsError {
    /// What the failed operation had done before it stopped, if anything.
    pub fn done(&self) -> Option<&str> {
        match self {
            OpsError::PartlyDone { done, .. } => Some(done),
            _ => None,
        }
    }

    /// This error, after `done` had been changed.
    pub fn after(self, done: impl Into<String>) -> OpsError {
        OpsError::PartlyDone {
            done: done.into(),
            error: Box::new(self),
        }
    }
}

impl From<aws_sdk_sqs::error::BuildError> for OpsError {
    fn from(e: aws_sdk_sqs::error::BuildError) -> Self {
        OpsError::Request(e.to_string())
    }
}
