//! The accountant's check as the worker runs it: invoked by the stage's accountant
//! schedule (Lambda mode: the stage's check, its ledger written, its findings reported),
//! or from the command line (`--account`: a look that writes nothing, unless
//! `--account-commit` makes it the stage's check, for a worker whose stdout reaches
//! CloudWatch). Findings go out as metrics, each firing once: `Missed` / `Late` per job
//! (their alarms), how many jobs had one, how many jobs failed, were missed or were late
//! since the last check (`FailingJobs`: the failure-storm alarm's), and one
//! `AccountantChecks` per check (its own alarm fires when checks stop).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::accounting::ledger::Kind;
use crate::accounting::stage::{Check, check, check_and_send};
use crate::catalog::Catalog;
use crate::store::{DynamoStore, StoreError};
use crate::telemetry::{Metric, Metrics};

/// The most findings logged one by one per check (the rest are counted).
const LOGGED_FINDINGS: usize = 100;

/// What a check needs; cheap to clone.
#[derive(Clone)]
pub(crate) struct Accountant {
    pub(crate) store: DynamoStore,
    pub(crate) catalog: Arc<Catalog>,
    pub(crate) metrics: Metrics,
}

/// A check in numbers: what the schedule's invocation answers (a few hundred bytes
/// however many firings a check after an outage finds).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Summary {
    pub(crate) since: DateTime<Utc>,
    pub(crate) now: DateTime<Utc>,
    pub(crate) expected: usize,
    /// Firings reported by this check, missed and late.
    pub(crate) missed: usize,
    pub(crate) late: usize,
    /// Every firing unaccounted for now.
    pub(crate) unaccounted: usize,
    pub(crate) requests: usize,
    pub(crate) written: bool,
}

impl Summary {
    fn of(check: &Check) -> Summary {
        let missed = check
            .reported
            .iter()
            .filter(|f| f.kind == Kind::Missed)
            .count();
        Summary {
            since: check.since,
            now: check.now,
            expected: check.expected,
            missed,
            late: check.reported.len() - missed,
            unaccounted: check.findings.len(),
            requests: check.requests,
            written: check.written,
        }
    }
}

impl Accountant {
    /// One check now (from `since` when given); with `commit`, the stage's: its ledger
    /// written and its findings reported.
    pub(crate) async fn check(
        &self,
        since: Option<DateTime<Utc>>,
        commit: bool,
    ) -> Result<(Check, Summary), StoreError> {
        let now = Utc::now();
        let check = match commit {
            true => {
                let metrics = &self.metrics;
                check_and_send(&self.store, &self.catalog, now, since, |c| {
                    report(metrics, c)
                })
                .await?
            }
            false => check(&self.store, &self.catalog, now, since, false).await?,
        };
        let summary = Summary::of(&check);
        tracing::info!(
            since = %summary.since,
            expected = summary.expected,
            missed = summary.missed,
            late = summary.late,
            unaccounted = summary.unaccounted,
            requests = summary.requests,
            written = summary.written,
            committed = commit,
            "accountant checked"
        );
        if check.overflow != Default::default() {
            tracing::warn!(
                dropped_findings = check.overflow.dropped,
                forgotten_keys = check.overflow.forgotten,
                unkept_reports = check.overflow.unkept,
                "the accountant's ledger reached its item's size: the oldest reported keys, \
                 reports kept to be sent again, and findings were let go"
            );
        }
        for f in check.reported.iter().take(LOGGED_FINDINGS) {
            tracing::warn!(
                job = f.name,
                key = f.key,
                kind = ?f.kind,
                scheduled_for = %f.scheduled_for,
                due_by = %f.due_by,
                "a scheduled run is unaccounted for"
            );
        }
        Ok((check, summary))
    }
}

/// The metrics of one check: per job one line with its counts, then the stage's line
/// (nothing but the heartbeat when another check wrote first).
pub(crate) fn report(metrics: &Metrics, check: &Check) {
    let mut per_job: BTreeMap<&str, (f64, f64)> = BTreeMap::new();
    for f in &check.reported {
        let counts = per_job.entry(f.name.as_str()).or_default();
        match f.kind {
            Kind::Missed => counts.0 += 1.0,
            Kind::Late => counts.1 += 1.0,
        }
    }
    for (job, (missed, late)) in &per_job {
        let values: Vec<(Metric, f64)> = [(Metric::Missed, *missed), (Metric::Late, *late)]
            .into_iter()
            .filter(|(_, n)| *n > 0.0)
            .collect();
        metrics.emit(job, &values);
    }
    let names: BTreeSet<&str> = per_job.keys().copied().collect();
    let failing: BTreeSet<&str> = names
        .iter()
        .copied()
        .chain(check.failed_jobs.iter().map(String::as_str))
        .collect();
    metrics.emit_for_stage(&[
        (Metric::AccountantChecks, 1.0),
        (Metric::UnaccountedJobs, names.len() as f64),
        (Metric::FailingJobs, failing.len() as f64),
    ]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accounting::ledger::Finding;

    #[test]
    fn the_storm_counts_each_job_failing_missed_or_late_once() {
        let now = Utc::now();
        let finding = |kind, name: &str| Finding {
            kind,
            name: name.into(),
            chain: false,
            key: format!("{name}#x"),
            scheduled_for: now,
            due_by: now,
            status: None,
            found_at: now,
        };
        let check = Check {
            since: now,
            now,
            expected: 3,
            reported: vec![
                finding(Kind::Missed, "a"),
                finding(Kind::Missed, "a"),
                finding(Kind::Late, "b"),
            ],
            findings: Vec::new(),
            failed_jobs: ["b".to_string(), "c".to_string()].into(),
            requests: 4,
            written: true,
            overflow: Default::default(),
            checks: 1,
        };
        let (metrics, lines) = Metrics::capture();
        report(&metrics, &check);
        let lines = lines.lock().unwrap();
        let stage: serde_json::Value = serde_json::from_str(lines.last().unwrap()).unwrap();
        assert_eq!(stage["UnaccountedJobs"].as_f64(), Some(2.0));
        assert_eq!(stage["FailingJobs"].as_f64(), Some(3.0), "a, b and c");
        assert_eq!(stage["AccountantChecks"].as_f64(), Some(1.0));
        let a: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
        assert_eq!(
            (a["Job"].as_str(), a["Missed"].as_f64()),
            (Some("a"), Some(2.0))
        );
    }
}
