//! `schedkit jobs`: the catalog with each job's next three runs, last status and success
//! rate (over its last 20 runs), and paused jobs with who paused them, when and why;
//! `jobs pause JOB --reason ...` and `jobs resume JOB`.

use chrono::{SecondsFormat, Utc};
use clap::{Args, Subcommand};
use schedkit::Status;
use schedkit::ops::audit;
use schedkit::store::{PauseRecord, Paused, Pauses};
use schedkit::trigger::{pause, sync};
use serde::Serialize;

use futures::StreamExt;
use schedkit::ops::executions::Records;
use schedkit::ops::paging::{Page, Paged};

use super::page_args::{PageArgs, footer};

use super::{
    globals::Globals, globals::load_catalog, globals::stage_group, output::Acted, output::Output,
    style, usage::UsageError,
};

#[derive(Debug, Args)]
pub struct JobsArgs {
    #[command(subcommand)]
    pub action: Option<JobsAction>,
    /// Only the jobs of this owner (the catalog's `owner`).
    #[arg(long)]
    pub owner: Option<String>,
    #[command(flatten)]
    pub page: PageArgs,
}

/// Which of the catalog's jobs a listing shows: an owner's, a page of them.
#[derive(Debug, Clone)]
pub(crate) struct Selection {
    pub owner: Option<String>,
    pub page: Page,
}

impl Default for Selection {
    fn default() -> Self {
        Selection {
            owner: None,
            page: Page::first(),
        }
    }
}

/// Jobs whose recent runs are read at once.
const QUERIES_AT_ONCE: usize = 8;

#[derive(Debug, Subcommand)]
pub enum JobsAction {
    /// Disable a job's schedule (State DISABLED) and record who, when and why; sync keeps
    /// it disabled until `jobs resume`.
    Pause {
        /// A scheduled job of the catalog.
        job: String,
        /// Why, for whoever looks at `status` next.
        #[arg(long)]
        reason: String,
    },
    /// Enable a paused job's schedule again.
    Resume {
        /// A scheduled job of the catalog.
        job: String,
    },
}

/// Pauses or resumes `job` on the stage; audited. What it did, for the console to print
/// and the web page to show.
pub(crate) async fn pause_or_resume(action: &JobsAction, cli: &Globals) -> anyhow::Result<Acted> {
    let catalog = load_catalog(cli)?;
    let (JobsAction::Pause { job, .. } | JobsAction::Resume { job }) = action;
    if catalog.job(job).is_none_or(|j| j.schedule.is_none()) {
        return Err(UsageError(format!(
            "`{job}` is not a scheduled job of {} (scheduled: {})",
            catalog.file,
            catalog
                .scheduled()
                .map(|j| j.name.clone())
                .collect::<Vec<_>>()
                .join(", ")
        ))
        .into());
    }
    audit::ensure_writable()?;
    let sdk = cli.aws.sdk_config().await;
    let group = stage_group(&catalog, cli);
    let scheduler = sync::client(&sdk);
    let pauses = Pauses::for_table(&sdk, cli.target.stage_ref().table());
    let now = Utc::now();
    match action {
        JobsAction::Pause { job, reason } => {
            let audited = audit::begin(
                &sdk,
                "jobs pause",
                serde_json::json!({"job": job, "group": group, "reason": reason}),
            )
            .await?;
            let by = audited.who().to_string();
            let result = pause::pause(&scheduler, &pauses, &group, job, &by, reason, now).await;
            audited
                .end(
                    &audited_view(&result, summary),
                    decided_only(
                        &result,
                        "the pause recorded (the schedule not yet disabled)",
                    ),
                )
                .await;
            let decided = result?;
            let paused = decided.decided;
            if let Err(e) = decided.schedule {
                return Err(anyhow::anyhow!(
                    "{job}: the pause is recorded, but schedule {group}/{job} could not be disabled: {e} (the next `jobs pause`, `jobs resume` or `schedules sync` sets it)"
                ));
            }
            let (p, already) = match paused {
                Paused::Already(existing) => (existing, true),
                Paused::Now | Paused::StreakEnded => (
                    PauseRecord {
                        job: job.clone(),
                        by,
                        at: now.to_rfc3339_opts(SecondsFormat::Secs, true),
                        reason: reason.clone(),
                    },
                    false,
                ),
            };
            let mut details = serde_json::to_value(&p)?;
            details["already"] = already.into();
            let text = if already {
                format!(
                    "{job}: already paused (schedule {group}/{job} DISABLED) by {} at {}: {} (kept; `jobs resume {job}` first to pause it with another reason)",
                    p.by, p.at, p.reason
                )
            } else {
                format!(
                    "{job}: paused (schedule {group}/{job} DISABLED) by {} at {}: {}",
                    p.by, p.at, p.reason
                )
            };
            Ok(Acted { text, details })
        }
        JobsAction::Resume { job } => {
            let audited = audit::begin(
                &sdk,
                "jobs resume",
                serde_json::json!({"job": job, "group": group}),
            )
            .await?;
            let result = pause::resume(&scheduler, &pauses, &group, job, now).await;
            audited
                .end(
                    &audited_view(&result, |was| serde_json::json!({ "was": was })),
                    decided_only(&result, "the pause removed (the schedule not yet enabled)"),
                )
                .await;
            let decided = result?;
            let ended = decided.decided;
            if let Err(e) = decided.schedule {
                return Err(anyhow::anyhow!(
                    "{job}: the pause is removed, but schedule {group}/{job} could not be enabled: {e} (the next `jobs resume` or `schedules sync` sets it)"
                ));
            }
            let text = match &ended {
                Some(p) => format!(
                    "{job}: resumed (schedule ENABLED); it was paused by {} at {}: {}",
                    p.by, p.at, p.reason
                ),
                None => format!("{job}: resumed (schedule ENABLED); it had no pause on record"),
            };
            Ok(Acted {
                text,
                details: serde_json::json!({"job": job, "resumed": true, "was": ended}),
            })
        }
    }
}

/// A pause's or resume's result as the audit trail keeps it: finished when the schedule
/// agrees with the record.
fn audited_view<T>(
    result: &Result<pause::Decided<T>, schedkit::trigger::TriggerError>,
    summary: impl Fn(&T) -> serde_json::Value,
) -> Result<serde_json::Value, String> {
    match result {
        Ok(d) => match &d.schedule {
            Ok(()) => Ok(summary(&d.decided)),
            Err(e) => Err(e.to_string()),
        },
        Err(e) => Err(e.to_string()),
    }
}

/// What a pause or resume that did not finish had done: its record, when it was written.
fn decided_only<T>(
    result: &Result<pause::Decided<T>, schedkit::trigger::TriggerError>,
    done: &'static str,
) -> Option<&'static str> {
    result
        .as_ref()
        .ok()
        .filter(|d| d.schedule.is_err())
        .map(|_| done)
}

/// A pause's outcome as the audit trail keeps it.
fn summary(paused: &Paused) -> serde_json::Value {
    match paused {
        Paused::Now => serde_json::json!({"paused": true}),
        Paused::Already(p) => serde_json::json!({"paused": false, "already": p}),
        Paused::StreakEnded => serde_json::json!({"paused": false}),
    }
}

/// A catalog job as `schedkit jobs` and the web page's jobs list show it.
#[derive(Serialize)]
pub(crate) struct Row {
    pub job: String,
    pub owner: String,
    pub schedule: Option<String>,
    pub timezone: Option<String>,
    pub next_runs: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paused: Option<PauseRecord>,
    pub last_status: Option<Status>,
    /// What limits its runs (`schedkit status` shows the limits in use).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub limits: String,
    /// DONE / (DONE + FAILED) over the recent runs, when any ended.
    pub success_rate: Option<f64>,
    pub recent_runs: usize,
    /// The recent runs themselves, newest first (the page draws them as a strip).
    #[serde(skip)]
    pub recent: Vec<schedkit::ExecutionRecord>,
}

/// The selected catalog jobs with their next three runs, pause, last status and success
/// rate over their last 20 runs: one `by-job` query per job of the page (a few at once) and
/// one read of their pauses. Where the page stands among the selection.
pub(crate) async fn rows(
    catalog: &schedkit::catalog::Catalog,
    sdk: &schedkit::aws::SdkConfig,
    table: &str,
    selection: &Selection,
) -> Result<(Vec<Row>, Paged), schedkit::ops::OpsError> {
    let records = Records::new(sdk, table);
    let selected: Vec<&schedkit::catalog::Job> = catalog
        .jobs
        .values()
        .filter(|j| selection.owner.as_ref().is_none_or(|o| &j.spec.owner == o))
        .collect();
    let paged = selection.page.of(selected.len());
    let on_page = &selected[selection.page.range(selected.len())];
    let mut paused = Pauses::for_table(sdk, table)
        .of(on_page.iter().map(|j| j.name.as_str()))
        .await
        .map_err(|e| {
            schedkit::ops::OpsError::Aws(schedkit::aws::AwsError {
                doing: "reading the pauses".into(),
                answer: e.to_string(),
                code: None,
            })
        })?;
    let names: Vec<String> = on_page.iter().map(|j| j.name.clone()).collect();
    let recents: Vec<Vec<schedkit::ExecutionRecord>> =
        futures::stream::iter(names.into_iter().map(|name| {
            let records = records.clone();
            async move { records.recent_of(&name, 20).await }
        }))
        .buffered(QUERIES_AT_ONCE)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<_, _>>()?;
    let now = Utc::now();
    let mut rows = Vec::new();
    for (job, recent) in on_page.iter().zip(recents) {
        let done = recent.iter().filter(|r| r.status == Status::Done).count();
        let failed = recent.iter().filter(|r| r.status == Status::Failed).count();
        let spec = job.spec.schedule.as_ref();
        rows.push(Row {
            job: job.name.clone(),
            owner: job.spec.owner.clone(),
            schedule: spec.map(|s| s.expression.clone()),
            timezone: spec.map(|s| s.timezone.clone()),
            next_runs: match (&job.schedule, spec) {
                (Some(s), Some(spec)) if spec.enabled => s
                    .next_n(now, 3)
                    .into_iter()
                    .map(|t| t.to_rfc3339_opts(SecondsFormat::Secs, true))
                    .collect(),
                _ => Vec::new(),
            },
            paused: paused.remove(&job.name),
            last_status: recent.first().map(|r| r.status),
            limits: schedkit::ops::limits::describe(job),
            success_rate: (done + failed > 0).then(|| done as f64 / (done + failed) as f64),
            recent_runs: recent.len(),
            recent,
        });
    }
    Ok((rows, paged))
}

pub async fn run(a: &JobsArgs, cli: &Globals) -> anyhow::Result<()> {
    if let Some(action) = &a.action {
        let acted = pause_or_resume(action, cli).await?;
        cli.output.outcome(&acted.text, &acted.details);
        return Ok(());
    }
    let catalog = load_catalog(cli)?;
    let sdk = cli.aws.sdk_config().await;
    let target = cli.target.resolve(&sdk).await?;
    let selection = Selection {
        owner: a.owner.clone(),
        page: a.page.page(),
    };
    let (rows, paged) = rows(&catalog, &sdk, &target.table, &selection)
        .await
        .map_err(|e| super::target::usage_if_not_found(e, &cli.target))?;
    if cli.output == Output::Json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    // A column for limits only when a job has some.
    let limited = rows.iter().any(|r| !r.limits.is_empty());
    let mut headers = vec![
        "JOB",
        "OWNER",
        "SCHEDULE",
        "NEXT RUNS (UTC)",
        "LAST",
        "SUCCESS",
    ];
    if limited {
        headers.push("LIMITS");
    }
    cli.output.rows(&headers, &rows, |r| {
        let next = match (&r.schedule, r.next_runs.is_empty()) {
            _ if r.paused.is_some() => {
                let p = r.paused.as_ref().expect("checked");
                format!("PAUSED since {} by {}: {}", p.at, p.by, p.reason)
            }
            (None, _) => "on demand".to_string(),
            (Some(s), true) if s.starts_with("rate(") => "from its start (or deploy)".to_string(),
            (Some(_), true) => "-".to_string(),
            (Some(_), false) => r.next_runs.join(", "),
        };
        vec![
            r.job.clone(),
            r.owner.clone(),
            match (&r.schedule, &r.timezone) {
                (Some(s), Some(tz)) => format!("{s} {tz}"),
                _ => "-".into(),
            },
            next,
            r.last_status
                .map(style::status)
                .unwrap_or_else(|| "-".into()),
            r.success_rate
                .map(|p| format!("{:.0}% of {}", p * 100.0, r.recent_runs))
                .unwrap_or_else(|| "-".into()),
        ]
        .into_iter()
        .chain(limited.then(|| match r.limits.is_empty() {
            true => "-".to_string(),
            false => r.limits.clone(),
        }))
        .collect()
    });
    if let Some(line) = footer(&paged, "jobs") {
        println!("{line}");
    }
    Ok(())
}
