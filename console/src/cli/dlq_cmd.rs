//! `schedkit dlq list | show | redrive | purge`: dead letters decoded, inspected, moved back
//! to the jobs queue, or dropped, never consumed by looking.

use std::time::Duration;

use chrono::Utc;
use clap::{Args, Subcommand};
use serde_json::json;

use super::status_cmd::clip;
use super::style::{Progress, confirm};
use super::{globals::Globals, output::Acted, output::Output, usage::UsageError};
use schedkit::ops::audit;
use schedkit::ops::dlq::{self, HeldLetter, Selection};
use schedkit::ops::executions::Records;

#[derive(Debug, Subcommand)]
pub enum DlqCommand {
    /// Every dead letter, decoded (job, key, reason, attempts, first failure, age).
    List,
    /// One dead letter whole, with its execution record (ID or its first characters).
    Show { id: String },
    /// Move dead letters back to the jobs queue: all through an SQS message move task, or a
    /// selection in batches of ten (each sent before it is deleted). A redriven run gets a fresh
    /// set of attempts.
    Redrive(SelectArgs),
    /// Delete dead letters (a selection, or all).
    Purge(SelectArgs),
}

#[derive(Debug, Args)]
pub struct SelectArgs {
    #[arg(long = "job")]
    pub jobs: Vec<String>,
    #[arg(long = "key")]
    pub keys: Vec<String>,
    /// A message id, whole or its start as `dlq list` prints it.
    #[arg(long = "message-id")]
    pub message_ids: Vec<String>,
    /// poison, unknown-job, key-conflict, attempts-exhausted, permanent-error, store-refused,
    /// record-mismatch, unconfigured, or redrive-policy (moved by SQS's redrive policy: the
    /// worker never decided).
    #[arg(long = "reason")]
    pub reasons: Vec<String>,
    /// Only those dead-lettered at least this long ago (90s, 15m, 2h, 1d).
    #[arg(long)]
    pub older_than: Option<String>,
    /// Only those dead-lettered at most this long ago.
    #[arg(long)]
    pub newer_than: Option<String>,
    /// Do not ask for confirmation.
    #[arg(long, short = 'y')]
    pub yes: bool,
}

impl SelectArgs {
    pub(crate) fn selection(&self) -> anyhow::Result<Selection> {
        let duration = |t: &Option<String>, flag: &str| -> anyhow::Result<Option<Duration>> {
            t.as_deref()
                .map(|d| {
                    humantime::parse_duration(d)
                        .map_err(|e| UsageError(format!("{flag} `{d}`: {e}")).into())
                })
                .transpose()
        };
        Ok(Selection {
            jobs: self.jobs.clone(),
            keys: self.keys.clone(),
            message_ids: self.message_ids.clone(),
            reasons: self.reasons.clone(),
            older_than: duration(&self.older_than, "--older-than")?,
            newer_than: duration(&self.newer_than, "--newer-than")?,
        })
    }

    pub(crate) fn describe(&self) -> String {
        let mut parts = Vec::new();
        for (name, values) in [
            ("job", &self.jobs),
            ("key", &self.keys),
            ("message id", &self.message_ids),
            ("reason", &self.reasons),
        ] {
            if !values.is_empty() {
                parts.push(format!("{name} {}", values.join(" or ")));
            }
        }
        if let Some(t) = &self.older_than {
            parts.push(format!("older than {t}"));
        }
        if let Some(t) = &self.newer_than {
            parts.push(format!("newer than {t}"));
        }
        if parts.is_empty() {
            "every dead letter".into()
        } else {
            format!("dead letters with {}", parts.join(", "))
        }
    }
}

/// `45s`, `12m`, `3h05m`, `2d04h` (the list's column, and the web page's).
pub(crate) fn age(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86_400 => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d{:02}h", s / 86_400, s % 86_400 / 3600),
    }
}

pub async fn run(command: &DlqCommand, cli: &Globals) -> anyhow::Result<()> {
    let acted = match command {
        DlqCommand::Redrive(a) => Some(redrive(a, cli).await?),
        DlqCommand::Purge(a) => Some(purge(a, cli).await?),
        DlqCommand::List | DlqCommand::Show { .. } => None,
    };
    if let Some(acted) = acted {
        cli.output.outcome(&acted.text, &acted.details);
        return Ok(());
    }
    let sdk = cli.aws.sdk_config().await;
    let target = cli.target.resolve(&sdk).await?;
    let store = Records::new(&sdk, &target.table);
    let not_found = |e| super::target::usage_if_not_found(e, &cli.target);
    match command {
        DlqCommand::List => {
            let letters = dlq::peek(&sdk, &target.dlq_url).await?;
            let now = Utc::now();
            let mut rows = Vec::new();
            for d in &letters {
                // The first failure is on the record's history; the letter knows the last.
                let first = match &d.key {
                    Some(k) => store.get(k).await.map_err(not_found)?.and_then(|r| {
                        r.history
                            .iter()
                            .find(|h| h.error.is_some())
                            .map(|h| h.finished_at.clone())
                    }),
                    None => None,
                };
                rows.push((d, first.or_else(|| d.failed_at.clone())));
            }
            if cli.output == Output::Json {
                let list: Vec<_> = rows
                    .iter()
                    .map(|(d, first)| {
                        let mut v = serde_json::to_value(d).expect("serialises");
                        v["first_failure"] = json!(first);
                        v["age_seconds"] = json!(d.age(now).as_secs());
                        v
                    })
                    .collect();
                println!("{}", serde_json::to_string_pretty(&list)?);
                return Ok(());
            }
            print!(
                "{}",
                super::output::table(
                    &[
                        "ID",
                        "JOB",
                        "KEY",
                        "REASON",
                        "ATTEMPTS",
                        "FIRST FAILURE",
                        "AGE",
                        "ERROR"
                    ],
                    &rows
                        .iter()
                        .map(|(d, first)| {
                            vec![
                                d.message_id.chars().take(8).collect(),
                                d.job.clone().unwrap_or_else(|| "-".into()),
                                clip(d.key.as_deref().unwrap_or("-"), 40),
                                d.reason.clone().unwrap_or_else(|| {
                                    schedkit::dead_letter::REDRIVE_POLICY.into()
                                }),
                                d.attempts
                                    .map(|a| a.to_string())
                                    .unwrap_or_else(|| "-".into()),
                                first.clone().unwrap_or_else(|| "-".into()),
                                age(d.age(now)),
                                clip(d.error.as_deref().unwrap_or("-"), 60),
                            ]
                        })
                        .collect::<Vec<_>>(),
                )
            );
            println!("({} dead letters)", rows.len());
            Ok(())
        }
        DlqCommand::Show { id } => {
            let letters = dlq::peek(&sdk, &target.dlq_url).await?;
            let matching: Vec<&HeldLetter> = letters
                .iter()
                .filter(|d| d.message_id.starts_with(id.as_str()))
                .collect();
            let d = match matching.as_slice() {
                [one] => *one,
                [] => {
                    return Err(UsageError(format!(
                        "no dead letter with id `{id}` (see `schedkit dlq list`)"
                    ))
                    .into());
                }
                _ => {
                    return Err(UsageError(format!(
                        "`{id}` matches {} dead letters: give more of the id",
                        matching.len()
                    ))
                    .into());
                }
            };
            let record = match &d.key {
                Some(k) => store.get(k).await.map_err(not_found)?,
                None => None,
            };
            if cli.output == Output::Json {
                let mut v = serde_json::to_value(d)?;
                v["record"] = serde_json::to_value(&record)?;
                println!("{}", serde_json::to_string_pretty(&v)?);
                return Ok(());
            }
            let line = |k: &str, v: String| println!("{k:<18}{v}");
            let or = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
            line("message id", d.message_id.clone());
            line(
                "reason",
                d.reason
                    .clone()
                    .unwrap_or_else(|| "redrive-policy (the worker never decided)".into()),
            );
            line("error", or(&d.error));
            line("job", or(&d.job));
            line("key", or(&d.key));
            line(
                "attempts",
                d.attempts
                    .map(|a| a.to_string())
                    .unwrap_or_else(|| "-".into()),
            );
            line("failed at", or(&d.failed_at));
            line("dead-lettered at", d.dead_lettered_at.to_rfc3339());
            line("source queue", or(&d.source_queue));
            if let Some(r) = &record {
                line(
                    "record",
                    format!(
                        "{} after {} attempt(s) (`schedkit executions show {}`)",
                        r.status, r.attempt, r.execution_key
                    ),
                );
            }
            println!("\nbody");
            match serde_json::from_str::<serde_json::Value>(&d.body) {
                Ok(v) => println!("{}", serde_json::to_string_pretty(&v)?),
                Err(_) => println!("{}", d.body),
            }
            Ok(())
        }
        DlqCommand::Redrive(_) | DlqCommand::Purge(_) => unreachable!("acted on above"),
    }
}

/// `dlq redrive`: confirmed (unless `--yes`), audited; what it did, for the console to
/// print and the web page to show.
pub(crate) async fn redrive(a: &SelectArgs, cli: &Globals) -> anyhow::Result<Acted> {
    let selection = a.selection()?;
    let sdk = cli.aws.sdk_config().await;
    let target = cli.target.resolve(&sdk).await?;
    audit::ensure_writable()?;
    confirm(
        &format!("redrive {} to {}", a.describe(), target.queue_url),
        a.yes,
    )?;
    let audited = audit::begin(
        &sdk,
        "dlq redrive",
        json!({"stage": target.stage, "dlq": target.dlq_url, "selection": a.describe()}),
    )
    .await?;
    // Each letter goes back to the queue it came from: the host jobs' letters to theirs.
    let to = destinations(&target, cli);
    // A message move task sends every letter to one queue: not when some are host jobs'.
    if selection.is_everything() && to.host_jobs.is_empty() {
        let mut progress = Progress::new("moving dead letters", None);
        let mut moved = 0;
        let done = dlq::redrive_all(&sdk, &target.dlq_arn, &target.queue_arn, |p| {
            moved = p.moved;
            progress.set(p.moved as u64, p.to_move.map(|t| t as u64));
        })
        .await;
        progress.finish();
        let so_far = format!("about {moved} letter(s) moved by the message move task");
        audited.end(&done, Some(&so_far)).await;
        let done = done?;
        return Ok(Acted {
            text: format!(
                "moved {} dead letter(s) back with a message move task ({})",
                done.moved, done.status
            ),
            details: json!({"selection": "all", "moved": done.moved, "via": "message move task", "task_status": done.status}),
        });
    }
    let mut progress = Progress::new("redriving", None);
    let done = dlq::redrive_selected(&sdk, &target.dlq_url, &to, &selection, |n| {
        progress.set(n as u64, None)
    })
    .await;
    progress.finish();
    audited
        .end(&done, done.as_ref().err().and_then(|e| e.done()))
        .await;
    let done = done?;
    Ok(Acted {
        text: format!(
            "redrove {} dead letter(s); {} did not match and stay",
            done.done, done.skipped
        ),
        details: json!({"selection": a.describe(), "moved": done.done, "skipped": done.skipped, "via": "send then delete"}),
    })
}

/// `dlq purge`: confirmed (unless `--yes`), audited.
pub(crate) async fn purge(a: &SelectArgs, cli: &Globals) -> anyhow::Result<Acted> {
    let selection = a.selection()?;
    let sdk = cli.aws.sdk_config().await;
    let target = cli.target.resolve(&sdk).await?;
    audit::ensure_writable()?;
    confirm(
        &format!("delete {} from {} for good", a.describe(), target.dlq_url),
        a.yes,
    )?;
    let audited = audit::begin(
        &sdk,
        "dlq purge",
        json!({"stage": target.stage, "dlq": target.dlq_url, "selection": a.describe()}),
    )
    .await?;
    let mut progress = Progress::new("deleting", None);
    let done = dlq::purge_selected(&sdk, &target.dlq_url, &selection, |n| {
        progress.set(n as u64, None)
    })
    .await;
    progress.finish();
    audited
        .end(&done, done.as_ref().err().and_then(|e| e.done()))
        .await;
    let done = done?;
    Ok(Acted {
        text: format!(
            "deleted {} dead letter(s); {} did not match and stay",
            done.done, done.skipped
        ),
        details: json!({"selection": a.describe(), "deleted": done.done, "skipped": done.skipped}),
    })
}

/// Where a redrive sends each letter: the stage's two queues, and the catalog's host jobs
/// (none when the catalog cannot be read: their letters still name their source queue).
fn destinations(target: &schedkit::ops::stage::Stage, cli: &Globals) -> dlq::Destinations {
    let host_jobs = match (&target.host_queue_url, super::globals::load_catalog(cli)) {
        (Some(_), Ok(catalog)) => catalog
            .jobs
            .values()
            .filter(|j| j.spec.runs_on == schedkit::catalog::RunsOn::Host)
            .map(|j| j.name.clone())
            .collect(),
        _ => Default::default(),
    };
    dlq::Destinations {
        jobs: target.queue_url.clone(),
        host: target.host_queue_url.clone(),
        host_jobs,
    }
}
