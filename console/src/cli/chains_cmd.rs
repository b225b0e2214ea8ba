//! `schedkit chains list`, `chains show KEY` (the stages as a tree of steps), `chains
//! rerun KEY` (from the failed step), `chains cancel KEY` and `chains skip KEY STEP`
//! (confirmed, audited).

use chrono::Utc;
use clap::{Args, Subcommand};
use schedkit::Status;
use schedkit::ops::audit;
use schedkit::ops::chains::{ChainRuns, ChainView, Rerun, StepView};
use serde_json::json;

use super::status_cmd::clip;
use super::style::{self, confirm};
use super::{
    globals::Globals, globals::load_catalog, output::Acted, output::Output, usage::UsageError,
};
use schedkit::aws::SdkConfig;
use schedkit::ops::stage::Stage;

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
    /// Cancel a RUNNING or PAUSED chain run: its record CANCELLED, its execution stopped,
    /// its steps' runs not yet decided cancelled (a running one stops at its next
    /// heartbeat); no later stage starts.
    Cancel(ChainCancelArgs),
    /// Let a PAUSED run go on past its failed step as if the step had returned --step-output:
    /// the step's record becomes DONE with it (its failure kept, and who skipped it and
    /// why), and the run is rerun from there.
    Skip(SkipArgs),
}

#[derive(Debug, Args)]
pub struct ChainCancelArgs {
    /// The chain key.
    pub key: String,
    /// Why (kept on the run's record and in the audit trail).
    #[arg(long, default_value = "no reason given")]
    pub reason: String,
    /// Do not ask for confirmation.
    #[arg(long)]
    pub yes: bool,
}

#[derive(Debug, Args)]
pub struct SkipArgs {
    /// The chain key.
    pub key: String,
    /// The failed step to skip.
    pub step: String,
    /// What the later stages see as the step's output (JSON; default `{}`). Not `--output`:
    /// that is every command's print format.
    #[arg(long = "step-output", default_value = "{}")]
    pub step_output: String,
    /// Why (required: a skipped step is a decision someone answers for).
    #[arg(long)]
    pub reason: String,
    /// Do not ask for confirmation.
    #[arg(long)]
    pub yes: bool,
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

/// The stage's chain runs, for any chain command; a catalog without chains is a usage error.
async fn chain_runs(cli: &Globals) -> anyhow::Result<(SdkConfig, Stage, ChainRuns)> {
    let catalog = load_catalog(cli)?;
    if catalog.chains.is_empty() {
        return Err(UsageError(format!("{} declares no chains", catalog.file)).into());
    }
    let sdk = cli.aws.sdk_config().await;
    let target = cli.target.resolve(&sdk).await?;
    let runs = ChainRuns::new(&sdk, &target, &catalog);
    Ok((sdk, target, runs))
}

pub async fn run(command: &ChainsCommand, cli: &Globals) -> anyhow::Result<()> {
    let acted = match command {
        ChainsCommand::Rerun(a) => Some(rerun(a, cli).await?),
        ChainsCommand::Cancel(a) => Some(cancel(a, cli).await?),
        ChainsCommand::Skip(a) => Some(skip(a, cli).await?),
        ChainsCommand::List { .. } | ChainsCommand::Show { .. } => None,
    };
    if let Some(acted) = acted {
        cli.output.outcome(&acted.text, &acted.details);
        return Ok(());
    }
    let (_, target, runs) = chain_runs(cli).await?;
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
        ChainsCommand::Rerun(_) | ChainsCommand::Cancel(_) | ChainsCommand::Skip(_) => {
            unreachable!("acted on above")
        }
    }
}

/// `chains rerun`: confirmed (unless `--yes`), audited; what it did, for the console to
/// print and the web page to show.
pub(crate) async fn rerun(a: &RerunArgs, cli: &Globals) -> anyhow::Result<Acted> {
    let (sdk, target, runs) = chain_runs(cli).await?;
    let failed = |e| super::target::usage_if_not_found(e, &cli.target);
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
    audited
        .end(&result, result.as_ref().err().and_then(|e| e.done()))
        .await;
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
    Ok(Acted {
        text,
        details: serde_json::to_value(&done)?,
    })
}

/// `chains cancel`: confirmed (unless `--yes`), audited.
pub(crate) async fn cancel(a: &ChainCancelArgs, cli: &Globals) -> anyhow::Result<Acted> {
    let (sdk, target, runs) = chain_runs(cli).await?;
    let failed = |e| super::target::usage_if_not_found(e, &cli.target);
    audit::ensure_writable()?;
    confirm(
        &format!("cancel chain run `{}` on stage {}", a.key, target.stage),
        a.yes,
    )?;
    let audited = audit::begin(
        &sdk,
        "chains cancel",
        json!({"stage": target.stage, "key": a.key, "reason": a.reason}),
    )
    .await?;
    let who = audited.who().to_string();
    let result = runs.cancel(&a.key, &who, &a.reason, Utc::now()).await;
    audited
        .end(&result, result.as_ref().err().and_then(|e| e.done()))
        .await;
    let done = result.map_err(failed)?;
    let text = format!(
        "{}: CANCELLED (it was {}); execution stopped: {}; steps cancelled: {}",
        a.key,
        done.was,
        done.stopped.as_deref().unwrap_or("none (not running)"),
        if done.steps.is_empty() {
            "none".to_string()
        } else {
            done.steps.join(", ")
        }
    );
    Ok(Acted {
        text,
        details: serde_json::to_value(&done)?,
    })
}

/// `chains skip`: confirmed (unless `--yes`), audited.
pub(crate) async fn skip(a: &SkipArgs, cli: &Globals) -> anyhow::Result<Acted> {
    let output: serde_json::Value = serde_json::from_str(&a.step_output)
        .map_err(|e| UsageError(format!("--step-output is not JSON: {e}")))?;
    let (sdk, target, runs) = chain_runs(cli).await?;
    let failed = |e| super::target::usage_if_not_found(e, &cli.target);
    audit::ensure_writable()?;
    confirm(
        &format!(
            "skip step `{}` of chain run `{}` on stage {} and run the later stages",
            a.step, a.key, target.stage
        ),
        a.yes,
    )?;
    let audited = audit::begin(
        &sdk,
        "chains skip",
        json!({"stage": target.stage, "key": a.key, "step": a.step, "output": output, "reason": a.reason}),
    )
    .await?;
    let who = audited.who().to_string();
    let result = runs
        .skip(&a.key, &a.step, &output, &who, &a.reason, Utc::now())
        .await;
    audited
        .end(&result, result.as_ref().err().and_then(|e| e.done()))
        .await;
    let done = result.map_err(failed)?;
    let text = format!(
        "{}: step {} skipped (DONE with the given output, its failure kept); the run goes on: {:?}",
        a.key, done.step, done.rerun
    );
    Ok(Acted {
        text,
        details: serde_json::to_value(&done)?,
    })
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
    out.push_str(&format!("trace id {}\n", view.trace_id));
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
    if let Some(c) = &view.cancelled {
        out.push_str(&format!(
            "cancelled by {} at {}: {}\n",
            c.by, c.at, c.reason
        ));
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
    if let Some(s) = &step.skipped {
        // Its failure is what it was skipped over: said beside who skipped it.
        line.push_str(&format!("  skipped by {} ({})", s.by, clip(&s.reason, 40)));
        if let Some(error) = &step.last_error {
            line.push_str(&format!("  failed: {}", clip(error, 60)));
        }
        return line;
    }
    if let Some(c) = &step.cancelled {
        line.push_str(&format!("  by {} ({})", c.by, clip(&c.reason, 60)));
        return line;
    }
    // A DONE step keeps its earlier round's error in its record; it is history here.
    if let Some(error) = step.last_error.as_ref().filter(|_| status != Status::Done) {
        line.push_str(&format!("  {}", clip(error, 80)));
    }
    line
}
