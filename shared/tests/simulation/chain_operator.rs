//! The operator's hand on chain runs in the composed world: `chains rerun`, `chains skip`
//! and `chains cancel`, through schedkit's own [`ChainRuns`] (what the command line and the
//! web page call), over the world's store and the Step Functions the conductor plays. No
//! twin of that code: a defect in it, or in the store's conditions it relies on, is the
//! world's.
//!
//! An action that stops half-way (a request refused, or its answer lost) is taken again
//! until it completes, as its error tells an operator to (`chains rerun KEY` again, `chains
//! cancel KEY` again). One that never completes is reported: a run an operator cannot get
//! going again is a defect too.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use schedkit::catalog::Catalog;
use schedkit::key::step_key;
use schedkit::ops::OpsError;
use schedkit::ops::chains::ChainRuns;
use schedkit::orchestrator::MemoryOrchestrator;
use schedkit::store::{MemoryStore, Status};
use serde_json::json;

use super::world::{CHAINS, Draw, Trace};

/// The run an operator picked in a turn, seen by the other.
pub type Picked = std::sync::Arc<std::sync::Mutex<Option<String>>>;

/// How often the operator takes an action again before the world counts it as stuck.
const TRIES: u32 = 60;

/// What is left to do for a run whose action stopped half-way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Again {
    /// `chains rerun KEY` (a rerun's or a skip's rest).
    Rerun,
    /// `chains cancel KEY`.
    Cancel,
}

impl Again {
    /// The command taken again.
    fn command(self) -> &'static str {
        match self {
            Again::Rerun => "rerun",
            Again::Cancel => "cancel",
        }
    }
}

/// The operator of the world's chain runs.
pub struct ChainOperator {
    runs: ChainRuns<MemoryStore, MemoryOrchestrator>,
    /// The world's store and Step Functions, read (never written) to judge a cancel.
    store: MemoryStore,
    orchestrator: MemoryOrchestrator,
    /// What each completed cancel left: the run's executions then, and its steps not DONE.
    at_cancel: BTreeMap<String, AtCancel>,
    /// What a completed cancel left running: an execution of its run not stopped.
    pub left_running: Vec<String>,
    draw: Draw,
    /// The chains' steps, by chain.
    steps: BTreeMap<String, Vec<String>>,
    /// Actions begun and not completed: the run, what to do again, and how often it was.
    unfinished: BTreeMap<String, (Again, u32)>,
    /// Runs given up on after [`TRIES`], with the last error.
    pub stuck: Vec<String>,
    /// Actions that completed: reruns, skips, cancels.
    pub acts: ChainActs,
    /// The run picked this turn, shared with the other operator (the world clears it
    /// before each turn).
    picked: Picked,
    /// Every chain run the operator set out to cancel, and its steps' keys.
    pub cancelled: BTreeSet<String>,
}

/// A chain run when `chains cancel` completed on it.
#[derive(Debug, Default)]
struct AtCancel {
    /// Every execution of the run started by then.
    executions: BTreeSet<String>,
    /// The keys of its steps not DONE then: none of them may be DONE later.
    undone: BTreeSet<String>,
}

/// How many of each action completed.
#[derive(Debug, Default, Clone, Copy)]
pub struct ChainActs {
    pub reruns: u32,
    pub skips: u32,
    pub cancels: u32,
}

impl ChainOperator {
    /// The operator of `catalog`'s chains on the world's `store` and `orchestrator`,
    /// sharing `picked` with the other operator.
    pub fn new(
        store: MemoryStore,
        orchestrator: MemoryOrchestrator,
        catalog: &Catalog,
        machines: BTreeMap<String, String>,
        draw: Draw,
        picked: Picked,
    ) -> Self {
        let steps = catalog
            .chains
            .iter()
            .map(|(name, c)| {
                let steps = c.stages.iter().flat_map(|s| &s.steps);
                (name.clone(), steps.map(|s| s.name.clone()).collect())
            })
            .collect();
        ChainOperator {
            runs: ChainRuns::over(
                store.clone(),
                orchestrator.clone(),
                "the world's table",
                catalog,
                machines,
            ),
            store,
            orchestrator,
            at_cancel: BTreeMap::new(),
            left_running: Vec::new(),
            draw,
            steps,
            unfinished: BTreeMap::new(),
            stuck: Vec::new(),
            acts: ChainActs::default(),
            cancelled: BTreeSet::new(),
            picked,
        }
    }

    /// Whether every action begun has completed (or was given up on).
    pub fn idle(&self) -> bool {
        self.unfinished.is_empty()
    }

    /// One look: the actions that stopped half-way taken again; then, when `acting`, now
    /// and then a new one on a chain run drawn from `store`'s records.
    pub async fn turn(
        &mut self,
        store: &MemoryStore,
        now: DateTime<Utc>,
        acting: bool,
        trace: &Trace,
    ) {
        for (key, (again, tries)) in std::mem::take(&mut self.unfinished) {
            let answer = match again {
                Again::Rerun => self.rerun(&key, now).await,
                Again::Cancel => self.cancel(&key, now).await,
            };
            self.settle(key, again, tries + 1, answer, trace);
        }
        if !acting {
            return;
        }
        // The run the other operator picked this turn, if it did: taken with it, at once,
        // half the time (its rerun racing this cancel, its skip racing this rerun).
        let rival = self
            .picked
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let follow = rival.is_some() && self.draw.chance(0.5);
        if !follow && !self.draw.chance(0.06) {
            return;
        }
        let records = store.snapshot().records;
        let runs: Vec<(String, Status)> = records
            .iter()
            .filter(|(_, r)| CHAINS.contains(&r.job.as_str()))
            .filter(|(k, _)| !self.unfinished.contains_key(*k))
            .map(|(k, r)| (k.clone(), r.status))
            .collect();
        if runs.is_empty() {
            return;
        }
        let followed = rival
            .filter(|_| follow)
            .and_then(|k| runs.iter().find(|(r, _)| *r == k).cloned());
        let (key, status) = match followed {
            Some(run) => run,
            None => runs[self.draw.below(runs.len())].clone(),
        };
        *self.picked.lock().unwrap_or_else(|p| p.into_inner()) = Some(key.clone());
        let chain = records[&key].job.clone();
        let roll = self.draw.below(10);
        match status {
            Status::Paused if roll < 4 => {
                let answer = self.rerun(&key, now).await;
                self.settle(key, Again::Rerun, 1, answer, trace);
            }
            Status::Paused if roll < 8 => {
                let failed = self.steps[&chain]
                    .iter()
                    .find(|s| {
                        records
                            .get(&step_key(&key, s))
                            .is_some_and(|r| r.status == Status::Failed)
                    })
                    .cloned();
                let Some(step) = failed else { return };
                let output = json!({"skipped": true});
                let answer = self
                    .runs
                    .skip(
                        &key,
                        &step,
                        &output,
                        "operator",
                        "the simulation's operator",
                        now,
                    )
                    .await
                    .map(|s| {
                        self.acts.skips += 1;
                        format!("{s:?}")
                    });
                self.settle(key, Again::Rerun, 1, answer, trace);
            }
            Status::Paused | Status::Running if roll >= 8 => {
                let answer = self.cancel(&key, now).await;
                self.settle(key, Again::Cancel, 1, answer, trace);
            }
            _ => {}
        }
    }

    /// At the world's end: what never completed is stuck.
    pub fn give_up(&mut self) {
        for (key, (again, tries)) in std::mem::take(&mut self.unfinished) {
            self.stuck.push(format!(
                "{key}: `chains {}` not completed when the world ended ({tries} tries)",
                again.command()
            ));
        }
    }

    /// What cancelled chain runs did after their cancel completed, judged at the world's
    /// end from Step Functions' executions and the store's records: an execution of the
    /// run started after (its worker's start raced the cancel) and never stopped, or a step
    /// that was not DONE then and is DONE now (a job of a cancelled chain ran).
    pub fn after_cancels(&self) -> Vec<String> {
        let records = self.store.snapshot().records;
        let mut broken = Vec::new();
        let stopped = self.orchestrator.lock().stopped.clone();
        for (key, then) in &self.at_cancel {
            let started = self.executions_of(key);
            for name in started.difference(&then.executions) {
                if !stopped.contains_key(name) {
                    broken.push(format!(
                        "{key}: execution {name} started after `chains cancel` completed, and never stopped"
                    ));
                }
            }
            for step in &then.undone {
                if records.get(step).is_some_and(|r| r.status == Status::Done) {
                    broken.push(format!(
                        "{step}: DONE, though not DONE when its chain run's cancel completed"
                    ));
                }
            }
        }
        broken
    }

    /// The executions of chain run `key` started so far (their input names it).
    fn executions_of(&self, key: &str) -> BTreeSet<String> {
        let state = self.orchestrator.lock();
        state
            .executions
            .iter()
            .filter(|(_, (_, input))| {
                serde_json::from_str::<serde_json::Value>(input)
                    .is_ok_and(|i| i["chain_key"].as_str() == Some(key))
            })
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// Notes the run `key` as a completed cancel left it; an execution of it still open
    /// (neither ended nor stopped) is a cancel that did not stop it.
    fn note_cancel(&mut self, key: &str, chain: &str) {
        let executions = self.executions_of(key);
        {
            let state = self.orchestrator.lock();
            for name in &executions {
                if !state.closed.contains(name) {
                    self.left_running.push(format!(
                        "{key}: execution {name} still running when `chains cancel` completed"
                    ));
                }
            }
        }
        let records = self.store.snapshot().records;
        let undone = self
            .steps
            .get(chain)
            .into_iter()
            .flatten()
            .map(|s| step_key(key, s))
            .filter(|k| records.get(k).is_none_or(|r| r.status != Status::Done))
            .collect();
        self.at_cancel
            .insert(key.to_string(), AtCancel { executions, undone });
    }

    /// `chains rerun KEY`, counted once it completed.
    async fn rerun(&mut self, key: &str, now: DateTime<Utc>) -> Result<String, OpsError> {
        let rerun = self.runs.rerun(key, false, now).await?;
        self.acts.reruns += 1;
        Ok(format!("{rerun:?}"))
    }

    /// `chains cancel KEY`; once it completed, the run and every step of its chain count
    /// as the operator's cancels (a cancel refused, the run decided, counts for nothing).
    async fn cancel(&mut self, key: &str, now: DateTime<Utc>) -> Result<String, OpsError> {
        let done = self
            .runs
            .cancel(key, "operator", "the simulation's operator", now)
            .await?;
        self.acts.cancels += 1;
        // A chain run's key is `<chain>#<scheduled time>` in this world.
        let chain = key.split('#').next().unwrap_or_default();
        self.cancelled.insert(key.to_string());
        for step in self.steps.get(chain).into_iter().flatten() {
            self.cancelled.insert(step_key(key, step));
        }
        self.note_cancel(key, chain);
        Ok(format!("{done:?}"))
    }

    /// What an action's answer leaves to do: nothing when it completed or the run had moved
    /// on (refused, nothing done); the action again when it stopped half-way or a request
    /// failed.
    fn settle(
        &mut self,
        key: String,
        again: Again,
        tries: u32,
        answer: Result<String, OpsError>,
        trace: &Trace,
    ) {
        let error = match answer {
            Ok(done) => {
                trace.say(format!("operator {again:?} {key}: {done}"));
                return;
            }
            Err(e) => e,
        };
        trace.say(format!("operator {again:?} {key}: {error}"));
        // Refused with nothing done: the run moved on, and that is the end of it, unless
        // the refusal asks for the command again (a run an earlier rerun left half-way,
        // whose step changed while it was being reopened), which the operator does.
        let asks_again = error
            .to_string()
            .contains(&format!("`chains {} {key}` again", again.command()));
        if matches!(error, OpsError::Refused(_)) && !asks_again {
            return;
        }
        if tries >= TRIES {
            self.stuck.push(format!(
                "{key}: `chains {}` did not complete after {tries} tries: {error}",
                again.command()
            ));
            return;
        }
        self.unfinished.insert(key, (again, tries));
    }
}
