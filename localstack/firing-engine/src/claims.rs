//! Firing claims: how several firing engines share the work without firing one
//! (schedule, scheduled time) twice. Each firing is claimed by one conditional write; a
//! claim whose engine died (its lease expired before it marked the firing finished) can be
//! taken over. The same table keeps the engines' watermark: up to when every firing is
//! finished, so an engine that starts again catches up from there.

use std::time::Duration;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValuesOnConditionCheckFailure};
use chrono::{DateTime, Utc};
use schedkit::aws::AwsError;

/// The claims table's partition key.
pub const KEY_ATTRIBUTE: &str = "firing_key";

/// What a claim found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// This engine holds the firing now.
    Won,
    /// Another engine delivered or dead-lettered it: nothing left to do.
    Finished,
    /// Another engine holds it under a live lease: look again after it expires.
    Held,
}

/// A DynamoDB table of firing claims.
#[derive(Debug, Clone)]
pub struct Claims {
    client: Client,
    table: String,
}

impl Claims {
    /// Claims in `table` (partition key [`KEY_ATTRIBUTE`], a string).
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Claims {
            client,
            table: table.into(),
        }
    }

    /// The key of one firing.
    pub fn key(schedule_arn: &str, scheduled_time: DateTime<Utc>) -> String {
        format!("{schedule_arn}#{}", scheduled_time.to_rfc3339())
    }

    /// Claims a firing for `owner` until `now + lease`. The refused write returns the
    /// claim it met, so the answer needs no second read.
    pub async fn claim(
        &self,
        key: &str,
        owner: &str,
        lease: Duration,
        now: DateTime<Utc>,
    ) -> anyhow::Result<Claim> {
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .item(KEY_ATTRIBUTE, AttributeValue::S(key.into()))
            .item("status", AttributeValue::S("claimed".into()))
            .item("owner", AttributeValue::S(owner.into()))
            .item("lease_until", lease_until(now, lease))
            // Kept for a week: long after any engine could still consider the firing.
            .item("expires_at", number(now.timestamp() + 7 * 86_400))
            .condition_expression(
                "attribute_not_exists(#k) OR (#s = :claimed AND (#l < :now OR #o = :owner))",
            )
            .expression_attribute_names("#k", KEY_ATTRIBUTE)
            .expression_attribute_names("#s", "status")
            .expression_attribute_names("#l", "lease_until")
            .expression_attribute_names("#o", "owner")
            .expression_attribute_values(":claimed", AttributeValue::S("claimed".into()))
            .expression_attribute_values(":now", number(now.timestamp_millis()))
            .expression_attribute_values(":owner", AttributeValue::S(owner.into()))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match result {
            Ok(_) => Ok(Claim::Won),
            Err(e) => {
                if let Some(PutItemError::ConditionalCheckFailedException(refused)) =
                    e.as_service_error()
                {
                    let status = refused
                        .item()
                        .and_then(|i| i.get("status"))
                        .and_then(|v| v.as_s().ok())
                        .map(String::as_str);
                    return Ok(if status == Some("claimed") {
                        Claim::Held
                    } else {
                        Claim::Finished
                    });
                }
                Err(AwsError::of(format!("claiming firing {key}"), &e).into())
            }
        }
    }

    /// Extends `owner`'s claim before another attempt; false when it was taken over.
    pub async fn renew(
        &self,
        key: &str,
        owner: &str,
        lease: Duration,
        now: DateTime<Utc>,
    ) -> anyhow::Result<bool> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(KEY_ATTRIBUTE, AttributeValue::S(key.into()))
            .update_expression("SET #l = :until")
            .condition_expression("#o = :owner AND #s = :claimed")
            .expression_attribute_names("#l", "lease_until")
            .expression_attribute_names("#o", "owner")
            .expression_attribute_names("#s", "status")
            .expression_attribute_values(":until", lease_until(now, lease))
            .expression_attribute_values(":owner", AttributeValue::S(owner.into()))
            .expression_attribute_values(":claimed", AttributeValue::S("claimed".into()))
            .send()
            .await;
        applied(result, format!("renewing the claim on firing {key}"))
    }

    /// Marks a claimed firing as finished (delivered or dead-lettered): never fired again.
    /// False when the claim is no longer `owner`'s (taken over after its lease).
    pub async fn finish(&self, key: &str, owner: &str, outcome: &str) -> anyhow::Result<bool> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(KEY_ATTRIBUTE, AttributeValue::S(key.into()))
            .update_expression("SET #s = :outcome")
            .condition_expression("#o = :owner")
            .expression_attribute_names("#s", "status")
            .expression_attribute_names("#o", "owner")
            .expression_attribute_values(":outcome", AttributeValue::S(outcome.into()))
            .expression_attribute_values(":owner", AttributeValue::S(owner.into()))
            .send()
            .await;
        applied(result, format!("finishing firing {key}"))
    }

    /// The watermark of the engines watching `scope`: every firing scheduled before it is
    /// finished. None before any engine recorded one.
    pub async fn watermark(&self, scope: &str) -> anyhow::Result<Option<DateTime<Utc>>> {
        let key = watermark_key(scope);
        let got = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(KEY_ATTRIBUTE, AttributeValue::S(key.clone()))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| AwsError::of(format!("reading {key}"), &e))?;
        Ok(got
            .item
            .as_ref()
            .and_then(|i| i.get("at_ms"))
            .and_then(|v| v.as_n().ok())
            .and_then(|n| n.parse::<i64>().ok())
            .and_then(DateTime::from_timestamp_millis))
    }

    /// Moves the watermark forward to `at` (never back: engines record it side by side).
    pub async fn advance_watermark(&self, scope: &str, at: DateTime<Utc>) -> anyhow::Result<()> {
        let key = watermark_key(scope);
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .item(KEY_ATTRIBUTE, AttributeValue::S(key.clone()))
            .item("at_ms", number(at.timestamp_millis()))
            .condition_expression("attribute_not_exists(#k) OR #a < :at")
            .expression_attribute_names("#k", KEY_ATTRIBUTE)
            .expression_attribute_names("#a", "at_ms")
            .expression_attribute_values(":at", number(at.timestamp_millis()))
            .send()
            .await;
        applied(result, format!("advancing {key}")).map(|_| ())
    }
}

fn watermark_key(scope: &str) -> String {
    format!("watermark#{scope}")
}

fn lease_until(now: DateTime<Utc>, lease: Duration) -> AttributeValue {
    number(now.timestamp_millis() + lease.as_millis() as i64)
}

/// Whether a conditional write happened: false when its condition refused it.
fn applied<O, E>(result: Result<O, SdkError<E>>, what: String) -> anyhow::Result<bool>
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    match result {
        Ok(_) => Ok(true),
        Err(e)
            if e.as_service_error().and_then(|s| s.code())
                == Some("ConditionalCheckFailedException") =>
        {
            Ok(false)
        }
        Err(e) => Err(AwsError::of(what, &e).into()),
    }
}

fn number(n: i64) -> AttributeValue {
    AttributeValue::N(n.to_string())
}
