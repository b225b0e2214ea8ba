//! Which deployed stage a command works on: its queues and table, found by the template's
//! naming convention (`schedkit-<stage>-jobs`, `-dlq`, `-executions`) unless given.

use aws_sdk_sqs::types::QueueAttributeName;
use clap::Args;

use crate::aws_error::AwsResultExt;

#[derive(Debug, Clone, Args)]
pub struct TargetArgs {
    /// The deployed stage (the template's `Stage`).
    #[arg(long, global = true, env = "SCHEDKIT_STAGE")]
    pub stage: Option<String>,
    /// The jobs queue (default: the stage's).
    #[arg(long, global = true, env = "SCHEDKIT_QUEUE_URL")]
    pub queue_url: Option<String>,
    /// The dead-letter queue (default: the stage's).
    #[arg(long, global = true, env = "SCHEDKIT_DLQ_URL")]
    pub dlq_url: Option<String>,
    /// The executions table (default: the stage's).
    #[arg(long, global = true, env = "SCHEDKIT_TABLE")]
    pub table: Option<String>,
}

/// A stage's resources.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub stage: String,
    pub queue_url: String,
    pub queue_arn: String,
    pub dlq_url: String,
    pub dlq_arn: String,
    pub table: String,
}

impl TargetArgs {
    /// The stage, `dev` when none is given.
    pub fn stage(&self) -> String {
        self.stage.clone().unwrap_or_else(|| "dev".into())
    }

    pub async fn resolve(&self, sqs: &aws_sdk_sqs::Client) -> anyhow::Result<Resolved> {
        let stage = self.stage();
        let queue_url = match &self.queue_url {
            Some(u) => u.clone(),
            None => url_of(sqs, &format!("schedkit-{stage}-jobs"), &stage).await?,
        };
        let dlq_url = match &self.dlq_url {
            Some(u) => u.clone(),
            None => url_of(sqs, &format!("schedkit-{stage}-dlq"), &stage).await?,
        };
        Ok(Resolved {
            queue_arn: arn_of(sqs, &queue_url).await?,
            dlq_arn: arn_of(sqs, &dlq_url).await?,
            table: self
                .table
                .clone()
                .unwrap_or_else(|| format!("schedkit-{stage}-executions")),
            queue_url,
            dlq_url,
            stage,
        })
    }
}

async fn url_of(sqs: &aws_sdk_sqs::Client, name: &str, stage: &str) -> anyhow::Result<String> {
    match sqs.get_queue_url().queue_name(name).send().await {
        Ok(out) => Ok(out.queue_url.unwrap_or_default()),
        Err(e) if e.as_service_error().is_some_and(|s| s.is_queue_does_not_exist()) => Err(super::UsageError(format!(
            "queue `{name}` does not exist: is stage `{stage}` deployed? Give --stage, or --queue-url/--dlq-url"
        ))
        .into()),
        Err(e) => Err(e).aws(format!("looking up queue {name}")),
    }
}

/// The ARN of a queue, by URL.
pub async fn arn_of(sqs: &aws_sdk_sqs::Client, url: &str) -> anyhow::Result<String> {
    let attrs = sqs
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
