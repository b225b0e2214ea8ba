//! Which deployed stage a command works on: the flags. Finding the stage's resources by the
//! template's names is the library's (`schedkit::ops::stage`).

use clap::Args;
use schedkit::aws::SdkConfig;
use schedkit::ops::stage::{Stage, StageRef};

use super::usage::UsageError;

#[derive(Debug, Clone, Args)]
pub struct TargetArgs {
    /// The deployed stage (the template's `Stage`).
    #[arg(long, global = true, env = "SCHEDKIT_STAGE")]
    pub stage: Option<String>,
    /// The jobs queue (default: the stage's).
    #[arg(long, global = true, env = "SCHEDKIT_QUEUE_URL")]
    pub queue_url: Option<String>,
    /// The host jobs queue, where runs of `runs_on = "host"` jobs go (default: the stage's).
    #[arg(long, global = true, env = "SCHEDKIT_HOST_QUEUE_URL")]
    pub host_queue_url: Option<String>,
    /// The dead-letter queue (default: the stage's).
    #[arg(long, global = true, env = "SCHEDKIT_DLQ_URL")]
    pub dlq_url: Option<String>,
    /// The executions table (default: the stage's).
    #[arg(long, global = true, env = "SCHEDKIT_TABLE")]
    pub table: Option<String>,
}

impl TargetArgs {
    /// The stage, `dev` when none is given.
    pub fn stage(&self) -> String {
        self.stage_ref().stage()
    }

    /// The flags as the library takes them.
    pub fn stage_ref(&self) -> StageRef {
        StageRef {
            stage: self.stage.clone(),
            queue_url: self.queue_url.clone(),
            host_queue_url: self.host_queue_url.clone(),
            dlq_url: self.dlq_url.clone(),
            table: self.table.clone(),
        }
    }

    /// The jobs queue's URL (given, or the stage's); a stage that is not deployed is a
    /// usage error (exit 2).
    pub async fn queue_url(&self, sdk: &SdkConfig) -> anyhow::Result<String> {
        self.stage_ref()
            .queue_url(sdk)
            .await
            .map_err(|e| usage_if_not_found(e, self))
    }

    /// The URL of the queue `job`'s runs go to (the host jobs queue for a host job).
    pub async fn queue_url_of(
        &self,
        sdk: &SdkConfig,
        job: &schedkit::catalog::Job,
    ) -> anyhow::Result<String> {
        self.stage_ref()
            .queue_url_of(sdk, job.spec.runs_on)
            .await
            .map_err(|e| usage_if_not_found(e, self))
    }

    /// The stage's resources; a stage that is not deployed is a usage error (exit 2).
    pub async fn resolve(&self, sdk: &SdkConfig) -> anyhow::Result<Stage> {
        self.stage_ref()
            .resolve(sdk)
            .await
            .map_err(|e| usage_if_not_found(e, self))
    }
}

/// An operation's error as the user should see it: something the input named that is not
/// there (a stage not deployed), or a page token no page printed, is a usage error (exit 2)
/// that says which flag to give; anything else is a failure (exit 1).
pub fn usage_if_not_found(e: schedkit::ops::OpsError, target: &TargetArgs) -> anyhow::Error {
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
