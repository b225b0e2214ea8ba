//! The validated catalog: its jobs with their policies and schedules, its chains, its
//! settings. Built only by validation (`validate.rs`), read by everything else.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Map, Value};

use super::chains::Chain;
use super::deadlines;
use super::error::CatalogError;
use super::limits::{JobLimits, Limit};
use super::model::{JobSpec, Settings};
use crate::job::JobPolicy;
use crate::key::KeyTemplate;
use crate::retry::RetryPolicy;
use crate::schedule::Schedule;

/// Where a job's envelopes go: the worker's jobs queue, the one target a job has (a chain
/// is `[chains.<name>]`, whose steps are jobs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// The worker's jobs queue.
    Queue,
}

/// A validated job.
#[derive(Debug, Clone)]
pub struct Job {
    /// The name under `[jobs.<name>]`; envelopes and the worker's registry use it.
    pub name: String,
    /// The job's table as written, for what the policy does not carry (owner, payload).
    pub spec: JobSpec,
    /// Where its envelopes go, parsed from `spec.target`.
    pub target: Target,
    /// The worker's policy for this job.
    pub policy: JobPolicy,
    /// The parsed schedule, when the job has one.
    pub schedule: Option<Schedule>,
    /// What limits its runs: shared limits, its own concurrency, how long a run may wait.
    pub limits: JobLimits,
}

impl Job {
    /// The implementation it runs (`handler`, else its own name).
    pub fn handler(&self) -> &str {
        self.spec.handler.as_deref().unwrap_or(&self.name)
    }

    /// The payload scheduled runs carry (empty when none is given).
    pub fn payload(&self) -> Map<String, Value> {
        self.spec.payload.clone().unwrap_or_default()
    }
}

/// A validated catalog.
#[derive(Debug, Clone)]
pub struct Catalog {
    /// The file it was read from (for messages).
    pub file: String,
    /// Settings shared by every job, defaults filled in.
    pub settings: Settings,
    /// Every job, validated, by name.
    pub jobs: BTreeMap<String, Job>,
    /// Every chain, validated, by name.
    pub chains: BTreeMap<String, Chain>,
    /// Every shared limit, validated, by name.
    pub limits: BTreeMap<String, Limit>,
    /// What is allowed but worth saying (a one-time job whose time has passed): printed by
    /// `catalog check` and sync, never a reason to refuse to start.
    pub warnings: Vec<CatalogError>,
}

impl Catalog {
    /// The job called `name`, if the catalog lists it.
    pub fn job(&self, name: &str) -> Option<&Job> {
        self.jobs.get(name)
    }

    /// The chain called `name`, if the catalog lists it.
    pub fn chain(&self, name: &str) -> Option<&Chain> {
        self.chains.get(name)
    }

    /// The jobs that have a schedule.
    pub fn scheduled(&self) -> impl Iterator<Item = &Job> {
        self.jobs.values().filter(|j| j.schedule.is_some())
    }
}

/// How much longer than a command's `grace_seconds` its retry waits at least.
const COMMAND_RETRY_MARGIN_SECONDS: u32 = 2;

/// The worker policy a job spec describes (the spec is already validated).
pub(super) fn policy(spec: &JobSpec, settings: &Settings) -> JobPolicy {
    let secs = |s: u32| Duration::from_secs(u64::from(s));
    let lease = secs(spec.lease_seconds);
    let retention_days = spec
        .record_retention_days
        .unwrap_or(settings.queue_retention_days + settings.dlq_retention_days + 3);
    // A command's retry waits until its previous attempt's process group is surely gone:
    // an attempt ended early gives it SIGTERM, then SIGKILL `grace_seconds` later.
    let floor = spec
        .command
        .as_ref()
        .map_or(0, |c| c.grace_seconds + COMMAND_RETRY_MARGIN_SECONDS);
    JobPolicy {
        retry: RetryPolicy {
            max_attempts: spec.retry.max_attempts,
            first_delay: secs(spec.retry.first_delay_seconds.max(floor)),
            base_delay: secs(spec.retry.base_delay_seconds.max(floor)),
            max_delay: secs(spec.retry.max_delay_seconds.max(floor)),
        },
        lease,
        heartbeat: Some(spec.heartbeat_seconds.map(secs).unwrap_or(lease / 4)),
        // Every job has a timeout: where it runs decides it when the catalog gives none.
        timeout: Some(secs(spec.timeout(settings))),
        key_template: spec
            .key_template
            .as_deref()
            .map(|t| t.parse::<KeyTemplate>().expect("validated")),
        record_retention: Duration::from_secs(u64::from(retention_days) * 86_400),
        overlap: spec.overlap,
        pause_after_failures: spec
            .pause_after_failures
            .map(|n| std::num::NonZeroU32::new(n).expect("validated")),
        // Filled in once the shared limits are checked (`JobLimits::flow`).
        flow: crate::flow::FlowControl::default(),
    }
}

impl Job {
    /// When its runs must be DONE after their scheduled time: its `deadline`, or for a
    /// scheduled job the default; None for an unscheduled job that gives none.
    pub fn deadline(&self) -> Option<Duration> {
        if let Some(text) = &self.spec.deadline {
            return deadlines::parse(text).ok();
        }
        self.schedule.as_ref()?;
        let minutes = self
            .spec
            .schedule
            .as_ref()
            .map(|s| s.flexible_window_minutes);
        Some(
            deadlines::worst_case(&self.policy)
                + deadlines::window(minutes)
                + deadlines::DEADLINE_MARGIN,
        )
    }
}

impl Chain {
    /// When its runs must be DONE: its `deadline`, or for a scheduled chain the sum over
    /// its stages of their slowest step's worst case, with the window and the margin.
    pub fn deadline(&self, catalog: &Catalog) -> Option<Duration> {
        if let Some(text) = &self.spec.deadline {
            return deadlines::parse(text).ok();
        }
        self.schedule.as_ref()?;
        let stages = self.stages.iter().map(|stage| {
            stage
                .steps
                .iter()
                .filter_map(|step| catalog.jobs.get(&step.job))
                .map(|job| deadlines::worst_case(&job.policy))
                .max()
                .unwrap_or_default()
        });
        let minutes = self
            .spec
            .schedule
            .as_ref()
            .map(|s| s.flexible_window_minutes);
        Some(stages.sum::<Duration>() + deadlines::window(minutes) + deadlines::DEADLINE_MARGIN)
    }
}
