//! What `schedkit status` shows: the queue, the DLQ, failing jobs, the alarms in ALARM and
//! the jobs they name, and each job's last run (a page of the catalog at a time).

use std::collections::BTreeMap;

use aws_sdk_cloudwatch::types::{Dimension, Statistic};
use aws_sdk_sqs::types::QueueAttributeName;
use chrono::Utc;
use serde::Serialize;

use futures::StreamExt;

use super::OpsError;
use super::alarms::StageAlarms;
use super::executions::{Filter, Records};
use super::paging::{Page, Paged};
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
    /// The urgent queue's beside it (runs of positive priority, `queue::urgent`): anything
    /// waiting there long means every worker is busy. None on a stage deployed before urgent
    /// queues (absent from JSON).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub urgent_queue: Option<QueueDepth>,
    /// From CloudWatch (`ApproximateAgeOfOldestMessage`, last 5 minutes); None without data
    /// or when CloudWatch cannot be read (it is a hint, not worth failing the report for).
    pub oldest_message_age_seconds: Option<f64>,
    /// Messages in the DLQ, in any state: anything above 0 needs an operator.
    pub dlq_depth: u64,
    /// Jobs with FAILED records, by name.
    pub failing_jobs: Vec<FailingJob>,
    /// The last run of each job on this page of the catalog, in its (name) order.
    pub jobs: Vec<LastRun>,
    /// Which page of the catalog's jobs `jobs` is.
    pub jobs_page: Paged,
    /// The stage's alarms in ALARM and the jobs each names; None when CloudWatch cannot be
    /// read (a hint, like the oldest message's age).
    pub alarms: Option<StageAlarms>,
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

/// The depth of the urgent queue beside the jobs queue `jobs_url`; None where the stage
/// has none (deployed before urgent queues, or the caller may not read it).
async fn urgent_depth(
    sqs: &aws_sdk_sqs::Client,
    jobs_url: &str,
) -> Result<Option<QueueDepth>, OpsError> {
    let url = crate::queue::urgent::urgent_queue_of(jobs_url);
    match queue_depth(sqs, &url).await {
        Ok(depth) => Ok(Some(depth)),
        Err(e) if crate::queue::urgent::absent(&e.to_string()) => Ok(None),
        Err(e) => Err(e),
    }
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

/// The stage's status, with the first page of the catalog's jobs.
pub async fn gather(
    sdk: &SdkConfig,
    target: &Stage,
    catalog: &Catalog,
) -> Result<StatusReport, OpsError> {
    gather_page(sdk, target, catalog, Page::first()).await
}

/// Jobs whose last run is read at once.
const QUERIES_AT_ONCE: usize = 8;

/// The stage's status: one read of each queue, the failed records, the alarms in ALARM,
/// and the last run of each job on `page` of the catalog (a query each, a few at once: a
/// page's requests, however many jobs the catalog has). The reads go side by side.
pub async fn gather_page(
    sdk: &SdkConfig,
    target: &Stage,
    catalog: &Catalog,
    page: Page,
) -> Result<StatusReport, OpsError> {
    let sqs = aws_sdk_sqs::Client::new(sdk);
    let records = Records::new(sdk, &target.table);
    let queue_name = target.queue_url.rsplit('/').next().unwrap_or_default();
    let (queue, dlq, oldest, failing_jobs, paused_chains, cancelled, jobs, paused) = tokio::try_join!(
        queue_depth(&sqs, &target.queue_url),
        queue_depth(&sqs, &target.dlq_url),
        async { Ok(oldest_age(sdk, queue_name).await) },
        failing_jobs(&records),
        paused_chains(&records),
        recently_cancelled(&records),
        last_runs(&records, catalog, page),
        paused_jobs(sdk, &target.table, catalog),
    )?;
    let (limits, accountant, urgent_queue, alarms) = tokio::try_join!(
        super::limits::gather(sdk, target, catalog),
        accounted(sdk, &target.table),
        urgent_depth(&sqs, &target.queue_url),
        async {
            Ok(
                match super::alarms::in_alarm(sdk, &target.stage, !catalog.chains.is_empty()).await
                {
                    Ok(a) => Some(a),
                    Err(e) => {
                        tracing::debug!(error = %e, "the stage's alarms could not be read");
                        None
                    }
                },
            )
        },
    )?;
    Ok(StatusReport {
        alarms,
        jobs_page: page.of(catalog.jobs.len()),
        accountant,
        cancelled,
        limits,
        paused,
        paused_chains,
        queue,
        urgent_queue,
        oldest_message_age_seconds: oldest,
        dlq_depth: dlq.visible + dlq.in_flight + dlq.delayed,
        failing_jobs,
        jobs,
    })
}

/// Jobs with FAILED records among the stage's 200 most recently updated ones.
async fn failing_jobs(records: &Records) -> Result<Vec<FailingJob>, OpsError> {
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
    Ok(failing.into_values().collect())
}

/// The 50 chain runs most recently PAUSED.
async fn paused_chains(records: &Records) -> Result<Vec<PausedChain>, OpsError> {
    Ok(records
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
        .collect())
}

/// The last run of each job on `page` of the catalog, a few queries at once.
async fn last_runs(
    records: &Records,
    catalog: &Catalog,
    page: Page,
) -> Result<Vec<LastRun>, OpsError> {
    let names: Vec<String> = catalog.jobs.keys().cloned().collect();
    let on_page = names[page.range(names.len())].to_vec();
    futures::stream::iter(on_page.into_iter().map(|job| {
        let records = records.clone();
        async move {
            let last = records.last_of(&job).await?;
            Ok::<_, OpsError>(LastRun {
                job,
                scheduled_for: last.as_ref().map(|r| r.scheduled_for.clone()),
                status: last.as_ref().map(|r| r.status),
                attempt: last.as_ref().map(|r| r.attempt),
                updated_at: last.map(|r| r.updated_at),
            })
        }
    }))
    .buffered(QUERIES_AT_ONCE)
    .collect::<Vec<_>>()
    .await
    .into_iter()
    .collect()
}

/// Every paused job, a hundred pauses read a request.
async fn paused_jobs(
    sdk: &SdkConfig,
    table: &str,
    catalog: &Catalog,
) -> Result<Vec<crate::store::PauseRecord>, OpsError> {
    Ok(crate::store::Pauses::for_table(sdk, table)
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
        .collect())
}
