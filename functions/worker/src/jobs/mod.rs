//! Example jobs, one per behaviour the framework must handle: an external side effect,
//! a long run that needs heartbeats, a transient failure, and a failure that never heals.
//!
//! Their policies (attempts, backoff, lease, key template) come from the job catalog, not
//! from here: the code says *what* a job does, the catalog *how* it is run.

mod effects_table;
mod flaky_sync;
mod long_report;
mod partner_export;
mod record_invoice;

use schedkit::Jobs;

pub use effects_table::{EFFECT_KEY, EffectsTable};
pub use partner_export::ACCOUNT_ITEM;
/// `record-invoice`, for tests that run it under a policy of their own.
pub use record_invoice::run as record_invoice;

/// Every example job, by its catalog name.
pub fn all(effects: EffectsTable) -> Jobs<EffectsTable> {
    Jobs::with_state(effects)
        .add("record-invoice", record_invoice::run)
        .add("long-report", long_report::run)
        .add("flaky-sync", flaky_sync::run)
        .add("partner-export", partner_export::run)
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedkit::catalog::Target;

    #[test]
    fn every_queue_job_of_the_shipped_catalog_is_implemented() {
        let catalog = crate::CATALOG.load().unwrap();
        let ddb = aws_sdk_dynamodb::Client::from_conf(
            aws_sdk_dynamodb::Config::builder()
                .behavior_version_latest()
                .build(),
        );
        let registry = all(EffectsTable::new(ddb, None)).bind(&catalog).unwrap();
        for job in catalog.jobs.values().filter(|j| j.target == Target::Queue) {
            assert!(registry.get(&job.name).is_some(), "{}", job.name);
        }
    }
}
