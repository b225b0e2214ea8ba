//! `schedkit executions list` and `schedkit executions show KEY`.

use clap::{Args, Subcommand};
use schedkit::Status;
use schedkit::ops::executions::{Filter, Records};

use super::status_cmd::clip;
use super::{globals::Globals, globals::parse_instant, output::Output, style, usage::UsageError};

#[derive(Debug, Subcommand)]
pub enum ExecutionsCommand {
    /// Records, newest first, a page at a time.
    List(ListArgs),
    /// One record whole: attempts with their errors, input, lease, timings.
    Show { key: String },
}

#[derive(Debug, Args)]
pub struct ListArgs {
    #[arg(long)]
    pub job: Option<String>,
    /// REGISTERED, RUNNING, RETRYING, DONE, FAILED, SKIPPED or PAUSED.
    #[arg(long, value_parser = parse_status)]
    pub status: Option<Status>,
    /// From this instant (RFC 3339): scheduled at (with --job), else last updated at.
    #[arg(long)]
    pub since: Option<String>,
    #[arg(long)]
    pub until: Option<String>,
    /// Records per page.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(i32).range(1..=1000))]
    pub limit: i32,
    /// The token a previous page printed.
    #[arg(long)]
    pub page: Option<String>,
}

fn parse_status(text: &str) -> Result<Status, String> {
    serde_json::from_value(serde_json::Value::String(text.to_ascii_uppercase())).map_err(|_| {
        format!("`{text}` is not a status: REGISTERED, RUNNING, RETRYING, DONE, FAILED, SKIPPED or PAUSED")
    })
}

pub async fn run(command: &ExecutionsCommand, cli: &Globals) -> anyhow::Result<()> {
    let sdk = cli.aws.sdk_config().await;
    let table = cli.target.stage_ref().table();
    let store = Records::new(&sdk, &table);
    match command {
        ExecutionsCommand::List(a) => {
            let instant = |t: &Option<String>| {
                t.as_deref()
                    .map(parse_instant)
                    .transpose()
                    .map_err(UsageError)
            };
            let filter = Filter {
                job: a.job.clone(),
                status: a.status,
                since: instant(&a.since)?,
                until: instant(&a.until)?,
                limit: a.limit,
                page: a.page.clone(),
            };
            let (records, next) = store
                .list(&filter)
                .await
                .map_err(|e| super::target::usage_if_not_found(e, &cli.target))?;
            if cli.output == Output::Json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(
                        &serde_json::json!({"records": records, "next_page": next})
                    )?
                );
                return Ok(());
            }
            print!(
                "{}",
                super::output::table(
                    &[
                        "KEY",
                        "JOB",
                        "SCHEDULED FOR",
                        "STATUS",
                        "ATTEMPTS",
                        "DURATION",
                        "LAST ERROR"
                    ],
                    &records
                        .iter()
                        .map(|r| {
                            vec![
                                clip(&r.execution_key, 48),
                                r.job.clone(),
                                r.scheduled_for.clone(),
                                style::status(r.status),
                                r.attempt.to_string(),
                                r.duration_ms
                                    .map(|d| format!("{d} ms"))
                                    .unwrap_or_else(|| "-".into()),
                                clip(r.last_error.as_deref().unwrap_or("-"), 60),
                            ]
                        })
                        .collect::<Vec<_>>(),
                )
            );
            match next {
                Some(token) => println!("(more: --page {token})"),
                None if records.is_empty() => println!("(no execution matches)"),
                None => {}
            }
            Ok(())
        }
        ExecutionsCommand::Show { key } => {
            let record = store
                .get(key)
                .await
                .map_err(|e| super::target::usage_if_not_found(e, &cli.target))?
                .ok_or_else(|| UsageError(format!("no execution `{key}` in {table}")))?;
            if cli.output == Output::Json {
                println!("{}", serde_json::to_string_pretty(&record)?);
                return Ok(());
            }
            let now = chrono::Utc::now().timestamp_millis();
            let lease = match (&record.owner, record.lease_expires_at) {
                (Some(o), Some(t)) if t > now => {
                    format!("held by {o}, {} s left", (t - now) / 1000)
                }
                (Some(o), Some(_)) => format!("expired (last owner {o})"),
                (Some(o), None) => format!("released (last owner {o})"),
                _ => "-".into(),
            };
            let line = |k: &str, v: String| println!("{k:<15}{v}");
            line("key", record.execution_key.clone());
            line("job", record.job.clone());
            line("scheduled for", record.scheduled_for.clone());
            line("status", style::status(record.status));
            line(
                "attempts",
                match record.status {
                    // A FAILED round is over: the next claim (a redrive) starts a new one.
                    Status::Failed => {
                        format!("{} in all; a redrive starts a fresh round", record.attempt)
                    }
                    _ => format!(
                        "{} in this round, {} in all",
                        record.round_attempt(),
                        record.attempt
                    ),
                },
            );
            line("lease", lease);
            line("created", record.created_at.clone());
            line(
                "started",
                record.started_at.clone().unwrap_or_else(|| "-".into()),
            );
            line(
                "finished",
                record.finished_at.clone().unwrap_or_else(|| "-".into()),
            );
            line(
                "duration",
                record
                    .duration_ms
                    .map(|d| format!("{d} ms"))
                    .unwrap_or_else(|| "-".into()),
            );
            line(
                "last error",
                record.last_error.clone().unwrap_or_else(|| "-".into()),
            );
            line(
                "result",
                record.result.clone().unwrap_or_else(|| "-".into()),
            );
            line(
                "message",
                record.message_id.clone().unwrap_or_else(|| "-".into()),
            );
            println!("\nattempts");
            print!(
                "{}",
                super::output::table(
                    &[
                        "#", "OUTCOME", "STARTED", "FINISHED", "DURATION", "OWNER", "ERROR"
                    ],
                    &record
                        .history
                        .iter()
                        .map(|h| {
                            vec![
                                h.attempt.to_string(),
                                serde_json::to_value(h.outcome)
                                    .ok()
                                    .and_then(|v| v.as_str().map(str::to_owned))
                                    .unwrap_or_default(),
                                h.started_at.clone(),
                                h.finished_at.clone(),
                                h.duration_ms
                                    .map(|d| format!("{d} ms"))
                                    .unwrap_or_else(|| "-".into()),
                                clip(&h.owner, 40),
                                clip(h.error.as_deref().unwrap_or("-"), 60),
                            ]
                        })
                        .collect::<Vec<_>>(),
                )
            );
            println!("\ninput");
            let input = record.input.unwrap_or_default();
            match serde_json::from_str::<serde_json::Value>(&input) {
                Ok(v) => println!("{}", serde_json::to_string_pretty(&v)?),
                Err(_) => println!("{input}"),
            }
            Ok(())
        }
    }
}
