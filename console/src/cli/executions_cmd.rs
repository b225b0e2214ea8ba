//! `schedkit executions list`, `schedkit executions show KEY` and `schedkit executions
//! cancel` (one run by its key, or a job's runs by status; previewed, confirmed, audited).

use clap::{Args, Subcommand};
use schedkit::Status;
use schedkit::ops::audit;
use schedkit::ops::cancel::{Canceller, Selection};
use schedkit::ops::executions::{Filter, Records};
use schedkit::store::CANCELLABLE;
use serde_json::json;

use super::status_cmd::clip;
use super::{
    globals::Globals, globals::parse_instant, output::Acted, output::Output, style,
    usage::UsageError,
};

#[derive(Debug, Subcommand)]
pub enum ExecutionsCommand {
    /// Records, newest first, a page at a time.
    List(ListArgs),
    /// One record whole: attempts with their errors, input, lease, timings.
    Show { key: String },
    /// Cancel a run (KEY), or a job's runs by status (--job): its record becomes CANCELLED,
    /// a running attempt stops at its next heartbeat with its effects never committed,
    /// and any later message of the key is acknowledged unrun. Nothing reopens a
    /// cancelled run: fire the work again under a new key.
    Cancel(CancelArgs),
}

#[derive(Debug, Args)]
pub struct CancelArgs {
    /// The run to cancel.
    #[arg(required_unless_present = "job", conflicts_with = "job")]
    pub key: Option<String>,
    /// Cancel this job's runs instead, in the states of --status.
    #[arg(long)]
    pub job: Option<String>,
    /// With --job: registered, retrying, running, failed, or queued (its messages waiting
    /// in the jobs queue, no record yet); repeat or separate with commas. Default:
    /// registered, retrying, running and queued: every run not yet decided.
    #[arg(long, requires = "job", value_delimiter = ',')]
    pub status: Vec<String>,
    /// Why (kept on each record and in the audit trail).
    #[arg(long, default_value = "no reason given")]
    pub reason: String,
    /// Do not ask for confirmation.
    #[arg(long)]
    pub yes: bool,
}

impl CancelArgs {
    /// The bulk selection (--job), its states checked.
    fn selection(&self) -> Result<Option<Selection>, UsageError> {
        let Some(job) = &self.job else {
            return Ok(None);
        };
        let named: Vec<String> = if self.status.is_empty() {
            ["registered", "retrying", "running", "queued"]
                .map(String::from)
                .to_vec()
        } else {
            self.status.clone()
        };
        let mut selection = Selection {
            job: job.clone(),
            statuses: Vec::new(),
            queued: false,
        };
        for name in named {
            if name.eq_ignore_ascii_case("queued") {
                selection.queued = true;
                continue;
            }
            let status = parse_status(&name).map_err(UsageError)?;
            if !CANCELLABLE.contains(&status) {
                return Err(UsageError(format!(
                    "--status {name}: a {status} run cannot be cancelled; give registered, retrying, running, failed or queued"
                )));
            }
            if !selection.statuses.contains(&status) {
                selection.statuses.push(status);
            }
        }
        Ok(Some(selection))
    }
}

#[derive(Debug, Args)]
pub struct ListArgs {
    #[arg(long)]
    pub job: Option<String>,
    /// REGISTERED, RUNNING, RETRYING, DONE, FAILED, SKIPPED, PAUSED or CANCELLED.
    #[arg(long, value_parser = parse_status, conflicts_with_all = ["missed", "late"])]
    pub status: Option<Status>,
    /// The scheduled firings the accountant found with no run (they have no record to
    /// list): each with its key and when it was due. With --late, both.
    #[arg(long, conflicts_with_all = ["page", "since", "until"])]
    pub missed: bool,
    /// The runs the accountant found not DONE past their deadline.
    #[arg(long, conflicts_with_all = ["page", "since", "until"])]
    pub late: bool,
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

/// `executions list --missed/--late`: the accountant's findings (one read), by kind.
async fn unaccounted(
    a: &ListArgs,
    cli: &Globals,
    sdk: &schedkit::aws::SdkConfig,
    table: &str,
) -> anyhow::Result<()> {
    let accounted = schedkit::ops::status::accounted(sdk, table)
        .await
        .map_err(|e| super::target::usage_if_not_found(e, &cli.target))?;
    let Some(accounted) = accounted else {
        if cli.output == Output::Json {
            println!("{}", json!({"checked_at": null, "findings": []}));
        } else {
            println!(
                "(the accountant has not checked this stage yet: it runs every 5 minutes once deployed, or `worker --account`)"
            );
        }
        return Ok(());
    };
    let wanted =
        |f: &&schedkit::accounting::ledger::Finding| a.job.as_deref().is_none_or(|j| f.name == j);
    let mut findings: Vec<_> = Vec::new();
    if a.missed {
        findings.extend(accounted.missed.iter().filter(wanted));
    }
    if a.late {
        findings.extend(accounted.late.iter().filter(wanted));
    }
    findings.truncate(usize::try_from(a.limit).unwrap_or(usize::MAX));
    if cli.output == Output::Json {
        println!(
            "{}",
            serde_json::to_string_pretty(
                &json!({"checked_at": accounted.checked_at, "findings": findings})
            )?
        );
        return Ok(());
    }
    let when =
        |t: &chrono::DateTime<chrono::Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    print!(
        "{}",
        super::output::table(
            &[
                "KIND",
                "KEY",
                "JOB",
                "SCHEDULED FOR",
                "DUE BY",
                "STATUS",
                "FOUND AT"
            ],
            &findings
                .iter()
                .map(|f| {
                    vec![
                        format!("{:?}", f.kind).to_lowercase(),
                        clip(&f.key, 48),
                        f.name.clone(),
                        when(&f.scheduled_for),
                        when(&f.due_by),
                        f.status.map(style::status).unwrap_or_else(|| "-".into()),
                        when(&f.found_at),
                    ]
                })
                .collect::<Vec<_>>(),
        )
    );
    let checked = accounted.checked_at.as_ref().map(when).unwrap_or_default();
    if findings.is_empty() {
        println!("(none: every expected firing accounted for at the last check, {checked})");
    } else {
        println!("(as of the accountant's last check, {checked})");
    }
    Ok(())
}

fn parse_status(text: &str) -> Result<Status, String> {
    serde_json::from_value(serde_json::Value::String(text.to_ascii_uppercase())).map_err(|_| {
        format!("`{text}` is not a status: REGISTERED, RUNNING, RETRYING, DONE, FAILED, SKIPPED, PAUSED or CANCELLED")
    })
}

pub async fn run(command: &ExecutionsCommand, cli: &Globals) -> anyhow::Result<()> {
    let sdk = cli.aws.sdk_config().await;
    let table = cli.target.stage_ref().table();
    let store = Records::new(&sdk, &table);
    match command {
        ExecutionsCommand::Cancel(a) => {
            let acted = cancel(a, cli, &sdk, &table).await?;
            cli.output.outcome(&acted.text, &acted.details);
            Ok(())
        }
        ExecutionsCommand::List(a) if a.missed || a.late => unaccounted(a, cli, &sdk, &table).await,
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
                ..Filter::default()
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
            let trace_id = schedkit::telemetry::trace_ids::of_record(&record);
            if cli.output == Output::Json {
                /// The record as stored, and its trace's id.
                #[derive(serde::Serialize)]
                struct Shown<'a> {
                    #[serde(flatten)]
                    record: &'a schedkit::ExecutionRecord,
                    trace_id: &'a str,
                }
                let shown = Shown {
                    record: &record,
                    trace_id: &trace_id,
                };
                println!("{}", serde_json::to_string_pretty(&shown)?);
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
            line("trace id", trace_id);
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
            if let Some(c) = &record.cancelled {
                line(
                    "cancelled",
                    format!("by {} at {}: {}", c.by, c.at, c.reason),
                );
            }
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

/// `executions cancel`: one run, or a job's runs after a preview of how many; confirmed
/// (unless `--yes`), audited; what it did, for the console to print and the web page to
/// show.
pub(crate) async fn cancel(
    a: &CancelArgs,
    cli: &Globals,
    sdk: &schedkit::aws::SdkConfig,
    table: &str,
) -> anyhow::Result<Acted> {
    let selection = a.selection()?;
    let catalog = super::globals::load_catalog(cli)?;
    if let Some(s) = &selection {
        super::globals::catalog_job(&catalog, &s.job)?;
    }
    audit::ensure_writable()?;
    let queue_url = cli.target.queue_url(sdk).await?;
    let canceller = Canceller::new(sdk, table, &queue_url);
    let Some(selection) = selection else {
        let key = a.key.as_deref().unwrap_or_default();
        style::confirm(&format!("cancel run {key}"), a.yes)?;
        let audited = audit::begin(
            sdk,
            "executions cancel",
            json!({"stage": cli.target.stage_ref().stage(), "key": key, "reason": a.reason}),
        )
        .await?;
        let done = canceller.one(key, audited.who(), &a.reason, &catalog).await;
        let summary = done
            .as_ref()
            .map(|c| json!({"key": key, "was": c.was, "by": audited.who()}));
        audited.end(&summary, None).await;
        let done = done?;
        return Ok(Acted::of(
            &format!(
                "cancelled {key} (it was {}); a running attempt stops at its next heartbeat",
                done.was
            ),
            &json!({"key": key, "was": done.was, "status": done.record.status, "cancelled": done.record.cancelled}),
        ));
    };
    // With --yes nothing waits on the count: the queue is scanned once, by the action
    // (every scan receives each message once, toward its maxReceiveCount).
    let preview = canceller.preview(&selection, &catalog, !a.yes).await?;
    if preview.total() == 0 && !(a.yes && selection.queued) {
        return Ok(Acted::of(
            &format!("no run of {} to cancel", selection.job),
            &json!({"job": selection.job, "would_cancel": preview, "cancelled": 0}),
        ));
    }
    let queue_too = if a.yes && selection.queued {
        " (and the queue's, counted as they are cancelled)"
    } else {
        ""
    };
    eprintln!(
        "{} run(s) of {} to cancel: {}{queue_too}",
        preview.total(),
        selection.job,
        preview.describe()
    );
    style::confirm(
        &format!("cancel {} run(s) of {}", preview.total(), selection.job),
        a.yes,
    )?;
    let audited = audit::begin(
        sdk,
        "executions cancel",
        json!({
            "stage": cli.target.stage_ref().stage(),
            "job": selection.job,
            "statuses": selection.statuses,
            "queued": selection.queued,
            "previewed": preview,
            "reason": a.reason,
        }),
    )
    .await?;
    let mut progress = style::Progress::new("cancelling", Some(preview.total() as u64));
    let done = canceller
        .bulk(&selection, &catalog, audited.who(), &a.reason, &mut |n| {
            progress.set(n as u64, None)
        })
        .await;
    progress.finish();
    audited
        .end(&done, done.as_ref().err().and_then(|e| e.done()))
        .await;
    let done = done?;
    Ok(Acted::of(
        &format!(
            "cancelled {} run(s) of {} ({}); {} had moved on and were left",
            done.keys.len(),
            selection.job,
            done.cancelled.describe(),
            done.moved_on
        ),
        &json!({"job": selection.job, "previewed": preview, "cancelled": done.cancelled, "keys": done.keys, "moved_on": done.moved_on}),
    ))
}
