//! The job catalog: one file (`infra/catalog.toml`) that lists every job with its schedule,
//! payload, key template, retry policy, lease, owner and target. Schedule sync, the worker's
//! per-job policies, previews and the IaC all read it: one source of truth.
//!
//! Loading validates everything before anything deploys, and every error names the file,
//! the job and the field.

mod chains;
pub mod model;
mod validate;

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::time::Duration;

use serde_json::{Map, Value};

use crate::job::JobPolicy;
use crate::key::KeyTemplate;
use crate::retry::RetryPolicy;
use crate::schedule::Schedule;
pub use chains::{Chain, Stage, Step};
pub use model::{
    CatalogFile, ChainSpec, JobSpec, RetrySpec, ScheduleSpec, Settings, StageSpec, StepSpec,
};

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
}

impl Job {
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
    /// What is allowed but worth saying (a one-time job whose time has passed): printed by
    /// `catalog check` and sync, never a reason to refuse to start.
    pub warnings: Vec<CatalogError>,
}

/// One problem in a catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogError {
    /// The catalog file the problem is in, as it was given.
    pub file: String,
    /// The job at fault; None for a problem with the file, `[settings]` or a chain.
    pub job: Option<String>,
    /// The chain at fault (`[chains.<name>]`), when it is one.
    pub chain: Option<String>,
    /// The field at fault, dotted (`schedule.timezone`); None when no single field is.
    pub field: Option<String>,
    /// What is wrong, and usually what is allowed.
    pub message: String,
}

impl fmt::Display for CatalogError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.file)?;
        if let Some(job) = &self.job {
            write!(f, "job `{job}`: ")?;
        }
        if let Some(chain) = &self.chain {
            write!(f, "chain `{chain}`: ")?;
        }
        if let Some(field) = &self.field {
            write!(f, "field `{field}`: ")?;
        }
        f.write_str(&self.message)
    }
}

/// Every problem found in a catalog (validation does not stop at the first).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct CatalogErrors(pub Vec<CatalogError>);

impl fmt::Display for CatalogErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl Catalog {
    /// Reads and validates a catalog file.
    pub fn load(path: &Path) -> Result<Catalog, CatalogErrors> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| {
            CatalogErrors(vec![CatalogError {
                file: file.clone(),
                job: None,
                chain: None,
                field: None,
                message: format!("cannot read it: {e}"),
            }])
        })?;
        Catalog::parse(&text, &file)
    }

    /// Validates catalog text; `file` names it in messages.
    pub fn parse(text: &str, file: &str) -> Result<Catalog, CatalogErrors> {
        let raw = validate::deserialize(text, file)?;
        validate::validate(raw, file)
    }

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

/// The worker policy a job spec describes (the spec is already validated).
fn policy(spec: &JobSpec, settings: &Settings) -> JobPolicy {
    let secs = |s: u32| Duration::from_secs(u64::from(s));
    let lease = secs(spec.lease_seconds);
    let retention_days = spec
        .record_retention_days
        .unwrap_or(settings.queue_retention_days + settings.dlq_retention_days + 3);
    JobPolicy {
        retry: RetryPolicy {
            max_attempts: spec.retry.max_attempts,
            first_delay: secs(spec.retry.first_delay_seconds),
            base_delay: secs(spec.retry.base_delay_seconds),
            max_delay: secs(spec.retry.max_delay_seconds),
        },
        lease,
        heartbeat: Some(spec.heartbeat_seconds.map(secs).unwrap_or(lease / 4)),
        // Every job has a timeout: the function's when the catalog gives none.
        timeout: Some(secs(
            spec.timeout_seconds
                .unwrap_or(settings.function_timeout_seconds),
        )),
        key_template: spec
            .key_template
            .as_deref()
            .map(|t| t.parse::<KeyTemplate>().expect("validated")),
        record_retention: Duration::from_secs(u64::from(retention_days) * 86_400),
        overlap: spec.overlap,
        pause_after_failures: spec
            .pause_after_failures
            .map(|n| std::num::NonZeroU32::new(n).expect("validated")),
    }
}
