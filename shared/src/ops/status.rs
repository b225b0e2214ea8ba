//! What `schedkit status` shows: the queue, the DLQ, failing jobs, each job's last run.

use std::collections::BTreeMap;

use aws_sdk_cloudwatch::types::{Dimension, Statistic};
use aws_sdk_sqs::types::QueueAttributeName;
use chrono::Utc;
use serde::Serialize;

use super::OpsError;
use super::executions::{Filter, Records};
use super::stage::Stage;
use crate::Status;
use crate::aws::{AwsResultExt, SdkConfig};
use crate::catalog::Catalog;

#[derive(Debug, Clone, Serialize)]
pub struct QueueDepth {
    pub visible: u64,
    pub in_flight: u64,
    pub delayed: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct FailingJob {
    pub job: String,
    pub failed: usize,
    pub last_error: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct LastRun {
    pub job: String,
    pub scheduled_for: Option<String>,
    pub status: Option<Status>,
    pub attempt: Option<u32>,
    pub updated_at: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct StatusReport {
    pub queue: QueueDepth,
    /// From CloudWatch (`ApproximateAgeOfOldestMessage`, last 5 minutes); none without data.
    pub oldest_message_age_seconds: Option<f64>,
    pub dlq_depth: u64,
    pub failing_jobs: Vec<FailingJob>,
    pub jobs: Vec<LastRun>,
}

/// Messages on a queue: visible, in flight and delayed.
pub async fn queue_depth(sqs: &aws_sdk_sqs::Client, url: &str) -> Result<QueueDepth, OpsError> {
    let names = [
        QueueAttributeName::ApproximateNumberOfMessages,
        QueueAttributeName::ApproximateNumberOfMessagesNotVisible,
        QueueAttributeName::ApproximateNumberOfMessagesDelayed,
    ];
    let attrs = sqs
        .get_queue_attributes()
        .queue_url(url)
        .set_attribute_names(Some(names.to_vec()))
        .send()
        .await
        .aws(format!("reading queue {url}"))?
        .attributes
        .unwrap_or_default();
    let get = |n: &QueueAttributeName| attrs.get(n).and_then(|v| v.parse().ok()).unwrap_or(0);
    Ok(QueueDepth {
        visible: get(&names[0]),
        in_flight: get(&names[1]),
        delayed: get(&names[2]),
    })
}

async fn oldest_age(sdk: &SdkConfig, queue_name: &str) -> Option<f64> {
    let now = Utc::now();
    let cw = aws_sdk_cloudwatch::Client::new(sdk);
    let out = cw
        .get_metric_statistics()
        .namespace("AWS/SQS")
        .metric_name("ApproximateAgeOfOldestMessage")
        .dimensions(
            Dimension::builder()
                .name("QueueName")
                .value(queue_name)
                .build(),
        )
        .start_time(aws_sdk_cloudwatch::primitives::DateTime::from_secs(
            (now - chrono::Duration::minutes(5)).timestamp(),
        ))
        .end_time(aws_sdk_cloudwatch::primitives::DateTime::from_secs(
            now.timestamp(),
        ))
        .period(60)
        .statistics(Statistic::Maximum)
        .send()
        .await
        .ok()?;
    out.datapoints?
        .iter()
        .filter_map(|d| d.maximum)
        .reduce(f64::max)
}

/// The stage's status: one read of each queue, the failed records, each job's last run.
pub async fn gather(
    sdk: &SdkConfig,
    target: &Stage,
    catalog: &Catalog,
) -> Result<StatusReport, OpsError> {
    let sqs = aws_sdk_sqs::Client::new(sdk);
    let records = Records::new(sdk, &target.table);
    let queue = queue_depth(&sqs, &target.queue_url).await?;
    let dlq = queue_depth(&sqs, &target.dlq_url).await?;
    let queue_name = target.queue_url.rsplit('/').next().unwrap_or_default();
    let oldest = oldest_age(sdk, queue_name).await;

    let failed = records
        .list(&Filter {
            status: Some(Status::Failed),
            limit: 200,
            ..Default::default()
        })
        .await?
        .0;
    let mut failing: BTreeMap<String, FailingJob> = BTreeMap::new();
    for r in failed {
        let entry = failing.entry(r.job.clone()).or_insert_with(|| FailingJob {
            job: r.job.clone(),
            failed: 0,
            // Newest first: the first one seen carries the latest error.
            last_error: r.last_error.clone().unwrap_or_default(),
        });
        entry.failed += 1;
    }
    let mut jobs = Vec::new();
    for job in catalog.jobs.keys() {
        let last = records.last_of(job).await?;
        jobs.push(LastRun {
            job: job.clone(),
            scheduled_for: last.as_ref().map(|r| r.scheduled_for.clone()),
            status: last.as_ref().map(|r| r.status),
            attempt: last.as_ref().map(|r| r.attempt),
            updated_at: last.map(|r| r.updated_at),
        });
    }
    Ok(StatusReport {
        queue,
        oldest_message_age_seconds: oldest,
        dlq_depth: dlq.visible + dlq.in_flight + dlq.delayed,
        failing_jobs: failing.into_values().collect(),
        jobs,
    })
}
