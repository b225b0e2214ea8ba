//! Jobs and the registry the worker looks them up in.
//!
//! A job is an async function from a [`JobContext`] to a small JSON result. It never retries
//! by itself: it returns [`JobError::Retryable`] or [`JobError::Permanent`] and the batch
//! adapter decides what happens next from the job's [`JobPolicy`].

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::Value;
use tokio::sync::watch;

use crate::effects::Effects;
use crate::key::KeyTemplate;
use crate::retry::RetryPolicy;

/// A boxed, sendable future: what a job returns.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// What a job returns: a small JSON result kept on the record, or why it failed.
pub type JobResult = Result<Value, JobError>;

/// A job's failure, and whether trying again can help.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JobError {
    /// Worth another attempt (a timeout, a throttled dependency).
    #[error("{0}")]
    Retryable(String),
    /// Will fail the same way every time (bad input): no further attempt.
    #[error("{0}")]
    Permanent(String),
}

impl JobError {
    /// A failure worth another attempt while the round has attempts left.
    pub fn retryable(msg: impl Into<String>) -> Self {
        JobError::Retryable(msg.into())
    }
    /// A failure no retry can fix: the run ends FAILED and goes to the DLQ.
    pub fn permanent(msg: impl Into<String>) -> Self {
        JobError::Permanent(msg.into())
    }
}

/// Everything a job may know about the run it performs.
#[derive(Debug, Clone)]
pub struct JobContext {
    /// The job's name, as the envelope gave it.
    pub job: String,
    /// The execution key: use it to make external side effects idempotent.
    pub key: String,
    /// When the run was due, not when it started: base date ranges on it.
    pub scheduled_for: DateTime<Utc>,
    /// The envelope's payload (an object, empty when the envelope had none).
    pub payload: Value,
    /// Attempt number within the current round, from 1.
    pub attempt: u32,
    lease_lost: watch::Receiver<bool>,
    effects: Effects,
    chain: Option<ChainStep>,
}

/// The chain run a step belongs to, and what the steps of its earlier stages returned.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChainStep {
    /// The chain (`[chains.<name>]`).
    pub chain: String,
    /// The chain run's key; this step's key is `<chain key>#<step>`.
    pub chain_key: String,
    /// This step's name.
    pub step: String,
    /// The chain run's payload (its trigger's: the catalog's `payload` on scheduled runs,
    /// `fire --payload`); every step sees it beside its own.
    pub input: Value,
    /// Each DONE step of the earlier stages, by name: its result (the job's return value).
    pub outputs: std::collections::BTreeMap<String, Value>,
}

impl JobContext {
    /// Built by the batch adapter; `lease_lost` turns true once the lease is not confirmed, and
    /// `effects` is where the job's DynamoDB writes go to be committed with its outcome.
    pub fn new(
        job: String,
        key: String,
        scheduled_for: DateTime<Utc>,
        payload: Value,
        attempt: u32,
        lease_lost: watch::Receiver<bool>,
        effects: Effects,
    ) -> Self {
        JobContext {
            job,
            key,
            scheduled_for,
            payload,
            attempt,
            lease_lost,
            effects,
            chain: None,
        }
    }

    /// The same run, as a step of a chain run.
    pub fn with_chain(mut self, step: ChainStep) -> Self {
        self.chain = Some(step);
        self
    }

    /// The chain run this run is a step of, when it is one: later steps read what earlier
    /// ones returned here.
    pub fn chain(&self) -> Option<&ChainStep> {
        self.chain.as_ref()
    }

    /// Where to hand DynamoDB writes (on the job's own tables) instead of making them: they
    /// are committed in one transaction with the run's DONE record, so they are applied
    /// exactly once, whatever crashes (see [`crate::effects`]).
    pub fn effects(&self) -> &Effects {
        &self.effects
    }

    /// True once the lease is no longer confirmed (a heartbeat was refused, or none was
    /// confirmed in time): another worker may own this run now. The attempt is being
    /// cancelled (the job's future is dropped at its next await) and never completes as a
    /// success; a job that holds something outside the runtime can check this to let go.
    pub fn lease_lost(&self) -> bool {
        *self.lease_lost.borrow()
    }
}

/// A job: `run` is called once per claimed attempt.
pub trait Job: Send + Sync + 'static {
    /// One attempt; a panic or overrunning the policy's timeout counts as a retryable failure.
    fn run(&self, ctx: JobContext) -> BoxFuture<JobResult>;
}

/// Any `Fn(JobContext) -> impl Future<Output = JobResult>` is a job.
impl<F, Fut> Job for F
where
    F: Fn(JobContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = JobResult> + Send + 'static,
{
    fn run(&self, ctx: JobContext) -> BoxFuture<JobResult> {
        Box::pin(self(ctx))
    }
}

/// How the framework runs one job: retries, lease, keys.
#[derive(Debug, Clone)]
pub struct JobPolicy {
    /// Attempts per round and the backoff between them.
    pub retry: RetryPolicy,
    /// How long a claim stays exclusive without a heartbeat.
    pub lease: Duration,
    /// How often a running attempt renews its lease and its message's visibility.
    /// `None` turns heartbeats off: an attempt still running when its lease (less the
    /// clock-skew bound) runs out is then cancelled.
    pub heartbeat: Option<Duration>,
    /// An attempt running longer than this fails (retryably). The catalog always sets one
    /// (the function's timeout by default); `None` leaves only the lease and, in Lambda
    /// mode, the invocation's deadline to end a hung job.
    pub timeout: Option<Duration>,
    /// Derives the key from payload fields when the envelope carries none.
    pub key_template: Option<KeyTemplate>,
    /// How long records are kept (DynamoDB TTL). It must outlive every place a duplicate
    /// can still come from: the queue's and the DLQ's retention.
    pub record_retention: Duration,
    /// What a run that arrives while another run of the job is RUNNING does.
    pub overlap: Overlap,
    /// After this many consecutive FAILED runs the worker pauses the job's schedule (see
    /// [`crate::batch::FailureStreaks`]). `None`: failures never pause it.
    pub pause_after_failures: Option<std::num::NonZeroU32>,
}

/// A job's overlap policy: what happens to a run (another key of the same job) that arrives
/// while an earlier one is RUNNING. EventBridge Scheduler has none; schedkit enforces it in
/// the worker with conditional writes on a per-job slot (`crate::store::slot_key`). A chain's
/// steps never go through it: the catalog refuses it on a job that is a chain's step.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Overlap {
    /// Runs side by side (no slot, no extra request).
    #[default]
    Allow,
    /// Recorded SKIPPED and acknowledged.
    Skip,
    /// At most one waits (its message comes back until the slot is free); later ones are
    /// SKIPPED.
    BufferOne,
}

impl Default for JobPolicy {
    fn default() -> Self {
        let lease = Duration::from_secs(60);
        JobPolicy {
            retry: RetryPolicy::default(),
            lease,
            heartbeat: Some(lease / 4),
            timeout: None,
            key_template: None,
            // DLQ retention is 14 days, queue retention 4: keep records three weeks.
            record_retention: Duration::from_secs(21 * 24 * 60 * 60),
            overlap: Overlap::Allow,
            pause_after_failures: None,
        }
    }
}

impl JobPolicy {
    /// A policy with the given lease and heartbeats every quarter of it.
    pub fn with_lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self.heartbeat = Some(lease / 4);
        self
    }
}

/// A registered job with its policy.
#[derive(Clone)]
pub struct RegisteredJob {
    /// The code each claimed attempt runs.
    pub job: Arc<dyn Job>,
    /// How the framework runs it: retries, lease, heartbeats, timeout, key.
    pub policy: JobPolicy,
}

/// Job name → implementation and policy. Built once at start-up, shared by all messages.
#[derive(Clone, Default)]
pub struct Registry {
    jobs: BTreeMap<String, RegisteredJob>,
}

impl Registry {
    /// An empty registry; add jobs with [`Registry::register`].
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) a job.
    pub fn register(mut self, name: impl Into<String>, policy: JobPolicy, job: impl Job) -> Self {
        self.jobs.insert(
            name.into(),
            RegisteredJob {
                job: Arc::new(job),
                policy,
            },
        );
        self
    }

    /// Adds (or replaces) a job already behind an `Arc` (chosen at run time).
    pub fn register_shared(
        mut self,
        name: impl Into<String>,
        policy: JobPolicy,
        job: Arc<dyn Job>,
    ) -> Self {
        self.jobs.insert(name.into(), RegisteredJob { job, policy });
        self
    }

    /// The job registered as `name`; None makes its messages unknown-job dead letters.
    pub fn get(&self, name: &str) -> Option<&RegisteredJob> {
        self.jobs.get(name)
    }

    /// The registered names, sorted; the unknown-job error lists them.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.jobs.keys().map(String::as_str)
    }

    /// The longest lease of the registered jobs (None when there are none): how long a
    /// received message may stay hidden before its worker is presumed dead.
    pub fn longest_lease(&self) -> Option<Duration> {
        self.jobs.values().map(|j| j.policy.lease).max()
    }
}
