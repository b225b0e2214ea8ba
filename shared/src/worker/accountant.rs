//! The accountant's check as the worker runs it: invoked by the stage's accountant
//! schedule (Lambda mode), or once from the command line (`--account`). Its findings go
//! out as metrics, each firing once: `Missed` / `Late` per job (their alarms), how many
//! jobs had one (the failure-storm alarm counts them), and one `AccountantChecks` per
//! check (its own alarm fires when checks stop).

use std::collections::BTreeSet;
use std::sync::Arc;

use chrono::{DateTime, Utc};

use crate::accounting::ledger::Kind;
use crate::accounting::stage::{Check, check};
use crate::catalog::Catalog;
use crate::store::{DynamoStore, StoreError};
use crate::telemetry::{Metric, Metrics};

/// What a check needs; cheap to clone.
#[derive(Clone)]
pub(crate) struct Accountant {
    pub(crate) store: DynamoStore,
    pub(crate) catalog: Arc<Catalog>,
    pub(crate) metrics: Metrics,
}

impl Accountant {
    /// One check now (from `since` when given), its findings reported.
    pub(crate) async fn check(&self, since: Option<DateTime<Utc>>) -> Result<Check, StoreError> {
        let check = check(&self.store, &self.catalog, Utc::now(), since).await?;
        report(&self.metrics, &check);
        let missed = check
            .reported
            .iter()
            .filter(|f| f.kind == Kind::Missed)
            .count();
        tracing::info!(
            since = %check.since,
            expected = check.expected,
            missed,
            late = check.reported.len() - missed,
            unaccounted = check.findings.len(),
            requests = check.requests,
            written = check.written,
            "accountant checked"
        );
        for f in &check.reported {
            tracing::warn!(
                job = f.name,
                key = f.key,
                kind = ?f.kind,
                scheduled_for = %f.scheduled_for,
                due_by = %f.due_by,
                "a scheduled run is unaccounted for"
            );
        }
        Ok(check)
    }
}

/// The metrics of one check: nothing but the heartbeat when another check wrote first.
pub(crate) fn report(metrics: &Metrics, check: &Check) {
    let mut names = BTreeSet::new();
    for f in &check.reported {
        names.insert(f.name.as_str());
        let metric = match f.kind {
            Kind::Missed => Metric::Missed,
            Kind::Late => Metric::Late,
        };
        metrics.count(&f.name, metric);
    }
    metrics.emit_for_stage(&[
        (Metric::AccountantChecks, 1.0),
        (Metric::UnaccountedJobs, names.len() as f64),
    ]);
}
