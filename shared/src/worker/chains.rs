//! How the worker finds its chains' state machines: the prefix the template gives it, or
//! by name in its stage (`schedkit-<stage>.<chain>`, looked for when a chain's first
//! trigger comes), so that a poller started with the queue, the DLQ and the table alone
//! starts chains too.

use super::settings::Settings;
use crate::aws::SdkConfig;
use crate::batch::Chains;
use crate::catalog::Catalog;

/// What the worker runs chains with, when the catalog has any. A chain whose state
/// machine it cannot find has its triggers dead-lettered as `unconfigured`, saying what
/// to set.
pub(super) fn chains(sdk: &SdkConfig, settings: &Settings, catalog: &Catalog) -> Option<Chains> {
    if catalog.chains.is_empty() {
        return None;
    }
    if let Some(prefix) = settings
        .state_machine_prefix
        .as_deref()
        .filter(|p| !p.is_empty())
    {
        return Some(Chains::new(sdk, catalog, prefix));
    }
    let stage = settings.stage();
    if stage == crate::telemetry::NO_STAGE {
        tracing::warn!(
            "the stage is unknown (no SCHEDKIT_STAGE, and the table is not `schedkit-<stage>-executions`) and SCHEDKIT_STATE_MACHINE_PREFIX is not set: chain steps are answered, but a chain's trigger cannot start its state machine"
        );
        return Some(Chains::new(sdk, catalog, ""));
    }
    Some(Chains::new(sdk, catalog, "").finding_in_stage(stage, &settings.queue_url))
}
