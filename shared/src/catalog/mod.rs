//! The job catalog: one file (`infra/catalog.toml`) that lists every job with its schedule,
//! payload, key template, retry policy, lease, owner and target. Schedule sync, the worker's
//! per-job policies, previews and the IaC all read it: one source of truth.
//!
//! Loading validates everything before anything deploys, and every error names the file,
//! the job and the field.

mod chains;
pub mod deadlines;
mod error;
pub mod import;
mod inventory;
mod limits;
pub mod model;
#[cfg(feature = "schema")]
pub mod reference;
mod rules;
mod validate;

use std::path::Path;

pub use crate::envelope::PRIORITIES;
pub use chains::{Chain, Stage, Step};
pub use error::{CatalogError, CatalogErrors};
pub use inventory::{Catalog, Job, Target};
pub use limits::{JobLimits, KeyedConcurrency, Limit};
pub use model::{
    CatalogFile, ChainSpec, CommandSpec, ConcurrencySpec, HOST_TIMEOUT_MAX_SECONDS, JobSpec,
    LimitSpec, RetrySpec, RunsOn, SECRETS_MAX, ScheduleSpec, Settings, StageSpec, StepSpec,
};
pub use rules::logical_id;

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
}
