//! `schedkit audit`: the stage's audit trail, newest first: every operator's actions (each
//! begun and ended, with what it changed or how far it got) and the worker's own pauses.

use clap::Args;
use schedkit::ops::audit;
use schedkit::store::{AuditEntry, AuditFilter};

use super::status_cmd::clip;
use super::{globals::Globals, globals::parse_instant, usage::UsageError};

#[derive(Debug, Args)]
pub struct AuditArgs {
    /// From this instant (RFC 3339), or this long ago (90m, 7d). Default: 7 days ago.
    #[arg(long)]
    pub since: Option<String>,
    /// Up to this instant (RFC 3339). Default: now.
    #[arg(long)]
    pub until: Option<String>,
    /// Only entries of this identity (any part of its ARN: `alice`, `user/alice`).
    #[arg(long)]
    pub by: Option<String>,
    /// Only this action (`executions cancel`, `dlq redrive`, `auto-pause`), or actions
    /// starting with it (`dlq`).
    #[arg(long)]
    pub action: Option<String>,
    /// Entries listed at most: the newest.
    #[arg(long, default_value_t = 1000)]
    pub limit: usize,
}

fn instant(text: &str) -> Result<chrono::DateTime<chrono::Utc>, UsageError> {
    if let Ok(ago) = humantime::parse_duration(text) {
        let ago = chrono::Duration::from_std(ago).map_err(|e| UsageError(e.to_string()))?;
        return Ok(chrono::Utc::now() - ago);
    }
    parse_instant(text).map_err(UsageError)
}

pub async fn run(a: &AuditArgs, cli: &Globals) -> anyhow::Result<()> {
    let since = match &a.since {
        Some(t) => instant(t)?,
        None => chrono::Utc::now() - chrono::Duration::days(7),
    };
    let until = match &a.until {
        Some(t) => instant(t)?,
        None => chrono::Utc::now(),
    };
    let sdk = cli.aws.sdk_config().await;
    let table = cli.target.stage_ref().table();
    let filter = AuditFilter {
        by: a.by.clone(),
        action: a.action.clone(),
    };
    let entries: Vec<AuditEntry> =
        audit::read(&sdk, &table, since, until, &filter, a.limit).await?;
    cli.output.rows(
        &["WHEN", "WHO", "WHAT", "PHASE", "OUTCOME", "DETAILS"],
        &entries,
        |e| {
            let outcome = match (e.phase.as_str(), e.finished) {
                ("begin", _) => "-".to_string(),
                (_, Some(true)) => e
                    .result
                    .as_ref()
                    .map_or("finished".into(), |r| format!("finished: {r}")),
                _ => format!(
                    "did not finish: {} (done: {})",
                    e.error.as_deref().unwrap_or("?"),
                    e.done.as_deref().unwrap_or("nothing")
                ),
            };
            vec![
                e.when.clone(),
                clip(&e.who, 48),
                e.what.clone(),
                e.phase.clone(),
                clip(&outcome, 70),
                clip(&e.details.to_string(), 70),
            ]
        },
    );
    Ok(())
}
