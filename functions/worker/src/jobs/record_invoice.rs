//! `record-invoice`: writes an invoice row to the effects table, keyed by the execution key.
//!
//! The write counts how often it was applied (`applied`), so a duplicate run would show as
//! `applied > 1`. It is handed to the framework as an effect rather than made: committed in
//! one transaction with the run's DONE record, it is applied once even when a worker dies
//! between the job's end and the record's (the claim alone cannot promise that).

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
