//! `partner-export`: exports orders to a partner whose API rejects the account until someone
//! fixes it. Every attempt fails (retryably) while the account is blocked, so the run ends
//! FAILED in the DLQ; once the account is active again, a redrive succeeds.
//!
//! The account's state is an item of the effects table (`config:partner-account`, field
//! `status`), which stands in for the partner's side: the demo "fixes" the account by
//! setting it to `active`.

use aws_sdk_dynamodb::types::AttributeValue;
use schedkit::{Ctx, JobError, State};
use serde_json::{Value, json};

use super::effects_table::{EFFECT_KEY, EffectsTable};

/// The effects-table item that says whether the partner account works.
pub const ACCOUNT_ITEM: &str = "config:partner-account";

pub async fn run(ctx: Ctx, State(effects): State<EffectsTable>) -> Result<Value, JobError> {
    let (ddb, table) = effects.get()?;
    // `?` on the SDK's error: retryable, the service's message kept as its source.
    let item = ddb
        .get_item()
        .table_name(&table)
        .key(EFFECT_KEY, AttributeValue::S(ACCOUNT_ITEM.into()))
        .consistent_read(true)
        .send()
        .await?
        .item;
    let active = item
        .as_ref()
        .and_then(|i| i.get("status"))
        .and_then(|v| v.as_s().ok())
        .is_some_and(|s| s == "active");
    if !active {
        return Err(JobError::retryable(format!(
            "export rejected by the partner API: 422 account blocked (attempt {})",
            ctx.attempt
        )));
    }
    Ok(json!({"exported": true}))
}
