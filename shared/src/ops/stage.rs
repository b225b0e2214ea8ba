//! Which deployed stage an operation works on: its queues and table, found by the
//! template's naming convention (`schedkit-<stage>-jobs`, `-dlq`, `-executions`) unless
//! given explicitly.

use aws_sdk_sqs::types::QueueAttributeName;

use super::OpsError;
use crate::aws::{AwsError, AwsResultExt, SdkConfig};

/// A stage by name, with any resource given explicitly instead of by the template's names.
#[derive(Debug, Clone, Default)]
pub struct StageRef {
    /// The template's `Stage` (`dev` when none is given).
    pub stage: Option<String>,
    /// The jobs queue's URL; None looks up `schedkit-<stage>-jobs`.
    pub queue_url: Option<String>,
    /// The host jobs queue's URL; None looks up `schedkit-<stage>-host-jobs` (never the
    /// jobs queue: a host job's run there would be ended at the function's timeout).
    pub host_queue_url: Option<String>,
    /// The DLQ's URL; None looks up `schedkit-<stage>-dlq`.
    pub dlq_url: Option<String>,
    /// The executions table; None means `schedkit-<stage>-executions`.
    pub table: Option<String>,
}

/// A stage's resources, found.
#[derive(Debug, Clone)]
pub struct Stage {
    /// The stage's name (`dev` when none was given).
    pub stage: String,
    /// URL of the jobs queue, where a selected redrive sends dead letters back.
    pub queue_url: String,
    /// ARN of the jobs queue, the destination of a move-task redrive.
    pub queue_arn: String,
    /// URL of the host jobs queue (`runs_on = "host"`): given, or named beside the jobs
    /// queue as the template names it (a stage deployed before it had one lacks it).
    pub host_queue_url: Option<String>,
    /// URL of the dead-letter queue.
    pub dlq_url: String,
    /// ARN of the dead-letter queue, the source of a move-task redrive.
    pub dlq_arn: String,
    /// Name of the executions table.
    pub table: String,
}

impl Stage {
    /// The ARN of the stage's state machine of `chain` (the template's name,
    /// [`crate::orchestrator::state_machine_name`]), in the region and account of its jobs
    /// queue.
    pub fn state_machine_arn(&self, chain: &str) -> String {
        let queue = self.queue_arn.rsplit(':').next().unwrap_or_default();
        let base = self
            .queue_arn
            .strip_suffix(queue)
            .unwrap_or(&self.queue_arn);
        format!(
            "{}stateMachine:{}",
            base.replacen(":sqs:", ":states:", 1),
            crate::orchestrator::state_machine_name(&self.stage, chain)
        )
    }
}

impl StageRef {
    /// The stage, `dev` when none is given (the template's default).
    pub fn stage(&self) -> String {
        self.stage.clone().unwrap_or_else(|| "dev".into())
    }

    /// The executions table: given, or the stage's.
    pub fn table(&self) -> String {
        self.table
            .clone()
            .unwrap_or_else(|| format!("schedkit-{}-executions", self.stage()))
    }

    /// The jobs queue's URL: given, or looked up by the stage's name.
    pub async fn queue_url(&self, sdk: &SdkConfig) -> Result<String, OpsError> {
        self.url_of(sdk, &self.queue_url, "jobs").await
    }

    /// The URL of the queue a job's runs go to: the host jobs queue for
    /// `runs_on = "host"`, else the jobs queue.
    pub async fn queue_url_of(
        &self,
        sdk: &SdkConfig,
        runs_on: crate::catalog::RunsOn,
    ) -> Result<String, OpsError> {
        match runs_on {
            crate::catalog::RunsOn::Lambda => self.queue_url(sdk).await,
            crate::catalog::RunsOn::Host => self.host_queue_url(sdk).await,
        }
    }

    /// The host jobs queue's URL: given, else looked up by the stage's name.
    pub async fn host_queue_url(&self, sdk: &SdkConfig) -> Result<String, OpsError> {
        self.url_of(sdk, &self.host_queue_url, "host-jobs").await
    }

    /// Finds every resource of the stage; a queue that does not exist is
    /// [`OpsError::NotFound`]. The host jobs queue is not looked up: given, or named as the
    /// template names it beside the jobs queue (a stage deployed before it had one has
    /// none, and only a host job's letter is ever sent there).
    pub async fn resolve(&self, sdk: &SdkConfig) -> Result<Stage, OpsError> {
        let queue_url = self.queue_url(sdk).await?;
        let dlq_url = self.url_of(sdk, &self.dlq_url, "dlq").await?;
        let host_queue_url = self.host_queue_url.clone().or_else(|| {
            queue_url
                .strip_suffix("-jobs")
                .map(|base| format!("{base}-host-jobs"))
        });
        Ok(Stage {
            host_queue_url,
            queue_arn: queue_arn(sdk, &queue_url).await?,
            dlq_arn: queue_arn(sdk, &dlq_url).await?,
            table: self.table(),
            queue_url,
            dlq_url,
            stage: self.stage(),
        })
    }

    /// A queue's URL: `given`, else that of the stage's queue named `schedkit-<stage>-<suffix>`.
    async fn url_of(
        &self,
        sdk: &SdkConfig,
        given: &Option<String>,
        suffix: &str,
    ) -> Result<String, OpsError> {
        if let Some(url) = given {
            return Ok(url.clone());
        }
        let name = format!("schedkit-{}-{suffix}", self.stage());
        let sqs = aws_sdk_sqs::Client::new(sdk);
        match sqs.get_queue_url().queue_name(&name).send().await {
            Ok(out) => Ok(out.queue_url.unwrap_or_default()),
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_queue_does_not_exist()) =>
            {
                Err(OpsError::NotFound {
                    kind: "queue",
                    name,
                })
            }
            Err(e) => Err(AwsError::of(format!("looking up queue {name}"), &e).into()),
        }
    }
}

/// The queue a run of `priority` is sent to: the urgent queue beside `queue_url` (see
/// [`crate::queue::urgent`]) when the run is urgent and the stage has one, else
/// `queue_url` (a stage deployed before it had urgent queues keeps one queue).
pub async fn queue_for_priority(
    sdk: &SdkConfig,
    queue_url: &str,
    priority: i32,
) -> Result<String, OpsError> {
    use crate::queue::urgent::{is_urgent, urgent_queue_of};
    if !is_urgent(priority) {
        return Ok(queue_url.to_string());
    }
    let urgent = urgent_queue_of(queue_url);
    let found = aws_sdk_sqs::Client::new(sdk)
        .get_queue_attributes()
        .queue_url(&urgent)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await;
    match found {
        Ok(_) => Ok(urgent),
        Err(e) if crate::queue::urgent::absent(&crate::aws::describe(&e)) => {
            Ok(queue_url.to_string())
        }
        Err(e) => Err(AwsError::of(format!("reading queue {urgent}"), &e).into()),
    }
}

/// The ARN of a queue, by URL.
pub async fn queue_arn(sdk: &SdkConfig, url: &str) -> Result<String, OpsError> {
    let attrs = aws_sdk_sqs::Client::new(sdk)
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .aws(format!("reading queue {url}"))?;
    Ok(attrs
        .attributes
        .and_then(|a| a.get(&QueueAttributeName::QueueArn).cloned())
        .unwrap_or_default())
}
