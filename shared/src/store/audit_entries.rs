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

use super::attributes::{n, s};
use super::condition::Condition;
use super::dynamo::{DynamoStore, KEY_ATTRIBUTE, StoreError, unavailable};
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

/// Which entries a listing wants: by whom, of which action.
#[derive(Debug, Clone, Default)]
pub struct AuditFilter {
    /// The identity whole, or one of its parts (`bob` matches
    /// `arn:aws:sts::1:assumed-role/operator/bob`, not `bobby`), in any case.
    pub by: Option<String>,
    /// The action, or the start of it (`dlq` matches `dlq redrive` and `dlq purge`).
    pub action: Option<String>,
}

impl AuditFilter {
    /// Whether `entry` is wanted.
    pub fn matches(&self, entry: &AuditEntry) -> bool {
        let by = self.by.as_deref().is_none_or(|by| {
            entry.who.eq_ignore_ascii_case(by)
                || entry
                    .who
                    .split(['/', ':', '@', ' '])
                    .any(|part| part.eq_ignore_ascii_case(by))
        });
        by && self
            .action
            .as_deref()
            .is_none_or(|w| entry.what.starts_with(w))
    }
}

/// An item of the trail this version cannot read, listed as such (with its text) rather
/// than failing the whole listing.
fn undecodable(item: &HashMap<String, AttributeValue>, error: &str) -> AuditEntry {
    let text = |name: &str| match item.get(name) {
        Some(AttributeValue::S(t)) => t.clone(),
        _ => String::new(),
    };
    AuditEntry {
        id: text(KEY_ATTRIBUTE),
        when: text("updated_at"),
        who: "?".into(),
        what: "(an entry this version cannot read)".into(),
        details: serde_json::json!({ "entry": text("entry"), "error": error }),
        phase: "?".into(),
        finished: None,
        result: None,
        error: None,
        done: None,
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

/// Condition of an entry's write: its key is new. An entry is never overwritten; one whose
/// key is there already was written before (the worker's pause has a fixed id, and a put
/// sent again by the SDK meets its own first try), and stays as it is.
pub const AUDIT_CONDITION: &str = "attribute_not_exists(#k)";

/// [`AUDIT_CONDITION`], as both stores obey it.
pub(crate) fn audit_condition() -> Condition {
    Condition::new(AUDIT_CONDITION).name("#k", KEY_ATTRIBUTE)
}

impl DynamoStore {
    /// Writes `entry` (one conditional `PutItem`: an entry is never overwritten; one whose
    /// key is there already was written before, and stays as it is).
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
        let condition = audit_condition();
        let mut put = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression(condition.expression());
        for (placeholder, attribute) in condition.names() {
            put = put.expression_attribute_names(placeholder, attribute);
        }
        let put = put.send();
        match self.timed(put).await? {
            // Written already: an entry of a fixed id (the worker's pause) is written once.
            Err(e)
                if e.as_service_error()
                    .is_some_and(|e| e.is_conditional_check_failed_exception()) =>
            {
                Ok(())
            }
            answer => answer.map(drop).map_err(unavailable),
        }
    }

    /// The entries written from `since` to `until` that `filter` wants, newest first, at
    /// most `limit` of them: the newest (the filter applies before the limit: a listing by
    /// one person is not cut short by everyone else's entries).
    pub async fn audit_entries(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
        filter: &AuditFilter,
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
                .scan_index_forward(false)
                .set_exclusive_start_key(start.take())
                .send();
            let out = self.timed(query).await?.map_err(unavailable)?;
            for item in out.items.unwrap_or_default() {
                let entry = match item.get("entry") {
                    Some(AttributeValue::S(text)) => serde_json::from_str(text)
                        .unwrap_or_else(|e| undecodable(&item, &e.to_string())),
                    _ => undecodable(&item, "no `entry` attribute"),
                };
                if !filter.matches(&entry) && entry.who != "?" {
                    continue;
                }
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

    fn entry(who: &str, what: &str) -> AuditEntry {
        AuditEntry {
            id: "1".into(),
            when: "2026-12-03T10:00:00.000Z".into(),
            who: who.into(),
            what: what.into(),
            details: Value::Null,
            phase: "begin".into(),
            finished: None,
            result: None,
            error: None,
            done: None,
        }
    }

    #[test]
    fn by_matches_the_identity_or_one_of_its_parts_never_a_piece_of_a_part() {
        let bob = entry("arn:aws:sts::1:assumed-role/operator/bob", "dlq redrive");
        let by = |who: &str| AuditFilter {
            by: Some(who.into()),
            action: None,
        };
        assert!(by("bob").matches(&bob));
        assert!(by("BOB").matches(&bob));
        assert!(by("operator").matches(&bob));
        assert!(by("arn:aws:sts::1:assumed-role/operator/bob").matches(&bob));
        assert!(!by("bo").matches(&bob));
        assert!(!by("ann").matches(&entry("arn:aws:iam::1:user/joanna", "fire")));
        assert!(by("alice").matches(&entry("alice@laptop (no AWS identity)", "fire")));
        let dlq = AuditFilter {
            by: None,
            action: Some("dlq".into()),
        };
        assert!(dlq.matches(&bob));
        assert!(!dlq.matches(&entry("x", "fire")));
    }
}
