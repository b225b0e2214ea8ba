//! `record-invoice`: writes an invoice row to the effects table, keyed by the execution key.
//!
//! The write counts how often it was applied (`applied`), so a duplicate run would show as
//! `applied > 1`. It is handed to the framework as an effect rather than made: committed in
//! one transaction with the run's DONE record, it is applied once even when a worker dies
//! between the job's end and the record's (the claim alone cannot promise that).
//!
//! `render_seconds` (payload, default 0) is how long rendering the invoice takes before
//! the write: a run long enough to lose its worker half-way.

use aws_sdk_dynamodb::types::{AttributeValue, Update};
use schedkit::job::BoxFuture;
use schedkit::{Job, JobContext, JobError, JobResult};
use serde_json::json;

use super::EffectsTable;

/// Partition key of the effects table.
pub const EFFECT_KEY: &str = "effect_key";

pub struct RecordInvoice {
    effects: EffectsTable,
}

impl RecordInvoice {
    pub fn new(effects: EffectsTable) -> Self {
        RecordInvoice { effects }
    }
}

impl Job for RecordInvoice {
    fn run(&self, ctx: JobContext) -> BoxFuture<JobResult> {
        let effects = self.effects.clone();
        Box::pin(async move {
            let (_, table) = effects.get()?;
            let amount = ctx
                .payload
                .get("amount_cents")
                .and_then(|v| v.as_i64())
                .ok_or_else(|| {
                    JobError::permanent("payload field `amount_cents` must be an integer")
                })?;
            let tenant = ctx
                .payload
                .get("tenant")
                .map(|t| t.to_string())
                .unwrap_or_default();
            let render = ctx
                .payload
                .get("render_seconds")
                .and_then(|v| v.as_f64())
                .unwrap_or(0.0);
            // In steps of at most 100 ms, so that a lost lease stops it soon.
            let until = tokio::time::Instant::now() + std::time::Duration::from_secs_f64(render);
            loop {
                let left = until.saturating_duration_since(tokio::time::Instant::now());
                if left.is_zero() {
                    break;
                }
                if ctx.lease_lost() {
                    return Err(JobError::retryable("lease lost while rendering; stopping"));
                }
                tokio::time::sleep(left.min(std::time::Duration::from_millis(100))).await;
            }
            let update = Update::builder()
                .table_name(&table)
                .key(EFFECT_KEY, AttributeValue::S(ctx.key.clone()))
                .update_expression(
                    "SET tenant = :t, amount_cents = :a, written_at = :w ADD applied :one",
                )
                .expression_attribute_values(":t", AttributeValue::S(tenant))
                .expression_attribute_values(":a", AttributeValue::N(amount.to_string()))
                .expression_attribute_values(
                    ":w",
                    AttributeValue::S(chrono::Utc::now().to_rfc3339()),
                )
                .expression_attribute_values(":one", AttributeValue::N("1".into()))
                .build()
                .map_err(|e| JobError::permanent(format!("the invoice write: {e}")))?;
            ctx.effects().update(update);
            Ok(json!({"amount_cents": amount}))
        })
    }
}
