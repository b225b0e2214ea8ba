//! Dead letters, decoded and handled without loss.
//!
//! Reading never consumes: messages are received, then made visible again at once.
//! Redrive moves messages back to the jobs queue, either all at once through an SQS
//! message move task, or a selection in batches of ten (several at once), always sending
//! before deleting: a crash between the two leaves a duplicate (which the execution store
//! absorbs), never a gap.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::{
    ChangeMessageVisibilityBatchRequestEntry, DeleteMessageBatchRequestEntry, Message,
    MessageAttributeValue, MessageSystemAttributeName, SendMessageBatchRequestEntry,
};
use chrono::{DateTime, Utc};
use serde::Serialize;

use super::OpsError;
use crate::aws::{AwsResultExt, SdkConfig};
use crate::dead_letter::{DeadLetter, REDRIVE_POLICY};

/// How long a message stays hidden while the console holds it: it comes back by itself
/// if the console dies. `SCHEDKIT_DLQ_HOLD_SECONDS` changes it (default 60).
fn hold() -> Duration {
    let secs = std::env::var("SCHEDKIT_DLQ_HOLD_SECONDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60);
    Duration::from_secs(secs)
}

/// A dead letter the console holds: the letter (what schedkit wrote on it, read back),
/// and the DLQ's own facts about the message.
#[derive(Debug, Clone, Serialize)]
pub struct HeldLetter {
    /// The message's id on the DLQ; `--message-id` selects by it or by a prefix of it.
    pub message_id: String,
    /// The receipt of this read, valid only while the console holds the message.
    #[serde(skip)]
    pub receipt_handle: String,
    /// The letter: its body and why it was dead-lettered.
    #[serde(flatten)]
    pub letter: DeadLetter,
    /// When it reached the dead-letter queue.
    pub dead_lettered_at: DateTime<Utc>,
    /// Every message attribute as received, schedkit's and any others.
    #[serde(skip)]
    pub attributes: HashMap<String, MessageAttributeValue>,
}

/// A held letter reads as its letter (`held.job`, `held.reason`).
impl std::ops::Deref for HeldLetter {
    type Target = DeadLetter;
    fn deref(&self) -> &DeadLetter {
        &self.letter
    }
}

impl HeldLetter {
    fn from(m: Message) -> HeldLetter {
        let attributes = m.message_attributes.unwrap_or_default();
        let sent_ms: i64 = m
            .attributes
            .as_ref()
            .and_then(|a| a.get(&MessageSystemAttributeName::SentTimestamp))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let letter = DeadLetter::read(m.body.unwrap_or_default(), |name| {
            attributes.get(name).and_then(|v| v.string_value.clone())
        });
        HeldLetter {
            message_id: m.message_id.unwrap_or_default(),
            receipt_handle: m.receipt_handle.unwrap_or_default(),
            letter,
            dead_lettered_at: DateTime::from_timestamp_millis(sent_ms).unwrap_or_default(),
            attributes,
        }
    }

    /// How long it has been in the dead-letter queue.
    pub fn age(&self, now: DateTime<Utc>) -> Duration {
        (now - self.dead_lettered_at).to_std().unwrap_or_default()
    }
}

/// Which dead letters a command acts on. Empty criteria match everything.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// Letters of any of these jobs.
    pub jobs: Vec<String>,
    /// Letters with any of these execution keys.
    pub keys: Vec<String>,
    /// Letters whose DLQ message id starts with any of these (whole, or as `dlq list` shortens it).
    pub message_ids: Vec<String>,
    /// Letters with any of these reasons; `redrive-policy` selects those that carry none.
    pub reasons: Vec<String>,
    /// Only messages dead-lettered at least this long ago.
    pub older_than: Option<Duration>,
    /// Only messages dead-lettered at most this long ago.
    pub newer_than: Option<Duration>,
}

impl Selection {
    /// True when nothing narrows it, so a redrive can move everything with one message move task.
    pub fn is_everything(&self) -> bool {
        self.jobs.is_empty()
            && self.keys.is_empty()
            && self.message_ids.is_empty()
            && self.reasons.is_empty()
            && self.older_than.is_none()
            && self.newer_than.is_none()
    }

    /// Whether `d` meets every criterion; ages count back from `now`.
    pub fn matches(&self, d: &HeldLetter, now: DateTime<Utc>) -> bool {
        let any = |list: &[String], value: &Option<String>| {
            list.is_empty() || value.as_ref().is_some_and(|v| list.contains(v))
        };
        // A letter SQS's redrive policy moved carries no reason of ours; lists show it as
        // `redrive-policy`, so that selects it.
        let reason = Some(d.reason.clone().unwrap_or_else(|| REDRIVE_POLICY.into()));
        any(&self.jobs, &d.job)
            && any(&self.keys, &d.key)
            && any(&self.reasons, &reason)
            // Ids as `dlq list` prints them (a prefix) or whole.
            && (self.message_ids.is_empty()
                || self.message_ids.iter().any(|id| d.message_id.starts_with(id.as_str())))
            && self.older_than.is_none_or(|t| d.age(now) >= t)
            && self.newer_than.is_none_or(|t| d.age(now) <= t)
    }
}

/// One batch, long-polled: a short poll asks only some of SQS's servers and may answer
/// empty while messages remain, which would end a scan early. A long poll asks them all,
/// so an empty answer means no visible message is left.
async fn receive(sqs: &Client, queue_url: &str, hold: Duration) -> Result<Vec<Message>, OpsError> {
    Ok(sqs
        .receive_message()
        .queue_url(queue_url)
        .max_number_of_messages(10)
        .wait_time_seconds(1)
        .visibility_timeout(hold.as_secs() as i32)
        .message_attribute_names("All")
        .message_system_attribute_names(MessageSystemAttributeName::All)
        .send()
        .await
        .aws(format!("reading the dead-letter queue {queue_url}"))?
        .messages
        .unwrap_or_default())
}

/// Makes messages held by a scan (of the DLQ, or of the jobs queue) visible again.
pub(super) async fn release(
    sqs: &Client,
    queue_url: &str,
    receipts: &[String],
) -> Result<(), OpsError> {
    for chunk in receipts.chunks(10) {
        let entries = chunk
            .iter()
            .enumerate()
            .map(|(i, r)| {
                ChangeMessageVisibilityBatchRequestEntry::builder()
                    .id(i.to_string())
                    .receipt_handle(r)
                    .visibility_timeout(0)
                    .build()
            })
            .collect::<Result<Vec<_>, _>>()?;
        sqs.change_message_visibility_batch()
            .queue_url(queue_url)
            .set_entries(Some(entries))
            .send()
            .await
            .aws(format!("releasing the messages held from {queue_url}"))?;
    }
    Ok(())
}

/// Every dead letter, oldest first, left in the queue.
pub async fn peek(sdk: &SdkConfig, dlq_url: &str) -> Result<Vec<HeldLetter>, OpsError> {
    Ok(peek_at_most(sdk, dlq_url, usize::MAX).await?.0)
}

/// At most `most` dead letters (whichever the receives return first), oldest first, left
/// in the queue; and whether the scan stopped at `most` (more letters may wait). A page
/// that shows letters reads a bounded number: a DLQ of ten thousand letters of 256 KB each
/// would be gigabytes to hold for one look.
pub async fn peek_at_most(
    sdk: &SdkConfig,
    dlq_url: &str,
    most: usize,
) -> Result<(Vec<HeldLetter>, bool), OpsError> {
    let sqs = &Client::new(sdk);
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    let mut last_new = Instant::now();
    let mut again = Vec::new();
    loop {
        let batch = receive(sqs, dlq_url, hold()).await?;
        let received = batch.len();
        let before = out.len();
        for m in batch {
            let d = HeldLetter::from(m);
            if out.len() < most && seen.insert(d.message_id.clone()) {
                out.push(d);
            } else {
                // Seen before, or past `most`: released with the rest, unread.
                again.push(d.receipt_handle);
            }
        }
        if out.len() > before {
            last_new = Instant::now();
        }
        if out.len() >= most || scan_over(received, last_new.elapsed(), hold()) {
            break;
        }
    }
    let mut receipts: Vec<_> = out.iter().map(|d| d.receipt_handle.clone()).collect();
    receipts.extend(again);
    release(sqs, dlq_url, &receipts).await?;
    out.sort_by_key(|d| d.dead_lettered_at);
    let stopped = out.len() >= most;
    Ok((out, stopped))
}

/// What a redrive or purge did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Handled {
    /// Letters the selection matched.
    pub matched: usize,
    /// Matched letters sent back (redrive) or dropped (purge), then deleted from the DLQ.
    pub done: usize,
    /// Left alone: they did not match.
    pub skipped: usize,
}

/// How many receive-handle-delete lanes a selective redrive or purge runs at once: SQS
/// serves each batch call in milliseconds, so one lane spends most of its time waiting.
const LANES: usize = 8;

/// The most a `SendMessageBatch` may carry, all bodies together.
const BATCH_BYTES: usize = 256 * 1024;

/// Where a redrive sends letters back: the queue each came from, of the stage's two.
#[derive(Debug, Clone)]
pub struct Destinations {
    /// The jobs queue: every letter but the host jobs queue's.
    pub jobs: String,
    /// The host jobs queue, for the letters that name it as their source or are of a
    /// host job.
    pub host: Option<String>,
    /// The catalog's host jobs (`runs_on = "host"`): their letters go to the host jobs
    /// queue even without a source (SQS's own redrive policy moved them, after a host
    /// worker died).
    pub host_jobs: std::collections::BTreeSet<String>,
}

impl Destinations {
    /// One queue for every letter.
    pub fn one(queue_url: &str) -> Destinations {
        Destinations {
            jobs: queue_url.to_string(),
            host: None,
            host_jobs: Default::default(),
        }
    }

    /// The queue `letter` goes back to: the host jobs queue when it came from there (as the
    /// worker recorded on it) or is a host job's, else the jobs queue; the urgent queue
    /// beside that one when it came from there. A letter naming any other queue goes to the
    /// jobs queue, never to a queue a message chose.
    pub fn of(&self, letter: &HeldLetter) -> String {
        let back = self.jobs_queue_of(letter);
        let urgent = crate::queue::urgent::urgent_queue_of(back);
        if letter.letter.source_queue.as_deref() == Some(urgent.as_str()) {
            urgent
        } else {
            back.to_string()
        }
    }

    fn jobs_queue_of(&self, letter: &HeldLetter) -> &str {
        let Some(host) = &self.host else {
            return &self.jobs;
        };
        let source = letter.letter.source_queue.as_deref();
        let from_host = source == Some(host.as_str())
            || source == Some(crate::queue::urgent::urgent_queue_of(host).as_str());
        let host_job = letter
            .letter
            .job
            .as_ref()
            .is_some_and(|j| self.host_jobs.contains(j));
        if from_host || host_job {
            host
        } else {
            &self.jobs
        }
    }
}

/// Sends the selected dead letters back to the queue each came from ([`Destinations`]),
/// ten to a `SendMessageBatch`, then deletes the sent ones with one `DeleteMessageBatch`;
/// several batches at once. `progress(done_so_far)` is called after each batch.
pub async fn redrive_selected(
    sdk: &SdkConfig,
    dlq_url: &str,
    to: &Destinations,
    selection: &Selection,
    mut progress: impl FnMut(usize),
) -> Result<Handled, OpsError> {
    let sqs = &Client::new(sdk);
    each_selected(
        sqs,
        dlq_url,
        selection,
        |letters| send_back_each(sqs, to, letters),
        &mut progress,
    )
    .await
}

/// [`send_back`], each letter to its own queue.
async fn send_back_each(
    sqs: &Client,
    to: &Destinations,
    letters: Vec<HeldLetter>,
) -> (Vec<HeldLetter>, Option<OpsError>) {
    let mut by_queue: std::collections::BTreeMap<String, Vec<HeldLetter>> = Default::default();
    for letter in letters {
        by_queue.entry(to.of(&letter)).or_default().push(letter);
    }
    let (mut sent, mut failed) = (Vec::new(), None);
    for (queue_url, letters) in by_queue {
        let (more, error) = send_back(sqs, &queue_url, letters).await;
        sent.extend(more);
        failed = failed.or(error);
    }
    (sent, failed)
}

/// Deletes the selected dead letters, ten to a `DeleteMessageBatch`.
pub async fn purge_selected(
    sdk: &SdkConfig,
    dlq_url: &str,
    selection: &Selection,
    mut progress: impl FnMut(usize),
) -> Result<Handled, OpsError> {
    let sqs = &Client::new(sdk);
    each_selected(
        sqs,
        dlq_url,
        selection,
        |letters| async { (letters, None) },
        &mut progress,
    )
    .await
}

/// Sends `letters` to `queue_url` in batches within SQS's limits; the letters that were
/// sent, and what went wrong with the others.
async fn send_back(
    sqs: &Client,
    queue_url: &str,
    letters: Vec<HeldLetter>,
) -> (Vec<HeldLetter>, Option<OpsError>) {
    let mut sent = Vec::with_capacity(letters.len());
    let mut failures = Vec::new();
    let sizes: Vec<usize> = letters
        .iter()
        .map(|d| {
            let attributes: usize = d
                .attributes
                .iter()
                .map(|(k, v)| {
                    k.len()
                        + v.data_type().len()
                        + v.string_value().map_or(0, str::len)
                        + v.binary_value().map_or(0, |b| b.as_ref().len())
                })
                .sum();
            d.body.len() + attributes
        })
        .collect();
    let mut letters = letters.into_iter();
    for count in batch_sizes(&sizes, 10, BATCH_BYTES) {
        let batch: Vec<HeldLetter> = letters.by_ref().take(count).collect();
        let entries = batch
            .iter()
            .enumerate()
            .map(|(i, d)| {
                // With the letter's attributes: its reason marks the message as a redrive,
                // the one kind of message that runs a FAILED run again.
                SendMessageBatchRequestEntry::builder()
                    .id(i.to_string())
                    .message_body(&d.body)
                    .set_message_attributes(Some(d.attributes.clone()))
                    .build()
            })
            .collect::<Result<Vec<_>, _>>();
        let entries = match entries {
            Ok(e) => e,
            Err(e) => return (sent, Some(e.into())),
        };
        match sqs
            .send_message_batch()
            .queue_url(queue_url)
            .set_entries(Some(entries))
            .send()
            .await
            .aws(format!("sending dead letters back to {queue_url}"))
        {
            Ok(out) => {
                let failed: HashMap<String, String> = out
                    .failed
                    .into_iter()
                    .map(|f| (f.id, f.message.unwrap_or(f.code)))
                    .collect();
                for (i, d) in batch.into_iter().enumerate() {
                    match failed.get(&i.to_string()) {
                        Some(why) => failures.push(format!("{}: {why}", d.message_id)),
                        None => sent.push(d),
                    }
                }
            }
            Err(e) => return (sent, Some(e.into())),
        }
    }
    let failure = (!failures.is_empty()).then(|| {
        OpsError::Refused(format!(
            "{} dead letter(s) could not be sent back to {queue_url} and stay in the dead-letter queue: {}",
            failures.len(),
            failures.join("; ")
        ))
    });
    (sent, failure)
}

/// How many of `sizes` (in order) go into each batch: at most `most` entries and
/// `limit` bytes per batch (an entry larger than the limit goes alone, for SQS to judge).
fn batch_sizes(sizes: &[usize], most: usize, limit: usize) -> Vec<usize> {
    let mut out = Vec::new();
    let (mut count, mut bytes) = (0, 0);
    for &size in sizes {
        if count > 0 && (count == most || bytes + size > limit) {
            out.push(count);
            (count, bytes) = (0, 0);
        }
        count += 1;
        bytes += size;
    }
    if count > 0 {
        out.push(count);
    }
    out
}

/// What the lanes of [`each_selected`] share.
struct Scan {
    handled: Handled,
    /// Receipts of letters held and not handled: released at the end.
    held: Vec<String>,
    seen: HashSet<String>,
    /// When a lane last received a letter it had not seen.
    last_new: Instant,
}

/// Whether a scan of the DLQ is over after a receive of `received` letters, the last new
/// one `since_new` ago. Only an empty (long-polled) receive says no visible letter is left:
/// a batch of letters seen before (held earlier, back after their hold ran out while the
/// scan went on) says nothing of the letters not yet received. A scan that meets nothing
/// new for a whole hold ends too: by then every letter it holds came back once.
fn scan_over(received: usize, since_new: Duration, hold: Duration) -> bool {
    received == 0 || since_new > hold
}

/// Holds every message of the DLQ in turn ([`LANES`] receivers at once); hands each
/// received batch's selected letters to `handle`, which returns the letters it handled
/// (and what went wrong with the rest), deletes those, and at the end releases everything
/// else it held. Handling always comes before deleting: a crash between the two leaves a
/// duplicate, never a gap.
async fn each_selected<F, Fut>(
    sqs: &Client,
    dlq_url: &str,
    selection: &Selection,
    handle: F,
    progress: &mut impl FnMut(usize),
) -> Result<Handled, OpsError>
where
    F: Fn(Vec<HeldLetter>) -> Fut,
    Fut: std::future::Future<Output = (Vec<HeldLetter>, Option<OpsError>)>,
{
    let now = Utc::now();
    let scan = std::cell::RefCell::new(Scan {
        handled: Handled::default(),
        held: Vec::new(),
        seen: HashSet::new(),
        last_new: Instant::now(),
    });
    let progress = std::cell::RefCell::new(progress);
    let lane = || async {
        loop {
            let batch = receive(sqs, dlq_url, hold()).await?;
            let received = batch.len();
            let mut selected = Vec::new();
            let mut new = false;
            {
                let mut scan = scan.borrow_mut();
                for m in batch {
                    let d = HeldLetter::from(m);
                    if !scan.seen.insert(d.message_id.clone()) {
                        // Held by us earlier and back already: keep its new receipt to release.
                        scan.held.push(d.receipt_handle);
                        continue;
                    }
                    new = true;
                    if selection.matches(&d, now) {
                        scan.handled.matched += 1;
                        selected.push(d);
                    } else {
                        scan.handled.skipped += 1;
                        scan.held.push(d.receipt_handle);
                    }
                }
            }
            let since_new = {
                let mut scan = scan.borrow_mut();
                if new {
                    scan.last_new = Instant::now();
                }
                scan.last_new.elapsed()
            };
            if scan_over(received, since_new, hold()) {
                return Ok::<(), OpsError>(());
            }
            if selected.is_empty() {
                continue;
            }
            let (handled, failure) = handle(selected).await;
            let deleted = delete(sqs, dlq_url, &handled).await;
            let done = {
                let mut scan = scan.borrow_mut();
                scan.handled.done += deleted.as_ref().map_or(0, |n| *n);
                scan.handled.done
            };
            (progress.borrow_mut())(done);
            deleted?;
            if let Some(e) = failure {
                return Err(e);
            }
        }
    };
    let ran = futures::future::try_join_all((0..LANES).map(|_| lane())).await;
    let scan = scan.into_inner();
    let released = release(sqs, dlq_url, &scan.held).await;
    let done = |e: OpsError| {
        e.after(format!(
            "{} of {} selected letter(s) handled and removed from the dead-letter queue",
            scan.handled.done, scan.handled.matched
        ))
    };
    ran.map_err(done)?;
    released.map_err(done)?;
    Ok(scan.handled)
}

/// Deletes handled letters from the DLQ, ten to a request; how many were deleted, or
/// which were not (sent back already: a later redrive would send them again, and the
/// execution store would answer that copy as a duplicate).
async fn delete(sqs: &Client, dlq_url: &str, letters: &[HeldLetter]) -> Result<usize, OpsError> {
    let mut deleted = 0;
    let mut failures = Vec::new();
    for chunk in letters.chunks(10) {
        let entries = chunk
            .iter()
            .enumerate()
            .map(|(i, d)| {
                DeleteMessageBatchRequestEntry::builder()
                    .id(i.to_string())
                    .receipt_handle(&d.receipt_handle)
                    .build()
            })
            .collect::<Result<Vec<_>, _>>()?;
        let out = sqs
            .delete_message_batch()
            .queue_url(dlq_url)
            .set_entries(Some(entries))
            .send()
            .await
            .aws("deleting handled letters from the dead-letter queue")?;
        deleted += out.successful.len();
        for f in out.failed {
            let id = f.id.parse::<usize>().ok().and_then(|i| chunk.get(i));
            failures.push(format!(
                "{}: {}",
                id.map_or("?", |d| d.message_id.as_str()),
                f.message.unwrap_or(f.code)
            ));
        }
    }
    if failures.is_empty() {
        Ok(deleted)
    } else {
        Err(OpsError::Refused(format!(
            "{} dead letter(s) were handled but not deleted from the dead-letter queue (a later redrive sends them again, answered as duplicates): {}",
            failures.len(),
            failures.join("; ")
        )))
    }
}

/// A message move task's progress.
#[derive(Debug, Clone, Serialize)]
pub struct MoveProgress {
    /// SQS's task status: `RUNNING`, `CANCELLING`, `COMPLETED`, `CANCELLED` or `FAILED`.
    pub status: String,
    /// Messages moved so far, approximately, as SQS counts them.
    pub moved: i64,
    /// Messages the task set out to move; None while SQS does not say.
    pub to_move: Option<i64>,
}

/// Moves every dead letter to `destination_arn` with an SQS message move task, reporting
/// progress until the task ends.
pub async fn redrive_all(
    sdk: &SdkConfig,
    dlq_arn: &str,
    destination_arn: &str,
    mut progress: impl FnMut(&MoveProgress),
) -> Result<MoveProgress, OpsError> {
    let sqs = Client::new(sdk);
    let task = sqs
        .start_message_move_task()
        .source_arn(dlq_arn)
        .destination_arn(destination_arn)
        .send()
        .await
        .aws("starting the message move task")?
        .task_handle
        .unwrap_or_default();
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let tasks = sqs
            .list_message_move_tasks()
            .source_arn(dlq_arn)
            .send()
            .await
            .aws("reading the message move task")?
            .results
            .unwrap_or_default();
        let Some(t) = tasks
            .into_iter()
            .find(|t| t.task_handle.as_deref() == Some(task.as_str()) || t.task_handle.is_none())
        else {
            continue;
        };
        let p = MoveProgress {
            status: t.status.clone().unwrap_or_default(),
            moved: t.approximate_number_of_messages_moved,
            to_move: t.approximate_number_of_messages_to_move,
        };
        progress(&p);
        match p.status.as_str() {
            "RUNNING" | "CANCELLING" => continue,
            "COMPLETED" => return Ok(p),
            other => {
                return Err(OpsError::MoveTask {
                    status: other.to_string(),
                    reason: t.failure_reason.unwrap_or_default(),
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scan_ends_on_an_empty_receive_not_on_letters_seen_before() {
        let hold = Duration::from_secs(60);
        assert!(
            scan_over(0, Duration::ZERO, hold),
            "nothing visible is left"
        );
        assert!(
            !scan_over(10, Duration::from_secs(30), hold),
            "letters back after their hold say nothing of those not yet received"
        );
        assert!(
            scan_over(10, Duration::from_secs(61), hold),
            "a whole hold of nothing new: every held letter came back once"
        );
    }

    fn letter(job: &str, reason: &str, age_s: i64) -> HeldLetter {
        HeldLetter {
            message_id: format!("m-{job}"),
            receipt_handle: String::new(),
            letter: DeadLetter {
                reason: Some(reason.into()),
                job: Some(job.into()),
                ..DeadLetter::default()
            },
            dead_lettered_at: Utc::now() - chrono::Duration::seconds(age_s),
            attributes: HashMap::new(),
        }
    }

    #[test]
    fn a_letter_goes_back_to_the_host_queue_when_it_came_from_there_or_is_a_host_jobs() {
        let to = Destinations {
            jobs: "https://sqs/jobs".into(),
            host: Some("https://sqs/host-jobs".into()),
            host_jobs: ["nightly-etl".to_string()].into(),
        };
        let from = |job: &str, source: Option<&str>| {
            let mut l = letter(job, "permanent-error", 1);
            l.letter.source_queue = source.map(str::to_string);
            l
        };
        assert_eq!(
            to.of(&from("report", Some("https://sqs/host-jobs"))),
            "https://sqs/host-jobs"
        );
        // SQS's own redrive policy moved it (no source): its job says where it runs.
        assert_eq!(to.of(&from("nightly-etl", None)), "https://sqs/host-jobs");
        assert_eq!(
            to.of(&from("report", Some("https://sqs/jobs"))),
            "https://sqs/jobs"
        );
        // A source no queue of the stage has is not followed.
        assert_eq!(
            to.of(&from("report", Some("https://sqs/elsewhere"))),
            "https://sqs/jobs"
        );
        // A stage without a host jobs queue has one destination.
        let without = Destinations::one("https://sqs/jobs");
        assert_eq!(
            without.of(&from("nightly-etl", Some("https://sqs/host-jobs"))),
            "https://sqs/jobs"
        );
        // An urgent run's letter goes back to the urgent queue it came from.
        assert_eq!(
            to.of(&from("report", Some("https://sqs/jobs-urgent"))),
            "https://sqs/jobs-urgent"
        );
        assert_eq!(
            to.of(&from("report", Some("https://sqs/host-jobs-urgent"))),
            "https://sqs/host-jobs-urgent"
        );
        assert_eq!(
            to.of(&from("report", Some("https://sqs/elsewhere-urgent"))),
            "https://sqs/jobs"
        );
    }

    #[test]
    fn batches_hold_ten_letters_and_stay_within_the_byte_limit() {
        assert_eq!(batch_sizes(&[1; 25], 10, 100), vec![10, 10, 5]);
        assert_eq!(batch_sizes(&[40, 40, 40, 10], 10, 100), vec![2, 2]);
        // A letter over the limit goes alone: SQS says what is wrong with it.
        assert_eq!(batch_sizes(&[10, 500, 10], 10, 100), vec![1, 1, 1]);
        assert!(batch_sizes(&[], 10, 100).is_empty());
    }

    #[test]
    fn selections_combine_their_criteria() {
        let now = Utc::now();
        let d = letter("export", "attempts-exhausted", 3600);
        assert!(Selection::default().matches(&d, now));
        let by_job = Selection {
            jobs: vec!["export".into()],
            ..Default::default()
        };
        assert!(by_job.matches(&d, now));
        let other = Selection {
            jobs: vec!["report".into()],
            ..Default::default()
        };
        assert!(!other.matches(&d, now));
        let old = Selection {
            older_than: Some(Duration::from_secs(600)),
            ..by_job.clone()
        };
        assert!(old.matches(&d, now));
        let recent = Selection {
            newer_than: Some(Duration::from_secs(600)),
            ..by_job
        };
        assert!(!recent.matches(&d, now));
        let poison = Selection {
            reasons: vec!["poison".into()],
            ..Default::default()
        };
        assert!(!poison.matches(&d, now));
    }

    #[test]
    fn message_ids_match_as_listed_and_redrive_policy_letters_by_that_name() {
        let now = Utc::now();
        let mut d = letter("export", "poison", 10);
        d.message_id = "8f14e45f-ceea-4e7b-a2d6-3b0b5c1d2e3f".into();
        let listed = Selection {
            message_ids: vec!["8f14e45f".into()],
            ..Default::default()
        };
        assert!(listed.matches(&d, now));
        let whole = Selection {
            message_ids: vec![d.message_id.clone()],
            ..Default::default()
        };
        assert!(whole.matches(&d, now));
        let other = Selection {
            message_ids: vec!["8f14e45e".into()],
            ..Default::default()
        };
        assert!(!other.matches(&d, now));

        let by_policy = Selection {
            reasons: vec![REDRIVE_POLICY.into()],
            ..Default::default()
        };
        assert!(!by_policy.matches(&d, now));
        d.letter.reason = None;
        assert!(by_policy.matches(&d, now));
    }
}
