//! Chains through the worker: it runs their steps (answering each step's Step Functions
//! task, [`steps`]) and their runs' messages (a trigger starts the execution, the end
//! records the run DONE or PAUSED, [`runs`]). See `schedkit::iac::definition` for the
//! state machine these messages come from.

mod runs;
mod steps;

use std::collections::BTreeMap;

use std::sync::Arc;

use aws_sdk_sfn::Client;

pub(crate) use runs::RunMessage;
pub(crate) use steps::TaskHeartbeat;

use crate::aws::SdkConfig;
use crate::catalog::{Catalog, Chain};
use crate::orchestrator::{Orchestrator, SfnOrchestrator};

/// What the worker needs for chains: Step Functions (or the simulation's orchestrator),
/// the catalog's chains, and each chain's state machine.
#[derive(Debug, Clone)]
pub struct Chains {
    orchestrator: Arc<dyn Orchestrator>,
    chains: BTreeMap<String, Chain>,
    state_machines: BTreeMap<String, String>,
}

impl Chains {
    /// The catalog's chains, each the state machine `<prefix><chain>` (the template names
    /// them `schedkit-<stage>-<chain>`; `SCHEDKIT_STATE_MACHINE_PREFIX` is the ARN up to
    /// the chain's name). An empty prefix knows no state machine: steps are answered, and
    /// a trigger is dead-lettered saying what is missing.
    pub fn new(sdk: &SdkConfig, catalog: &Catalog, prefix: &str) -> Self {
        let machines = catalog
            .chains
            .keys()
            .filter(|_| !prefix.is_empty())
            .map(|c| (c.clone(), format!("{prefix}{c}")))
            .collect();
        Chains::with_state_machines(sdk, catalog, machines)
    }

    /// The catalog's chains with their state machines' ARNs given by chain.
    pub fn with_state_machines(
        sdk: &SdkConfig,
        catalog: &Catalog,
        state_machines: BTreeMap<String, String>,
    ) -> Self {
        let sfn = SfnOrchestrator::new(Client::new(sdk));
        Chains::with_orchestrator(sfn, catalog, state_machines)
    }

    /// The catalog's chains over any orchestrator (the simulation's is in memory).
    pub fn with_orchestrator(
        orchestrator: impl Orchestrator,
        catalog: &Catalog,
        state_machines: BTreeMap<String, String>,
    ) -> Self {
        Chains {
            orchestrator: Arc::new(orchestrator),
            chains: catalog.chains.clone(),
            state_machines,
        }
    }

    /// Whether `name` is a chain (its trigger and end messages carry it as their job).
    pub fn is_chain(&self, name: &str) -> bool {
        self.chains.contains_key(name)
    }
}
