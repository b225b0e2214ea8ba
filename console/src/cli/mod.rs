//! The command line: `main` parses it and calls [`run`]; each command is a module.

mod audit_cmd;
mod aws_args;
mod catalog_cmd;
pub(crate) mod chains_cmd;
mod cost_cmd;
pub(crate) mod dlq_cmd;
mod engine_cmd;
pub(crate) mod executions_cmd;
pub(crate) mod fire_cmd;
mod globals;
mod iac_cmd;
pub(crate) mod jobs_cmd;
mod output;
pub(crate) mod page_args;
mod schedules_cmd;
mod status_cmd;
pub(crate) mod style;
pub mod target;
pub mod ui_cmd;
mod usage;

use clap::{Parser, Subcommand};

pub use aws_args::AwsArgs;
pub use globals::Globals;
pub use globals::{load_catalog, parse_instant};
pub use output::{Acted, Output};
pub use status_cmd::clip;
pub use usage::UsageError;

/// schedkit: run and operate scheduled jobs on AWS (or LocalStack).
#[derive(Debug, Parser)]
#[command(name = "schedkit", version)]
pub struct Cli {
    #[command(flatten)]
    pub globals: Globals,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// The jobs queue, the DLQ, failing jobs, the alarms in ALARM with the jobs they name,
    /// and each job's last run (a page of the catalog at a time).
    Status(status_cmd::StatusArgs),
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
    /// A month of the catalog on AWS at list prices: firings, requests per run, fixed
    /// costs (alarms, the dashboard, endpoints), line by line.
    Cost(cost_cmd::CostArgs),
    /// Run a job now or later (a one-off run with its own key unless one is given).
    Fire(fire_cmd::FireArgs),
    /// The local firing engine: fire the schedules of an endpoint that does not fire them.
    Engine(engine_cmd::EngineArgs),
    /// Infrastructure as code: keep the template's catalog-derived parts in sync.
    #[command(subcommand)]
    Iac(IacCommand),
    /// The operator's web page: every job, run and chain at a glance, and the actions,
    /// each behind a confirmation (127.0.0.1:8080 unless --listen says otherwise).
    Ui(ui_cmd::UiArgs),
    /// The stage's audit trail: who did what and when, each action begun and ended, and
    /// the worker's own pauses.
    Audit(audit_cmd::AuditArgs),
}

#[derive(Debug, Subcommand)]
pub enum IacCommand {
    /// Regenerate the schedules, alarms and dashboard of infra/template.yaml from the catalog.
    Render(iac_cmd::RenderArgs),
    /// Write a template for a worker crate of your own, from schedkit's, with the catalog's
    /// parts rendered in (and, beside it, a chain that does nothing yet).
    Init(iac_cmd::InitArgs),
}

/// What every command sets up first: the stage its traces belong to, and (for those that
/// act on a stage) the stage's audit trail.
pub async fn prepare(cli: &Cli) {
    let stage = cli.globals.target.stage_ref();
    // The stage's traces (a `fire`'s trigger span, the trace ids `show` prints).
    schedkit::telemetry::trace_ids::set_stage(&schedkit::telemetry::trace_ids::stage_of(
        stage.stage.as_deref(),
        Some(&stage.table()),
    ));
    let target = &cli.globals.target;
    if audits_in_stage(cli) {
        let sdk = cli.globals.aws.sdk_config().await;
        match target.stage.is_some() || target.table.is_some() {
            true => schedkit::ops::audit::to_stage(&sdk, &stage.table()),
            false => schedkit::ops::audit::to_default_stage(&sdk, &stage.table()).await,
        }
    }
}

/// Whether the command's actions go to its stage's audit trail: every command that may
/// change state, on the stage named (`--stage`, `--table`) or, when none is, on the default
/// one (`dev`) if it is deployed (its actions once went only to the local file, out of the
/// trail the web page and `schedkit audit` read). One that works on queues named one by
/// one (`--queue-url`, `--dlq-url`) and no stage keeps its trail in the file
/// (`SCHEDKIT_AUDIT_LOG`).
fn audits_in_stage(cli: &Cli) -> bool {
    let target = &cli.globals.target;
    let names_stage = target.stage.is_some() || target.table.is_some();
    let names_queues =
        target.queue_url.is_some() || target.dlq_url.is_some() || target.host_queue_url.is_some();
    (names_stage || !names_queues)
        && matches!(
            cli.command,
            Command::Jobs(_)
                | Command::Executions(_)
                | Command::Dlq(_)
                | Command::Chains(_)
                | Command::Schedules(_)
                | Command::Fire(_)
                | Command::Engine(_)
                | Command::Ui(_)
        )
}

/// Runs the command (after [`prepare`]). `ui` is the binary's to serve
/// (`schedkit_console::ui::run`): the page is built on these commands, not the other way.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    prepare(&cli).await;
    match &cli.command {
        Command::Ui(_) => Err(anyhow::anyhow!(
            "`schedkit ui` is served by the binary (schedkit_console::ui::run), not by cli::run"
        )),
        Command::Audit(a) => audit_cmd::run(a, &cli.globals).await,
        Command::Status(a) => status_cmd::run(a, &cli.globals).await,
        Command::Jobs(a) => jobs_cmd::run(a, &cli.globals).await,
        Command::Executions(c) => executions_cmd::run(c, &cli.globals).await,
        Command::Dlq(c) => dlq_cmd::run(c, &cli.globals).await,
        Command::Chains(c) => chains_cmd::run(c, &cli.globals).await,
        Command::Catalog(c) => catalog_cmd::run(c, &cli.globals).await,
        Command::Schedules(c) => schedules_cmd::run(c, &cli.globals).await,
        Command::Fire(a) => fire_cmd::run(a, &cli.globals).await,
        Command::Cost(a) => cost_cmd::run(a, &cli.globals),
        Command::Engine(a) => engine_cmd::run(a, &cli.globals).await,
        Command::Iac(IacCommand::Render(a)) => iac_cmd::render(a, &cli.globals).await,
        Command::Iac(IacCommand::Init(a)) => iac_cmd::init(a, &cli.globals),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Cli {
        Cli::try_parse_from(std::iter::once("schedkit").chain(args.iter().copied())).unwrap()
    }

    #[test]
    fn clap_finds_nothing_wrong_in_the_whole_command_tree() {
        // Every subcommand's flags against the global ones (a `chains skip --output` once
        // collided with the global `--output` and panicked on every call).
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }

    #[test]
    fn actions_on_the_default_stage_go_to_its_audit_trail() {
        // No --stage and no --table: the default stage, whose trail the page reads.
        assert!(audits_in_stage(&parse(&[
            "jobs", "pause", "nightly", "--reason", "r"
        ])));
        assert!(audits_in_stage(&parse(&[
            "--stage", "prod", "dlq", "redrive", "--yes"
        ])));
        // Reading changes nothing: no trail to set up.
        assert!(!audits_in_stage(&parse(&["status"])));
    }
}
