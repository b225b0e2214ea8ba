//! Chains through the worker: it runs their steps (answering each step's Step Functions
//! task, [`steps`]) and their runs' messages (a trigger starts the execution, the end
//! records the run DONE or PAUSED, [`runs`]). See `schedkit::iac::definition` for the
//! state machine these messages come from.

mod runs;
mod steps;

use std::collections::BTreeMap;

use std::sync::{Arc, Mutex};

use aws_sdk_sfn::Client;

pub(crate) use runs::RunMessage;
pub(crate) use steps::TaskHeartbeat;

use crate::aws::SdkConfig;
use crate::catalog::{Catalog, Chain};
use crate::orchestrator::{Found, Orchestrator, SfnOrchestrator};

/// What the worker needs for chains: Step Functions (or the simulation's orchestrator),
/// the catalog's chains, and each chain's state machine: given, or found by name.
#[derive(Debug, Clone)]
pub struct Chains {
    orchestrator: Arc<dyn Orchestrator>,
    chains: BTreeMap<String, Chain>,
    state_machines: Arc<Mutex<BTreeMap<String, String>>>,
    finder: Option<Finder>,
}

/// Where a chain's state machine not given is looked for: `schedkit-<stage>.<chain>`,
/// sending its steps to `queue_url`.
#[derive(Debug, Clone)]
struct Finder {
    stage: String,
    queue_url: String,
}

/// A chain's state machine, as far as the worker can tell.
pub(crate) enum Machine {
    /// Its ARN.
    Known(String),
    /// None this worker may start: why, and what to set.
    Unconfigured(String),
    /// Step Functions could not be asked: the message comes back.
    Unavailable(String),
}

impl Chains {
    /// The chain whose key space `key` lies in (`<chain>#…`: its runs' records and its
    /// steps'), if any: a job's own run may not take their place.
    pub(crate) fn key_space_of(&self, key: &str) -> Option<&str> {
        let (name, _) = key.split_once('#')?;
        self.chains.get_key_value(name).map(|(n, _)| n.as_str())
    }

    /// The catalog's chains, each the state machine `<prefix><chain>` (the template names
    /// them `schedkit-<stage>.<chain>`; `SCHEDKIT_STATE_MACHINE_PREFIX` is the ARN up to
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
            state_machines: Arc::new(Mutex::new(state_machines)),
            finder: None,
        }
    }

    /// The same chains, each state machine not given looked for when its first trigger
    /// comes (and again until found): `schedkit-<stage>.<chain>`, the template's name, and
    /// only if its definition sends its steps to `queue_url`, this worker's queue (a stage of
    /// the same name in another stack of the account has the same names).
    pub fn finding_in_stage(mut self, stage: &str, queue_url: &str) -> Self {
        self.finder = Some(Finder {
            stage: stage.to_string(),
            queue_url: queue_url.to_string(),
        });
        self
    }

    /// The state machine of `chain`: given, found before, or looked for now.
    pub(crate) async fn state_machine(&self, chain: &str) -> Machine {
        let known = self.lock().get(chain).cloned();
        if let Some(arn) = known {
            return Machine::Known(arn);
        }
        let Some(finder) = &self.finder else {
            return Machine::Unconfigured(format!(
                "this worker knows no state machine for chain `{chain}`: give it SCHEDKIT_STATE_MACHINE_PREFIX (the template does), or the stage (SCHEDKIT_STAGE, or a table named schedkit-<stage>-executions) so that it looks for `schedkit-<stage>.{chain}`; then redrive this letter"
            ));
        };
        let name = crate::orchestrator::state_machine_name(&finder.stage, chain);
        match self
            .orchestrator
            .find_state_machine(&name, &finder.queue_url)
            .await
        {
            Found::Machine(arn) => {
                self.lock().insert(chain.to_string(), arn.clone());
                Machine::Known(arn)
            }
            Found::Missing => Machine::Unconfigured(format!(
                "no state machine `{name}` for chain `{chain}` in stage `{}`: deploy the stage's template (or give SCHEDKIT_STATE_MACHINE_PREFIX), then redrive this letter",
                finder.stage
            )),
            Found::Foreign(arn) => Machine::Unconfigured(format!(
                "the state machine `{name}` ({arn}) sends its steps to another queue than this worker's ({}): it is another stage's; give SCHEDKIT_STATE_MACHINE_PREFIX, then redrive this letter",
                finder.queue_url
            )),
            Found::Refused(e) => Machine::Unconfigured(format!(
                "looking for the state machine `{name}` of chain `{chain}` was refused ({e}): give SCHEDKIT_STATE_MACHINE_PREFIX, then redrive this letter"
            )),
            Found::Unavailable(e) => Machine::Unavailable(format!(
                "looking for the state machine `{name}` of chain `{chain}`: {e}"
            )),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, String>> {
        self.state_machines
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Whether `name` is a chain (its trigger and end messages carry it as their job).
    pub(crate) fn is_chain(&self, name: &str) -> bool {
        self.chains.contains_key(name)
    }
}
