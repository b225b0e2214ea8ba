//! `schedkit engine`: fire schedules locally, in real time or over a simulated span.

use std::time::Duration;

use chrono::SecondsFormat;
use clap::Args;
use serde::Serialize;

use super::{globals::Globals, globals::load_catalog, globals::parse_instant, usage::UsageError};
use schedkit::ops::audit;
use schedkit::trigger::once_group;
use schedkit_firing_engine::{Delivery, Engine, EngineOptions};

#[derive(Debug, Args)]
pub struct EngineArgs {
    /// Fast-forward: fire everything due from this instant (needs --to).
    #[arg(long, requires = "to")]
    pub from: Option<String>,
    /// Fast-forward: up to this instant (exclusive).
    #[arg(long, requires = "from")]
    pub to: Option<String>,
    /// Schedule groups to fire (default: the catalog's group and its one-off group).
    #[arg(long = "group")]
    pub groups: Vec<String>,
    /// A DynamoDB table of firing claims, so several engines fire each firing once.
    #[arg(long, env = "SCHEDKIT_FIRINGS_TABLE")]
    pub claims_table: Option<String>,
    /// Use the stage's claims table (`schedkit-<stage>-firings`), so every engine run for
    /// the stage fires each firing once.
    #[arg(long)]
    pub shared: bool,
    /// Real time: how often to look for due firings, in seconds.
    #[arg(long, default_value_t = 10)]
    pub tick: u64,
    /// Seeds where in its flexible time window each firing lands (default: random), so a
    /// run can be repeated exactly.
    #[arg(long)]
    pub seed: Option<u64>,
}

#[derive(Serialize)]
struct Row {
    scheduled_time: String,
    group: String,
    schedule: String,
    target: String,
    delivery: String,
}

pub async fn run(a: &EngineArgs, cli: &Globals) -> anyhow::Result<()> {
    audit::ensure_writable()?;
    let groups = if a.groups.is_empty() {
        let group = super::globals::stage_group(&load_catalog(cli)?, cli);
        vec![once_group(&group), group]
    } else {
        a.groups.clone()
    };
    let sdk = cli.aws.sdk_config().await;
    let watched = groups.clone();
    let engine = Engine::new(
        &sdk,
        EngineOptions {
            groups,
            claims_table: a.claims_table.clone().or_else(|| {
                a.shared
                    .then(|| format!("schedkit-{}-firings", cli.target.stage()))
            }),
            owner: "schedkit-engine".into(),
            seed: a.seed,
            ..EngineOptions::default()
        },
    );
    let (Some(from), Some(to)) = (&a.from, &a.to) else {
        let audited = audit::begin(
            &sdk,
            "engine real time",
            serde_json::json!({"groups": watched}),
        )
        .await?;
        eprintln!("firing schedules in real time; Ctrl-C stops");
        let ran = engine
            .run(Duration::from_secs(a.tick.max(1)), async {
                let _ = tokio::signal::ctrl_c().await;
            })
            .await;
        audited.end(&ran.as_ref().map(|()| "stopped"), None).await;
        return ran;
    };
    let (from, to) = (
        parse_instant(from).map_err(UsageError)?,
        parse_instant(to).map_err(UsageError)?,
    );
    if from >= to {
        return Err(UsageError("--from must be before --to".into()).into());
    }
    let audited = audit::begin(
        &sdk,
        "engine fast-forward",
        serde_json::json!({"from": from.to_rfc3339(), "to": to.to_rfc3339(), "groups": watched}),
    )
    .await?;
    let firings = engine.fast_forward(from, to).await;
    audited
        .end(
            &firings
                .as_ref()
                .map(|f| serde_json::json!({"firings": f.len()})),
            None,
        )
        .await;
    let firings = firings?;
    let rows: Vec<Row> = firings
        .into_iter()
        .map(|f| Row {
            scheduled_time: f.scheduled_time.to_rfc3339_opts(SecondsFormat::Secs, true),
            group: f.group,
            schedule: f.schedule,
            target: f.target_arn,
            delivery: match f.delivery {
                Delivery::Delivered { attempts } => format!("delivered ({attempts} attempt(s))"),
                Delivery::DeadLettered { attempts, error } => {
                    format!("dead-lettered after {attempts}: {error}")
                }
                Delivery::Dropped { attempts, error } => {
                    format!("dropped after {attempts}: {error}")
                }
                Delivery::FiredElsewhere => "fired by another engine".into(),
                Delivery::Expired => "missed, older than its maximum event age".into(),
            },
        })
        .collect();
    cli.output.rows(
        &["SCHEDULED (UTC)", "GROUP", "SCHEDULE", "DELIVERY"],
        &rows,
        |r| {
            vec![
                r.scheduled_time.clone(),
                r.group.clone(),
                r.schedule.clone(),
                r.delivery.clone(),
            ]
        },
    );
    Ok(())
}
