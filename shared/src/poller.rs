//! The worker outside Lambda: long-poll the queue and feed the same batch adapter.
//!
//! Semantics match the Lambda event source mapping with partial batch responses: every
//! acknowledged message is deleted, every other one is left to come back (after the
//! visibility the adapter set, or the queue's default).

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::time::Duration;

use aws_lambda_events::event::sqs::SqsMessage;
use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::{
    DeleteMessageBatchRequestEntry, MessageSystemAttributeName, QueueAttributeName,
};

use crate::aws::describe;
use crate::batch::{MessageReport, Processor};
use crate::retry::MAX_VISIBILITY;

/// How to poll.
#[derive(Debug, Clone)]
pub struct PollOptions {
    /// Long-poll wait per receive, 0..=20 seconds.
    pub wait_seconds: i32,
    /// Messages per receive, 1..=10.
    pub max_messages: i32,
    /// Stop once the queue holds nothing at all: no visible, in-flight or delayed message.
    pub until_drained: bool,
    /// Keep every message's report in [`PollStats::reports`] (tests read them). Off by
    /// default: a worker polling for days would hold one per message it ever handled.
    pub keep_reports: bool,
}

impl Default for PollOptions {
    fn default() -> Self {
        PollOptions {
            wait_seconds: 20,
            max_messages: 10,
            until_drained: false,
            keep_reports: false,
        }
    }
}

/// What a polling run saw.
#[derive(Debug, Clone, Default)]
pub struct PollStats {
    /// Messages received over the whole run, redeliveries counted each time.
    pub received: u64,
    /// Messages deleted after an acknowledged outcome; a failed delete comes back as a duplicate.
    pub deleted: u64,
    /// Reports by outcome label (`succeeded`, `duplicate`, ...).
    pub outcomes: BTreeMap<&'static str, u64>,
    /// Every report, in the order processed, with [`PollOptions::keep_reports`].
    pub reports: Vec<MessageReport>,
}

/// Polls until `shutdown` resolves (or, with `until_drained`, until the queue is empty).
/// The batch in hand when shutdown comes is finished first.
pub async fn poll(
    processor: &Processor,
    sqs: &Client,
    options: &PollOptions,
    shutdown: impl Future<Output = ()>,
) -> PollStats {
    let queue_url = processor.config().queue_url.clone();
    // A received message stays hidden for the longest lease: a poller killed mid-batch has
    // its messages back after about that long (heartbeats extend it while a job runs).
    let hidden_for = processor.registry().longest_lease().map(|lease| {
        lease
            .as_secs_f64()
            .ceil()
            .clamp(1.0, MAX_VISIBILITY.as_secs() as f64) as i32
    });
    let mut stats = PollStats::default();
    tokio::pin!(shutdown);
    loop {
        let receive = sqs
            .receive_message()
            .queue_url(&queue_url)
            .max_number_of_messages(options.max_messages)
            .wait_time_seconds(options.wait_seconds)
            .set_visibility_timeout(hidden_for)
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .message_attribute_names("All")
            .send();
        let received = tokio::select! {
            _ = &mut shutdown => break,
            r = receive => r,
        };
        let messages = match received {
            Ok(out) => out.messages.unwrap_or_default(),
            Err(e) => {
                tracing::warn!(error = %describe(&e), "receive failed; retrying in 1 s");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        if messages.is_empty() {
            if options.until_drained && drained(sqs, &queue_url).await {
                break;
            }
            continue;
        }
        stats.received += messages.len() as u64;
        let batch: Vec<SqsMessage> = messages.into_iter().map(to_event_message).collect();
        let (reports, deleted) = process_and_ack(processor, sqs, &queue_url, batch).await;
        stats.deleted += deleted;
        for r in reports {
            *stats.outcomes.entry(r.outcome.label()).or_default() += 1;
            if options.keep_reports {
                stats.reports.push(r);
            }
        }
    }
    stats
}

/// How long a finished message waits for others of its batch to finish, so that one
/// `DeleteMessageBatch` takes most of a batch instead of a request per few messages.
const DELETE_GATHER: Duration = Duration::from_millis(20);

/// Processes a batch and deletes each acknowledged message soon after its outcome is
/// durable (with those that finish within [`DELETE_GATHER`] of it, in one request): a
/// poller that dies mid-batch leaves only its unfinished messages to come back, and those
/// of the last few milliseconds, which the store answers as duplicates.
async fn process_and_ack(
    processor: &Processor,
    sqs: &Client,
    queue_url: &str,
    batch: Vec<SqsMessage>,
) -> (Vec<MessageReport>, u64) {
    let (done, mut finished) = tokio::sync::mpsc::unbounded_channel();
    let process = async move {
        let reports = processor.process_each(batch, None, Some(&done), None).await;
        drop(done);
        reports
    };
    let ack = async {
        let (mut deleted, mut ready) = (0, Vec::new());
        while finished.recv_many(&mut ready, 10).await > 0 {
            let until = tokio::time::Instant::now() + DELETE_GATHER;
            while ready.len() < 10 {
                let room = 10 - ready.len();
                let more = finished.recv_many(&mut ready, room);
                match tokio::time::timeout_at(until, more).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
            }
            deleted += delete_acknowledged(sqs, queue_url, &ready).await;
            ready.clear();
        }
        deleted
    };
    tokio::join!(process, ack)
}

/// The SDK's message in the shape Lambda's event source mapping delivers.
pub fn to_event_message(m: aws_sdk_sqs::types::Message) -> SqsMessage {
    let mut out = SqsMessage::default();
    out.message_id = m.message_id;
    out.receipt_handle = m.receipt_handle;
    out.body = m.body;
    out.md5_of_body = m.md5_of_body;
    out.attributes = m
        .attributes
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k.as_str().to_string(), v))
        .collect::<HashMap<_, _>>();
    out.message_attributes = m
        .message_attributes
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, event_attribute(v)))
        .collect();
    out.event_source = Some("aws:sqs".into());
    out
}

/// The SDK's message attribute in the shape Lambda's event carries it (a redrive's mark
/// and a waiting run's count are read from these).
fn event_attribute(
    v: aws_sdk_sqs::types::MessageAttributeValue,
) -> aws_lambda_events::event::sqs::SqsMessageAttribute {
    let mut a = aws_lambda_events::event::sqs::SqsMessageAttribute::default();
    a.string_value = v.string_value;
    a.binary_value = v.binary_value.map(|b| {
        let mut data = aws_lambda_events::encodings::Base64Data::default();
        *data = b.into_inner();
        data
    });
    a.data_type = Some(v.data_type);
    a
}

/// Deletes the acknowledged messages of a batch (what Lambda does after a partial batch
/// response); returns how many were deleted.
pub async fn delete_acknowledged(sqs: &Client, queue_url: &str, reports: &[MessageReport]) -> u64 {
    let entries: Vec<_> = reports
        .iter()
        .enumerate()
        // A copy sent again to come back later was deleted when it was sent.
        .filter(|(_, r)| r.outcome.acknowledged() && !r.outcome.deleted())
        .filter_map(|(i, r)| {
            DeleteMessageBatchRequestEntry::builder()
                .id(i.to_string())
                .receipt_handle(r.receipt_handle.clone()?)
                .build()
                .ok()
        })
        .collect();
    if entries.is_empty() {
        return 0;
    }
    match sqs
        .delete_message_batch()
        .queue_url(queue_url)
        .set_entries(Some(entries))
        .send()
        .await
    {
        Ok(out) => {
            for f in &out.failed {
                // Harmless: the message comes back and is acknowledged as a duplicate.
                tracing::warn!(id = f.id, code = f.code, "delete failed");
            }
            out.successful.len() as u64
        }
        Err(e) => {
            tracing::warn!(error = %describe(&e), "delete batch failed; messages will come back as duplicates");
            0
        }
    }
}

/// True when the queue holds no message at all, counting in-flight and delayed ones.
pub async fn drained(sqs: &Client, queue_url: &str) -> bool {
    let counts = [
        QueueAttributeName::ApproximateNumberOfMessages,
        QueueAttributeName::ApproximateNumberOfMessagesNotVisible,
        QueueAttributeName::ApproximateNumberOfMessagesDelayed,
    ];
    let Ok(out) = sqs
        .get_queue_attributes()
        .queue_url(queue_url)
        .set_attribute_names(Some(counts.to_vec()))
        .send()
        .await
    else {
        return false;
    };
    let attrs = out.attributes.unwrap_or_default();
    counts.iter().all(|c| attrs.get(c).is_none_or(|v| v == "0"))
}
