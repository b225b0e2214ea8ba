//! `record-invoice`: writes an invoice row to the effects table, keyed by the execution key.
//!
//! The write counts how often it was applied (`applied`), so a duplicate run would show as
//! `applied > 1`. It is handed to the framework as an effect rather than made: committed in
//! one transaction with the run's DONE record, it is applied once even when a worker dies
//! between the job's end and the record's (the claim alone cannot promise that).
//!
//! `render_seconds` (payload, default 0) is how long rendering the invoice takes before
//! the write: a run long enough to lose its worker half-way.

use std::time::Duration;

use aws_sdk_dynamodb::types::{AttributeValue, Update};
use schedkit::{Ctx, JobError, Payload, State, permanent};
use serde::Deserialize;
use serde_json::{Value, json};

use super::effects_table::{EFFECT_KEY, EffectsTable};

/// The payload: the amount is required; a payload without it fails for good, naming it.
#[derive(Deserialize)]
pub struct Invoice {
    amount_cents: i64,
    /// Kept as the JSON it was given (`"acme"` with its quotes, or a number).
    #[serde(default)]
    tenant: Option<Value>,
    #[serde(default)]
    render_seconds: f64,
}

pub async fn run(
    ctx: Ctx,
    State(effects): State<EffectsTable>,
    Payload(invoice): Payload<Invoice>,
) -> Result<Value, JobError> {
    let (_, table) = effects.get()?;
    // In steps of at most 100 ms, so that a lost lease stops it soon.
    let until = tokio::time::Instant::now() + Duration::from_secs_f64(invoice.render_seconds);
    loop {
        let left = until.saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() {
            break;
        }
        if ctx.lease_lost() {
            return Err(JobError::retryable("lease lost while rendering; stopping"));
        }
        tokio::time::sleep(left.min(Duration::from_millis(100))).await;
    }
    let tenant = invoice.tenant.map(|t| t.to_string()).unwrap_or_default();
    let update = Update::builder()
        .table_name(&table)
        .key(EFFECT_KEY, AttributeValue::S(ctx.key.clone()))
        .update_expression("SET tenant = :t, amount_cents = :a, written_at = :w ADD applied :one")
        .expression_attribute_values(":t", AttributeValue::S(tenant))
        .expression_attribute_values(":a", AttributeValue::N(invoice.amount_cents.to_string()))
        .expression_attribute_values(":w", AttributeValue::S(chrono::Utc::now().to_rfc3339()))
        .expression_attribute_values(":one", AttributeValue::N("1".into()))
        .build()
        .map_err(permanent)?;
    ctx.effects().update(update);
    Ok(json!({"amount_cents": invoice.amount_cents}))
}
