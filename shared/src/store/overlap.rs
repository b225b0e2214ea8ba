//! The overlap slot of a job: one run of the job at a time, for jobs whose catalog says
//! `overlap = "skip"` or `"buffer_one"`.
//!
//! Each such job has one item in the executions table, `overlap#<job>`, that names the run
//! holding the slot (`slot_key`, until `slot_until`) and, for `buffer_one`, the run waiting
//! for it (`waiter_key`, until `waiter_until`). A run enters the slot with one conditional
//! write before its claim and leaves it with another after its outcome: two requests more
//! per run. A run that finds the slot taken is recorded SKIPPED (one more write), or, as the
//! one waiter `buffer_one` allows, put back to look again. A worker that dies holding the
//! slot holds it no longer than its job's timeout and lease: the slot lapses then.
//!
//! The item carries no job, status or shard attributes, so no index (and no listing) ever
//! sees it.

use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, Utc};

use super::dynamo::{is_condition_failure, n, refused_item, s, unavailable};
use super::record::timestamp;
use super::{ClaimRequest, DynamoStore, ExecutionRecord, Status, StoreError};
use crate::job::Overlap;

/// The slot item's key for `job`.
pub fn slot_key(job: &str) -> String {
    format!("overlap#{job}")
}

/// What entering a job's slot found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    /// The slot is this run's: claim and run it, then leave.
    Open,
    /// Another run holds the slot and this one is its waiter: look again after `retry_in`.
    Wait {
        /// How long to hide the message.
        retry_in: Duration,
    },
    /// Another run holds the slot (or waits for it, under `buffer_one`): skip this one.
    Skip {
        /// The run that holds the slot.
        running: String,
    },
}

/// How long a waiter waits between looks: a quarter of what the holder may still take,
/// between 1 and 30 seconds.
fn look_again_in(slot_until_ms: i64, now: DateTime<Utc>) -> Duration {
    let left = (slot_until_ms - now.timestamp_millis()).max(0) as u64;
    Duration::from_millis(left / 4).clamp(Duration::from_secs(1), Duration::from_secs(30))
}

fn text_of(item: &std::collections::HashMap<String, AttributeValue>, name: &str) -> Option<String> {
    item.get(name).and_then(|v| v.as_s().ok()).cloned()
}

fn number_of(item: &std::collections::HashMap<String, AttributeValue>, name: &str) -> i64 {
    item.get(name)
        .and_then(|v| v.as_n().ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

impl DynamoStore {
    /// Enters `job`'s slot for the run `key` (one `UpdateItem`; a waiter's turn costs one
    /// more). `hold` bounds how long the slot is held if the worker dies: the job's timeout
    /// and lease.
    pub async fn enter_slot(
        &self,
        job: &str,
        key: &str,
        policy: Overlap,
        now: DateTime<Utc>,
        hold: Duration,
    ) -> Result<Gate, StoreError> {
        let until = now.timestamp_millis() + hold.as_millis() as i64;
        let free = "(attribute_not_exists(#slot_key) OR #slot_key = :me OR #slot_until < :now)";
        let (condition, update) = match policy {
            Overlap::BufferOne => (
                format!(
                    "{free} AND (attribute_not_exists(#waiter_key) OR #waiter_key = :me OR #waiter_until < :now)"
                ),
                "SET #slot_key = :me, #slot_until = :until, #expires_at = :ttl REMOVE #waiter_key, #waiter_until",
            ),
            _ => (
                free.to_string(),
                "SET #slot_key = :me, #slot_until = :until, #expires_at = :ttl",
            ),
        };
        let result = self
            .update(&slot_key(job), update, &condition)
            .expression_attribute_values(":me", s(key))
            .expression_attribute_values(":now", n(now.timestamp_millis()))
            .expression_attribute_values(":until", n(until))
            // The slot outlives any run it could hold; a job removed from the catalog
            // leaves an item that expires.
            .expression_attribute_values(":ttl", n(now.timestamp() + 30 * 86_400))
            .send();
        let refused = match self.timed(result).await? {
            Ok(_) => return Ok(Gate::Open),
            Err(e) if is_condition_failure(&e) => refused_item(&e).unwrap_or_default(),
            Err(e) => return Err(unavailable(e)),
        };
        let running = text_of(&refused, "slot_key").unwrap_or_default();
        let slot_until = number_of(&refused, "slot_until");
        if policy != Overlap::BufferOne {
            return Ok(Gate::Skip { running });
        }
        // buffer_one: wait, unless another run already does.
        let result = self
            .update(
                &slot_key(job),
                "SET #waiter_key = :me, #waiter_until = :until",
                "attribute_not_exists(#waiter_key) OR #waiter_key = :me OR #waiter_until < :now",
            )
            .expression_attribute_values(":me", s(key))
            .expression_attribute_values(":now", n(now.timestamp_millis()))
            // A waiter whose message is lost stops blocking once the holder's time is
            // over and a little more: the next run may wait instead.
            .expression_attribute_values(":until", n(slot_until.max(until) + 60_000))
            .send();
        match self.timed(result).await? {
            Ok(_) => Ok(Gate::Wait {
                retry_in: look_again_in(slot_until, now),
            }),
            Err(e) if is_condition_failure(&e) => Ok(Gate::Skip { running }),
            Err(e) => Err(unavailable(e)),
        }
    }

    /// Gives `job`'s slot back after the run `key` ended (one `UpdateItem`); nothing when
    /// the slot is no longer this run's.
    pub async fn leave_slot(&self, job: &str, key: &str) -> Result<(), StoreError> {
        let result = self
            .update(
                &slot_key(job),
                "REMOVE #slot_key, #slot_until",
                "#slot_key = :me",
            )
            .expression_attribute_values(":me", s(key))
            .send();
        match self.timed(result).await? {
            Ok(_) => Ok(()),
            Err(e) if is_condition_failure(&e) => Ok(()),
            Err(e) => Err(unavailable(e)),
        }
    }

    /// Records the run of `req` as SKIPPED because `running` held its job's slot (one
    /// `PutItem`). When the key has a record already, nothing is written and that record is
    /// returned: the run exists, and is not a new firing to skip.
    pub async fn record_skipped(
        &self,
        req: &ClaimRequest,
        running: &str,
    ) -> Result<Option<ExecutionRecord>, StoreError> {
        let record = ExecutionRecord {
            attempt: 0,
            started_at: None,
            finished_at: Some(timestamp(req.now)),
            last_error: Some(format!(
                "skipped: `{running}` of the same job was running (overlap policy)"
            )),
            ..ExecutionRecord::first(req, Status::Skipped)
        };
        self.put_first(&record).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_waiter_looks_again_at_a_quarter_of_the_holders_time_within_bounds() {
        let now: DateTime<Utc> = "2026-12-01T12:00:00Z".parse().unwrap();
        let at = |ms: i64| now.timestamp_millis() + ms;
        assert_eq!(look_again_in(at(40_000), now), Duration::from_secs(10));
        assert_eq!(look_again_in(at(1_000), now), Duration::from_secs(1));
        assert_eq!(look_again_in(at(3_600_000), now), Duration::from_secs(30));
        assert_eq!(look_again_in(at(-5_000), now), Duration::from_secs(1));
    }
}
