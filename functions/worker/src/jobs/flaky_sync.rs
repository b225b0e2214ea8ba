//! `flaky-sync`: fails with a retryable error on its first `fail_times` attempts (payload,
//! default 2), then succeeds: the shape of a dependency that is briefly unavailable. Each
//! attempt first works for `work_seconds` (default 0).

use schedkit::{Ctx, JobError, Payload};
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Deserialize)]
pub struct FlakySync {
    #[serde(default = "two")]
    fail_times: u64,
    #[serde(default)]
    work_seconds: f64,
}

fn two() -> u64 {
    2
}

pub async fn run(ctx: Ctx, Payload(sync): Payload<FlakySync>) -> Result<Value, JobError> {
    if sync.work_seconds > 0.0 {
        tokio::time::sleep(std::time::Duration::from_secs_f64(sync.work_seconds)).await;
    }
    if u64::from(ctx.attempt) <= sync.fail_times {
        return Err(JobError::retryable(format!(
            "upstream answered 503 Service Unavailable (attempt {})",
            ctx.attempt
        )));
    }
    Ok(json!({"synced_on_attempt": ctx.attempt}))
}
