//! What a job knows about the run it performs: its key, when it was due, its attempt, its
//! lease, where its effects go, and the chain it is a step of. Extract it whole as [`Ctx`].

use chrono::{DateTime, Utc};
use serde_json::Value;
use tokio::sync::watch;

use super::error::JobError;
use crate::effects::Effects;

/// Everything a job may know about the run it performs.
#[derive(Debug, Clone)]
pub struct Ctx {
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
    secrets: RunSecrets,
}

/// The secrets a run may read (its job's, by name) and where they are read.
#[derive(Clone, Default)]
struct RunSecrets {
    names: std::sync::Arc<std::collections::BTreeMap<String, String>>,
    store: Option<std::sync::Arc<crate::secrets::SecretStore>>,
}

impl std::fmt::Debug for RunSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.names.keys()).finish()
    }
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

impl Ctx {
    /// Built by the batch adapter; `lease_lost` turns true once the lease is not confirmed, and
    /// `effects` is where the job's DynamoDB writes go to be committed with its outcome.
    pub(crate) fn new(
        job: String,
        key: String,
        scheduled_for: DateTime<Utc>,
        payload: Value,
        attempt: u32,
        lease_lost: watch::Receiver<bool>,
        effects: Effects,
    ) -> Self {
        Ctx {
            job,
            key,
            scheduled_for,
            payload,
            attempt,
            lease_lost,
            effects,
            chain: None,
            secrets: RunSecrets::default(),
        }
    }

    /// The same run, with the secrets its job lists and the store they are read from.
    pub(crate) fn with_secrets(
        mut self,
        names: std::sync::Arc<std::collections::BTreeMap<String, String>>,
        store: Option<std::sync::Arc<crate::secrets::SecretStore>>,
    ) -> Self {
        self.secrets = RunSecrets { names, store };
        self
    }

    /// The value of the secret the catalog lists for this job as `name` (its `secrets`):
    /// cached by the worker, fetched again after `settings.secrets_max_age_seconds`. A name
    /// the job does not list is a permanent error (no retry lists it); a failed fetch a
    /// retryable one.
    pub async fn secret(&self, name: &str) -> Result<String, JobError> {
        let Some(source) = self.secrets.names.get(name) else {
            return Err(JobError::permanent(format!(
                "`{name}` is not among job {}'s secrets (the catalog's `secrets` of the job lists what it may read)",
                self.job
            )));
        };
        let Some(store) = &self.secrets.store else {
            return Err(JobError::permanent(format!(
                "secret `{name}`: this worker reads no secrets (`worker::run` gives it the AWS store; `Registry::with_secrets`)"
            )));
        };
        store
            .get(source)
            .await
            .map_err(|e| JobError::retryable(format!("reading secret `{name}` ({source}): {e}")))
    }

    /// Every secret the job lists, by name, read: a command's environment.
    pub(crate) async fn all_secrets(&self) -> Result<Vec<(String, String)>, JobError> {
        let mut out = Vec::with_capacity(self.secrets.names.len());
        for name in self.secrets.names.keys() {
            out.push((name.clone(), self.secret(name).await?));
        }
        Ok(out)
    }

    /// The same run, as a step of a chain run.
    pub(crate) fn with_chain(mut self, step: ChainStep) -> Self {
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
