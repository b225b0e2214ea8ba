//! `long-report`: works for `seconds` (payload, default 5), longer than its lease (4 s in `infra/catalog.toml`), so
//! it only completes because heartbeats renew the lease and the message's visibility.

use std::time::Duration;

use schedkit::{Ctx, JobError, Payload};
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Deserialize)]
pub struct LongReport {
    #[serde(default = "five")]
    seconds: f64,
}

fn five() -> f64 {
    5.0
}

pub async fn run(ctx: Ctx, Payload(report): Payload<LongReport>) -> Result<Value, JobError> {
    let step = Duration::from_millis(100);
    let steps = (report.seconds * 10.0).ceil() as u64;
    for _ in 0..steps {
        if ctx.lease_lost() {
            return Err(JobError::retryable("lease lost; stopping early"));
        }
        tokio::time::sleep(step).await;
    }
    Ok(json!({"rows": steps}))
}
