//! Jobs and the registry the worker looks them up in.
//!
//! A job is an `async fn` whose arguments are extractors ([`Ctx`], [`Payload`], [`State`])
//! and whose result is any `Serialize`, registered by name with [`Jobs::add`]:
//!
//! ```
//! use schedkit::{Ctx, JobError, Jobs, Payload, State};
//!
//! #[derive(serde::Deserialize)]
//! struct Invoice { tenant: String, amount_cents: i64 }
//!
//! #[derive(Clone)]
//! struct Billing { table: String }
//!
//! async fn record_invoice(
//!     ctx: Ctx,
//!     State(billing): State<Billing>,
//!     Payload(invoice): Payload<Invoice>,
//! ) -> Result<serde_json::Value, JobError> {
//!     let total = std::fs::read_to_string("/etc/hostname").map(|_| invoice.amount_cents)?;
//!     Ok(serde_json::json!({"table": billing.table, "key": ctx.key, "total": total}))
//! }
//!
//! let jobs = Jobs::with_state(Billing { table: "invoices".into() })
//!     .add("record-invoice", record_invoice);
//! ```
//!
//! A job never retries by itself: `?` on any error is a retryable failure, [`permanent`]
//! one no retry can fix, and the batch adapter decides what happens next from the job's
//! [`JobPolicy`] (from the catalog).

mod command;
mod context;
mod error;
mod extract;
mod handler;
mod jobs;

pub use command::OUTPUT_TAIL_BYTES;
pub use context::{ChainStep, Ctx};
pub use error::{ErrorKind, JobError, permanent};
pub use extract::{FromRef, FromRun, Payload, State};
pub use handler::{BoxFuture, Handler, IntoJobResult, Job, JobResult};
pub use jobs::{BindError, Jobs};

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::key::KeyTemplate;
use crate::retry::RetryPolicy;

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
    /// `crate::batch::FailureStreaks`). `None`: failures never pause it.
    pub pause_after_failures: Option<std::num::NonZeroU32>,
    /// The limits its runs enter before they start (see [`crate::flow`]).
    pub flow: crate::flow::FlowControl,
}

/// A job's overlap policy: what happens to a run (another key of the same job) that arrives
/// while an earlier one is RUNNING. EventBridge Scheduler has none; schedkit enforces it in
/// the worker with conditional writes on a per-job slot (`crate::store::slot_key`). A chain's
/// steps never go through it: the catalog refuses it on a job that is a chain's step.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
            flow: crate::flow::FlowControl::default(),
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
    /// The secrets it may read, by name (the catalog's `secrets`).
    pub secrets: Arc<BTreeMap<String, String>>,
}

/// Job name → implementation and policy. Built once at start-up, shared by all messages.
#[derive(Clone, Default)]
pub struct Registry {
    jobs: BTreeMap<String, RegisteredJob>,
    secrets: Option<Arc<crate::secrets::SecretStore>>,
}

impl Registry {
    /// Where its jobs' secrets are read (`worker::run` gives the AWS one; a test its own).
    pub fn with_secrets(mut self, store: Arc<crate::secrets::SecretStore>) -> Self {
        self.secrets = Some(store);
        self
    }

    /// The store its jobs read secrets from, if any.
    pub(crate) fn secret_store(&self) -> Option<&Arc<crate::secrets::SecretStore>> {
        self.secrets.as_ref()
    }

    /// Whether a job of it lists a secret.
    pub fn reads_secrets(&self) -> bool {
        self.jobs.values().any(|j| !j.secrets.is_empty())
    }

    /// Adds (or replaces) a job: [`Jobs`] builds registries.
    pub(crate) fn insert(&mut self, name: String, job: RegisteredJob) {
        self.jobs.insert(name, job);
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
    pub(crate) fn longest_lease(&self) -> Option<Duration> {
        self.jobs.values().map(|j| j.policy.lease).max()
    }
}
