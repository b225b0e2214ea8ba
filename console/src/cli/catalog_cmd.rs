//! `schedkit catalog check`: validate the catalog, list its jobs with their next run.

use chrono::{SecondsFormat, Utc};
use clap::Subcommand;
use serde::Serialize;

use super::{globals::Globals, globals::load_catalog};

#[derive(Debug, Subcommand)]
pub enum CatalogCommand {
    /// Validate the catalog (every problem, with file, job and field) and list its jobs.
    Check,
    /// Turn a crontab into catalog entries: each line a job that runs its command on the
    /// polling host at the times cron ran it. Lines that cannot be translated exactly are
    /// named with the reason (on stderr, and as comments in the output); the exit code is
    /// then 3.
    Import(ImportArgs),
    /// The next firings of every scheduled job and chain (or one), in UTC: to compare an
    /// imported catalog with the crontab it came from.
    Next(NextArgs),
    /// The catalog reference (Markdown): every table and field with its type, default and
    /// meaning, from the catalog's own types. The book's reference page is this output.
    Reference,
    /// The catalog's JSON Schema, for an editor's completion and checks of `catalog.toml`
    /// (Taplo / Even Better TOML: `#:schema ./catalog.schema.json` on the file's first line).
    Schema,
}

#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// The crontab (`crontab -l > crontab.txt`), or `-` for standard input.
    pub crontab: String,
    /// Who owns the imported jobs (the catalog asks an owner of every job).
    #[arg(long)]
    pub owner: String,
    /// The zone cron ran in (IANA, `Europe/Lisbon`). Default: this host's.
    #[arg(long)]
    pub timezone: Option<String>,
    /// A system crontab (`/etc/crontab`, `/etc/cron.d/*`): a user field after the times.
    #[arg(long)]
    pub system: bool,
    /// Write the entries to this file instead of standard output.
    #[arg(long)]
    pub out: Option<std::path::PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct NextArgs {
    /// From this time (RFC 3339; default now).
    #[arg(long, value_parser = instant)]
    pub from: Option<chrono::DateTime<Utc>>,
    /// Firings per job.
    #[arg(short = 'n', long, default_value_t = 5)]
    pub count: usize,
    /// Only this job or chain.
    #[arg(long)]
    pub job: Option<String>,
}

fn instant(text: &str) -> Result<chrono::DateTime<Utc>, String> {
    chrono::DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| format!("`{text}` is not an RFC 3339 time (2027-01-04T00:00:00Z): {e}"))
}

#[derive(Serialize)]
struct Firings {
    job: String,
    next: Vec<String>,
}

#[derive(Serialize)]
struct Row {
    job: String,
    owner: String,
    target: String,
    schedule: Option<String>,
    timezone: Option<String>,
    enabled: bool,
    next_run: Option<String>,
}

pub async fn run(command: &CatalogCommand, cli: &Globals) -> anyhow::Result<()> {
    match command {
        CatalogCommand::Import(a) => import(a),
        CatalogCommand::Reference => {
            print!("{}", schedkit::catalog::reference::markdown());
            Ok(())
        }
        CatalogCommand::Schema => {
            println!(
                "{}",
                serde_json::to_string_pretty(&schedkit::catalog::reference::schema())?
            );
            Ok(())
        }
        CatalogCommand::Next(a) => {
            let catalog = load_catalog(cli)?;
            let from = a.from.unwrap_or_else(Utc::now);
            let schedules = catalog
                .jobs
                .values()
                .map(|j| (&j.name, j.schedule.as_ref()))
                .chain(
                    catalog
                        .chains
                        .values()
                        .map(|c| (&c.name, c.schedule.as_ref())),
                );
            let rows: Vec<Firings> = schedules
                .filter(|(name, _)| a.job.as_ref().is_none_or(|j| j == *name))
                .filter_map(|(name, s)| Some((name, s?)))
                .map(|(name, s)| Firings {
                    job: name.clone(),
                    next: s
                        .next_n(from, a.count)
                        .iter()
                        .map(|t| t.to_rfc3339_opts(SecondsFormat::Secs, true))
                        .collect(),
                })
                .collect();
            cli.output.rows(&["JOB", "NEXT FIRINGS (UTC)"], &rows, |r| {
                vec![r.job.clone(), r.next.join(" ")]
            });
            Ok(())
        }
        CatalogCommand::Check => {
            let catalog = load_catalog(cli)?;
            let now = Utc::now();
            let rows: Vec<Row> = catalog
                .jobs
                .values()
                .map(|job| {
                    let spec = job.spec.schedule.as_ref();
                    Row {
                        job: job.name.clone(),
                        owner: job.spec.owner.clone(),
                        target: job.spec.target.clone(),
                        schedule: spec.map(|s| s.expression.clone()),
                        timezone: spec.map(|s| s.timezone.clone()),
                        enabled: spec.is_none_or(|s| s.enabled),
                        next_run: job
                            .schedule
                            .as_ref()
                            .and_then(|s| s.next_after(now))
                            .map(|t| t.to_rfc3339_opts(SecondsFormat::Secs, true)),
                    }
                })
                .collect();
            // Warnings go to stderr: `--output json` stays one document, the exit code 0.
            for w in &catalog.warnings {
                eprintln!("warning: {w}");
            }
            if cli.output == super::output::Output::Table {
                println!("{}: valid, {} jobs\n", catalog.file, rows.len());
            }
            cli.output.rows(
                &[
                    "JOB",
                    "OWNER",
                    "TARGET",
                    "SCHEDULE",
                    "ZONE",
                    "NEXT RUN (UTC)",
                ],
                &rows,
                |r| {
                    vec![
                        r.job.clone(),
                        r.owner.clone(),
                        r.target.clone(),
                        r.schedule.clone().unwrap_or_else(|| "-".into()),
                        r.timezone.clone().unwrap_or_else(|| "-".into()),
                        match (&r.next_run, r.enabled, &r.schedule) {
                            (_, false, _) => "disabled".into(),
                            (Some(t), true, _) => t.clone(),
                            (None, true, Some(s)) if s.starts_with("rate(") => {
                                "counts from its start (or from sync)".into()
                            }
                            (None, true, _) => "-".into(),
                        },
                    ]
                },
            );
            Ok(())
        }
    }
}

/// `catalog import`: the entries to stdout (or `--out`), what was refused to stderr.
fn import(a: &ImportArgs) -> anyhow::Result<()> {
    use schedkit::catalog::import::{ImportOptions, host_timezone, import};
    let text = if a.crontab == "-" {
        std::io::read_to_string(std::io::stdin())?
    } else {
        std::fs::read_to_string(&a.crontab)
            .map_err(|e| anyhow::anyhow!("cannot read the crontab {}: {e}", a.crontab))?
    };
    let timezone = match &a.timezone {
        Some(tz) => {
            schedkit::schedule::parse_timezone(tz)?;
            tz.clone()
        }
        None => host_timezone().map_err(anyhow::Error::msg)?,
    };
    let options = ImportOptions {
        timezone,
        system: a.system,
        owner: a.owner.clone(),
    };
    let imported = import(&text, &options);
    let toml = imported.to_toml(&a.owner);
    match &a.out {
        Some(path) => std::fs::write(path, &toml)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?,
        None => print!("{toml}"),
    }
    eprintln!(
        "catalog import: {} jobs from {} ({}), {} lines refused",
        imported.jobs.len(),
        a.crontab,
        options.timezone,
        imported.refused.len()
    );
    for r in &imported.refused {
        eprintln!("  line {}: {}\n    {}", r.line, r.source, r.reason);
    }
    for n in &imported.notes {
        eprintln!("  note: {n}");
    }
    if !imported.refused.is_empty() {
        std::process::exit(3);
    }
    Ok(())
}
