//! Chains in the catalog (`[chains.<name>]`): an ordered list of stages, each one step or a
//! parallel group of steps, each step a queue job of the same catalog. A sequence of
//! stages covers the chains teams run (most are plain sequences, some fan out once);
//! arbitrary graphs are left out on purpose.
//!
//! ```toml
//! [chains.month-end]
//! owner = "finance"
//! stages = ["close-books", ["issue-invoices", "export-ledger"], "month-report"]
//!
//! [chains.month-end.steps.export-ledger]
//! job = "partner-export"          # default: the job named like the step
//! payload = { format = "csv" }
//! ```

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::error::CatalogError;
use super::model::{ChainSpec, JobSpec, Settings, StageSpec};
use super::rules::{check_schedule, name_rule, valid_name};
use crate::schedule::Schedule;

/// A validated chain.
#[derive(Debug, Clone)]
pub struct Chain {
    /// The name under `[chains.<name>]`: its trigger envelopes carry it as their `job`,
    /// and its state machine and keys are named after it.
    pub name: String,
    /// The chain's table as written (owner, description, payload).
    pub spec: ChainSpec,
    /// The stages, in order.
    pub stages: Vec<Stage>,
    /// The parsed schedule, when the chain has one.
    pub schedule: Option<Schedule>,
}

/// One stage: its steps run side by side (one step: a plain step), and the next stage
/// starts when all of them are DONE.
#[derive(Debug, Clone, PartialEq)]
pub struct Stage {
    /// The steps, as listed.
    pub steps: Vec<Step>,
}

/// One step of a chain.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// Unique in its chain: the step's record is keyed `<chain key>#<step>`.
    pub name: String,
    /// The queue job it runs.
    pub job: String,
    /// The step's own payload (empty when none is given).
    pub payload: Map<String, Value>,
}

impl Chain {
    /// Every step, stage by stage.
    pub fn steps(&self) -> impl Iterator<Item = &Step> {
        self.stages.iter().flat_map(|s| s.steps.iter())
    }

    /// The step called `name`.
    pub fn step(&self, name: &str) -> Option<&Step> {
        self.steps().find(|s| s.name == name)
    }

    /// The payload scheduled runs start the chain with (empty when none is given).
    pub fn payload(&self) -> Map<String, Value> {
        self.spec.payload.clone().unwrap_or_default()
    }
}

/// Checks every chain against the catalog's jobs; errors and warnings name file, chain and
/// field.
pub(super) fn check_chains(
    chains: &BTreeMap<String, ChainSpec>,
    jobs: &BTreeMap<String, JobSpec>,
    settings: &Settings,
    file: &str,
    now: chrono::DateTime<chrono::Utc>,
    errors: &mut Vec<CatalogError>,
    warnings: &mut Vec<CatalogError>,
) -> Vec<Chain> {
    let mut out = Vec::new();
    for (name, spec) in chains {
        let problem = |field: &str, message: String| CatalogError {
            file: file.to_string(),
            job: None,
            chain: Some(name.clone()),
            field: Some(field.to_string()),
            message,
        };
        let before = errors.len();
        let mut fail = |field: &str, message: String| errors.push(problem(field, message));
        if !valid_name(name) {
            fail("name", name_rule(name));
        }
        if jobs.contains_key(name) {
            fail(
                "name",
                format!(
                    "`{name}` is also a job: a chain is started through the jobs queue under its name, so chains and jobs need different names"
                ),
            );
        }
        if spec.owner.trim().is_empty() {
            fail("owner", "must name who to ask when the chain pauses".into());
        }
        if spec.stages.is_empty() {
            fail("stages", "a chain needs at least one stage".into());
        }
        if let Some(p) = spec.priority
            && !crate::envelope::PRIORITIES.contains(&p)
        {
            let range = crate::envelope::PRIORITIES;
            fail(
                "priority",
                format!("{p} is outside {}..={}", range.start(), range.end()),
            );
        }
        let stages = check_stages(name, spec, jobs, &mut fail);
        if let Some(text) = &spec.deadline {
            // One attempt of the chain: its slowest step's one attempt.
            let budget = stages
                .iter()
                .flat_map(|stage| &stage.steps)
                .filter_map(|step| jobs.get(&step.job))
                .map(|job| super::deadlines::spec_attempt_budget(job, settings))
                .max()
                .unwrap_or_default();
            let window = super::deadlines::window(
                spec.schedule
                    .as_ref()
                    .map(|sched| sched.flexible_window_minutes),
            );
            if let Err(e) = super::deadlines::check_with_window(text, budget, window) {
                fail("deadline", e);
            }
        }
        let schedule = spec.schedule.as_ref().and_then(|sched| {
            check_schedule(sched, now, &mut |warning, field, message| {
                if warning {
                    warnings.push(problem(field, message));
                } else {
                    errors.push(problem(field, message));
                }
            })
        });
        if errors.len() == before {
            out.push(Chain {
                name: name.clone(),
                spec: spec.clone(),
                stages,
                schedule,
            });
        }
    }
    out
}

/// A chain's stages: every step named once, each running a job of the catalog that lets
/// its runs overlap; a declared step that is in no stage is an error too.
fn check_stages(
    name: &str,
    spec: &ChainSpec,
    jobs: &BTreeMap<String, JobSpec>,
    fail: &mut dyn FnMut(&str, String),
) -> Vec<Stage> {
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    let mut stages = Vec::new();
    for (i, stage) in spec.stages.iter().enumerate() {
        let field = format!("stages.{i}");
        let names: Vec<&String> = match stage {
            StageSpec::Step(step) => vec![step],
            StageSpec::Parallel(steps) => steps.iter().collect(),
        };
        if names.is_empty() {
            fail(
                &field,
                format!("stage {i} is an empty list: give it a step, or remove it"),
            );
        }
        let mut steps = Vec::new();
        for step in names {
            if !valid_name(step) {
                fail(&field, name_rule(step));
                continue;
            }
            if let Some(first) = seen.insert(step, i) {
                fail(
                    &field,
                    format!(
                        "step `{step}` is in stage {first} already: a step's name keys its record, so each step is listed once (give the second one another name and `[chains.{name}.steps.<name>] job = ...`)"
                    ),
                );
                continue;
            }
            steps.push(check_step(spec, step, &field, jobs, fail));
        }
        stages.push(Stage { steps });
    }
    for step in spec.steps.keys() {
        if !seen.contains_key(step.as_str()) {
            fail(
                &format!("steps.{step}"),
                format!("step `{step}` is in no stage: list it in `stages`, or remove it"),
            );
        }
    }
    stages
}

/// One step of a stage (`field`): the job it runs, checked against the catalog's jobs.
fn check_step(
    spec: &ChainSpec,
    step: &str,
    field: &str,
    jobs: &BTreeMap<String, JobSpec>,
    fail: &mut dyn FnMut(&str, String),
) -> Step {
    let declared = spec.steps.get(step);
    let job = declared
        .and_then(|d| d.job.clone())
        .unwrap_or_else(|| step.to_string());
    let job_field = if declared.is_some_and(|d| d.job.is_some()) {
        format!("steps.{step}.job")
    } else {
        field.to_string()
    };
    match jobs.get(&job) {
        None => fail(
            &job_field,
            format!(
                "step `{step}` runs job `{job}`, which is not in the catalog (jobs: {})",
                jobs.keys().cloned().collect::<Vec<_>>().join(", ")
            ),
        ),
        Some(j) if j.overlap != crate::job::Overlap::Allow => fail(
            &job_field,
            format!(
                "step `{step}` runs job `{job}`, whose overlap is `{}`: a chain runs each step when its stage comes and never skips or holds one back (a skipped step could never run); give the chain a job of its own, or let `{job}` overlap",
                serde_json::to_value(j.overlap)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default()
            ),
        ),
        Some(_) => {}
    }
    Step {
        name: step.to_string(),
        job,
        payload: declared.and_then(|d| d.payload.clone()).unwrap_or_default(),
    }
}
