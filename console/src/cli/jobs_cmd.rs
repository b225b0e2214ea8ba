//! `schedkit jobs`: the catalog with each job's next three runs, last status and success
//! rate (over its last 20 runs).

use chrono::{SecondsFormat, Utc};
use schedkit::Status;
use serde::Serialize;

use schedkit::ops::executions::Records;

use super::{Cli, Output, load_catalog, style};

#[derive(Serialize)]
struct Row {
    job: String,
    owner: String,
    schedule: Option<String>,
    timezone: Option<String>,
    next_runs: Vec<String>,
    last_status: Option<Status>,
    /// DONE / (DONE + FAILED) over the recent runs, when any ended.
    success_rate: Option<f64>,
    recent_runs: usize,
}

pub async fn run(cli: &Cli) -> anyhow::Result<()> {
    let catalog = load_catalog(cli)?;
    let sdk = cli.aws.sdk_config().await;
    let target = cli.target.resolve(&sdk).await?;
    let records = Records::new(&sdk, &target.table);
    let now = Utc::now();
    let mut rows = Vec::new();
    for job in catalog.jobs.values() {
        let recent = records
            .recent_of(&job.name, 20)
            .await
            .map_err(|e| super::usage_if_not_found(e, &cli.target))?;
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
            last_status: recent.first().map(|r| r.status),
            success_rate: (done + failed > 0).then(|| done as f64 / (done + failed) as f64),
            recent_runs: recent.len(),
        });
    }
    if cli.output == Output::Json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    cli.output.rows(
        &[
            "JOB",
            "OWNER",
            "SCHEDULE",
            "NEXT RUNS (UTC)",
            "LAST",
            "SUCCESS",
        ],
        &rows,
        |r| {
            let next = match (&r.schedule, r.next_runs.is_empty()) {
                (None, _) => "on demand".to_string(),
                (Some(s), true) if s.starts_with("rate(") => {
                    "from its start (or deploy)".to_string()
                }
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
        },
    );
    Ok(())
}
