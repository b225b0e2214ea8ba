//! A job's run of consecutive FAILED runs, for jobs whose catalog says
//! `pause_after_failures = N`.
//!
//! One item per such job, `failures#<job>`, holds the keys of the runs that failed since its
//! last success (a string set: counting the same run twice, as a redelivered FAILED message
//! would, adds nothing) and the last error. A FAILED run adds its key (one `UpdateItem`);
//! a DONE run reads the item (one strongly consistent `GetItem`, a fifth of a write's price)
//! and empties it only when it holds any (one `UpdateItem` more). The set stops growing at the job's N: by then the
//! job is paused, and the item stays far below DynamoDB's item size limit.
//!
//! Like the overlap slot, the item has no job, status or shard attribute: no index sees it.

use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, Utc};

use super::dynamo::{is_condition_failure, n, refused_item, s, unavailable};
use super::{DynamoStore, KEY_ATTRIBUTE, StoreError};

/// The streak item's key for `job`.
pub fn failures_key(job: &str) -> String {
    format!("failures#{job}")
}

/// The most error text kept with a streak.
const ERROR_CHARS: usize = 300;

fn keys_of(item: &std::collections::HashMap<String, AttributeValue>) -> Vec<String> {
    item.get("failed_keys")
        .and_then(|v| v.as_ss().ok())
        .cloned()
        .unwrap_or_default()
}

impl DynamoStore {
    /// Adds the FAILED run `key` to `job`'s streak and returns the streak's length (at most
    /// `cap`: a longer streak is not recorded further).
    pub async fn count_failure(
        &self,
        job: &str,
        key: &str,
        error: &str,
        cap: u32,
        now: DateTime<Utc>,
    ) -> Result<u32, StoreError> {
        let error: String = error.chars().take(ERROR_CHARS).collect();
        let result = self
            .update(
                &failures_key(job),
                "ADD #failed_keys :keys SET #last_error = :error, #expires_at = :ttl",
                "attribute_not_exists(#failed_keys) OR size(#failed_keys) < :cap OR contains(#failed_keys, :key)",
            )
            .expression_attribute_values(":keys", AttributeValue::Ss(vec![key.to_string()]))
            .expression_attribute_values(":key", s(key))
            .expression_attribute_values(":error", s(&error))
            .expression_attribute_values(":cap", n(i64::from(cap)))
            // A job removed from the catalog (or never failing again) leaves an item that
            // expires.
            .expression_attribute_values(":ttl", n(now.timestamp() + 30 * 86_400))
            .send();
        let (old, added) = match self.timed(result).await? {
            Ok(out) => (keys_of(&out.attributes.unwrap_or_default()), true),
            Err(e) if is_condition_failure(&e) => {
                (keys_of(&refused_item(&e).unwrap_or_default()), false)
            }
            Err(e) => return Err(unavailable(e)),
        };
        let new = u32::from(added && !old.iter().any(|k| k == key));
        Ok(old.len() as u32 + new)
    }

    /// Ends `job`'s streak after a DONE run: one read, and a write only when there was a
    /// streak to end (an `UpdateItem`, not a delete: the worker needs no `DeleteItem`).
    pub async fn clear_failures(&self, job: &str) -> Result<(), StoreError> {
        let key = failures_key(job);
        let read = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(KEY_ATTRIBUTE, s(&key))
            .consistent_read(true)
            .projection_expression("#keys")
            .expression_attribute_names("#keys", "failed_keys")
            .send();
        let item = self.timed(read).await?.map_err(unavailable)?.item;
        if item.is_none_or(|i| keys_of(&i).is_empty()) {
            return Ok(());
        }
        let clear = self
            .update(
                &key,
                "REMOVE #failed_keys, #last_error",
                "attribute_exists(#failed_keys)",
            )
            .send();
        match self.timed(clear).await? {
            Ok(_) => Ok(()),
            Err(e) if is_condition_failure(&e) => Ok(()),
            Err(e) => Err(unavailable(e)),
        }
    }
}
