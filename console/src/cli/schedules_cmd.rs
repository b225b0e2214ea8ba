//! `schedkit schedules next` (preview an expression) and `schedkit schedules sync`.

use anyhow::Context;
use chrono::{SecondsFormat, Utc};
use clap::{Args, Subcommand};
use schedkit::schedule::{Schedule, ScheduleExpression, parse_timezone};
use serde::Serialize;

use schedkit::ops::audit;
use schedkit::trigger::sync::{self, SyncTargets};

use super::style::confirm;
use super::{
    globals::Globals, globals::load_catalog, globals::parse_instant, output::Output,
    usage::UsageError,
};

#[derive(Debug, Subcommand)]
pub enum SchedulesCommand {
    /// The next runs of an expression, in UTC and in its zone.
    Next(NextArgs),
    /// Make EventBridge Scheduler match the catalog (create, update, delete schedules).
    Sync(SyncArgs),
    /// Enqueue every occurrence of a job's schedule in a past span, each with its own
    /// scheduled time (a second backfill of the span runs nothing twice).
    Backfill(BackfillArgs),
}

#[derive(Debug, Args)]
pub struct BackfillArgs {
    /// A scheduled job of the catalog.
    pub job: String,
    /// From this instant (RFC 3339), inclusive.
    #[arg(long)]
    pub from: String,
    /// Up to this instant (RFC 3339 or `now`), exclusive.
    #[arg(long)]
    pub to: String,
    /// List the occurrences without sending them.
    #[arg(long)]
    pub dry_run: bool,
    /// Do not ask before sending more than CONFIRM_ABOVE runs.
    #[arg(long, short = 'y')]
    pub yes: bool,
}

/// A backfill of more runs than this asks first.
const CONFIRM_ABOVE: usize = 100;

#[derive(Debug, Args)]
pub struct NextArgs {
    /// cron(...), rate(...) or at(...).
    pub expression: String,
    /// IANA time zone the expression is evaluated in.
    #[arg(long, default_value = "UTC")]
    pub tz: String,
    /// Start from this instant (RFC 3339) instead of now; a rate counts from here too.
    #[arg(long)]
    pub from: Option<String>,
    /// How many runs.
    #[arg(short = 'n', long, default_value_t = 5)]
    pub count: usize,
}

#[derive(Debug, Args)]
pub struct SyncArgs {
    /// Print the changes without making them.
    #[arg(long)]
    pub dry_run: bool,
    /// The jobs queue the schedules send to (default: the one the stage's stack tagged its
    /// schedule group with).
    #[arg(long, env = "SCHEDKIT_QUEUE_ARN", requires = "role_arn")]
    pub queue_arn: Option<String>,
    /// The host jobs queue, where host jobs' schedules send (with --queue-arn; without it,
    /// a sync refuses host jobs).
    #[arg(long, env = "SCHEDKIT_HOST_QUEUE_ARN", requires = "queue_arn")]
    pub host_queue_arn: Option<String>,
    /// The role EventBridge Scheduler assumes to send (default: the stack's, likewise).
    #[arg(long, env = "SCHEDKIT_SCHEDULER_ROLE_ARN", requires = "queue_arn")]
    pub role_arn: Option<String>,
    /// Where the scheduler puts firings it cannot deliver (default: the stack's, likewise).
    #[arg(
        long,
        env = "SCHEDKIT_SCHEDULE_DLQ_ARN",
        conflicts_with = "no_dead_letter"
    )]
    pub dead_letter_arn: Option<String>,
    /// Schedules without a dead-letter queue: a firing the scheduler cannot deliver is
    /// dropped. Must be said, so a sync never strips a dead-letter queue by omission.
    #[arg(long)]
    pub no_dead_letter: bool,
    /// The schedule group to sync (default: the stage's, `<catalog group>-<stage>`).
    #[arg(long)]
    pub group: Option<String>,
    /// Do not ask before deleting schedules the catalog no longer lists.
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// Scheduler calls per second at most (EventBridge Scheduler's default quota is 50 a
    /// second per call in some Regions, 1,000 or more in others: raise it to yours). A
    /// throttled call waits and is tried again, and the pace slows down for a while.
    #[arg(long, default_value_t = 50.0, value_parser = positive_rate)]
    pub rate: f64,
}

fn positive_rate(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 => Ok(r),
        _ => Err(format!(
            "`{text}` is not a number of calls per second above 0"
        )),
    }
}

/// Changes an audit entry lists one by one; the rest are counted (an entry is one item of
/// the stage's table, at most 400 KB).
const AUDITED_CHANGES: usize = 100;

/// The changes as the audit trail keeps them: the first [`AUDITED_CHANGES`], then a count.
fn audited_changes(plan: &sync::Plan) -> serde_json::Value {
    let mut listed: Vec<String> = plan
        .changes
        .iter()
        .take(AUDITED_CHANGES)
        .map(|c| c.to_string())
        .collect();
    if plan.changes.len() > AUDITED_CHANGES {
        listed.push(format!(
            "... and {} more",
            plan.changes.len() - AUDITED_CHANGES
        ));
    }
    serde_json::json!({"group": plan.group, "changes": listed, "count": plan.changes.len()})
}

/// Progress of a sync on stderr, for syncs of a hundred schedules or more: a line at every
/// tenth of the way (`sync: 300/1000 schedules read`).
fn progress(what: &str, done: usize, total: usize) {
    if total < 100 {
        return;
    }
    let step = total.div_ceil(10);
    if done.is_multiple_of(step) || done == total {
        eprintln!("sync: {done}/{total} schedules {what}");
    }
}

#[derive(Serialize)]
struct Run {
    utc: String,
    local: String,
}

pub async fn run(command: &SchedulesCommand, cli: &Globals) -> anyhow::Result<()> {
    match command {
        SchedulesCommand::Next(a) => next(a, cli.output),
        SchedulesCommand::Sync(a) => sync_catalog(a, cli).await,
        SchedulesCommand::Backfill(a) => backfill(a, cli).await,
    }
}

fn next(a: &NextArgs, output: Output) -> anyhow::Result<()> {
    let expression: ScheduleExpression = a
        .expression
        .parse()
        .map_err(|e: schedkit::schedule::ExpressionError| UsageError(e.to_string()))?;
    let tz = parse_timezone(&a.tz).map_err(|e| UsageError(e.to_string()))?;
    let from = match &a.from {
        Some(f) => parse_instant(f).map_err(UsageError)?,
        None => Utc::now(),
    };
    let mut schedule = Schedule::new(expression, tz);
    // A rate has no calendar: preview it counting from the start instant.
    schedule.created = Some(from);
    let runs: Vec<Run> = schedule
        .next_n(from - chrono::Duration::nanoseconds(1), a.count)
        .into_iter()
        .map(|t| Run {
            utc: t.to_rfc3339_opts(SecondsFormat::Secs, true),
            local: t
                .with_timezone(&tz)
                .format("%Y-%m-%d %H:%M %Z (%:z)")
                .to_string(),
        })
        .collect();
    let local = format!("LOCAL ({})", a.tz);
    output.rows(&["UTC", &local], &runs, |r| {
        vec![r.utc.clone(), r.local.clone()]
    });
    if runs.is_empty() && output == Output::Table {
        println!(
            "(no run after {})",
            from.to_rfc3339_opts(SecondsFormat::Secs, true)
        );
    }
    Ok(())
}

async fn backfill(a: &BackfillArgs, cli: &Globals) -> anyhow::Result<()> {
    use schedkit::trigger::backfill;
    let catalog = load_catalog(cli)?;
    let job = super::globals::catalog_job(&catalog, &a.job)?;
    let now = Utc::now();
    let from = parse_instant(&a.from).map_err(UsageError)?;
    let to = parse_instant(&a.to).map_err(UsageError)?;
    let times = backfill::occurrences(job, from, to, now).map_err(|e| UsageError(e.to_string()))?;
    let text = |t: &chrono::DateTime<Utc>| t.to_rfc3339_opts(SecondsFormat::Secs, true);
    if a.dry_run {
        match cli.output {
            Output::Json => println!(
                "{}",
                serde_json::json!({"job": job.name, "occurrences": times.iter().map(text).collect::<Vec<_>>(), "dry_run": true})
            ),
            Output::Table => {
                println!(
                    "{}: {} run(s) from {} to {} (dry run: nothing sent)",
                    job.name,
                    times.len(),
                    text(&from),
                    text(&to)
                );
                for t in &times {
                    println!("  {}", text(t));
                }
            }
        }
        return Ok(());
    }
    audit::ensure_writable()?;
    if times.len() > CONFIRM_ABOVE {
        confirm(
            &format!("enqueue {} run(s) of {}", times.len(), job.name),
            a.yes,
        )?;
    }
    let sdk = cli.aws.sdk_config().await;
    let queue_url = cli.target.queue_url_of(&sdk, job).await?;
    let audited = audit::begin(
        &sdk,
        "schedules backfill",
        serde_json::json!({"job": job.name, "from": text(&from), "to": text(&to), "runs": times.len(), "queue": queue_url}),
    )
    .await?;
    let mut progress = super::style::Progress::new("backfilling", Some(times.len() as u64));
    let mut enqueued = 0;
    let sent = backfill::enqueue(&sdk, &queue_url, job, &times, |n| {
        enqueued = n;
        progress.set(n as u64, Some(times.len() as u64))
    })
    .await;
    progress.finish();
    let done = format!("{enqueued} of {} run(s) enqueued", times.len());
    audited.end(&sent, Some(&done)).await;
    let sent = sent?;
    match cli.output {
        Output::Json => println!(
            "{}",
            serde_json::json!({"job": job.name, "from": text(&from), "to": text(&to), "sent": sent})
        ),
        Output::Table => println!(
            "{}: {sent} run(s) from {} to {} enqueued (a run already done is absorbed as a duplicate)",
            job.name,
            text(&from),
            text(&to)
        ),
    }
    Ok(())
}

/// Where the schedules send: the flags, else what the stage's stack tagged its group with.
async fn targets(a: &SyncArgs, client: &sync::Client, group: &str) -> anyhow::Result<SyncTargets> {
    let mut targets = match (&a.queue_arn, &a.role_arn) {
        (Some(queue_arn), Some(role_arn)) => SyncTargets {
            queue_arn: queue_arn.clone(),
            host_queue_arn: a.host_queue_arn.clone(),
            urgent_queues: false,
            role_arn: role_arn.clone(),
            dead_letter_arn: None,
        },
        _ => match sync::stage_targets(client, group)
            .await
            .context("reading the stage's schedule group")?
        {
            Some(t) => t,
            None => {
                return Err(UsageError(format!(
                    "schedule group {group} carries no stack's targets (deploy the stage first, or give --queue-arn and --role-arn)"
                ))
                .into());
            }
        },
    };
    if a.dead_letter_arn.is_some() {
        targets.dead_letter_arn = a.dead_letter_arn.clone();
    }
    if a.no_dead_letter {
        targets.dead_letter_arn = None;
    } else if targets.dead_letter_arn.is_none() {
        return Err(UsageError(
            "no dead-letter queue for the schedules: give --dead-letter-arn ARN, or --no-dead-letter to drop firings the scheduler cannot deliver".into(),
        )
        .into());
    }
    Ok(targets)
}

async fn sync_catalog(a: &SyncArgs, cli: &Globals) -> anyhow::Result<()> {
    let mut catalog = load_catalog(cli)?;
    catalog.settings.schedule_group = a
        .group
        .clone()
        .unwrap_or_else(|| super::globals::stage_group(&catalog, cli));
    for w in &catalog.warnings {
        eprintln!("warning: {w}");
    }
    let sdk = cli.aws.sdk_config().await;
    let client = sync::client(&sdk);
    let targets = targets(a, &client, &catalog.settings.schedule_group).await?;
    // Paused jobs (`jobs pause`) stay disabled: their pause is on the stage's table. A
    // group of no stage has no table, and no pauses.
    let pauses = schedkit::store::Pauses::for_table(&sdk, cli.target.stage_ref().table());
    let paused: std::collections::BTreeSet<String> = pauses
        .of(catalog.scheduled().map(|j| j.name.as_str()))
        .await
        .context("reading the stage's paused jobs")?
        .into_keys()
        .collect();
    let options = sync::Options {
        pace: sync::Pace::at(a.rate),
        progress: &progress,
    };
    let plan = sync::plan_with(&client, &catalog, &targets, &paused, &options)
        .await
        .context("planning the sync")?;
    let deletes: Vec<&str> = plan
        .changes
        .iter()
        .filter_map(|c| match c {
            sync::Change::Delete { name } => Some(name.as_str()),
            _ => None,
        })
        .collect();
    if !a.dry_run {
        audit::ensure_writable()?;
    }
    if !a.dry_run && !deletes.is_empty() {
        confirm(
            &format!(
                "delete {} schedule(s) from group {}: {}",
                deletes.len(),
                plan.group,
                deletes.join(", ")
            ),
            a.yes,
        )?;
    }
    let writes =
        if a.dry_run || plan.changes.is_empty() {
            0
        } else {
            let audited = audit::begin(&sdk, "schedules sync", audited_changes(&plan)).await?;
            // A pause or resume since the plan read the pauses: its record decides, for
            // every write made, even when some failed.
            let applied =
                sync::apply_keeping_pauses(&client, &pauses, &catalog, &plan, &options).await;
            audited.end(
            &applied,
            Some("some of the changes, in order (`schedules sync --dry-run` shows what is left)"),
        ).await;
            applied?
        };
    match cli.output {
        Output::Table => {
            println!("{plan}");
            if a.dry_run {
                println!("(dry run: nothing changed)");
            } else if !plan.is_empty() {
                println!("applied: {writes} write(s)");
            }
        }
        Output::Json => {
            let changes: Vec<String> = plan.changes.iter().map(|c| c.to_string()).collect();
            println!(
                "{}",
                serde_json::json!({
                    "group": plan.group,
                    "create_group": plan.create_group,
                    "changes": changes,
                    "dry_run": a.dry_run,
                    "writes": writes,
                })
            );
        }
    }
    Ok(())
}
