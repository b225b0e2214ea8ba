//! Why a trigger-layer call failed.

use crate::aws::AwsError;

/// Why a sync or a one-off run could not be done.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TriggerError {
    /// EventBridge Scheduler or SQS refused, or could not be reached.
    #[error(transparent)]
    Aws(#[from] AwsError),
    /// A job targets a chain whose state machine the caller did not name.
    #[error("job `{job}` targets chain `{chain}`, whose state machine ARN is unknown")]
    UnknownChain {
        /// The job whose target is `chain:<chain>`.
        job: String,
        /// The chain's name, which the caller's map of state machine ARNs lacks.
        chain: String,
    },
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
}

impl From<aws_sdk_scheduler::error::BuildError> for TriggerError {
    fn from(e: aws_sdk_scheduler::error::BuildError) -> Self {
        TriggerError::Request(e.to_string())
    }
}
