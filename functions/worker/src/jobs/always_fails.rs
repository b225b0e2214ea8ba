//! `always-fails`: every attempt fails retryably, so the run ends FAILED in the DLQ once
//! its attempts are spent, which is what an operator then inspects and redrives.

use schedkit::{JobContext, JobError, JobResult};

pub async fn run(ctx: JobContext) -> JobResult {
    Err(JobError::retryable(format!(
        "export rejected by the partner API: 422 invalid account (attempt {})",
        ctx.attempt
    )))
}
