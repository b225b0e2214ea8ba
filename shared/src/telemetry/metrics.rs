//! CloudWatch Embedded Metric Format (EMF): one JSON object per line on stdout.
//!
//! Written by hand: EMF is a small documented JSON shape, and the crates that emit it pull
//! in a metrics framework for what is here a dozen lines.

use std::io::Write;
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value, json};

/// The metrics namespace in CloudWatch.
pub(crate) const NAMESPACE: &str = "schedkit";
/// The job dimension every metric carries (with [`STAGE_DIMENSION`]).
pub(crate) const DIMENSION: &str = "Job";
/// The stage dimension every metric carries: stages of one account share the namespace,
/// and their alarms must not see each other's failures.
pub(crate) const STAGE_DIMENSION: &str = "Stage";
/// The dimension a limit's metrics carry beside the job's (see [`Metrics::emit_for_limit`]).
pub(crate) const LIMIT_DIMENSION: &str = "Limit";
/// The stage value of a worker that was given none.
pub const NO_STAGE: &str = "-";

/// The metrics the design names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Metric {
    /// A claimed attempt began to run.
    Started,
    /// An attempt succeeded and its DONE record is written.
    Succeeded,
    /// An attempt failed retryably; the message comes back after the backoff.
    Retried,
    /// A run ended FAILED (its message then goes to the DLQ); the per-job alarm watches it.
    Failed,
    /// A delivery of a decided run (DONE, or FAILED by this very message) was not run again.
    Duplicate,
    /// A delivery met another worker's live lease and was put back; not an attempt.
    InProgressConflict,
    /// An attempt's outcome was refused: another worker had taken the run over.
    LeaseLost,
    /// A message was dead-lettered without running: poison, unknown job or key conflict.
    Rejected,
    /// A run was recorded SKIPPED: another run of its job was RUNNING (overlap policy).
    Skipped,
    /// A run was put back to wait for the running one of its job (`buffer_one`).
    OverlapWaited,
    /// The worker paused a job's schedule after its consecutive failures
    /// (`pause_after_failures`); the job's paused alarm watches it.
    AutoPaused,
    /// A chain run ended with every step DONE (dimension `Job`: the chain).
    ChainDone,
    /// A chain run paused on a step that failed for good; the chain's paused alarm
    /// watches it.
    ChainPaused,
    /// A run was held back by a limit of its job (dimensions `Job`, and `Limit`); its
    /// message comes back. Not an attempt.
    Throttled,
    /// Milliseconds a run waited for its job's limits, from its first refusal to its
    /// start (dimension `Job`).
    LimitWait,
    /// A run an operator cancelled was dropped by the worker: its attempt stopped at a
    /// heartbeat, or a delivery of it acknowledged unrun.
    Cancelled,
    /// A scheduled firing with no record past its window and grace, found by the
    /// accountant (once per firing); the job's missed alarm watches it.
    Missed,
    /// A scheduled run not DONE by its deadline, found by the accountant (once per run);
    /// the job's late alarm watches it.
    Late,
    /// Jobs and chains with a firing found missed or late by one check (stage only).
    UnaccountedJobs,
    /// Jobs and chains with a run that ended FAILED, or a firing found missed or late,
    /// between two checks of the accountant (stage only): the failure-storm alarm's.
    FailingJobs,
    /// A check of the accountant ran (stage only): its alarm fires when checks stop.
    AccountantChecks,
    /// Milliseconds an attempt ran.
    Duration,
    /// Milliseconds from the scheduled time to the start of the attempt.
    ScheduleLag,
}

impl Metric {
    /// The metric's name in CloudWatch.
    pub fn name(self) -> &'static str {
        match self {
            Metric::Started => "Started",
            Metric::Succeeded => "Succeeded",
            Metric::Retried => "Retried",
            Metric::Failed => "Failed",
            Metric::Duplicate => "Duplicate",
            Metric::InProgressConflict => "InProgressConflict",
            Metric::LeaseLost => "LeaseLost",
            Metric::Rejected => "Rejected",
            Metric::Skipped => "Skipped",
            Metric::OverlapWaited => "OverlapWaited",
            Metric::AutoPaused => "AutoPaused",
            Metric::ChainDone => "ChainDone",
            Metric::ChainPaused => "ChainPaused",
            Metric::Throttled => "Throttled",
            Metric::LimitWait => "LimitWait",
            Metric::Cancelled => "Cancelled",
            Metric::Missed => "Missed",
            Metric::Late => "Late",
            Metric::UnaccountedJobs => "UnaccountedJobs",
            Metric::FailingJobs => "FailingJobs",
            Metric::AccountantChecks => "AccountantChecks",
            Metric::Duration => "Duration",
            Metric::ScheduleLag => "ScheduleLag",
        }
    }

    /// The EMF unit: `Milliseconds` for durations, `Count` for the rest.
    pub fn unit(self) -> &'static str {
        match self {
            Metric::Duration | Metric::ScheduleLag | Metric::LimitWait => "Milliseconds",
            _ => "Count",
        }
    }
}

type Sink = Arc<dyn Fn(&str) + Send + Sync>;

/// Emits EMF lines. Cheap to clone.
#[derive(Clone)]
pub struct Metrics {
    sink: Sink,
    stage: Arc<str>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::stdout()
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

impl Metrics {
    /// Lines go to stdout, whole (the stdout lock keeps them from interleaving with logs).
    pub fn stdout() -> Self {
        Metrics {
            sink: Arc::new(|line: &str| {
                let mut out = std::io::stdout().lock();
                let _ = writeln!(out, "{line}");
            }),
            stage: NO_STAGE.into(),
        }
    }

    /// The same metrics, for the stage `stage` (its `Stage` dimension).
    pub fn for_stage(mut self, stage: &str) -> Self {
        self.stage = stage.into();
        self
    }

    /// Lines are kept in memory, for tests.
    pub fn capture() -> (Self, Arc<Mutex<Vec<String>>>) {
        let lines = Arc::new(Mutex::new(Vec::new()));
        let kept = lines.clone();
        let metrics = Metrics {
            sink: Arc::new(move |line: &str| kept.lock().unwrap().push(line.to_string())),
            stage: NO_STAGE.into(),
        };
        (metrics, lines)
    }

    /// One EMF line with the given values for `job`.
    pub(crate) fn emit(&self, job: &str, values: &[(Metric, f64)]) {
        if values.is_empty() {
            return;
        }
        (self.sink)(&emf_line(
            &self.stage,
            job,
            values,
            chrono::Utc::now().timestamp_millis(),
        ));
    }

    /// One EMF line with the given values for `job` held back by the limit `limit`:
    /// counted per job and per limit (a limit shared by several jobs sums theirs).
    pub(crate) fn emit_for_limit(&self, job: &str, limit: &str, values: &[(Metric, f64)]) {
        if values.is_empty() {
            return;
        }
        let line = emf_line(
            &self.stage,
            job,
            values,
            chrono::Utc::now().timestamp_millis(),
        );
        let mut doc: Value = serde_json::from_str(&line).expect("an EMF line is JSON");
        doc["_aws"]["CloudWatchMetrics"][0]["Dimensions"] = json!([
            [STAGE_DIMENSION, DIMENSION],
            [STAGE_DIMENSION, LIMIT_DIMENSION]
        ]);
        doc[LIMIT_DIMENSION] = Value::String(limit.into());
        (self.sink)(&doc.to_string());
    }

    /// One EMF line with the given values for the whole stage (dimension `Stage` only):
    /// what no one job owns, such as the accountant's heartbeat.
    pub fn emit_for_stage(&self, values: &[(Metric, f64)]) {
        if values.is_empty() {
            return;
        }
        let line = emf_line(
            &self.stage,
            "",
            values,
            chrono::Utc::now().timestamp_millis(),
        );
        let mut doc: Value = serde_json::from_str(&line).expect("an EMF line is JSON");
        doc["_aws"]["CloudWatchMetrics"][0]["Dimensions"] = json!([[STAGE_DIMENSION]]);
        if let Some(fields) = doc.as_object_mut() {
            fields.remove(DIMENSION);
        }
        (self.sink)(&doc.to_string());
    }

    /// Shorthand for a single count of 1.
    pub fn count(&self, job: &str, metric: Metric) {
        self.emit(job, &[(metric, 1.0)]);
    }
}

/// The EMF document for one set of values of `job` in `stage`.
pub(crate) fn emf_line(
    stage: &str,
    job: &str,
    values: &[(Metric, f64)],
    timestamp_ms: i64,
) -> String {
    let definitions: Vec<Value> = values
        .iter()
        .map(|(m, _)| json!({"Name": m.name(), "Unit": m.unit()}))
        .collect();
    let mut doc = Map::new();
    doc.insert(
        "_aws".into(),
        json!({
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{
                "Namespace": NAMESPACE,
                "Dimensions": [[STAGE_DIMENSION, DIMENSION]],
                "Metrics": definitions,
            }]
        }),
    );
    doc.insert(STAGE_DIMENSION.into(), Value::String(stage.into()));
    doc.insert(DIMENSION.into(), Value::String(job.into()));
    for (m, v) in values {
        doc.insert(m.name().into(), json!(v));
    }
    Value::Object(doc).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_an_emf_document() {
        let line = emf_line(
            "prod",
            "nightly",
            &[(Metric::Succeeded, 1.0), (Metric::Duration, 12.5)],
            1700000000000,
        );
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["_aws"]["Timestamp"], 1700000000000i64);
        let directive = &v["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(directive["Namespace"], "schedkit");
        assert_eq!(directive["Dimensions"], json!([["Stage", "Job"]]));
        assert_eq!(v["Stage"], "prod");
        assert_eq!(
            directive["Metrics"][1],
            json!({"Name": "Duration", "Unit": "Milliseconds"})
        );
        assert_eq!(
            (
                v["Job"].as_str(),
                v["Succeeded"].as_f64(),
                v["Duration"].as_f64()
            ),
            (Some("nightly"), Some(1.0), Some(12.5))
        );
    }

    #[test]
    fn a_stage_line_has_the_stage_dimension_only() {
        let (m, lines) = Metrics::capture();
        m.for_stage("prod").emit_for_stage(&[
            (Metric::AccountantChecks, 1.0),
            (Metric::UnaccountedJobs, 2.0),
        ]);
        let v: Value = serde_json::from_str(&lines.lock().unwrap()[0]).unwrap();
        assert_eq!(
            v["_aws"]["CloudWatchMetrics"][0]["Dimensions"],
            json!([["Stage"]])
        );
        assert_eq!((v["Stage"].as_str(), v.get("Job")), (Some("prod"), None));
        assert_eq!(v["UnaccountedJobs"].as_f64(), Some(2.0));
    }

    #[test]
    fn captured_lines_are_kept_in_order() {
        let (m, lines) = Metrics::capture();
        m.count("a", Metric::Started);
        m.emit("a", &[]);
        m.count("b", Metric::Rejected);
        let lines = lines.lock().unwrap();
        assert_eq!(lines.len(), 2);
        assert!(lines[1].contains(r#""Rejected":1.0"#));
    }
}
