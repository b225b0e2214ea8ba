//! Cancelling runs: one by its key, or a job's runs in bulk, by status. A run with a record
//! (REGISTERED, RETRYING, RUNNING, FAILED) is cancelled in its record; a run still in the
//! jobs queue (`queued`: a message no worker has claimed, so no record yet) is found by
//! receiving the queue, written CANCELLED from its message, and only then deleted, so that
//! a crash in between leaves a message the worker acknowledges as cancelled, never a run.
//!
//! The queue is received, not peeked (SQS has no peek): the messages of other jobs the
//! scan holds are made visible again as soon as it ends, and by themselves after
//! [`HOLD`] if the console dies. A message delayed (a run fired with `--in` under 15
//! minutes) is not visible to a scan until its delay ends.

use std::collections::HashSet;
use std::time::Duration;

use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::DeleteMessageBatchRequestEntry;
use chrono::Utc;

use super::OpsError;
pub use super::cancel_sweep::{BulkCancelled, Counts};
use super::executions::{Filter, Records};
use crate::aws::{AwsResultExt, SdkConfig};
use crate::catalog::Catalog;
use crate::envelope::{Envelope, format_instant};
use crate::key::{execution_key, payload_hash};
use crate::store::{
    CancelError, CancelRequest, Cancelled, ClaimRequest, DynamoStore, ExecutionRecord, Status,
};

/// How long the scan holds a received message before SQS shows it again by itself (and
/// a scan that met nothing new for that long ends). Each receive counts toward the
/// queue's `maxReceiveCount`, so the hold is long enough that a scan of a large queue
/// receives each message once; everything held is released when the scan ends.
pub const HOLD: Duration = Duration::from_secs(120);

/// What a bulk cancellation selects: a job's runs in these states. `queued` is not a
/// record's status: a message of the job waiting in the queue, no record yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    /// The job.
    pub job: String,
    /// Record statuses (REGISTERED, RETRYING, RUNNING, FAILED).
    pub statuses: Vec<Status>,
    /// Also the job's messages waiting in the queue.
    pub queued: bool,
}

/// Cancels runs of one stage.
pub struct Canceller {
    store: DynamoStore,
    records: Records,
    sqs: Client,
    queue_url: String,
}

impl Canceller {
    /// The canceller of the stage whose executions table is `table` and jobs queue
    /// `queue_url`.
    pub fn new(sdk: &SdkConfig, table: &str, queue_url: &str) -> Canceller {
        Canceller {
            store: DynamoStore::new(aws_sdk_dynamodb::Client::new(sdk), table),
            records: Records::new(sdk, table),
            sqs: Client::new(sdk),
            queue_url: queue_url.into(),
        }
    }

    /// Cancels the run `key`. A chain run, or a step of one, is refused: a cancelled step
    /// could only pause its chain for good (a rerun does not reopen it), so a chain is
    /// cancelled whole (`chains cancel`) and a failed step skipped (`chains skip`).
    pub async fn one(
        &self,
        key: &str,
        by: &str,
        reason: &str,
        catalog: &Catalog,
    ) -> Result<Cancelled, OpsError> {
        if let Some(r) = self.records.get(key).await?
            && let Some(why) = of_a_chain(&r, catalog)
        {
            return Err(OpsError::Refused(why));
        }
        let req = request(key, by, reason, vec![], None);
        self.store.cancel(&req).await.map_err(|e| match e {
            CancelError::NotFound { .. } => OpsError::Refused(format!(
                "no run has the key `{key}`: a run still in the queue has no record yet; cancel it with `--job JOB --status queued`"
            )),
            e => OpsError::Refused(e.to_string()),
        })
    }

    /// How many runs `selection` holds now; with `scan_queue`, the queue is scanned (each
    /// message received once, which counts toward its `maxReceiveCount`) and released.
    pub async fn preview(
        &self,
        selection: &Selection,
        catalog: &Catalog,
        scan_queue: bool,
    ) -> Result<Counts, OpsError> {
        let mut counts = Counts::default();
        for status in &selection.statuses {
            counts.by_state.insert(status.to_string(), 0);
        }
        for (_, status) in self.runs_of(selection, catalog).await? {
            *counts.by_state.entry(status.to_string()).or_default() += 1;
        }
        if selection.queued && scan_queue {
            let found = self.scan_all(selection, catalog, None).await?;
            counts.by_state.insert("queued".into(), found.total());
        }
        Ok(counts)
    }

    /// Cancels every run `selection` holds now; `progress` hears the count so far.
    pub async fn bulk(
        &self,
        selection: &Selection,
        catalog: &Catalog,
        by: &str,
        reason: &str,
        progress: &mut impl FnMut(usize),
    ) -> Result<BulkCancelled, OpsError> {
        let mut done = BulkCancelled::default();
        let so_far = |done: &BulkCancelled| {
            format!(
                "{} run(s) of `{}` cancelled ({})",
                done.keys.len(),
                selection.job,
                done.cancelled.describe()
            )
        };
        let statuses = &selection.statuses;
        let runs = self
            .runs_of(selection, catalog)
            .await
            .map_err(|e| e.after(so_far(&done)))?;
        super::cancel_sweep::sweep(
            runs.into_iter().map(|(key, _)| key),
            async |key| {
                let req = request(key, by, reason, statuses.clone(), None);
                self.store.cancel(&req).await
            },
            &mut done,
            progress,
        )
        .await
        .map_err(|e| e.after(so_far(&done)))?;
        if selection.queued {
            let act = Act { by, reason };
            let found = self.scan_all(selection, catalog, Some(&act)).await;
            match found {
                Ok(found) => {
                    let n = found.total();
                    *done.cancelled.by_state.entry("queued".into()).or_default() += n;
                    done.keys.extend(found.keys);
                    done.moved_on += found.moved_on;
                    progress(done.keys.len());
                }
                Err(e) => return Err(e.after(so_far(&done))),
            }
        }
        Ok(done)
    }

    /// Every run of the selection's job in one of its statuses, with its status, in one
    /// listing (see [`super::cancel_sweep`]); a chain's steps left out.
    async fn runs_of(
        &self,
        selection: &Selection,
        catalog: &Catalog,
    ) -> Result<Vec<(String, Status)>, OpsError> {
        let mut runs = Vec::new();
        if selection.statuses.is_empty() {
            return Ok(runs);
        }
        let mut page = None;
        loop {
            let filter = Filter {
                job: Some(selection.job.clone()),
                statuses: selection.statuses.clone(),
                limit: 200,
                page,
                ..Filter::default()
            };
            let (records, next) = self.records.list(&filter).await?;
            // A chain's steps are cancelled with their chain, never one by one.
            let own = records
                .into_iter()
                .filter(|r| step_of_chain(r, catalog).is_none());
            runs.extend(own.map(|r| (r.execution_key, r.status)));
            match next {
                Some(next) => page = Some(next),
                None => return Ok(runs),
            }
        }
    }

    /// [`Canceller::scan`] of the jobs queue, then of the urgent queue beside it (where
    /// the job's urgent runs wait, see [`crate::queue::urgent`]) if the stage has one.
    async fn scan_all(
        &self,
        selection: &Selection,
        catalog: &Catalog,
        act: Option<&Act<'_>>,
    ) -> Result<Found, OpsError> {
        let mut found = self.scan(&self.queue_url, selection, catalog, act).await?;
        let urgent = crate::queue::urgent::urgent_queue_of(&self.queue_url);
        match self.scan(&urgent, selection, catalog, act).await {
            Ok(more) => {
                found.keys.extend(more.keys);
                found.moved_on += more.moved_on;
            }
            Err(e) if crate::queue::urgent::absent(&format!("{e:?}")) => {}
            Err(e) => return Err(e),
        }
        Ok(found)
    }

    /// Receives the whole queue `queue_url` once, finding `selection.job`'s messages:
    /// counted, or (with `act`) cancelled in the store and then deleted. Everything else
    /// it held is made visible again.
    async fn scan(
        &self,
        queue_url: &str,
        selection: &Selection,
        catalog: &Catalog,
        act: Option<&Act<'_>>,
    ) -> Result<Found, OpsError> {
        let job = catalog.jobs.get(&selection.job).ok_or_else(|| {
            OpsError::Refused(format!("the catalog has no job `{}`", selection.job))
        })?;
        let mut held = Held::default();
        let mut seen = HashSet::new();
        let mut last_new = std::time::Instant::now();
        let scanned = loop {
            let batch = match self.receive(queue_url).await {
                Ok(batch) => batch,
                Err(e) => break Err(e),
            };
            // Long-polled, so empty means nothing visible is left; a scan that meets only
            // messages it held before for a whole hold has seen them all.
            if batch.is_empty() || last_new.elapsed() > HOLD {
                // Held by this receive: visible again at once.
                held.release
                    .extend(batch.into_iter().filter_map(|m| m.receipt_handle));
                break Ok(());
            }
            let mut delete = Vec::new();
            for m in batch {
                let (Some(id), Some(receipt)) = (m.message_id, m.receipt_handle) else {
                    continue;
                };
                if !seen.insert(id.clone()) {
                    held.release.push(receipt);
                    continue;
                }
                last_new = std::time::Instant::now();
                let body = m.body.unwrap_or_default();
                let Some((envelope, key)) = Envelope::parse(&body)
                    .ok()
                    .filter(|e| e.job == selection.job && e.chain.is_none())
                    .and_then(|e| {
                        let key = execution_key(&e, job.policy.key_template.as_ref()).ok()?;
                        Some((e, key))
                    })
                else {
                    held.release.push(receipt);
                    continue;
                };
                let Some(act) = act else {
                    held.found.keys.push(key);
                    held.release.push(receipt);
                    continue;
                };
                let arrived = ClaimRequest {
                    key: key.clone(),
                    job: envelope.job.clone(),
                    scheduled_for: format_instant(&envelope.scheduled_for),
                    payload_hash: payload_hash(&envelope),
                    input: body,
                    message_id: Some(id),
                    owner: String::new(),
                    now: Utc::now(),
                    lease: Duration::ZERO,
                    retention: job.policy.record_retention,
                    redrive: None,
                };
                let answer = self.cancel_arrived(arrived, act).await;
                if held.settle(key, receipt, answer, &mut delete).is_err() {
                    break;
                }
            }
            if let Some(e) = held.failed.take() {
                break Err(e);
            }
            if let Err(e) = self.delete(queue_url, &delete).await {
                break Err(e);
            }
        };
        let released = self.release(queue_url, &held.release).await;
        scanned?;
        released?;
        Ok(held.found)
    }

    /// Cancels the run a queued message stands for: its record written CANCELLED from the
    /// message, or, for a redriven dead letter (its record FAILED), in its record.
    async fn cancel_arrived(
        &self,
        arrived: ClaimRequest,
        act: &Act<'_>,
    ) -> Result<Cancelled, CancelError> {
        let (key, hash) = (arrived.key.clone(), arrived.payload_hash.clone());
        let req = request(&key, act.by, act.reason, vec![], Some(arrived));
        let answer = self.store.cancel(&req).await;
        match &answer {
            Err(CancelError::Refused { current })
                if current.status == Status::Failed && current.payload_hash == hash =>
            {
                let req = request(&key, act.by, act.reason, vec![Status::Failed], None);
                self.store.cancel(&req).await
            }
            _ => answer,
        }
    }

    async fn receive(&self, queue_url: &str) -> Result<Vec<aws_sdk_sqs::types::Message>, OpsError> {
        Ok(self
            .sqs
            .receive_message()
            .queue_url(queue_url)
            .max_number_of_messages(10)
            // Long-polled: an empty answer means no visible message is left.
            .wait_time_seconds(1)
            .visibility_timeout(HOLD.as_secs() as i32)
            .send()
            .await
            .aws(format!("reading the jobs queue {queue_url}"))?
            .messages
            .unwrap_or_default())
    }

    async fn release(&self, queue_url: &str, receipts: &[String]) -> Result<(), OpsError> {
        super::dlq::release(&self.sqs, queue_url, receipts).await
    }

    async fn delete(&self, queue_url: &str, receipts: &[String]) -> Result<(), OpsError> {
        for chunk in receipts.chunks(10) {
            let entries = chunk
                .iter()
                .enumerate()
                .map(|(i, r)| {
                    DeleteMessageBatchRequestEntry::builder()
                        .id(i.to_string())
                        .receipt_handle(r)
                        .build()
                })
                .collect::<Result<Vec<_>, _>>()?;
            // A delete that fails leaves a message the worker acknowledges as cancelled.
            self.sqs
                .delete_message_batch()
                .queue_url(queue_url)
                .set_entries(Some(entries))
                .send()
                .await
                .aws("deleting cancelled runs' messages from the jobs queue")?;
        }
        Ok(())
    }
}

/// Who cancels and why, for a scan that acts.
struct Act<'a> {
    by: &'a str,
    reason: &'a str,
}

/// What a scan holds: what it found, the messages to make visible again, and the store
/// error that stopped it.
#[derive(Default)]
struct Held {
    found: Found,
    release: Vec<String>,
    failed: Option<OpsError>,
}

impl Held {
    /// Where the message of `key` goes after its cancellation's `answer`: deleted (its
    /// run is CANCELLED now, or was), or released to its worker.
    fn settle(
        &mut self,
        key: String,
        receipt: String,
        answer: Result<Cancelled, CancelError>,
        delete: &mut Vec<String>,
    ) -> Result<(), ()> {
        match answer {
            Ok(_) => {
                self.found.keys.push(key);
                delete.push(receipt);
            }
            // Cancelled already (a copy of the same run): the worker would only
            // acknowledge it.
            Err(CancelError::Refused { current }) if current.status == Status::Cancelled => {
                delete.push(receipt);
            }
            // Claimed by a worker since (its record's own cancellation decides), or
            // another payload under the key: left to the worker.
            Err(CancelError::Refused { .. } | CancelError::NotFound { .. }) => {
                self.found.moved_on += 1;
                self.release.push(receipt);
            }
            Err(CancelError::Store(e)) => {
                self.release.push(receipt);
                self.failed = Some(OpsError::Refused(format!("cancelling `{key}`: {e}")));
                return Err(());
            }
        }
        Ok(())
    }
}

/// What a scan of the queue found.
#[derive(Debug, Default)]
struct Found {
    keys: Vec<String>,
    moved_on: usize,
}

impl Found {
    fn total(&self) -> usize {
        self.keys.len()
    }
}

/// The chain key a step's record belongs to, if any: as its message says (its chain), or,
/// when the record keeps only the start of a long message (4,096 bytes), as its key does
/// (`<chain key>#<step>` of a catalog chain's step: a chain's key space is its own, no
/// job's run is keyed there).
fn step_of_chain(r: &ExecutionRecord, catalog: &Catalog) -> Option<String> {
    // Whole, the message says (a job's run keyed there by an earlier version is no step).
    if let Some(envelope) = r
        .input
        .as_deref()
        .and_then(|input| Envelope::parse(input).ok())
    {
        return envelope.chain.map(|c| c.key);
    }
    let (chain_key, step) = r.execution_key.rsplit_once('#')?;
    let (name, _) = chain_key.split_once('#')?;
    let chain = catalog.chains.get(name)?;
    let is_step = chain
        .stages
        .iter()
        .flat_map(|s| &s.steps)
        .any(|s| s.name == step);
    is_step.then(|| chain_key.to_string())
}

/// Why `r` is not cancelled on its own: a chain run, or a chain's step.
fn of_a_chain(r: &ExecutionRecord, catalog: &Catalog) -> Option<String> {
    let key = &r.execution_key;
    if catalog.chains.contains_key(&r.job) {
        return Some(format!(
            "`{key}` is a run of chain `{}`: cancel it with `schedkit chains cancel {key}`",
            r.job
        ));
    }
    step_of_chain(r, catalog).map(|chain| {
        format!(
            "`{key}` is a step of chain run `{chain}`: a step is not cancelled alone (its chain would pause on it for good); cancel the chain (`schedkit chains cancel {chain}`), or, once the step has failed, skip it (`schedkit chains skip {chain} STEP`)"
        )
    })
}

fn request(
    key: &str,
    by: &str,
    reason: &str,
    only: Vec<Status>,
    arrived: Option<ClaimRequest>,
) -> CancelRequest {
    CancelRequest {
        key: key.into(),
        by: by.into(),
        reason: reason.into(),
        now: Utc::now(),
        only,
        arrived,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CATALOG: &str = r#"
[jobs.close-books]
owner = "finance"
[chains.month-end]
owner = "finance"
stages = ["close-books"]
"#;

    /// A step whose message was longer than the 4,096 bytes its record keeps (a chain
    /// payload of a few KB, its task token): its record's input no longer parses, and the
    /// step was cancelled alone (its chain then paused on it for good). Its key says it is
    /// a step.
    #[test]
    fn a_step_whose_record_keeps_only_the_start_of_its_message_is_a_step() {
        let catalog = Catalog::parse(CATALOG, "c.toml").unwrap();
        let chain_key = "month-end#2026-11-30T06:00:00Z";
        let key = format!("{chain_key}#close-books");
        let at = "2026-11-30T06:00:00Z".parse().unwrap();
        let mut r = crate::accounting::run_of(&key, "close-books", at);
        let message = serde_json::json!({
            "job": "close-books",
            "scheduled_for": "2026-11-30T06:00:00Z",
            "key": key,
            "payload": {"notes": "x".repeat(5_000)},
            "chain": {"name": "month-end", "key": chain_key, "step": "close-books", "task_token": "t"},
        });
        r.input = Some(crate::store::cap_snapshot(&message.to_string()));
        assert!(Envelope::parse(r.input.as_deref().unwrap()).is_err(), "cut");
        assert_eq!(step_of_chain(&r, &catalog).as_deref(), Some(chain_key));
        assert!(of_a_chain(&r, &catalog).is_some_and(|why| why.contains("is a step of chain run")));
        // A job's own run is not a step, whatever its input.
        let own = crate::accounting::run_of("close-books#2026-11-30T06:00:00Z", "close-books", at);
        assert_eq!(step_of_chain(&own, &catalog), None);
    }
}
