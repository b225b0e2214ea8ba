//! The accountant's ledger ([`crate::accounting::ledger`]) in the executions table: one
//! item in schedkit's own key space, outside every index, written only by a check that
//! read it as it still is (its count of checks is the condition), so two checks at once
//! report a span once.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

use super::attributes::{n, s};
use super::dynamo::{DynamoStore, KEY_ATTRIBUTE, StoreError, unavailable};
use super::internal::INTERNAL_PREFIX;
use crate::accounting::ledger::Ledger;

/// The ledger's key.
pub fn ledger_key() -> String {
    format!("{INTERNAL_PREFIX}accountant")
}

impl DynamoStore {
    /// The ledger as the last check left it (None before the first check); strongly
    /// consistent, so a check starts from the last one's watermark.
    pub async fn ledger(&self) -> Result<Option<Ledger>, StoreError> {
        let key = ledger_key();
        let get = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(KEY_ATTRIBUTE, s(&key))
            .consistent_read(true)
            .send();
        let item = self.timed(get).await?.map_err(unavailable)?.item;
        let Some(item) = item else { return Ok(None) };
        let text = match item.get("ledger") {
            Some(AttributeValue::S(text)) => text,
            _ => {
                return Err(StoreError::Malformed {
                    key,
                    reason: "no `ledger` text".into(),
                });
            }
        };
        serde_json::from_str(text)
            .map(Some)
            .map_err(|e| StoreError::Malformed {
                key,
                reason: e.to_string(),
            })
    }

    /// Writes `ledger` if the stored one still has `previous_checks` checks (0: none
    /// stored). False when another check wrote first: this one's findings are theirs to
    /// report. True when the stored ledger is this one already (a write whose answer was
    /// lost, sent again).
    pub async fn put_ledger(
        &self,
        ledger: &Ledger,
        previous_checks: u64,
    ) -> Result<bool, StoreError> {
        let item = HashMap::from([
            (KEY_ATTRIBUTE.to_string(), s(&ledger_key())),
            ("checks".to_string(), n(ledger.checks as i64)),
            (
                "ledger".to_string(),
                s(&crate::accounting::ledger::text(ledger)),
            ),
        ]);
        let put = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(#k) OR #checks = :checks")
            .expression_attribute_names("#k", KEY_ATTRIBUTE)
            .expression_attribute_names("#checks", "checks")
            .expression_attribute_values(":checks", n(previous_checks as i64))
            .return_values_on_condition_check_failure(
                aws_sdk_dynamodb::types::ReturnValuesOnConditionCheckFailure::AllOld,
            )
            .send();
        let text = crate::accounting::ledger::text(ledger);
        match self.timed(put).await? {
            Ok(_) => Ok(true),
            // Refused on what is there: this very ledger (the write applied, its answer
            // lost and the SDK sent it again) is written; another check's is not ours.
            Err(e) => match e.as_service_error() {
                Some(
                    aws_sdk_dynamodb::operation::put_item::PutItemError::ConditionalCheckFailedException(
                        refused,
                    ),
                ) => Ok(matches!(
                    refused.item().and_then(|i| i.get("ledger")),
                    Some(AttributeValue::S(there)) if *there == text
                )),
                _ => Err(unavailable(e)),
            },
        }
    }
}
