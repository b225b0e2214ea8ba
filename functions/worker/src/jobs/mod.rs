//! Example jobs, one per behaviour the framework must handle: an external side effect,
//! a long run that needs heartbeats, a transient failure, and a failure that never heals.
//!
//! Their policies (attempts, backoff, lease, key template) come from the job catalog, not
//! from here: the code says *what* a job does, the catalog *how* it is run.

mod flaky_sync;
mod long_report;
mod partner_export;
mod record_invoice;

use std::sync::Arc;

use schedkit::catalog::{Catalog, Target};
use schedkit::{Job, Registry};

pub use partner_export::ACCOUNT_ITEM;
pub use record_invoice::{EFFECT_KEY, RecordInvoice};

/// The table the example jobs keep their side effects in (SCHEDKIT_EFFECTS_TABLE).
#[derive(Clone)]
pub struct EffectsTable {
    ddb: aws_sdk_dynamodb::Client,
    table: Option<String>,
}

impl EffectsTable {
    pub fn new(ddb: aws_sdk_dynamodb::Client, table: Option<String>) -> Self {
        EffectsTable { ddb, table }
    }

    /// The client and the table name; a job without a table cannot run (permanently).
    pub fn get(&self) -> Result<(aws_sdk_dynamodb::Client, String), schedkit::JobError> {
        let table = self.table.clone().ok_or_else(|| {
            schedkit::JobError::permanent("no effects table configured (SCHEDKIT_EFFECTS_TABLE)")
        })?;
        Ok((self.ddb.clone(), table))
    }
}

/// The catalog the worker was built with (`infra/catalog.toml`), or the file named by
/// `SCHEDKIT_CATALOG`.
pub fn catalog() -> Result<Catalog, String> {
    match std::env::var("SCHEDKIT_CATALOG") {
        Ok(path) => Catalog::load(std::path::Path::new(&path)).map_err(|e| e.to_string()),
        Err(_) => Catalog::parse(
            include_str!("../../../../infra/catalog.toml"),
            "infra/catalog.toml",
        )
        .map_err(|e| e.to_string()),
    }
}

/// The implementation of a job, by catalog name.
fn implementation(
    name: &str,
    ddb: &aws_sdk_dynamodb::Client,
    effects_table: &Option<String>,
) -> Option<Arc<dyn Job>> {
    Some(match name {
        "record-invoice" => Arc::new(RecordInvoice::new(ddb.clone(), effects_table.clone())),
        "long-report" => Arc::new(long_report::run),
        "flaky-sync" => Arc::new(flaky_sync::run),
        "partner-export" => Arc::new(partner_export::PartnerExport::new(
            ddb.clone(),
            effects_table.clone(),
        )),
        _ => return None,
    })
}

/// The registry: every catalog job that targets the queue, with its catalog policy. A
/// catalog job without an implementation here is an error (the worker refuses to start).
pub fn registry(
    ddb: aws_sdk_dynamodb::Client,
    effects_table: Option<String>,
    catalog: &Catalog,
) -> Result<Registry, String> {
    let mut registry = Registry::new();
    for job in catalog.jobs.values().filter(|j| j.target == Target::Queue) {
        let run = implementation(&job.name, &ddb, &effects_table).ok_or_else(|| {
            format!(
                "{}: job `{}` targets the queue but the worker has no implementation for it (add it in functions/worker/src/jobs)",
                catalog.file, job.name
            )
        })?;
        registry = registry.register_shared(job.name.clone(), job.policy.clone(), run);
    }
    Ok(registry)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ddb() -> aws_sdk_dynamodb::Client {
        aws_sdk_dynamodb::Client::from_conf(
            aws_sdk_dynamodb::Config::builder()
                .behavior_version_latest()
                .build(),
        )
    }

    #[test]
    fn every_queue_job_of_the_catalog_is_implemented_with_its_catalog_policy() {
        let catalog = catalog().unwrap();
        let registry = registry(ddb(), None, &catalog).unwrap();
        for job in catalog.jobs.values().filter(|j| j.target == Target::Queue) {
            let registered = registry.get(&job.name).expect("registered");
            assert_eq!(registered.policy.lease, job.policy.lease, "{}", job.name);
            assert_eq!(registered.policy.retry, job.policy.retry, "{}", job.name);
        }
    }

    #[test]
    fn a_catalog_job_without_implementation_is_refused() {
        let catalog = Catalog::parse("[jobs.mystery]\nowner = \"ops\"\n", "c.toml").unwrap();
        let error = registry(ddb(), None, &catalog).err().unwrap();
        assert!(
            error.starts_with(
                "c.toml: job `mystery` targets the queue but the worker has no implementation"
            ),
            "{error}"
        );
    }
}
