//! A job's runs cancelled by status, in passes. The runs are listed one status at a time,
//! and a run may move between two listings: a flaky job's run goes RETRYING → RUNNING →
//! RETRYING while the console lists RETRYING (it is RUNNING then) and then RUNNING (it is
//! RETRYING again), and one pass never sees it. So each run is cancelled if it is in any
//! of the statuses asked for (not only the one it was listed under), and the statuses are
//! listed again until a whole pass finds nothing more to cancel: a run escapes only by
//! moving between the listings of two passes in a row.

use std::collections::{BTreeMap, HashSet};

use serde::Serialize;

use super::OpsError;
use crate::store::{CancelError, Cancelled, Status};

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

/// Passes at most: a job whose runs keep starting faster than the console cancels them is
/// left after this many (each pass cancels what it finds; the answer counts them).
const MAX_PASSES: usize = 5;

/// Cancels every run `list` gives for each of `statuses` with `cancel` (which is asked to
/// cancel a run in any of `statuses`), pass after pass, into `done`; `progress` hears the
/// count so far. A run refused (finished, or cancelled by someone else, since its listing)
/// counts in `done.moved_on` once, and not at all if a later pass cancels it.
pub(crate) async fn sweep(
    statuses: &[Status],
    mut list: impl AsyncFnMut(Status) -> Result<Vec<String>, OpsError>,
    mut cancel: impl AsyncFnMut(&str) -> Result<Cancelled, CancelError>,
    done: &mut BulkCancelled,
    progress: &mut impl FnMut(usize),
) -> Result<(), OpsError> {
    let mut cancelled: HashSet<String> = HashSet::new();
    let mut refused: HashSet<String> = HashSet::new();
    let result = async {
        for pass in 0..MAX_PASSES {
            let mut more = 0;
            for status in statuses {
                for key in list(*status).await? {
                    // Listed again by an index that has not caught up with our own write.
                    if cancelled.contains(&key) {
                        continue;
                    }
                    match cancel(&key).await {
                        Ok(c) => {
                            *done
                                .cancelled
                                .by_state
                                .entry(c.was.to_string())
                                .or_default() += 1;
                            refused.remove(&key);
                            cancelled.insert(key.clone());
                            done.keys.push(key);
                            progress(done.keys.len());
                            more += 1;
                        }
                        Err(CancelError::Refused { .. } | CancelError::NotFound { .. }) => {
                            refused.insert(key);
                        }
                        Err(CancelError::Store(e)) => {
                            return Err(OpsError::Refused(format!("cancelling `{key}`: {e}")));
                        }
                    }
                }
            }
            // The first pass is always checked by a second: what it missed moved meanwhile.
            if pass > 0 && more == 0 {
                break;
            }
        }
        Ok(())
    }
    .await;
    done.moved_on += refused.len();
    result
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::*;
    use crate::store::ExecutionRecord;

    /// A store of runs by key and status, each listing moving the runs the script says.
    struct Runs {
        status: RefCell<BTreeMap<String, Status>>,
        /// Before the n-th listing: these runs move to these statuses.
        moves: RefCell<Vec<Vec<(&'static str, Status)>>>,
        listings: RefCell<usize>,
    }

    impl Runs {
        fn new(runs: &[(&str, Status)], moves: Vec<Vec<(&'static str, Status)>>) -> Runs {
            Runs {
                status: RefCell::new(runs.iter().map(|(k, s)| (k.to_string(), *s)).collect()),
                moves: RefCell::new(moves),
                listings: RefCell::new(0),
            }
        }

        fn list(&self, status: Status) -> Vec<String> {
            let n = *self.listings.borrow();
            *self.listings.borrow_mut() += 1;
            if let Some(moves) = self.moves.borrow().get(n) {
                for (key, to) in moves {
                    self.status.borrow_mut().insert(key.to_string(), *to);
                }
            }
            let runs = self.status.borrow();
            runs.iter()
                .filter(|(_, s)| **s == status)
                .map(|(k, _)| k.clone())
                .collect()
        }

        fn cancel(&self, key: &str, only: &[Status]) -> Result<Cancelled, CancelError> {
            let was = self.status.borrow()[key];
            let record = record(key, was);
            if !only.contains(&was) {
                return Err(CancelError::Refused {
                    current: Box::new(record),
                });
            }
            self.status
                .borrow_mut()
                .insert(key.into(), Status::Cancelled);
            Ok(Cancelled { record, was })
        }
    }

    fn record(key: &str, status: Status) -> ExecutionRecord {
        let at = chrono::Utc::now();
        ExecutionRecord {
            status,
            ..crate::accounting::run_of(key, "flaky-sync", at)
        }
    }

    async fn run(runs: &Runs, statuses: &[Status]) -> BulkCancelled {
        let mut done = BulkCancelled::default();
        sweep(
            statuses,
            async |s| Ok(runs.list(s)),
            async |k| runs.cancel(k, statuses),
            &mut done,
            &mut |_| {},
        )
        .await
        .unwrap();
        done
    }

    /// The flaky run the console's contract test once missed: RUNNING while RETRYING was
    /// listed, RETRYING again by the time RUNNING was.
    #[tokio::test]
    async fn a_run_that_moves_between_the_listed_states_is_cancelled_all_the_same() {
        let statuses = [Status::Registered, Status::Retrying, Status::Running];
        let runs = Runs::new(
            &[("flaky", Status::Retrying), ("steady", Status::Registered)],
            vec![
                vec![],
                vec![("flaky", Status::Running)],
                vec![("flaky", Status::Retrying)],
            ],
        );
        let done = run(&runs, &statuses).await;
        assert_eq!(done.keys, ["steady", "flaky"]);
        assert_eq!(done.moved_on, 0);
        assert_eq!(runs.status.borrow()["flaky"], Status::Cancelled);
    }

    /// Listed RETRYING, RUNNING when cancelled: still one of the statuses asked for.
    #[tokio::test]
    async fn a_run_moved_on_to_another_status_asked_for_is_cancelled() {
        let statuses = [Status::Retrying, Status::Running];
        let runs = Runs::new(&[("flaky", Status::Retrying)], vec![]);
        let done = run(&runs, &statuses).await;
        assert_eq!(done.keys, ["flaky"]);
        let by_state: Vec<_> = done.cancelled.by_state.into_iter().collect();
        assert_eq!(by_state, [("RETRYING".to_string(), 1)]);
    }

    /// A run that finished after its listing is left, and counted once however many passes
    /// list it again (an index behind its writes).
    #[tokio::test]
    async fn a_run_that_finished_is_left_and_counted_once() {
        let statuses = [Status::Running];
        let runs = Runs::new(
            &[("done", Status::Running), ("long", Status::Running)],
            vec![],
        );
        let done = {
            let mut done = BulkCancelled::default();
            sweep(
                &statuses,
                async |s| Ok(runs.list(s)),
                async |k| {
                    // DONE in its record; the index lists it RUNNING still, pass after pass.
                    if k == "done" {
                        return Err(CancelError::Refused {
                            current: Box::new(record(k, Status::Done)),
                        });
                    }
                    runs.cancel(k, &statuses)
                },
                &mut done,
                &mut |_| {},
            )
            .await
            .unwrap();
            done
        };
        assert_eq!(done.keys, ["long"]);
        assert_eq!(done.moved_on, 1);
    }
}
