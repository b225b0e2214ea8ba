//! `schedkit catalog check`: validate the catalog, list its jobs with their next run.

use chrono::{SecondsFormat, Utc};
use clap::Subcommand;
use serde::Serialize;

use super::{globals::Globals, globals::load_catalog};

#[derive(Debug, Subcommand)]
pub enum CatalogCommand {
    /// Validate the catalog (every problem, with file, job and field) and list its jobs.
    Check,
}

#[derive(Serialize)]
struct Row {
    job: String,
    owner: String,
    target: String,
    schedule: Option<String>,
    timezone: Option<String>,
    enabled: bool,
    next_run: Option<String>,
}

pub async fn run(command: &CatalogCommand, cli: &Globals) -> anyhow::Result<()> {
    match command {
        CatalogCommand::Check => {
            let catalog = load_catalog(cli)?;
            let now = Utc::now();
            let rows: Vec<Row> = catalog
                .jobs
                .values()
                .map(|job| {
                    let spec = job.spec.schedule.as_ref();
                    Row {
                        job: job.name.clone(),
                        owner: job.spec.owner.clone(),
                        target: job.spec.target.clone(),
                        schedule: spec.map(|s| s.expression.clone()),
                        timezone: spec.map(|s| s.timezone.clone()),
                        enabled: spec.is_none_or(|s| s.enabled),
                        next_run: job
                            .schedule
                            .as_ref()
                            .and_then(|s| s.next_after(now))
                            .map(|t| t.to_rfc3339_opts(SecondsFormat::Secs, true)),
                    }
                })
                .collect();
            // Warnings go to stderr: `--output json` stays one document, the exit code 0.
            for w in &catalog.warnings {
                eprintln!("warning: {w}");
            }
            if cli.output == super::output::Output::Table {
                println!("{}: valid, {} jobs\n", catalog.file, rows.len());
            }
            cli.output.rows(
                &[
                    "JOB",
                    "OWNER",
                    "TARGET",
                    "SCHEDULE",
                    "ZONE",
                    "NEXT RUN (UTC)",
                ],
                &rows,
                |r| {
                    vec![
                        r.job.clone(),
                        r.owner.clone(),
                        r.target.clone(),
                        r.schedule.clone().unwrap_or_else(|| "-".into()),
                        r.timezone.clone().unwrap_or_else(|| "-".into()),
                        match (&r.next_run, r.enabled, &r.schedule) {
                            (_, false, _) => "disabled".into(),
                            (Some(t), true, _) => t.clone(),
                            (None, true, Some(s)) if s.starts_with("rate(") => {
                                "counts from its start (or from sync)".into()
                            }
                            (None, true, _) => "-".into(),
                        },
                    ]
                },
            );
            Ok(())
        }
    }
}
