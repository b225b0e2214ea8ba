//! What the accountant reads and writes ([`AccountantStore`]): its ledger, the records of
//! the firings it expects (by key, and by job and scheduled time), the jobs whose runs
//! failed lately, and the jobs' pauses. The stage's DynamoDB table is one; the in-memory
//! store is the other, so that the simulation runs the accountant's own checks
//! ([`super::stage::check_and_send`]) against the same ledger condition DynamoDB is sent.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use chrono::{DateTime, Utc};

use super::ledger::Ledger;
use crate::store::{DynamoStore, ExecutionRecord, PauseHistory, StoreCall, StoreError};

/// Records found by key, and the requests made.
pub type Found = (HashMap<String, ExecutionRecord>, usize);

/// The accountant's reads and its one write. Clone: a check reads several jobs at once.
pub trait AccountantStore: Clone + Send + Sync + 'static {
    /// The ledger as the last check left it (None before the first check), strongly
    /// consistent.
    fn ledger(&self) -> StoreCall<'_, Result<Option<Ledger>, StoreError>>;

    /// Writes `ledger` if the stored one still has `previous_checks` checks (the ledger's
    /// shared condition); false when another check wrote first.
    fn put_ledger<'a>(
        &'a self,
        ledger: &'a Ledger,
        previous_checks: u64,
    ) -> StoreCall<'a, Result<bool, StoreError>>;

    /// The records of `keys` (those that exist), and the requests made.
    fn get_many(&self, keys: Vec<String>) -> StoreCall<'_, Result<Found, StoreError>>;

    /// Every record of `job` scheduled in `[from, to]` (to the second), and the pages read.
    fn scheduled_between<'a>(
        &'a self,
        job: &'a str,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> StoreCall<'a, Result<(Vec<ExecutionRecord>, usize), StoreError>>;

    /// The jobs with a run FAILED since `since`, and the pages read.
    fn jobs_failed_since(
        &self,
        since: DateTime<Utc>,
    ) -> StoreCall<'_, Result<(BTreeSet<String>, usize), StoreError>>;

    /// The pause and the recently ended pauses of each of `jobs` (those with neither are
    /// left out).
    fn pause_histories(
        &self,
        jobs: Vec<String>,
    ) -> StoreCall<'_, Result<BTreeMap<String, PauseHistory>, StoreError>>;
}

impl AccountantStore for DynamoStore {
    fn ledger(&self) -> StoreCall<'_, Result<Option<Ledger>, StoreError>> {
        Box::pin(DynamoStore::ledger(self))
    }

    fn put_ledger<'a>(
        &'a self,
        ledger: &'a Ledger,
        previous_checks: u64,
    ) -> StoreCall<'a, Result<bool, StoreError>> {
        Box::pin(DynamoStore::put_ledger(self, ledger, previous_checks))
    }

    fn get_many(&self, keys: Vec<String>) -> StoreCall<'_, Result<Found, StoreError>> {
        Box::pin(DynamoStore::get_many(self, keys))
    }

    fn scheduled_between<'a>(
        &'a self,
        job: &'a str,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> StoreCall<'a, Result<(Vec<ExecutionRecord>, usize), StoreError>> {
        Box::pin(DynamoStore::scheduled_between(self, job, from, to))
    }

    fn jobs_failed_since(
        &self,
        since: DateTime<Utc>,
    ) -> StoreCall<'_, Result<(BTreeSet<String>, usize), StoreError>> {
        Box::pin(DynamoStore::jobs_failed_since(self, since))
    }

    fn pause_histories(
        &self,
        jobs: Vec<String>,
    ) -> StoreCall<'_, Result<BTreeMap<String, PauseHistory>, StoreError>> {
        Box::pin(async move {
            self.pauses()
                .history_of(jobs.iter().map(String::as_str))
                .await
        })
    }
}
