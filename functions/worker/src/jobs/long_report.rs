//! `long-report`: works for `seconds` (payload, default 5), longer than its 2 s lease, so
//! it only completes because heartbeats renew the lease and the message's visibility.

use std::time::Duration;

use schedkit::{JobContext, JobError, JobResult};
use serde_json::json;

pub async fn run(ctx: JobContext) -> JobResult {
    let seconds = ctx
        .payload
        .get("seconds")
        .and_then(|v| v.as_f64())
        .unwrap_or(5.0);
    let step = Duration::from_millis(100);
    let steps = (seconds * 10.0).ceil() as u64;
    for _ in 0..steps {
        if ctx.lease_lost() {
            return Err(JobError::retryable("lease lost; stopping early"));
        }
        tokio::time::sleep(step).await;
    }
    Ok(json!({"rows": steps}))
}
