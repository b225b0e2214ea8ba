//! Worker settings: flags outside Lambda, `SCHEDKIT_*` environment variables in both modes
//! (the template sets them on the function).

use clap::{CommandFactory, FromArgMatches, Parser};

/// Runs schedkit jobs from an SQS queue. Inside Lambda (AWS_LAMBDA_RUNTIME_API set) it
/// serves SQS batch events; anywhere else it long-polls the queue itself, with the same
/// semantics.
#[derive(Debug, Clone, Parser)]
#[command(version)]
pub struct Settings {
    /// The jobs queue.
    #[arg(long, env = "SCHEDKIT_QUEUE_URL")]
    pub queue_url: String,
    /// The dead-letter queue that receives failures with their reasons.
    #[arg(long, env = "SCHEDKIT_DLQ_URL")]
    pub dlq_url: String,
    /// The executions table.
    #[arg(long, env = "SCHEDKIT_TABLE")]
    pub table: String,
    /// The stage (the template's `Stage`): the metrics' `Stage` dimension, so that stages
    /// of one account keep their alarms apart. Default: read from a table named
    /// `schedkit-<stage>-executions`, else `-`.
    #[arg(long, env = "SCHEDKIT_STAGE")]
    pub stage: Option<String>,
    /// The table the stack gives jobs for their own effects (the template's EffectsTable).
    #[arg(long, env = "SCHEDKIT_EFFECTS_TABLE")]
    pub effects_table: Option<String>,
    /// The stage's schedule group, where the worker pauses a job after its
    /// `pause_after_failures` (the template sets it). Default: the catalog's
    /// `schedule_group` and the stage, `<group>-<stage>`, as the template names it.
    #[arg(long, env = "SCHEDKIT_SCHEDULE_GROUP")]
    pub schedule_group: Option<String>,
    /// The stage's state machines' ARN up to the chain's name
    /// (`arn:aws:states:<region>:<account>:stateMachine:schedkit-<stage>.`; the template
    /// sets it). Default: each chain's state machine looked for by its name,
    /// `schedkit-<stage>.<chain>`, when its first trigger comes (ListStateMachines and
    /// DescribeStateMachine), and taken only if it sends its steps to this worker's queue.
    #[arg(long, env = "SCHEDKIT_STATE_MACHINE_PREFIX")]
    pub state_machine_prefix: Option<String>,
    /// Messages of one batch processed at once.
    #[arg(long, env = "SCHEDKIT_CONCURRENCY", default_value_t = 10)]
    pub concurrency: usize,
    /// Prefix of the owner tokens this worker writes (default: host and pid).
    #[arg(long, env = "SCHEDKIT_WORKER_ID")]
    pub worker_id: Option<String>,
    /// Polling only: stop once the queue holds no message (visible, in flight or delayed).
    #[arg(long)]
    pub until_drained: bool,
    /// Look at what the accountant finds (every expected firing accounted for: missed
    /// and late runs), print it as JSON and exit, instead of serving. A look writes
    /// nothing and reports nothing: the stage's own check (its schedule) does.
    #[arg(long)]
    pub account: bool,
    /// With `--account`: be the stage's check (its ledger written, each finding reported
    /// once as an EMF metric on stdout). Only where stdout reaches CloudWatch (Lambda, or a
    /// container with the CloudWatch agent): elsewhere the reports are lost to the alarms.
    #[arg(long, requires = "account")]
    pub account_commit: bool,
    /// With `--account`: judge the firings that turned missed or late since this time
    /// (RFC 3339) instead of since the last check (at most two days back).
    #[arg(long, requires = "account", value_parser = instant)]
    pub account_since: Option<chrono::DateTime<chrono::Utc>>,
    /// Polling only: long-poll wait per receive, in seconds (0-20).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(i32).range(0..=20))]
    pub wait_seconds: i32,
}

fn instant(text: &str) -> Result<chrono::DateTime<chrono::Utc>, String> {
    chrono::DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&chrono::Utc))
        .map_err(|e| format!("`{text}` is not an RFC 3339 time (2026-03-29T00:00:00Z): {e}"))
}

impl Settings {
    /// The stage this worker reports its metrics under.
    pub fn stage(&self) -> &str {
        if let Some(stage) = self.stage.as_deref() {
            return stage;
        }
        self.table
            .strip_prefix("schedkit-")
            .and_then(|rest| rest.strip_suffix("-executions"))
            .filter(|s| !s.is_empty())
            .unwrap_or(crate::telemetry::NO_STAGE)
    }

    /// The schedule group jobs are paused in: given, or the template's name for the stage
    /// (None when the stage is unknown).
    pub fn schedule_group(&self, catalog_group: &str) -> Option<String> {
        if let Some(group) = &self.schedule_group {
            return Some(group.clone());
        }
        let stage = self.stage();
        (stage != crate::telemetry::NO_STAGE).then(|| format!("{catalog_group}-{stage}"))
    }

    /// The process's settings; prints the usage and exits (2) on bad flags, as any CLI.
    /// Help and errors name the binary the user ran, not this library.
    pub(crate) fn from_args() -> Settings {
        let name = std::env::args()
            .next()
            .and_then(|a| {
                std::path::Path::new(&a)
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
            })
            .unwrap_or_else(|| "worker".into());
        // clap names commands with `&'static str`; the name lives as long as the process.
        let name: &'static str = Box::leak(name.into_boxed_str());
        let matches = Settings::command().name(name).bin_name(name).get_matches();
        Settings::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
    }
}
