//! `schedkit chains list`, `chains show KEY` (the stages as a tree of steps) and
//! `chains rerun KEY` (from the failed step; confirmed, audited).

use chrono::Utc;
use clap::{Args, Subcommand};
use schedkit::Status;
use schedkit::ops::audit;
use schedkit::ops::chains::{ChainRuns, ChainView, Rerun, StepView};
use serde_json::json;

use super::status_cmd::clip;
use super::style::{self, confirm};
use super::{globals::Globals, globals::load_catalog, output::Output, usage::UsageError};

#[derive(Debug, Subcommand)]
pub enum ChainsCommand {
    /// Recent runs of the catalog's chains with their status, newest first.
    List {
        /// Runs to show.
        #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(i32).range(1..=1000))]
        limit: i32,
    },
    /// One run as its stages: each step's status, attempts, duration and last error.
    Show {
        /// The chain key (`month-end#2026-12-01T01:00:00Z`).
        key: String,
    },
    /// Run a PAUSED chain run again from its failed step: DONE steps answer from their
    /// records, the failed step runs with a fresh set of attempts, then the later stages.
    Rerun(RerunArgs),
}

#[derive(Debug, Args)]
pub struct RerunArgs {
    /// The chain key.
    pub key: String,
    /// On AWS, restart a failed execution with RedriveExecution instead of starting a new
    /// one (not for a PAUSED run, whose execution succeeded; LocalStack refuses it).
    #[arg(long)]
    pub redrive: bool,
    /// Do not ask for confirmation.
    #[arg(long)]
    pub yes: bool,
}

pub async fn run(command: &ChainsCommand, cli: &Globals) -> anyhow::Result<()> {
    let catalog = load_catalog(cli)?;
    if catalog.chains.is_empty() {
        return Err(UsageError(format!("{} declares no chains", catalog.file)).into());
    }
    let sdk = cli.aws.sdk_config().await;
    let target = cli.target.resolve(&sdk).await?;
    let runs = ChainRuns::new(&sdk, &target, &catalog);
    let failed = |e| super::target::usage_if_not_found(e, &cli.target);
    match command {
        ChainsCommand::List { limit } => {
            let list = runs.list(*limit).await.map_err(failed)?;
            let rows: Vec<_> = list
                .iter()
                .map(|r| {
                    json!({
                        "key": r.execution_key,
                        "chain": r.job,
                        "status": r.status,
                        "run": r.attempt,
                        "scheduled_for": r.scheduled_for,
                        "updated_at": r.updated_at,
                        "last_error": r.last_error,
                    })
                })
                .collect();
            cli.output.rows(
                &["KEY", "CHAIN", "STATUS", "RUN", "UPDATED", "LAST ERROR"],
                &rows,
                |r| {
                    let text = |f: &str| r[f].as_str().unwrap_or("-").to_string();
                    vec![
                        text("key"),
                        text("chain"),
                        serde_json::from_value(r["status"].clone())
                            .map(style::status)
                            .unwrap_or_default(),
                        r["run"].to_string(),
                        text("updated_at"),
                        clip(&text("last_error"), 60),
                    ]
                },
            );
            Ok(())
        }
        ChainsCommand::Show { key } => {
            let Some(view) = runs.show(key).await.map_err(failed)? else {
                return Err(UsageError(format!(
                    "there is no chain run `{key}` in {} (`schedkit chains list` shows the recent ones)",
                    target.table
                ))
                .into());
            };
            match cli.output {
                Output::Json => println!("{}", serde_json::to_string_pretty(&view)?),
                Output::Table => print!("{}", tree(&view)),
            }
            Ok(())
        }
        ChainsCommand::Rerun(a) => {
            audit::ensure_writable()?;
            confirm(
                &format!(
                    "rerun chain run `{}` on stage {} from its failed step{}",
                    a.key,
                    target.stage,
                    if a.redrive { " (RedriveExecution)" } else { "" }
                ),
                a.yes,
            )?;
            let audited = audit::begin(
                &sdk,
                "chains rerun",
                json!({"stage": target.stage, "key": a.key, "redrive": a.redrive}),
            )
            .await?;
            let result = runs.rerun(&a.key, a.redrive, Utc::now()).await;
            audited.end(&result, result.as_ref().err().and_then(|e| e.done()));
            let done = result.map_err(failed)?;
            let text = match &done {
                Rerun::Started {
                    execution,
                    run,
                    steps,
                } => format!(
                    "{}: run {run} started (execution {execution}); to run: {}; DONE steps answer from their records",
                    a.key,
                    steps.join(", ")
                ),
                Rerun::Redriven { execution } => {
                    format!("{}: execution {execution} redriven", a.key)
                }
                Rerun::AlreadyRunning { execution } => format!(
                    "{}: running already (execution {execution}); nothing changed",
                    a.key
                ),
                Rerun::Reconciled { execution } => format!(
                    "{}: execution {execution} had ended with every step DONE and its end was never recorded; the run is recorded DONE now, nothing to rerun",
                    a.key
                ),
            };
            let details = serde_json::to_value(&done)?;
            cli.output.outcome(&text, &details);
            Ok(())
        }
    }
}

/// The run as a tree: a line for the run, then each stage with its steps.
fn tree(view: &ChainView) -> String {
    let mut out = format!(
        "{}  {}  run {}  chain {}\n",
        view.key,
        style::status(view.status),
        view.run,
        view.chain
    );
    if let Some(status) = &view.execution_status {
        out.push_str(&format!(
            "execution {}  {status}\n",
            view.execution.as_deref().unwrap_or("-")
        ));
        if status != "RUNNING" {
            out.push_str(&format!(
                "the execution stopped without an outcome: `schedkit chains rerun {}` runs what is not DONE\n",
                view.key
            ));
        }
    }
    out.push_str(&format!(
        "scheduled for {}; started {}; {}\n",
        view.scheduled_for,
        view.started_at.as_deref().unwrap_or("-"),
        match &view.finished_at {
            Some(t) => format!("ended {t}"),
            None => format!("updated {}", view.updated_at),
        }
    ));
    if let Some(error) = &view.last_error {
        out.push_str(&format!("why: {error}\n"));
    }
    let name = view
        .stages
        .iter()
        .flatten()
        .map(|s| s.step.chars().count())
        .max()
        .unwrap_or(0);
    let job = view
        .stages
        .iter()
        .flatten()
        .map(|s| s.job.chars().count())
        .max()
        .unwrap_or(0);
    for (i, stage) in view.stages.iter().enumerate() {
        let kind = if stage.len() > 1 { " (parallel)" } else { "" };
        out.push_str(&format!("stage {}{kind}\n", i + 1));
        for (j, step) in stage.iter().enumerate() {
            let branch = if j + 1 == stage.len() {
                "└─"
            } else {
                "├─"
            };
            out.push_str(&format!(
                "{branch} {:<name$}  {:<job$}  {}\n",
                step.step,
                step.job,
                step_line(step)
            ));
        }
    }
    out
}

/// `DONE  2 attempts  1002 ms`, `FAILED  3 attempts  41 ms  <error>`, `not started`
/// (attempts over every round: a rerun's round adds to them).
fn step_line(step: &StepView) -> String {
    let Some(status) = step.status else {
        return "not started".into();
    };
    let mut line = format!(
        "{}  {} attempt{}",
        style::status(status),
        step.attempts,
        if step.attempts == 1 { "" } else { "s" }
    );
    if let Some(ms) = step.duration_ms {
        line.push_str(&format!("  {ms} ms"));
    }
    // A DONE step keeps its earlier round's error in its record; it is history here.
    if let Some(error) = step.last_error.as_ref().filter(|_| status != Status::Done) {
        line.push_str(&format!("  {}", clip(error, 80)));
    }
    line
}
