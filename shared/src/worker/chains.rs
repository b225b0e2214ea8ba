//! How the worker finds its chains' state machines: the prefix the template gives it, or
//! by name in the stage (`schedkit-<stage>-<chain>`), so that a poller started with the
//! queue, the DLQ and the table alone can start chains too.

use std::collections::BTreeMap;

use super::settings::Settings;
use crate::aws::SdkConfig;
use crate::batch::Chains;
use crate::catalog::Catalog;

/// What the worker runs chains with, when the catalog has any. A chain whose state
/// machine stays unknown is said once at start; its triggers are dead-lettered as
/// `unconfigured`, saying which setting is missing.
pub(super) async fn chains(
    sdk: &SdkConfig,
    settings: &Settings,
    catalog: &Catalog,
) -> Option<Chains> {
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
    let found = match state_machines_of(sdk, stage, catalog).await {
        Ok(found) => found,
        Err(e) => {
            tracing::warn!(
                stage,
                error = %e,
                "could not list the stage's state machines (set SCHEDKIT_STATE_MACHINE_PREFIX): a chain's trigger cannot start its state machine"
            );
            BTreeMap::new()
        }
    };
    let missing: Vec<&str> = catalog
        .chains
        .keys()
        .filter(|c| !found.contains_key(*c))
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        tracing::warn!(
            stage,
            chains = missing.join(", "),
            "no state machine named schedkit-<stage>-<chain> for these chains: their triggers will be dead-lettered as unconfigured"
        );
    }
    Some(Chains::with_state_machines(sdk, catalog, found))
}

/// Each chain's state machine ARN, by chain, among the account's state machines named
/// `schedkit-<stage>-<chain>` (the template's names).
async fn state_machines_of(
    sdk: &SdkConfig,
    stage: &str,
    catalog: &Catalog,
) -> Result<BTreeMap<String, String>, String> {
    let wanted: BTreeMap<String, String> = catalog
        .chains
        .keys()
        .map(|c| (format!("schedkit-{stage}-{c}"), c.clone()))
        .collect();
    let client = aws_sdk_sfn::Client::new(sdk);
    let mut pages = client.list_state_machines().into_paginator().send();
    let mut found = BTreeMap::new();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| crate::aws::describe(&e))?;
        for machine in page.state_machines {
            if let Some(chain) = wanted.get(&machine.name) {
                found.insert(chain.clone(), machine.state_machine_arn);
            }
        }
    }
    Ok(found)
}
