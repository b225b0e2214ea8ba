//! The stage's alarms as CloudWatch holds them: which are in ALARM, and the jobs each one
//! names (its contributors, for an alarm over every job). One `DescribeAlarms` for the
//! stage's alarms by name, and one `DescribeAlarmContributors` per alarm in ALARM: the same
//! few requests for a thousand jobs as for four.

use aws_sdk_cloudwatch::types::{AlarmContributor, StateValue};
use serde::Serialize;

use super::OpsError;
use crate::aws::{AwsResultExt, SdkConfig};
use crate::iac::stage_alarms::{STAGE_ALARMS, STORM_SUFFIX, alarm_name};

/// The stage's alarms that are in ALARM.
#[derive(Debug, Clone, Default, Serialize)]
pub struct StageAlarms {
    /// The stage's alarms CloudWatch holds (those of a catalog without chains lack one).
    pub watched: usize,
    /// Those in ALARM, in the stage's order.
    pub in_alarm: Vec<InAlarm>,
}

/// One alarm in ALARM.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InAlarm {
    /// Its name (`schedkit-<stage>-jobs-failed`).
    pub alarm: String,
    /// CloudWatch's reason (`2 out of 5 time series evaluated to ALARM`).
    pub reason: String,
    /// The jobs it names: its contributors in ALARM (none for the storm, which counts).
    pub jobs: Vec<String>,
}

/// The names of the stage's alarms, in the order status shows them: those its catalog
/// has (the chains' alarm only with chains), as the viewer's grant names them.
pub fn names(stage: &str, with_chains: bool) -> Vec<String> {
    STAGE_ALARMS
        .iter()
        .filter(|a| with_chains || !a.chains_only)
        .map(|a| alarm_name(stage, a.suffix))
        .chain(std::iter::once(alarm_name(stage, STORM_SUFFIX)))
        .collect()
}

/// The jobs among an alarm's contributors (their `Job` attribute), sorted, each once.
pub fn contributor_jobs(contributors: &[AlarmContributor]) -> Vec<String> {
    let mut jobs: Vec<String> = contributors
        .iter()
        .filter_map(|c| c.contributor_attributes()?.get("Job").cloned())
        .collect();
    jobs.sort();
    jobs.dedup();
    jobs
}

/// The stage's alarms in ALARM, with the jobs each names.
pub async fn in_alarm(
    sdk: &SdkConfig,
    stage: &str,
    with_chains: bool,
) -> Result<StageAlarms, OpsError> {
    let cw = aws_sdk_cloudwatch::Client::new(sdk);
    let wanted = names(stage, with_chains);
    let out = cw
        .describe_alarms()
        .set_alarm_names(Some(wanted.clone()))
        .send()
        .await
        .aws("reading the stage's alarms")?;
    let alarms = out.metric_alarms();
    let mut in_alarm = Vec::new();
    for name in &wanted {
        let Some(a) = alarms
            .iter()
            .find(|a| a.alarm_name() == Some(name.as_str()))
        else {
            continue;
        };
        if a.state_value() != Some(&StateValue::Alarm) {
            continue;
        }
        let grouped = a
            .metrics()
            .iter()
            .any(|m| m.expression().is_some_and(|e| e.contains("GROUP BY")));
        let mut reason = a.state_reason().unwrap_or_default().to_string();
        let contributors = if grouped {
            match contributors(&cw, name).await {
                Ok(c) => c,
                Err(e) => {
                    reason = format!("{reason} (its contributors could not be read: {e})");
                    Vec::new()
                }
            }
        } else {
            Vec::new()
        };
        in_alarm.push(InAlarm {
            alarm: name.clone(),
            reason,
            jobs: contributor_jobs(&contributors),
        });
    }
    Ok(StageAlarms {
        watched: alarms.len(),
        in_alarm,
    })
}

/// Every contributor of the alarm `name` in ALARM, all pages.
async fn contributors(
    cw: &aws_sdk_cloudwatch::Client,
    name: &str,
) -> Result<Vec<AlarmContributor>, crate::aws::AwsError> {
    let mut all = Vec::new();
    let mut token = None;
    loop {
        let page = cw
            .describe_alarm_contributors()
            .alarm_name(name)
            .set_next_token(token.take())
            .send()
            .await
            .aws(format!("reading the contributors of alarm {name}"))?;
        all.extend(page.alarm_contributors().iter().cloned());
        match page.next_token() {
            Some(t) if !t.is_empty() => token = Some(t.to_string()),
            _ => return Ok(all),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_alarms_jobs_are_its_contributors_job_attributes() {
        let contributor = |id: &str, job: Option<&str>| {
            let mut c = AlarmContributor::builder()
                .contributor_id(id)
                .state_reason("Threshold Crossed");
            if let Some(job) = job {
                c = c
                    .contributor_attributes("Job", job)
                    .contributor_attributes("Stage", "prod");
            }
            c.build()
        };
        let jobs = contributor_jobs(&[
            contributor("1", Some("nightly-export")),
            contributor("2", Some("crm-sync")),
            contributor("3", None),
            contributor("4", Some("crm-sync")),
        ]);
        assert_eq!(jobs, ["crm-sync", "nightly-export"]);
        // Without chains the stage has no chains' alarm, and the viewer's grant names none:
        // asking for it would have the whole DescribeAlarms refused.
        assert!(!names("prod", false).iter().any(|n| n.contains("chains")));
        assert_eq!(names("prod", false).len(), 5);
        assert_eq!(
            names("prod", true),
            [
                "schedkit-prod-jobs-failed",
                "schedkit-prod-jobs-missed",
                "schedkit-prod-jobs-late",
                "schedkit-prod-jobs-paused",
                "schedkit-prod-chains-paused",
                "schedkit-prod-failure-storm"
            ]
        );
    }
}
