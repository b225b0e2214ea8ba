//! A job's run of consecutive FAILED runs, for jobs whose catalog says
//! `pause_after_failures = N`.
//!
//! Kept in the job's own item ([`super::job_key`], beside its pause): the keys of the runs
//! that failed since its last success (a string set: counting the same run twice, as a
//! redelivered FAILED message would, adds nothing) and the last error. A FAILED run adds
//! its key (one `UpdateItem`); a DONE run reads the set (one strongly consistent `GetItem`,
//! a fifth of a write's price) and empties it only when it holds any (one `UpdateItem`
//! more). The set stops growing at the job's N: by then the job is paused, and the item
//! stays far below DynamoDB's item size limit. A resume empties it in the same write that
//! ends the pause ([`super::Pauses::resume`]) and notes when (`resumed_at`, epoch ms): a
//! run that failed before the resume is not counted again, when its message comes back
//! after it (the worker that failed it stopped before it deleted it), so old failures
//! cannot pause the job the operator has just resumed.
//!
//! The item has no job, status or shard attribute: no index sees it. It has no TTL either:
//! it may hold a pause, which lasts until someone resumes the job.

use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, Utc};

use super::attributes::{n, s};
use super::condition::Condition;
use super::dynamo::{is_condition_failure, refused_item, unavailable};
use super::{DynamoStore, KEY_ATTRIBUTE, StoreError, job_key};

/// The most error text kept with a streak.
const ERROR_CHARS: usize = 300;

/// A failure is counted when it came after the job's last resume, and the streak has room
/// for it (or holds it already).
const COUNT_CONDITION: &str = "(attribute_not_exists(#resumed_at) OR #resumed_at < :failed_at) AND (attribute_not_exists(#failed_keys) OR size(#failed_keys) < :cap OR contains(#failed_keys, :key))";

/// [`COUNT_CONDITION`] for the run `key` that failed at `failed_at`, with the job's `cap`.
/// Both stores count a failure by it.
pub(crate) fn count_condition(key: &str, cap: u32, failed_at: DateTime<Utc>) -> Condition {
    Condition::new(COUNT_CONDITION)
        .value(":failed_at", n(failed_at.timestamp_millis()))
        .value(":key", s(key))
        .value(":cap", n(i64::from(cap)))
}

fn keys_of(item: &std::collections::HashMap<String, AttributeValue>) -> Vec<String> {
    item.get("failed_keys")
        .and_then(|v| v.as_ss().ok())
        .cloned()
        .unwrap_or_default()
}

impl DynamoStore {
    /// Adds the FAILED run `key` (failed at `failed_at`) to `job`'s streak and returns the
    /// streak's length (at most `cap`: a longer streak is not recorded further). A run
    /// that failed before the job's last resume is not added.
    pub async fn count_failure(
        &self,
        job: &str,
        key: &str,
        error: &str,
        cap: u32,
        failed_at: DateTime<Utc>,
    ) -> Result<u32, StoreError> {
        let error: String = error.chars().take(ERROR_CHARS).collect();
        let result = self
            .update(
                &job_key(job),
                "ADD #failed_keys :keys SET #last_error = :error",
                count_condition(key, cap, failed_at),
            )
            .expression_attribute_values(":keys", AttributeValue::Ss(vec![key.to_string()]))
            .expression_attribute_values(":error", s(&error))
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
    /// streak to end (an `UpdateItem` that removes the failures read: the job's pause, if
    /// any, stays, and so does a failure counted meanwhile).
    pub async fn clear_failures(&self, job: &str) -> Result<(), StoreError> {
        let key = job_key(job);
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
        let seen = item.map(|i| keys_of(&i)).unwrap_or_default();
        if seen.is_empty() {
            return Ok(());
        }
        // Only the failures read: one counted since (another run's, concurrently) stays.
        let clear = self
            .update(
                &key,
                "DELETE #failed_keys :seen",
                "attribute_exists(#failed_keys)",
            )
            .expression_attribute_values(":seen", AttributeValue::Ss(seen))
            .send();
        match self.timed(clear).await? {
            Ok(_) => Ok(()),
            Err(e) if is_condition_failure(&e) => Ok(()),
            Err(e) => Err(unavailable(e)),
        }
    }
}
