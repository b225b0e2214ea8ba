//! Why a trigger-layer call failed.

use crate::aws::AwsError;

/// Why a sync or a one-off run could not be done.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TriggerError {
    /// EventBridge Scheduler or SQS refused, or could not be reached.
    #[error(transparent)]
    Aws(#[from] AwsError),
    /// The job has no schedule in the group (not synced, or a job without a schedule).
    #[error(
        "job `{job}` has no schedule in group {group} (a job without a schedule, or one not synced yet)"
    )]
    NoSchedule {
        /// The job.
        job: String,
        /// The schedule group looked in.
        group: String,
    },
    /// The SDK refused to build the request (a required field is empty).
    #[error("{0}")]
    Request(String),
    /// The catalog asks for what the stage cannot do (a host job, and no host queue).
    #[error("{0}")]
    Unroutable(String),
}

impl From<aws_sdk_scheduler::error::BuildError> for TriggerError {
    fn from(e: aws_sdk_scheduler::error::BuildError) -> Self {
        TriggerError::Request(e.to_string())
    }
}

impl From<crate::store::StoreError> for TriggerError {
    fn from(e: crate::store::StoreError) -> Self {
        TriggerError::Request(e.to_string())
    }
}
