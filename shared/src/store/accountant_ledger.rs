//! The accountant's ledger ([`crate::accounting::ledger`]) in the executions table: one
//! item in schedkit's own key space, outside every index, written only by a check that
//! read it as it still is (its count of checks is the condition), so two checks at once
//! report a span once.

use aws_sdk_dynamodb::types::AttributeValue;

use super::attributes::{Item, n, s};
use super::condition::Condition;
use super::dynamo::{DynamoStore, KEY_ATTRIBUTE, StoreError, unavailable};
use super::internal::INTERNAL_PREFIX;
use crate::accounting::ledger::Ledger;

/// The ledger's key.
pub fn ledger_key() -> String {
    format!("{INTERNAL_PREFIX}accountant")
}

/// Condition of a ledger's write: none stored yet, or the stored one has the count of
/// checks the writer read (a check that read an older ledger lost the race).
pub const LEDGER_CONDITION: &str = "attribute_not_exists(#k) OR #checks = :checks";

/// [`LEDGER_CONDITION`] for a check that read `previous_checks` checks (0: none stored).
pub(crate) fn ledger_condition(previous_checks: u64) -> Condition {
    Condition::new(LEDGER_CONDITION)
        .name("#k", KEY_ATTRIBUTE)
        .value(":checks", n(previous_checks as i64))
}

/// The ledger's item as DynamoDB holds it: its key, its count of checks (what the condition
/// reads) and its text.
pub(crate) fn ledger_item(ledger: &Ledger) -> Item {
    Item::from([
        (KEY_ATTRIBUTE.to_string(), s(&ledger_key())),
        ("checks".to_string(), n(ledger.checks as i64)),
        (
            "ledger".to_string(),
            s(&crate::accounting::ledger::text(ledger)),
        ),
    ])
}

/// Whether a refused ledger write was refused by this very ledger (the write applied, its
/// answer lost, and the SDK sent it again): then it is written. `there` is the item the
/// refusal returned.
pub(crate) fn refused_by_itself(there: Option<&Item>, ledger: &Ledger) -> bool {
    matches!(
        there.and_then(|i| i.get("ledger")),
        Some(AttributeValue::S(text)) if *text == crate::accounting::ledger::text(ledger)
    )
}

/// The ledger an item holds.
pub(crate) fn ledger_of(item: &Item) -> Result<Ledger, StoreError> {
    let key = ledger_key();
    let text = match item.get("ledger") {
        Some(AttributeValue::S(text)) => text,
        _ => {
            return Err(StoreError::Malformed {
                key,
                reason: "no `ledger` text".into(),
            });
        }
    };
    serde_json::from_str(text).map_err(|e| StoreError::Malformed {
        key,
        reason: e.to_string(),
    })
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
        item.as_ref().map(ledger_of).transpose()
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
        let condition = ledger_condition(previous_checks);
        let mut put = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(ledger_item(ledger)))
            .condition_expression(condition.expression())
            .return_values_on_condition_check_failure(
                aws_sdk_dynamodb::types::ReturnValuesOnConditionCheckFailure::AllOld,
            );
        for (placeholder, attribute) in condition.names() {
            put = put.expression_attribute_names(placeholder, attribute);
        }
        for (placeholder, value) in condition.values() {
            put = put.expression_attribute_values(placeholder, value.clone());
        }
        match self.timed(put.send()).await? {
            Ok(_) => Ok(true),
            // Refused on what is there: this very ledger (the write applied, its answer
            // lost and the SDK sent it again) is written; another check's is not ours.
            Err(e) => match e.as_service_error() {
                Some(
                    aws_sdk_dynamodb::operation::put_item::PutItemError::ConditionalCheckFailedException(
                        refused,
                    ),
                ) => Ok(refused_by_itself(refused.item(), ledger)),
                _ => Err(unavailable(e)),
            },
        }
    }
}
