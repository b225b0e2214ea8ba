//! The stage's audit trail: one item per entry in the executions table, in schedkit's own
//! key space (`.schedkit/audit/…`), listed in time order through the `by-shard` index
//! under a partition of its own (`audit`), which the listing of runs never reads. Every
//! operator's action writes an entry when it begins and one when it ends (who, what, its
//! arguments, what it changed, whether it finished); the worker writes one when it pauses
//! a job by itself. Entries live `SCHEDKIT_AUDIT_RETENTION_DAYS` (400 by default), then
//! DynamoDB's TTL removes them.

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::dynamo::{DynamoStore, KEY_ATTRIBUTE, StoreError, n, s, unavailable};
use super::internal::INTERNAL_PREFIX;
use super::record::timestamp;

/// The `by-shard` partition the entries are listed under.
pub const AUDIT_SHARD: &str = "audit";

/// How long entries are kept when `SCHEDKIT_AUDIT_RETENTION_DAYS` does not say.
pub const DEFAULT_AUDIT_RETENTION: Duration = Duration::from_secs(400 * 24 * 60 * 60);

/// One entry: an action's begin or end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditEntry {
    /// Shared by an action's begin and end.
    pub id: String,
    /// When, RFC 3339 with milliseconds, UTC.
    pub when: String,
    /// The AWS identity that acted (`worker <id>` for the worker's own pauses).
    pub who: String,
    /// The action (`executions cancel`, `dlq redrive`, `auto-pause`).
    pub what: String,
    /// Its arguments and the stage.
    pub details: Value,
    /// `begin` or `end`.
    pub phase: String,
    /// At its end: whether it finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished: Option<bool>,
    /// At its end: what it did (its own summary: counts, keys).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// At an end that did not finish: why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// At an end that did not finish: what it had changed before it stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub done: Option<String>,
}

impl AuditEntry {
    /// The entry's item key: in schedkit's key space, unique per action and phase.
    pub fn key(&self) -> String {
        format!("{INTERNAL_PREFIX}audit/{}/{}", self.id, self.phase)
    }
}

/// How long entries are kept: `SCHEDKIT_AUDIT_RETENTION_DAYS`, else 400 days.
pub fn audit_retention() -> Duration {
    std::env::var("SCHEDKIT_AUDIT_RETENTION_DAYS")
        .ok()
        .and_then(|d| d.parse::<u64>().ok())
        .filter(|d| *d > 0)
        .map_or(DEFAULT_AUDIT_RETENTION, |d| {
            Duration::from_secs(d * 24 * 60 * 60)
        })
}

impl DynamoStore {
    /// Writes `entry` (one conditional `PutItem`: an entry is never overwritten).
    pub async fn put_audit(&self, entry: &AuditEntry) -> Result<(), StoreError> {
        let now = Utc::now();
        let expires = now.timestamp() + audit_retention().as_secs() as i64;
        let item = HashMap::from([
            (KEY_ATTRIBUTE.to_string(), s(&entry.key())),
            ("list_shard".to_string(), s(AUDIT_SHARD)),
            ("updated_at".to_string(), s(&entry.when)),
            (
                "entry".to_string(),
                s(&serde_json::to_string(entry).expect("an entry serialises")),
            ),
            ("expires_at".to_string(), n(expires)),
        ]);
        let put = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(#k)")
            .expression_attribute_names("#k", KEY_ATTRIBUTE)
            .send();
        self.timed(put).await?.map_err(unavailable)?;
        Ok(())
    }

    /// The entries written from `since` to `until`, oldest first, at most `limit`.
    pub async fn audit_entries(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
        limit: usize,
    ) -> Result<Vec<AuditEntry>, StoreError> {
        let mut entries = Vec::new();
        let mut start = None;
        loop {
            let query = self
                .client
                .query()
                .table_name(&self.table)
                .index_name("by-shard")
                .key_condition_expression("#s = :audit AND #t BETWEEN :since AND :until")
                .expression_attribute_names("#s", "list_shard")
                .expression_attribute_names("#t", "updated_at")
                .expression_attribute_values(":audit", s(AUDIT_SHARD))
                .expression_attribute_values(":since", s(&timestamp(since)))
                .expression_attribute_values(":until", s(&timestamp(until)))
                .scan_index_forward(true)
                .set_exclusive_start_key(start.take())
                .send();
            let out = self.timed(query).await?.map_err(unavailable)?;
            for item in out.items.unwrap_or_default() {
                let Some(AttributeValue::S(text)) = item.get("entry") else {
                    continue;
                };
                let entry = serde_json::from_str(text).map_err(|e| StoreError::Malformed {
                    key: AUDIT_SHARD.into(),
                    reason: e.to_string(),
                })?;
                entries.push(entry);
                if entries.len() >= limit {
                    return Ok(entries);
                }
            }
            match out.last_evaluated_key.filter(|k| !k.is_empty()) {
                Some(key) => start = Some(key),
                None => return Ok(entries),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_lives_in_schedkits_own_key_space_one_item_per_phase() {
        let entry = AuditEntry {
            id: "a1".into(),
            when: "2026-12-03T08:00:00.000Z".into(),
            who: "arn:aws:iam::1:user/alice".into(),
            what: "executions cancel".into(),
            details: serde_json::json!({"key": "k"}),
            phase: "begin".into(),
            finished: None,
            result: None,
            error: None,
            done: None,
        };
        assert!(super::super::is_internal(&entry.key()));
        let end = AuditEntry {
            phase: "end".into(),
            ..entry.clone()
        };
        assert_ne!(entry.key(), end.key());
    }
}
