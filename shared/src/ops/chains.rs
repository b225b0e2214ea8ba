//! Chain runs for an operator: the recent runs of the catalog's chains, one run as its
//! stages of steps, and the rerun of a paused run from its failed step.
//!
//! A rerun starts a new execution of the chain's state machine under the same chain key
//! (its input is the first run's): the steps' records decide what runs. A DONE step
//! answers its task from its record without running; the failed step's record (FAILED, or
//! SKIPPED by an earlier version's overlap policy) is reopened first, REGISTERED with a
//! fresh set of attempts, so the rerun's message claims it (any other message for a
//! decided step is its duplicate); the later stages run as they would have. The chain's
//! record counts the run and names its execution, so the earlier run's outcome, delivered
//! late, cannot end the new one. A run whose execution ended while its record still says
//! RUNNING (its end never recorded) is reconciled: DONE when every step is, else rerun.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::OpsError;
use super::executions::{Records, read_error};
use crate::aws::{AwsError, SdkConfig};
use crate::catalog::{Catalog, Chain};
use crate::key::{chain_execution_name, step_key};
use crate::orchestrator::{ExecutionInfo, Orchestrator, SfnOrchestrator, StartError};
use crate::store::{ChainEnd, DynamoStore, ExecutionRecord, ExecutionStore, Status};

/// The chains of a stage: their records and their state machines.
///
/// Generic over the store and the orchestrator so that the deterministic simulation's
/// operator reruns, skips and cancels chain runs with this very code, over the in-memory
/// store and the state machine it plays; what ships is DynamoDB and Step Functions.
#[derive(Debug, Clone)]
pub struct ChainRuns<S = DynamoStore, O = SfnOrchestrator> {
    /// The table's listing by job (its index): only [`ChainRuns::list`] needs it.
    listing: Option<Records>,
    /// The table's name, for errors.
    table: String,
    pub(super) store: S,
    pub(super) orchestrator: O,
    chains: BTreeMap<String, Chain>,
    machines: BTreeMap<String, String>,
}

/// One run of a chain, stage by stage.
#[derive(Debug, Clone, Serialize)]
pub struct ChainView {
    /// The chain key.
    pub key: String,
    /// The chain's name.
    pub chain: String,
    /// The run's record status: RUNNING, DONE or PAUSED.
    pub status: Status,
    /// Which run: 1, then one more per rerun.
    pub run: u32,
    /// The current run's Step Functions execution.
    pub execution: Option<String>,
    /// What Step Functions says of that execution, asked only while the run is RUNNING:
    /// `FAILED`, `TIMED_OUT` or `ABORTED` there means the run stopped without an outcome
    /// (and can be rerun).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub execution_status: Option<String>,
    /// When the run was due.
    pub scheduled_for: String,
    /// The run's trace: the chain run's and every step's spans (its key's).
    pub trace_id: String,
    /// When the first run started.
    pub started_at: Option<String>,
    /// When the record last changed.
    pub updated_at: String,
    /// When the run ended (DONE or PAUSED).
    pub finished_at: Option<String>,
    /// For a paused run: which steps failed, and why.
    pub last_error: Option<String>,
    /// For a cancelled run: who cancelled it, when and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cancelled: Option<crate::store::OperatorNote>,
    /// The stages in order, each with its steps.
    pub stages: Vec<Vec<StepView>>,
}

/// One step of a chain run, from its record.
#[derive(Debug, Clone, Serialize)]
pub struct StepView {
    /// The step's name in the chain.
    pub step: String,
    /// The queue job it runs.
    pub job: String,
    /// Its execution key: `<chain key>#<step>`.
    pub key: String,
    /// Its record's status; None when it has not started.
    pub status: Option<Status>,
    /// Attempts over every round (a rerun starts a new round).
    pub attempts: u32,
    /// How long its latest finished attempt took.
    pub duration_ms: Option<u64>,
    /// Its latest failed attempt's error.
    pub last_error: Option<String>,
    /// For a step an operator skipped after it failed: who, when and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<crate::store::OperatorNote>,
    /// For a step cancelled: who, when and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cancelled: Option<crate::store::OperatorNote>,
}

/// What a rerun did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Rerun {
    /// A new execution runs the steps that are not DONE (`steps`), as run `run`.
    Started {
        /// The new execution's name.
        execution: String,
        /// Which run it is (2 for the first rerun).
        run: u32,
        /// The steps whose records are not DONE.
        steps: Vec<String>,
    },
    /// The failed execution was redriven (`--redrive`, AWS only).
    Redriven {
        /// The execution's name.
        execution: String,
    },
    /// The run is running already: nothing was done.
    AlreadyRunning {
        /// The running execution's name.
        execution: String,
    },
    /// The run's execution had ended with every step DONE while its record still said
    /// RUNNING (its end was never recorded): the record is DONE now; nothing to rerun.
    Reconciled {
        /// The execution that ended.
        execution: String,
    },
}

impl ChainRuns {
    /// The catalog's chains as deployed on `stage`: state machines `schedkit-<stage>.<chain>`
    /// in the region and account of the stage's jobs queue.
    pub fn new(sdk: &SdkConfig, stage: &super::stage::Stage, catalog: &Catalog) -> ChainRuns {
        let machines = catalog
            .chains
            .keys()
            .map(|c| (c.clone(), stage.state_machine_arn(c)))
            .collect();
        ChainRuns::with_state_machines(sdk, &stage.table, catalog, machines)
    }

    /// The catalog's chains with their records in `table` and their state machines' ARNs
    /// given by chain.
    pub fn with_state_machines(
        sdk: &SdkConfig,
        table: &str,
        catalog: &Catalog,
        machines: BTreeMap<String, String>,
    ) -> ChainRuns {
        let mut runs = ChainRuns::over(
            DynamoStore::new(aws_sdk_dynamodb::Client::new(sdk), table),
            SfnOrchestrator::new(aws_sdk_sfn::Client::new(sdk)),
            table,
            catalog,
            machines,
        );
        runs.listing = Some(Records::new(sdk, table));
        runs
    }
}

impl<S: ExecutionStore, O: Orchestrator> ChainRuns<S, O> {
    /// The catalog's chains over any store and orchestrator, their state machines' ARNs
    /// given by chain; `table` names the store in errors. [`ChainRuns::list`] needs the
    /// table's index and is refused; everything else works.
    pub fn over(
        store: S,
        orchestrator: O,
        table: &str,
        catalog: &Catalog,
        machines: BTreeMap<String, String>,
    ) -> ChainRuns<S, O> {
        ChainRuns {
            listing: None,
            table: table.into(),
            store,
            orchestrator,
            chains: catalog.chains.clone(),
            machines,
        }
    }

    /// One record by key, whole (a consistent read).
    pub(super) async fn read(&self, key: &str) -> Result<Option<ExecutionRecord>, OpsError> {
        self.store
            .get(key)
            .await
            .map_err(|e| read_error(&self.table, e))
    }

    /// Up to `limit` runs of the catalog's chains, newest (by scheduled time) first.
    pub async fn list(&self, limit: i32) -> Result<Vec<ExecutionRecord>, OpsError> {
        let Some(listing) = &self.listing else {
            return Err(OpsError::Refused(format!(
                "listing the chain runs of {} needs its index by job (a DynamoDB table)",
                self.table
            )));
        };
        let mut runs = Vec::new();
        for chain in self.chains.keys() {
            runs.extend(listing.recent_of(chain, limit).await?);
        }
        runs.sort_by(|a, b| {
            (&b.scheduled_for, &b.execution_key).cmp(&(&a.scheduled_for, &a.execution_key))
        });
        runs.truncate(usize::try_from(limit).unwrap_or(0));
        Ok(runs)
    }

    /// The run `key` with each step's record (one read per step); None when there is no
    /// such record.
    pub async fn show(&self, key: &str) -> Result<Option<ChainView>, OpsError> {
        let Some(run) = self.read(key).await? else {
            return Ok(None);
        };
        let chain = self.chain_of(&run)?;
        let execution = run.owner.clone();
        let execution_status = match (&execution, run.status) {
            (Some(name), Status::Running) => {
                self.execution(&chain.name, name).await?.map(|e| e.status)
            }
            _ => None,
        };
        let mut stages = Vec::new();
        for stage in &chain.stages {
            let mut steps = Vec::new();
            for step in &stage.steps {
                let step_key = step_key(key, &step.name);
                let record = self.read(&step_key).await?;
                steps.push(StepView {
                    step: step.name.clone(),
                    job: step.job.clone(),
                    status: record.as_ref().map(|r| r.status),
                    attempts: record.as_ref().map_or(0, |r| r.attempt),
                    duration_ms: record.as_ref().and_then(|r| r.duration_ms),
                    skipped: record.as_ref().and_then(|r| r.skipped.clone()),
                    cancelled: record.as_ref().and_then(|r| r.cancelled.clone()),
                    last_error: record.and_then(|r| r.last_error),
                    key: step_key,
                });
            }
            stages.push(steps);
        }
        Ok(Some(ChainView {
            trace_id: crate::telemetry::trace_ids::trace_id_hex(&run.execution_key),
            key: run.execution_key,
            chain: chain.name.clone(),
            status: run.status,
            run: run.attempt,
            execution,
            execution_status,
            scheduled_for: run.scheduled_for,
            started_at: run.started_at,
            updated_at: run.updated_at,
            finished_at: run.finished_at,
            last_error: run.last_error,
            cancelled: run.cancelled,
            stages,
        }))
    }

    /// Reruns the chain run `key` from its failed step: a new execution under the same
    /// key, or with `redrive` Step Functions' RedriveExecution of a failed execution (AWS;
    /// LocalStack does not emulate it). A DONE run, or one that is running, is left as it
    /// is ([`OpsError::Refused`], [`Rerun::AlreadyRunning`]).
    pub async fn rerun(
        &self,
        key: &str,
        redrive: bool,
        now: DateTime<Utc>,
    ) -> Result<Rerun, OpsError> {
        let Some(run) = self.read(key).await? else {
            return Err(OpsError::Refused(format!("there is no chain run `{key}`")));
        };
        let chain = self.chain_of(&run)?.name.clone();
        let current = run
            .owner
            .clone()
            .unwrap_or_else(|| chain_execution_name(key, run.attempt));
        match run.status {
            Status::Paused if redrive => {
                return Err(OpsError::Refused(format!(
                    "`{key}` is PAUSED: its execution succeeded (a chain pauses by design), and RedriveExecution restarts only failed executions; rerun it without --redrive"
                )));
            }
            Status::Paused => {}
            Status::Running => {
                if let Some(done) = self
                    .rerun_running(key, &chain, &run, &current, redrive, now)
                    .await?
                {
                    return Ok(done);
                }
            }
            other => {
                return Err(OpsError::Refused(format!(
                    "`{key}` is {}: nothing to rerun (a chain run is rerun when PAUSED, or RUNNING with a failed execution)",
                    other.as_str()
                )));
            }
        }
        let next = run.attempt + 1;
        let execution = chain_execution_name(key, next);
        let recorded = self
            .store
            .rerun_chain(&run, &execution, now)
            .await
            .map_err(|e| store_error("recording the rerun", e))?;
        // Refused: by another actor, or by this very write, applied once already (the
        // SDK sends a request again when its answer did not come): the run as this write
        // leaves it, to the millisecond, is this rerun's.
        if recorded.is_none() {
            let now_run = self.read(key).await?;
            let ours = now_run.is_some_and(|r| {
                r.status == Status::Running
                    && r.attempt == next
                    && r.owner.as_deref() == Some(execution.as_str())
                    && r.updated_at == crate::store::timestamp(now)
            });
            if !ours {
                return Err(changed(key));
            }
        }
        let done = format!("run {next} of `{key}` recorded RUNNING (execution {execution})");
        let steps = self
            .reopen(key, &chain, now)
            .await
            .map_err(|e| e.after(&done))?;
        self.start(key, &chain, &execution)
            .await
            .map_err(|e| e.after(format!("{done}; steps reopened: {}", steps.join(", "))))?;
        Ok(Rerun::Started {
            execution,
            run: next,
            steps,
        })
    }

    /// A RUNNING run's rerun: left running, reconciled (its execution succeeded and its end
    /// was never recorded), redriven, or its stopped rerun's execution started; None when
    /// its execution stopped without an outcome (a new execution is started).
    async fn rerun_running(
        &self,
        key: &str,
        chain: &str,
        run: &ExecutionRecord,
        current: &str,
        redrive: bool,
        now: DateTime<Utc>,
    ) -> Result<Option<Rerun>, OpsError> {
        match self.execution(chain, current).await? {
            Some(e) if e.is_running() => {
                return Ok(Some(Rerun::AlreadyRunning {
                    execution: current.to_string(),
                }));
            }
            // The execution ended and its end was never recorded (lost, or refused).
            Some(e) if e.succeeded() => {
                let steps = self.steps_of(key, chain).await?;
                if steps
                    .iter()
                    .all(|(_, r)| r.as_ref().is_some_and(|r| r.status == Status::Done))
                {
                    let ended = self
                        .store
                        .end_chain(key, chain, current, &ChainEnd::Done, now)
                        .await
                        .map_err(|e| store_error("recording the run DONE", e))?;
                    if ended.is_err() {
                        return Err(changed(key));
                    }
                    return Ok(Some(Rerun::Reconciled {
                        execution: current.to_string(),
                    }));
                }
            }
            Some(_) if redrive => {
                // The redriven execution sends its failed steps again: reopened first,
                // or their records (FAILED) answer them as failed at once.
                let steps = self.reopen(key, chain, now).await?;
                self.orchestrator
                    .redrive_execution(&self.execution_arn(chain, current)?)
                    .await
                    .map_err(|mut e| {
                        e.doing.push_str(
                            " (without --redrive, a rerun starts a new execution instead)",
                        );
                        OpsError::from(e).after(format!("steps reopened: {}", steps.join(", ")))
                    })?;
                // A cancel between the read and the redrive found the execution ended and
                // stopped nothing: the run read again sees it, and the execution is stopped.
                self.unless_cancelled(key, chain, current).await?;
                return Ok(Some(Rerun::Redriven {
                    execution: current.to_string(),
                }));
            }
            // FAILED, TIMED_OUT or ABORTED: the run stopped without an outcome.
            Some(_) => {}
            // Recorded by a rerun that stopped before it started its execution.
            None if run.attempt > 1 => {
                let steps = self.reopen(key, chain, now).await?;
                self.start(key, chain, current)
                    .await
                    .map_err(|e| e.after(format!("steps reopened: {}", steps.join(", "))))?;
                return Ok(Some(Rerun::Started {
                    execution: current.to_string(),
                    run: run.attempt,
                    steps,
                }));
            }
            None => {
                return Err(OpsError::Refused(format!(
                    "`{key}` is RUNNING and its first execution has not started yet; the trigger's worker starts it"
                )));
            }
        }
        Ok(None)
    }

    /// The chain of the catalog `run` is a run of.
    pub(super) fn chain_of(&self, run: &ExecutionRecord) -> Result<&Chain, OpsError> {
        self.chains.get(&run.job).ok_or_else(|| {
            OpsError::Refused(format!(
                "`{}` is a run of `{}`, which is not a chain of the catalog (chains: {})",
                run.execution_key,
                run.job,
                self.chains.keys().cloned().collect::<Vec<_>>().join(", ")
            ))
        })
    }

    /// Every step of the run `key` in stage order, with its record (None: not started).
    pub(super) async fn steps_of(
        &self,
        key: &str,
        chain: &str,
    ) -> Result<Vec<(String, Option<ExecutionRecord>)>, OpsError> {
        let mut out = Vec::new();
        for step in self.chains[chain].stages.iter().flat_map(|s| &s.steps) {
            let record = self.read(&step_key(key, &step.name)).await?;
            out.push((step.name.clone(), record));
        }
        Ok(out)
    }

    /// The steps of the run `key` whose records are not DONE (what a rerun runs), the
    /// decided ones (FAILED, SKIPPED) reopened for a new round.
    async fn reopen(
        &self,
        key: &str,
        chain: &str,
        now: DateTime<Utc>,
    ) -> Result<Vec<String>, OpsError> {
        let mut steps = Vec::new();
        let mut reopened = Vec::new();
        for (step, record) in self.steps_of(key, chain).await? {
            match record {
                Some(r) if r.status == Status::Done => continue,
                Some(r) if matches!(r.status, Status::Failed | Status::Skipped) => {
                    let stopped = |e: OpsError| {
                        if reopened.is_empty() {
                            e
                        } else {
                            e.after(format!("steps reopened: {}", reopened.join(", ")))
                        }
                    };
                    let done =
                        self.store.reopen_step(&r, now).await.map_err(|e| {
                            stopped(store_error(&format!("reopening step {step}"), e))
                        })?;
                    // Refused: by another actor, or by this very write, applied once
                    // already (the SDK sends a request again when its answer did not
                    // come): the step REGISTERED at this reopen's time is this reopen's.
                    let done = done || {
                        let now_step = self.read(&r.execution_key).await.map_err(&stopped)?;
                        now_step.is_some_and(|n| {
                            n.status == Status::Registered
                                && n.updated_at == crate::store::timestamp(now)
                        })
                    };
                    if !done {
                        return Err(stopped(OpsError::Refused(format!(
                            "step `{step}` of `{key}` changed while it was being reopened; `chains rerun {key}` again"
                        ))));
                    }
                    reopened.push(step.clone());
                }
                _ => {}
            }
            steps.push(step);
        }
        Ok(steps)
    }

    /// Starts the execution `name` of the run `key` with its first run's input (Step
    /// Functions keeps it 90 days); an execution of that name and input is started already.
    async fn start(&self, key: &str, chain: &str, name: &str) -> Result<(), OpsError> {
        // The run as it is now: a `chains cancel` that came after the rerun recorded it
        // (the run CANCELLED while its execution had not started, so nothing was stopped)
        // keeps the execution from starting. One that comes between this read and the
        // start is seen by the read after the start, which stops the execution.
        match self.read(key).await? {
            Some(r) if r.status == Status::Running && r.owner.as_deref() == Some(name) => {}
            other => {
                let now = other.map_or_else(|| "gone".to_string(), |r| r.status.to_string());
                return Err(OpsError::Refused(format!(
                    "`{key}` is {now}, no longer the run execution {name} was to carry on (cancelled while it was being rerun?): the execution was not started"
                )));
            }
        }
        let first = chain_execution_name(key, 1);
        let Some(original) = self.execution(chain, &first).await? else {
            return Err(OpsError::Refused(format!(
                "the first execution of `{key}` ({first}) is gone, and with it the run's input"
            )));
        };
        let machine = self.machine(chain)?;
        let input = original.input.as_deref().unwrap_or("{}");
        match self
            .orchestrator
            .start_execution(machine, name, input)
            .await
        {
            Ok(()) | Err(StartError::AlreadyExists) => {
                self.unless_cancelled(key, chain, name).await
            }
            Err(StartError::Refused(answer) | StartError::Unavailable(answer)) => {
                // The orchestrator's answer is its text alone: no code is made up from it.
                Err(OpsError::Aws(AwsError {
                    doing: format!(
                        "starting execution {name} of {machine} (the run is recorded RUNNING; `chains rerun {key}` again starts it)"
                    ),
                    code: None,
                    answer,
                }))
            }
        }
    }

    /// After the start (or the redrive) of the execution `name` of run `key`: a `chains
    /// cancel` that came between the read before it and it found nothing to stop; the run
    /// read again now sees it (it recorded CANCELLED before it looked), and the execution
    /// is stopped.
    async fn unless_cancelled(&self, key: &str, chain: &str, name: &str) -> Result<(), OpsError> {
        match self.read(key).await? {
            Some(r) if r.status == Status::Cancelled => {
                let arn = self.execution_arn(chain, name)?;
                crate::orchestrator::stop_unless_ended(
                    &self.orchestrator,
                    &arn,
                    "schedkit.cancelled",
                    "its chain run was cancelled while it was being rerun",
                )
                .await?;
                Err(OpsError::Refused(format!(
                    "`{key}` was cancelled while it was being rerun: its execution {name} was stopped"
                )))
            }
            _ => Ok(()),
        }
    }

    /// The execution `name` of `chain`'s state machine; None when it does not exist.
    pub(super) async fn execution(
        &self,
        chain: &str,
        name: &str,
    ) -> Result<Option<ExecutionInfo>, OpsError> {
        let arn = self.execution_arn(chain, name)?;
        Ok(self.orchestrator.describe_execution(&arn).await?)
    }

    fn machine(&self, chain: &str) -> Result<&str, OpsError> {
        self.machines.get(chain).map(String::as_str).ok_or_else(|| {
            OpsError::Refused(format!("no state machine is known for chain `{chain}`"))
        })
    }

    /// `arn:…:execution:<machine>:<name>` from the machine's `arn:…:stateMachine:<machine>`.
    pub(super) fn execution_arn(&self, chain: &str, name: &str) -> Result<String, OpsError> {
        Ok(crate::orchestrator::execution_arn(
            self.machine(chain)?,
            name,
        ))
    }
}

/// The run changed between its reading and a conditional write.
fn changed(key: &str) -> OpsError {
    OpsError::Refused(format!(
        "`{key}` changed while it was being rerun (another rerun, or its outcome, came first); look again with `chains show`"
    ))
}

pub(super) fn store_error(doing: &str, e: crate::store::StoreError) -> OpsError {
    OpsError::Aws(AwsError {
        doing: doing.into(),
        answer: e.to_string(),
        code: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::orchestrator::MemoryOrchestrator;
    use crate::store::{ClaimRequest, MemoryStore};

    /// Two operators: one's rerun has recorded run 2 (its execution not yet started) when
    /// the other's `chains cancel` comes, finds no execution to stop and ends the run
    /// CANCELLED. The rerun then goes on to start its execution: it must not, or a
    /// CANCELLED run has a live execution that its cancel said was not running.
    #[tokio::test]
    async fn a_reruns_execution_is_not_started_once_its_run_was_cancelled_meanwhile() {
        let catalog = Catalog::parse(
            "[jobs.a]\nowner = \"o\"\n[chains.c]\nowner = \"o\"\nstages = [\"a\"]\n",
            "catalog.toml",
        )
        .unwrap();
        let (store, orchestrator) = (MemoryStore::default(), MemoryOrchestrator::default());
        let machines = BTreeMap::from([("c".to_string(), "machine:c".to_string())]);
        let runs = ChainRuns::over(store.clone(), orchestrator.clone(), "t", &catalog, machines);
        let key = "c#2026-12-01T18:00:00Z";
        let now: DateTime<Utc> = "2026-12-01T18:00:00Z".parse().unwrap();
        let first = chain_execution_name(key, 1);
        store
            .start_chain(&ClaimRequest {
                key: key.into(),
                job: "c".into(),
                scheduled_for: "2026-12-01T18:00:00Z".into(),
                payload_hash: "h".into(),
                input: "{}".into(),
                message_id: None,
                owner: first.clone(),
                now,
                lease: std::time::Duration::from_secs(60),
                retention: std::time::Duration::from_secs(3600),
                redrive: None,
            })
            .await
            .unwrap();
        orchestrator
            .start_execution("machine:c", &first, r#"{"chain_key":"x"}"#)
            .await
            .unwrap();
        let paused = ChainEnd::Paused {
            failed: "step `a` failed".into(),
            stage: "{}".into(),
        };
        store
            .end_chain(key, "c", &first, &paused, now)
            .await
            .unwrap()
            .unwrap();
        orchestrator.lock().closed.push(first.clone());
        // The rerun's first write, then the other operator's cancel.
        let second = chain_execution_name(key, 2);
        let read = store.get(key).await.unwrap().unwrap();
        assert!(
            store
                .rerun_chain(&read, &second, now)
                .await
                .unwrap()
                .is_some()
        );
        // Run 2's execution had not started: the stop sent to it (Step Functions may not
        // describe one started a moment ago) finds none.
        let cancelled = runs.cancel(key, "bo", "not today", now).await.unwrap();
        assert_eq!(cancelled.stopped.as_deref(), Some(second.as_str()));

        let started = runs.start(key, "c", &second).await;
        assert!(
            matches!(&started, Err(OpsError::Refused(m)) if m.contains("CANCELLED")),
            "{started:?}"
        );
        assert!(
            !orchestrator.lock().executions.contains_key(&second),
            "a CANCELLED run's execution was started"
        );
    }

    #[test]
    fn an_execution_arn_is_its_state_machine_arn_with_the_name() {
        let sdk = aws_config::SdkConfig::builder()
            .behavior_version(aws_config::BehaviorVersion::latest())
            .build();
        let catalog = Catalog::parse(
            "[jobs.a]\nowner = \"o\"\n[chains.c]\nowner = \"o\"\nstages = [\"a\"]\n",
            "catalog.toml",
        )
        .unwrap();
        let runs = ChainRuns::with_state_machines(
            &sdk,
            "t",
            &catalog,
            BTreeMap::from([(
                "c".to_string(),
                "arn:aws:states:eu-west-1:123456789012:stateMachine:schedkit-dev.c".to_string(),
            )]),
        );
        assert_eq!(
            runs.execution_arn("c", "c_2026-x").unwrap(),
            "arn:aws:states:eu-west-1:123456789012:execution:schedkit-dev.c:c_2026-x"
        );
        assert!(matches!(
            runs.execution_arn("d", "x"),
            Err(OpsError::Refused(_))
        ));
    }
}
