//! The memory store's side of the accountant ([`AccountantStore`]): its ledger item, written
//! by evaluating the very condition DynamoDB is sent ([`ledger_condition`]) and refused past
//! DynamoDB's item size, as DynamoDB refuses it; and its reads, each one request that meets
//! the store's faults, answered as the table's indexes answer them.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, SecondsFormat, Utc};

use super::accountant_ledger::{
    ledger_condition, ledger_item, ledger_key, ledger_of, refused_by_itself,
};
use super::attributes::item_bytes;
use super::memory::MemoryStore;
use super::pauses::PauseHistory;
use super::{ExecutionRecord, Status, StoreCall, StoreError};
use crate::accounting::books::{AccountantStore, Found};
use crate::accounting::ledger::Ledger;

/// DynamoDB's limit on an item's size.
const ITEM_LIMIT: usize = 400 * 1024;

impl AccountantStore for MemoryStore {
    fn ledger(&self) -> StoreCall<'_, Result<Option<Ledger>, StoreError>> {
        Box::pin(async move {
            let item = self
                .request("ledger", &ledger_key(), |state| state.ledger.clone())
                .await?;
            item.as_ref().map(ledger_of).transpose()
        })
    }

    fn put_ledger<'a>(
        &'a self,
        ledger: &'a Ledger,
        previous_checks: u64,
    ) -> StoreCall<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            let item = ledger_item(ledger);
            let size = item_bytes(&item);
            if size > ITEM_LIMIT {
                return Err(StoreError::Refused(format!(
                    "ValidationException: Item size has exceeded the maximum allowed size ({size} bytes)"
                )));
            }
            let condition = ledger_condition(previous_checks);
            self.request("put_ledger", &ledger_key(), |state| {
                if condition.holds(state.ledger.as_ref()) {
                    state.ledger = Some(item.clone());
                    true
                } else {
                    refused_by_itself(state.ledger.as_ref(), ledger)
                }
            })
            .await
        })
    }

    fn get_many(&self, keys: Vec<String>) -> StoreCall<'_, Result<Found, StoreError>> {
        Box::pin(async move {
            let keys: BTreeSet<String> = keys.into_iter().collect();
            // BatchGetItem: a hundred keys to a request.
            let requests = keys.len().div_ceil(100);
            let found = self
                .request("get_many", "", |state| {
                    keys.iter()
                        .filter_map(|k| state.records.get(k).map(|r| (k.clone(), r.clone())))
                        .collect()
                })
                .await?;
            Ok((found, requests))
        })
    }

    fn scheduled_between<'a>(
        &'a self,
        job: &'a str,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> StoreCall<'a, Result<(Vec<ExecutionRecord>, usize), StoreError>> {
        Box::pin(async move {
            // The `by-job` index's key condition: the job, and its scheduled time BETWEEN
            // the two, compared as the text it is written as (to the second).
            let text = |t: DateTime<Utc>| t.to_rfc3339_opts(SecondsFormat::Secs, true);
            let (from, to) = (text(from), text(to));
            let mut records: Vec<ExecutionRecord> = self
                .request("scheduled_between", job, |state| {
                    state
                        .records
                        .values()
                        .filter(|r| r.job == job && !r.scheduled_for.is_empty())
                        .filter(|r| from <= r.scheduled_for && r.scheduled_for <= to)
                        .cloned()
                        .collect()
                })
                .await?;
            records.sort_by(|a, b| a.scheduled_for.cmp(&b.scheduled_for));
            Ok((records, 1))
        })
    }

    fn jobs_failed_since(
        &self,
        since: DateTime<Utc>,
    ) -> StoreCall<'_, Result<(BTreeSet<String>, usize), StoreError>> {
        Box::pin(async move {
            let since = since.to_rfc3339_opts(SecondsFormat::Millis, true);
            let jobs = self
                .request("jobs_failed_since", "", |state| {
                    state
                        .records
                        .values()
                        .filter(|r| r.status == Status::Failed && r.updated_at > since)
                        .map(|r| r.job.clone())
                        .collect()
                })
                .await?;
            Ok((jobs, 1))
        })
    }

    fn pause_histories(
        &self,
        jobs: Vec<String>,
    ) -> StoreCall<'_, Result<BTreeMap<String, PauseHistory>, StoreError>> {
        Box::pin(async move {
            self.request("pause_histories", "", |state| {
                jobs.iter()
                    .filter_map(|job| {
                        let history = PauseHistory {
                            paused: state.pauses.get(job).cloned(),
                            ended: state.pause_windows.get(job).cloned().unwrap_or_default(),
                        };
                        let any = history.paused.is_some() || !history.ended.is_empty();
                        any.then(|| (job.clone(), history))
                    })
                    .collect()
            })
            .await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accounting::ledger::Finding;
    use crate::store::NoFaults;

    fn store() -> MemoryStore {
        MemoryStore::new(std::sync::Arc::new(NoFaults))
    }

    #[tokio::test]
    async fn a_ledger_write_of_a_check_that_read_an_older_ledger_is_refused() {
        let store = store();
        let first = Ledger {
            checks: 1,
            writer: "a".into(),
            ..Ledger::default()
        };
        assert!(store.put_ledger(&first, 0).await.unwrap());
        // Another check that read no ledger either, at the same instant: refused, though
        // its ledger is the same but for its writer.
        let twin = Ledger {
            writer: "b".into(),
            ..first.clone()
        };
        assert!(!store.put_ledger(&twin, 0).await.unwrap());
        // The same write sent again (its answer lost): written.
        assert!(store.put_ledger(&first, 0).await.unwrap());
        assert_eq!(store.ledger().await.unwrap(), Some(first));
    }

    #[tokio::test]
    async fn a_ledger_past_dynamodbs_item_size_is_refused_as_dynamodb_refuses_it() {
        let finding: Finding = serde_json::from_value(serde_json::json!({
            "kind": "missed", "name": "j", "key": format!("j#{}", "x".repeat(1000)),
            "scheduled_for": "2026-12-02T09:00:00Z", "due_by": "2026-12-02T09:10:00Z",
            "found_at": "2026-12-02T09:20:00Z"
        }))
        .unwrap();
        let ledger = Ledger {
            checks: 1,
            findings: vec![finding; 500],
            ..Ledger::default()
        };
        let error = store().put_ledger(&ledger, 0).await.unwrap_err();
        assert!(
            matches!(&error, StoreError::Refused(m) if m.contains("maximum allowed size")),
            "{error}"
        );
    }
}
