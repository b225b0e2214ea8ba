//! `schedkit status`: the queue, the DLQ, failing jobs, the alarms in ALARM with the jobs
//! they name, and each job's last run (a page of the catalog at a time).

use clap::Args;
use schedkit::ops::status;

use super::page_args::{PageArgs, footer};
use super::{globals::Globals, globals::load_catalog, output::Output, style};

#[derive(Debug, Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub page: PageArgs,
}

/// Missed and late firings listed one by one; the rest are counted.
const FINDINGS_LISTED: usize = 50;

pub async fn run(a: &StatusArgs, cli: &Globals) -> anyhow::Result<()> {
    let catalog = load_catalog(cli)?;
    let sdk = cli.aws.sdk_config().await;
    let target = cli.target.resolve(&sdk).await?;
    let report = status::gather_page(&sdk, &target, &catalog, a.page.page())
        .await
        .map_err(|e| super::target::usage_if_not_found(e, &cli.target))?;
    if cli.output == Output::Json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    let q = &report.queue;
    let age = report
        .oldest_message_age_seconds
        .map(|s| format!("{s:.0} s"))
        .unwrap_or_else(|| "n/a (no CloudWatch data)".into());
    println!("stage {}", target.stage);
    println!(
        "jobs queue     {} visible, {} in flight, {} delayed; oldest message {age}",
        q.visible, q.in_flight, q.delayed
    );
    if let Some(u) = &report.urgent_queue {
        println!(
            "urgent queue   {} visible, {} in flight, {} delayed",
            u.visible, u.in_flight, u.delayed
        );
    }
    println!("dead letters   {}", report.dlq_depth);
    print_alarms(report.alarms.as_ref());
    for p in &report.paused {
        println!(
            "paused         {} since {} by {}: {}",
            p.job, p.at, p.by, p.reason
        );
    }
    for c in &report.paused_chains {
        println!(
            "paused chain   {} since {}: {} (fix it, then `schedkit chains rerun {}`)",
            c.key, c.at, c.failed, c.key
        );
    }
    for c in &report.cancelled {
        println!(
            "cancelled      {} ({}) at {} by {}: {}",
            c.key, c.job, c.at, c.by, c.reason
        );
    }
    if let Some(a) = &report.accountant {
        print_accounted(a);
    }
    if !report.limits.is_empty() {
        println!();
        println!("limits");
        print!("{}", limits_table(&report.limits));
        for l in &report.limits {
            let Some(line) = l.line.as_ref().filter(|line| line.waiting > 0) else {
                continue;
            };
            println!("  {} waits by share:", l.limit);
            for share in &line.shares {
                println!("    {}", schedkit::ops::limits::describe_share(share));
            }
        }
    }
    println!();
    if report.failing_jobs.is_empty() {
        println!("failing jobs   none");
    } else {
        println!("failing jobs");
        print!(
            "{}",
            super::output::table(
                &["JOB", "FAILED", "LAST ERROR"],
                &report
                    .failing_jobs
                    .iter()
                    .map(|f| vec![f.job.clone(), f.failed.to_string(), clip(&f.last_error, 80)])
                    .collect::<Vec<_>>(),
            )
        );
    }
    println!();
    print!(
        "{}",
        super::output::table(
            &[
                "JOB",
                "LAST RUN (SCHEDULED FOR)",
                "STATUS",
                "ATTEMPTS",
                "UPDATED"
            ],
            &report
                .jobs
                .iter()
                .map(|j| {
                    vec![
                        j.job.clone(),
                        j.scheduled_for.clone().unwrap_or_else(|| "never".into()),
                        j.status.map(style::status).unwrap_or_else(|| "-".into()),
                        j.attempt
                            .map(|a| a.to_string())
                            .unwrap_or_else(|| "-".into()),
                        j.updated_at.clone().unwrap_or_else(|| "-".into()),
                    ]
                })
                .collect::<Vec<_>>(),
        )
    );
    if let Some(line) = footer(&report.jobs_page, "status") {
        println!("{line}");
    }
    Ok(())
}

/// The stage's alarms in ALARM, each with the jobs it names.
fn print_alarms(alarms: Option<&schedkit::ops::alarms::StageAlarms>) {
    let Some(a) = alarms else {
        println!("alarms         n/a (CloudWatch could not be read)");
        return;
    };
    if a.watched == 0 {
        println!("alarms         none found (a stage deployed from the template has them)");
    } else if a.in_alarm.is_empty() {
        println!("alarms         none in ALARM ({} watched)", a.watched);
    }
    for alarm in &a.in_alarm {
        let jobs = match alarm.jobs.len() {
            0 => alarm.reason.clone(),
            n => format!("{n} job(s): {}", alarm.jobs.join(", ")),
        };
        println!("in ALARM       {}: {jobs}", alarm.alarm);
    }
}

/// The accountant's line, and one per firing missed or late.
fn print_accounted(a: &status::Accounted) {
    let checked = a
        .checked_at
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_else(|| "never".into());
    println!(
        "accountant     last checked {checked}: {} missed, {} late",
        a.missed.len(),
        a.late.len()
    );
    for f in a.missed.iter().take(FINDINGS_LISTED) {
        println!(
            "missed         {} (no run; due {})",
            f.key,
            f.scheduled_for
                .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        );
    }
    for f in a.late.iter().take(FINDINGS_LISTED) {
        let status = f.status.map(style::status).unwrap_or_else(|| "-".into());
        println!(
            "late           {} {status} (due DONE by {})",
            f.key,
            f.due_by.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        );
    }
    let more = a.missed.len().saturating_sub(FINDINGS_LISTED)
        + a.late.len().saturating_sub(FINDINGS_LISTED);
    if more > 0 {
        println!(
            "               and {more} more (`schedkit executions list --missed` or `--late`, or --output json)"
        );
    }
}

/// Each limit: what it allows, its permits in use, its line, its next start, the runs it
/// held back.
fn limits_table(limits: &[schedkit::ops::limits::LimitUse]) -> String {
    let dash = || "-".to_string();
    super::output::table(
        &[
            "LIMIT",
            "ALLOWS",
            "IN USE",
            "WAITING",
            "NEXT START",
            "HELD BACK (5 MIN)",
            "JOBS",
        ],
        &limits
            .iter()
            .map(|l| {
                let mut allows = Vec::new();
                if let Some(n) = l.concurrency {
                    allows.push(match &l.per_key {
                        Some(k) => format!("{n} per {k}"),
                        None => format!("{n} at once"),
                    });
                }
                allows.extend(l.rate.clone());
                let in_use = match (l.in_use, l.lapsed, &l.per_key) {
                    (_, _, Some(_)) => "per key".to_string(),
                    (Some(n), Some(0), _) => n.to_string(),
                    (Some(n), Some(lapsed), _) => format!("{n} (+{lapsed} lapsed)"),
                    _ => dash(),
                };
                vec![
                    l.limit.clone(),
                    allows.join(", "),
                    in_use,
                    l.line
                        .as_ref()
                        .map(schedkit::ops::limits::describe_line)
                        .unwrap_or_else(dash),
                    l.next_start.clone().unwrap_or_else(dash),
                    l.held_back_5m
                        .map(|n| format!("{n:.0}"))
                        .unwrap_or_else(|| "n/a".into()),
                    l.jobs.join(", "),
                ]
            })
            .collect::<Vec<_>>(),
    )
}

/// At most `n` characters, with an ellipsis when cut.
pub fn clip(text: &str, n: usize) -> String {
    if text.chars().count() <= n {
        text.to_string()
    } else {
        text.chars().take(n - 1).collect::<String>() + "…"
    }
}
