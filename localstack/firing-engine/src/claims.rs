//! Firing claims: how several firing engines share the work without firing one
//! (schedule, scheduled time) twice. Each firing is claimed by one conditional write; a
//! claim whose engine died (its lease expired before it marked the firing delivered) can be
//! taken over.

use std::time::Duration;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, Utc};
use schedkit::aws::AwsError;

/// The claims table's partition key.
pub const KEY_ATTRIBUTE: &str = "firing_key";

/// A DynamoDB table of firing claims.
#[derive(Debug, Clone)]
pub struct Claims {
    client: Client,
    table: String,
}

impl Claims {
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

    /// Claims a firing for `owner`; false when another engine has it (or delivered it).
    pub async fn claim(&self, key: &str, owner: &str, lease: Duration) -> anyhow::Result<bool> {
        let now = Utc::now();
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .item(KEY_ATTRIBUTE, AttributeValue::S(key.into()))
            .item("status", AttributeValue::S("claimed".into()))
            .item("owner", AttributeValue::S(owner.into()))
            .item(
                "lease_until",
                number(now.timestamp_millis() + lease.as_millis() as i64),
            )
            // Kept for a week: long after any engine could still consider the firing.
            .item("expires_at", number(now.timestamp() + 7 * 86_400))
            .condition_expression("attribute_not_exists(#k) OR (#s = :claimed AND #l < :now)")
            .expression_attribute_names("#k", KEY_ATTRIBUTE)
            .expression_attribute_names("#s", "status")
            .expression_attribute_names("#l", "lease_until")
            .expression_attribute_values(":claimed", AttributeValue::S("claimed".into()))
            .expression_attribute_values(":now", number(now.timestamp_millis()))
            .send()
            .await;
        applied(result, format!("claiming firing {key}"))
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
