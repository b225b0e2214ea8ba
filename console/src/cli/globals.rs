//! The flags every command takes (catalog, output, AWS, stage), and what every command
//! derives from them: the catalog, one of its jobs, the stage's schedule group.

use std::path::PathBuf;

use clap::Args;

use super::aws_args::AwsArgs;
use super::output::Output;
use super::target;
use super::usage::UsageError;

/// The flags every command takes.
#[derive(Debug, Clone, Args)]
pub struct Globals {
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
}

/// The catalog the command names, or a usage error listing every problem.
pub fn load_catalog(cli: &Globals) -> anyhow::Result<schedkit::catalog::Catalog> {
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
pub fn stage_group(catalog: &schedkit::catalog::Catalog, cli: &Globals) -> String {
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
