//! The command line: `main` parses it and calls [`run`]; each command is a module.

mod aws_args;
mod catalog_cmd;
mod chains_cmd;
mod dlq_cmd;
mod engine_cmd;
mod executions_cmd;
mod fire_cmd;
mod iac_cmd;
mod jobs_cmd;
mod output;
mod schedules_cmd;
mod status_cmd;
pub(crate) mod style;
pub mod target;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

pub use aws_args::AwsArgs;
pub use output::Output;

/// schedkit: run and operate scheduled jobs on AWS (or LocalStack).
#[derive(Debug, Parser)]
#[command(name = "schedkit", version)]
pub struct Cli {
    /// The job catalog.
    #[arg(
        long,
        global = true,
        env = "SCHEDKIT_CATALOG",
        default_value = "infra/catalog.toml"
    )]
    pub catalog: PathBuf,
    /// Output format.
    #[arg(long, global = true, value_enum, default_value_t = Output::Table)]
    pub output: Output,
    #[command(flatten)]
    pub aws: AwsArgs,
    #[command(flatten)]
    pub target: target::TargetArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// The jobs queue, the DLQ, failing jobs, and each job's last run.
    Status,
    /// The catalog's jobs with their next three runs, last status and success rate; pause
    /// and resume a job's schedule.
    Jobs(jobs_cmd::JobsArgs),
    /// Execution records: list (by job, status, time) or show one whole.
    #[command(subcommand)]
    Executions(executions_cmd::ExecutionsCommand),
    /// Dead letters: list, show, redrive, purge.
    #[command(subcommand)]
    Dlq(dlq_cmd::DlqCommand),
    /// Chain runs: list, show one stage by stage, rerun a paused one from its failed step.
    #[command(subcommand)]
    Chains(chains_cmd::ChainsCommand),
    /// Validate the job catalog and show each job's next run.
    #[command(subcommand)]
    Catalog(catalog_cmd::CatalogCommand),
    /// Preview schedule expressions; sync EventBridge Scheduler with the catalog.
    #[command(subcommand)]
    Schedules(schedules_cmd::SchedulesCommand),
    /// Run a job now or later (a one-off run with its own key unless one is given).
    Fire(fire_cmd::FireArgs),
    /// The local firing engine: fire the schedules of an endpoint that does not fire them.
    Engine(engine_cmd::EngineArgs),
    /// Infrastructure as code: keep the template's catalog-derived parts in sync.
    #[command(subcommand)]
    Iac(IacCommand),
}

#[derive(Debug, Subcommand)]
pub enum IacCommand {
    /// Regenerate the schedules, alarms and dashboard of infra/template.yaml from the catalog.
    Render(iac_cmd::RenderArgs),
    /// Write a template for a worker crate of your own, from schedkit's, with the catalog's
    /// parts rendered in (and, beside it, a chain that does nothing yet).
    Init(iac_cmd::InitArgs),
}

/// A failure that is the user's to fix (bad input, invalid catalog): exit code 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// An operation's error as the user should see it: something the input named that is not
/// there (a stage not deployed), or a page token no page printed, is a usage error (exit 2)
/// that says which flag to give; anything else is a failure (exit 1).
pub fn usage_if_not_found(
    e: schedkit::ops::OpsError,
    target: &target::TargetArgs,
) -> anyhow::Error {
    use schedkit::ops::OpsError;
    let stage = target.stage();
    let hint = match &e {
        OpsError::NotFound { kind: "table", .. } if target.table.is_some() => {
            "check --table".into()
        }
        OpsError::NotFound { kind: "table", .. } => {
            format!("is stage `{stage}` deployed? Give --stage, or --table")
        }
        OpsError::NotFound { .. } => {
            format!("is stage `{stage}` deployed? Give --stage, or --queue-url/--dlq-url")
        }
        OpsError::Refused(_) => return UsageError(e.to_string()).into(),
        OpsError::BadPageToken => {
            return UsageError("--page is not a token printed by a previous page".into()).into();
        }
        _ => return e.into(),
    };
    UsageError(format!("{e}: {hint}")).into()
}

/// Runs the command.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    match &cli.command {
        Command::Status => status_cmd::run(&cli).await,
        Command::Jobs(a) => jobs_cmd::run(a, &cli).await,
        Command::Executions(c) => executions_cmd::run(c, &cli).await,
        Command::Dlq(c) => dlq_cmd::run(c, &cli).await,
        Command::Chains(c) => chains_cmd::run(c, &cli).await,
        Command::Catalog(c) => catalog_cmd::run(c, &cli).await,
        Command::Schedules(c) => schedules_cmd::run(c, &cli).await,
        Command::Fire(a) => fire_cmd::run(a, &cli).await,
        Command::Engine(a) => engine_cmd::run(a, &cli).await,
        Command::Iac(IacCommand::Render(a)) => iac_cmd::render(a, &cli).await,
        Command::Iac(IacCommand::Init(a)) => iac_cmd::init(a, &cli),
    }
}

/// The catalog the command names, or a usage error listing every problem.
pub fn load_catalog(cli: &Cli) -> anyhow::Result<schedkit::catalog::Catalog> {
    schedkit::catalog::Catalog::load(&cli.catalog).map_err(|e| UsageError(e.to_string()).into())
}

/// The job called `name`, or a usage error listing the catalog's jobs.
pub fn catalog_job<'a>(
    catalog: &'a schedkit::catalog::Catalog,
    name: &str,
) -> Result<&'a schedkit::catalog::Job, UsageError> {
    catalog.job(name).ok_or_else(|| {
        UsageError(format!(
            "job `{name}` is not in {} (its jobs: {}; its chains: {})",
            catalog.file,
            catalog.jobs.keys().cloned().collect::<Vec<_>>().join(", "),
            catalog
                .chains
                .keys()
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        ))
    })
}

/// The schedule group a command works in: the stage's, `<catalog group>-<stage>` as the
/// template names it, with the same default stage (`dev`) as every other command, so a
/// bare `schedules sync` never builds a second group that fires the same jobs again.
pub fn stage_group(catalog: &schedkit::catalog::Catalog, cli: &Cli) -> String {
    format!("{}-{}", catalog.settings.schedule_group, cli.target.stage())
}

/// `now` or an RFC 3339 instant.
pub fn parse_instant(text: &str) -> Result<chrono::DateTime<chrono::Utc>, String> {
    if text == "now" {
        return Ok(chrono::Utc::now());
    }
    chrono::DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&chrono::Utc))
        .map_err(|_| {
            format!("`{text}` is not an instant: use RFC 3339 (2030-06-03T09:00:00Z) or `now`")
        })
}
