//! Worker settings: flags outside Lambda, environment variables in both modes.

use aws_config::SdkConfig;
use clap::Parser;
use schedkit::{DynamoStore, Metrics, Processor, ProcessorConfig};

/// Runs schedkit jobs from an SQS queue. Inside Lambda (AWS_LAMBDA_RUNTIME_API set) it
/// serves SQS batch events; anywhere else it long-polls the queue itself, with the same
/// semantics.
#[derive(Debug, Clone, Parser)]
#[command(name = "worker", version)]
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
    /// The table the example `record-invoice` job writes to.
    #[arg(long, env = "SCHEDKIT_EFFECTS_TABLE")]
    pub effects_table: Option<String>,
    /// Messages of one batch processed at once.
    #[arg(long, env = "SCHEDKIT_CONCURRENCY", default_value_t = 10)]
    pub concurrency: usize,
    /// Prefix of the owner tokens this worker writes (default: host and pid).
    #[arg(long, env = "SCHEDKIT_WORKER_ID")]
    pub worker_id: Option<String>,
    /// Polling only: stop once the queue holds no message (visible, in flight or delayed).
    #[arg(long)]
    pub until_drained: bool,
    /// Polling only: long-poll wait per receive, in seconds (0-20).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(i32).range(0..=20))]
    pub wait_seconds: i32,
}

impl Settings {
    /// The batch processor these settings describe: the example jobs, with the policies
    /// of the job catalog. Fails when the catalog is invalid or names a job the worker
    /// does not implement.
    pub fn processor(&self, sdk: &SdkConfig, metrics: Metrics) -> Result<Processor, String> {
        let ddb = aws_sdk_dynamodb::Client::new(sdk);
        let sqs = aws_sdk_sqs::Client::new(sdk);
        let catalog = crate::jobs::catalog()?;
        let registry = crate::jobs::registry(ddb.clone(), self.effects_table.clone(), &catalog)?;
        Ok(Processor::new(
            DynamoStore::new(ddb, &self.table),
            sqs,
            registry,
            ProcessorConfig {
                queue_url: self.queue_url.clone(),
                dlq_url: self.dlq_url.clone(),
                concurrency: self.concurrency,
                worker_id: self.worker_id.clone().unwrap_or_else(default_worker_id),
            },
            metrics,
        ))
    }
}

/// Who holds a lease, for operators reading a record: the function and its execution
/// environment (log stream) inside Lambda, the host and process elsewhere.
fn default_worker_id() -> String {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    match (
        var("AWS_LAMBDA_FUNCTION_NAME"),
        var("AWS_LAMBDA_LOG_STREAM_NAME"),
    ) {
        (Some(function), Some(stream)) => format!("{function}/{stream}"),
        (Some(function), None) => format!("{function}/{}", std::process::id()),
        _ => format!(
            "{}/{}",
            var("HOSTNAME").unwrap_or_else(|| "worker".into()),
            std::process::id()
        ),
    }
}
