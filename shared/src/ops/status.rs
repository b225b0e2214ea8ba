//! What `schedkit status` shows: the queue, the DLQ, failing jobs, each job's last run.

use std::collections::BTreeMap;

use aws_sdk_cloudwatch::types::{Dimension, Statistic};
use aws_sdk_sqs::types::QueueAttributeName;
use chrono::Utc;
use serde::Serialize;

use super::OpsError;
use super::executions::{Filter, Records};
use super::stage::Stage;
use crate::accounting::ledger::{Finding, Kind, Ledger};
use crate::aws::{AwsError, AwsResultExt, SdkConfig};
use crate::catalog::Catalog;
use crate::store::Status;

/// A queue's approximate message counts, as SQS reports them.
#[derive(Debug, Clone, Serialize)]
pub struct QueueDepth {
    /// Messages waiting to be received.
    pub visible: u64,
    /// Messages received and not yet deleted or returned: being worked on.
    pub in_flight: u64,
    /// Messages sent with a delay that has not passed yet (`fire --in`).
    pub delayed: u64,
}

/// A job with runs that ended FAILED.
#[derive(Debug, Clone, Serialize)]
pub struct FailingJob {
    /// The job's name.
    pub job: String,
    /// Its records among the stage's 200 most recently updated FAILED ones.
    pub failed: usize,
    /// The error of its most recently updated FAILED record; empty if that has none.
    pub last_error: String,
}

/// A catalog job's newest run by scheduled time; every field but `job` is None when it has none.
#[derive(Debug, Clone, Serialize)]
pub struct LastRun {
    /// The catalog's name for the job.
    pub job: String,
    /// When that run was due, RFC 3339.
    pub scheduled_for: Option<String>,
    /// Where that run stands now.
    pub status: Option<Status>,
    /// Attempts claimed over the record's whole life, redrives included.
    pub attempt: Option<u32>,
    /// When the record last changed, RFC 3339 with milliseconds.
    pub updated_at: Option<String>,
}

/// Everything `schedkit status` shows for one stage.
#[derive(Debug, Clone, Serialize)]
pub struct StatusReport {
    /// The jobs queue's depth; a backlog that keeps growing means too few or failing workers.
    pub queue: QueueDepth,
    /// From CloudWatch (`ApproximateAgeOfOldestMessage`, last 5 minutes); None without data
    /// or when CloudWatch cannot be read (it is a hint, not worth failing the report for).
    pub oldest_message_age_seconds: Option<f64>,
    /// Messages in the DLQ, in any state: anything above 0 needs an operator.
    pub dlq_depth: u64,
    /// Jobs with FAILED records, by name.
    pub failing_jobs: Vec<FailingJob>,
    /// Every catalog job's last run, in the catalog's (name) order.
    pub jobs: Vec<LastRun>,
    /// Paused jobs, with who paused them, when and why (absent from JSON when none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub paused: Vec<crate::store::PauseRecord>,
    /// Chain runs PAUSED after a step failed for good, newest first: each waits for a
    /// fix and `chains rerun`.
    pub paused_chains: Vec<PausedChain>,
    /// Runs and chain runs cancelled in the last 24 hours, newest first, with who
    /// cancelled them and why (absent from JSON when none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cancelled: Vec<CancelledRun>,
    /// The catalog's limits: permits in use, a rate's next start, runs held back lately
    /// (absent from JSON when the catalog has none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub limits: Vec<super::limits::LimitUse>,
    /// What the accountant's checks found: firings missed, runs late (absent from JSON
    /// before the stage's first check).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accountant: Option<Accounted>,
}

/// The accountant's last word on a stage.
#[derive(Debug, Clone, Serialize)]
pub struct Accounted {
    /// When it last checked.
    pub checked_at: Option<chrono::DateTime<Utc>>,
    /// Firings with no run past their window and grace (listed for a day).
    pub missed: Vec<Finding>,
    /// Runs not DONE past their deadline (listed until DONE).
    pub late: Vec<Finding>,
}

impl Accounted {
    /// The ledger's findings, by kind.
    pub fn from_ledger(ledger: Ledger) -> Accounted {
        let (missed, late) = ledger
            .findings
            .into_iter()
            .partition(|f| f.kind == Kind::Missed);
        Accounted {
            checked_at: ledger.checked_to,
            missed,
            late,
        }
    }
}

/// The accountant's findings on the stage whose executions table is `table` (one read);
/// None before its first check.
pub async fn accounted(sdk: &SdkConfig, table: &str) -> Result<Option<Accounted>, OpsError> {
    crate::store::DynamoStore::new(aws_sdk_dynamodb::Client::new(sdk), table)
        .ledger()
        .await
        .map(|l| l.map(Accounted::from_ledger))
        .map_err(|e| {
            OpsError::Aws(AwsError {
                doing: "reading the accountant's findings".into(),
                answer: e.to_string(),
                code: None,
            })
        })
}

/// Messages on a queue: visible, in flight and delayed.
pub(crate) async fn queue_depth(
    sqs: &aws_sdk_sqs::Client,
    url: &str,
) -> Result<QueueDepth, OpsError> {
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

/// A run an operator cancelled.
#[derive(Debug, Clone, Serialize)]
pub struct CancelledRun {
    /// Its key.
    pub key: String,
    /// Its job (or chain).
    pub job: String,
    /// Who cancelled it, when and why.
    pub by: String,
    /// When.
    pub at: String,
    /// Why.
    pub reason: String,
}

/// A chain run that paused.
#[derive(Debug, Clone, Serialize)]
pub struct PausedChain {
    /// The chain key.
    pub key: String,
    /// The chain.
    pub chain: String,
    /// When it paused.
    pub at: String,
    /// Which steps failed, and why.
    pub failed: String,
}

/// Runs and chain runs cancelled in the last 24 hours, newest first (at most 50).
async fn recently_cancelled(records: &Records) -> Result<Vec<CancelledRun>, OpsError> {
    Ok(records
        .list(&Filter {
            status: Some(Status::Cancelled),
            since: Some(Utc::now() - chrono::Duration::hours(24)),
            limit: 50,
            ..Default::default()
        })
        .await?
        .0
        .into_iter()
        .map(|r| {
            let note = r.cancelled.unwrap_or_else(|| crate::store::OperatorNote {
                by: "?".into(),
                at: r.updated_at.clone(),
                reason: String::new(),
            });
            CancelledRun {
                key: r.execution_key,
                job: r.job,
                by: note.by,
                at: note.at,
                reason: note.reason,
            }
        })
        .collect())
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
    let paused_chains = records
        .list(&Filter {
            status: Some(Status::Paused),
            limit: 50,
            ..Default::default()
        })
        .await?
        .0
        .into_iter()
        .map(|r| PausedChain {
            at: r.finished_at.unwrap_or(r.updated_at),
            failed: r.last_error.unwrap_or_default(),
            key: r.execution_key,
            chain: r.job,
        })
        .collect();
    let cancelled = recently_cancelled(&records).await?;
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
    let paused = crate::store::Pauses::for_table(sdk, &target.table)
        .of(catalog.jobs.keys().map(String::as_str))
        .await
        .map_err(|e| {
            OpsError::Aws(AwsError {
                doing: "reading the pauses".into(),
                answer: e.to_string(),
                code: None,
            })
        })?
        .into_values()
        .collect();
    let limits = super::limits::gather(sdk, target, catalog).await?;
    let accountant = accounted(sdk, &target.table).await?;
    Ok(StatusReport {
        accountant,
        cancelled,
        limits,
        paused,
        paused_chains,
        queue,
        oldest_message_age_seconds: oldest,
        dlq_depth: dlq.visible + dlq.in_flight + dlq.delayed,
        failing_jobs: failing.into_values().collect(),
        jobs,
    })
}
