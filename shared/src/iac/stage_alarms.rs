//! The stage's alarms over every job at once: failed, missed, late and paused runs, each
//! one CloudWatch alarm on a Metrics Insights query grouped by job, so the stack holds the
//! same alarms for four jobs as for a thousand. Each job with data is a contributor of its
//! alarm: its name is in the alarm's state reason and in `DescribeAlarmContributors`
//! (`schedkit status` lists them), and SNS is notified per contributor, once as each job
//! enters ALARM. A job may still ask for an alarm of its own (`own_alarm`, at most
//! [`crate::catalog::model::OWN_ALARMS_MAX`]). The failure storm is one alarm on the
//! accountant's count of jobs failing, missed or late in one check.
//!
//! The limits this stays within (CloudWatch's): a Metrics Insights query matches at most
//! 10,000 metrics and returns at most 500 series (ordered by their sum, so the failing jobs
//! come first); an alarm names at most 100 contributors in ALARM; an account holds 200
//! Metrics Insights alarms per Region (a stage uses [`STAGE_ALARMS`]: four, five with
//! chains). A percentile cannot be asked of a query (the dashboard shows maxima instead).

use std::fmt::Write;

use super::resources::{NOTIFY, logical_id, q};
use crate::catalog::{Catalog, Job};

/// One of the stage's alarms over every job: a query of one metric summed per job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StageAlarm {
    /// The logical id in the template.
    pub resource: &'static str,
    /// The alarm's name after `schedkit-<stage>-`.
    pub suffix: &'static str,
    /// The metric (namespace `schedkit`, dimensions `Stage` and `Job`).
    pub metric: &'static str,
    /// What ALARM means and what to do, for whoever is notified.
    pub description: &'static str,
    /// Only a catalog with chains has it.
    pub chains_only: bool,
}

/// The stage's alarms over every job, in template order.
pub const STAGE_ALARMS: &[StageAlarm] = &[
    StageAlarm {
        resource: "FailedAlarm",
        suffix: "jobs-failed",
        metric: "Failed",
        description: "A job ended FAILED (each failing job is a contributor, named in the state reason): its message is in the DLQ with the reason (`schedkit dlq list --job J`), its owner is in the catalog (`schedkit jobs`). Many at once: see the failure-storm alarm.",
        chains_only: false,
    },
    StageAlarm {
        resource: "MissedAlarm",
        suffix: "jobs-missed",
        metric: "Missed",
        description: "A scheduled firing of a job or chain (the contributor) has no run past its window and grace: the scheduler did not fire, or its message never reached a worker. `schedkit executions list --missed` lists it.",
        chains_only: false,
    },
    StageAlarm {
        resource: "LateAlarm",
        suffix: "jobs-late",
        metric: "Late",
        description: "A run of a job or chain (the contributor) is not DONE by its deadline (the catalog's `deadline`, else its retry policy's worst case). `schedkit status` lists it while it is late.",
        chains_only: false,
    },
    StageAlarm {
        resource: "PausedAlarm",
        suffix: "jobs-paused",
        metric: "AutoPaused",
        description: "The worker paused a job (the contributor) after its consecutive FAILED runs (`pause_after_failures`): its schedule fires no more until `schedkit jobs resume J`. `schedkit status` shows why.",
        chains_only: false,
    },
    StageAlarm {
        resource: "ChainPausedAlarm",
        suffix: "chains-paused",
        metric: "ChainPaused",
        description: "A chain (the contributor) paused: a step failed for good; the other branches of its stage finished, later stages did not start. `schedkit chains list --status PAUSED` names the run; fix the cause, then `schedkit chains rerun`.",
        chains_only: true,
    },
];

/// The failure storm's name after `schedkit-<stage>-`.
pub const STORM_SUFFIX: &str = "failure-storm";

/// The alarm of the stage named `stage` whose name ends in `suffix`.
pub fn alarm_name(stage: &str, suffix: &str) -> String {
    format!("schedkit-{stage}-{suffix}")
}

/// The name of `job`'s own failed alarm (`own_alarm`) in `stage`: after a `.`, which no
/// stage name holds, so that no job's alarm can be another stage's (`prod` and job
/// `x-jobs` against stage `prod-x`), and ending `.failed`, which no chain's alarm does.
pub fn own_alarm_name(stage: &str, job: &str) -> String {
    format!("schedkit-{stage}.{job}.failed")
}

/// The name of `chain`'s executions alarm in `stage`: after a `.` like the chain's state
/// machine (`schedkit-<stage>.<chain>`), ending `-executions-failed`.
pub fn chain_alarm_name(stage: &str, chain: &str) -> String {
    format!("schedkit-{stage}.{chain}-executions-failed")
}

/// The Metrics Insights query of a stage alarm's metric: its sum per job over the
/// alarm's period, in the stage `stage` (the template passes `${Stage}`), largest first.
pub fn insights_query(metric: &str, stage: &str) -> String {
    format!(
        "SELECT SUM({metric}) FROM SCHEMA(schedkit, Job, Stage) WHERE Stage = '{stage}' GROUP BY Job ORDER BY SUM() DESC"
    )
}

/// The period every stage alarm sums over, in seconds.
pub const PERIOD_SECONDS: u32 = 300;

/// The logical ids of the stage's alarms the catalog has (its own alarms aside).
pub(super) fn resources(catalog: &Catalog) -> Vec<&'static str> {
    STAGE_ALARMS
        .iter()
        .filter(|a| !a.chains_only || !catalog.chains.is_empty())
        .map(|a| a.resource)
        .chain(std::iter::once("FailureStormAlarm"))
        .collect()
}

/// Writes the stage's alarms, each job's own, and the failure storm's.
pub(super) fn write(r: &mut String, catalog: &Catalog) {
    for alarm in STAGE_ALARMS {
        if alarm.chains_only && catalog.chains.is_empty() {
            continue;
        }
        stage_alarm(r, alarm);
    }
    for job in catalog.jobs.values().filter(|j| j.spec.own_alarm) {
        own_alarm(r, job);
    }
    storm_alarm(r);
}

fn stage_alarm(r: &mut String, a: &StageAlarm) {
    writeln!(r, "  {}:", a.resource).unwrap();
    writeln!(r, "    Type: AWS::CloudWatch::Alarm").unwrap();
    writeln!(r, "    Properties:").unwrap();
    writeln!(
        r,
        "      AlarmName: !Sub {}",
        alarm_name("${Stage}", a.suffix)
    )
    .unwrap();
    writeln!(r, "      AlarmDescription: {}", q(a.description)).unwrap();
    writeln!(r, "      Metrics:").unwrap();
    writeln!(r, "        - Id: by_job").unwrap();
    writeln!(r, "          Label: {}", q(&format!("{} by job", a.metric))).unwrap();
    writeln!(r, "          ReturnData: true").unwrap();
    writeln!(r, "          Period: {PERIOD_SECONDS}").unwrap();
    writeln!(
        r,
        "          Expression: !Sub {}",
        q(&insights_query(a.metric, "${Stage}"))
    )
    .unwrap();
    threshold_one(r);
}

/// At least 1 in one period; no data is not a breach (a job that never failed has none).
fn threshold_one(r: &mut String) {
    writeln!(
        r,
        "      EvaluationPeriods: 1\n      DatapointsToAlarm: 1\n      Threshold: 1"
    )
    .unwrap();
    writeln!(
        r,
        "      ComparisonOperator: GreaterThanOrEqualToThreshold\n      TreatMissingData: notBreaching"
    )
    .unwrap();
    writeln!(r, "      AlarmActions: {NOTIFY}\n").unwrap();
}

/// A job's own alarm on its failures (`own_alarm`), naming its owner.
fn own_alarm(r: &mut String, job: &Job) {
    writeln!(r, "  OwnFailedAlarm{}:", logical_id(&job.name)).unwrap();
    writeln!(r, "    Type: AWS::CloudWatch::Alarm").unwrap();
    writeln!(r, "    Properties:").unwrap();
    writeln!(
        r,
        "      AlarmName: !Sub {}",
        own_alarm_name("${Stage}", &job.name)
    )
    .unwrap();
    let description = format!(
        "{} ended FAILED: its message is in the DLQ with the reason (`schedkit dlq list --job {}`). Owner: {}. (Its own alarm, `own_alarm`; the stage's jobs-failed alarm names it too.)",
        job.name, job.name, job.spec.owner
    );
    writeln!(r, "      AlarmDescription: {}", q(&description)).unwrap();
    writeln!(r, "      Namespace: schedkit\n      MetricName: Failed").unwrap();
    writeln!(
        r,
        "      Dimensions: [{{ Name: Stage, Value: !Ref Stage }}, {{ Name: Job, Value: {} }}]",
        q(&job.name)
    )
    .unwrap();
    writeln!(r, "      Statistic: Sum\n      Period: {PERIOD_SECONDS}").unwrap();
    threshold_one(r);
}

/// Two or more jobs failing, missed or late in one of the accountant's checks: probably a
/// shared dependency. One alarm on one metric of the stage, however many jobs.
fn storm_alarm(r: &mut String) {
    writeln!(r, "  FailureStormAlarm:").unwrap();
    writeln!(r, "    Type: AWS::CloudWatch::Alarm").unwrap();
    writeln!(r, "    Properties:").unwrap();
    writeln!(
        r,
        "      AlarmName: !Sub {}",
        alarm_name("${Stage}", STORM_SUFFIX)
    )
    .unwrap();
    writeln!(r, "      AlarmDescription: {}", q("Two or more jobs ended FAILED, or had firings missed or late, between two of the accountant's checks (5 minutes): probably a shared dependency, not the jobs. The jobs-failed, jobs-missed and jobs-late alarms name them (`schedkit status`).")).unwrap();
    writeln!(
        r,
        "      Namespace: schedkit\n      MetricName: FailingJobs"
    )
    .unwrap();
    writeln!(
        r,
        "      Dimensions: [{{ Name: Stage, Value: !Ref Stage }}]"
    )
    .unwrap();
    writeln!(
        r,
        "      Statistic: Maximum\n      Period: {PERIOD_SECONDS}"
    )
    .unwrap();
    writeln!(r, "      EvaluationPeriods: 1\n      Threshold: 2").unwrap();
    writeln!(
        r,
        "      ComparisonOperator: GreaterThanOrEqualToThreshold\n      TreatMissingData: notBreaching"
    )
    .unwrap();
    writeln!(r, "      AlarmActions: {NOTIFY}\n").unwrap();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resources(text: &str) -> Vec<String> {
        let catalog = Catalog::parse(text, "c.toml").unwrap();
        let mut r = String::new();
        write(&mut r, &catalog);
        r.lines()
            .filter(|l| l.starts_with("  ") && !l.starts_with("   ") && l.ends_with(':'))
            .map(|l| l.trim().trim_end_matches(':').to_string())
            .collect()
    }

    #[test]
    fn the_stages_alarms_do_not_depend_on_its_jobs() {
        let one = resources("[jobs.a]\nowner = \"x\"\n");
        let mut many = String::new();
        for i in 0..300 {
            writeln!(
                many,
                "[jobs.j{i}]\nowner = \"x\"\npause_after_failures = 2\n[jobs.j{i}.schedule]\nexpression = \"rate(1 hour)\"\nstart = 2026-01-01T00:00:00Z\n"
            )
            .unwrap();
        }
        assert_eq!(one, resources(&many));
        assert_eq!(
            one,
            [
                "FailedAlarm",
                "MissedAlarm",
                "LateAlarm",
                "PausedAlarm",
                "FailureStormAlarm"
            ]
        );
    }

    #[test]
    fn a_job_may_ask_for_its_own_alarm_within_the_budget() {
        let own = resources(
            "[jobs.payroll]\nowner = \"hr\"\nown_alarm = true\n[jobs.b]\nowner = \"x\"\n",
        );
        assert!(
            own.contains(&"OwnFailedAlarmPayroll".to_string()),
            "{own:?}"
        );
        assert_eq!(own.len(), 6);
        let mut over = String::new();
        for i in 0..=crate::catalog::model::OWN_ALARMS_MAX {
            writeln!(over, "[jobs.j{i:02}]\nowner = \"x\"\nown_alarm = true").unwrap();
        }
        let e = Catalog::parse(&over, "c.toml").unwrap_err().to_string();
        assert_eq!(
            e,
            "c.toml: job `j20`: field `own_alarm`: 21 jobs ask for an alarm of their own, at most 20 may (the stage's failed alarm already names every failing job, each as a contributor; keep own alarms for the jobs that page someone else)"
        );
    }

    #[test]
    fn the_query_sums_the_metric_per_job_of_the_stage_largest_first() {
        assert_eq!(
            insights_query("Failed", "prod"),
            "SELECT SUM(Failed) FROM SCHEMA(schedkit, Job, Stage) WHERE Stage = 'prod' GROUP BY Job ORDER BY SUM() DESC"
        );
        let chains =
            resources("[jobs.a]\nowner = \"x\"\n[chains.c]\nowner = \"x\"\nstages = [\"a\"]\n");
        assert!(
            chains.contains(&"ChainPausedAlarm".to_string()),
            "{chains:?}"
        );
    }
}
