//! A job's runs cancelled by status. The runs are listed once, in all the statuses asked
//! for together (listed one status after another, a flaky job's run went RETRYING →
//! RUNNING → RETRYING while the console listed RETRYING, when it was RUNNING, and then
//! RUNNING, when it was RETRYING again, and was in neither list), and each is cancelled
//! if it is in any of those statuses by then (not only the one it was listed in).

use std::collections::BTreeMap;

use serde::Serialize;

use super::OpsError;
use crate::store::{CancelError, Cancelled};

/// How many runs a selection holds now, by state (`queued` for the queue's).
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct Counts {
    /// By status, and `queued`.
    pub by_state: BTreeMap<String, usize>,
}

impl Counts {
    /// Every run counted.
    pub fn total(&self) -> usize {
        self.by_state.values().sum()
    }

    /// `3 RUNNING, 50 queued`.
    pub fn describe(&self) -> String {
        let parts: Vec<String> = self
            .by_state
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(state, n)| format!("{n} {state}"))
            .collect();
        if parts.is_empty() {
            "none".into()
        } else {
            parts.join(", ")
        }
    }
}

/// What a bulk cancellation did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct BulkCancelled {
    /// Cancelled, by the state each run was in.
    pub cancelled: Counts,
    /// The keys cancelled.
    pub keys: Vec<String>,
    /// Runs that moved on between the listing and their cancellation (finished, to a
    /// status not asked for, or cancelled by someone else), left as they are; each once.
    pub moved_on: usize,
}

/// Cancels each run of `keys` with `cancel` (which is asked to cancel a run in any of the
/// statuses selected), into `done`; `progress` hears the count so far. A run refused
/// (finished, or cancelled by someone else, since its listing) counts in
/// `done.moved_on`.
pub(crate) async fn sweep(
    keys: impl IntoIterator<Item = String>,
    mut cancel: impl AsyncFnMut(&str) -> Result<Cancelled, CancelError>,
    done: &mut BulkCancelled,
    progress: &mut impl FnMut(usize),
) -> Result<(), OpsError> {
    for key in keys {
        match cancel(&key).await {
            Ok(c) => {
                *done
                    .cancelled
                    .by_state
                    .entry(c.was.to_string())
                    .or_default() += 1;
                done.keys.push(key);
                progress(done.keys.len());
            }
            Err(CancelError::Refused { .. } | CancelError::NotFound { .. }) => {
                done.moved_on += 1;
            }
            Err(CancelError::Store(e)) => {
                return Err(OpsError::Refused(format!("cancelling `{key}`: {e}")));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::*;
    use crate::store::{ExecutionRecord, Status};

    fn record(key: &str, status: Status) -> ExecutionRecord {
        ExecutionRecord {
            status,
            ..crate::accounting::run_of(key, "flaky-sync", chrono::Utc::now())
        }
    }

    /// Runs by key and status, cancelled as the store's condition does: in one of `only`.
    fn cancel(
        runs: &RefCell<BTreeMap<String, Status>>,
        key: &str,
        only: &[Status],
    ) -> Result<Cancelled, CancelError> {
        let was = runs.borrow()[key];
        if !only.contains(&was) {
            let current = Box::new(record(key, was));
            return Err(CancelError::Refused { current });
        }
        runs.borrow_mut().insert(key.into(), Status::Cancelled);
        Ok(Cancelled {
            record: record(key, was),
            was,
        })
    }

    /// Listed RETRYING, RUNNING again by its cancel: still one of the statuses asked for
    /// (the console's contract test once left such a run). One that finished since its
    /// listing is left, and counted as moved on.
    #[tokio::test]
    async fn a_run_that_moved_between_the_statuses_asked_for_is_cancelled_and_a_finished_one_left()
    {
        let statuses = [Status::Registered, Status::Retrying, Status::Running];
        let listed = ["flaky", "steady", "finished"].map(String::from);
        let runs = RefCell::new(BTreeMap::from([
            ("flaky".to_string(), Status::Running),
            ("steady".to_string(), Status::Registered),
            ("finished".to_string(), Status::Done),
        ]));
        let mut done = BulkCancelled::default();
        let mut heard = Vec::new();
        let cancelled = sweep(
            listed,
            async |k| cancel(&runs, k, &statuses),
            &mut done,
            &mut |n| heard.push(n),
        )
        .await;
        assert!(cancelled.is_ok());
        assert_eq!(done.keys, ["flaky", "steady"]);
        assert_eq!(done.moved_on, 1);
        assert_eq!(heard, [1, 2]);
        let by_state: Vec<_> = done.cancelled.by_state.into_iter().collect();
        let by_state_wanted = [("REGISTERED".to_string(), 1), ("RUNNING".to_string(), 1)];
        assert_eq!(by_state, by_state_wanted);
    }
}
