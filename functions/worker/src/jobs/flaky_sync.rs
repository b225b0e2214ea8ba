//! `flaky-sync`: fails with a retryable error on its first `fail_times` attempts (payload,
//! default 2), then succeeds: the shape of a dependency that is briefly unavailable.

use schedkit::{JobContext, JobError, JobResult};
use serde_json::json;

pub async fn run(ctx: JobContext) -> JobResult {
    let fail_times = ctx
        .payload
        .get("fail_times")
        .and_then(|v| v.as_u64())
        .unwrap_or(2);
    if u64::from(ctx.attempt) <= fail_times {
        return Err(JobError::retryable(format!(
            "upstream answered 503 Service Unavailable (attempt {})",
            ctx.attempt
        )));
    }
    Ok(json!({"synced_on_attempt": ctx.attempt}))
}
