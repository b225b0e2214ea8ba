//! `flaky-sync`: fails with a retryable error on its first `fail_times` attempts (payload,
//! default 2), then succeeds: the shape of a dependency that is briefly unavailable.

use schedkit::{Ctx, JobError, Payload};
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Deserialize)]
pub struct FlakySync {
    #[serde(default = "two")]
    fail_times: u64,
}

fn two() -> u64 {
    2
}

pub async fn run(ctx: Ctx, Payload(sync): Payload<FlakySync>) -> Result<Value, JobError> {
    if u64::from(ctx.attempt) <= sync.fail_times {
        return Err(JobError::retryable(format!(
            "upstream answered 503 Service Unavailable (attempt {})",
            ctx.attempt
        )));
    }
    Ok(json!({"synced_on_attempt": ctx.attempt}))
}
