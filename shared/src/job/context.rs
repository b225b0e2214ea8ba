//! What a job knows about the run it performs: its key, when it was due, its attempt, its
//! lease, where its effects go, and the chain it is a step of. Extract it whole as [`Ctx`].

use chrono::{DateTime, Utc};
use serde_json::Value;
use tokio::sync::watch;

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
        }
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
