//! The parts of `infra/template.yaml` that the job catalog decides: worker settings,
//! per-job failure alarms, the failure-storm alarm, the paused alarms and the worker's
//! permission to pause (only for jobs with `pause_after_failures`), the dashboard, and the
//! viewer and operator policies ([`roles`]). The schedules are not
//! among them: the stack owns the stage's schedule group and tags it with its wiring, and
//! schedule sync owns the schedules in it (see [`crate::trigger::sync`] for why). `schedkit iac render` rewrites them between the
//! template's `BEGIN GENERATED` / `END GENERATED` markers; `--check` (run by the tests)
//! fails when the template and the catalog disagree. A team's own worker crate gets its own
//! copy of the template with [`init`], which points the worker function at its crate.
//!
//! YAML is written by hand: every value is a plain scalar or a JSON-quoted string (JSON
//! strings are valid YAML double-quoted scalars), so no YAML library is needed.

mod accounting_alarms;
mod chain_definition;
mod chain_resources;
mod resources;
pub mod roles;

use std::fmt::Write;

pub use chain_definition::{
    chain_files, definition, definition_file, render_definition, step_timeouts,
};

pub use resources::logical_id;

use crate::catalog::{Catalog, Job, Target};
use resources::{JobAlarm, NOTIFY, q};

/// Why the template cannot be rendered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IacError {
    /// CloudWatch metric math combines at most 10 metrics in one alarm.
    #[error(
        "{file}: the failure-storm alarm combines at most {max} jobs' metrics (and the accountant's), the catalog has {count}"
    )]
    TooManyJobs {
        /// The catalog.
        file: String,
        /// The most jobs one alarm can watch.
        max: usize,
        /// The catalog's queue jobs.
        count: usize,
    },
    /// The template's generated blocks are not marked as expected.
    #[error("{0}")]
    Markers(&'static str),
    /// The stock template no longer has the line [`init`] rewrites.
    #[error("the template has no `{0}` line to point at the worker crate")]
    NoLine(&'static str),
    /// A crate folder or binary name that would not stay one plain YAML value.
    #[error("`{0}` is not a plain path or name (letters, digits, `.`, `_`, `-`, `/` only)")]
    NotPlain(String),
}

/// The first line of a generated block; the block ends at [`END`].
pub(crate) const BEGIN: &str =
    "# BEGIN GENERATED FROM the job catalog by `schedkit iac render`: do not edit by hand";
/// The last line of a generated block.
pub const END: &str = "# END GENERATED";

/// A metric-math alarm can combine at most 10 metrics: one is the accountant's.
const STORM_MAX_JOBS: usize = 9;

/// The generated blocks, in template order: mappings, then resources.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    /// The `Catalog` mapping: worker timeout, queue retention and visibility, the group.
    pub mappings: String,
    /// Per-job alarms, the storm alarm, the pause permission, the dashboard and the viewer
    /// and operator policies.
    pub resources: String,
}

/// Receives a message may take beyond its attempts before SQS's redrive policy moves it:
/// the first few looks of a delivery whose run is in progress elsewhere (hidden, not sent
/// again), and deliveries to a worker that died before it decided.
const RECEIVES_BEYOND_ATTEMPTS: u32 = 10;

/// The redrive safety net must outlast every attempt of every job. Waiting beyond a few
/// looks does not count: a delivery that waits longer (in progress elsewhere, or for its
/// job's overlap slot) is sent again with its wait as the new copy's delay, and the copy in
/// hand deleted, so its receive count stops growing (`schedkit::batch`'s requeue).
fn max_receive_count(catalog: &Catalog) -> u32 {
    catalog
        .jobs
        .values()
        .map(|j| j.policy.retry.max_attempts + RECEIVES_BEYOND_ATTEMPTS)
        .max()
        .unwrap_or(RECEIVES_BEYOND_ATTEMPTS)
        .clamp(10, 1000)
}

/// Renders the catalog's blocks.
pub fn render(catalog: &Catalog) -> Result<Rendered, IacError> {
    let s = &catalog.settings;
    let mut mappings = String::new();
    writeln!(mappings, "  Catalog:\n    Worker:").unwrap();
    for (k, v) in [
        ("TimeoutSeconds", s.function_timeout_seconds.to_string()),
        (
            "QueueVisibilitySeconds",
            (6 * s.function_timeout_seconds).to_string(),
        ),
        (
            "QueueRetentionSeconds",
            (s.queue_retention_days * 86_400).to_string(),
        ),
        (
            "DeadLetterRetentionSeconds",
            (s.dlq_retention_days * 86_400).to_string(),
        ),
        ("MaxReceiveCount", max_receive_count(catalog).to_string()),
        ("ScheduleGroup", q(&s.schedule_group)),
    ] {
        writeln!(mappings, "      {k}: {v}").unwrap();
    }

    let mut r = String::new();
    let queue_jobs: Vec<&Job> = catalog
        .jobs
        .values()
        .filter(|j| j.target == Target::Queue)
        .collect();
    if queue_jobs.len() > STORM_MAX_JOBS {
        return Err(IacError::TooManyJobs {
            file: catalog.file.clone(),
            max: STORM_MAX_JOBS,
            count: queue_jobs.len(),
        });
    }
    for job in &queue_jobs {
        failure_alarms(&mut r, job);
        paused_alarm(&mut r, job);
    }
    pause_policy(&mut r, &queue_jobs);
    chain_resources::write(&mut r, catalog);
    accounting_alarms::write(&mut r, catalog);
    roles::write(&mut r, catalog);
    storm_alarm(&mut r, &queue_jobs);
    dashboard(&mut r, &queue_jobs);
    Ok(Rendered {
        mappings,
        resources: r,
    })
}

fn failure_alarms(r: &mut String, job: &Job) {
    let id = logical_id(&job.name);
    let owner = &job.spec.owner;
    let signal = format!(
        "{} ended FAILED at least once in 5 minutes (the signal; notifications come from its notice alarm). Owner: {owner}.",
        job.name
    );
    let alarm = JobAlarm {
        resource: format!("FailedAlarm{id}"),
        suffix: "failed-metric",
        description: &signal,
        metric: "Failed",
        notify: false,
    };
    alarm.write(r, &job.name);
    // Composite, so the storm alarm can hold its notification back.
    writeln!(r, "  FailedNotice{id}:").unwrap();
    writeln!(r, "    Type: AWS::CloudWatch::CompositeAlarm").unwrap();
    writeln!(r, "    Properties:").unwrap();
    writeln!(
        r,
        "      AlarmName: !Sub schedkit-${{Stage}}-{}-failed",
        job.name
    )
    .unwrap();
    writeln!(r, "      AlarmDescription: {}", q(&format!("{} failed for good: its message is in the DLQ with the reason (`schedkit dlq list`). Owner: {owner}. Held back during a failure storm.", job.name))).unwrap();
    writeln!(
        r,
        "      AlarmRule: !Sub 'ALARM(\"${{FailedAlarm{id}.Arn}}\")'"
    )
    .unwrap();
    writeln!(r, "      ActionsSuppressor: !Ref FailureStormAlarm").unwrap();
    writeln!(
        r,
        "      ActionsSuppressorWaitPeriod: 120\n      ActionsSuppressorExtensionPeriod: 600"
    )
    .unwrap();
    writeln!(r, "      AlarmActions: {NOTIFY}\n").unwrap();
}

/// The alarm that says the worker paused a job (`pause_after_failures`). Not held back by
/// the storm alarm: a pause stops the job until someone resumes it.
fn paused_alarm(r: &mut String, job: &Job) {
    let Some(n) = job.policy.pause_after_failures else {
        return;
    };
    let description = format!(
        "The worker paused {} after {n} consecutive FAILED runs (pause_after_failures): its schedule fires no more until `schedkit jobs resume {}`. `schedkit status` shows why. Owner: {}.",
        job.name, job.name, job.spec.owner
    );
    let alarm = JobAlarm {
        resource: format!("PausedAlarm{}", logical_id(&job.name)),
        suffix: "paused",
        description: &description,
        metric: "AutoPaused",
        notify: true,
    };
    alarm.write(r, &job.name);
}

/// The worker's permission to pause the schedules of the jobs that ask for it, and those
/// only (nothing when no job does): read and update each one's schedule in the stage's
/// group, and hand the schedule's own role back to the scheduler, as an update must.
fn pause_policy(r: &mut String, jobs: &[&Job]) {
    let pausing: Vec<&str> = jobs
        .iter()
        .filter(|j| j.policy.pause_after_failures.is_some())
        .map(|j| j.name.as_str())
        .collect();
    if pausing.is_empty() {
        return;
    }
    writeln!(r, "  WorkerPausePolicy:").unwrap();
    writeln!(r, "    Type: AWS::IAM::Policy").unwrap();
    writeln!(r, "    Properties:").unwrap();
    writeln!(r, "      PolicyName: pause-after-failures").unwrap();
    writeln!(r, "      Roles: [!Ref WorkerRole]").unwrap();
    writeln!(r, "      PolicyDocument:").unwrap();
    writeln!(r, "        Version: \"2012-10-17\"").unwrap();
    writeln!(r, "        Statement:").unwrap();
    writeln!(r, "          - Sid: PauseSchedules").unwrap();
    writeln!(r, "            Effect: Allow").unwrap();
    writeln!(
        r,
        "            Action: [scheduler:GetSchedule, scheduler:UpdateSchedule]"
    )
    .unwrap();
    writeln!(r, "            Resource:").unwrap();
    for job in pausing {
        writeln!(r, "              - !Sub \"arn:${{AWS::Partition}}:scheduler:${{AWS::Region}}:${{AWS::AccountId}}:schedule/${{ScheduleGroup}}/{job}\"").unwrap();
    }
    writeln!(r, "          - Sid: KeepTheSchedulesRole").unwrap();
    writeln!(r, "            Effect: Allow").unwrap();
    writeln!(r, "            Action: iam:PassRole").unwrap();
    writeln!(r, "            Resource: !GetAtt SchedulerRole.Arn").unwrap();
    writeln!(r, "            Condition:").unwrap();
    writeln!(
        r,
        "              StringEquals: {{ iam:PassedToService: scheduler.amazonaws.com }}\n"
    )
    .unwrap();
}

fn storm_alarm(r: &mut String, jobs: &[&Job]) {
    writeln!(r, "  FailureStormAlarm:").unwrap();
    writeln!(r, "    Type: AWS::CloudWatch::Alarm").unwrap();
    writeln!(r, "    Properties:").unwrap();
    writeln!(r, "      AlarmName: !Sub schedkit-${{Stage}}-failure-storm").unwrap();
    writeln!(r, "      AlarmDescription: {}", q("Two or more jobs failed, or had runs missed or late, within 5 minutes: probably a shared dependency, not the jobs. One notification instead of one per job; the per-job failure notices are held back while this fires.")).unwrap();
    writeln!(r, "      Metrics:").unwrap();
    let mut terms = Vec::new();
    for (i, job) in jobs.iter().enumerate() {
        let id = format!("m{i}");
        writeln!(r, "        - Id: {id}\n          ReturnData: false\n          MetricStat:\n            Period: 300\n            Stat: Sum").unwrap();
        writeln!(r, "            Metric:\n              Namespace: schedkit\n              MetricName: Failed").unwrap();
        writeln!(
            r,
            "              Dimensions: [{{ Name: Stage, Value: !Ref Stage }}, {{ Name: Job, Value: {} }}]",
            q(&job.name)
        )
        .unwrap();
        terms.push(format!("IF(FILL({id}, 0) > 0, 1, 0)"));
    }
    // The accountant's count of jobs with a firing missed or late in one check.
    let id = "unaccounted";
    writeln!(r, "        - Id: {id}\n          ReturnData: false\n          MetricStat:\n            Period: 300\n            Stat: Maximum").unwrap();
    writeln!(r, "            Metric:\n              Namespace: schedkit\n              MetricName: UnaccountedJobs").unwrap();
    writeln!(
        r,
        "              Dimensions: [{{ Name: Stage, Value: !Ref Stage }}]"
    )
    .unwrap();
    terms.push(format!("FILL({id}, 0)"));
    let expression = terms.join(" + ");
    writeln!(r, "        - Id: failing_jobs\n          Label: jobs failing, missed or late\n          ReturnData: true\n          Expression: {}", q(&expression)).unwrap();
    writeln!(r, "      EvaluationPeriods: 1\n      Threshold: 2\n      ComparisonOperator: GreaterThanOrEqualToThreshold").unwrap();
    writeln!(
        r,
        "      TreatMissingData: notBreaching\n      AlarmActions: {NOTIFY}\n"
    )
    .unwrap();
}

fn dashboard(r: &mut String, jobs: &[&Job]) {
    let metric = |name: &str| {
        jobs.iter()
            .map(|j| {
                format!(
                    r#"["schedkit","{name}","Stage","${{Stage}}","Job","{}"]"#,
                    j.name
                )
            })
            .collect::<Vec<_>>()
            .join(",")
    };
    let widget = |x: u32, y: u32, title: &str, metrics: String, stat: &str| {
        format!(
            r#"{{"type":"metric","x":{x},"y":{y},"width":12,"height":6,"properties":{{"title":"{title}","region":"${{AWS::Region}}","stat":"{stat}","period":300,"metrics":[{metrics}]}}}}"#
        )
    };
    let queue = r#"["AWS/SQS","ApproximateNumberOfMessagesVisible","QueueName","${JobsQueue.QueueName}"],["AWS/SQS","ApproximateNumberOfMessagesVisible","QueueName","${JobsDeadLetterQueue.QueueName}"],["AWS/SQS","ApproximateAgeOfOldestMessage","QueueName","${JobsQueue.QueueName}",{"yAxis":"right"}]"#;
    let widgets = [
        widget(
            0,
            0,
            "Queue depth, DLQ depth, oldest message (s)",
            queue.to_string(),
            "Maximum",
        ),
        widget(12, 0, "Failed runs by job", metric("Failed"), "Sum"),
        widget(0, 6, "Succeeded runs by job", metric("Succeeded"), "Sum"),
        widget(12, 6, "Retries by job", metric("Retried"), "Sum"),
        widget(0, 12, "Duration p99 by job (ms)", metric("Duration"), "p99"),
        widget(
            12,
            12,
            "Schedule lag p99 by job (ms)",
            metric("ScheduleLag"),
            "p99",
        ),
    ];
    let mut widgets = widgets.to_vec();
    widgets.extend(limit_widgets(jobs, widget));
    let body = format!(r#"{{"widgets":[{}]}}"#, widgets.join(","));
    writeln!(r, "  Dashboard:").unwrap();
    writeln!(r, "    Type: AWS::CloudWatch::Dashboard").unwrap();
    writeln!(r, "    Properties:").unwrap();
    writeln!(r, "      DashboardName: !Sub schedkit-${{Stage}}").unwrap();
    writeln!(r, "      DashboardBody: !Sub {}", q(&body)).unwrap();
}

/// The widgets of the jobs' limits, when any job has one: runs held back per limit (a
/// shared limit's `Limit` dimension sums its jobs), and how long runs waited, per job.
fn limit_widgets(
    jobs: &[&Job],
    widget: impl Fn(u32, u32, &str, String, &str) -> String,
) -> Vec<String> {
    let limited: Vec<&&Job> = jobs.iter().filter(|j| j.policy.flow.any()).collect();
    if limited.is_empty() {
        return Vec::new();
    }
    let mut limits: Vec<String> = limited
        .iter()
        .flat_map(|j| {
            j.policy
                .flow
                .gates(&j.name, Some(&j.payload()))
                .map(|gates| gates.into_iter().map(|g| g.limit).collect())
                .unwrap_or_else(|_| Vec::new())
        })
        .collect();
    limits.sort();
    limits.dedup();
    let throttled = limits
        .iter()
        .map(|l| format!(r#"["schedkit","Throttled","Stage","${{Stage}}","Limit","{l}"]"#))
        .collect::<Vec<_>>()
        .join(",");
    let waited = limited
        .iter()
        .map(|j| {
            format!(
                r#"["schedkit","LimitWait","Stage","${{Stage}}","Job","{}"]"#,
                j.name
            )
        })
        .collect::<Vec<_>>()
        .join(",");
    vec![
        widget(0, 18, "Runs held back by limit", throttled, "Sum"),
        widget(12, 18, "Wait for limits p99 by job (ms)", waited, "p99"),
    ]
}

/// A team's copy of the stock template, whose worker function is built from its own crate:
/// `code_uri` is the crate's folder relative to the new template (what `sam build` builds),
/// `binary` the crate's binary. Render the catalog's blocks into it with [`apply`] after.
pub fn init(stock: &str, code_uri: &str, binary: &str) -> Result<String, IacError> {
    for value in [code_uri, binary] {
        let plain = |c: char| c.is_ascii_alphanumeric() || "._-/".contains(c);
        if value.is_empty() || !value.chars().all(plain) {
            return Err(IacError::NotPlain(value.to_string()));
        }
    }
    let mut out = String::with_capacity(stock.len());
    let (mut code, mut bin) = (false, false);
    for line in stock.split_inclusive('\n') {
        let indent = &line[..line.len() - line.trim_start().len()];
        if !code && line.trim_start().starts_with("CodeUri: ") {
            code = true;
            writeln!(out, "{indent}CodeUri: {code_uri}").unwrap();
        } else if !bin && line.trim_start().starts_with("Binary: ") {
            bin = true;
            writeln!(out, "{indent}Binary: {binary}").unwrap();
        } else {
            out.push_str(line);
        }
    }
    match (code, bin) {
        (false, _) => Err(IacError::NoLine("CodeUri:")),
        (_, false) => Err(IacError::NoLine("Binary:")),
        _ => Ok(out),
    }
}

/// The template with its generated blocks replaced by `rendered`.
pub fn apply(template: &str, rendered: &Rendered) -> Result<String, IacError> {
    let mut out = String::new();
    let mut rest = template;
    for block in [&rendered.mappings, &rendered.resources] {
        let begin = rest.find(BEGIN).ok_or(IacError::Markers(
            "the template lacks a `BEGIN GENERATED` marker (two are needed: Mappings, Resources)",
        ))?;
        let line_end = begin
            + rest[begin..]
                .find('\n')
                .ok_or(IacError::Markers("unterminated marker"))?
            + 1;
        let end = line_end
            + rest[line_end..].find(END).ok_or(IacError::Markers(
                "a `BEGIN GENERATED` marker has no `END GENERATED`",
            ))?;
        // Keep the END marker's indentation: back up to the start of its line.
        let end_line_start = rest[..end].rfind('\n').map(|i| i + 1).unwrap_or(end);
        out.push_str(&rest[..line_end]);
        out.push_str(block);
        rest = &rest[end_line_start..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logical_ids_are_alphanumeric_camel_case() {
        assert_eq!(logical_id("long-report"), "LongReport");
        assert_eq!(logical_id("a_b.c-d"), "ABCD");
    }

    #[test]
    fn the_shipped_template_matches_the_shipped_catalog() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
        let catalog =
            Catalog::load(std::path::Path::new(&format!("{root}/infra/catalog.toml"))).unwrap();
        let template = std::fs::read_to_string(format!("{root}/infra/template.yaml")).unwrap();
        let wanted = apply(&template, &render(&catalog).unwrap()).unwrap();
        assert!(
            wanted == template,
            "infra/template.yaml disagrees with infra/catalog.toml: run `schedkit iac render`"
        );
        // Each chain's definition beside it, and no other.
        let dir = std::path::Path::new(root).join("infra");
        for chain in catalog.chains.values() {
            let path = dir.join(definition_file(&chain.name));
            let current = std::fs::read_to_string(&path).unwrap_or_default();
            assert!(
                current == render_definition(&catalog, chain),
                "{} disagrees with infra/catalog.toml: run `schedkit iac render`",
                path.display()
            );
        }
        if let Ok(entries) = std::fs::read_dir(dir.join("chains")) {
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                let chain = name.strip_suffix(".asl.json").unwrap_or(&name);
                assert!(
                    catalog.chain(chain).is_some(),
                    "infra/chains/{name} is no chain of infra/catalog.toml: run `schedkit iac render`"
                );
            }
        }
    }

    #[test]
    fn every_schedkit_metric_an_alarm_or_the_dashboard_reads_is_the_stages_own() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
        let catalog =
            Catalog::load(std::path::Path::new(&format!("{root}/infra/catalog.toml"))).unwrap();
        let resources = render(&catalog).unwrap().resources;
        // Step Functions' own metrics are the stage's by their state machine's ARN.
        let dimensions: Vec<&str> = resources
            .lines()
            .filter(|l| l.trim_start().starts_with("Dimensions:"))
            .filter(|l| !l.contains("Name: StateMachineArn, Value: !Ref Chain"))
            .collect();
        // One per job alarm and one per job in the storm alarm, one per paused alarm, one
        // per chain's paused alarm, two (missed, late) per enabled schedule; the storm
        // alarm's count of jobs unaccounted for is the stage's alone.
        let pausing = catalog
            .jobs
            .values()
            .filter(|j| j.policy.pause_after_failures.is_some())
            .count();
        assert!(
            pausing > 0,
            "the shipped catalog shows pause_after_failures"
        );
        let scheduled = catalog
            .jobs
            .values()
            .filter(|j| j.schedule.is_some())
            .count()
            + catalog
                .chains
                .values()
                .filter(|c| c.schedule.is_some())
                .count();
        assert_eq!(
            dimensions.len(),
            2 * catalog.jobs.len() + pausing + catalog.chains.len() + 2 * scheduled + 1,
            "{resources}"
        );
        let stage_only = "Dimensions: [{ Name: Stage, Value: !Ref Stage }]";
        assert_eq!(
            dimensions.iter().filter(|l| l.trim() == stage_only).count(),
            1
        );
        for line in dimensions.iter().filter(|l| l.trim() != stage_only) {
            assert!(
                line.contains("{ Name: Stage, Value: !Ref Stage }, { Name: Job,"),
                "{line}"
            );
        }
        let dashboard = resources
            .lines()
            .find(|l| l.contains("DashboardBody"))
            .unwrap();
        assert!(
            !dashboard.contains(r#"\"schedkit\",\"Failed\",\"Job\""#),
            "{dashboard}"
        );
        assert!(
            dashboard.contains(r#"\"Stage\",\"${Stage}\",\"Job\""#),
            "{dashboard}"
        );
    }

    #[test]
    fn the_dashboard_shows_runs_held_back_per_limit_and_their_wait_per_job() {
        let text = r#"
[limits.partner-api]
concurrency = 3
[jobs.export]
owner = "x"
payload = { account = "a" }
limits = ["partner-api"]
concurrency = { limit = 1, key = "{account}" }
[jobs.plain]
owner = "x"
"#;
        let catalog = Catalog::parse(text, "c.toml").unwrap();
        let resources = render(&catalog).unwrap().resources;
        let dashboard = resources
            .lines()
            .find(|l| l.contains("DashboardBody"))
            .unwrap();
        for limit in ["partner-api", "export/concurrency"] {
            let line = format!(r#"\"Throttled\",\"Stage\",\"${{Stage}}\",\"Limit\",\"{limit}\""#);
            assert!(dashboard.contains(&line), "{limit}: {dashboard}");
        }
        assert!(dashboard.contains(r#"\"LimitWait\",\"Stage\",\"${Stage}\",\"Job\",\"export\""#));
        assert!(!dashboard.contains(r#"\"LimitWait\",\"Stage\",\"${Stage}\",\"Job\",\"plain\""#));
        let unlimited = Catalog::parse("[jobs.plain]\nowner = \"x\"\n", "c.toml").unwrap();
        let plain = render(&unlimited).unwrap().resources;
        assert!(!plain.contains("Throttled"));
    }

    #[test]
    fn the_worker_may_pause_only_the_schedules_of_jobs_with_pause_after_failures() {
        let catalog = |extra: &str| {
            let text = format!(
                "[jobs.a]\nowner = \"x\"\n{extra}\n[jobs.a.schedule]\nexpression = \"rate(1 hour)\"\n\n[jobs.b]\nowner = \"x\"\n[jobs.b.schedule]\nexpression = \"rate(1 hour)\"\n"
            );
            render(&Catalog::parse(&text, "c.toml").unwrap())
                .unwrap()
                .resources
        };
        let none = catalog("");
        assert!(!none.contains("WorkerPausePolicy"), "{none}");
        assert!(!none.contains("PausedAlarm"), "{none}");
        let one = catalog("pause_after_failures = 2");
        // The policy's own lines: up to the next resource.
        let policy: String = one[one.find("  WorkerPausePolicy:").unwrap()..]
            .lines()
            .enumerate()
            .take_while(|(i, l)| *i == 0 || l.is_empty() || l.starts_with("    "))
            .map(|(_, l)| format!("{l}\n"))
            .collect();
        let resources: Vec<&str> = policy
            .lines()
            .filter(|l| l.contains(":schedule/${ScheduleGroup}/"))
            .collect();
        assert_eq!(resources.len(), 1, "{policy}");
        assert!(resources[0].ends_with("/a\""), "{policy}");
        assert!(policy.contains("Action: [scheduler:GetSchedule, scheduler:UpdateSchedule]"));
        assert!(policy.contains("iam:PassedToService: scheduler.amazonaws.com"));
        assert!(one.contains("  PausedAlarmA:\n") && !one.contains("PausedAlarmB"));
        assert!(one.contains("after 2 consecutive FAILED runs"));
    }

    #[test]
    fn init_points_the_worker_at_another_crate_and_keeps_the_rest() {
        let stock = "A: 1\n    Metadata:\n      BuildProperties:\n        Binary: worker\n    Properties:\n      CodeUri: ../functions/worker\n      Handler: bootstrap\n";
        let copy = init(stock, ".", "my-jobs").unwrap();
        assert_eq!(
            copy,
            "A: 1\n    Metadata:\n      BuildProperties:\n        Binary: my-jobs\n    Properties:\n      CodeUri: .\n      Handler: bootstrap\n"
        );
        assert_eq!(
            init("A: 1\n", ".", "x").unwrap_err().to_string(),
            "the template has no `CodeUri:` line to point at the worker crate"
        );
        assert_eq!(
            init(stock, "my jobs: #1", "x").unwrap_err(),
            IacError::NotPlain("my jobs: #1".into())
        );
    }

    #[test]
    fn apply_is_idempotent_and_keeps_the_rest() {
        let template = format!("a\n  {BEGIN}\n  old\n  {END}\nb\n  {BEGIN}\n  {END}\nc\n");
        let r = Rendered {
            mappings: "  M\n".into(),
            resources: "  R\n".into(),
        };
        let once = apply(&template, &r).unwrap();
        assert_eq!(
            once,
            format!("a\n  {BEGIN}\n  M\n  {END}\nb\n  {BEGIN}\n  R\n  {END}\nc\n")
        );
        assert_eq!(apply(&once, &r).unwrap(), once);
    }
}
